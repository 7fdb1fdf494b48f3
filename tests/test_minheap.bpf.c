// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The min-heap: order and ties, handles (remove, re-key, stale), a full heap, bad calls
 * and a heap user space wrote over, random operations against a model; then threads on
 * every CPU inserting and popping at once, every entry out exactly once.
 */
#include <libarena/common.h>
#include <libarena/minheap.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

SEC("syscall")
int test_minheap_order(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = minheap_create(16);
	u64 key = 0, value = 0;
	int i;

	ARENA_ASSERT(h);
	ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), -ENOENT);
	ARENA_ASSERT_EQ(minheap_peek(h, &key, &value), -ENOENT);
	/* Keys 5, 3, 9, 3, 1, 3: values say the insertion order. */
	ARENA_ASSERT(minheap_insert(h, 5, 0) >= 0);
	ARENA_ASSERT(minheap_insert(h, 3, 1) >= 0);
	ARENA_ASSERT(minheap_insert(h, 9, 2) >= 0);
	ARENA_ASSERT(minheap_insert(h, 3, 3) >= 0);
	ARENA_ASSERT(minheap_insert(h, 1, 4) >= 0);
	ARENA_ASSERT(minheap_insert(h, 3, 5) >= 0);
	ARENA_ASSERT_EQ(minheap_count(h), 6);
	ARENA_ASSERT_EQ(minheap_peek(h, &key, &value), 0);
	ARENA_ASSERT_EQ(key, 1);
	ARENA_ASSERT_EQ(minheap_count(h), 6);
	ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
	ARENA_ASSERT_EQ(value, 4);
	/* Equal keys in insertion order. */
	for (i = zero; i < 3 && can_loop; i++) {
		ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
		ARENA_ASSERT_EQ(key, 3);
		ARENA_ASSERT_EQ(value, 1 + 2 * i);
	}
	ARENA_ASSERT_EQ(minheap_pop(h, &key, NULL), 0);
	ARENA_ASSERT_EQ(key, 5);
	ARENA_ASSERT_EQ(minheap_pop(h, NULL, &value), 0);
	ARENA_ASSERT_EQ(value, 2);
	ARENA_ASSERT_EQ(minheap_count(h), 0);
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	return 0;
}

SEC("syscall")
int test_minheap_handles(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = minheap_create(4);
	s64 a, b, c, d;
	u64 key = 0, value = 0;

	ARENA_ASSERT(h);
	a = minheap_insert(h, 10, 'a');
	b = minheap_insert(h, 20, 'b');
	c = minheap_insert(h, 30, 'c');
	d = minheap_insert(h, 40, 'd');
	ARENA_ASSERT(a >= 0 && b >= 0 && c >= 0 && d >= 0);
	ARENA_ASSERT_EQ(minheap_insert(h, 50, 'e'), -ENOSPC);
	/* Remove from the middle; move the last to the front. */
	ARENA_ASSERT_EQ(minheap_remove(h, b, &key, &value), 0);
	ARENA_ASSERT_EQ(key, 20);
	ARENA_ASSERT_EQ(value, 'b');
	ARENA_ASSERT_EQ(minheap_update(h, d, 5), 0);
	ARENA_ASSERT_EQ(minheap_peek(h, &key, &value), 0);
	ARENA_ASSERT_EQ(value, 'd');
	/* b's handle is stale, and stays so when its slot is reused. */
	ARENA_ASSERT_EQ(minheap_remove(h, b, NULL, NULL), -ENOENT);
	ARENA_ASSERT(minheap_insert(h, 1, 'f') >= 0);
	ARENA_ASSERT_EQ(minheap_remove(h, b, NULL, NULL), -ENOENT);
	ARENA_ASSERT_EQ(minheap_update(h, b, 0), -ENOENT);
	/* Re-keyed to an equal key: it goes after the others of that key. */
	ARENA_ASSERT_EQ(minheap_update(h, a, 30), 0);
	ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
	ARENA_ASSERT_EQ(value, 'f');
	ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
	ARENA_ASSERT_EQ(value, 'd');
	ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
	ARENA_ASSERT_EQ(value, 'c');
	ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
	ARENA_ASSERT_EQ(value, 'a');
	ARENA_ASSERT_EQ(minheap_remove(h, a, NULL, NULL), -ENOENT);
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	return 0;
}

/* One slot reused 5,000 times: its first handle stays stale (an 11-bit one came back). */
SEC("syscall")
int test_minheap_handle_reuse(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = minheap_create(1);
	s64 first, last = 0;
	u64 value = 0;
	int i;

	ARENA_ASSERT(h);
	first = minheap_insert(h, 1, 1);
	ARENA_ASSERT(first >= 0);
	ARENA_ASSERT_EQ(minheap_pop(h, NULL, NULL), 0);
	for (i = zero; i < 5000 && can_loop; i++) {
		last = minheap_insert(h, 2, i);
		ARENA_ASSERT(last >= 0);
		ARENA_ASSERT_EQ(minheap_remove(h, first, NULL, NULL), -ENOENT);
		ARENA_ASSERT_EQ(minheap_update(h, first, 0), -ENOENT);
		ARENA_ASSERT_EQ(minheap_remove(h, last, NULL, &value), 0);
		ARENA_ASSERT_EQ(value, i);
	}
	ARENA_ASSERT_EQ(i, 5000);
	ARENA_ASSERT_EQ((u64)last & 0xfffff, (u64)first & 0xfffff);	/* the same slot */
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	return 0;
}

/* The largest heap arena_malloc can hold, filled and emptied in order. */
SEC("syscall")
int test_minheap_largest(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = minheap_create(MINHEAP_MAX_CAPACITY);
	u64 key = 0, value = 0;
	u32 i;

	ARENA_ASSERT(h);
	for (i = zero; i < MINHEAP_MAX_CAPACITY && can_loop; i++)
		ARENA_ASSERT(minheap_insert(h, MINHEAP_MAX_CAPACITY - i, i) >= 0);
	ARENA_ASSERT_EQ(minheap_insert(h, 0, 0), -ENOSPC);
	for (i = zero; i < MINHEAP_MAX_CAPACITY && can_loop; i++) {
		ARENA_ASSERT_EQ(minheap_pop(h, &key, &value), 0);
		ARENA_ASSERT_EQ(key, i + 1);
	}
	ARENA_ASSERT_EQ(minheap_count(h), 0);
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	return 0;
}

SEC("syscall")
int test_minheap_bad_calls(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h;
	u64 key = 0;

	ARENA_ASSERT(!minheap_create(0));
	ARENA_ASSERT(!minheap_create(MINHEAP_MAX_CAPACITY + 1));
	ARENA_ASSERT_EQ(minheap_insert(NULL, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(minheap_pop(NULL, &key, NULL), -EINVAL);
	ARENA_ASSERT_EQ(minheap_peek(NULL, &key, NULL), -EINVAL);
	ARENA_ASSERT_EQ(minheap_remove(NULL, 0, NULL, NULL), -EINVAL);
	ARENA_ASSERT_EQ(minheap_update(NULL, 0, 1), -EINVAL);
	ARENA_ASSERT_EQ(minheap_count(NULL), -EINVAL);
	ARENA_ASSERT_EQ(minheap_destroy(NULL), -EINVAL);
	h = minheap_create(4);
	ARENA_ASSERT(h);
	ARENA_ASSERT_EQ(minheap_remove(h, -1, NULL, NULL), -EINVAL);
	ARENA_ASSERT_EQ(minheap_remove(h, 4, NULL, NULL), -EINVAL);
	ARENA_ASSERT_EQ(minheap_update(h, 9, 1), -EINVAL);
	/* Written over: a count past the capacity is refused, nothing touched. */
	h->count = 5;
	ARENA_ASSERT_EQ(minheap_pop(h, &key, NULL), -EFAULT);
	ARENA_ASSERT_EQ(minheap_insert(h, 1, 1), -EFAULT);
	h->count = 0;
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	ARENA_ASSERT_EQ(minheap_insert(h, 1, 1), -EINVAL);
	return 0;
}

/* Random operations against a model: the first entry found by a scan. */
#define MODEL_MAX	48
#define MODEL_OPS	6000

struct model_entry {
	u64 key, seq, value;
	s64 handle;
};

struct model_entry __arena_global model[MODEL_MAX];
u64 __arena_global model_n, model_seq;

static __noinline __noasan int model_first(void)
{
	u32 i, n = model_n, best = ~0u;

	for (i = zero; i < n && i < MODEL_MAX && can_loop; i++)
		if (best == ~0u || model[i].key < model[best & 63].key ||
		    (model[i].key == model[best & 63].key && model[i].seq < model[best & 63].seq))
			best = i;
	return best == ~0u ? -1 : (int)best;
}

static __noinline __noasan void model_del(u32 i)
{
	u32 last = (u32)model_n - 1;

	/* Field by field: clang before 22 gets a struct copy in the arena wrong. */
	model[i & 63].key = model[last & 63].key;
	model[i & 63].seq = model[last & 63].seq;
	model[i & 63].value = model[last & 63].value;
	model[i & 63].handle = model[last & 63].handle;
	model_n = last;
}

/* __noasan: instrumented, the model's checks take this past 1M verified instructions. */
SEC("syscall")
__noasan int test_minheap_random(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = minheap_create(MODEL_MAX);
	u64 seed = ctx->seed | 1, key = 0, value = 0;
	int i, j;
	s64 ret;

	ARENA_ASSERT(h);
	model_n = model_seq = 0;
	for (i = zero; i < MODEL_OPS && can_loop; i++) {
		arena_test_rand(&seed);
		switch ((seed >> 8) % 4) {
		case 0:
			key = (seed >> 16) % 8;
			ret = minheap_insert(h, key, i);
			if (model_n == MODEL_MAX) {
				ARENA_ASSERT_EQ(ret, -ENOSPC);
				break;
			}
			ARENA_ASSERT(ret >= 0);
			j = model_n & 63;
			model[j].key = key;
			model[j].seq = model_seq++;
			model[j].value = i;
			model[j].handle = ret;
			model_n++;
			break;
		case 1:
			j = model_first();
			ret = minheap_pop(h, &key, &value);
			if (j < 0) {
				ARENA_ASSERT_EQ(ret, -ENOENT);
				break;
			}
			ARENA_ASSERT_EQ(ret, 0);
			ARENA_ASSERT_EQ(key, model[j & 63].key);
			ARENA_ASSERT_EQ(value, model[j & 63].value);
			model_del(j);
			break;
		case 2:
			if (!model_n)
				break;
			j = (seed >> 24) % model_n;
			ret = minheap_remove(h, model[j & 63].handle, &key, &value);
			ARENA_ASSERT_EQ(ret, 0);
			ARENA_ASSERT_EQ(value, model[j & 63].value);
			model_del(j);
			break;
		default:
			if (!model_n)
				break;
			j = (seed >> 24) % model_n;
			key = (seed >> 40) % 8;
			ARENA_ASSERT_EQ(minheap_update(h, model[j & 63].handle, key), 0);
			model[j & 63].key = key;
			model[j & 63].seq = model_seq++;
		}
		ARENA_ASSERT_EQ(minheap_count(h), model_n);
	}
	ARENA_ASSERT_EQ(i, MODEL_OPS);
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	return 0;
}

/*
 * Every thread inserts RACE_ENTRIES entries (random keys, values naming the entry) in
 * bursts of 8 and pops as many after each burst; pops that find the heap empty are fine
 * (others took more). __fini pops the rest, in key order, and checks that every entry
 * came out exactly once.
 */
#define RACE_THREADS	4
#define RACE_ENTRIES	4096

u64 __arena_global race_h;
u8 __arena_global race_seen[RACE_THREADS * RACE_ENTRIES];
u64 __arena_global race_popped, race_left, race_once, race_bad, race_disorder;

SEC("syscall")
int parallel_test_minheap_race__init(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = minheap_create(RACE_THREADS * 16);

	ARENA_ASSERT(h);
	race_h = (u64)h;
	race_popped = race_left = race_once = race_bad = race_disorder = 0;
	return 0;
}

static __noinline int race_thread(struct arena_test_ctx *ctx, u32 t)
{
	struct minheap __arena *h = (struct minheap __arena *)race_h;
	u64 seed = ctx->seed | (u64)t << 32 | 1, key = 0, value = 0;
	u32 i, j;
	s64 ret;

	if (t >= RACE_THREADS)
		return -EINVAL;
	for (i = zero; i < RACE_ENTRIES && can_loop; i += 8) {
		for (j = 0; j < 8; j++) {
			arena_test_rand(&seed);
			/* A lock timeout (a stalled vCPU) is retried: nothing was inserted. */
			ret = ARENA_TEST_RETRY(minheap_insert(h, seed % 1000,
							      t * RACE_ENTRIES + i + j));
			if (ret < 0) {
				arena_stderr("thread %u: insert: %d", t, ret);
				return -EIO;
			}
		}
		for (j = 0; j < 8; j++) {
			ret = ARENA_TEST_RETRY(minheap_pop(h, &key, &value));
			if (ret)
				continue;	/* empty: the others took more than they put */
			if (value >= RACE_THREADS * RACE_ENTRIES) {
				race_bad++;
				continue;
			}
			race_seen[value]++;
			atomic_add(&race_popped, 1);
		}
	}
	return i >= RACE_ENTRIES ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_minheap_race__0(struct arena_test_ctx *ctx) { return race_thread(ctx, 0); }
SEC("syscall")
int parallel_test_minheap_race__1(struct arena_test_ctx *ctx) { return race_thread(ctx, 1); }
SEC("syscall")
int parallel_test_minheap_race__2(struct arena_test_ctx *ctx) { return race_thread(ctx, 2); }
SEC("syscall")
int parallel_test_minheap_race__3(struct arena_test_ctx *ctx) { return race_thread(ctx, 3); }

SEC("syscall")
int parallel_test_minheap_race__fini(struct arena_test_ctx *ctx)
{
	struct minheap __arena *h = (struct minheap __arena *)race_h;
	u64 key = 0, value = 0, last = 0;
	u32 i;

	while (!minheap_pop(h, &key, &value) && can_loop) {
		if (key < last)
			race_disorder++;
		last = key;
		if (value >= RACE_THREADS * RACE_ENTRIES) {
			race_bad++;
			continue;
		}
		race_seen[value]++;
		race_left++;
	}
	for (i = zero; i < RACE_THREADS * RACE_ENTRIES && can_loop; i++)
		if (race_seen[i] == 1)
			race_once++;
	arena_stdout(
		     "minheap race: %u threads, %llu entries out exactly once (%llu popped while racing, %llu left); lock timeouts %llu",
		     RACE_THREADS, race_once, race_popped, race_left, h->lock_timeouts);
	ARENA_ASSERT_EQ(race_bad, 0);
	ARENA_ASSERT_EQ(race_disorder, 0);
	ARENA_ASSERT_EQ(race_once, RACE_THREADS * RACE_ENTRIES);
	ARENA_ASSERT_EQ(race_popped + race_left, RACE_THREADS * RACE_ENTRIES);
	ARENA_ASSERT_EQ(minheap_destroy(h), 0);
	return 0;
}
