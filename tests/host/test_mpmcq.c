// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The bounded MPMC queue compiled natively: a fuzzer against a model ring (one thread,
 * every outcome predictable, capacities from 1 to 64 rounded up), bad calls and memory
 * exhaustion, then producers and consumers racing, every value out exactly once and each
 * consumer seeing each producer's values in order, under AddressSanitizer and
 * ThreadSanitizer.
 *
 * HOST_FUZZ_OPS=N sets the fuzzer's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/mpmcq.h>
#include "check.h"
#include "host_malloc.h"

char libarena_host_arena;

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS	200000
#define RACE_VALUES	50000
#else
#define DEFAULT_OPS	1000000
#define RACE_VALUES	200000
#endif

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS"), *sd = getenv("HOST_FUZZ_SEED");
	long ops = s ? atol(s) : DEFAULT_OPS, op, base = host_live_blocks;
	u64 seed = sd ? strtoull(sd, NULL, 0) : 0xfeedull, model[64], head = 0, tail = 0;
	u64 next = 1, v;
	struct mpmcq *q = NULL;
	u32 cap = 0, want_cap;
	int ret;

	for (op = 0; op < ops; op++) {
		u64 r = host_rnd(&seed) % 100;

		if (!q || r == 0) {
			if (q)
				CHECK(mpmcq_destroy(q) == 0, "");
			cap = 1 + host_rnd(&seed) % 64;
			q = mpmcq_create(cap);
			CHECK(q, "op %ld: create(%u)", op, cap);
			for (want_cap = 2; want_cap < cap; want_cap <<= 1)
				;
			cap = want_cap;
			CHECK(mpmcq_capacity(q) == (int)cap, "op %ld", op);
			head = tail = 0;
		} else if (r < 55) {
			ret = mpmcq_push(q, next);
			if (tail - head == cap) {
				CHECK(ret == -ENOSPC, "op %ld: push to full: %d", op, ret);
			} else {
				CHECK(ret == 0, "op %ld: push: %d", op, ret);
				model[tail++ % 64] = next++;
			}
		} else {
			ret = mpmcq_pop(q, &v);
			if (head == tail) {
				CHECK(ret == -ENOENT, "op %ld: pop from empty: %d", op, ret);
			} else {
				CHECK(ret == 0 && v == model[head++ % 64], "op %ld: pop: %d %llu",
				      op, ret, v);
			}
		}
		CHECK(mpmcq_count(q) == (int)(tail - head), "op %ld: count %d, want %llu", op,
		      mpmcq_count(q), tail - head);
	}
	CHECK(mpmcq_destroy(q) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

static int test_bad_calls(void)
{
	struct mpmcq *q;
	u64 v;

	CHECK(!mpmcq_create(0), "");
	CHECK(!mpmcq_create(MPMCQ_MAX_CAPACITY + 1), "");
	CHECK(mpmcq_push(NULL, 1) == -EINVAL, "");
	CHECK(mpmcq_pop(NULL, &v) == -EINVAL, "");
	q = mpmcq_create(MPMCQ_MAX_CAPACITY);
	CHECK(q && mpmcq_capacity(q) == MPMCQ_MAX_CAPACITY, "");
	CHECK(mpmcq_pop(q, NULL) == -EINVAL, "");
	/* Damage: the head's cell says it was handed on, but the head did not move. */
	CHECK(mpmcq_push(q, 7) == 0, "");
	q->cells[0].seq = 5;
	CHECK(mpmcq_pop(q, &v) == -EFAULT, "");
	q->cells[1].seq = 9;
	CHECK(mpmcq_push(q, 8) == -EFAULT, "");
	CHECK(mpmcq_destroy(q) == 0, "");
	/* Out of memory: nothing is left behind. */
	host_malloc_fail_after = 1;
	CHECK(!mpmcq_create(4), "");
	host_malloc_fail_after = -1;
	return 0;
}

/* Racing: PRODUCERS push tagged values, CONSUMERS pop until all are out. */
#define PRODUCERS	3
#define CONSUMERS	3

static struct mpmcq *race_q;
static u8 race_seen[PRODUCERS][RACE_VALUES];
static long race_out, race_disorder, race_full, race_empty;

static void *producer(void *arg)
{
	long p = (long)arg;
	u64 i;

	for (i = 0; i < RACE_VALUES; i++) {
		while (mpmcq_push(race_q, (u64)p << 32 | i) == -ENOSPC) {
			__atomic_fetch_add(&race_full, 1, __ATOMIC_RELAXED);
			sched_yield();
		}
	}
	return NULL;
}

static void *consumer(void *arg)
{
	u64 last[PRODUCERS], v;
	int p;

	(void)arg;
	for (p = 0; p < PRODUCERS; p++)
		last[p] = ~0ull;
	while (__atomic_load_n(&race_out, __ATOMIC_RELAXED) < PRODUCERS * RACE_VALUES) {
		if (mpmcq_pop(race_q, &v)) {
			__atomic_fetch_add(&race_empty, 1, __ATOMIC_RELAXED);
			sched_yield();
			continue;
		}
		p = v >> 32;
		if (last[p] != ~0ull && (u32)v <= last[p])
			__atomic_fetch_add(&race_disorder, 1, __ATOMIC_RELAXED);
		last[p] = (u32)v;
		__atomic_fetch_add(&race_seen[p][(u32)v], 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&race_out, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int test_race(void)
{
	pthread_t th[PRODUCERS + CONSUMERS];
	long t, i, base = host_live_blocks;

	race_q = mpmcq_create(64);
	CHECK(race_q, "");
	for (t = 0; t < PRODUCERS; t++)
		CHECK(!pthread_create(&th[t], NULL, producer, (void *)t), "");
	for (t = 0; t < CONSUMERS; t++)
		CHECK(!pthread_create(&th[PRODUCERS + t], NULL, consumer, NULL), "");
	for (t = 0; t < PRODUCERS + CONSUMERS; t++)
		pthread_join(th[t], NULL);
	printf("    %d producers, %d consumers, %ld values; full %ld times, empty %ld\n",
	       PRODUCERS, CONSUMERS, race_out, race_full, race_empty);
	for (t = 0; t < PRODUCERS; t++)
		for (i = 0; i < RACE_VALUES; i++)
			CHECK(race_seen[t][i] == 1, "value %ld of %ld came out %d times", i, t,
			      race_seen[t][i]);
	CHECK(race_disorder == 0, "%ld values out of order", race_disorder);
	CHECK(mpmcq_count(race_q) == 0, "");
	CHECK(mpmcq_destroy(race_q) == 0, "");
	CHECK(host_live_blocks == base, "");
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("mpmcq", "fuzz", test_fuzz);
	host_run("mpmcq", "bad_calls", test_bad_calls);
	host_run("mpmcq", "race", test_race);
	return host_summary();
}
