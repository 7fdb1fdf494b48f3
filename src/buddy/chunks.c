// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 5 of 9: chunks claimed, mapped, and given back.
 */
#include "internal.h"

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

/*
 * The spare chunk to give back beyond floor (at least BUDDY_SPARE_CHUNKS), or with
 * by_peak beyond what the recent peak needs too, which then starts a new period: its
 * slot + 1, or 0. Under b's lock.
 */
static __always_inline u32 spare_beyond(struct buddy __arena *b, u32 by_peak, u32 floor)
{
	u64 keep;

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
	return take_spare(b, keep);
}
