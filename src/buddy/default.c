// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, included: the default allocator (arena_malloc's, for sizes beyond
 * HEAP_MEDIUM_MAX) and the SEC("syscall") programs of the upstream API.
 */

/*
 * The default allocator (the global buddy): initialised by the first caller that needs
 * it, exactly once. Helpers are inlined where they can be: a call from a user's program
 * through bmp_alloc() to the deepest helper takes 5 of the verifier's 8 frames.
 */
static __always_inline bool default_is_ready(void)
{
	return smp_load_acquire(&buddy.magic) == BUDDY_MAGIC;
}

static __always_inline int default_ready(void)
{
	int i, err;

	if (default_is_ready())
		return 0;
	if (cmpxchg(&arena_buddy_state, 0, 1) == 0) {
		/* A program may have called buddy_init(&buddy) itself meanwhile. */
		err = default_is_ready() ? 0 : init_one(&buddy);
		smp_store_release(&arena_buddy_state, 0);
		return err;
	}
	/* Another caller initialises it: wait for it to end, up to the loop budget. */
	for (i = zero; i < LOCK_SPINS && can_loop; i++) {
		if (default_is_ready())
			return 0;
		if (!READ_ONCE(arena_buddy_state))
			return default_is_ready() ? 0 : -ENOMEM;
	}
	return -ETIMEDOUT;
}

__weak u64 arena_buddy_addr(void)
{
	return (u64)&buddy;
}

/* The default allocator, made ready if it is not (sleepable). */
__weak int arena_buddy_setup(void)
{
	arena_subprog_init();
	return default_ready();
}

/* Whether the default allocator is ready, from any program. */
__weak int arena_buddy_is_ready(void)
{
	arena_subprog_init();
	return default_is_ready();
}

SEC("syscall")
__weak int arena_buddy_reset(void *ctx)
{
	int err;

	if (default_is_ready()) {
		err = buddy_destroy(&buddy);
		if (err)
			return err;
	}
	return default_ready();
}

SEC("syscall")
__weak int arena_buddy_destroy(void *ctx)
{
	return default_is_ready() ? buddy_destroy(&buddy) : 0;
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
		arena_stderr("arena_alloc_reserve: %llu pages is too many", pages);
		return -EINVAL;
	}
	p = bpf_arena_alloc_pages(&arena, NULL, pages, NUMA_NO_NODE, 0);
	if (!p) {
		arena_stderr("arena_alloc_reserve: no room for %llu pages", pages);
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
	return arena_block_lookup(arena_base_of(addr), addr);
}
