// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A program from outside the library: it includes <libarena/...> and links with
 * libarena.bpf.o, as a user's project does. It keeps a small histogram in the arena,
 * updates it from every CPU and logs what it found.
 */
#include <libarena/common.h>
#include <libarena/test.h>

/* The most common licence line: the library must link with it (it carries none). */
char _license[] SEC("license") = "GPL";

#define BUCKETS 16
#define ROUNDS 50000

u64 __arena_global histogram[BUCKETS];

SEC("syscall")
int parallel_test_histogram__init(struct arena_test_ctx *ctx)
{
	int i;

	for (i = zero; i < BUCKETS && can_loop; i++)
		histogram[i] = 0;
	return 0;
}

static __noinline int fill(u32 seed)
{
	u64 x = seed | 1;
	int i;

	for (i = zero; i < ROUNDS && can_loop; i++) {
		/* xorshift: a value, then its bucket by highest set bit */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		atomic_add(&histogram[arena_fls(x & 0xffff) % BUCKETS], 1);
	}
	return i == ROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_histogram__0(struct arena_test_ctx *ctx) { return fill(ctx->seed); }
SEC("syscall")
int parallel_test_histogram__1(struct arena_test_ctx *ctx) { return fill(ctx->seed * 7); }

SEC("syscall")
int parallel_test_histogram__fini(struct arena_test_ctx *ctx)
{
	u64 total = 0;
	int i;

	for (i = zero; i < BUCKETS && can_loop; i++)
		total += histogram[i];
	arena_stdout("histogram: %llu values, top bucket %llu", total, histogram[BUCKETS - 1]);
	ARENA_ASSERT_EQ(total, 2 * ROUNDS);
	return 0;
}
