/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena buddy allocator: power-of-two blocks from 16 bytes to 512 KiB carved out of
 * 512 KiB chunks, and page runs for anything larger.
 *
 *   buddy_init(b)            initialise an allocator (struct buddy in arena memory);
 *                            -EBUSY if already initialised (0 for the default one,
 *                            &buddy), -ENOMEM without a first chunk
 *   buddy_destroy(b)         give every chunk and page run back to the kernel
 *   buddy_alloc(b, size)     1 byte .. 512 KiB: a block of the next power of two (at
 *                            least 16 bytes, aligned to its size); larger sizes: whole
 *                            pages, page aligned. NULL (and a log line) on failure.
 *   buddy_free(b, ptr)       0; NULL is a no-op; -EINVAL (and a log line) for a double
 *                            free, a pointer into the middle of a block, a misaligned or
 *                            foreign pointer
 *
 *   buddy_trim(b)            free spare chunks now; returns how many were given back
 *   buddy_flush_caches(b)    any program: give every CPU's cached blocks back to the
 *                            lists (those of a cache in use right now stay); returns
 *                            how many went, -EINVAL, or -ETIMEDOUT (they then wait
 *                            on the deferred list, for the next allocation)
 *
 * arena_malloc() and friends live in heap.h: the fast allocator serves small and medium
 * sizes and the default buddy allocator (the global buddy, below) the larger ones.
 *
 * Programs for user space (SEC("syscall")): arena_buddy_reset (destroy, then init the
 * default allocator), arena_buddy_destroy, and arena_alloc_reserve (struct
 * arena_alloc_reserve_args): take nr_pages pages (default ARENA_RESERVE_PAGES_DFL) at the
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
 * The invariants of its lists, metadata and counts: include/libarena/alloc_types.h.
 *
 * Blocks of 16 B .. 4 KiB come from and go to a per-CPU cache (alloc_types.h, struct
 * buddy_cpu_cache) without the lock: an empty cache takes a batch of 16 blocks under one
 * lock hold, a full one (64 KiB of a size, at least 32 blocks) gives 16 back. The
 * statistics and the chunks count cached blocks as in use; buddy_flush_caches(),
 * buddy_trim(), buddy_shrink() and an allocation that finds the lists empty (before it
 * maps a chunk, or fails) give them back.
 * Frees of cached sizes check what the locked path checks (a double free of a cached
 * block is one), by compare-and-swap, so that two racing frees of a block cannot both
 * succeed.
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

#include <libarena/base.h>
#include <libarena/alloc_types.h>
#include <libarena/log.h>
#include <libarena/spinlock.h>

#define BUDDY_SPARE_CHUNKS	1
#define BUDDY_PEAK_PERIOD	4096

#define ARENA_RESERVE_PAGES_DFL	8	/* arena_alloc_reserve's default (the upstream name) */

struct arena_alloc_reserve_args {
	u64 nr_pages;		/* in: pages to take, 0 for the default */
	u64 addr;		/* out: user address of the first page taken */
};

/* Call depth: every call keeps to ARENA_CALL_FRAMES and ARENA_CALL_STACK (base.h). */

int buddy_init(struct buddy __arena *b __arg_arena);
int buddy_destroy(struct buddy __arena *b __arg_arena);
u64 buddy_alloc_addr(struct buddy __arena *b __arg_arena, u64 size);
int buddy_free(struct buddy __arena *b __arg_arena, void __arena *ptr __arg_arena);
int buddy_trim(struct buddy __arena *b __arg_arena);
int buddy_flush_caches(struct buddy __arena *b __arg_arena);

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

/*
 * The default allocator, behind large arena_malloc()s: a library global under upstream's
 * name (link the library before the program: README, "Using libarena"), initialised on
 * demand; buddy_init(&buddy) makes it ready and is 0 when it is. Its user address is in
 * arena_get_info's answer and arena_buddy_addr().
 */
extern struct buddy __arena_global buddy;
u64 arena_buddy_addr(void);
int arena_buddy_setup(void);		/* sleepable: initialise it if needed; 0 or -errno */
int arena_buddy_is_ready(void);	/* any program: 1 when it is initialised */
/*
 * The default allocator's block holding addr, for the sanitizer build's arena_free:
 * slot size << 32 | arena offset, ARENA_BLOCK_FREE when free (alloc_types.h), or 0.
 */
u64 buddy_block_of(u64 addr);

#endif /* __LIBARENA_BUDDY_H */
