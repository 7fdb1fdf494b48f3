/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena fast allocator: per-CPU heaps of size-class spans, mimalloc-style free-list
 * sharding, callable from every program type on 6.12 (tc, xdp, fentry/tp_btf, struct_ops,
 * syscall, ...). It is what arena_malloc() and arena_free() use.
 *
 *   arena_malloc(size)       1 .. HEAP_MEDIUM_MAX bytes from the CPU's heap, larger sizes
 *                            (up to BUDDY_MAX_SIZE) from the default buddy allocator;
 *                            16-byte aligned. NULL (and a log line) on failure.
 *   arena_free(ptr)          0; NULL is a no-op; -EINVAL (and a log line) for a double
 *                            free, an interior, foreign or never-allocated pointer.
 *   arena_calloc(n, size), arena_memset(p, c, n) as before.
 *   arena_malloc_sleepable(size)  sleepable programs: refills the reserve and retries
 *                            where arena_malloc would fail for want of a span.
 *
 * Fast paths take no lock, run no loop and never call a page kfunc: malloc pops the
 * CPU's current span of the size class (or carves the next never-used object), free
 * pushes onto the span's local list when the span belongs to the freeing CPU's heap.
 * Both are inlined into the caller (see arena_malloc below); the rest is the library's.
 * A free from any other heap pushes onto the span's remote list with compare-and-swap;
 * the owner takes that list whole with one exchange when its local list runs dry (a list
 * only ever taken whole has no ABA problem). The remote list head packs the object
 * count, so the owner knows exactly how many objects came back. Compare-and-swap loops
 * retry for the whole may_goto budget; a remote free that still cannot get through
 * waits on the freeing heap's parked list for its next remote free: nothing is lost.
 *
 * Reentrancy: a heap is used while marked busy: the inlined fast paths take level 0 with
 * preemption disabled, the slow paths (global calls, which 6.12 forbids with preemption
 * disabled) claim a level by compare-and-swap and run preemptible. A BPF program that
 * interrupts or preempts another on the same CPU (an irq or NMI program, say) finds the
 * heap busy and uses the CPU's next heap level (HEAP_LEVELS per CPU); frees across levels
 * are remote frees. With every level busy, malloc fails cleanly and frees stay remote.
 *
 * Memory: a span is a 128 KiB slot of the heap window; small classes (<= HEAP_SMALL_MAX)
 * map 64 KiB of it, medium ones 128 KiB. Medium classes are 10 KiB and whole pages from
 * 12 KiB to 64 KiB; where a class's objects leave pages of the slot unused (two 44 KiB
 * objects use 22 of 32 pages), maintenance gives those pages back once the span is in
 * use ("trimmed"), and a trimmed span that empties goes back to the kernel whole.
 * Page kfuncs are sleepable-only on 6.12, so spans
 * come from per-heap reserves that sleepable code fills ahead of demand:
 *   - arena_heap_refill (SEC("syscall"), struct arena_heap_refill_args) creates the heaps,
 *     fills every reserve to its target and arms a 5 ms bpf_timer that starts a bpf_wq
 *     whenever a heap asks for more or a spare is due to go back;
 *   - arena_heap_maintain() is the same work as a function, for sleepable programs;
 *   - arena_heap_reserve(size, count) makes room ahead of a bulk build (sleepable).
 * A malloc that finds its reserve empty takes spans from the pool, else returns NULL and
 * counts the shortfall. A span whose objects are all free goes back to the heap's
 * reserve; beyond the high-water mark (target x high_water), to the pool. Memory goes
 * back to the kernel only after the purge delay (HEAP_PURGE_DELAY_MS): a pool span once
 * due, a reserve's spans beyond its target once the heap has taken none for that long,
 * and never in a maintenance pass that maps: an idle pass maps and unmaps nothing, and a
 * steady workload none after its warm-up. A listed span that comes back empty through
 * remote frees is retired by arena_heap_collect_cpu() (any program; SEC("syscall")
 * arena_heap_collect for user space: the heaps of the CPU it runs on), and until then
 * is simply reused when it becomes current; a current span stays current, empty or not.
 * (The state machines: include/libarena/alloc_types.h.)
 *
 * Double frees are caught while the object is still free (a tag in its third 32-bit word);
 * two CPUs freeing the same object at the same moment are not. kprobe, tracepoint and
 * perf_event programs can use the allocator: it touches no map but the arena.
 */
#ifndef __LIBARENA_HEAP_H
#define __LIBARENA_HEAP_H

#include <libarena/base.h>
#include <libarena/alloc_types.h>
#include <libarena/log.h>
#include <libarena/buddy.h>
#include <libarena/internal/heap.h>

/* Reserve defaults, in spans per heap and kind (arena_heap_refill_args overrides). */
#define HEAP_RESERVE_SMALL	4
#define HEAP_RESERVE_MEDIUM	2
#define HEAP_RESERVE_NESTED	1	/* nesting levels, once they have been used */
#define HEAP_HIGH_WATER		4	/* x the target: beyond it, to the pool */
#define HEAP_POLL_NS		5000000	/* the maintenance timer's period */
/* Longest wait for a walk that holds the pool on another CPU (a pass takes ~50 us). */
#define HEAP_POOL_WAIT_NS	200000
/* Longest wait of a maintenance pass for one under way elsewhere, before it runs too. */
#define HEAP_MAINTAIN_WAIT_NS	50000000
/*
 * How long a spare must stay unused before its pages go back to the kernel: a span in
 * the pool since its release, or a reserve's spans beyond the target while its heap took
 * none. 100 ms is twenty maintenance periods and well beyond a scheduler's tick-driven
 * churn (1-10 ms), so a workload that comes back reuses its pages instead of paying a
 * map and an unmap (~0.1-5 ms each under TCG) per span; yet memory at rest goes back
 * within a moment a person would notice. arena_heap_refill_args.purge_delay_ms sets it.
 */
#define HEAP_PURGE_DELAY_MS	100
/*
 * Spans per kind a quiet heap keeps (quiet: it took none for the purge delay), when set
 * lower than the target (arena_heap_refill_args.reserve_rest). 0, the default, keeps the
 * targets: a burst after an idle spell finds them there. A rested heap's next span
 * brings its target back (the background refill, within a timer period or two), so a
 * burst right after rest may meet a shortfall: a choice for memory-tight users.
 */
#define HEAP_RESERVE_REST	0

int arena_heap_maintain(void);
int arena_heap_span_unmap(u32 s, u32 pages);	/* maintenance's, sleepable */
/*
 * Sleepable programs only: make room on this CPU for count objects of size bytes, so a
 * bulk build (a million inserts into a tree from one SEC("syscall") program) needs no
 * maintenance call on the way. Spans come from the pool first, then the kernel; what the
 * build leaves unused goes back after the purge delay. 0, or -errno with a log line.
 */
int arena_heap_reserve(u64 size, u64 count);
/* The same for sizes up to HEAP_MEDIUM_MAX: less for the verifier (no large sizes). */
int arena_heap_reserve_small(u64 size, u64 count);
int arena_heap_collect_cpu(void);
/*
 * Objects arena_malloc handed out that arena_free has not taken back, over every heap
 * and the large sizes: a leak check. Exact while no other CPU allocates or frees.
 */
s64 arena_heap_outstanding(void);
u64 arena_heap_global_addr(void);
u32 arena_heap_class(u64 size);
u32 arena_heap_class_size(u32 cls);

/*
 * What arena_malloc() and arena_free() take of the verifier's budget of a call chain,
 * counted as base.h says: at most ARENA_ALLOC_FRAMES frames below the caller and
 * ARENA_ALLOC_STACK bytes (their slow paths, the large sizes' included: a global call
 * whose steps call nothing of ours), so that they can be called from the sixth frame.
 * The inlined fast paths take none. Every other call, arena_calloc() among them, keeps
 * to ARENA_CALL_FRAMES and ARENA_CALL_STACK. The stack is 128 bytes with clang 22 and
 * 160 with clang 19, whose code spills more: the figure holds for both.
 */
#define ARENA_ALLOC_FRAMES_PLAIN	2
#define ARENA_ALLOC_STACK_PLAIN		160
#define ARENA_ALLOC_FRAMES_SANITIZER	2
#define ARENA_ALLOC_STACK_SANITIZER	144
#if defined(LIBARENA_ASAN)
#define ARENA_ALLOC_FRAMES	ARENA_ALLOC_FRAMES_SANITIZER
#define ARENA_ALLOC_STACK	ARENA_ALLOC_STACK_SANITIZER
#else
#define ARENA_ALLOC_FRAMES	ARENA_ALLOC_FRAMES_PLAIN
#define ARENA_ALLOC_STACK	ARENA_ALLOC_STACK_PLAIN
#endif

/* The default allocator of arena_malloc: global functions returning scalars only. */
u64 arena_malloc_addr(u64 size);
/* arena_malloc_addr() for sizes the heaps serve, 1 .. HEAP_MEDIUM_MAX (see calls.c). */
u64 arena_malloc_small_addr(u64 size);
u64 arena_calloc_addr(u64 n, u64 size);
int arena_free_slow(void __arena *ptr __arg_arena);
/* Free what the sanitizer's quarantine holds back now (0 in the plain build): how many. */
int arena_quarantine_flush(void);
int arena_memset(void __arena *ptr __arg_arena, int c, u64 n);

/* Sleepable programs: refill and retry where arena_malloc would return NULL. */
u64 arena_malloc_sleepable_addr(u64 size);

static __always_inline void __arena *arena_malloc_sleepable(size_t size)
{
	return (void __arena *)arena_malloc_sleepable_addr(size);
}

static __always_inline void __arena *arena_calloc(size_t n, size_t size)
{
	return (void __arena *)arena_calloc_addr(n, size);
}

/*
 * arena_malloc() and arena_free() without their inlined fast paths: one call each. The
 * same allocator and results, a little slower per call, and far less for the verifier
 * to walk: for the paths that allocate seldom (set-up, growth, teardown), and for loops,
 * where the verifier walks an inlined fast path again each round until its states match.
 */
static __always_inline void __arena *arena_malloc_call(size_t size)
{
#if defined(__BPF__) && !defined(LIBARENA_ASAN)
	/* A size known to be the heaps' (a constant, mostly): the heaps' call alone. */
	if (__builtin_constant_p(size) && size && size <= HEAP_MEDIUM_MAX)
		return (void __arena *)arena_malloc_small_addr(size);
#endif
	return (void __arena *)arena_malloc_addr(size);
}

static __always_inline int arena_free_call(void __arena *ptr)
{
	return arena_free_slow(ptr);
}

#if defined(__BPF__) && !defined(LIBARENA_ASAN)
/*
 * arena_malloc() and arena_free() are inlined into the caller. A BPF-to-BPF call costs
 * about as much as the whole fast path (docs/heap.md has the figures), so the common
 * case runs here: the CPU's level-0 heap, its current span of the
 * class, its local list. Everything else goes to the library's global functions: an
 * empty span, a free that empties a listed span or unparks a full one, a free into
 * another heap's span, a busy level 0 (a nested program), and every bad pointer, which
 * the library checks again and reports. Costs no call frame on the fast path and one
 * (plus the library's own) on the slow one. The sanitizer build calls the library always.
 */
/*
 * A conditional branch costs more than the arithmetic around it: the tests are folded
 * into masks where they can be. barrier_var hides what clang knows about a value, so
 * it cannot turn the arithmetic back into compares and branches (BPF has no setcc).
 */
static __always_inline void __arena *arena_malloc(size_t size)
{
	u64 addr, i;
	u32 cls;

	if (size - 1 < 128) {
		cls = (size - 1) >> 4;
	} else if (size - 1 < 1024) {
		i = (size + 15) >> 4;
		barrier_var(i);
		cls = __heap_class_by_16[i & 127];
	} else if (size - 1 < HEAP_MEDIUM_MAX) {
		cls = __heap_class(size);
	} else {
		return (void __arena *)arena_malloc_addr(size);
	}
	addr = __heap_malloc_fast(cls);
	if (!addr)
		addr = arena_malloc_small_addr(size);
	return (void __arena *)addr;
}

/* A heap-window object onto its span's local list (__heap_free_fast), else the library. */
static __always_inline int arena_free(void __arena *ptr)
{
	u64 obj = (u64)ptr, hi = obj >> 32;
	u32 s;

	s = ((u32)obj - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
	barrier_var(hi);
	/* NULL, the large sizes, foreign pointers: not in the heap window. */
	if ((hi ^ (ARENA_USER_BASE >> 32)) | (s & ~(HEAP_NR_SPANS - 1)))
		return arena_free_slow(ptr);
	return __heap_free_fast(obj, s) ? 0 : arena_free_slow(ptr);
}
#else
static __always_inline void __arena *arena_malloc(size_t size)
{
	return (void __arena *)arena_malloc_addr(size);
}

static __always_inline int arena_free(void __arena *ptr)
{
	return arena_free_slow(ptr);
}
#endif

#endif /* __LIBARENA_HEAP_H */
