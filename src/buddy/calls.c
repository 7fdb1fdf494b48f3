// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 8 of 9: the public calls: init, destroy, alloc, free, flush, trim and
 * reserve.
 */
#include "internal.h"

static __always_inline bool buddy_is_ready(struct buddy __arena *b)
{
	return b && b->magic == BUDDY_MAGIC;
}

static __always_inline int init_one(struct buddy __arena *b)
{
	u32 old = READ_ONCE(b->magic);
	int i, err;

	/* The windows are addressed from ARENA_USER_BASE: the callers log. */
	if (!arena_at_user_base((u64)b))
		return -EFAULT;
	/* Claimed first: two callers initialising one allocator cannot both go on. */
	if (old == BUDDY_MAGIC || old == BUDDY_INITING ||
	    cmpxchg(&b->magic, old, BUDDY_INITING) != old)
		return -EBUSY;
	b->lock.state = 0;
	b->lock.next = b->lock.timeouts = 0;
	b->max_chunks = 0;
	b->lazy_mask = b->holder = 0;
	for (i = zero; i < BUDDY_ORDERS && can_loop; i++) {
		b->free_head[i & BUDDY_META_ORDER] = 0;
		b->lazy[i & BUDDY_META_ORDER] = 0;
		b->stats.blocks_in_use[i & BUDDY_META_ORDER] = 0;
	}
	b->runs = b->period_peak = b->deferred = 0;
	b->stats.deferred_frees = 0;
	b->stats.bytes_requested = b->stats.chunks_held = b->stats.chunks_spare = 0;
	b->stats.chunks_returned = b->stats.runs_in_use = b->stats.run_pages_in_use = 0;
	b->stats.pages_returned = b->stats.allocs = b->stats.frees = 0;
	b->stats.failed_allocs = b->stats.bad_calls = b->stats.lock_timeouts = 0;
	b->stats.corruptions = b->stats.chunks_peak = 0;
	b->stats.lazy_frees = b->stats.coalesces = 0;
	b->stats.cache_refills = b->stats.cache_spills = 0;
	cache_reset(b);
	err = add_chunk(b);
	if (err) {
		/* Unclaimed after this attempt's stores: the next claimer's swap sees them. */
		smp_store_release(&b->magic, 0);
		return -ENOMEM;
	}
	/* Ready with its first chunk: the fields above are written before the magic. */
	smp_store_release(&b->magic, BUDDY_MAGIC);
	return 0;
}

/* init_one as a step: it calls nothing of ours, so it may sit two frames down. */
__weak int __buddy_init_one(struct buddy __arena *b __arg_arena)
{
	arena_subprog_init();
	return init_one(b);
}

/*
 * The default allocator (the global buddy) is the library's, initialised on demand:
 * buddy_init(&buddy) makes it ready if it is not, and is 0 if it is, so that upstream
 * programs that initialise it themselves work. Any other allocator is initialised once.
 */
__weak int buddy_init(struct buddy __arena *b __arg_arena)
{
	int err;

	arena_subprog_init();
	if (!b)
		return -EINVAL;
	if (arena_misplaced(__func__, (u64)b))
		return -EFAULT;
	err = b == &buddy ? __buddy_setup_default() : __buddy_init_one(b);
	if (err == -EBUSY)
		arena_stderr("%s: allocator at %llx is already initialised", __func__, (u64)b);
	else if (err == -ENOMEM)
		arena_stderr("%s: no first chunk for %llx: %d", __func__, (u64)b, err);
	else if (err)
		arena_stderr("%s: allocator at %llx: %d", __func__, (u64)b, err);
	return err;
}

static __always_inline int destroy_one(struct buddy __arena *b)
{
	struct buddy_run __arena *run;
	u64 next, self = (u64)b;
	int i;

	if (!buddy_is_ready(b)) {
		arena_stderr("buddy_destroy: %llx is not an initialised allocator", self);
		return -EINVAL;
	}
	if (buddy_patiently(b, __buddy_kill(b))) {
		arena_stderr("buddy_destroy: lock timeout on %llx", self);
		return -ETIMEDOUT;
	}

	for (i = zero; i < BUDDY_NR_SLOTS && can_loop; i++) {
		if (buddy_registry.owner[i & (BUDDY_NR_SLOTS - 1)] == self) {
			release_chunk(b, i);
			b->stats.chunks_held--;
		}
	}
	next = b->runs;
	for (i = zero; next && i < RUNS_MAX && can_loop; i++) {
		run = (struct buddy_run __arena *)next;
		next = run->next;
		if (run->magic != BUDDY_RUN_MAGIC || run->owner != self ||
		    run->pages < 2 || run->pages > RUN_MAX_PAGES + 1)
			break;
		run->magic = 0;
		b->stats.pages_returned += run->pages;
		bpf_arena_free_pages(&arena, run, run->pages);
	}
	b->runs = b->deferred = 0;
	b->lazy_mask = b->holder = 0;
	for (i = zero; i < BUDDY_ORDERS && can_loop; i++)
		b->free_head[i & BUDDY_META_ORDER] = 0;
	b->stats.chunks_spare = 0;
	b->stats.runs_in_use = b->stats.run_pages_in_use = 0;
	cache_reset(b);
	return 0;
}

/*
 * The default allocator is destroyed under its set-up lock, so that nobody initialises
 * it again half way through (default.c).
 */
__weak int buddy_destroy(struct buddy __arena *b __arg_arena)
{
	arena_subprog_init();
	if (b == &buddy)
		return default_destroy(false);
	return destroy_one(b);
}

/*
 * may_sleep is a constant at each call site: the nosleep variants contain no page kfunc
 * call at all, which is what lets non-sleepable programs call them on 6.12.
 */
static __always_inline u64 alloc_common(struct buddy __arena *b, u64 size, bool may_sleep,
					const char *who)
{
	u32 order, carve = 0;
	s64 addr = 0;

	if (!buddy_is_ready(b)) {
		arena_stderr("%s: %llx is not an initialised allocator", who, (u64)b);
		return 0;
	}
	if (!size || size > (may_sleep ? (u64)RUN_MAX_PAGES * 4096 : BUDDY_MAX_SIZE)) {
		atomic_add(&b->stats.bad_calls, 1);
		arena_stderr("%s: size %llu out of range (1 .. %llu)", who, size,
			     may_sleep ? (u64)RUN_MAX_PAGES * 4096 : BUDDY_MAX_SIZE);
		return 0;
	}
	if (may_sleep && size > BUDDY_MAX_SIZE) {
		addr = alloc_run(b, size);
		if (!addr) {
			atomic_add(&b->stats.failed_allocs, 1);
			arena_stderr("%s: no pages for %llu bytes", who, size);
		}
		return addr;
	}
	order = buddy_order(size);
	if (order < BUDDY_CACHE_ORDERS) {
		addr = __buddy_cache_get(b, order, size);
		/* An empty cache: a batch for it (a busy one, or none: one block). */
		if (addr == BUDDY_CACHE_EMPTY) {
			carve = BUDDY_CACHE_BATCH_SHIFT;
			addr = 0;
		}
	}
	if (!addr)
		addr = buddy_take_block(b, order, carve, size, may_sleep, true);
	if (addr == -ETIMEDOUT) {
		arena_stderr("%s: lock timeout on %llx", who, (u64)b);
		return 0;
	}
	if (addr < 0) {
		atomic_add(&b->stats.failed_allocs, 1);
		arena_stderr("%s: out of memory for %llu bytes", who, size);
		return 0;
	}
	/* Read back, not remembered across the loop: README, known limits (6.12's pruning). */
	if (meta_get(addr) & BUDDY_META_CARVED)
		__buddy_cache_fill(b, addr);
	asan_hook_alloc(addr, size, (u64)BUDDY_MIN_SIZE << order);
	return addr;
}

__weak u64 buddy_alloc_addr(struct buddy __arena *b __arg_arena, u64 size)
{
	arena_subprog_init();
	return alloc_common(b, size, true, "buddy_alloc");
}

__weak u64 buddy_alloc_nosleep_addr(struct buddy __arena *b __arg_arena, u64 size)
{
	arena_subprog_init();
	return alloc_common(b, size, false, "buddy_alloc_nosleep");
}

static __always_inline int free_common(struct buddy __arena *b, void __arena *ptr,
				       bool may_sleep, const char *who)
{
	u64 addr = (u64)ptr;
	int bad;
	s64 ret;

	if (!ptr)
		return 0;
	if (!buddy_is_ready(b)) {
		arena_stderr("%s: %llx is not an initialised allocator", who, (u64)b);
		return -EINVAL;
	}
	if (!in_window(addr)) {
		if (!may_sleep) {
			atomic_add(&b->stats.bad_calls, 1);
			arena_stderr("%s: %llx is not a block of %llx (page runs need buddy_free)",
				     who, addr, (u64)b);
			return -EINVAL;
		}
		bad = free_run(b, addr);
		if (bad == -ETIMEDOUT) {
			arena_stderr("%s: lock timeout on %llx", who, (u64)b);
		} else if (bad) {
			asan_hook_bad_free(addr, ASAN_INVALID_FREE);
			atomic_add(&b->stats.bad_calls, 1);
			arena_stderr(
				"%s: %llx was not allocated by %llx (foreign pointer or double free)",
				who, addr, (u64)b);
		}
		return bad ? bad : 0;
	}
	/* Poisoned while the block is still ours: once free, anyone may reuse it. */
	if (ASAN_ENABLED && !(addr & (BUDDY_MIN_SIZE - 1)) &&
	    buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] == (u64)b &&
	    (meta_get(addr) & (BUDDY_META_USED | BUDDY_META_FREE)) == BUDDY_META_USED)
		asan_hook_free(addr, (u64)BUDDY_MIN_SIZE << (meta_get(addr) & BUDDY_META_ORDER));
	/* Most frees of small blocks end here, without the lock. */
	if (!(addr & (BUDDY_MIN_SIZE - 1)) &&
	    buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] == (u64)b) {
		bad = __buddy_cache_put(b, addr);
		if (bad == BUDDY_PUT_FULL && __buddy_cache_spill(b, addr))
			bad = __buddy_cache_put(b, addr);
		if (bad == BUDDY_PUT_CACHED)
			return 0;
	}
	ret = buddy_put_block(b, addr, may_sleep ? 0 : BUDDY_FREE_KEEP_SPARE);
	if (ret == BUDDY_PUT_DEFERRED) {
		arena_stderr("%s: lock timeout on %llx: the free of %llx is deferred", who,
			     (u64)b, addr);
		return 0;
	}
	if (ret == -ETIMEDOUT) {
		arena_stderr("%s: lock timeout on %llx", who, (u64)b);
		return -ETIMEDOUT;
	}
	if (ret < 0)
		asan_hook_bad_free(addr, ret == -(BUDDY_BAD + BUDDY_BAD_DOUBLE_FREE) ?
				   ASAN_DOUBLE_FREE : ASAN_INVALID_FREE);
	switch (-ret - BUDDY_BAD) {
	case BUDDY_BAD_FOREIGN:
		arena_stderr("%s: %llx is in a chunk %llx does not own", who, addr, (u64)b);
		return -EINVAL;
	case BUDDY_BAD_MISALIGNED:
		arena_stderr("%s: %llx is not 16-byte aligned", who, addr);
		return -EINVAL;
	case BUDDY_BAD_DOUBLE_FREE:
		arena_stderr("%s: double free of %llx", who, addr);
		return -EINVAL;
	case BUDDY_BAD_INTERIOR:
		arena_stderr("%s: %llx points into a block or to unallocated memory", who,
			     addr);
		return -EINVAL;
	case BUDDY_BAD_METADATA:
		arena_stderr("%s: metadata of %llx is corrupted", who, addr);
		return -EINVAL;
	}
	/* The chunk merged whole and taken out, if still free: then it goes back. */
	if (may_sleep && ret > 0) {
		ret = buddy_patiently(b, buddy_coalesce(b) ?: __buddy_take_chunk(b, ret - 1));
		if (ret > 0)
			__buddy_release_chunk(b, ret - 1);
	}
	return 0;
}

__weak int buddy_free(struct buddy __arena *b __arg_arena, void __arena *ptr __arg_arena)
{
	arena_subprog_init();
	return free_common(b, ptr, true, "buddy_free");
}

__weak int buddy_free_nosleep(struct buddy __arena *b __arg_arena,
			      void __arena *ptr __arg_arena)
{
	arena_subprog_init();
	return free_common(b, ptr, false, "buddy_free_nosleep");
}

__weak int buddy_flush_caches(struct buddy __arena *b __arg_arena)
{
	u32 n;

	arena_subprog_init();
	if (!buddy_is_ready(b)) {
		arena_stderr("%s: %llx is not an initialised allocator", __func__, (u64)b);
		return -EINVAL;
	}
	n = __buddy_cache_flush(b);
	/* On a timeout the blocks wait on the deferred list: nothing is lost. */
	if (READ_ONCE(b->deferred) && buddy_patiently(b, __buddy_drain(b))) {
		arena_stderr("%s: lock timeout on %llx", __func__, (u64)b);
		return -ETIMEDOUT;
	}
	return n;
}

/*
 * Give back spares beyond floor (at least BUDDY_SPARE_CHUNKS), or with by_peak beyond
 * what the recent peak needs too.
 */
static __always_inline int trim_common(struct buddy __arena *b, bool by_peak, u32 floor,
				       const char *who)
{
	int i, n = 0;
	s64 slot;

	if (!buddy_is_ready(b)) {
		arena_stderr("%s: %llx is not an initialised allocator", who, (u64)b);
		return -EINVAL;
	}
	/* The CPUs' cached blocks first: they may be all that keeps a chunk in use. */
	if ((__buddy_cache_flush(b) || READ_ONCE(b->deferred)) &&
	    buddy_patiently(b, __buddy_drain(b))) {
		arena_stderr("%s: lock timeout on %llx", who, (u64)b);
		return -ETIMEDOUT;
	}
	for (i = zero; i < BUDDY_NR_SLOTS && can_loop; i++) {
		slot = buddy_patiently(b, buddy_coalesce(b) ?:
					  __buddy_take_spare(b, by_peak, floor));
		if (slot == -ETIMEDOUT) {
			arena_stderr("%s: lock timeout on %llx", who, (u64)b);
			return -ETIMEDOUT;
		}
		if (slot <= 0)
			break;
		__buddy_release_chunk(b, slot - 1);
		n++;
	}
	return n;
}

__weak int buddy_trim(struct buddy __arena *b __arg_arena)
{
	arena_subprog_init();
	return trim_common(b, false, BUDDY_SPARE_CHUNKS, "buddy_trim");
}

__weak int buddy_shrink(struct buddy __arena *b __arg_arena)
{
	arena_subprog_init();
	return trim_common(b, true, BUDDY_SPARE_CHUNKS, "buddy_shrink");
}

__weak int buddy_trim_keep(struct buddy __arena *b __arg_arena, u32 keep)
{
	arena_subprog_init();
	return trim_common(b, false, keep, "buddy_trim_keep");
}

__weak int buddy_reserve(struct buddy __arena *b __arg_arena, u32 spares)
{
	int i, err;

	arena_subprog_init();
	if (!buddy_is_ready(b)) {
		arena_stderr("%s: %llx is not an initialised allocator", __func__, (u64)b);
		return -EINVAL;
	}
	for (i = zero; i < BUDDY_NR_SLOTS && can_loop; i++) {
		if (READ_ONCE(b->stats.chunks_spare) >= spares)
			return 0;
		err = __buddy_add_chunk(b);
		if (err)
			return err;
	}
	return -E2BIG;
}
