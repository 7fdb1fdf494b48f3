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
 * pushes onto the span's local list when the span belongs to the freeing CPU's heap. A
 * free from any other heap pushes onto the span's remote list with one compare-and-swap;
 * the owner takes that list whole with one exchange when its local list runs dry (a list
 * only ever taken whole has no ABA problem). The remote list head packs the object
 * count, so the owner knows exactly how many objects came back.
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
 *     fills every reserve to its target, gives released spans back to the kernel and arms
 *     a 5 ms bpf_timer that starts a bpf_wq whenever a heap asks for more;
 *   - arena_heap_maintain() is the same work as a function, for sleepable programs.
 * A malloc that finds its reserve empty returns NULL and counts the shortfall. A span
 * whose objects are all free goes back to the heap's reserve; beyond the high-water mark,
 * to the kernel (by the next maintenance). Spans that come back empty through remote
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
#define HEAP_NR_SPANS		8192
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
#define HEAP_HIGH_WATER		4	/* x the target: beyond it, back to the kernel */
#define HEAP_POLL_NS		5000000	/* the maintenance timer's period */

#define HEAP_MAGIC		0x48656170u
#define HEAP_SPAN_MAGIC		0x5370616eu
#define HEAP_GLOBAL_MAGIC	0x476c6f62u

/* Span states. */
#define HEAP_SPAN_RESERVE	1	/* mapped, in a reserve */
#define HEAP_SPAN_ACTIVE	2	/* holds objects of one class for its owner */
#define HEAP_SPAN_RELEASE	3	/* on its way back to the kernel */

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
	u32 bump;		/* objects carved so far */
	u32 capacity;		/* objects the span holds */
	u32 size;		/* object size */
	u8 cls;
	u8 kind;
	u8 state;
	u8 listed;		/* on the owner's partial list */
	u32 owner;		/* heap id + 1 */
	u32 next, prev;		/* owner's lists (span index + 1) */
	u32 link;		/* lock-free stacks: revived, incoming reserve, release */
	u32 magic;		/* HEAP_SPAN_MAGIC while mapped */
	u32 trim;		/* HEAP_TRIM_* */
	u32 trim_link;		/* the trim stack */
};

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
};

/* One per CPU and nesting level, in the heaps window. */
struct arena_heap {
	u32 magic;
	u32 busy;		/* in use on this CPU right now */
	u32 id;			/* cpu * HEAP_LEVELS + level */
	u32 want;		/* the reserve ran low: maintenance should refill it */
	u32 used;		/* ever used: nesting levels get a reserve from then on */
	u32 pad;
	u32 reserve[HEAP_KINDS];	/* owner's spare spans (span index + 1) */
	u32 reserve_nr[HEAP_KINDS];
	u64 reserve_in[HEAP_KINDS];	/* from maintenance: span + 1 | count << 32 */
	u64 revived;			/* from remote freers: span + 1 */
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
	u32 pad;
	u64 release;			/* spans for the kernel: span + 1 | count << 32 */
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
	u64 lost_frees;			/* remote pushes that never got through */
	u64 large_allocs, large_frees;	/* served by the buddy allocator */
	u64 pages_trimmed;		/* unused pages of spans in use, given back */
};

struct arena_heap_refill_args {
	u32 nr_cpus;		/* in: CPUs to create heaps for; 0: as before (at least 1) */
	u32 reserve_small;	/* in: spans per heap, 0 for the default */
	u32 reserve_medium;
	u32 high_water;		/* in: x the target, 0 for the default */
	u32 reserve_large;	/* in: spare 512 KiB chunks for large sizes, 0: default 1 */
	u32 pad;
	u64 spans_mapped;	/* out: spans the allocator holds */
	u64 pages_mapped;	/* out */
};

int arena_heap_maintain(void);
int arena_heap_collect_cpu(void);
/*
 * Objects arena_malloc handed out that arena_free has not taken back, over every heap
 * and the large sizes: a leak check. Exact while no other CPU allocates or frees.
 */
s64 arena_heap_outstanding(void);
u64 arena_heap_global_addr(void);
u32 arena_heap_class(u64 size);
u32 arena_heap_class_size(u32 cls);

/* The default allocator of arena_malloc: global functions returning scalars only. */
u64 arena_malloc_addr(u64 size);
u64 arena_calloc_addr(u64 n, u64 size);
int arena_free(void __arena *ptr __arg_arena);
int arena_memset(void __arena *ptr __arg_arena, int c, u64 n);

static __always_inline void __arena *arena_malloc(size_t size)
{
	return (void __arena *)arena_malloc_addr(size);
}

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

#endif /* __LIBARENA_HEAP_H */
