// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Compatibility suite: upstream's parallel tests. parallel_test_NAME__enabled returns 0
 * to run the test and -EOPNOTSUPP to skip it; __init runs first, __0 .. __N at once,
 * __fini last. Like upstream's it names no licence: the library's "GPL" is the program's.
 */
#include <libarena/common.h>

#define ADDS_PER_THREAD	20000

u64 __arena_global upstream_count;
u64 __arena_global upstream_skipped_ran;

SEC("syscall")
__weak int parallel_test_upstream_count__enabled(void)
{
	return 0;
}

SEC("syscall")
__weak int parallel_test_upstream_count__init(void)
{
	upstream_count = 0;
	return 0;
}

static __always_inline int add_many(void)
{
	int i;

	for (i = zero; i < ADDS_PER_THREAD && can_loop; i++)
		__sync_fetch_and_add(&upstream_count, 1);
	return i == ADDS_PER_THREAD ? 0 : -E2BIG;
}

SEC("syscall")
__weak int parallel_test_upstream_count__0(void)
{
	return add_many();
}

SEC("syscall")
__weak int parallel_test_upstream_count__1(void)
{
	return add_many();
}

SEC("syscall")
__weak int parallel_test_upstream_count__fini(void)
{
	if (upstream_count != 2 * ADDS_PER_THREAD) {
		arena_stdout("count %llu, not %d", upstream_count, 2 * ADDS_PER_THREAD);
		return -EINVAL;
	}
	return 0;
}

/* Skipped: its worker would fail the test if the runner ran it. */
SEC("syscall")
__weak int parallel_test_upstream_skipped__enabled(void)
{
	return -EOPNOTSUPP;
}

SEC("syscall")
__weak int parallel_test_upstream_skipped__0(void)
{
	upstream_skipped_ran = 1;
	return -EINVAL;
}

/* What the runner did with the skipped test: nothing at all. */
SEC("syscall")
__weak int test_upstream_skipped_never_ran(void)
{
	return upstream_skipped_ran ? -EINVAL : 0;
}
