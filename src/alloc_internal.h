/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal to the library: what the allocators (buddy.bpf.c, heap.bpf.c) and the
 * sanitizer's runtime (asan.bpf.c) share, below all three of them.
 *
 *   arena_block_lookup(base, addr)  which allocator block holds an address, read from
 *                                   the metadata alloc_types.h lays out
 *   asan_hook_*()                   the sanitizer hook interface, one block: the
 *                                   allocators call these unconditionally; without
 *                                   LIBARENA_ASAN each is an empty inline stub
 *
 * The layers, each using only those below it (scripts/check-layers checks the includes):
 *   base.h > log.h > spinlock.h > alloc_types.h > asan.h > this header > asan.bpf.c >
 *   buddy.bpf.c > heap.bpf.c > the data structures > programs.
 * The sanitizer never calls an allocator: a block it holds back (the quarantine) goes
 * back through asan_hook_park() and arena_quarantine_flush(), which the heap runs.
 */
#ifndef __LIBARENA_ALLOC_INTERNAL_H
#define __LIBARENA_ALLOC_INTERNAL_H

#include <libarena/base.h>
#include <libarena/alloc_types.h>
#include <libarena/asan.h>
#include <libarena/log.h>

/* ---- where the arena is ---- */

/*
 * The allocators and the sanitizer address their windows from ARENA_USER_BASE, the
 * arena map's map_extra (base.h), as the inlined fast paths must: the one way the
 * library finds the arena. Their set-up calls refuse an arena that is elsewhere (a
 * program's own map with another map_extra): true, and a log line for who, when the
 * arena holding addr is not at ARENA_USER_BASE.
 */
#ifdef __BPF__
static __always_inline bool arena_at_user_base(u64 addr)
{
	return arena_base_of(addr) == ARENA_USER_BASE;
}
#else
/* The host tests keep the library's globals in their own data, the windows in place. */
static __always_inline bool arena_at_user_base(u64 addr)
{
	return true;
}
#endif

static __always_inline bool arena_misplaced(const char *who, u64 addr)
{
	if (arena_at_user_base(addr))
		return false;
	arena_stderr(
		"%s: the arena is at %llx, not at ARENA_USER_BASE (%llx): was its map_extra changed?",
		who, arena_base_of(addr), ARENA_USER_BASE);
	return true;
}

/* ---- block lookup ---- */

/*
 * The block an address falls in: its slot size << 32 | the arena offset of its start,
 * ARENA_BLOCK_FREE when the allocator has it free; 0 when no allocator block holds it.
 * A heap object is reported for any address in an active span's objects, handed out or
 * not (the heap's own free check tells those apart); a buddy block by its metadata
 * byte, whichever struct buddy owns the chunk. An unmapped descriptor or metadata page
 * reads as zeroes: no block.
 */
static __always_inline u64 arena_block_lookup(u64 addr)
{
	u64 base = ARENA_USER_BASE;
	struct arena_heap_span __arena *sp;
	u32 off = addr, s, rel, size, o;
	u64 chunk;
	u8 m;

	if (off >= HEAP_WINDOW_START && off < HEAP_WINDOW_END) {
		s = (off - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
		sp = (struct arena_heap_span __arena *)(base + HEAP_DESC_START + (u64)s * 64);
		size = sp->size;
		if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_ACTIVE || !size)
			return 0;
		rel = off - HEAP_WINDOW_START - (s << HEAP_SPAN_SHIFT);
		if (rel / size >= sp->capacity)
			return 0;
		return (u64)size << 32 | (off - rel % size);
	}
	if (off < BUDDY_WINDOW_START || off >= BUDDY_WINDOW_END)
		return 0;
	s = (off - BUDDY_WINDOW_START) >> BUDDY_CHUNK_SHIFT;
	chunk = BUDDY_WINDOW_START + ((u64)s << BUDDY_CHUNK_SHIFT);
	for (o = zero; o < BUDDY_ORDERS && can_loop; o++) {
		rel = (off - (u32)chunk) & ~((BUDDY_MIN_SIZE << o) - 1);
		m = *(u8 __arena *)(base + BUDDY_META_START + (u64)s * BUDDY_META_SIZE +
				    (rel >> BUDDY_MIN_SHIFT));
		/* A block in a CPU's cache is free to its program. */
		if ((m & (BUDDY_META_FREE | BUDDY_META_USED | BUDDY_META_CACHED)) &&
		    (m & BUDDY_META_ORDER) == o)
			return ((u64)BUDDY_MIN_SIZE << o << 32) | (u32)(chunk + rel) |
			       (m & (BUDDY_META_FREE | BUDDY_META_CACHED) ? ARENA_BLOCK_FREE : 0);
	}
	return 0;
}

/* ---- slot bitmaps (the heap's spans, the buddy allocator's chunks) ---- */

/*
 * Claim the lowest clear bit of words[0 .. nr_words - 1] by compare-and-swap: true and
 * its index in *bit, or false when every bit is set. A word is left only when full: a
 * lost race is retried (for the loop budget), never counted as "full".
 */
static __always_inline bool arena_claim_bit(u64 __arena *words, u32 nr_words, u32 *bit)
{
	u64 bits, low;
	u32 w;

	for (w = zero; w < nr_words && can_loop; w++) {
		while (can_loop) {
			bits = READ_ONCE(words[w]);
			if (bits == ~0ull)
				break;
			low = ~bits & (bits + 1);
			if (cmpxchg(&words[w], bits, bits | low) == bits) {
				*bit = w * 64 + arena_fls(low) - 1;
				return true;
			}
		}
	}
	return false;
}

static __always_inline void arena_clear_bit(u64 __arena *words, u32 bit)
{
	atomic_and(&words[bit / 64], ~(1ull << (bit % 64)));
}

/* ---- the sanitizer hook interface ---- */

/*
 * The allocators call these unconditionally. In the sanitizer build most are the
 * runtime's own entry points (src/asan.bpf.c); in the plain build every one is an empty
 * inline stub that compiles to nothing, as the kernel's kasan_*() hooks do.
 */
#if defined(__BPF__) && defined(LIBARENA_ASAN)
#define ASAN_ENABLED	1

/*
 * A block of slot bytes at addr, all of it poisoned (never handed out, or freed), handed
 * out for size bytes: those made valid, the rest left poisoned. Inline (the shadow
 * writes of asan.h): an allocation makes no call for it.
 */
static __always_inline int asan_hook_alloc(u64 addr, u64 size, u64 slot)
{
	return asan__alloc_hook(addr, size, slot);
}

/*
 * The runtime's state (src/asan.bpf.c), which the inline free hooks below update: the
 * library's objects are linked with asan.bpf.o first, so these externs resolve on 6.12.
 */
extern struct asan_state __arena_global asan_state;
extern u64 __arena_global asan_quarantine[ASAN_QUARANTINE_MAX];
extern u64 __arena_global asan_freed[ASAN_FREED_SIZES];
extern u64 __arena_global asan_freed_head;

/*
 * A live block of slot bytes at addr (granule aligned) freed: its requested size kept
 * for reports, in the size word of its slack when it has room for one (written again:
 * the program may have written over it), else in the ring of the latest frees; then its
 * valid bytes poisoned (the first granule's code marks the block freed).
 */
static __always_inline void asan__free_poison(u64 addr, u64 slot)
{
	u32 size = asan__block_size(addr, slot), i;
	u64 used = ((u64)size + ASAN_SHADOW_SCALE - 1) & ~(u64)ASAN_GRANULE_MASK;

	if (used + ASAN_SHADOW_SCALE <= slot) {
		*(u64 __arena *)(addr + slot - ASAN_SHADOW_SCALE) = asan__size_word(addr, size);
	} else {
		i = atomic_fetch_add(&asan_freed_head, 1);
		WRITE_ONCE(asan_freed[i & (ASAN_FREED_SIZES - 1)], (u64)size << 32 | (u32)addr);
		used = slot;	/* its size came from the shadow alone: all of it */
	}
	/*
	 * The slack is poisoned already (asan__alloc_hook): the bytes that were valid. A
	 * block whose first granule is not valid (the program poisoned it) has no size to
	 * go by: all of it.
	 */
	asan__poison(addr, used ? used : slot, ASAN_FREED);
}

/*
 * A block of slot bytes at addr freed: its size kept for reports, the block poisoned.
 * Inline, as the allocation hook: a free makes no call for it. One already poisoned as
 * freed is left as it is (the allocator's free check reports it).
 */
static __always_inline int asan_hook_free(u64 addr, u64 slot)
{
	if (!addr || (addr & ASAN_GRANULE_MASK))
		return -EINVAL;
	if (asan_shadow_of(addr) != ASAN_FREED)
		asan__free_poison(addr, slot);
	return 0;
}

/* Take the next slot of a ring of len slots (len > 0): head holds it. */
static __always_inline u32 asan__ring_next(u32 __arena *head, u32 len)
{
	u32 i = READ_ONCE(*head);

	if (i >= len)
		i = 0;
	WRITE_ONCE(*head, i + 1);
	return i;
}

/*
 * The same for a block the caller checked (asan_hook_freed() said no), then parked in
 * the quarantine: the block to free now (the one that leaves the quarantine, or addr
 * itself when it is off), or 0. Without the sanitizer, addr. A ring per size (asan.h):
 * a block waits for as many frees of its size as its ring has slots, and the memory held
 * back stays bounded.
 */
static __always_inline u64 asan_hook_park(u64 addr, u64 slot)
{
	struct asan_state __arena *st = &asan_state;
	u32 len = READ_ONCE(st->quarantine_len), i;

	if (!addr || (addr & ASAN_GRANULE_MASK))
		return addr;
	asan__free_poison(addr, slot);
	/*
	 * A length written past asan_init's clamp shares slots with the other rings: the
	 * exchange still loses no block.
	 */
	if (!len)
		return addr;
	/*
	 * A head is the ring's next slot, wrapped by a compare (a division costs more). The
	 * heads need no atomic: two frees that read the same head swap with the same slot
	 * one after the other, and each gets the block before it, so none is lost.
	 */
	if (slot <= ASAN_QUARANTINE_SMALL_SLOT) {
		i = asan__ring_next(&st->quarantine_head, len);
	} else if (slot <= HEAP_MEDIUM_MAX) {
		/*
		 * A byte budget: blocks over 2 KiB wait for fewer frees. Each length wraps
		 * the one head; a slot past the shorter one waits for a smaller block.
		 */
		if (len > ASAN_QUARANTINE_MEDIUM)
			len = ASAN_QUARANTINE_MEDIUM;
		if (slot > ASAN_QUARANTINE_MEDIUM_SLOT && len > ASAN_QUARANTINE_BIG)
			len = ASAN_QUARANTINE_BIG;
		i = ASAN_QUARANTINE_SMALL_MAX + asan__ring_next(&st->quarantine_medium_head, len);
	} else {
		i = ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_LARGE +
		    asan__ring_next(&st->quarantine_large_head, ASAN_QUARANTINE_LARGE);
	}
	return xchg(&asan_quarantine[i & (ASAN_QUARANTINE_MAX - 1)], addr);
}

/* Take quarantine slot i (0 .. ASAN_QUARANTINE_MAX - 1): its block, or 0. */
u64 asan_hook_quarantine_take(u32 i);
/* Free reports, for asan_hook_bad_free(); depth is the caller's frame. */
int asan_free_report(u64 addr, int kind, int depth);

/* A bad free (ASAN_DOUBLE_FREE, ASAN_INVALID_FREE) of addr: report it. */
static __always_inline void asan_hook_bad_free(u64 addr, int kind)
{
	asan_free_report(addr, kind, 2);
}

/* Blocks the quarantine holds: freed by their owner, not yet by the allocator. */
static __always_inline int asan_hook_quarantined(void)
{
	return asan_quarantine_count();
}

/* True when addr's shadow says a freed block (poisoned by asan_hook_free). */
static __always_inline bool asan_hook_freed(u64 addr)
{
	return asan_shadow_of(addr) == ASAN_FREED;
}

/* Sleepable: memory the allocator mapped; its shadow mapped and set to fill. */
static __always_inline void asan_hook_map(u64 addr, u64 size, s8 fill)
{
	asan_shadow_map(addr, size, fill);
}

/* Sleepable: the shadow of the arena's first pages (its globals), once. */
static __always_inline int asan_hook_map_low(u64 pages)
{
	return asan_map_low(pages);
}

/* Set the shadow of size bytes at addr (8-byte aligned) to code (0: valid). */
static __always_inline void asan_hook_poison(u64 addr, u64 size, s8 code)
{
	asan_poison((void __arena *)addr, code, size);
}

/*
 * The same without a global call, for code that runs with preemption disabled: addr
 * and size multiples of 64.
 */
static __always_inline void asan_hook_poison_inline(u64 addr, u64 size, s8 code)
{
	asan__fill_words((u64)asan__shadow(addr), size / 64, asan__word(code));
}

/* An access of size bytes at addr that the compiler did not check (a copy, a fill). */
static __always_inline void asan_hook_check(u64 addr, u64 size, int write)
{
	asan_check_range(addr, size, write);
}

#else /* the plain build: no shadow, nothing to do */
#define ASAN_ENABLED	0

static __always_inline int asan_hook_alloc(u64 addr, u64 size, u64 slot) { return 0; }
static __always_inline int asan_hook_free(u64 addr, u64 slot) { return 0; }
static __always_inline u64 asan_hook_park(u64 addr, u64 slot) { return addr; }
static __always_inline u64 asan_hook_quarantine_take(u32 i) { return 0; }
static __always_inline void asan_hook_bad_free(u64 addr, int kind) { }
static __always_inline int asan_hook_quarantined(void) { return 0; }
static __always_inline bool asan_hook_freed(u64 addr) { return false; }
static __always_inline void asan_hook_map(u64 addr, u64 size, s8 fill) { }
static __always_inline int asan_hook_map_low(u64 pages) { return 0; }
static __always_inline void asan_hook_poison(u64 addr, u64 size, s8 code) { }
static __always_inline void asan_hook_poison_inline(u64 addr, u64 size, s8 code) { }
static __always_inline void asan_hook_check(u64 addr, u64 size, int write) { }

#endif /* LIBARENA_ASAN */

#endif /* __LIBARENA_ALLOC_INTERNAL_H */
