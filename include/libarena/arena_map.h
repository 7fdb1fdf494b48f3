/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Where things are in the arena: the windows of the heap (heap.h) and of the buddy
 * allocator (buddy.h), the sanitizer's shadow (asan.h), and the invariants that keep
 * them apart, checked at compile time. What the allocators and the sanitizer share;
 * their structs are alloc_types.h's.
 *
 * The arena map (offsets are a pointer's low 32 bits; the arena is 4 GiB):
 *
 *   0x00000000  arena globals (libbpf), then pages bpf_arena_alloc_pages(NULL) picks:
 *               the buddy allocator's page runs and a program's own pages
 *   0x40000000  HEAP_WINDOW    8192 spans of 128 KiB (64 KiB mapped for small classes)
 *   0x80000000  BUDDY_WINDOW   2048 chunks of 512 KiB
 *   0xc0000000  BUDDY_META     32 KiB of metadata per chunk
 *   0xc4000000  HEAP_DESC      a 64-byte struct arena_heap_span per span
 *   0xc4080000  HEAP_HEAPS     a 1 KiB struct arena_heap per CPU and nesting level
 *   0xc4140000  free for bpf_arena_alloc_pages(NULL) (page runs, a program's pages)
 *   0xe0000000  ASAN_SHADOW    one shadow byte per 8 bytes of the arena, to 4 GiB
 *
 * Only the windows' pages that are in use are mapped. Kernels before 6.17 cannot
 * reserve a range of the arena, so a program that maps fixed addresses itself must stay
 * out of these windows; bpf_arena_alloc_pages(NULL) picks free pages and never lands in
 * a mapped page of them, but may land in an unmapped one: an allocator that then finds
 * the kernel has a page there skips that slot.
 */
#ifndef __LIBARENA_ARENA_MAP_H
#define __LIBARENA_ARENA_MAP_H

#include <libarena/base.h>

/* ---- the heap (heap.h): geometry and windows ---- */

#define HEAP_SPAN_SHIFT		17			/* 128 KiB of address per span */
#define HEAP_SPAN_SIZE		(1u << HEAP_SPAN_SHIFT)
#define HEAP_SMALL_SPAN		(64u << 10)		/* mapped for small classes */
#define HEAP_MEDIUM_SPAN	HEAP_SPAN_SIZE		/* mapped for medium classes */
/* Bytes mapped for a span of a kind (0 small, 1 medium). */
#define HEAP_KIND_SPAN(kind)	((kind) ? HEAP_MEDIUM_SPAN : HEAP_SMALL_SPAN)
#define HEAP_SMALL_MAX		8192
#define HEAP_MEDIUM_MAX		65536
#define HEAP_NR_SMALL		32	/* 16..128 by 16, then 4 per power of two */
#define HEAP_NR_CLASSES		47	/* medium: 10 KiB, then 3 .. 16 pages */
#define HEAP_KINDS		2	/* small, medium */
#define HEAP_LEVELS		3	/* per CPU: task, and two nesting levels */
#define HEAP_MAX_CPUS		256
#define HEAP_MAX_HEAPS		(HEAP_MAX_CPUS * HEAP_LEVELS)

/* The heap's windows: spans, and (after the buddy's) span descriptors and heaps. */
#define HEAP_WINDOW_START	0x40000000u
#define HEAP_NR_SPANS		8192	/* a power of two */
#define HEAP_WINDOW_END		(HEAP_WINDOW_START + HEAP_NR_SPANS * HEAP_SPAN_SIZE)
#define HEAP_DESC_START		0xc4000000u
#define HEAP_DESC_END		(HEAP_DESC_START + HEAP_NR_SPANS * 64)
#define HEAP_HEAPS_START	HEAP_DESC_END
#define HEAP_HEAP_SIZE		1024
#define HEAP_HEAPS_END		(HEAP_HEAPS_START + HEAP_MAX_HEAPS * HEAP_HEAP_SIZE)

/* ---- the buddy allocator (buddy.h): geometry and windows ---- */

#define BUDDY_MIN_SHIFT		4			/* 16-byte blocks */
#define BUDDY_MIN_SIZE		(1u << BUDDY_MIN_SHIFT)
#define BUDDY_ORDERS		16			/* 16 B .. 512 KiB */
#define BUDDY_MAX_ORDER		(BUDDY_ORDERS - 1)
#define BUDDY_CHUNK_SHIFT	(BUDDY_MIN_SHIFT + BUDDY_MAX_ORDER)
#define BUDDY_CHUNK_SIZE	(1u << BUDDY_CHUNK_SHIFT)	/* 512 KiB */
#define BUDDY_MAX_SIZE		BUDDY_CHUNK_SIZE
/*
 * How long a buddy call waits for its lock before it gives up, in waits that each end
 * after ARENA_SPIN_TIMEOUT_NS or the lock's spin budget (about 35 ms under TCG): a
 * holder's vCPU that the host descheduled delays a call, a second is past any such stall.
 */
#define BUDDY_LOCK_PATIENCE_NS	(1000ull * 1000 * 1000)
#define BUDDY_LOCK_MAX_WAITS	64
#define BUDDY_CHUNK_PAGES	(BUDDY_CHUNK_SIZE / 4096)
#define BUDDY_META_SIZE		(BUDDY_CHUNK_SIZE >> BUDDY_MIN_SHIFT)	/* 32 KiB */
#define BUDDY_META_PAGES	(BUDDY_META_SIZE / 4096)

/* The buddy allocator's windows: chunks, then one metadata byte per 16 bytes of them. */
#define BUDDY_WINDOW_START	0x80000000u
#define BUDDY_NR_SLOTS		2048
#define BUDDY_WINDOW_END	(BUDDY_WINDOW_START + BUDDY_NR_SLOTS * BUDDY_CHUNK_SIZE)
#define BUDDY_META_START	BUDDY_WINDOW_END
#define BUDDY_META_END		(BUDDY_META_START + BUDDY_NR_SLOTS * BUDDY_META_SIZE)

/* ---- the sanitizer's shadow (asan.h) ---- */

/* A shadow byte per granule of ASAN_SHADOW_SCALE bytes (the upstream names). */
#define ASAN_SHADOW_SHIFT	3
#define ASAN_SHADOW_SCALE	(1ULL << ASAN_SHADOW_SHIFT)
#define ASAN_GRANULE_MASK	(ASAN_SHADOW_SCALE - 1)
/* Where addr lies in its granule, 0 .. 7 (function-like, as upstream's). */
#define ASAN_GRANULE(addr)	((s8)((u32)(u64)(addr) & ASAN_GRANULE_MASK))
/* Arena offset of the shadow: offset x has its shadow byte at START + x / 8. */
#define ASAN_SHADOW_START	0xe0000000u

/*
 * What arena_block_lookup() (src/alloc_internal.h) and buddy_block_of() say of the
 * block holding an address: its slot size << 32 | the arena offset of its start, with
 * ARENA_BLOCK_FREE set when the allocator has it free; 0 for no block.
 */
#define ARENA_BLOCK_FREE	(1ull << 63)

/* ---- the map's invariants, checked at compile time ---- */

_Static_assert(HEAP_WINDOW_END == BUDDY_WINDOW_START, "buddy chunks right after heap spans");
_Static_assert(BUDDY_WINDOW_END == BUDDY_META_START, "buddy metadata right after its chunks");
_Static_assert(BUDDY_META_END <= HEAP_DESC_START, "span descriptors after buddy metadata");
_Static_assert(HEAP_DESC_END == HEAP_HEAPS_START, "heaps right after span descriptors");
_Static_assert(HEAP_HEAPS_END <= ASAN_SHADOW_START, "every window below the shadow");
_Static_assert((ASAN_SHADOW_START & 0xfffu) == 0 && (HEAP_DESC_START & 0xfffu) == 0,
	       "windows start on a page");
_Static_assert(ASAN_SHADOW_START + (0x100000000ull >> ASAN_SHADOW_SHIFT) <= 0x100000000ull,
	       "the whole arena's shadow fits in the arena");
_Static_assert(HEAP_WINDOW_START % HEAP_SPAN_SIZE == 0 &&
	       BUDDY_WINDOW_START % BUDDY_CHUNK_SIZE == 0,
	       "spans and chunks aligned to their size");
_Static_assert((BUDDY_CHUNK_SIZE >> BUDDY_MIN_SHIFT) == BUDDY_META_SIZE,
	       "one metadata byte per smallest block");
_Static_assert((HEAP_NR_SPANS & (HEAP_NR_SPANS - 1)) == 0, "span slots a power of two");
_Static_assert(HEAP_MAX_HEAPS * HEAP_HEAP_SIZE % 4096 == 0, "heaps fill whole pages");

#endif /* __LIBARENA_ARENA_MAP_H */
