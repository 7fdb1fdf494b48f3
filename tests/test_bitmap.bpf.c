// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The bitmap: every call, edge bits, last-word masking, sizes refused, and threads
 * flipping disjoint bits of shared words without losing an update.
 */
#include <libarena/common.h>
#include <libarena/bitmap.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#define NBITS 256

SEC("syscall")
int test_bitmap_alloc_sizes(struct arena_test_ctx *ctx)
{
	struct arena_bitmap __arena *b;
	int w;

	ARENA_ASSERT(!bmp_alloc(0));
	ARENA_ASSERT(!bmp_alloc(1));
	ARENA_ASSERT(!bmp_alloc(63));
	ARENA_ASSERT(!bmp_alloc(100));
	ARENA_ASSERT(!bmp_alloc(BMP_MAX_BITS + 64));
	b = bmp_alloc(64);
	ARENA_ASSERT(b);
	ARENA_ASSERT_EQ(b->bits[0], 0);
	ARENA_ASSERT_EQ(bmp_free(b), 0);
	/* Zeroed even when the memory was used before. */
	b = bmp_alloc(NBITS);
	ARENA_ASSERT(b);
	for (w = zero; w < NBITS / 64 && can_loop; w++)
		ARENA_ASSERT_EQ(b->bits[w & 3], 0);
	ARENA_ASSERT_EQ(bmp_free(b), 0);
	ARENA_ASSERT_EQ(BITS_TO_LONGS(65), 2);
	ARENA_ASSERT_EQ(BIT_WORD(64), 1);
	ARENA_ASSERT_EQ(BIT_MASK(65), 2);
	return 0;
}

static const u32 edge_bits[] = { 0, 1, 62, 63, 64, 65, 127, 128, NBITS - 2, NBITS - 1 };

SEC("syscall")
int test_bitmap_single_bits(struct arena_test_ctx *ctx)
{
	struct arena_bitmap __arena *b = bmp_alloc(NBITS);
	u32 i, bit;

	ARENA_ASSERT(b);
	for (i = zero; i < ARRAY_SIZE(edge_bits) && can_loop; i++) {
		barrier_var(i);
		if (i >= ARRAY_SIZE(edge_bits))
			break;
		bit = edge_bits[i];
		ARENA_ASSERT_EQ(bmp_test_bit(bit, b), 0);
		ARENA_ASSERT_EQ(bmp_set_bit(bit, b), 0);
		ARENA_ASSERT_EQ(bmp_test_bit(bit, b), 1);
		ARENA_ASSERT_EQ(b->bits[BIT_WORD(bit) & 3], BIT_MASK(bit));	/* only it */
		ARENA_ASSERT_EQ(bmp_test_and_set_bit(bit, b), 1);
		ARENA_ASSERT_EQ(bmp_clear_bit(bit, b), 0);
		ARENA_ASSERT_EQ(bmp_test_bit(bit, b), 0);
		ARENA_ASSERT_EQ(bmp_test_and_set_bit(bit, b), 0);
		ARENA_ASSERT_EQ(bmp_test_and_clear_bit(bit, b), 1);
		ARENA_ASSERT_EQ(bmp_test_and_clear_bit(bit, b), 0);
		ARENA_ASSERT_EQ(__bmp_set_bit(bit, b), 0);
		ARENA_ASSERT_EQ(bmp_test_bit(bit, b), 1);
		ARENA_ASSERT_EQ(__bmp_clear_bit(bit, b), 0);
		ARENA_ASSERT_EQ(b->bits[BIT_WORD(bit) & 3], 0);
	}
	ARENA_ASSERT_EQ(bmp_set_bit(0, NULL), -EINVAL);
	ARENA_ASSERT_EQ(bmp_test_bit(0, NULL), -EINVAL);
	ARENA_ASSERT_EQ(bmp_free(b), 0);
	return 0;
}

SEC("syscall")
int test_bitmap_whole_map(struct arena_test_ctx *ctx)
{
	struct arena_bitmap __arena *a = bmp_alloc(128), *b = bmp_alloc(128);
	struct arena_bitmap __arena *d = bmp_alloc(128);

	ARENA_ASSERT(a && b && d);
	/* a = {0, 5, 70}, b = {5, 99, 120}; counted bits: 100 of 128. */
	bmp_set_bit(0, a);
	bmp_set_bit(5, a);
	bmp_set_bit(70, a);
	bmp_set_bit(5, b);
	bmp_set_bit(99, b);
	bmp_set_bit(120, b);		/* past the count: never looked at */

	/* dst's bits past the count must survive every whole-map write. */
	d->bits[0] = ~0ull;
	d->bits[1] = ~0ull;
	ARENA_ASSERT_EQ(bmp_and(100, d, a, b), 0);
	ARENA_ASSERT_EQ(d->bits[0], 1ull << 5);
	ARENA_ASSERT_EQ(d->bits[1], ~0ull << 36);
	ARENA_ASSERT_EQ(bmp_or(100, d, a, b), 0);
	ARENA_ASSERT_EQ(d->bits[0], (1ull << 0) | (1ull << 5));
	ARENA_ASSERT_EQ(d->bits[1], (~0ull << 36) | (1ull << 6) | (1ull << 35));
	ARENA_ASSERT_EQ(bmp_copy(100, d, b), 0);
	ARENA_ASSERT_EQ(d->bits[0], 1ull << 5);
	ARENA_ASSERT_EQ(d->bits[1], (~0ull << 36) | (1ull << 35));
	ARENA_ASSERT_EQ(bmp_clear(100, d), 0);
	ARENA_ASSERT_EQ(d->bits[0], 0);
	ARENA_ASSERT_EQ(d->bits[1], ~0ull << 36);
	ARENA_ASSERT_EQ(bmp_empty(100, d), 1);		/* the high bits do not count */
	ARENA_ASSERT_EQ(bmp_empty(128, d), 0);
	ARENA_ASSERT_EQ(bmp_empty(100, a), 0);

	ARENA_ASSERT_EQ(bmp_intersects(100, a, b), 1);	/* bit 5 */
	bmp_clear_bit(5, b);
	ARENA_ASSERT_EQ(bmp_intersects(100, a, b), 0);
	bmp_set_bit(120, a);
	ARENA_ASSERT_EQ(bmp_intersects(100, a, b), 0);	/* 120 is past the count */
	ARENA_ASSERT_EQ(bmp_intersects(128, a, b), 1);

	/* big = a | b is a superset of both; a is not one of b. */
	ARENA_ASSERT_EQ(bmp_or(128, d, a, b), 0);
	ARENA_ASSERT_EQ(bmp_subset(128, d, a), 1);
	ARENA_ASSERT_EQ(bmp_subset(128, d, b), 1);
	ARENA_ASSERT_EQ(bmp_subset(128, a, b), 0);
	bmp_clear_bit(99, b);
	ARENA_ASSERT_EQ(bmp_subset(100, a, b), 1);	/* b = {120}: nothing counted */

	/* tests/user_test.c checks the two lines bmp_print logs here. */
	ARENA_ASSERT_EQ(bmp_print(128, d), 0);
	bmp_set_bit(1, d);
	bmp_set_bit(2, d);
	bmp_set_bit(71, d);
	bmp_set_bit(127, d);
	ARENA_ASSERT_EQ(bmp_print(128, d), 0);
	ARENA_ASSERT_EQ(bmp_and(0, d, a, b), -EINVAL);
	ARENA_ASSERT_EQ(bmp_or(64, NULL, a, b), -EINVAL);
	ARENA_ASSERT_EQ(bmp_copy(64, d, NULL), -EINVAL);
	ARENA_ASSERT_EQ(bmp_empty(0, d), -EINVAL);
	ARENA_ASSERT_EQ(bmp_intersects(BMP_MAX_BITS + 1, a, b), -EINVAL);
	ARENA_ASSERT_EQ(bmp_subset(64, a, NULL), -EINVAL);
	ARENA_ASSERT_EQ(bmp_clear(64, NULL), -EINVAL);
	ARENA_ASSERT_EQ(bmp_print(0, d), -EINVAL);
	bmp_free(a);
	bmp_free(b);
	bmp_free(d);
	return 0;
}

/*
 * Four threads own disjoint bits of the same two words (thread t: bits t, t+4, ...) and
 * set and clear them over and over with the atomic calls. A lost update shows up as a
 * test-and-set that finds its own bit already set, or a test-and-clear that finds it
 * clear, or a bit left set at the end.
 */
#define FLIP_THREADS	4
#define FLIP_ROUNDS	500000

u64 __arena_global flip_bmp;
u64 __arena_global flip_ops[FLIP_THREADS];

SEC("syscall")
int parallel_test_bitmap_flips__init(struct arena_test_ctx *ctx)
{
	flip_bmp = (u64)bmp_alloc(128);
	return flip_bmp ? 0 : -ENOMEM;
}

static __noinline int flipper(u32 t)
{
	struct arena_bitmap __arena *b = (struct arena_bitmap __arena *)flip_bmp;
	u32 i, bit;

	t &= FLIP_THREADS - 1;
	for (i = zero; i < FLIP_ROUNDS && can_loop; i++) {
		bit = t + FLIP_THREADS * (i % 32);
		if (i & 1) {
			if (bmp_test_and_set_bit(bit, b) != 0)
				return -EUCLEAN;
			if (bmp_test_and_clear_bit(bit, b) != 1)
				return -EUCLEAN;
		} else {
			bmp_set_bit(bit, b);
			if (bmp_test_bit(bit, b) != 1)
				return -EUCLEAN;
			bmp_clear_bit(bit, b);
		}
	}
	flip_ops[t] = i;
	return i == FLIP_ROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_bitmap_flips__0(struct arena_test_ctx *ctx) { return flipper(0); }
SEC("syscall")
int parallel_test_bitmap_flips__1(struct arena_test_ctx *ctx) { return flipper(1); }
SEC("syscall")
int parallel_test_bitmap_flips__2(struct arena_test_ctx *ctx) { return flipper(2); }
SEC("syscall")
int parallel_test_bitmap_flips__3(struct arena_test_ctx *ctx) { return flipper(3); }

SEC("syscall")
int parallel_test_bitmap_flips__fini(struct arena_test_ctx *ctx)
{
	struct arena_bitmap __arena *b = (struct arena_bitmap __arena *)flip_bmp;

	ARENA_ASSERT_EQ(bmp_empty(128, b), 1);
	ARENA_ASSERT_EQ(flip_ops[0] + flip_ops[1] + flip_ops[2] + flip_ops[3],
			FLIP_THREADS * FLIP_ROUNDS);
	arena_stdout("bitmap flips: %u threads x %u rounds, 2 atomic updates each",
		     FLIP_THREADS, FLIP_ROUNDS);
	bmp_free(b);
	return 0;
}
