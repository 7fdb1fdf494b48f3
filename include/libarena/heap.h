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
 * Reentrancy: a heap is used with preemption disabled, and marked busy meanwhile. A BPF
 * program that interrupts another on the same CPU (an irq or NMI program, say) finds the
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
 * steady workload none after its warm-up. Spans that come back empty through remote
 * frees are noticed when the owner next looks at them, or by arena_heap_collect_cpu()
 * (any program; SEC("syscall") arena_heap_collect for user space): the heaps of the CPU
 * it runs on.
 *
 * Double frees are caught while the object is still free (a tag in its second word);
 * two CPUs freeing the same object at the same moment are not. kprobe, tracepoint and
 * perf_event programs can use the allocator: it touches no map but the arena.
 */
#ifndef __LIBARENA_HEAP_H
#define __LIBARENA_HEAP_H

#include <libarena/common.h>

#define HEAP_SPAN_SHIFT		17			/* 128 KiB of address per span */
#define HEAP_SPAN_SIZE		(1u << HEAP_SPAN_SHIFT)
#define HEAP_SMALL_SPAN		(64u << 10)		/* mapped for small classes */
#define HEAP_MEDIUM_SPAN	HEAP_SPAN_SIZE		/* mapped for medium classes */
/* Bytes mapped for a span of a kind (0 small, 1 medium). */
#define HEAP_KIND_SPAN(kind)	((kind) ? HEAP_MEDIUM_SPAN : HEAP_SMALL_SPAN)
#define HEAP_SMALL_MAX		8192
#define HEAP_MEDIUM_MAX		65536
#define HEAP_NR_SMALL		32	/* 16..128 by 16, then 4 per power of two */
#define HEAP_NR_CLASSES		47	/* medium: 10 KiB, then 3 .. 16 pages */
#define HEAP_KINDS		2	/* small, medium */
#define HEAP_LEVELS		3	/* per CPU: task, and two nesting levels */
#define HEAP_MAX_CPUS		256
#define HEAP_MAX_HEAPS		(HEAP_MAX_CPUS * HEAP_LEVELS)

/* Arena offsets the allocator owns: spans, then descriptors and heaps after buddy's. */
#define HEAP_WINDOW_START	0x40000000u
#define HEAP_NR_SPANS		8192	/* a power of two */
#define HEAP_WINDOW_END		(HEAP_WINDOW_START + HEAP_NR_SPANS * HEAP_SPAN_SIZE)
#define HEAP_DESC_START		0xc4000000u
#define HEAP_DESC_END		(HEAP_DESC_START + HEAP_NR_SPANS * 64)
#define HEAP_HEAPS_START	HEAP_DESC_END
#define HEAP_HEAP_SIZE		1024
#define HEAP_HEAPS_END		(HEAP_HEAPS_START + HEAP_MAX_HEAPS * HEAP_HEAP_SIZE)

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

#define HEAP_MAGIC		0x48656170u
#define HEAP_SPAN_MAGIC		0x5370616eu
#define HEAP_GLOBAL_MAGIC	0x476c6f62u

/* Span states. */
#define HEAP_SPAN_RESERVE	1	/* mapped, in a reserve */
#define HEAP_SPAN_ACTIVE	2	/* holds objects of one class for its owner */
#define HEAP_SPAN_RELEASE	3	/* in the pool: reused, or given back once due */

/* Trimming a medium span's unused pages (arena_heap_span.trim). */
#define HEAP_TRIM_NONE		0	/* every page of the kind mapped, not queued */
#define HEAP_TRIM_PENDING	1	/* in use, queued for maintenance to trim */
#define HEAP_TRIM_CANCELLED	2	/* still queued, but emptied before its trim */
#define HEAP_TRIM_BUSY		3	/* maintenance is freeing the unused pages */
#define HEAP_TRIM_DONE		4	/* only the pages its objects use are mapped */

/* The remote list word: head offset | count << 32 | HEAP_REMOTE_FULL. */
#define HEAP_REMOTE_FULL	(1ull << 63)
#define HEAP_REMOTE_COUNT	0x7fffffffull

/* One per span slot, in the descriptor window (64 bytes). */
struct arena_heap_span {
	u64 remote;		/* frees from other heaps, see above */
	u32 local;		/* owner's free list: arena offset of the first object */
	u32 used;		/* objects out, as the owner counts them */
	u32 bump;		/* objects carved so far; in the pool: since when (ms clock) */
	u32 capacity;		/* objects the span holds */
	u32 size;		/* object size */
	u8 cls;
	u8 kind;
	u8 state;
	u8 listed;		/* on the owner's partial list */
	u32 owner;		/* heap id + 1 while HEAP_SPAN_ACTIVE, else 0 */
	u32 next, prev;		/* owner's lists (span index + 1) */
	u32 link;		/* lock-free stacks: revived, the pool */
	u32 magic;		/* HEAP_SPAN_MAGIC while mapped */
	u32 trim;		/* HEAP_TRIM_* */
	u32 trim_link;		/* the trim stack */
	u32 recip;		/* span_recip(size): object index without a division */
};

/*
 * Object index = ((offset / 16) * recip) >> HEAP_RECIP_SHIFT, exact while
 * offset / 16 * size / 16 < 2^31 (offsets < 128 KiB and sizes <= 64 KiB: at most 2^25).
 */
#define HEAP_RECIP_SHIFT	31

static __always_inline u32 span_recip(u32 size)
{
	u32 d = size >> 4;

	return d ? ((1u << HEAP_RECIP_SHIFT) + d - 1) / d : 0;
}

/* Counters of one heap, written only by the heap's user (sum them for the totals). */
struct arena_heap_stats {
	u64 allocs;
	u64 frees;		/* frees of objects of this heap's spans, by this heap */
	u64 remote_frees;	/* frees by this heap into other heaps' spans */
	u64 shortfalls;		/* NULL for want of a span: the reserve was empty */
	u64 spans_taken;	/* from the reserve */
	u64 spans_emptied;	/* back to the reserve */
	u64 spans_released;	/* beyond the high-water mark, for the kernel */
	u64 revived;		/* full spans a remote free made usable again */
	u64 nested;		/* calls that found a lower level busy */
	u64 parked;		/* remote frees parked (then retried) instead of given up */
};

/* One per CPU and nesting level, in the heaps window. */
struct arena_heap {
	u32 magic;
	u32 busy;		/* in use on this CPU right now */
	u32 id;			/* cpu * HEAP_LEVELS + level */
	u32 want;		/* the reserve ran low: maintenance should refill it */
	u32 used;		/* ever used: nesting levels get a reserve from then on */
	u32 parked;		/* remote frees that could not get through yet (object list) */
	/*
	 * The owner's spare spans (span index + 1), linked through next. Only the owner
	 * pushes and pops (compare-and-swap); maintenance may only take a list whole, so a
	 * pop cannot meet ABA. reserve_nr is raised before a push and lowered by whoever
	 * took a span: never below the true count.
	 */
	u32 reserve[HEAP_KINDS];
	u32 reserve_nr[HEAP_KINDS];
	u64 reserve_in[HEAP_KINDS];	/* from maintenance: span + 1 | count << 32 */
	u64 revived;			/* from remote freers: span + 1 */
	u32 parked_nr;		/* objects on it */
	u32 pool_held;		/* level 0 only: pool walks under way on this CPU */
	/*
	 * Maintenance only: the heap has taken no span from its reserves since quiet_since
	 * (ms clock; quiet_taken is stats.spans_taken then). Spares beyond the target leave
	 * a reserve that stayed quiet for the purge delay.
	 */
	u32 quiet_since;
	u32 quiet_taken;
	u32 current[HEAP_NR_CLASSES];
	u32 partial[HEAP_NR_CLASSES];	/* spans with free objects, besides current */
	struct arena_heap_stats stats;
};

/* Allocator-wide state (user address via arena_get_info: .heap). */
struct arena_heap_global {
	u32 magic;
	u32 nr_cpus;			/* heaps exist for CPUs 0 .. nr_cpus - 1 */
	u32 reserve[HEAP_KINDS];	/* targets per level-0 heap */
	u32 high_water;
	u32 want;			/* some heap asked for a refill */
	u32 reserve_large;		/* spare buddy chunks for sizes beyond 64 KiB */
	u32 fail_remote;		/* tests only: remote pushes fail, frees park */
	/*
	 * The pool: whole spare spans that left a reserve (span + 1 | count << 32, linked
	 * through link), each due purge_delay after its bump (ms clock). A heap short of
	 * spans takes from it before maintenance maps new ones; maintenance gives back the
	 * due ones, never in a pass that mapped. Only taken whole, so no ABA.
	 */
	u64 release;
	u64 trim;			/* spans to trim: span + 1 | count << 32 */
	u64 claimed[HEAP_NR_SPANS / 64];	/* span slots in use */
	u64 desc_mapped[HEAP_NR_SPANS / 64 / 64 + 1];	/* descriptor pages mapped */
	u64 spans_mapped;		/* now: in reserves, in use, or on the way back */
	u64 spans_returned;		/* given back to the kernel */
	u64 pages_mapped;		/* spans, descriptors and heaps, now */
	u64 refills;			/* maintenance passes that mapped spans */
	u64 wq_runs;			/* of those, from the workqueue */
	u64 map_failures;		/* the kernel had no page for a span */
	u64 no_heap;			/* malloc on a CPU (level) without a heap yet */
	u64 bad_frees;			/* -EINVAL frees */
	u64 lost_frees;			/* frees given up: no heap to park on; tests assert 0 */
	u64 lost_spans;			/* span pushes given up after the whole loop budget */
	u64 large_allocs, large_frees;	/* served by the buddy allocator */
	u64 pages_trimmed;		/* unused pages of spans in use, given back */
	u32 purge_delay;		/* ms, HEAP_PURGE_DELAY_MS unless set */
	u32 purge_due;			/* ms clock of the next spare due, 0: none (a hint) */
	u32 large_since;		/* ms clock since the large sizes' spares exceed theirs */
	u32 large_allocs_seen;		/* the buddy's allocs then (low bits) */
	u64 pool_reused;		/* spans taken from the pool instead of mapped */
	u64 spares_shed;		/* spans moved from quiet reserves to the pool */
	u64 map_calls, map_pages;	/* bpf_arena_alloc_pages calls and pages, ever */
	u64 unmap_calls, unmap_pages;	/* bpf_arena_free_pages calls and pages, ever */
	u64 maintain_passes;		/* arena_heap_maintain calls */
	u64 maintain_ns;		/* and the time they took */
	u32 reserve_rest;		/* HEAP_RESERVE_REST unless set */
	u32 woken;			/* ms clock of the last arena_heap_refill: no heap quiet */
	/*
	 * Walks under way that hold spans out of sight (the pool taken whole, a reserve
	 * being shed): an owner that finds nothing meanwhile waits for them to end, up to
	 * HEAP_POOL_WAIT_NS, rather than fail while spans are in transit (not for one on
	 * its own CPU: that one is under it and cannot end first).
	 */
	u32 pool_holders;
	u32 pool_waits;			/* owners that waited for such a walk */
	u32 maintaining;		/* CPU + 1 of the pass under way: the next one waits */
	u32 maintain_overlaps;		/* passes that waited HEAP_MAINTAIN_WAIT_NS in vain */
};

struct arena_heap_refill_args {
	u32 nr_cpus;		/* in: CPUs to create heaps for; 0: as before (at least 1) */
	u32 reserve_small;	/* in: spans per heap, 0 for the default */
	u32 reserve_medium;
	u32 high_water;		/* in: x the target, 0 for the default */
	u32 reserve_large;	/* in: spare 512 KiB chunks for large sizes, 0: default 1 */
	u32 purge_delay_ms;	/* in: see HEAP_PURGE_DELAY_MS, 0 for the default */
	u32 reserve_rest;	/* in: see HEAP_RESERVE_REST, 0 keeps the default */
	u32 pad;
	u64 spans_mapped;	/* out: spans the allocator holds */
	u64 pages_mapped;	/* out */
};

int arena_heap_maintain(void);
int arena_heap_span_unmap(u32 s, u32 pages);	/* maintenance's, sleepable */
/*
 * Sleepable programs only: make room on this CPU for count objects of size bytes, so a
 * bulk build (a million inserts into a tree from one SEC("syscall") program) needs no
 * maintenance call on the way. Spans come from the pool first, then the kernel; what the
 * build leaves unused goes back after the purge delay. 0, or -errno with a log line.
 */
int arena_heap_reserve(u64 size, u64 count);
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
 * Call depth. The verifier allows 8 frames and 512 bytes of stack over a whole call chain,
 * the program's own frame and global functions included. arena_malloc() and arena_free()
 * use at most ARENA_ALLOC_FRAMES frames and ARENA_ALLOC_STACK bytes of that, their own
 * frame included (the large sizes go down through the buddy allocator; the figures
 * hold for clang 19 and 22 and for the sanitizer build): a caller at frame 8 - ARENA_ALLOC_FRAMES - 1 (the program's own
 * frame is 0) with up to 512 - ARENA_ALLOC_STACK bytes on its chain can call them.
 * arena_calloc() takes one frame more. scripts/frame-budget measures the objects against
 * these figures and tests/test_frames.bpf.c calls them at that depth in the VM.
 */
#define ARENA_ALLOC_FRAMES	4
#define ARENA_ALLOC_STACK	192
#define ARENA_CALLOC_FRAMES	5
#define ARENA_CALLOC_STACK	240

/* The default allocator of arena_malloc: global functions returning scalars only. */
u64 arena_malloc_addr(u64 size);
u64 arena_calloc_addr(u64 n, u64 size);
int arena_free_slow(void __arena *ptr __arg_arena);
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
 * ---- The layout as code: shared by the library and the inlined fast paths ----
 *
 * The arena lives at ARENA_USER_BASE (the arena map's map_extra; arena_heap_refill
 * refuses to start otherwise), so every address below is a constant plus an offset.
 */
/* A free object's third 32-bit word: HEAP_FREE_TAG ^ its arena offset (double frees). */
#define HEAP_FREE_TAG		0xf7eeb10cu

static __always_inline struct arena_heap_span __arena *__heap_span(u32 s)
{
	return (struct arena_heap_span __arena *)(ARENA_USER_BASE + HEAP_DESC_START +
						  (u64)(s & (HEAP_NR_SPANS - 1)) * 64);
}

/* Heap id (cpu * HEAP_LEVELS + level); callers keep it below HEAP_MAX_HEAPS. */
static __always_inline struct arena_heap __arena *__heap_of(u32 id)
{
	return (struct arena_heap __arena *)(ARENA_USER_BASE + HEAP_HEAPS_START +
					     (u64)id * HEAP_HEAP_SIZE);
}

/* The span slot of an address; >= HEAP_NR_SPANS when it is outside the heap window. */
static __always_inline u32 __heap_span_of(u64 addr)
{
	u64 hi = addr >> 32;

	barrier_var(hi);	/* a shift and a compare, not a 64-bit mask and constant */
	if (hi != ARENA_USER_BASE >> 32)
		return HEAP_NR_SPANS;
	return ((u32)addr - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
}

/*
 * Size classes: 16..128 by 16, four per power of two to 8 KiB, then 10 KiB and whole
 * pages to 64 KiB (so a trimmed span maps exactly what its objects cover). Every class
 * boundary up to 1 KiB is a multiple of 16 and up to 8 KiB a multiple of 128, so two
 * tables (65 entries used of 128) give the class of a small size with one load. arena_heap_class_size
 * states the rule they were generated from; test_heap_classes checks every size.
 */
static const u8 __heap_class_by_16[128] = {	/* up to 1 KiB, by (size + 15) / 16 */
	0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11,
	12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15,
	16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17, 17, 17, 17,
	18, 18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19,
};

static const u8 __heap_class_by_128[128] = {	/* up to 8 KiB, by (size + 127) / 128 */
	20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 21, 21, 22, 22, 23, 23,
	24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 27, 27, 27, 27,
	28, 28, 28, 28, 28, 28, 28, 28, 29, 29, 29, 29, 29, 29, 29, 29,
	30, 30, 30, 30, 30, 30, 30, 30, 31, 31, 31, 31, 31, 31, 31, 31,
};

/* The class of 1 .. HEAP_MEDIUM_MAX bytes: no division, no loop. */
static __always_inline u32 __heap_class(u64 size)
{
	u64 i;

	/*
	 * The masks bound the index for the verifier, which cannot tie it to the size check
	 * once clang computed it (and spilled it) earlier; barrier_var keeps clang from
	 * proving the mask useless and dropping it.
	 */
	if (size <= 1024) {
		i = (size + 15) >> 4;
		barrier_var(i);
		return __heap_class_by_16[i & 127];
	}
	if (size <= HEAP_SMALL_MAX) {
		i = (size + 127) >> 7;
		barrier_var(i);
		return __heap_class_by_128[i & 127];
	}
	if (size <= (10u << 10))
		return HEAP_NR_SMALL;
	return HEAP_NR_SMALL + (u32)((size + 4095) >> 12) - 2;
}

/* Why an object cannot be freed (HEAP_FREE_OK: it can). */
enum {
	HEAP_FREE_OK,
	HEAP_FREE_NO_SPAN,	/* not in an allocated span */
	HEAP_FREE_INTERIOR,	/* into the middle of an object */
	HEAP_FREE_NEVER,	/* beyond what the span ever handed out */
	HEAP_FREE_DOUBLE,	/* already free */
};

/*
 * Is obj where an object of span sp starts, and has the span handed it out? The index
 * comes from the span's reciprocal (no division); index * size == offset is the exact
 * test, so a damaged reciprocal can only refuse a free.
 */
static __always_inline bool __heap_obj_start(struct arena_heap_span __arena *sp, u64 obj)
{
	u32 rel = (u32)obj & (HEAP_SPAN_SIZE - 1), idx;

	idx = ((u64)(rel >> 4) * sp->recip) >> HEAP_RECIP_SHIFT;
	/* The owner raises bump while another CPU frees here: a racy read, by design. */
	return idx * sp->size == rel && idx < READ_ONCE(sp->bump);
}

static __always_inline bool __heap_obj_free(u64 obj)
{
	return ((u32 __arena *)obj)[2] == (HEAP_FREE_TAG ^ (u32)obj);
}

static __always_inline void __heap_tag_free(u64 obj)
{
	((u32 __arena *)obj)[2] = HEAP_FREE_TAG ^ (u32)obj;
}

/* Why obj of span s cannot be freed (HEAP_FREE_OK: it can). */
static __always_inline int __heap_free_check(u32 s, struct arena_heap_span __arena *sp,
					      u64 obj)
{
	u32 rel = (u32)obj & (HEAP_SPAN_SIZE - 1);

	if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_ACTIVE || !sp->size)
		return HEAP_FREE_NO_SPAN;
	if (!__heap_obj_start(sp, obj))
		return (rel / sp->size) * sp->size != rel ? HEAP_FREE_INTERIOR : HEAP_FREE_NEVER;
	if (__heap_obj_free(obj))
		return HEAP_FREE_DOUBLE;
	return HEAP_FREE_OK;
}

/*
 * Take heap h for this CPU's current program, or false when something below us has it.
 * A heap not created yet reads as all zeroes (its page is fresh or not mapped at all),
 * so it is "entered" and has no current span: the caller ends up on the slow path.
 */
static __always_inline bool __heap_try_enter(struct arena_heap __arena *h)
{
	if (h->busy)
		return false;
	/* An interrupting program runs to completion before we go on. */
	WRITE_ONCE(h->busy, 1);
	barrier();
	return true;
}

/*
 * The inlined paths take only level 0 of their CPU: NULL for a CPU beyond the heaps or
 * a busy level 0 (we interrupted its user), which the library handles.
 */
static __always_inline struct arena_heap __arena *__heap_enter_cpu(u32 cpu)
{
	struct arena_heap __arena *h = __heap_of(cpu * HEAP_LEVELS);

	if ((cpu & ~(HEAP_MAX_CPUS - 1)) | h->busy)
		return NULL;
	WRITE_ONCE(h->busy, 1);
	barrier();
	return h;
}

static __always_inline void __heap_leave(struct arena_heap __arena *h)
{
	barrier();
	WRITE_ONCE(h->busy, 0);
}

/*
 * Pop an object of class cls from h's current span: the local free list, else the next
 * never-used object. 0 when the span has none (or its list points outside the span,
 * which the library's slow path repairs).
 */
static __always_inline u64 __heap_pop(struct arena_heap __arena *h, u32 cls)
{
	struct arena_heap_span __arena *sp;
	u32 s = h->current[cls], off, bump;
	u64 obj;

	/*
	 * No bound on cls or s needed: a wild index still reads arena memory. s == 0 (no
	 * current span) reads the descriptor before the first one, which the tests below
	 * then refuse: one branch for the common case, a list head inside the span.
	 */
	sp = (struct arena_heap_span __arena *)(ARENA_USER_BASE + HEAP_DESC_START - 64 +
						(u64)s * 64);
	off = sp->local;
	if (((off - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT) + 1 == s) {
		obj = ARENA_USER_BASE + off;
		sp->local = *(u32 __arena *)obj;
	} else if (!off && s && (bump = sp->bump) < sp->capacity) {
		obj = ARENA_USER_BASE + HEAP_WINDOW_START +
		      ((u64)((s - 1) & (HEAP_NR_SPANS - 1)) << HEAP_SPAN_SHIFT) +
		      (u64)bump * sp->size;
		WRITE_ONCE(sp->bump, bump + 1);
	} else {
		return 0;	/* no span, span used up, or a damaged list */
	}
	((u32 __arena *)obj)[2] = 0;		/* no longer tagged free */
	sp->used++;
	h->stats.allocs++;
	return obj;
}

/*
 * Push a checked object onto its span's local list: the owner, under its heap. used is
 * sp->used as the caller read it, at least 1.
 */
static __always_inline void __heap_push(struct arena_heap __arena *h,
					struct arena_heap_span __arena *sp, u64 obj, u32 used)
{
	*(u32 __arena *)obj = sp->local;
	__heap_tag_free(obj);
	sp->local = (u32)obj;
	sp->used = used - 1;
	h->stats.frees++;
}

#if defined(__BPF__) && !defined(LIBARENA_ASAN)
/*
 * arena_malloc() and arena_free() are inlined into the caller. A BPF-to-BPF call costs
 * about as much as the whole fast path (under TCG two global calls took 54 of a 110 ns
 * pair), so the common case runs here: the CPU's level-0 heap, its current span of the
 * class, its local list. Everything else goes to the library's global functions: an
 * empty span, a free that empties a listed span or unparks a full one, a free into
 * another heap's span, a busy level 0 (a nested program), and every bad pointer, which
 * the library checks again and reports. Costs no call frame on the fast path and one
 * (plus the library's own) on the slow one. The sanitizer build calls the library always.
 */
/*
 * Under a JIT each conditional branch costs more than the arithmetic around it (under
 * TCG, where the CI runs, every branch ends a translation block): the tests are folded
 * into masks where they can be. barrier_var hides what clang knows about a value, so
 * it cannot turn the arithmetic back into compares and branches (BPF has no setcc).
 */
static __always_inline void __arena *arena_malloc(size_t size)
{
	struct arena_heap __arena *h;
	u64 addr = 0, i;
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
	arena_subprog_init();
	bpf_preempt_disable();
	h = __heap_enter_cpu(bpf_get_smp_processor_id());
	if (h) {
		addr = __heap_pop(h, cls);
		__heap_leave(h);
	}
	bpf_preempt_enable();
	if (!addr)
		addr = arena_malloc_addr(size);
	return (void __arena *)addr;
}

/*
 * The span's owner is checked with the heap held: owner != 0 only while the span is
 * active, and only the owner moves its local list, bump and used, so the other checks
 * read settled values. Everything the fast path does not take (the tests below, each
 * nonzero when it fails) goes to the library, which checks again and says why.
 */
static __always_inline int arena_free(void __arena *ptr)
{
	u64 obj = (u64)ptr, hi = obj >> 32, rel, idx, used, bump, tag, listed, bad;
	struct arena_heap_span __arena *sp;
	struct arena_heap __arena *h;
	bool done = false;
	u32 s, cpu;

	s = ((u32)obj - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
	barrier_var(hi);
	/* NULL, the large sizes, foreign pointers: not in the heap window. */
	if ((hi ^ (ARENA_USER_BASE >> 32)) | (s & ~(HEAP_NR_SPANS - 1)))
		return arena_free_slow(ptr);
	sp = __heap_span(s);
	arena_subprog_init();
	bpf_preempt_disable();
	cpu = bpf_get_smp_processor_id();
	h = __heap_enter_cpu(cpu);
	if (h) {
		rel = (u32)obj & (HEAP_SPAN_SIZE - 1);
		idx = ((rel >> 4) * sp->recip) >> HEAP_RECIP_SHIFT;	/* < 2^14 */
		used = sp->used;
		bump = sp->bump;
		tag = ((u32 __arena *)obj)[2] ^ HEAP_FREE_TAG ^ (u32)obj;	/* 0: free */
		listed = sp->listed & 1;
		barrier_var(used);
		barrier_var(bump);
		barrier_var(tag);
		bad = (sp->owner ^ (cpu * HEAP_LEVELS + 1)) |	/* not ours, or not active */
		      ((idx * sp->size) ^ rel) |		/* not where an object starts */
		      ((bump - 1 - idx) >> 63) |		/* never handed out */
		      ((tag - 1) >> 63) |			/* already free */
		      (READ_ONCE(sp->remote) >> 63) |		/* parked full */
		      ((used - 1) >> 63) |			/* nothing out: damaged */
		      ((((used ^ 1) - 1) >> 63) & listed);	/* the last of a listed span */
		if (!bad) {
			__heap_push(h, sp, obj, used);
			done = true;
		}
		__heap_leave(h);
	}
	bpf_preempt_enable();
	return done ? 0 : arena_free_slow(ptr);
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
