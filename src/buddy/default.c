// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, included: the default allocator (arena_malloc's, for sizes beyond
 * HEAP_MEDIUM_MAX) and the SEC("syscall") programs of the upstream API.
 */

/*
 * The default allocator: initialised by the first caller, exactly once.
 * Helpers are inlined where they can be: a call from a user's program through
 * bmp_alloc() to the deepest helper takes 5 of the verifier's 8 frames.
 */
static __always_inline int default_ready(void)
{
	int i, err;

	if (READ_ONCE(arena_buddy_state) == 2)
		return 0;
	if (cmpxchg(&arena_buddy_state, 0, 1) == 0) {
		err = buddy_init(&arena_buddy);
		WRITE_ONCE(arena_buddy_state, err ? 0 : 2);
		return err;
	}
	for (i = zero; i < LOCK_SPINS && can_loop; i++)
		if (READ_ONCE(arena_buddy_state) == 2)
			return 0;
	return -ETIMEDOUT;
}

__weak u64 arena_buddy_addr(void)
{
	return (u64)&arena_buddy;
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
	return READ_ONCE(arena_buddy_state) == 2;
}

SEC("syscall")
__weak int arena_buddy_reset(void *ctx)
{
	int err;

	if (READ_ONCE(arena_buddy_state) == 2) {
		err = buddy_destroy(&arena_buddy);
		if (err)
			return err;
	}
	arena_buddy_state = 0;
	return default_ready();
}

SEC("syscall")
__weak int arena_buddy_destroy(void *ctx)
{
	int err = 0;

	if (READ_ONCE(arena_buddy_state) == 2)
		err = buddy_destroy(&arena_buddy);
	arena_buddy_state = 0;
	return err;
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
	    buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] != (u64)&arena_buddy)
		return 0;
	return arena_block_lookup(arena_base_of(addr), addr);
}
