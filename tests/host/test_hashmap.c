// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The concurrent hash map compiled natively: a fuzzer against a model (inserts, updates,
 * upserts, deletes, lookups and whole walks, maps destroyed and made again, no block
 * leaked), growth from the smallest table to 2^17 buckets, bad calls, damage and memory
 * exhaustion (a doubling without memory leaves a working map), then writers and readers
 * racing while the table doubles: exact totals, stable keys never missed, and walks that
 * return every stable key exactly once. Under AddressSanitizer and ThreadSanitizer.
 *
 * HOST_FUZZ_OPS=N sets the fuzzer's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/hashmap.h>
#include "check.h"
#include "host_malloc.h"

char libarena_host_arena;

/* The heaps' reservation, for hmap_reserve(): libc malloc needs none. */
int arena_heap_reserve_small(u64 size, u64 count)
{
	return 0;
}

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS	100000
#define GROW_KEYS	50000
#define RACE_OWN	10000
#else
#define DEFAULT_OPS	1000000
#define GROW_KEYS	200000
#define RACE_OWN	40000
#endif

#define MODEL_KEYS	300
#define KEY(i)		((u64)(i) * 0x9e3779b97f4a7c15ull)

static u64 model_val[MODEL_KEYS];
static bool model_in[MODEL_KEYS];
static int seen[MODEL_KEYS];

/* A whole walk: every model key once with its value, nothing else. */
static int walk_model(struct hmap *m)
{
	struct hmap_cursor c = HMAP_CURSOR_INIT;
	u64 key, val, last = 0;
	int i, n = 0, ret;

	memset(seen, 0, sizeof(seen));
	while (!(ret = hmap_iter(m, &c, &key, &val))) {
		CHECK(!n || hmap_hash(key) > last, "walk out of hash order");
		last = hmap_hash(key);
		for (i = 0; i < MODEL_KEYS && KEY(i) != key; i++)
			;
		CHECK(i < MODEL_KEYS && model_in[i] && model_val[i] == val,
		      "walk: key %llx not in the model or its value wrong", key);
		seen[i]++;
		n++;
	}
	CHECK(ret == -ENOENT, "walk ended with %d", ret);
	CHECK(hmap_iter(m, &c, &key, &val) == -ENOENT, "");
	for (i = 0; i < MODEL_KEYS; i++)
		CHECK(seen[i] == model_in[i], "key %d seen %d times", i, seen[i]);
	return 0;
}

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS"), *sd = getenv("HOST_FUZZ_SEED");
	long ops = s ? atol(s) : DEFAULT_OPS, op, base = host_live_blocks, n = 0;
	u64 seed = sd ? strtoull(sd, NULL, 0) : 0xfeedull, r, v, val;
	struct hmap *m = NULL;
	int k, ret, want;

	for (op = 0; op < ops; op++) {
		r = host_rnd(&seed);
		if (!m || r % 20000 == 0) {
			if (m)
				CHECK(hmap_destroy(m) == 0, "");
			CHECK(host_live_blocks == base, "op %ld: %ld blocks left after destroy", op,
			      host_live_blocks - base);
			m = hmap_create(r % 3 ? 0 : r % 1000);
			CHECK(m, "op %ld: create", op);
			memset(model_in, 0, sizeof(model_in));
			n = 0;
		}
		k = (r >> 8) % MODEL_KEYS;
		v = r >> 24;
		val = 0;
		switch ((r >> 4) % 8) {
		case 0:
		case 1:
			ret = hmap_insert(m, KEY(k), v);
			want = model_in[k] ? -EEXIST : 0;
			if (!want) {
				model_in[k] = true;
				model_val[k] = v;
				n++;
			}
			break;
		case 2:
			ret = hmap_update(m, KEY(k), v);
			want = model_in[k] ? 0 : -ENOENT;
			if (!want)
				model_val[k] = v;
			break;
		case 3:
			ret = hmap_upsert(m, KEY(k), v);
			want = model_in[k];
			n += !model_in[k];
			model_in[k] = true;
			model_val[k] = v;
			break;
		case 4:
		case 5:
			ret = hmap_delete(m, KEY(k), &val);
			want = model_in[k] ? 0 : -ENOENT;
			CHECK(want || val == model_val[k], "op %ld: deleted value", op);
			n -= model_in[k];
			model_in[k] = false;
			break;
		default:
			ret = hmap_lookup(m, KEY(k), &val);
			want = model_in[k] ? 0 : -ENOENT;
			CHECK(want || val == model_val[k], "op %ld: looked-up value", op);
			break;
		}
		CHECK(ret == want, "op %ld on key %d: %d, the model says %d", op, k, ret, want);
		CHECK(hmap_count(m) == n, "op %ld: count %lld, want %ld", op, hmap_count(m), n);
		if (op % 1000 == 0 && walk_model(m))
			return -1;
	}
	CHECK(hmap_destroy(m) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

static int test_grow(void)
{
	struct hmap_cursor c = HMAP_CURSOR_INIT;
	long base = host_live_blocks;
	u64 i, key, val, n = 0;
	static u8 walked[GROW_KEYS];
	struct hmap *m;

	m = hmap_create(0);
	CHECK(m && hmap_buckets(m) == 1 << HMAP_MIN_BITS, "");
	for (i = 0; i < GROW_KEYS; i++)
		CHECK(hmap_insert(m, i, ~i) == 0, "insert %llu", i);
	CHECK(hmap_count(m) == GROW_KEYS, "");
	CHECK(hmap_buckets(m) >= GROW_KEYS / HMAP_LOAD / 2, "%lld buckets", hmap_buckets(m));
	CHECK(m->grow_failures == 0 && !m->pending, "");
	for (i = 0; i < GROW_KEYS; i++) {
		CHECK(hmap_lookup(m, i, &val) == 0 && val == ~i, "lookup %llu", i);
		CHECK(hmap_lookup(m, i + GROW_KEYS, &val) == -ENOENT, "");
	}
	memset(walked, 0, sizeof(walked));
	while (!hmap_iter(m, &c, &key, &val)) {
		CHECK(key < GROW_KEYS && val == ~key && !walked[key], "walk: key %llu", key);
		walked[key] = 1;
		n++;
	}
	CHECK(n == GROW_KEYS, "walked %llu", n);
	/* By hand: hmap_grow and hmap_reserve, every entry kept. */
	n = hmap_buckets(m);
	CHECK(hmap_grow(m) == 0 && hmap_buckets(m) == (s64)n * 2, "");
	CHECK(hmap_reserve(m, HMAP_LOAD * n * 4) == 0 && hmap_buckets(m) == (s64)n * 4, "");
	CHECK(hmap_reserve(m, 10) == 0 && hmap_buckets(m) == (s64)n * 4, "never shrinks");
	for (i = 0; i < GROW_KEYS; i++)
		CHECK(hmap_lookup(m, i, &val) == 0 && val == ~i, "lookup %llu", i);
	CHECK(hmap_destroy(m) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

static int test_bad_calls(void)
{
	long base = host_live_blocks;
	struct hmap *m;
	u64 val = 0, key = 0;
	u32 bits;
	int i;

	CHECK(hmap_insert(NULL, 1, 1) == -EINVAL && hmap_lookup(NULL, 1, &val) == -EINVAL, "");
	CHECK(hmap_delete(NULL, 1, NULL) == -EINVAL && hmap_count(NULL) == -EINVAL, "");
	CHECK(hmap_grow(NULL) == -EINVAL && hmap_destroy(NULL) == -EINVAL, "");
	m = hmap_create(0);
	CHECK(m && hmap_iter(m, NULL, &key, &val) == -EINVAL, "");
	/* No memory for an entry: -ENOMEM, nothing changed. */
	host_malloc_fail_after = 0;
	CHECK(hmap_insert(m, 1, 1) == -ENOMEM && hmap_count(m) == 0, "");
	CHECK(hmap_lookup(m, 1, &val) == -ENOENT, "");
	host_malloc_fail_after = -1;
	/* A doubling without memory: the inserts go on, the next one past the delay retries. */
	for (i = 0; i < 128; i++)
		CHECK(hmap_insert(m, i, i) == 0, "");
	bits = m->bits;
	host_malloc_fail_after = 0;
	CHECK(hmap_grow(m) == -ENOMEM && m->grow_failures >= 1 && !m->pending, "");
	CHECK(m->bits == bits, "");
	host_malloc_fail_after = 0;	/* again: nothing half made is kept */
	CHECK(hmap_grow(m) == -ENOMEM && !m->pending, "");
	host_malloc_fail_after = -1;
	for (i = 0; i < 128; i++)
		CHECK(hmap_lookup(m, i, &val) == 0 && val == (u64)i, "");
	CHECK(hmap_grow(m) == 0, "memory back: it doubles");
	/* Keys whose hash is where the next doubling's buckets start: found after it. */
	bits = m->bits;
	for (i = 1; i < 8; i += 2)
		CHECK(hmap_insert(m, hmap_unhash((u64)i << (63 - bits)), i) == 0, "");
	CHECK(hmap_grow(m) == 0, "");
	for (i = 1; i < 8; i += 2) {
		CHECK(hmap_lookup(m, hmap_unhash((u64)i << (63 - bits)), &val) == 0 &&
		      val == (u64)i, "key at new bucket %d's start", i);
		CHECK(hmap_insert(m, hmap_unhash((u64)i << (63 - bits)), i) == -EEXIST, "");
		CHECK(hmap_delete(m, hmap_unhash((u64)i << (63 - bits)), NULL) == 0, "");
	}
	/* Damage: bits out of range. (A cycle is the VM test's: the host has no loop budget.) */
	bits = m->bits;
	m->bits = 40;
	CHECK(hmap_lookup(m, 5, &val) == -EFAULT && hmap_buckets(m) == -EFAULT, "");
	CHECK(hmap_grow(m) == -EFAULT, "");
	m->bits = bits;
	CHECK(hmap_lookup(m, 5, &val) == 0 && val == 5, "repaired");
	CHECK(hmap_destroy(m) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

/*
 * Racing: THREADS writers each insert, update and delete keys of their own and upsert and
 * delete shared keys, counting what each call says it did; each also looks up stable
 * keys (touched by nobody), which must always be there; a walker walks the whole map
 * again and again, each walk returning every stable key exactly once.
 */
#define THREADS		4
#define RACE_SHARED	512
#define RACE_STABLE	2000
#define OWN_BASE	(1ull << 40)
#define SHARED_BASE	(1ull << 50)

static struct hmap *race_m;

/* A writer that gave up on a region's lock changed nothing: the call is made again. */
#define RETRY(call)								\
	({									\
		int ___r;							\
		while ((___r = (call)) == -ETIMEDOUT)				\
			sched_yield();						\
		___r;								\
	})
static long race_added[THREADS], race_deleted[THREADS], race_bad[THREADS];
static long race_walks, race_walk_bad, race_done;

static void *race_writer(void *arg)
{
	long me = (long)arg;
	u64 base = OWN_BASE + me * RACE_OWN, x = me + 1, i, k, val;
	int ret;

	host_cpu = me;
	for (i = 0; i < RACE_OWN; i++) {
		if (RETRY(hmap_insert(race_m, base + i, i)))
			race_bad[me]++;
		k = SHARED_BASE + host_rnd(&x) % RACE_SHARED;
		if (i & 1) {
			ret = RETRY(hmap_upsert(race_m, k, i));
			race_added[me] += ret == 0;
			race_bad[me] += ret != 0 && ret != 1;
		} else {
			ret = RETRY(hmap_delete(race_m, k, NULL));
			race_deleted[me] += ret == 0;
			race_bad[me] += ret != 0 && ret != -ENOENT;
		}
		k = host_rnd(&x) % RACE_STABLE;
		if (hmap_lookup(race_m, k, &val) || val != ~k)
			race_bad[me]++;
		k = host_rnd(&x) % (i + 1);
		if (hmap_lookup(race_m, base + k, &val) || val != k)
			race_bad[me]++;
	}
	for (i = 0; i < RACE_OWN; i++) {
		race_bad[me] += RETRY(hmap_update(race_m, base + i, i + 1)) != 0;
		if (i & 1)
			race_bad[me] += RETRY(hmap_delete(race_m, base + i, NULL)) != 0;
	}
	__atomic_fetch_add(&race_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *race_walker(void *arg)
{
	static u8 stable_seen[RACE_STABLE];
	struct hmap_cursor c;
	u64 key, val;
	int i;

	(void)arg;
	while (__atomic_load_n(&race_done, __ATOMIC_ACQUIRE) < THREADS) {
		memset(stable_seen, 0, sizeof(stable_seen));
		c = (struct hmap_cursor)HMAP_CURSOR_INIT;
		while (!hmap_iter(race_m, &c, &key, &val))
			if (key < RACE_STABLE && (val != ~key || stable_seen[key]++))
				race_walk_bad++;
		for (i = 0; i < RACE_STABLE; i++)
			race_walk_bad += stable_seen[i] != 1;
		race_walks++;
	}
	return NULL;
}

static int test_race(void)
{
	long t, added = 0, deleted = 0, shared_in = 0, base = host_live_blocks;
	pthread_t th[THREADS + 1];
	u64 i, val;

	race_m = hmap_create(0);
	CHECK(race_m, "");
	for (i = 0; i < RACE_STABLE; i++)
		CHECK(hmap_insert(race_m, i, ~i) == 0, "");
	for (t = 0; t < THREADS; t++)
		CHECK(!pthread_create(&th[t], NULL, race_writer, (void *)t), "");
	CHECK(!pthread_create(&th[THREADS], NULL, race_walker, NULL), "");
	for (t = 0; t <= THREADS; t++)
		pthread_join(th[t], NULL);
	for (t = 0; t < THREADS; t++) {
		CHECK(race_bad[t] == 0, "writer %ld: %ld wrong results", t, race_bad[t]);
		added += race_added[t];
		deleted += race_deleted[t];
	}
	for (i = 0; i < RACE_SHARED; i++)
		shared_in += !hmap_lookup(race_m, SHARED_BASE + i, &val);
	printf(
	       "    %d writers, %ld walks, %lld buckets after %llu doublings; shared keys added %ld, deleted %ld, in %ld\n",
	       THREADS, race_walks, hmap_buckets(race_m), race_m->grows, added, deleted, shared_in);
	CHECK(race_walk_bad == 0, "%ld wrong in walks", race_walk_bad);
	CHECK(added - deleted == shared_in, "");
	for (t = 0; t < THREADS; t++)
		for (i = 0; i < RACE_OWN; i++)
			CHECK((i & 1) ? hmap_lookup(race_m, OWN_BASE + t * RACE_OWN + i, &val) ==
					-ENOENT :
				!hmap_lookup(race_m, OWN_BASE + t * RACE_OWN + i, &val) &&
					val == i + 1, "writer %ld key %llu", t, i);
	CHECK(hmap_count(race_m) == RACE_STABLE + THREADS * RACE_OWN / 2 + shared_in, "");
	CHECK(race_m->grows >= 5, "");
	CHECK(hmap_destroy(race_m) == 0, "");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("hashmap", "fuzz", test_fuzz);
	host_run("hashmap", "grow", test_grow);
	host_run("hashmap", "bad_calls", test_bad_calls);
	host_run("hashmap", "race", test_race);
	return host_summary();
}
