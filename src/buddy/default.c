// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 9 of 9: the default allocator (arena_malloc's, for sizes beyond
 * HEAP_MEDIUM_MAX) and the SEC("syscall") programs of the upstream API.
 */
#include "internal.h"

/*
 * The default allocator (the global buddy): initialised by the first caller that needs
 * it, by one caller at a time (arena_buddy_state, the set-up lock), and again after a
 * destroy. Helpers are inlined where they can be: a call from a user's program through
 * bmp_alloc() to the deepest helper takes 5 of the verifier's 8 frames.
 */
static __always_inline bool default_is_ready(void)
{
	/* The magic before the allocator's fields: pairs with the release in init_one(). */
	return smp_load_acquire(&buddy.magic) == BUDDY_MAGIC;
}

static __always_inline bool default_trylock(void)
{
	return !READ_ONCE(arena_buddy_state) && !cmpxchg(&arena_buddy_state, 0, 1);
}

static __always_inline void default_unlock(void)
{
	/* The set-up's or teardown's stores before the next caller takes the lock. */
	smp_store_release(&arena_buddy_state, 0);
}

static __always_inline int default_setup(void)
{
	int i, err;

	/*
	 * Ready, or take the set-up lock and make it so; while another caller holds the
	 * lock (initialising or destroying it), wait, up to the loop budget.
	 */
	for (i = zero; i < LOCK_SPINS && can_loop; i++) {
		if (default_is_ready())
			return 0;
		if (default_trylock()) {
			/* A program may have called buddy_init(&buddy) itself meanwhile. */
			err = default_is_ready() ? 0 : init_one(&buddy);
			default_unlock();
			return err;
		}
	}
	return -ETIMEDOUT;
}

/*
 * Destroy it under the set-up lock. Its large blocks waiting in the sanitizer's
 * quarantine (only the default allocator's blocks are large ones there) go with it:
 * left there, they would be freed later into the allocator that reuses their chunk.
 */
static __always_inline int default_destroy(bool quiet)
{
	int i, err = -EINVAL;

	for (i = zero; i < LOCK_SPINS && can_loop; i++)
		if (default_trylock())
			break;
	if (i >= LOCK_SPINS)
		return -ETIMEDOUT;
	if (default_is_ready() || !quiet) {
		for (i = 0; i < ASAN_QUARANTINE_LARGE; i++)
			asan_hook_quarantine_take(ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_LARGE + i);
		err = destroy_one(&buddy);
	}
	default_unlock();
	return err;
}

__weak u64 arena_buddy_addr(void)
{
	return (u64)&buddy;
}

/*
 * The default allocator, made ready if it is not: a step (it calls nothing of ours, and
 * says nothing: its callers log), for arena_malloc's maintenance and reservations.
 * Sleepable. 0 or -errno.
 */
__weak int __buddy_setup_default(void)
{
	arena_subprog_init();
	return default_setup();
}

/* The same for programs (sleepable), with a log line when it fails. */
__weak int arena_buddy_setup(void)
{
	int err;

	if (arena_misplaced(__func__, (u64)&buddy))
		return -EFAULT;
	err = __buddy_setup_default();
	if (err)
		arena_stderr("%s: the default allocator: no set-up: %d", __func__, err);
	return err;
}

/* Whether the default allocator is ready, from any program. */
__weak int arena_buddy_is_ready(void)
{
	arena_subprog_init();
	return default_is_ready();
}

/* Destroy the default allocator, quietly: one that is not set up is no error. */
static __always_inline int default_teardown(void)
{
	int err = default_destroy(true);

	return err == -EINVAL ? 0 : err;
}

/* Destroy, then initialise again; either step may find it already done. */
SEC("syscall")
__weak int arena_buddy_reset(void *ctx)
{
	arena_subprog_init();
	return default_teardown() ?: arena_buddy_setup();
}

SEC("syscall")
__weak int arena_buddy_destroy(void *ctx)
{
	arena_subprog_init();
	return default_teardown();
}

u64 __arena_global arena_reserved;	/* user address of the reserved pages, 0 if none */

SEC("syscall")
__weak int arena_alloc_reserve(struct arena_alloc_reserve_args *args)
{
	u64 pages = args->nr_pages ? args->nr_pages : ARENA_RESERVE_PAGES_DFL;
	void __arena *p;

	if (arena_reserved) {
		args->addr = arena_reserved;
		return -EALREADY;
	}
	if (pages > RUN_MAX_PAGES) {
		arena_stderr("%s: %llu pages is too many", __func__, pages);
		return -EINVAL;
	}
	p = bpf_arena_alloc_pages(&arena, NULL, pages, NUMA_NO_NODE, 0);
	if (!p) {
		arena_stderr("%s: no room for %llu pages", __func__, pages);
		return -ENOMEM;
	}
	arena_reserved = (u64)p;
	args->addr = (u64)p;
	return 0;
}

/*
 * The block of the default allocator (arena_malloc's) an address falls in, for the
 * sanitizer build's arena_free: as arena_block_lookup() says, 0 for another allocator's.
 */
__weak u64 buddy_block_of(u64 addr)
{
	if (!in_window(addr) ||
	    buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] != (u64)&buddy)
		return 0;
	return arena_block_lookup(addr);
}
