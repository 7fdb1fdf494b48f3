// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 7 of 9: the steps that steps.h declares, global functions the
 * verifier checks once a program; those that touch the lists take b's lock themselves.
 */
#include "internal.h"

/*
 * A block (or a cache's batch) from the lists: it, 0 when none fits, -EAGAIN when a
 * damaged list was dropped (look again), or buddy_lock()'s error.
 */
__weak s64 __buddy_take(struct buddy __arena *b __arg_arena, u32 order, u32 carve, u64 size)
{
	return buddy_locked(b, take_counted(b, order, carve, size));
}

/* The frees that timed out on the lock (and cache spills), done now: 0 or a lock error. */
__weak int __buddy_drain(struct buddy __arena *b __arg_arena)
{
	return buddy_locked(b, (drain_deferred(b), 0));
}

/*
 * Merge a pair that frees left apart (pass: 0 for the first call of a pass): 1 while
 * more are left, 0 when none is, or a lock error. buddy_coalesce() makes the pass.
 */
__weak int __buddy_coalesce(struct buddy __arena *b __arg_arena, u32 pass)
{
	return buddy_locked(b, coalesce_one(b, pass));
}

/*
 * Take spare chunk slot out of b to give back, if it is one free block: slot + 1, 0, or
 * a lock error.
 */
__weak s64 __buddy_take_chunk(struct buddy __arena *b __arg_arena, u32 slot)
{
	return buddy_locked(b, take_chunk(b, slot));
}

/*
 * Free a block under the lock: 0, the slot + 1 of a chunk left entirely free that may go
 * back to the kernel (sleepable callers, after buddy_coalesce() and __buddy_take_chunk),
 * -(BUDDY_BAD + reason) for a block that cannot be freed, or a lock error.
 */
__weak s64 __buddy_put(struct buddy __arena *b __arg_arena, u64 addr, u32 flags)
{
	return buddy_locked(b, put_counted(b, addr, flags));
}

/*
 * Take a spare chunk out of b to give back, beyond floor (at least BUDDY_SPARE_CHUNKS),
 * or with by_peak beyond what the recent peak needs too: its slot + 1, 0 when none, or
 * a lock error. Only a chunk merged whole goes: the caller makes a buddy_coalesce()
 * pass first.
 */
__weak s64 __buddy_take_spare(struct buddy __arena *b __arg_arena, u32 by_peak, u32 floor)
{
	return buddy_locked(b, spare_beyond(b, by_peak, floor));
}

/* The allocator dies (buddy_destroy): from here on every call on b fails. */
__weak int __buddy_kill(struct buddy __arena *b __arg_arena)
{
	return buddy_locked(b, (b->magic = 0, 0));
}

/* A free that timed out on the lock: onto the deferred list. True when it went. */
__weak int __buddy_defer(struct buddy __arena *b __arg_arena, u64 addr)
{
	arena_subprog_init();
	return defer_free(b, addr);
}

/* The CPUs' caches (alloc_types.h: struct buddy_cpu_cache), without the lock. */
__weak u64 __buddy_cache_get(struct buddy __arena *b __arg_arena, u32 order, u64 size)
{
	arena_subprog_init();
	if (order >= BUDDY_CACHE_ORDERS)
		return 0;
	return cache_alloc(b, order, size);
}

__weak int __buddy_cache_put(struct buddy __arena *b __arg_arena, u64 addr)
{
	arena_subprog_init();
	return cache_put(b, addr);
}

__weak int __buddy_cache_spill(struct buddy __arena *b __arg_arena, u64 addr)
{
	arena_subprog_init();
	return cache_spill_batch(b, addr);
}

/* A block __buddy_take carved into a batch: the rest of it into this CPU's cache. */
__weak int __buddy_cache_fill(struct buddy __arena *b __arg_arena, u64 addr)
{
	arena_subprog_init();
	if (in_window(addr) && (meta_get(addr) & BUDDY_META_CARVED))
		cache_fill(b, addr);
	return 0;
}

__weak int __buddy_cache_flush(struct buddy __arena *b __arg_arena)
{
	arena_subprog_init();
	return cache_flush(b);
}

__weak int __buddy_add_chunk(struct buddy __arena *b __arg_arena)
{
	arena_subprog_init();
	return add_chunk(b);
}

__weak int __buddy_release_chunk(struct buddy __arena *b __arg_arena, u32 slot)
{
	arena_subprog_init();
	release_chunk(b, slot);
	return 0;
}
