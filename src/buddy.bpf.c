// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The buddy allocator. include/libarena/buddy.h states the API, alloc_types.h the layout
 * and the invariants.
 * The entry points (the public calls) do their work through steps, each a global
 * function that calls nothing else of ours (buddy/internal.h): the verifier checks each
 * once per program, and an entry point takes two frames. A step that touches the lists
 * takes b->lock itself: everything under it runs with preemption disabled and is inline
 * (6.12 forbids global calls there); page kfuncs and log lines come after unlock.
 */
#include <libarena/buddy.h>
#include "alloc_internal.h"
#include "buddy/internal.h"

/* Free blocks hold the allocator's links: its own accesses are not checked. */
ARENA_NOASAN_BEGIN

#define LOCK_SPINS		(1 << 23)	/* waits for the default allocator's set-up */
#define CLAIM_TRIES		8
#define RUN_MAX_PAGES		(64u << 8)	/* 64 MiB */
#define RUNS_MAX		65536		/* bound on walking a run list */

struct buddy_registry __arena_global buddy_registry;

/*
 * The default allocator: arena_malloc()'s for sizes beyond HEAP_MEDIUM_MAX, and the
 * global that upstream programs reach as `extern struct buddy __arena buddy;`. It is
 * ready when its magic says so, whoever initialised it (default_ready(), or a program's
 * own buddy_init(&buddy)); arena_buddy_state lets one caller at a time initialise or
 * destroy it.
 */
struct buddy __arena_global buddy;
u32 __arena_global arena_buddy_state;	/* 1 while a caller sets it up or tears it down */

static __always_inline u64 buddy_arena(void)
{
	return arena_base_of((u64)&buddy_registry);
}

static __always_inline u32 slot_of(u64 addr)
{
	return ((u32)addr - BUDDY_WINDOW_START) >> BUDDY_CHUNK_SHIFT;
}

static __always_inline u64 chunk_addr(u32 slot)
{
	return buddy_arena() + BUDDY_WINDOW_START + ((u64)slot << BUDDY_CHUNK_SHIFT);
}

static __always_inline u64 meta_addr(u32 slot)
{
	return buddy_arena() + BUDDY_META_START + (u64)slot * BUDDY_META_SIZE;
}

static __always_inline bool in_window(u64 addr)
{
	u32 off = addr;

	return arena_base_of(addr) == buddy_arena() && off >= BUDDY_WINDOW_START &&
	       off < BUDDY_WINDOW_END;
}

/* The metadata byte of the 16-byte unit at addr (addr inside the window). */
static __always_inline u8 __arena *meta_of(u64 addr)
{
	u32 unit = ((u32)addr & (BUDDY_CHUNK_SIZE - 1)) >> BUDDY_MIN_SHIFT;

	return (u8 __arena *)(meta_addr(slot_of(addr)) + unit);
}

/*
 * Change the metadata byte of the block at addr from old to new, by compare-and-swap of
 * the aligned word that holds it: the other bytes may change meanwhile (the lock's
 * holder writing its blocks'), this one only if it still is old. False when it is not
 * (the loop budget ending counts as not: the caller then takes the careful path).
 */
static __always_inline bool meta_swap(u64 addr, u8 old, u8 new)
{
	u64 m = (u64)meta_of(addr);
	u32 __arena *word = (u32 __arena *)(m & ~3ull);
	u32 shift = (m & 3) * 8, w;

	while (can_loop) {
		w = READ_ONCE(*word);
		if (((w >> shift) & 0xff) != old)
			return false;
		if (cmpxchg(word, w, (w & ~(0xffu << shift)) | ((u32)new << shift)) == w)
			return true;
	}
	return false;
}

/*
 * The metadata bytes: once per access, as other CPUs may change a neighbour's byte of
 * the same word (meta_swap()) or this one (a block of their cache) meanwhile.
 */
static __always_inline u8 meta_get(u64 addr)
{
	return READ_ONCE(*meta_of(addr));
}

static __always_inline void meta_set(u64 addr, u8 m)
{
	WRITE_ONCE(*meta_of(addr), m);
}

/*
 * A holder on this CPU is a context that this one interrupted (a tracing program in the
 * middle of a free), which no wait can help. Host threads stand for CPUs but may be
 * preempted while they hold the lock, so on the host nobody is taken for that.
 */
static __always_inline bool held_by_this_cpu(struct buddy __arena *b)
{
#ifdef __BPF__
	return READ_ONCE(b->holder) == bpf_get_smp_processor_id() + 1;
#else
	return false;
#endif
}

/*
 * Take b's lock for a step (libarena/spinlock.h: fair, and a waiter that gives up loses
 * nothing), recording its holder: 0; -EDEADLK when the holder is a context this CPU
 * interrupted, which no wait can help; -ETIMEDOUT when one wait ran out (250 ms, or the
 * spins of the step's loop budget). The entry point then calls the step again for as
 * long as BUDDY_LOCK_PATIENCE_NS lasts (buddy_wait_more()), each call with a loop
 * budget of its own.
 */
static __always_inline int buddy_lock(struct buddy __arena *b)
{
	if (arena_spin_trylock(&b->lock)) {
		if (held_by_this_cpu(b))
			return -EDEADLK;
		if (arena_spin_lock(&b->lock))
			return -ETIMEDOUT;
	}
	b->holder = bpf_get_smp_processor_id() + 1;
	return 0;
}

static __always_inline void buddy_unlock(struct buddy __arena *b)
{
	/* Before the release: the next holder's CPU is written after this. */
	b->holder = 0;
	arena_spin_unlock(&b->lock);
}

/* A free block of this order that b may touch: anything else is corruption. */
static __always_inline bool valid_free(struct buddy __arena *b, u64 addr, u32 order)
{
	if (!in_window(addr) || (addr & (BUDDY_MIN_SIZE - 1)))
		return false;
	if (buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] != (u64)b)
		return false;
	return meta_get(addr) == (BUDDY_META_FREE | order);
}

static __always_inline void list_push(struct buddy __arena *b, u32 order, u64 addr)
{
	struct buddy_header __arena *f = (struct buddy_header __arena *)addr;
	u64 head;

	order &= BUDDY_META_ORDER;
	head = b->free_head[order];
	f->next = head;
	f->prev = 0;
	if (head)
		((struct buddy_header __arena *)head)->prev = addr;
	b->free_head[order] = addr;
}

/* Drop a list whose links cannot be trusted: its blocks leak, nothing is overwritten. */
static __always_inline void list_drop(struct buddy __arena *b, u32 order)
{
	b->free_head[order & BUDDY_META_ORDER] = 0;
	b->stats.corruptions++;
}

static __always_inline int list_unlink(struct buddy __arena *b, u32 order, u64 addr)
{
	struct buddy_header __arena *f = (struct buddy_header __arena *)addr;
	u64 next = f->next, prev = f->prev;

	order &= BUDDY_META_ORDER;
	/*
	 * The neighbours must point back at addr (as CONFIG_DEBUG_LIST checks), inside the
	 * window: a link scribbled over is caught before anything is written through it.
	 * Not their metadata too: that held more values at once than the steps' stack has.
	 */
	if ((next && (!in_window(next) || ((struct buddy_header __arena *)next)->prev != addr)) ||
	    (prev && (!in_window(prev) || ((struct buddy_header __arena *)prev)->next != addr)) ||
	    (!prev && b->free_head[order] != addr)) {
		list_drop(b, order);
		return -EUCLEAN;
	}
	if (prev)
		((struct buddy_header __arena *)prev)->next = next;
	else
		b->free_head[order] = next;
	if (next)
		((struct buddy_header __arena *)next)->prev = prev;
	return 0;
}

/* Take the first block of an order's list, or 0. */
static __always_inline u64 list_pop(struct buddy __arena *b, u32 order)
{
	u64 addr;

	order &= BUDDY_META_ORDER;
	addr = b->free_head[order];
	if (!addr)
		return 0;
	if (!valid_free(b, addr, order) || list_unlink(b, order, addr)) {
		list_drop(b, order);
		return 0;
	}
	return addr;
}

/* What alloc_locked() says when the list it took from was damaged (no address). */
#define BUDDY_TAKE_AGAIN	1

/*
 * Take a block of the order asked for, or with carve (a CPU's cache refill, shift
 * BUDDY_CACHE_BATCH_SHIFT) a run of up to 1 << carve such blocks cut from the first free
 * block large enough for one, all counted in use: its first block's metadata is marked
 * CARVED and its first word says how many for cache_fill(). 0 when there is none,
 * BUDDY_TAKE_AGAIN when the list it tried was damaged (and dropped): look again.
 */
static __always_inline u64 alloc_locked(struct buddy __arena *b, u32 order, u32 carve)
{
	u64 addr = 0, half, in_use;
	u32 o, slot;

	/*
	 * The caller's order and carve are constants on each of its paths: made opaque, the
	 * search and the split below are verified once, not once per value.
	 */
	order = (order | zero) & BUDDY_META_ORDER;
	carve = (carve | zero) & (2 * BUDDY_CACHE_BATCH_SHIFT - 1);
	/* The first list with a block: a loop that only reads heads, cheap to verify. */
	for (o = order; o < BUDDY_ORDERS && can_loop; o++)
		if (READ_ONCE(b->free_head[o & BUDDY_META_ORDER]))
			break;
	if (o >= BUDDY_ORDERS)
		return 0;
	addr = list_pop(b, o);
	if (!addr)
		return BUDDY_TAKE_AGAIN;	/* that list was damaged, and dropped */
	/* A batch as large as the block found allows: best fit comes first. */
	if (o - order < carve)
		carve = o - order;
	slot = slot_of(addr) & (BUDDY_NR_SLOTS - 1);
	if (!buddy_registry.in_use[slot]) {
		/* A spare chunk is in use again. */
		b->stats.chunks_spare--;
		in_use = b->stats.chunks_held - b->stats.chunks_spare;
		if (in_use > b->stats.chunks_peak)
			b->stats.chunks_peak = in_use;
		if (in_use > b->period_peak)
			b->period_peak = in_use;
	}
	buddy_registry.in_use[slot] += 1u << carve;
	b->stats.blocks_in_use[order] += 1u << carve;
	b->stats.allocs += 1u << carve;
	/* Split: keep the lower half, free the upper one, until the size fits. */
	while (o > order + carve && can_loop) {
		o--;
		half = addr + ((u64)BUDDY_MIN_SIZE << o);
		meta_set(half, BUDDY_META_FREE | o);
		list_push(b, o, half);
	}
	if (carve) {
		b->stats.cache_refills++;
		*(u64 __arena *)addr = 1u << carve;
		meta_set(addr, BUDDY_META_USED | BUDDY_META_CARVED | order);
	} else {
		meta_set(addr, BUDDY_META_USED | order);
	}
	return addr;
}

/*
 * Merge the free block x of order o with its free buddies and put the result on its
 * list (on absolute addresses: fewer values live, less stack). With may_defer, a buddy
 * that is the only block of its order's list stays apart (see buddy.h).
 */
static __always_inline void merge_push(struct buddy __arena *b, u64 x, u32 o,
				       bool may_defer)
{
	bool lazy = false;
	u64 mate;

	while (o < BUDDY_MAX_ORDER && can_loop) {
		/* Chunks are aligned to their size: a buddy differs in one address bit. */
		mate = x ^ ((u64)BUDDY_MIN_SIZE << o);
		if (meta_get(mate) != (BUDDY_META_FREE | o))
			break;
		if (may_defer && b->free_head[o & BUDDY_META_ORDER] == mate &&
		    !((struct buddy_header __arena *)mate)->next) {
			lazy = true;
			break;
		}
		if (list_unlink(b, o, mate))
			break;
		meta_set(mate, 0);
		x &= ~((u64)BUDDY_MIN_SIZE << o);
		o++;
	}
	meta_set(x, BUDDY_META_FREE | o);
	list_push(b, o, x);
	if (lazy) {
		b->lazy[o & BUDDY_META_ORDER] = BUDDY_LAZY(x, o);
		b->lazy_mask |= 1u << (o & BUDDY_META_ORDER);
		b->stats.lazy_frees++;
	}
}

/*
 * Merge the pair that a free left apart at the lowest order with one (see buddy.h), and
 * on up: a stale lazy[] entry is checked like any list entry, so what is merged is a
 * real pair of free buddies or nothing. pass 0 counts a pass. True while more are left.
 * One order a call: __buddy_coalesce's callers loop, so that no loop nests in another.
 */
static __always_inline bool coalesce_one(struct buddy __arena *b, u32 pass)
{
	u32 mask = b->lazy_mask, o;
	u64 entry, x;

	if (!mask)
		return false;
	o = (arena_fls(mask & -mask) - 1) & BUDDY_META_ORDER;
	b->lazy_mask = mask & ~(1u << o);
	entry = b->lazy[o];
	b->lazy[o] = 0;
	if (!pass)
		b->stats.coalesces++;
	/* Its order from memory, no constant: one path below whatever the slot was. */
	o = BUDDY_LAZY_ORDER(entry);
	x = BUDDY_LAZY_BLOCK(entry);
	if (x && o < BUDDY_MAX_ORDER && valid_free(b, x, o) &&
	    meta_get(x ^ ((u64)BUDDY_MIN_SIZE << o)) == (BUDDY_META_FREE | o) &&
	    !list_unlink(b, o, x)) {
		meta_set(x, 0);
		merge_push(b, x, o, false);
	}
	return b->lazy_mask;
}

/*
 * Take a spare chunk (slot) out of b once its blocks are merged: its slot + 1, or 0 when
 * it is not one free block (then it stays, as a spare).
 */
static __always_inline u32 take_chunk(struct buddy __arena *b, u32 slot)
{
	u64 chunk;

	slot &= BUDDY_NR_SLOTS - 1;
	chunk = chunk_addr(slot);
	if (buddy_registry.owner[slot] != (u64)b || buddy_registry.in_use[slot] ||
	    meta_get(chunk) != (BUDDY_META_FREE | BUDDY_MAX_ORDER) ||
	    list_unlink(b, BUDDY_MAX_ORDER, chunk))
		return 0;
	meta_set(chunk, 0);
	b->stats.chunks_spare--;
	b->stats.chunks_held--;
	return slot + 1;
}

/*
 * Free a block, merging it with free buddies. Returns 0 or -(BUDDY_BAD + reason). When
 * the whole chunk ends up free and spares are plentiful, its slot + 1: the caller merges
 * what is apart and takes the chunk out to give it back. (Through the return value, not
 * a pointer: a local whose address is taken would sit on the stack of every caller.)
 */
static __always_inline s64 free_locked(struct buddy __arena *b, u64 addr, u32 flags)
{
	u32 slot = slot_of(addr) & (BUDDY_NR_SLOTS - 1), o;
	u8 m;

	if (buddy_registry.owner[slot] != (u64)b)
		return -(BUDDY_BAD + BUDDY_BAD_FOREIGN);
	if (addr & (BUDDY_MIN_SIZE - 1))
		return -(BUDDY_BAD + BUDDY_BAD_MISALIGNED);
	m = meta_get(addr);
	/* A cached block is free to its program, but the deferred list's to give back. */
	if ((m & BUDDY_META_FREE) || ((m & BUDDY_META_CACHED) && !(flags & BUDDY_FREE_DEFERRED)))
		return -(BUDDY_BAD + BUDDY_BAD_DOUBLE_FREE);
	if (!(m & (BUDDY_META_USED | BUDDY_META_CACHED)))
		return -(BUDDY_BAD + BUDDY_BAD_INTERIOR);
	o = m & BUDDY_META_ORDER;
	/* Chunks are aligned to their size: so is every block, in the address itself. */
	if ((m & BUDDY_META_CARVED) || (addr & (((u64)BUDDY_MIN_SIZE << o) - 1)))
		return -(BUDDY_BAD + BUDDY_BAD_METADATA);
	/* A free into a CPU's cache may race with this one (a double free): one wins. */
	if (!meta_swap(addr, m, 0))
		return -(BUDDY_BAD + BUDDY_BAD_DOUBLE_FREE);
	b->stats.blocks_in_use[o]--;
	b->stats.frees++;
	/* Not for the deferred list: its drain merges at once (and its stack stays small). */
	merge_push(b, addr, o, !(flags & BUDDY_FREE_DEFERRED));

	/* A period ends: the peak becomes the most in use during it. */
	if (!(b->stats.frees % BUDDY_PEAK_PERIOD)) {
		b->stats.chunks_peak = b->period_peak;
		b->period_peak = b->stats.chunks_held - b->stats.chunks_spare;
	}
	/* (A count of 0 here is user space's doing: the chunk stays in use, leaked.) */
	if (buddy_registry.in_use[slot] && !--buddy_registry.in_use[slot]) {
		b->stats.chunks_spare++;
		/* Enough spares already: this chunk goes back to the kernel. */
		if (!(flags & BUDDY_FREE_KEEP_SPARE) &&
		    b->stats.chunks_spare > BUDDY_SPARE_CHUNKS &&
		    b->stats.chunks_spare > b->stats.chunks_peak)
			return slot + 1;
	}
	return 0;
}

/*
 * Push a chain of blocks (first .. last, linked through their first words, each looking
 * allocated by b) on the deferred list, for the next allocation to free. Each failed
 * swap is another CPU's successful push or drain, so the loop ends long before its
 * budget does; false if it ever did not.
 */
static __always_inline bool defer_chain(struct buddy __arena *b, u64 first, u64 last)
{
	u64 old;

	while (can_loop) {
		old = READ_ONCE(b->deferred);
		*(u64 __arena *)last = old;
		if (cmpxchg(&b->deferred, old, first) == old)
			return true;
	}
	return false;
}

/*
 * A free that timed out on the lock: push the block for the next allocation. Only a
 * block that looks allocated by b (its chunk, its metadata) is taken; the holder checks
 * it again. False when it does not look like one, or the push gave up.
 */
static __always_inline bool defer_free(struct buddy __arena *b, u64 addr)
{
	u8 m;

	if (!in_window(addr) || (addr & (BUDDY_MIN_SIZE - 1)) ||
	    buddy_registry.owner[slot_of(addr) & (BUDDY_NR_SLOTS - 1)] != (u64)b)
		return false;
	/*
	 * Marked cached first, which the drain frees: a second free of the block meanwhile
	 * is a double free then, and cannot link it into a CPU's cache as well.
	 */
	m = meta_get(addr);
	if ((m & ~BUDDY_META_ORDER) != BUDDY_META_USED ||
	    !meta_swap(addr, m, m ^ (BUDDY_META_USED | BUDDY_META_CACHED)))
		return false;
	if (!defer_chain(b, addr, addr)) {
		meta_swap(addr, m ^ (BUDDY_META_USED | BUDDY_META_CACHED), m);
		return false;
	}
	atomic_add(&b->stats.deferred_frees, 1);
	return true;
}

/*
 * Under the lock: free what timed-out frees left. Spares are kept (giving a chunk back
 * needs a sleepable caller); a block that fails the checks is counted, not freed. The
 * list is user-writable arena memory: the walk is bounded by the loop budget. Inline:
 * it calls free_locked at the depth of the caller's own free (callers of arena_free
 * from deep in a data structure have no frame to spare).
 */
static __always_inline void drain_deferred(struct buddy __arena *b)
{
	u64 addr = xchg(&b->deferred, 0), next;

	while (addr && can_loop) {
		if (!in_window(addr)) {
			b->stats.corruptions++;
			return;
		}
		next = *(u64 __arena *)addr;
		if (free_locked(b, addr, BUDDY_FREE_KEEP_SPARE | BUDDY_FREE_DEFERRED))
			b->stats.bad_calls++;
		addr = next;
	}
}

/* ---- the CPUs' caches of small blocks (alloc_types.h: struct buddy_cpu_cache) ---- */

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

static __always_inline void release_slot(u32 slot)
{
	slot &= BUDDY_NR_SLOTS - 1;
	buddy_registry.owner[slot] = 0;
	buddy_registry.in_use[slot] = 0;
	arena_clear_bit(buddy_registry.claimed, slot);
}

/* Give a chunk's pages back; the slot is free for anyone afterwards. */
static __always_inline void release_chunk(struct buddy __arena *b, u32 slot)
{
	slot &= BUDDY_NR_SLOTS - 1;
	bpf_arena_free_pages(&arena, (void __arena *)chunk_addr(slot), BUDDY_CHUNK_PAGES);
	bpf_arena_free_pages(&arena, (void __arena *)meta_addr(slot), BUDDY_META_PAGES);
	asan_hook_poison(chunk_addr(slot), BUDDY_CHUNK_SIZE, ASAN_RELEASED);
	release_slot(slot);
	atomic_add(&b->stats.chunks_returned, 1);
	atomic_add(&b->stats.pages_returned, BUDDY_CHUNK_PAGES + BUDDY_META_PAGES);
	atomic_add(&b->stats.unmap_calls, 2);
}

/* Claim a free chunk slot: the lowest clear bit of the registry, by compare-and-swap. */
static __always_inline int claim_slot(void)
{
	u32 slot;

	if (!arena_claim_bit(buddy_registry.claimed, BUDDY_NR_SLOTS / 64, &slot))
		return -ENOMEM;
	return slot;
}

/* Map a new chunk and its metadata, and hand its one big block to b. Sleepable. */
static __always_inline int add_chunk(struct buddy __arena *b)
{
	void __arena *data, *meta;
	int slot, i;

	if (b->max_chunks && b->stats.chunks_held >= b->max_chunks)
		return -ENOMEM;
	for (i = zero; i < CLAIM_TRIES && can_loop; i++) {
		slot = claim_slot();
		if (slot < 0)
			return -ENOMEM;
		data = bpf_arena_alloc_pages(&arena, (void __arena *)chunk_addr(slot),
					     BUDDY_CHUNK_PAGES, NUMA_NO_NODE, 0);
		meta = bpf_arena_alloc_pages(&arena, (void __arena *)meta_addr(slot),
					     BUDDY_META_PAGES, NUMA_NO_NODE, 0);
		if (data && meta) {
			/* Before the block is on a list: nobody may have it yet. */
			/* With the granule before it (the heap's window is below slot 0). */
			asan_hook_map((u64)data - ASAN_SHADOW_SCALE,
				      BUDDY_CHUNK_SIZE + ASAN_SHADOW_SCALE, ASAN_UNALLOCATED);
			asan_hook_poison((u64)data, BUDDY_CHUNK_SIZE, ASAN_UNALLOCATED);
			buddy_registry.owner[slot & (BUDDY_NR_SLOTS - 1)] = (u64)b;
			buddy_registry.in_use[slot & (BUDDY_NR_SLOTS - 1)] = 0;
			if (buddy_lock(b))
				goto undo;
			*(u8 __arena *)meta = BUDDY_META_FREE | BUDDY_MAX_ORDER;
			list_push(b, BUDDY_MAX_ORDER, (u64)data);
			b->stats.chunks_held++;
			b->stats.chunks_spare++;
			b->stats.map_calls += 2;
			b->stats.map_pages += BUDDY_CHUNK_PAGES + BUDDY_META_PAGES;
			buddy_unlock(b);
			return 0;
		}
		/*
		 * Someone else maps pages there (user space touching the window faults pages
		 * in, for one): leave the slot claimed so nobody tries it again, try another.
		 */
		if (data)
			bpf_arena_free_pages(&arena, data, BUDDY_CHUNK_PAGES);
		if (meta)
			bpf_arena_free_pages(&arena, meta, BUDDY_META_PAGES);
	}
	return -ENOMEM;
undo:
	bpf_arena_free_pages(&arena, data, BUDDY_CHUNK_PAGES);
	bpf_arena_free_pages(&arena, meta, BUDDY_META_PAGES);
	release_slot(slot);
	return -ETIMEDOUT;
}

#include "buddy/runs.c"

/* Take one spare chunk beyond keep out of b: its slot + 1, or 0. */
static __always_inline u32 take_spare(struct buddy __arena *b, u64 keep)
{
	u64 addr;

	if (b->stats.chunks_spare <= keep)
		return 0;
	addr = b->free_head[BUDDY_MAX_ORDER];
	if (!addr)
		return 0;
	return take_chunk(b, slot_of(addr));
}

/* ---- the steps (buddy/internal.h) ---- */

/*
 * A block (or a cache's batch) from the lists: it, 0 when none fits, -EAGAIN when a
 * damaged list was dropped (look again), or buddy_lock()'s error.
 */
__weak s64 __buddy_take(struct buddy __arena *b __arg_arena, u32 order, u32 carve, u64 size)
{
	u64 addr;
	int err;

	arena_subprog_init();
	err = buddy_lock(b);
	if (err)
		return err;
	addr = alloc_locked(b, order, carve);
	if (addr > BUDDY_TAKE_AGAIN)
		b->stats.bytes_requested += size;
	buddy_unlock(b);
	return addr == BUDDY_TAKE_AGAIN ? -EAGAIN : (s64)addr;
}

/* The frees that timed out on the lock (and cache spills), done now: 0 or a lock error. */
__weak int __buddy_drain(struct buddy __arena *b __arg_arena)
{
	int err;

	arena_subprog_init();
	err = buddy_lock(b);
	if (err)
		return err;
	drain_deferred(b);
	buddy_unlock(b);
	return 0;
}

/*
 * Merge a pair that frees left apart (pass: 0 for the first call of a pass): 1 while
 * more are left, 0 when none is, or a lock error. buddy_coalesce() makes the pass.
 */
__weak int __buddy_coalesce(struct buddy __arena *b __arg_arena, u32 pass)
{
	bool more;
	int err;

	arena_subprog_init();
	err = buddy_lock(b);
	if (err)
		return err;
	more = coalesce_one(b, pass);
	buddy_unlock(b);
	return more;
}

/*
 * Take spare chunk slot out of b to give back, if it is one free block: slot + 1, 0, or
 * a lock error.
 */
__weak s64 __buddy_take_chunk(struct buddy __arena *b __arg_arena, u32 slot)
{
	int err;

	arena_subprog_init();
	err = buddy_lock(b);
	if (err)
		return err;
	slot = take_chunk(b, slot);
	buddy_unlock(b);
	return slot;
}

/*
 * Free a block under the lock: 0, the slot + 1 of a chunk left entirely free that may go
 * back to the kernel (sleepable callers, after buddy_coalesce() and __buddy_take_chunk),
 * -(BUDDY_BAD + reason) for a block that cannot be freed, or a lock error.
 */
__weak s64 __buddy_put(struct buddy __arena *b __arg_arena, u64 addr, u32 flags)
{
	s64 ret;

	arena_subprog_init();
	ret = buddy_lock(b);
	if (ret)
		return ret;
	ret = free_locked(b, addr, flags);
	if (ret < 0)
		b->stats.bad_calls++;
	buddy_unlock(b);
	return ret;
}

/*
 * Take a spare chunk out of b to give back, beyond floor (at least BUDDY_SPARE_CHUNKS),
 * or with by_peak beyond what the recent peak needs too: its slot + 1, 0 when none, or
 * a lock error. Only a chunk merged whole goes: the caller makes a buddy_coalesce()
 * pass first.
 */
__weak s64 __buddy_take_spare(struct buddy __arena *b __arg_arena, u32 by_peak, u32 floor)
{
	u64 keep;
	u32 slot;
	int err;

	arena_subprog_init();
	err = buddy_lock(b);
	if (err)
		return err;
	if (floor < BUDDY_SPARE_CHUNKS)
		floor = BUDDY_SPARE_CHUNKS;
	if (by_peak) {
		keep = b->stats.chunks_peak;
		if (keep < floor)
			keep = floor;
	} else {
		b->stats.chunks_peak = b->period_peak = 0;
		keep = floor;
	}
	slot = take_spare(b, keep);
	buddy_unlock(b);
	return slot;
}

/* The allocator dies (buddy_destroy): from here on every call on b fails. */
__weak int __buddy_kill(struct buddy __arena *b __arg_arena)
{
	int err;

	arena_subprog_init();
	err = buddy_lock(b);
	if (err)
		return err;
	b->magic = 0;
	buddy_unlock(b);
	return 0;
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

static __always_inline bool buddy_ready(struct buddy __arena *b)
{
	return b && b->magic == BUDDY_MAGIC;
}

static __always_inline int init_one(struct buddy __arena *b)
{
	u32 old = READ_ONCE(b->magic);
	int i, err;

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

static __always_inline int default_destroy(bool quiet);

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

	if (!buddy_ready(b)) {
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

	if (!buddy_ready(b)) {
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
	if (!buddy_ready(b)) {
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
	if (!buddy_ready(b)) {
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

	if (!buddy_ready(b)) {
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
	if (!buddy_ready(b)) {
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

#include "buddy/default.c"

ARENA_NOASAN_END
