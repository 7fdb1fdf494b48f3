// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 1 of 9: the chunk registry, the default allocator's globals and the metadata
 * of each block, found from its address in O(1).
 */
#include "internal.h"

struct buddy_registry __arena_global buddy_registry;

/*
 * The default allocator: arena_malloc()'s for sizes beyond HEAP_MEDIUM_MAX, and the
 * global that upstream programs reach as `extern struct buddy __arena buddy;`. It is
 * ready when its magic says so, whoever initialised it (default_setup(), or a program's
 * own buddy_init(&buddy)); arena_buddy_state lets one caller at a time initialise or
 * destroy it.
 */
struct buddy __arena_global buddy;
u32 __arena_global arena_buddy_state;	/* 1 while a caller sets it up or tears it down */

static __always_inline u32 slot_of(u64 addr)
{
	return ((u32)addr - BUDDY_WINDOW_START) >> BUDDY_CHUNK_SHIFT;
}

static __always_inline u64 chunk_addr(u32 slot)
{
	return ARENA_USER_BASE + BUDDY_WINDOW_START + ((u64)slot << BUDDY_CHUNK_SHIFT);
}

static __always_inline u64 meta_addr(u32 slot)
{
	return ARENA_USER_BASE + BUDDY_META_START + (u64)slot * BUDDY_META_SIZE;
}

static __always_inline bool in_window(u64 addr)
{
	u32 off = addr;

	return arena_base_of(addr) == ARENA_USER_BASE && off >= BUDDY_WINDOW_START &&
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
