// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The min-heap compiled natively: a fuzzer against a model (inserts, peeks, pops,
 * removes and re-keys by handle, stale handles, full heaps; equal keys must come out in
 * insertion order), bad calls and memory exhaustion, then threads inserting and popping
 * at once, every entry out exactly once, under AddressSanitizer and ThreadSanitizer.
 *
 * HOST_FUZZ_OPS=N sets the fuzzer's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/minheap.h>
#include "check.h"
#include "host_malloc.h"

char libarena_host_arena;

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS	50000
#define RACE_ENTRIES	5000
#else
#define DEFAULT_OPS	200000
#define RACE_ENTRIES	20000
#endif

#define MODEL_MAX	64

struct model_entry {
	u64 key, seq, value;
	s64 handle;
};

static struct model_entry model[MODEL_MAX];
static int model_n;

/* The model's first entry: smallest key, then oldest. */
static int model_first(void)
{
	int i, best = -1;

	for (i = 0; i < model_n; i++)
		if (best < 0 || model[i].key < model[best].key ||
		    (model[i].key == model[best].key && model[i].seq < model[best].seq))
			best = i;
	return best;
}

static void model_del(int i)
{
	model[i] = model[--model_n];
}

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS"), *sd = getenv("HOST_FUZZ_SEED");
	long ops = s ? atol(s) : DEFAULT_OPS, op, base = host_live_blocks;
	u64 seed = sd ? strtoull(sd, NULL, 0) : 0x5eedull, seq = 0, key, value;
	s64 stale[64], ret;
	int nstale = 0, cap = 0, i;
	struct minheap *h = NULL;

	for (op = 0; op < ops; op++) {
		u64 r = host_rnd(&seed) % 100;

		if (!h || r == 0) {
			if (h)
				CHECK(minheap_destroy(h) == 0, "");
			cap = 1 + host_rnd(&seed) % MODEL_MAX;
			h = minheap_create(cap);
			CHECK(h, "");
			model_n = nstale = 0;
		} else if (r < 45) {
			/* Few distinct keys: many ties. */
			key = host_rnd(&seed) % 16;
			ret = minheap_insert(h, key, op);
			if (model_n == cap) {
				CHECK(ret == -ENOSPC, "op %ld: insert into full: %lld", op, ret);
				continue;
			}
			CHECK(ret >= 0, "op %ld: insert: %lld", op, ret);
			model[model_n++] = (struct model_entry){ key, seq++, op, ret };
		} else if (r < 70) {
			i = model_first();
			ret = r < 60 ? minheap_pop(h, &key, &value) : minheap_peek(h, &key, &value);
			if (i < 0) {
				CHECK(ret == -ENOENT, "op %ld: %lld from empty", op, ret);
				continue;
			}
			CHECK(ret == 0 && key == model[i].key && value == model[i].value,
			      "op %ld: got %lld %llu %llu, want %llu %llu", op, ret, key, value,
			      model[i].key, model[i].value);
			if (r < 60) {
				if (nstale < 64)
					stale[nstale++] = model[i].handle;
				model_del(i);
			}
		} else if (r < 85 && model_n) {
			i = host_rnd(&seed) % model_n;
			ret = minheap_remove(h, model[i].handle, &key, &value);
			CHECK(ret == 0 && key == model[i].key && value == model[i].value,
			      "op %ld: remove: %lld", op, ret);
			if (nstale < 64)
				stale[nstale++] = model[i].handle;
			model_del(i);
		} else if (r < 95 && model_n) {
			i = host_rnd(&seed) % model_n;
			key = host_rnd(&seed) % 16;
			CHECK(minheap_update(h, model[i].handle, key) == 0, "op %ld", op);
			model[i].key = key;
			model[i].seq = seq++;
		} else if (nstale) {
			/* A handle popped or removed: refused, even after its slot was reused. */
			s64 hd = stale[host_rnd(&seed) % nstale];
			bool live = false;

			for (i = 0; i < model_n; i++)
				live |= model[i].handle == hd;
			if (!live) {
				CHECK(minheap_remove(h, hd, NULL, NULL) == -ENOENT, "op %ld", op);
				CHECK(minheap_update(h, hd, 1) == -ENOENT, "op %ld", op);
			}
		}
		CHECK(minheap_count(h) == model_n, "op %ld: count %d, want %d", op,
		      minheap_count(h), model_n);
	}
	CHECK(minheap_destroy(h) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

static int test_bad_calls(void)
{
	struct minheap *h;
	u64 k;

	CHECK(!minheap_create(0) && !minheap_create(MINHEAP_MAX_CAPACITY + 1), "");
	CHECK(minheap_insert(NULL, 1, 1) == -EINVAL && minheap_pop(NULL, &k, NULL) == -EINVAL,
	      "");
	h = minheap_create(4);
	CHECK(h, "");
	CHECK(minheap_remove(h, -1, NULL, NULL) == -EINVAL, "");
	CHECK(minheap_remove(h, 4, NULL, NULL) == -EINVAL, "");
	CHECK(minheap_update(h, 7, 1) == -EINVAL, "");
	h->count = 5;
	CHECK(minheap_pop(h, &k, NULL) == -EFAULT && minheap_insert(h, 1, 1) == -EFAULT, "");
	h->count = 0;
	CHECK(minheap_destroy(h) == 0, "");
	host_malloc_fail_after = 2;
	CHECK(!minheap_create(4), "");
	host_malloc_fail_after = -1;
	return 0;
}

/* Racing: each thread inserts its entries and pops as many, in bursts. */
#define THREADS	4

static struct minheap *race_h;
static u8 race_seen[THREADS * RACE_ENTRIES];
static long race_popped;

static void *race_thread(void *arg)
{
	long t = (long)arg;
	u64 seed = 0x9e3779b97f4a7c15ull * (t + 1), key, value;
	int i, j;

	host_cpu = t;
	for (i = 0; i < RACE_ENTRIES; i += 16) {
		for (j = i; j < i + 16 && j < RACE_ENTRIES; j++)
			while (minheap_insert(race_h, host_rnd(&seed) % 1000,
					      t * RACE_ENTRIES + j) < 0)
				sched_yield();
		for (j = i; j < i + 16 && j < RACE_ENTRIES; j++) {
			if (minheap_pop(race_h, &key, &value))
				continue;	/* others took more than they put */
			__atomic_fetch_add(&race_seen[value], 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&race_popped, 1, __ATOMIC_RELAXED);
		}
	}
	return NULL;
}

static int test_race(void)
{
	pthread_t th[THREADS];
	u64 key, value, last = 0;
	long t, left = 0, i;

	race_h = minheap_create(THREADS * 64);
	CHECK(race_h, "");
	for (t = 0; t < THREADS; t++)
		CHECK(!pthread_create(&th[t], NULL, race_thread, (void *)t), "");
	for (t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	/* The rest comes out in key order. */
	while (!minheap_pop(race_h, &key, &value)) {
		CHECK(key >= last, "%llu after %llu", key, last);
		last = key;
		race_seen[value]++;
		left++;
	}
	printf("    %d threads, %ld entries popped while racing, %ld after; lock timeouts %llu\n",
	       THREADS, race_popped, left, race_h->lock_timeouts);
	for (i = 0; i < THREADS * RACE_ENTRIES; i++)
		CHECK(race_seen[i] == 1, "entry %ld came out %d times", i, race_seen[i]);
	CHECK(minheap_destroy(race_h) == 0, "");
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("minheap", "fuzz", test_fuzz);
	host_run("minheap", "bad_calls", test_bad_calls);
	host_run("minheap", "race", test_race);
	return host_summary();
}
