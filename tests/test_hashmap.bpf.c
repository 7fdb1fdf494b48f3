// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The concurrent hash map: every call and error, growth from the smallest table with
 * every key found and iterated once, reserve, reuse of deleted entries, random operations
 * against a model, a map user space wrote over; then threads on every CPU inserting,
 * updating, deleting and looking up at once while the table doubles, with exact totals
 * and readers that must never miss a key nobody touches.
 */
#include <libarena/common.h>
#include <libarena/heap.h>
#include <libarena/hashmap.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

SEC("syscall")
int test_hashmap_calls(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = hmap_create(0);
	struct hmap_cursor c = HMAP_CURSOR_INIT;
	u64 val = 0, key = 0;
	s64 buckets;

	ARENA_ASSERT(m);
	ARENA_ASSERT_EQ(hmap_buckets(m), 1 << HMAP_MIN_BITS);
	ARENA_ASSERT_EQ(hmap_count(m), 0);
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), -ENOENT);
	ARENA_ASSERT_EQ(hmap_iter(m, &c, &key, &val), -ENOENT);
	ARENA_ASSERT_EQ(hmap_iter(m, &c, &key, &val), -ENOENT);	/* stays at the end */

	ARENA_ASSERT_EQ(hmap_insert(m, 1, 100), 0);
	ARENA_ASSERT_EQ(hmap_insert(m, 1, 200), -EEXIST);
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), 0);
	ARENA_ASSERT_EQ(val, 100);			/* the refused insert changed nothing */
	ARENA_ASSERT_EQ(hmap_update(m, 1, 101), 0);
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), 0);
	ARENA_ASSERT_EQ(val, 101);
	ARENA_ASSERT_EQ(hmap_update(m, 2, 5), -ENOENT);
	ARENA_ASSERT_EQ(hmap_lookup(m, 2, &val), -ENOENT);
	ARENA_ASSERT_EQ(hmap_upsert(m, 2, 202), 0);	/* added */
	ARENA_ASSERT_EQ(hmap_upsert(m, 2, 203), 1);	/* replaced */
	ARENA_ASSERT_EQ(hmap_lookup(m, 2, NULL), 0);
	ARENA_ASSERT_EQ(hmap_lookup(m, 2, &val), 0);
	ARENA_ASSERT_EQ(val, 203);
	/* Keys at the edges of the hash space and of u64. */
	ARENA_ASSERT_EQ(hmap_insert(m, 0, 7), 0);
	ARENA_ASSERT_EQ(hmap_insert(m, ~0ull, 8), 0);
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(0), 9), -EEXIST);	/* hash 0 is key 0 */
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(~0ull), 10), 0);
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(1ull << 63), 11), 0); /* a sentinel's hash */
	ARENA_ASSERT_EQ(hmap_count(m), 6);
	ARENA_ASSERT_EQ(hmap_lookup(m, hmap_unhash(1ull << 63), &val), 0);
	ARENA_ASSERT_EQ(val, 11);
	ARENA_ASSERT_EQ(hmap_lookup(m, hmap_unhash(~0ull), &val), 0);
	ARENA_ASSERT_EQ(val, 10);

	val = 0;
	ARENA_ASSERT_EQ(hmap_delete(m, 1, &val), 0);
	ARENA_ASSERT_EQ(val, 101);
	ARENA_ASSERT_EQ(hmap_delete(m, 1, &val), -ENOENT);
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), -ENOENT);
	ARENA_ASSERT_EQ(hmap_delete(m, 2, NULL), 0);
	ARENA_ASSERT_EQ(hmap_count(m), 4);
	/* The deleted entries' memory is the next insert's. */
	ARENA_ASSERT_EQ(hmap_insert(m, 1, 300), 0);
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), 0);
	ARENA_ASSERT_EQ(val, 300);
	ARENA_ASSERT_EQ(hmap_count(m), 5);

	/* Bad calls: a log line and -EINVAL, nothing changed. */
	ARENA_ASSERT_EQ(hmap_insert(NULL, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(hmap_update(NULL, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(hmap_upsert(NULL, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(hmap_delete(NULL, 1, NULL), -EINVAL);
	ARENA_ASSERT_EQ(hmap_lookup(NULL, 1, &val), -EINVAL);
	ARENA_ASSERT_EQ(hmap_iter(NULL, &c, &key, &val), -EINVAL);
	ARENA_ASSERT_EQ(hmap_iter(m, NULL, &key, &val), -EINVAL);
	ARENA_ASSERT_EQ(hmap_count(NULL), -EINVAL);
	ARENA_ASSERT_EQ(hmap_buckets(NULL), -EINVAL);
	ARENA_ASSERT_EQ(hmap_reserve(NULL, 10), -EINVAL);
	ARENA_ASSERT_EQ(hmap_destroy(NULL), -EINVAL);
	ARENA_ASSERT_EQ(hmap_grow(NULL), -EINVAL);
	ARENA_ASSERT_EQ(hmap_count(m), 5);
	/*
	 * Doubled by hand: every entry still there, also those whose hash is exactly where a
	 * new bucket starts (its sentinel goes before them).
	 */
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(1ull << 57), 12), 0);
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(3ull << 57), 13), 0);
	buckets = hmap_buckets(m);	/* 64, or 128 if region 0's entries doubled it */
	ARENA_ASSERT_EQ(hmap_grow(m), 0);
	ARENA_ASSERT_EQ(hmap_buckets(m), 2 * buckets);
	ARENA_ASSERT_EQ(hmap_lookup(m, hmap_unhash(1ull << 57), &val), 0);
	ARENA_ASSERT_EQ(val, 12);
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(3ull << 57), 14), -EEXIST);
	ARENA_ASSERT_EQ(hmap_delete(m, hmap_unhash(3ull << 57), &val), 0);
	ARENA_ASSERT_EQ(val, 13);
	ARENA_ASSERT_EQ(hmap_delete(m, hmap_unhash(1ull << 57), NULL), 0);
	ARENA_ASSERT_EQ(hmap_lookup(m, hmap_unhash(1ull << 63), &val), 0);
	ARENA_ASSERT_EQ(val, 11);
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), 0);
	ARENA_ASSERT_EQ(val, 300);
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);
#ifndef LIBARENA_ASAN
	/* A destroyed map is refused (its memory read after free: not in the sanitizer build). */
	ARENA_ASSERT_EQ(hmap_lookup(m, 1, &val), -EINVAL);
	ARENA_ASSERT_EQ(hmap_insert(m, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(hmap_destroy(m), -EINVAL);
#endif
	return 0;
}

#define GROW_KEYS	20000

/* Each key seen by a walk: in arena memory, whose values the verifier does not follow. */
u8 __arena_global seen[GROW_KEYS];
u64 __arena_global walk_bad, walk_n;
/* A test's failure count: in the arena, so the verifier does not follow it past asserts. */
u64 __arena_global t_wrong;

/* Walk the whole map: each key below n seen once, its value key * 3 + add; the count. */
static __noinline int walk_check(struct hmap __arena *m, u32 n, u64 add)
{
	struct hmap_cursor c = HMAP_CURSOR_INIT;
	u64 key = 0, val = 0, last = 0;
	u32 i;
	int ret;

	for (i = zero; i < n && can_loop; i++)
		seen[i] = 0;
	walk_bad = walk_n = 0;
	while (can_loop) {
		ret = hmap_iter(m, &c, &key, &val);
		if (ret)
			break;
		/* In hash order: each hash above the one before. */
		if ((walk_n && hmap_hash(key) <= last) || key >= n || val != key * 3 + add)
			walk_bad++;
		else
			seen[key]++;
		last = hmap_hash(key);
		walk_n++;
	}
	if (ret != -ENOENT)
		return -EIO;
	for (i = zero; i < n && can_loop; i++)
		if (seen[i] > 1)
			walk_bad++;
	return walk_bad ? -EUCLEAN : walk_n;
}

SEC("syscall")
int test_hashmap_grow(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = hmap_create(1);
	u64 val, i, missing = zero;
	s64 buckets = 0;

	ARENA_ASSERT(m);
	t_wrong = 0;
	ARENA_ASSERT_EQ(hmap_buckets(m), 1 << HMAP_MIN_BITS);
	/*
	 * Room for the doublings (to 32,768 buckets at most: 16 blocks of sentinels at the
	 * last) and the entries, so that none finds the reserves empty.
	 */
	ARENA_ASSERT_EQ(arena_heap_reserve(HMAP_BLOCK_BYTES, 40), 0);
	ARENA_ASSERT_EQ(arena_heap_reserve(sizeof(struct hmap_node), GROW_KEYS), 0);
	for (i = zero; i < GROW_KEYS && can_loop; i++) {
		if (hmap_insert(m, i, i * 3))
			missing++;
		/* A lookup of a key inserted earlier, as the table doubles under it. */
		val = 0;
		if (hmap_lookup(m, i / 2, &val) || val != i / 2 * 3)
			t_wrong++;
	}
	ARENA_ASSERT_EQ(missing, 0);
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_count(m), GROW_KEYS);
	buckets = hmap_buckets(m);
	/*
	 * At most HMAP_LOAD per bucket in each region, so at least this many buckets; the
	 * fullest region doubles the table, so it may run a doubling ahead of the mean.
	 */
	ARENA_ASSERT(buckets >= GROW_KEYS / HMAP_LOAD / 2);
	ARENA_ASSERT(buckets <= 4 * GROW_KEYS / HMAP_LOAD);
	ARENA_ASSERT_EQ(m->grow_failures, 0);
	ARENA_ASSERT(m->grows >= 7);
	for (i = zero; i < GROW_KEYS && can_loop; i++) {
		val = 0;
		if (hmap_lookup(m, i, &val) || val != i * 3)
			t_wrong++;
		if (hmap_lookup(m, i + GROW_KEYS, &val) != -ENOENT)
			t_wrong++;
	}
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(walk_check(m, GROW_KEYS, 0), GROW_KEYS);
	/* Delete the odd keys, update the even ones. */
	for (i = zero; i < GROW_KEYS && can_loop; i++) {
		if (i & 1)
			t_wrong += hmap_delete(m, i, &val) != 0 || val != i * 3;
		else
			t_wrong += hmap_update(m, i, i * 3 + 1) != 0;
	}
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_count(m), GROW_KEYS / 2);
	/* Only the even keys, each once, each with value key * 3 + 1. */
	ARENA_ASSERT_EQ(walk_check(m, GROW_KEYS, 1), GROW_KEYS / 2);
	for (i = zero; i < GROW_KEYS && can_loop; i += 2)
		t_wrong += seen[i] != 1;
	ARENA_ASSERT_EQ(t_wrong, 0);
	/* The odd keys back: into the free lists' memory, the table as it was. */
	for (i = zero + 1; i < GROW_KEYS && can_loop; i += 2)
		t_wrong += hmap_insert(m, i, i * 3 + 1) != 0;
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_buckets(m), buckets);
	ARENA_ASSERT_EQ(walk_check(m, GROW_KEYS, 1), GROW_KEYS);
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);
	return 0;
}

SEC("syscall")
int test_hashmap_reserve(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = hmap_create(1000);
	u64 i, val = 0;

	ARENA_ASSERT(m);
	t_wrong = 0;
	ARENA_ASSERT_EQ(hmap_buckets(m), 1024 / HMAP_LOAD); /* 1,000 / HMAP_LOAD, to a power of 2 */
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);

	m = hmap_create(10);
	ARENA_ASSERT(m);
	for (i = zero; i < 1000 && can_loop; i++)
		t_wrong += hmap_insert(m, i * 7919, i) != 0;
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_reserve(m, 8192), 0);
	ARENA_ASSERT_EQ(hmap_buckets(m), 8192 / HMAP_LOAD);
	ARENA_ASSERT_EQ(hmap_reserve(m, 100), 0);	/* never shrinks */
	ARENA_ASSERT_EQ(hmap_buckets(m), 8192 / HMAP_LOAD);
	for (i = zero; i < 1000 && can_loop; i++)
		t_wrong += hmap_lookup(m, i * 7919, &val) != 0 || val != i;
	ARENA_ASSERT_EQ(t_wrong, 0);
	/* 2^18 buckets: 8 MiB of sentinels, in 256 blocks. */
	ARENA_ASSERT_EQ(hmap_reserve(m, HMAP_LOAD << 18), 0);
	ARENA_ASSERT_EQ(hmap_buckets(m), 1 << 18);
	ARENA_ASSERT_EQ(hmap_reserve(m, HMAP_LOAD << 17), 0);	/* already there */
	for (i = zero; i < 1000 && can_loop; i++)
		t_wrong += hmap_lookup(m, i * 7919, &val) != 0 || val != i;
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_count(m), 1000);
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);
	return 0;
}

#define MODEL_KEYS	512
#define MODEL_OPS	20000

u64 __arena_global model_val[MODEL_KEYS];
u8 __arena_global model_in[MODEL_KEYS];

SEC("syscall")
int test_hashmap_model(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = hmap_create(4);
	u64 x = ctx->seed | 1, r, k, v, val, n = zero;
	u32 i, op;
	int ret, want;

	ARENA_ASSERT(m);
	t_wrong = 0;
	for (i = zero; i < MODEL_KEYS && can_loop; i++)
		model_in[i] = 0;
	for (i = zero; i < MODEL_OPS && can_loop; i++) {
		r = arena_test_rand(&x);
		/* Keys spread over u64 but few, so that every call meets existing keys. */
		k = (r >> 8) % MODEL_KEYS;
		v = r >> 20;
		op = r & 7;
		val = 0;
		if (op < 2) {
			ret = hmap_insert(m, k * 0x9e3779b97f4a7c15ull, v);
			want = model_in[k] ? -EEXIST : 0;
			if (!want) {
				model_in[k] = 1;
				model_val[k] = v;
				n++;
			}
		} else if (op < 3) {
			ret = hmap_update(m, k * 0x9e3779b97f4a7c15ull, v);
			want = model_in[k] ? 0 : -ENOENT;
			if (!want)
				model_val[k] = v;
		} else if (op < 4) {
			ret = hmap_upsert(m, k * 0x9e3779b97f4a7c15ull, v);
			want = model_in[k] ? 1 : 0;
			n += !model_in[k];
			model_in[k] = 1;
			model_val[k] = v;
		} else if (op < 6) {
			ret = hmap_delete(m, k * 0x9e3779b97f4a7c15ull, &val);
			want = model_in[k] ? 0 : -ENOENT;
			if (!want && val != model_val[k])
				t_wrong++;
			n -= model_in[k];
			model_in[k] = 0;
		} else {
			ret = hmap_lookup(m, k * 0x9e3779b97f4a7c15ull, &val);
			want = model_in[k] ? 0 : -ENOENT;
			if (!want && val != model_val[k])
				t_wrong++;
		}
		if (ret != want) {
			arena_stderr("op %u on key %llu: %d, the model says %d", op, k, ret, want);
			t_wrong++;
		}
	}
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_count(m), n);
	for (i = zero; i < MODEL_KEYS && can_loop; i++) {
		ret = hmap_lookup(m, i * 0x9e3779b97f4a7c15ull, &val);
		if (ret != (model_in[i] ? 0 : -ENOENT) || (!ret && val != model_val[i]))
			t_wrong++;
	}
	ARENA_ASSERT_EQ(t_wrong, 0);
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);
	return 0;
}

/* A map user space wrote over: -EFAULT and a log line, never an endless loop. */
SEC("syscall")
int test_hashmap_damaged(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = hmap_create(0);
	struct hmap_cursor c = HMAP_CURSOR_INIT;
	hmap_node_ptr sent, saved;
	u64 val = 0, key = 0;
	u32 bits;

	ARENA_ASSERT(m);
	ARENA_ASSERT_EQ(hmap_insert(m, 5, 5), 0);
	/* Bucket 0's sentinel pointing at itself: a cycle. Key 0 hashes into bucket 0. */
	sent = m->blocks[0];
	saved = sent->next;
	sent->next = sent;
	ARENA_ASSERT_EQ(hmap_lookup(m, hmap_unhash(1), &val), -EFAULT);
	ARENA_ASSERT_EQ(hmap_insert(m, hmap_unhash(1), 1), -EFAULT);
	ARENA_ASSERT_EQ(hmap_delete(m, hmap_unhash(1), NULL), -EFAULT);
	ARENA_ASSERT_EQ(hmap_iter(m, &c, &key, &val), -EFAULT);
	sent->next = saved;
	/* Table bits out of range. */
	bits = m->bits;
	m->bits = 63;
	ARENA_ASSERT_EQ(hmap_lookup(m, 5, &val), -EFAULT);
	ARENA_ASSERT_EQ(hmap_buckets(m), -EFAULT);
	ARENA_ASSERT_EQ(hmap_insert(m, 6, 6), -EFAULT);
	m->bits = bits;
	/* Repaired: all as before. */
	ARENA_ASSERT_EQ(hmap_lookup(m, 5, &val), 0);
	ARENA_ASSERT_EQ(val, 5);
	ARENA_ASSERT_EQ(hmap_count(m), 1);
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);
	return 0;
}

/*
 * Threads on every CPU at once, the map starting at its smallest table so that it
 * doubles under them. Thread t owns the keys t * RACE_OWN + i: it inserts them all,
 * updates them, deletes the odd ones. Every thread also upserts and deletes the shared
 * keys, counting what each call says it did, and looks up the stable keys (inserted by
 * __init, touched by nobody), which must always be found with their values.
 */
#define RACE_THREADS	4
#define RACE_OWN	3000
#define RACE_SHARED	256
#define RACE_STABLE	512
#define RACE_OWN_BASE	(1ull << 40)
#define RACE_SHARED_BASE (1ull << 50)

u64 __arena_global race_map;

u64 __arena_global race_added[RACE_THREADS], race_deleted[RACE_THREADS];
u64 __arena_global race_stable_bad[RACE_THREADS], race_errors[RACE_THREADS];

SEC("syscall")
int parallel_test_hashmap_race__init(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = hmap_create(0);
	u64 i, wrong = zero;

	ARENA_ASSERT(m);
	for (i = zero; i < RACE_STABLE && can_loop; i++)
		wrong += hmap_insert(m, i, ~i) != 0;
	ARENA_ASSERT_EQ(wrong, 0);
	for (i = zero; i < RACE_THREADS && can_loop; i++)
		race_added[i] = race_deleted[i] = race_stable_bad[i] = race_errors[i] = 0;
	race_map = (u64)m;
	return 0;
}

static __noinline int race_thread(u32 me)
{
	struct hmap __arena *m = (struct hmap __arena *)race_map;
	u64 base = RACE_OWN_BASE + (u64)me * RACE_OWN, x = me + 1, i, k, val;
	int ret;

	if (me >= RACE_THREADS)
		return -EINVAL;
	for (i = zero; i < RACE_OWN && can_loop; i++) {
		ret = ARENA_TEST_RETRY(hmap_insert(m, base + i, i));
		if (ret)
			race_errors[me]++;
		/* Shared keys: whichever call wins, its result is counted. */
		k = RACE_SHARED_BASE + arena_test_rand(&x) % RACE_SHARED;
		if (i & 1) {
			ret = ARENA_TEST_RETRY(hmap_upsert(m, k, i));
			if (!ret)
				race_added[me]++;
			else if (ret != 1)
				race_errors[me]++;
		} else {
			ret = ARENA_TEST_RETRY(hmap_delete(m, k, NULL));
			if (!ret)
				race_deleted[me]++;
			else if (ret != -ENOENT)
				race_errors[me]++;
		}
		/* A stable key: always there, always its value. */
		k = arena_test_rand(&x) % RACE_STABLE;
		val = 0;
		if (hmap_lookup(m, k, &val) || val != ~k)
			race_stable_bad[me]++;
		/* One of ours inserted before: there, with its value. */
		k = arena_test_rand(&x) % (i + 1);
		val = ~0ull;
		if (hmap_lookup(m, base + k, &val) || val != k)
			race_errors[me]++;
	}
	for (i = zero; i < RACE_OWN && can_loop; i++) {
		if (ARENA_TEST_RETRY(hmap_update(m, base + i, i + 1)))
			race_errors[me]++;
		if ((i & 1) && ARENA_TEST_RETRY(hmap_delete(m, base + i, &val)))
			race_errors[me]++;
	}
	return i == RACE_OWN ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_hashmap_race__0(struct arena_test_ctx *ctx) { return race_thread(0); }
SEC("syscall")
int parallel_test_hashmap_race__1(struct arena_test_ctx *ctx) { return race_thread(1); }
SEC("syscall")
int parallel_test_hashmap_race__2(struct arena_test_ctx *ctx) { return race_thread(2); }
SEC("syscall")
int parallel_test_hashmap_race__3(struct arena_test_ctx *ctx) { return race_thread(3); }

u64 __arena_global race_sum_added, race_sum_deleted, race_shared_in, race_wrong;

SEC("syscall")
int parallel_test_hashmap_race__fini(struct arena_test_ctx *ctx)
{
	struct hmap __arena *m = (struct hmap __arena *)race_map;
	u64 i, t, val;

	race_sum_added = race_sum_deleted = race_shared_in = race_wrong = 0;
	for (t = zero; t < RACE_THREADS && can_loop; t++) {
		ARENA_ASSERT_EQ(race_errors[t], 0);
		ARENA_ASSERT_EQ(race_stable_bad[t], 0);
		race_sum_added += race_added[t];
		race_sum_deleted += race_deleted[t];
	}
	for (i = zero; i < RACE_SHARED && can_loop; i++)
		race_shared_in += !hmap_lookup(m, RACE_SHARED_BASE + i, &val);
	/* Every add and delete the calls reported, and nothing else, happened. */
	ARENA_ASSERT_EQ(race_sum_added - race_sum_deleted, race_shared_in);
	for (t = zero; t < RACE_THREADS && can_loop; t++) {
		for (i = zero; i < RACE_OWN && can_loop; i++) {
			val = 0;
			if (i & 1)
				race_wrong += hmap_lookup(m, RACE_OWN_BASE + t * RACE_OWN + i,
							  &val) != -ENOENT;
			else
				race_wrong += hmap_lookup(m, RACE_OWN_BASE + t * RACE_OWN + i,
							  &val) || val != i + 1;
		}
	}
	ARENA_ASSERT_EQ(race_wrong, 0);
	ARENA_ASSERT_EQ(hmap_count(m), RACE_STABLE + RACE_THREADS * RACE_OWN / 2 + race_shared_in);
	/*
	 * It grew under them (a doubling that found no memory in a CPU's reserves is tried
	 * again later, so only the first, of a few KiB, is certain).
	 */
	ARENA_ASSERT(hmap_buckets(m) > 1 << HMAP_MIN_BITS);
	arena_stdout("hashmap race: %lld buckets, %llu doublings, %llu without memory",
		     hmap_buckets(m), m->grows, m->grow_failures);
	ARENA_ASSERT_EQ(hmap_destroy(m), 0);
	return 0;
}
