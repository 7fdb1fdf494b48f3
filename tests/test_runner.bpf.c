// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The runner's conventions from upstream's harness, each shown working: a parallel
 * test's __enabled (0 runs it, -EOPNOTSUPP skips it), __stderr expectations matched
 * against what a test writes to stderr, and arena_buddy_reset before every test but
 * the allocator's own (this object opts in with LIBARENA_UPSTREAM_HARNESS).
 */
#include <libarena/log.h>
#include <libarena/buddy.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

LIBARENA_UPSTREAM_HARNESS;

u64 __arena_global enabled_ran[2];

SEC("syscall")
int parallel_test_enabled_runs__enabled(struct arena_test_ctx *ctx)
{
	return 0;
}

SEC("syscall")
int parallel_test_enabled_runs__init(struct arena_test_ctx *ctx)
{
	enabled_ran[0] = enabled_ran[1] = 0;
	return 0;
}

SEC("syscall")
int parallel_test_enabled_runs__0(struct arena_test_ctx *ctx)
{
	enabled_ran[0] = 1;
	return 0;
}

SEC("syscall")
int parallel_test_enabled_runs__1(struct arena_test_ctx *ctx)
{
	enabled_ran[1] = 1;
	return 0;
}

SEC("syscall")
int parallel_test_enabled_runs__fini(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT_EQ(enabled_ran[0] + enabled_ran[1], 2);
	return 0;
}

/* Skipped: its threads would fail if they ran. */
SEC("syscall")
int parallel_test_enabled_skips__enabled(struct arena_test_ctx *ctx)
{
	arena_stdout("skipped on purpose, to show -EOPNOTSUPP");
	return -EOPNOTSUPP;
}

SEC("syscall")
int parallel_test_enabled_skips__0(struct arena_test_ctx *ctx)
{
	arena_stderr("parallel_test_enabled_skips ran, but its __enabled said skip");
	return 1;
}

/* Expected lines in order, literal text and {{regex}} parts; stdout lines are not seen. */
SEC("syscall")
__stderr("stderr line {{[0-9]+}} of 3")
__stderr("values: a=1 (b=[2]) c={{[a-z]+}}")
__stderr("last{{$}}")
int test_stderr_expectations(struct arena_test_ctx *ctx)
{
	arena_stdout("stderr line 0 of 3, but on stdout");
	arena_stderr("stderr line %d of 3", 1);
	arena_stderr("values: a=%d (b=[%d]) c=%s", 1, 2, "xyz");
	arena_stderr("last");
	return 0;
}

static __always_inline struct buddy __arena *default_buddy(void)
{
	return (struct buddy __arena *)arena_buddy_addr();
}

/* Leaves a block of the default allocator behind. */
SEC("syscall")
int test_reset_leaks_a_block(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT(!arena_buddy_setup());
	ARENA_ASSERT(buddy_alloc(default_buddy(), 1000));
	ARENA_ASSERT(default_buddy()->stats.allocs >= 1);
	return 0;
}

/* "test_buddy" in the name: no reset before it, the block is still there. */
SEC("syscall")
int test_buddy_not_reset(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT(arena_buddy_is_ready());
	ARENA_ASSERT(default_buddy()->stats.allocs >= 1);
	ARENA_ASSERT(default_buddy()->stats.blocks_in_use[6] >= 1);
	return 0;
}

/* Any other test starts with a fresh allocator. */
SEC("syscall")
int test_reset_before_each_test(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT(arena_buddy_is_ready());
	ARENA_ASSERT_EQ(default_buddy()->stats.allocs, 0);
	ARENA_ASSERT_EQ(default_buddy()->stats.blocks_in_use[6], 0);
	return 0;
}
