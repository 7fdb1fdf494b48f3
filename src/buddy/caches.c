// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 4 of 9: the CPUs' caches of small blocks (alloc_types.h: struct
 * buddy_cpu_cache).
 */
#include "internal.h"

/* A block of order o that b's caches may hold: anything else is corruption. */
static __always_inline bool valid_cached(struct buddy __arena *b, u64 addr, u32 o)
{
	if (!in_window(addr) || (addr & (((u64)BUDDY_MIN_SIZE << o) - 1)))
		return false;
	if (buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] != (u64)b)
		return false;
	return meta_get(addr) == (BUDDY_META_CACHED | o);
}

static __always_inline struct buddy_cpu_cache __arena *cache_at(struct buddy __arena *b,
								  u32 cpu)
{
	return &b->cache[cpu & (BUDDY_CACHE_CPUS - 1)];
}

/* Take cache c: false when someone has it, who then is not waited for. */
static __always_inline bool cache_try(struct buddy_cpu_cache __arena *c)
{
	return !READ_ONCE(c->busy) && cmpxchg(&c->busy, 0, 1) == 0;
}

static __always_inline void cache_give(struct buddy_cpu_cache __arena *c)
{
	/* After the list's stores: the next taker, on any CPU, sees them. */
	smp_store_release(&c->busy, 0);
}

/* This CPU's cache, taken; NULL for a CPU without one, or when someone has it. */
static __always_inline struct buddy_cpu_cache __arena *cache_take(struct buddy __arena *b)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct buddy_cpu_cache __arena *c = cache_at(b, cpu);

	if (cpu >= BUDDY_CACHE_CPUS || !cache_try(c))
		return NULL;
	return c;
}

/* A list whose links cannot be trusted: its blocks leak, nothing is overwritten. */
static __always_inline void cache_drop(struct buddy __arena *b,
				       struct buddy_cpu_cache __arena *c, u32 o)
{
	c->head[o] = c->tail[o] = 0;
	c->nr[o] = 0;
	atomic_add(&b->stats.corruptions, 1);
}

/*
 * A block of order o (below BUDDY_CACHE_ORDERS) from this CPU's cache; BUDDY_CACHE_EMPTY when
 * it has none, 0 when the CPU has no cache or someone has it.
 */
static __always_inline u64 cache_alloc(struct buddy __arena *b, u32 o, u64 size)
{
	struct buddy_cpu_cache __arena *c = cache_take(b);
	u64 addr;

	if (!c)
		return 0;
	addr = c->head[o];
	if (!addr) {
		addr = BUDDY_CACHE_EMPTY;
	} else if (valid_cached(b, addr, o)) {
		c->head[o] = *(u64 __arena *)addr;
		if (!c->head[o])
			c->tail[o] = 0;
		c->nr[o]--;
		c->bytes_requested += size;
		meta_set(addr, BUDDY_META_USED | o);
	} else {
		/* A scribbled link: the list is dropped (its blocks leak), as list_drop() does. */
		cache_drop(b, c, o);
		addr = BUDDY_CACHE_EMPTY;
	}
	cache_give(c);
	return addr;
}

/*
 * Free a block of b (in its window, 16-byte aligned, in a chunk b owns) into this CPU's
 * cache. The locked path says what a block that is not cached here is.
 */
static __always_inline int cache_put(struct buddy __arena *b, u64 addr)
{
	struct buddy_cpu_cache __arena *c;
	u8 m = meta_get(addr);
	u32 o = m & BUDDY_META_ORDER;

	if ((m & ~BUDDY_META_ORDER) != BUDDY_META_USED || o >= BUDDY_CACHE_ORDERS ||
	    (addr & (((u64)BUDDY_MIN_SIZE << o) - 1)))
		return BUDDY_PUT_NOT_CACHED;
	c = cache_take(b);
	if (!c)
		return BUDDY_PUT_NOT_CACHED;
	if (c->nr[o] >= BUDDY_CACHE_CAP(o)) {
		cache_give(c);
		return BUDDY_PUT_FULL;
	}
	if (!meta_swap(addr, m, BUDDY_META_CACHED | o)) {
		cache_give(c);
		return BUDDY_PUT_NOT_CACHED;
	}
	*(u64 __arena *)addr = c->head[o];
	if (!c->head[o])
		c->tail[o] = addr;
	c->head[o] = addr;
	c->nr[o]++;
	cache_give(c);
	return BUDDY_PUT_CACHED;
}

/*
 * This CPU's cache is full of addr's size: give the first BUDDY_CACHE_BATCH of them back,
 * pushed as one chain on the deferred list, which the next allocation frees (cached
 * blocks are the allocator's: its checks pass them there). How many went; none when
 * someone has the cache or the push gave up (then they stay). A link that does not lead
 * to a cached block drops the list, as cache_alloc() does.
 */
static __always_inline u32 cache_spill_batch(struct buddy __arena *b, u64 addr)
{
	struct buddy_cpu_cache __arena *c = cache_take(b);
	u32 o = meta_get(addr) & BUDDY_META_ORDER, n = 0;
	u64 first, last = 0, next;

	if (!c)
		return 0;
	if (o >= BUDDY_CACHE_ORDERS)
		goto out;
	first = next = c->head[o];
	while (next && n < BUDDY_CACHE_BATCH && can_loop) {
		if (!valid_cached(b, next, o)) {
			cache_drop(b, c, o);
			n = 0;
			goto out;
		}
		last = next;
		next = *(u64 __arena *)next;
		n++;
	}
	/* next is what stays: read before the push, after which the blocks are not ours. */
	if (!n || !defer_chain(b, first, last)) {
		if (n)
			*(u64 __arena *)last = next;
		n = 0;
		goto out;
	}
	c->head[o] = next;
	if (!next)
		c->tail[o] = 0;
	c->nr[o] = c->nr[o] > n ? c->nr[o] - n : 0;
	atomic_add(&b->stats.cache_spills, 1);
out:
	cache_give(c);
	return n;
}

/*
 * A refill's run of blocks (alloc_locked() with carve): the first is the caller's, the
 * others go to this CPU's cache, or through the deferred list when someone has the
 * cache. Nobody else can reach them meanwhile: to everyone else they are one used block.
 */
static __always_inline void cache_fill(struct buddy __arena *b, u64 addr)
{
	u32 o = meta_get(addr) & BUDDY_META_ORDER, i, n = *(u64 __arena *)addr;
	struct buddy_cpu_cache __arena *c;
	u64 step = (u64)BUDDY_MIN_SIZE << o, blk;

	meta_set(addr, BUDDY_META_USED | o);
	if (o >= BUDDY_CACHE_ORDERS || n < 2 || n > BUDDY_CACHE_BATCH)
		return;
	c = cache_take(b);
	if (!c) {
		for (i = 1; i < n && can_loop; i++) {
			blk = addr + i * step;
			meta_set(blk, BUDDY_META_CACHED | o);
			*(u64 __arena *)blk = blk + step;
		}
		/* A push that gave up (see defer_chain()) would lose them: counted. */
		if (!defer_chain(b, addr + step, addr + (n - 1) * step))
			atomic_add(&b->stats.corruptions, 1);
		return;
	}
	/* The highest first, so that the cache hands them out in address order. */
	if (!c->head[o])
		c->tail[o] = addr + (n - 1) * step;
	for (i = n - 1; i > 0 && can_loop; i--) {
		blk = addr + i * step;
		meta_set(blk, BUDDY_META_CACHED | o);
		*(u64 __arena *)blk = c->head[o];
		c->head[o] = blk;
		c->nr[o]++;
	}
	cache_give(c);
}

/*
 * Give back what every CPU's cache holds, each list pushed whole (head to tail) on the
 * deferred list; a cache someone has right now keeps its blocks. How many went. One
 * loop over every CPU and order: nested ones are too much for 6.12's verifier.
 */
static __always_inline u32 cache_flush(struct buddy __arena *b)
{
	struct buddy_cpu_cache __arena *c;
	u32 i, o, n = 0;
	u64 head, tail;

	for (i = zero; i < BUDDY_CACHE_CPUS * BUDDY_CACHE_ORDERS && can_loop; i++) {
		c = cache_at(b, i / BUDDY_CACHE_ORDERS);
		o = i % BUDDY_CACHE_ORDERS;
		if (!READ_ONCE(c->head[o]) || !cache_try(c))
			continue;
		head = c->head[o];
		tail = c->tail[o];
		if (head && (!valid_cached(b, head, o) || !valid_cached(b, tail, o))) {
			cache_drop(b, c, o);
		} else if (head && defer_chain(b, head, tail)) {
			n += c->nr[o];
			c->head[o] = c->tail[o] = 0;
			c->nr[o] = 0;
			atomic_add(&b->stats.cache_spills, 1);
		}
		cache_give(c);
	}
	return n;
}

/* Every cache empty and idle: for a new allocator, or one whose chunks are gone. */
static __always_inline void cache_reset(struct buddy __arena *b)
{
	struct buddy_cpu_cache __arena *c;
	u32 i, o;

	for (i = zero; i < BUDDY_CACHE_CPUS * BUDDY_CACHE_ORDERS && can_loop; i++) {
		c = cache_at(b, i / BUDDY_CACHE_ORDERS);
		o = i % BUDDY_CACHE_ORDERS;
		c->head[o] = c->tail[o] = 0;
		c->nr[o] = 0;
		c->bytes_requested = 0;
		c->busy = 0;
	}
}
