/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena bitmap: bits in arena memory, in 64-bit words.
 *
 *   bmp_alloc(bits)                   a zeroed bitmap of that many bits (a multiple of 64, > 0),
 *                                     or NULL and a log line
 *   bmp_free(bmp)                     give it back (arena_free)
 *
 * One bit; the plain forms are atomic (compare-and-swap: the 6.12 JIT has no fetch-or on
 * arena memory), the __ forms are not and suit bitmaps only one CPU writes:
 *
 *   bmp_set_bit(bit, bmp)             set
 *   bmp_clear_bit(bit, bmp)           clear
 *   bmp_test_and_set_bit(bit, bmp)    set, return the old value (0 or 1)
 *   bmp_test_and_clear_bit(bit, bmp)  clear, return the old value
 *   __bmp_set_bit(bit, bmp)           set, not atomic
 *   __bmp_clear_bit(bit, bmp)         clear, not atomic
 *   bmp_test_bit(bit, bmp)            the value of the bit
 *
 * Whole map, the bit count first; bits need not be a multiple of 64: the bits of the
 * last word past the count are never written and never read:
 *
 *   bmp_clear(bits, bmp)              all zero
 *   bmp_and(bits, dst, a, b)          dst = a & b
 *   bmp_or(bits, dst, a, b)           dst = a | b
 *   bmp_copy(bits, dst, src)          dst = src
 *   bmp_empty(bits, bmp)              1 when no bit is set
 *   bmp_intersects(bits, a, b)        1 when a & b has a bit set
 *   bmp_subset(bits, big, small)      1 when every bit of small is set in big
 *   bmp_print(bits, bmp)              one arena_stdout line of set-bit ranges, e.g. "0-3,64"
 *
 * Whole-map calls return -EINVAL (with a log line) for a NULL bitmap or a count of 0;
 * a count above BMP_MAX_BITS is refused too, so every loop stays bounded. Single-bit
 * calls cannot know the size of the bitmap: keep bit below it.
 */
#ifndef __LIBARENA_BITMAP_H
#define __LIBARENA_BITMAP_H

#include <libarena/base.h>
#include <libarena/log.h>

#ifndef BITS_PER_LONG
#define BITS_PER_LONG		64
#endif
#define BITS_TO_LONGS(n)	(((n) + BITS_PER_LONG - 1) / BITS_PER_LONG)
#define BIT_MASK(n)		(1ull << ((n) % BITS_PER_LONG))
#define BIT_WORD(n)		((n) / BITS_PER_LONG)
#define BMP_MAX_BITS		(1u << 24)
/* Upstream's names. */
#define BITS_PER_BYTE		8
#define BYTES_TO_BITS(nb)	((nb) * BITS_PER_BYTE)
#define BITS_PER_LONG_LONG	64
#define BITS_TO_LONG_LONGS(n)	(((n) + BITS_PER_LONG_LONG - 1) / BITS_PER_LONG_LONG)

/* A struct may not hold only a flexible array: the kernel's __DECLARE_FLEX_ARRAY form. */
struct arena_bitmap {
	struct { } __empty_bits;
	u64 bits[];
};

u64 bmp_alloc_addr(u64 bits);
int bmp_free(struct arena_bitmap __arena *bmp __arg_arena);

static __always_inline struct arena_bitmap __arena *bmp_alloc(size_t bits)
{
	return (struct arena_bitmap __arena *)bmp_alloc_addr(bits);
}

int bmp_set_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);
int bmp_clear_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);
int bmp_test_and_set_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);
int bmp_test_and_clear_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);
int __bmp_set_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);
int __bmp_clear_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);
int bmp_test_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena);

int bmp_clear(u32 bits, struct arena_bitmap __arena *bmp __arg_arena);
int bmp_and(u32 bits, struct arena_bitmap __arena *dst __arg_arena,
	    struct arena_bitmap __arena *a __arg_arena, struct arena_bitmap __arena *b __arg_arena);
int bmp_or(u32 bits, struct arena_bitmap __arena *dst __arg_arena,
	   struct arena_bitmap __arena *a __arg_arena, struct arena_bitmap __arena *b __arg_arena);
int bmp_copy(u32 bits, struct arena_bitmap __arena *dst __arg_arena,
	     struct arena_bitmap __arena *src __arg_arena);
int bmp_empty(u32 bits, struct arena_bitmap __arena *bmp __arg_arena);
int bmp_intersects(u32 bits, struct arena_bitmap __arena *a __arg_arena,
		   struct arena_bitmap __arena *b __arg_arena);
int bmp_subset(u32 bits, struct arena_bitmap __arena *big __arg_arena,
	       struct arena_bitmap __arena *small __arg_arena);
int bmp_print(u32 bits, struct arena_bitmap __arena *bmp __arg_arena);

#endif /* __LIBARENA_BITMAP_H */
