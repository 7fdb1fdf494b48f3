/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Writing tests for the libarena runner (build/runner, tests/runner.c).
 *
 * A test is a SEC("syscall") program that returns 0 on success. Its name says how it runs:
 *
 *   test_NAME                     once
 *   asan_test_NAME                once, in the sanitizer build only
 *   parallel_test_NAME__enabled   optional, run first (upstream's convention): return 0
 *                                 to run the test, -EOPNOTSUPP to skip it (log the
 *                                 reason with arena_stdout); anything else fails it
 *   parallel_test_NAME__init      optional: once, before the threads
 *   parallel_test_NAME__0 .. __N  one thread each, all at once, thread k on CPU k % nr_cpus
 *   parallel_test_NAME__fini      optional: once, after every thread returned
 *
 * Every program gets a struct arena_test_ctx as its context (upstream's take none: a
 * program may ignore it). On failure the runner shows the return value and the log
 * lines the test wrote.
 *
 * __stderr("...") on a test program (one per expected line, in order): after the test
 * ran, each message must be found in what it wrote to stderr (arena_stderr lines and,
 * in the sanitizer build, the report lines libarena_asan_print writes), each after the
 * previous one's match. Text is literal except {{...}}, a POSIX extended regex. An
 * asan_test_* with __stderr tags needs no "asan-expect:" lines. __stderr_unpriv (for
 * unprivileged runs) is accepted and ignored: the runner runs as root.
 *
 * arena_buddy_reset: the upstream harness runs it before every test whose name lacks
 * "test_buddy", and before each parallel test's __init, so that each test starts with a
 * fresh default allocator. The runner does the same in objects that opt in, with
 * LIBARENA_UPSTREAM_HARNESS (a global named libarena_upstream_harness, found in the
 * object's BTF), and in every object with runner -u (for upstream's programs, which
 * cannot say so). Not by default: the fast allocator's heaps keep blocks of the default
 * allocator across an object's tests, which a reset would pull from under them, and a
 * reset costs some 10 ms in the VM (unmapping and mapping a chunk), 9 s over our tests.
 * Nor does a __stderr tag opt in: test_asan.bpf.c mixes both kinds.
 */
#ifndef __LIBARENA_TEST_H
#define __LIBARENA_TEST_H

#include <libarena/base.h>
#include <libarena/log.h>

struct arena_test_ctx {
	u32 nr_cpus;		/* online CPUs the runner sees */
	u32 thread;		/* parallel tests: this thread's index */
	u32 nr_threads;		/* parallel tests: threads in the test */
	u32 seed;		/* a random seed, printed by the runner */
};

/*
 * Expected stderr lines, as upstream's selftests write them: a BTF decl tag
 * "comment:<counter>:test_expect_stderr=<msg>" on the program, which the runner reads
 * from the object's BTF; the counter keeps source order.
 */
#define __LIBARENA_STR(x)	#x
#define __LIBARENA_XSTR(x)	__LIBARENA_STR(x)
#ifndef __test_tag
#define __test_tag(tag)								\
	__attribute__((btf_decl_tag("comment:" __LIBARENA_XSTR(__COUNTER__) ":" tag)))
#endif
#ifndef __stderr
#define __stderr(msg)		__test_tag("test_expect_stderr=" msg)
#endif
#ifndef __stderr_unpriv
#define __stderr_unpriv(msg)	__test_tag("test_expect_stderr_unpriv=" msg)
#endif

/* In a test object: have the runner run arena_buddy_reset before tests (above). */
#define LIBARENA_UPSTREAM_HARNESS	int libarena_upstream_harness SEC(".data") = 1

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

/*
 * How long a test retries what contention or a stalled vCPU made fail (a lock timeout, a
 * background pass that ran into a measurement): long enough for any stall TCG shows,
 * well inside the 60 s after which the guest's soft-lockup watchdog panics.
 */
#define ARENA_TEST_RETRY_NS	(20ull * 1000 * 1000 * 1000)

/*
 * A call that gave up on a lock (-ETIMEDOUT: a stalled vCPU holds it; the call changed
 * nothing) made again, for up to ARENA_TEST_RETRY_NS: its last result. The parallel
 * tests' one way to wait out a stall.
 */
#define ARENA_TEST_RETRY(call)							\
({										\
	u64 ___end = bpf_ktime_get_ns() + ARENA_TEST_RETRY_NS;			\
	long ___r;								\
										\
	while ((___r = (call)) == -ETIMEDOUT && bpf_ktime_get_ns() < ___end &&	\
	       can_loop)							\
		;								\
	___r;									\
})

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
