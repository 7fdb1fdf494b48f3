// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The Chase-Lev deque compiled natively: a fuzzer against a model deque (one thread,
 * every outcome predictable), bad calls and memory exhaustion while growing, then an
 * owner and three thieves racing over values that must each come out exactly once, under
 * AddressSanitizer and ThreadSanitizer.
 *
 * HOST_FUZZ_OPS=N sets the fuzzer's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/spmc.h>
#include "check.h"
#include "host_malloc.h"

char libarena_host_arena;

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS 200000
#define RACE_VALUES 200000
#else
#define DEFAULT_OPS 1000000
#define RACE_VALUES 1000000
#endif

static u64 rng;

static u64 rnd(void)
{
	return host_rnd(&rng);
}

/* The model: values at positions head .. tail - 1 of a ring larger than the deque. */
#define MODEL_SLOTS (2 * SPMC_MAX_VALUES)
static u64 model[MODEL_SLOTS];
static u64 head, tail;

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS");
	long ops = s ? atol(s) : DEFAULT_OPS, base = host_live_blocks, op;
	struct spmc *q = spmc_create();
	u64 v, next = 1, most = 0, grows_seen;
	int ret, burst = 0;

	CHECK(q, "");
	head = tail = 0;
	for (op = 0; op < ops; op++) {
		int r = rnd() % 100;

		/* Now and then a burst of pushes, so the array grows far and shrinks back. */
		if (!burst && rnd() % 5000 == 0)
			burst = rnd() % 20000;
		if (burst || r < 50) {
			if (burst)
				burst--;
			ret = spmc_owned_add(q, next);
			if (tail - head == SPMC_MAX_VALUES) {
				CHECK(ret == -E2BIG, "op %ld: add to a full deque: %d", op, ret);
				burst = 0;
				continue;
			}
			CHECK(ret == 0, "op %ld: add: %d", op, ret);
			model[tail++ % MODEL_SLOTS] = next++;
		} else if (r < 75) {
			ret = spmc_owned_remove(q, &v);
			if (head == tail) {
				CHECK(ret == -ENOENT, "op %ld: remove from empty: %d", op, ret);
			} else {
				CHECK(ret == 0 && v == model[--tail % MODEL_SLOTS],
				      "op %ld: remove: %d, %llu", op, ret, v);
			}
		} else {
			ret = spmc_steal(q, &v);
			if (head == tail) {
				CHECK(ret == -ENOENT, "op %ld: steal from empty: %d", op, ret);
			} else {
				CHECK(ret == 0 && v == model[head++ % MODEL_SLOTS],
				      "op %ld: steal: %d, %llu", op, ret, v);
			}
		}
		CHECK(spmc_count(q) == (int)(tail - head), "op %ld: count %d, model %llu", op,
		      spmc_count(q), tail - head);
		if (tail - head > most)
			most = tail - head;
	}
	grows_seen = q->grows;
	printf("    %ld operations, up to %llu values held, %llu grows\n", ops, most, grows_seen);
	CHECK(spmc_destroy(q) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

/* Full at SPMC_MAX_VALUES; out of memory while growing; bad calls. Nothing is lost. */
static int test_limits(void)
{
	struct spmc *q = spmc_create();
	u64 v, i;

	CHECK(q, "");
	for (i = 0; i < SPMC_ARR_BASESZ; i++)
		CHECK(spmc_owned_add(q, i) == 0, "");
	host_malloc_fail_after = 0;
	CHECK(spmc_owned_add(q, i) == -ENOMEM, "growing without memory");
	host_malloc_fail_after = -1;
	CHECK(spmc_count(q) == SPMC_ARR_BASESZ && q->grows == 0, "");
	for (; i < SPMC_MAX_VALUES; i++)
		CHECK(spmc_owned_add(q, i) == 0, "add %llu", i);
	CHECK(spmc_owned_add(q, i) == -E2BIG, "");
	CHECK(q->grows == SPMC_ARR_ORDERS - 1, "%llu grows", q->grows);
	for (i = 0; i < SPMC_MAX_VALUES / 2; i++)
		CHECK(spmc_steal(q, &v) == 0 && v == i, "");
	for (i = SPMC_MAX_VALUES - 1; i >= SPMC_MAX_VALUES / 2; i--)
		CHECK(spmc_owned_remove(q, &v) == 0 && v == i, "");
	CHECK(spmc_owned_remove(q, &v) == -ENOENT && spmc_steal(q, &v) == -ENOENT, "");

	CHECK(spmc_owned_add(NULL, 1) == -EINVAL, "");
	CHECK(spmc_steal(NULL, &v) == -EINVAL, "");
	CHECK(spmc_steal(q, NULL) == -EINVAL, "");
	CHECK(spmc_owned_remove(q, NULL) == -EINVAL, "");
	CHECK(spmc_destroy(NULL) == -EINVAL, "");
	host_malloc_fail_after = 1;
	CHECK(!spmc_create(), "the array cannot be had");
	host_malloc_fail_after = -1;
	CHECK(spmc_destroy(q) == 0, "");
	return 0;
}

/*
 * The race: the owner pushes RACE_VALUES values in bursts, pops up to a quarter back, thieves
 * steal all the while. Every value must come out exactly once; each thief sees its
 * values in increasing order (steals are FIFO); the owner's pops between two pushes
 * come out decreasing (LIFO).
 */
#define THIEVES 3

static struct spmc *rq;
static u8 *seen;
static int done, bad;
static long stolen[THIEVES], popped, races_lost, owner_lost;

static void take(u64 v)
{
	if (v >= RACE_VALUES || __atomic_fetch_add(&seen[v], 1, __ATOMIC_RELAXED))
		__atomic_store_n(&bad, 1, __ATOMIC_RELAXED);
}

static void *thief(void *arg)
{
	long id = (long)arg, n = 0, lost = 0, empty = 0;
	u64 v, last = 0;
	int ret;

	for (;;) {
		ret = spmc_steal(rq, &v);
		if (ret == 0) {
			if (n && v <= last)
				__atomic_store_n(&bad, 2, __ATOMIC_RELAXED);
			last = v;
			take(v);
			n++;
		} else if (ret == -EAGAIN) {
			lost++;
		} else if (ret == -ENOENT) {
			if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
				break;
			if (++empty % 64 == 0)
				sched_yield();
		} else {
			__atomic_store_n(&bad, 3, __ATOMIC_RELAXED);
			break;
		}
	}
	stolen[id] = n;
	__atomic_fetch_add(&races_lost, lost, __ATOMIC_RELAXED);
	return NULL;
}

static int owner_pop(u64 *v)
{
	int ret;

	for (int tries = 0; tries < 1000; tries++) {
		ret = spmc_owned_remove(rq, v);
		if (ret != -EAGAIN)
			return ret;
		/* A thief won the last value: the deque is empty now. */
		owner_lost++;
	}
	return ret;
}

static int race(u64 big_burst, u64 small_burst)
{
	pthread_t t[THIEVES];
	u64 v, next = 0, x = 12345, prev;
	long total = 0;
	int ret;

	memset(stolen, 0, sizeof(stolen));
	seen = calloc(RACE_VALUES, 1);
	rq = spmc_create();
	CHECK(seen && rq, "");
	done = bad = 0;
	popped = races_lost = owner_lost = 0;
	for (long i = 0; i < THIEVES; i++)
		CHECK(!pthread_create(&t[i], NULL, thief, (void *)i), "");
	while (next < RACE_VALUES) {
		/* A burst of 1 .. 4096 pushes, then pop back up to a quarter of it. */
		u64 burst, pops;

		x = x * 6364136223846793005ull + 1;
		burst = 1 + (x >> 24) % ((x >> 40) % 8 ? small_burst : big_burst);
		pops = (x >> 12) % (burst / 4 + 2);

		for (u64 i = 0; i < burst && next < RACE_VALUES; i++) {
			/* Full (thieves slower than us): let them catch up. */
			for (int tries = 0; (ret = spmc_owned_add(rq, next)) == -E2BIG &&
			     tries < 100000; tries++)
				sched_yield();
			CHECK(ret == 0, "add: %d", ret);
			next++;
		}
		prev = next;
		for (u64 i = 0; i < pops; i++) {
			ret = owner_pop(&v);
			if (ret == -ENOENT)
				break;
			CHECK(ret == 0 && v < prev, "owner pop %d %llu after %llu", ret, v, prev);
			prev = v;
			take(v);
			popped++;
		}
	}
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	while ((ret = owner_pop(&v)) == 0) {
		take(v);
		popped++;
	}
	CHECK(ret == -ENOENT, "draining: %d", ret);
	for (int i = 0; i < THIEVES; i++) {
		pthread_join(t[i], NULL);
		total += stolen[i];
	}
	CHECK(!bad, "bad %d: a value twice, out of order or unknown", bad);
	for (u64 i = 0; i < RACE_VALUES; i++)
		CHECK(seen[i] == 1, "value %llu came out %d times", i, seen[i]);
	printf(
	       "    %d values: %ld stolen (%ld, %ld, %ld), %ld popped, %ld races lost, %llu grows\n",
	       RACE_VALUES, total, stolen[0], stolen[1], stolen[2], popped,
	       races_lost + owner_lost, rq->grows);
	CHECK(total + popped == RACE_VALUES, "");
	CHECK(spmc_destroy(rq) == 0, "");
	free(seen);
	return 0;
}

static int test_race(void)
{
	return race(4096, 64);
}

/* Bursts of one or two values: the owner and the thieves fight over the last one. */
static int test_race_last_value(void)
{
	return race(2, 1);
}

int main(void)
{
	const char *seed = getenv("HOST_FUZZ_SEED");

	host_begin(true);
	rng = seed ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ull;
	host_run("host", "spmc_fuzz", test_fuzz);
	host_run("host", "spmc_limits", test_limits);
	host_run("host", "spmc_race", test_race);
	host_run("host", "spmc_race_last_value", test_race_last_value);
	return host_summary();
}
