/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal to the library: what the allocators (buddy.bpf.c, heap.bpf.c) and the
 * sanitizer's runtime (asan.bpf.c) share, below all three of them.
 *
 *   arena_block_lookup(base, addr)  which allocator block holds an address, read from
 *                                   the metadata alloc_types.h lays out
 *   asan_hook_*()                   the sanitizer hook interface: the allocators call
 *                                   these unconditionally; without LIBARENA_ASAN each
 *                                   compiles to nothing (as the kernel's kasan_*() do)
 *
 * The layers, each using only those below it (scripts/check-layers checks the includes):
 *   base.h > log.h > spinlock.h > alloc_types.h > asan.h > this header > asan.bpf.c >
 *   buddy.bpf.c > heap.bpf.c > the data structures > programs.
 * The sanitizer never calls an allocator: a block it holds back (the quarantine) goes
 * back through asan_hook_quarantine() and arena_quarantine_flush(), which the heap runs.
 */
#ifndef __LIBARENA_ALLOC_INTERNAL_H
#define __LIBARENA_ALLOC_INTERNAL_H

#include <libarena/base.h>
#include <libarena/alloc_types.h>
#include <libarena/asan.h>

/* ---- block lookup ---- */

/*
 * The block an address falls in: its slot size << 32 | the arena offset of its start,
 * ARENA_BLOCK_FREE when the allocator has it free; 0 when no allocator block holds it.
 * A heap object is reported for any address in an active span's objects, handed out or
 * not (the heap's own free check tells those apart); a buddy block by its metadata
 * byte, whichever struct buddy owns the chunk. base is the arena's user address. An
 * unmapped descriptor or metadata page reads as zeroes: no block.
 */
static __always_inline u64 arena_block_lookup(u64 base, u64 addr)
{
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

#if defined(__BPF__) && defined(LIBARENA_ASAN)
#define ASAN_ENABLED	1

/* The runtime's side (src/asan.bpf.c); only this interface calls them. */
int asan_alloc_hook(u64 addr, u64 size, u64 slot);
int asan_free_hook(u64 addr, u64 slot);
int asan_free_report(u64 addr, int kind, int depth);
u64 asan_quarantine_push(u64 addr, u64 size);
u64 asan_quarantine_take(u32 i);

/* Set the shadow of [addr, addr + size), both multiples of 64, without a global call. */
static __always_inline void asan__poison_inline(u64 addr, u64 size, s8 val)
{
	u64 sp = (u64)asan__shadow(addr);
	u64 word = (u8)val, i;

	word |= word << 8;
	word |= word << 16;
	word |= word << 32;
	for (i = zero; i < size / 64 && can_loop; i++)
		*(u64 __arena *)(sp + i * 8) = word;
}
#else
#define ASAN_ENABLED	0
#endif

/* Bytes to ask the allocator for: size and a redzone after it when that fits in max. */
static __always_inline u64 asan_hook_redzone(u64 size, u64 max)
{
	if (ASAN_ENABLED && size <= max - ASAN_REDZONE_SIZE)
		return size + ASAN_REDZONE_SIZE;
	return size;
}

/* A block of slot bytes at addr handed out for size bytes: those valid, the rest not. */
static __always_inline void asan_hook_alloc(u64 addr, u64 size, u64 slot)
{
#if ASAN_ENABLED
	asan_alloc_hook(addr, size, slot);
#endif
}

/* A block of slot bytes at addr freed: its size kept for reports, the block poisoned. */
static __always_inline void asan_hook_free(u64 addr, u64 slot)
{
#if ASAN_ENABLED
	asan_free_hook(addr, slot);
#endif
}

/* A bad free (ASAN_DOUBLE_FREE, ASAN_INVALID_FREE) of addr: report it. */
static __always_inline void asan_hook_bad_free(u64 addr, int kind)
{
#if ASAN_ENABLED
	asan_free_report(addr, kind, 2);
#endif
}

/*
 * Hand a freed, poisoned block to the quarantine: the block that leaves it (to be freed
 * now), or 0. Without the sanitizer, the block itself.
 */
static __always_inline u64 asan_hook_quarantine(u64 addr, u64 slot)
{
#if ASAN_ENABLED
	return asan_quarantine_push(addr, slot);
#else
	return addr;
#endif
}

/* Take quarantine slot i (0 .. ASAN_QUARANTINE_MAX - 1): its block, or 0. */
static __always_inline u64 asan_hook_quarantine_take(u32 i)
{
#if ASAN_ENABLED
	return asan_quarantine_take(i);
#else
	return 0;
#endif
}

/* Blocks the quarantine holds: freed by their owner, not yet by the allocator. */
static __always_inline int asan_hook_quarantined(void)
{
#if ASAN_ENABLED
	return asan_quarantine_count();
#else
	return 0;
#endif
}

/* True when addr's shadow says a freed block (poisoned by asan_hook_free). */
static __always_inline bool asan_hook_freed(u64 addr)
{
#if ASAN_ENABLED
	return asan_shadow_of(addr) == ASAN_FREED;
#else
	return false;
#endif
}

/* Sleepable: memory the allocator mapped; its shadow mapped and set to fill. */
static __always_inline void asan_hook_map(u64 addr, u64 size, s8 fill)
{
#if ASAN_ENABLED
	asan_shadow_map(addr, size, fill);
#endif
}

/* Set the shadow of size bytes at addr (8-byte aligned) to code (0: valid). */
static __always_inline void asan_hook_poison(u64 addr, u64 size, s8 code)
{
#if ASAN_ENABLED
	asan_poison((void __arena *)addr, code, size);
#endif
}

/* The same, for code that runs with preemption disabled: addr and size multiples of 64. */
static __always_inline void asan_hook_poison_inline(u64 addr, u64 size, s8 code)
{
#if ASAN_ENABLED
	asan__poison_inline(addr, size, code);
#endif
}

/* An access of size bytes at addr that the compiler did not check (a copy, a fill). */
static __always_inline void asan_hook_check(u64 addr, u64 size, int write)
{
#if ASAN_ENABLED
	asan_check_range(addr, size, write);
#endif
}

/* Sleepable: the shadow of the arena's first pages (its globals), once. */
static __always_inline void asan_hook_map_low(void)
{
#if ASAN_ENABLED
	asan_map_low(0);
#endif
}

#endif /* __LIBARENA_ALLOC_INTERNAL_H */
