// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 3 of 9: the free lists under b's lock: take, split, merge, free and the
 * deferred list.
 */
#include "internal.h"

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

/* alloc_locked() for a step: the bytes counted, a damaged list as -EAGAIN. */
static __always_inline s64 take_counted(struct buddy __arena *b, u32 order, u32 carve,
					u64 size)
{
	u64 addr = alloc_locked(b, order, carve);

	if (addr > BUDDY_TAKE_AGAIN)
		b->stats.bytes_requested += size;
	return addr == BUDDY_TAKE_AGAIN ? -EAGAIN : (s64)addr;
}

/* free_locked() for a step: a block that cannot be freed counted as a bad call. */
static __always_inline s64 put_counted(struct buddy __arena *b, u64 addr, u32 flags)
{
	s64 ret = free_locked(b, addr, flags);

	if (ret < 0)
		b->stats.bad_calls++;
	return ret;
}
