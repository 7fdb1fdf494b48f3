/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena buddy allocator: power-of-two blocks from 16 bytes to 512 KiB carved out of
 * 512 KiB chunks, and page runs for anything larger.
 *
 *   buddy_init(b)            initialise an allocator (struct buddy in arena memory);
 *                            -EBUSY if already initialised, -ENOMEM without a first chunk
 *   buddy_destroy(b)         give every chunk and page run back to the kernel
 *   buddy_alloc(b, size)     1 byte .. 512 KiB: a block of the next power of two (at
 *                            least 16 bytes, aligned to its size); larger sizes: whole
 *                            pages, page aligned. NULL (and a log line) on failure.
 *   buddy_free(b, ptr)       0; NULL is a no-op; -EINVAL (and a log line) for a double
 *                            free, a pointer into the middle of a block, a misaligned or
 *                            foreign pointer
 *
 *   buddy_trim(b)            free spare chunks now; returns how many were given back
 *
 * arena_malloc() and friends live in heap.h: the fast allocator serves small and medium
 * sizes and the default buddy allocator (arena_buddy_addr()) the larger ones.
 *
 * Programs for user space (SEC("syscall")): arena_buddy_reset (destroy, then init the
 * default allocator), arena_buddy_destroy, and arena_alloc_reserve (struct
 * arena_alloc_reserve_args): take nr_pages pages (default ARENA_RESERVE_DEFAULT) at the
 * lowest free offset of the arena so that nothing is ever allocated there. 6.12 cannot
 * reserve a range without mapping it, so the pages are mapped (and read as zeroes); what
 * they buy is that no allocation sits right after libbpf's globals. Once per arena:
 * -EALREADY after that.
 *
 * Linux 6.12 facts that shape it:
 *   - the arena page kfuncs are sleepable-only, so are these functions (the fast
 *     per-CPU allocator serves non-sleepable programs);
 *   - there is no bpf_arena_reserve_pages: the allocator owns a fixed window of the arena
 *     (offsets BUDDY_WINDOW_START .. BUDDY_WINDOW_END, 2048 chunk slots shared by every
 *     struct buddy) and a metadata window after it, so any pointer finds its chunk and
 *     its block's state in O(1). Page runs come from wherever the kernel finds room;
 *   - global functions return scalars only: buddy_alloc and arena_malloc are inline
 *     wrappers around functions returning the address as a u64.
 *
 * Invariants (src/buddy.bpf.c relies on them):
 *   - block metadata is one byte per 16-byte unit of a chunk: 0 for a unit that does not
 *     start a block, BUDDY_META_FREE | order or BUDDY_META_USED | order for one that does;
 *   - a free block is on exactly one list, free_head[order], linked through its first 16
 *     bytes; a used block is on none;
 *   - two free buddies of one order are merged, except at most one pair per order: a
 *     free whose order's list holds nothing but its buddy leaves the two apart (lazy[]),
 *     so that allocating and freeing one size on an otherwise empty chunk costs a pop
 *     and a push instead of a split and a merge across every order. Such pairs are
 *     merged before the allocator maps a chunk for want of a larger block, and before a
 *     spare chunk is taken out (coalesce());
 *   - in_use[slot] of the registry counts the blocks in use in a chunk: a chunk is a
 *     spare exactly when it is 0, merged or not;
 *   - a chunk is owned by one allocator (chunk_owner in the registry) from the moment its
 *     pages are allocated until they are freed;
 *   - every change of lists, metadata and statistics happens under b->lock, with
 *     preemption disabled; page kfuncs are called only outside it.
 *
 * Memory goes back to the kernel, with hysteresis: a chunk that becomes entirely free is
 * kept as a spare while there are fewer spares than the recent peak of chunks in use
 * (at least BUDDY_SPARE_CHUNKS), so a workload that keeps coming back to the same size
 * does not map and unmap chunks; otherwise its pages are freed. The peak is the most
 * chunks in use during the last period of BUDDY_PEAK_PERIOD frees, so memory a shrunken
 * workload no longer needs goes back a period later; buddy_trim(b) gives back every
 * spare beyond BUDDY_SPARE_CHUNKS at once. Page runs are freed at once.
 */
#ifndef __LIBARENA_BUDDY_H
#define __LIBARENA_BUDDY_H

#include <libarena/common.h>
#include <libarena/spinlock.h>

#define BUDDY_MIN_SHIFT		4			/* 16-byte blocks */
#define BUDDY_MIN_SIZE		(1u << BUDDY_MIN_SHIFT)
#define BUDDY_ORDERS		16			/* 16 B .. 512 KiB */
#define BUDDY_MAX_ORDER		(BUDDY_ORDERS - 1)
#define BUDDY_CHUNK_SHIFT	(BUDDY_MIN_SHIFT + BUDDY_MAX_ORDER)
#define BUDDY_CHUNK_SIZE	(1u << BUDDY_CHUNK_SHIFT)	/* 512 KiB */
#define BUDDY_MAX_SIZE		BUDDY_CHUNK_SIZE
#define BUDDY_CHUNK_PAGES	(BUDDY_CHUNK_SIZE / 4096)
#define BUDDY_META_SIZE		(BUDDY_CHUNK_SIZE >> BUDDY_MIN_SHIFT)	/* 32 KiB */
#define BUDDY_META_PAGES	(BUDDY_META_SIZE / 4096)

/* Arena offsets (low 32 bits of a pointer) the allocator owns. */
#define BUDDY_WINDOW_START	0x80000000u
#define BUDDY_NR_SLOTS		2048
#define BUDDY_WINDOW_END	(BUDDY_WINDOW_START + BUDDY_NR_SLOTS * BUDDY_CHUNK_SIZE)
#define BUDDY_META_START	BUDDY_WINDOW_END
#define BUDDY_META_END		(BUDDY_META_START + BUDDY_NR_SLOTS * BUDDY_META_SIZE)

#define BUDDY_SPARE_CHUNKS	1
#define BUDDY_PEAK_PERIOD	4096
#define BUDDY_MAGIC		0x42756464u
#define BUDDY_RUN_MAGIC		0x52756e50u

#define BUDDY_META_FREE		0x80
#define BUDDY_META_USED		0x40
#define BUDDY_META_ORDER	0x0f

/* What user space can read through the mmap (libarena_buddy_stats_print()). */
struct buddy_stats {
	u64 blocks_in_use[BUDDY_ORDERS];	/* bytes: blocks << (order + 4) */
	u64 bytes_requested;			/* total asked for by successful allocs */
	u64 chunks_held;			/* chunks mapped now, spares included */
	u64 chunks_spare;			/* of those, entirely free */
	u64 chunks_peak;			/* most chunks in use, this period or the last */
	u64 chunks_returned;			/* chunks given back to the kernel */
	u64 runs_in_use;			/* page runs (allocations > 512 KiB) */
	u64 run_pages_in_use;
	u64 pages_returned;			/* pages given back, chunks and runs */
	u64 allocs, frees;
	u64 failed_allocs;			/* NULL returned for a valid size */
	u64 bad_calls;				/* -EINVAL frees, bad sizes */
	u64 lock_timeouts;
	u64 corruptions;			/* free lists found damaged, and dropped */
	u64 deferred_frees;			/* frees that met a lock timeout: deferred */
	u64 map_calls, map_pages;		/* page kfunc maps (chunks, runs), ever */
	u64 unmap_calls;			/* and unmaps (their pages: pages_returned) */
	u64 lazy_frees;				/* frees that left a pair of buddies apart */
	u64 coalesces;				/* passes that merged such pairs */
};

struct buddy {
	arena_spinlock_t lock;
	u32 magic;				/* BUDDY_MAGIC while initialised */
	u32 max_chunks;				/* 0: no limit; set after buddy_init */
	u64 free_head[BUDDY_ORDERS];		/* user address of the first free block */
	u64 runs;				/* user address of the first run header */
	u64 period_peak;			/* most chunks in use in this period */
	/*
	 * Blocks whose free timed out on the lock (a holder's vCPU descheduled for 250 ms):
	 * a lock-free stack linked through the blocks' first words, freed by the lock's
	 * next holder. So a free never loses its block.
	 */
	u64 deferred;
	u64 lazy[BUDDY_ORDERS];			/* a block of each order's pair apart | order */
	u32 lazy_mask;				/* orders whose lazy[] is set */
	u32 pad2;
	struct buddy_stats stats;
};

/*
 * Which chunk slots are taken, and by which allocator: one for every struct buddy of the
 * arena (buddy_registry). Here so that user space and the host tests can check a chunk.
 */
struct buddy_registry {
	u64 claimed[BUDDY_NR_SLOTS / 64];
	u64 owner[BUDDY_NR_SLOTS];		/* user address of the owning struct buddy */
	u32 in_use[BUDDY_NR_SLOTS];		/* blocks in use, under the owner's lock */
};

#define ARENA_RESERVE_DEFAULT	8

struct arena_alloc_reserve_args {
	u64 nr_pages;		/* in: pages to take, 0 for the default */
	u64 addr;		/* out: user address of the first page taken */
};

/* Header page in front of each page run. */
struct buddy_run {
	u32 magic;				/* BUDDY_RUN_MAGIC while in use */
	u32 pages;				/* pages of the run, this header included */
	u64 owner;				/* user address of its struct buddy */
	u64 next, prev;				/* the owner's list of runs */
};

/*
 * Call depth (see ARENA_ALLOC_FRAMES in heap.h): buddy_alloc(), buddy_free() and their
 * nosleep variants use at most BUDDY_CALL_FRAMES frames and BUDDY_CALL_STACK bytes of
 * stack, their own frame included.
 */
#define BUDDY_CALL_FRAMES	3
#define BUDDY_CALL_STACK	160

int buddy_init(struct buddy __arena *b __arg_arena);
int buddy_destroy(struct buddy __arena *b __arg_arena);
u64 buddy_alloc_addr(struct buddy __arena *b __arg_arena, u64 size);
int buddy_free(struct buddy __arena *b __arg_arena, void __arena *ptr __arg_arena);
int buddy_trim(struct buddy __arena *b __arg_arena);

static __always_inline void __arena *buddy_alloc(struct buddy __arena *b, size_t size)
{
	return (void __arena *)buddy_alloc_addr(b, size);
}

/*
 * Non-sleepable variants, for any program type: they never call a page kfunc, so they
 * serve only what the allocator's chunks hold (blocks up to BUDDY_MAX_SIZE), and a chunk
 * that becomes entirely free stays a spare until buddy_shrink() or buddy_trim().
 */
u64 buddy_alloc_nosleep_addr(struct buddy __arena *b __arg_arena, u64 size);
int buddy_free_nosleep(struct buddy __arena *b __arg_arena, void __arena *ptr __arg_arena);

static __always_inline void __arena *buddy_alloc_nosleep(struct buddy __arena *b, size_t size)
{
	return (void __arena *)buddy_alloc_nosleep_addr(b, size);
}

/* Sleepable: map chunks until b has at least spares entirely free ones. */
int buddy_reserve(struct buddy __arena *b __arg_arena, u32 spares);
/* Sleepable: give back the spares beyond what the recent peak of use needs. */
int buddy_shrink(struct buddy __arena *b __arg_arena);
/* Sleepable: give back the spares beyond keep (and forget the peak); how many went. */
int buddy_trim_keep(struct buddy __arena *b __arg_arena, u32 keep);

/* The default allocator (user address via arena_get_info), behind large arena_malloc()s. */
u64 arena_buddy_addr(void);
int arena_buddy_ready(void);		/* sleepable: initialise it if needed; 0 or -errno */
int arena_buddy_is_ready(void);	/* any program: 1 when it is initialised */

#endif /* __LIBARENA_BUDDY_H */
