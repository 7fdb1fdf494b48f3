/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Writing tests for the libarena runner (build/runner, tests/runner.c).
 *
 * A test is a SEC("syscall") program that returns 0 on success. Its name says how it runs:
 *
 *   test_NAME                     once
 *   asan_test_NAME                once, in the sanitizer build only
 *   parallel_test_NAME__enabled   optional: return 1 to run, 0 to skip (a reason may be
 *                                 logged with arena_stdout)
 *   parallel_test_NAME__init      optional: once, before the threads
 *   parallel_test_NAME__0 .. __N  one thread each, all at once, thread k on CPU k % nr_cpus
 *   parallel_test_NAME__fini      optional: once, after every thread returned
 *
 * Every program gets a struct arena_test_ctx as its context. On failure the runner shows
 * the return value and the log lines the test wrote.
 */
#ifndef __LIBARENA_TEST_H
#define __LIBARENA_TEST_H

#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/heap.h>

struct arena_test_ctx {
	u32 nr_cpus;		/* online CPUs the runner sees */
	u32 thread;		/* parallel tests: this thread's index */
	u32 nr_threads;		/* parallel tests: threads in the test */
	u32 seed;		/* a random seed, printed by the runner */
};

/* Fail the test with the line number, logging what went wrong. */
#define ARENA_ASSERT(cond)							\
	do {									\
		if (!(cond)) {							\
			arena_stderr("%s:%d: assertion failed: %s",		\
				     __FILE__, __LINE__, #cond);		\
			return __LINE__;					\
		}								\
	} while (0)

#define ARENA_ASSERT_EQ(a, b)							\
	do {									\
		long long ___a = (long long)(a), ___b = (long long)(b);		\
		if (___a != ___b) {						\
			arena_stderr("%s:%d: %s == %s failed: %lld != %lld",	\
				     __FILE__, __LINE__, #a, #b, ___a, ___b);	\
			return __LINE__;					\
		}								\
	} while (0)

/* xorshift64: the next of a test's pseudo-random numbers (*x must not be 0). */
static __always_inline u64 arena_test_rand(u64 *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * Fill size bytes of arena memory with a pattern derived from seed; check that it is
 * still there (0 when intact, else the 1-based index of the first wrong byte). Global,
 * so the verifier checks each once instead of unrolling the loop into every caller.
 */
__weak int arena_test_fill(u8 __arena *p __arg_arena, u32 size, u32 seed)
{
	u32 i;

	for (i = zero; i < size && can_loop; i++)
		p[i] = (u8)(seed + i * 7);
	return i == size ? 0 : -E2BIG;
}

__weak int arena_test_check(u8 __arena *p __arg_arena, u32 size, u32 seed)
{
	u32 i;

	for (i = zero; i < size && can_loop; i++)
		if (p[i] != (u8)(seed + i * 7))
			return i + 1;
	return i == size ? 0 : -E2BIG;
}

#endif /* __LIBARENA_TEST_H */
