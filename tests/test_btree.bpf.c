// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The B-tree under the verifier: every call and error, cursors and ranges, pops from
 * both ends, random operations against a model with bt_integrity_check along the way,
 * a million keys built and destroyed with every block back, and a damaged tree. The
 * XDP program at the end is run by user_test (a non-sleepable program type).
 *
 * Cursors are left uninitialised: the calls that start one set it, and `= {}` on a stack
 * struct becomes a memset call in the sanitizer build, which the verifier refuses where
 * the same helper also clears map or arena memory.
 */
#include <libarena/common.h>
#include <libarena/asan.h>
#include <libarena/btree.h>
#include <libarena/heap.h>
#include <libarena/spinlock.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

/* Objects the default allocator has out: every node must come back. */
static __noinline s64 blocks_out(void)
{
	return arena_heap_outstanding();
}

/* 2000 keys in a scrambled order: (37 * i) mod 2003 visits each of 0..2002 once. */
#define BASIC_KEYS	2000

/* out_before an argument: a can_loop function must not open with a call (README). */
__weak int btree_basic(s64 out_before)
{
	struct btree __arena *bt = bt_create();
	u64 k, v = 0;

	ARENA_ASSERT(bt);
	ARENA_ASSERT_EQ(bt_count(bt), 0);
	ARENA_ASSERT_EQ(bt_find(bt, 1, &v), -ENOENT);
	ARENA_ASSERT_EQ(bt_remove(bt, 1), -ENOENT);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	for (k = zero; k < BASIC_KEYS && can_loop; k++)
		ARENA_ASSERT_EQ(bt_insert(bt, (37 * k) % 2003, k, false), 0);
	ARENA_ASSERT_EQ(bt_count(bt), BASIC_KEYS);
	ARENA_ASSERT(bt->height >= 2);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	ARENA_ASSERT_EQ(bt_insert(bt, 37, 999, false), -EALREADY);
	ARENA_ASSERT_EQ(bt_find(bt, 37, &v), 0);
	ARENA_ASSERT_EQ(v, 1);			/* the first value stayed */
	ARENA_ASSERT_EQ(bt_insert(bt, 37, 999, true), 0);
	ARENA_ASSERT_EQ(bt_find(bt, 37, &v), 0);
	ARENA_ASSERT_EQ(v, 999);
	ARENA_ASSERT_EQ(bt_find(bt, 37, NULL), 0);
	ARENA_ASSERT_EQ(bt_count(bt), BASIC_KEYS);
	for (k = zero; k < BASIC_KEYS && can_loop; k++) {
		ARENA_ASSERT_EQ(bt_find(bt, (37 * k) % 2003, &v), 0);
		ARENA_ASSERT_EQ(v, k == 1 ? 999 : k);
	}
	/* Remove every other one in another order: merges and borrows on the way. */
	for (k = zero; k < BASIC_KEYS && can_loop; k += 2)
		ARENA_ASSERT_EQ(bt_remove(bt, (37 * k) % 2003), 0);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	ARENA_ASSERT_EQ(bt_count(bt), BASIC_KEYS / 2);
	ARENA_ASSERT_EQ(bt_remove(bt, 0), -ENOENT);	/* k = 0 was key 0 */
	ARENA_ASSERT_EQ(bt_find(bt, 0, &v), -ENOENT);
	ARENA_ASSERT_EQ(bt_find(bt, 37, &v), 0);	/* k = 1 stays */
	/* The rest, down to an empty tree with no node left. */
	for (k = 1; k < BASIC_KEYS && can_loop; k += 2)
		ARENA_ASSERT_EQ(bt_remove(bt, (37 * k) % 2003), 0);
	ARENA_ASSERT(!bt->root && !bt->height && !bt->nr_nodes);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	ARENA_ASSERT_EQ(bt_insert(bt, 5, 50, false), 0);	/* usable again */
	ARENA_ASSERT_EQ(bt_print(bt), 0);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	ARENA_ASSERT_EQ(blocks_out(), out_before);
	return 0;
}

/* Keys 0, 10, ..., 10 * (CUR_KEYS - 1), value = key + 1. */
#define CUR_KEYS	1000

/* Global for the verifier's sake, like model_op below; bt an argument, as above. */
__weak u64 fill_tens(struct btree __arena *bt __arg_arena)
{
	u64 k;

	if (!bt)
		return 0;
	for (k = zero; k < CUR_KEYS && can_loop; k++)
		if (bt_insert(bt, 10 * k, 10 * k + 1, false))
			return 0;
	return (u64)bt;
}

static __always_inline struct btree __arena *tens(void)
{
	return (struct btree __arena *)fill_tens(bt_create());
}

__weak int btree_cursors(struct btree __arena *bt __arg_arena)
{
	struct bt_cursor c;
	u64 i, n;
	int ret;

	ARENA_ASSERT(bt);
	/* Forward and back over every pair. */
	ret = bt_first(bt, &c);
	for (i = zero; i < CUR_KEYS && !ret && can_loop; i++) {
		ARENA_ASSERT(c.key == 10 * i && c.value == 10 * i + 1);
		ret = bt_next(&c);
	}
	ARENA_ASSERT_EQ(i, CUR_KEYS);
	ARENA_ASSERT_EQ(ret, -ENOENT);
	ARENA_ASSERT_EQ(bt_next(&c), -ENOENT);		/* spent stays spent */
	ret = bt_last(bt, &c);
	for (i = zero; i < CUR_KEYS && !ret && can_loop; i++) {
		ARENA_ASSERT_EQ(c.key, 10 * (CUR_KEYS - 1 - i));
		ret = bt_prev(&c);
	}
	ARENA_ASSERT_EQ(i, CUR_KEYS);
	ARENA_ASSERT_EQ(ret, -ENOENT);

	/* Bounds, between keys, on keys, past both ends. */
	ARENA_ASSERT_EQ(bt_lower_bound(bt, 15, &c), 0);
	ARENA_ASSERT_EQ(c.key, 20);
	ARENA_ASSERT_EQ(bt_lower_bound(bt, 20, &c), 0);
	ARENA_ASSERT_EQ(c.key, 20);
	ARENA_ASSERT_EQ(bt_upper_bound(bt, 20, &c), 0);
	ARENA_ASSERT_EQ(c.key, 30);
	ARENA_ASSERT_EQ(bt_prev(&c), 0);
	ARENA_ASSERT_EQ(c.key, 20);
	ARENA_ASSERT_EQ(bt_lower_bound(bt, 10 * CUR_KEYS, &c), -ENOENT);
	ARENA_ASSERT_EQ(bt_upper_bound(bt, 10 * (CUR_KEYS - 1), &c), -ENOENT);
	ARENA_ASSERT_EQ(bt_upper_bound(bt, ~0ull, &c), -ENOENT);
	ARENA_ASSERT_EQ(bt_lower_bound(bt, 0, &c), 0);
	ARENA_ASSERT_EQ(c.key, 0);
	ARENA_ASSERT_EQ(bt_prev(&c), -ENOENT);

	/* A walk that removes every other pair under the cursor, then inserts behind it. */
	ret = bt_first(bt, &c);
	for (i = zero; i < CUR_KEYS && !ret && can_loop; i++) {
		ARENA_ASSERT_EQ(c.key, 10 * i);
		if (i & 1)
			ARENA_ASSERT_EQ(bt_remove(bt, c.key), 0);
		else if (i % 4 == 2)
			ARENA_ASSERT_EQ(bt_insert(bt, c.key - 5, 0, false), 0);
		ret = bt_next(&c);
	}
	ARENA_ASSERT_EQ(i, CUR_KEYS);
	n = CUR_KEYS / 2 + CUR_KEYS / 4;
	ARENA_ASSERT_EQ(bt_count(bt), n);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	/* Back from the end, removing as it goes: prev after a change finds its way. */
	ret = bt_last(bt, &c);
	for (i = zero; i < n && !ret && can_loop; i++) {
		ARENA_ASSERT_EQ(bt_remove(bt, c.key), 0);
		ret = bt_prev(&c);
	}
	ARENA_ASSERT_EQ(i, n);
	ARENA_ASSERT_EQ(ret, -ENOENT);
	ARENA_ASSERT_EQ(bt_count(bt), 0);
	ARENA_ASSERT_EQ(bt_first(bt, &c), -ENOENT);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	return 0;
}

#define RANGE_OUT	64
struct bt_pair __arena_global range_out[RANGE_OUT];

__weak int btree_range_and_pops(struct btree __arena *bt __arg_arena)
{
	u64 k = 0, v = 0, i;
	int n;

	ARENA_ASSERT(bt);
	n = bt_range(bt, 95, 405, range_out, RANGE_OUT);
	ARENA_ASSERT_EQ(n, 31);				/* 100 .. 400 */
	for (i = zero; i < 31 && can_loop; i++)
		ARENA_ASSERT(range_out[i].key == 100 + 10 * i &&
			     range_out[i].value == 101 + 10 * i);
	ARENA_ASSERT_EQ(bt_range(bt, 95, 405, NULL, RANGE_OUT), 31);
	ARENA_ASSERT_EQ(bt_range(bt, 95, 405, range_out, 7), 7);
	ARENA_ASSERT_EQ(range_out[6].key, 160);
	ARENA_ASSERT_EQ(bt_range(bt, 0, ~0ull, NULL, ~0u), CUR_KEYS);
	ARENA_ASSERT_EQ(bt_range(bt, 0, ~0ull, NULL, 600), 600);
	ARENA_ASSERT_EQ(bt_range(bt, 11, 19, range_out, RANGE_OUT), 0);
	ARENA_ASSERT_EQ(bt_range(bt, 20, 10, range_out, RANGE_OUT), 0);
	ARENA_ASSERT_EQ(bt_range(bt, 0, 0, range_out, 0), 0);

	/* The ends of the key space are keys like any other. */
	ARENA_ASSERT_EQ(bt_insert(bt, ~0ull, 7, false), 0);
	ARENA_ASSERT_EQ(bt_range(bt, ~0ull, ~0ull, range_out, RANGE_OUT), 1);
	ARENA_ASSERT_EQ(bt_pop_last(bt, &k, &v), 0);
	ARENA_ASSERT(k == ~0ull && v == 7);
	/* Pops alternate ends: least, greatest, ... */
	for (i = zero; i < CUR_KEYS / 2 && can_loop; i++) {
		ARENA_ASSERT_EQ(bt_pop_first(bt, &k, &v), 0);
		ARENA_ASSERT(k == 10 * i && v == k + 1);
		ARENA_ASSERT_EQ(bt_pop_last(bt, &k, NULL), 0);
		ARENA_ASSERT_EQ(k, 10 * (CUR_KEYS - 1 - i));
		if (!(i % 50))
			ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	}
	ARENA_ASSERT_EQ(bt_pop_first(bt, &k, &v), -ENOENT);
	ARENA_ASSERT_EQ(bt_pop_last(bt, NULL, NULL), -ENOENT);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	return 0;
}

/*
 * Random operations against a model: model_has/model_val over MODEL_KEYS key slots,
 * slot k standing for key k * KEY_STRIDE (the last for the greatest u64).
 */
#define MODEL_KEYS	4096
#define MODEL_OPS	12000
#define KEY_STRIDE	1000000007ull

u8 __arena_global model_has[MODEL_KEYS];
u64 __arena_global model_val[MODEL_KEYS];

static __always_inline u64 key_of(u64 k)
{
	return k == MODEL_KEYS - 1 ? ~0ull : k * KEY_STRIDE;
}

/* The slot of a key the tree gave back, or MODEL_KEYS for none of ours. */
static __always_inline u64 slot_of(u64 key)
{
	if (key == ~0ull)
		return MODEL_KEYS - 1;
	if (key % KEY_STRIDE || key / KEY_STRIDE >= MODEL_KEYS - 1)
		return MODEL_KEYS;
	return key / KEY_STRIDE;
}

/* The helpers called in loops are global: the verifier walks each once, not per call. */
__weak int model_op(struct btree __arena *bt __arg_arena, u64 *x, u64 *live, bool grow)
{
	u64 r, k, v, got = 0, gk = 0;
	struct bt_cursor c;
	int ret;

	if (!x || !live)
		return -EINVAL;
	r = arena_test_rand(x) % 100;
	k = arena_test_rand(x) & (MODEL_KEYS - 1);
	v = arena_test_rand(x);
	if (r < (grow ? 50 : 20)) {
		bool update = v & 1;

		ret = bt_insert(bt, key_of(k), v, update);
		if (model_has[k] && !update)
			return ret == -EALREADY ? 0 : 1000 + -ret;
		if (ret)
			return 1100 + -ret;
		*live += !model_has[k];
		model_has[k] = 1;
		model_val[k] = v;
	} else if (r < 70) {
		ret = bt_remove(bt, key_of(k));
		if (ret != (model_has[k] ? 0 : -ENOENT))
			return 2000 + -ret;
		*live -= !!model_has[k];
		model_has[k] = 0;
	} else if (r < 85) {
		ret = bt_find(bt, key_of(k), &got);
		if (ret != (model_has[k] ? 0 : -ENOENT) || (!ret && got != model_val[k]))
			return 3000 + -ret;
	} else if (r < 92) {
		/* The bound is present in the model, and no slot between is. */
		ret = bt_lower_bound(bt, key_of(k) - (k ? 1 : 0), &c);
		if (ret == -ENOENT)
			return model_has[k] ? 4000 : 0;
		gk = slot_of(c.key);
		if (ret || gk >= MODEL_KEYS || gk < k || !model_has[gk] ||
		    c.value != model_val[gk])
			return 4100 + -ret;
		if (gk > k && model_has[k])
			return 4200;
	} else {
		ret = v & 1 ? bt_pop_first(bt, &gk, &got) : bt_pop_last(bt, &gk, &got);
		if (!*live)
			return ret == -ENOENT ? 0 : 5000 + -ret;
		gk = slot_of(gk);
		if (ret || gk >= MODEL_KEYS || !model_has[gk] || got != model_val[gk])
			return 5100 + -ret;
		model_has[gk] = 0;
		(*live)--;
	}
	return 0;
}

/* The tree's keys in order are exactly the model's. */
__weak int walk_matches(struct btree __arena *bt __arg_arena)
{
	struct bt_cursor c;
	u64 k;
	int ret = bt_first(bt, &c);

	for (k = zero; k < MODEL_KEYS && can_loop; k++) {
		if (!model_has[k])
			continue;
		if (ret || c.key != key_of(k) || c.value != model_val[k])
			return 1;
		ret = bt_next(&c);
	}
	return ret == -ENOENT ? 0 : 2;
}

__weak int btree_random_vs_model(u32 seed)
{
	u64 x = seed | 1, live = 0, i, most = 0;
	s64 out_before = blocks_out();
	struct btree __arena *bt = bt_create();
	bool grow = true;
	int ret;

	ARENA_ASSERT(bt);
	for (i = zero; i < MODEL_KEYS && can_loop; i++)
		model_has[i & (MODEL_KEYS - 1)] = 0;
	for (i = zero; i < MODEL_OPS && can_loop; i++) {
		/* Up to 2000 keys (height 3), down to a few, up again. */
		if (live > 2000)
			grow = false;
		else if (live < 50)
			grow = true;
		most = live > most ? live : most;
		ret = model_op(bt, &x, &live, grow);
		if (ret) {
			arena_stderr("op %llu: mismatch %d", i, ret);
			return ret;
		}
		ARENA_ASSERT_EQ(bt_count(bt), live);
		if (!(i % 8) && bt_integrity_check(bt)) {
			arena_stderr("op %llu: integrity check failed", i);
			return 1;
		}
		if (!(i % 1024))
			ARENA_ASSERT_EQ(walk_matches(bt), 0);
	}
	ARENA_ASSERT_EQ(i, MODEL_OPS);
	ARENA_ASSERT_EQ(walk_matches(bt), 0);
	arena_stdout("btree model: %llu operations, up to %llu keys, %llu at the end", i, most,
		     live);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	ARENA_ASSERT_EQ(blocks_out(), out_before);
	return 0;
}

/*
 * A million keys in a scrambled order (an odd multiplier permutes 0 .. 2^20 - 1), in one
 * program after one arena_heap_reserve(); found, checked, destroyed: every block back.
 * The sanitizer build, some ten times slower, does a sixteenth of it.
 */
#ifdef LIBARENA_ASAN
#define BIG_SHIFT	16
#else
#define BIG_SHIFT	20
#endif
#define BIG_KEYS	(1u << BIG_SHIFT)

/*
 * An insert that finds the reserve short (it should not: the allocator's business, and
 * counted) gets more room and goes again: this test is about the tree.
 */
static __noinline int big_insert(struct btree __arena *bt, u32 *short_)
{
	u32 i, k;
	int err;

	for (i = zero; i < BIG_KEYS && can_loop; i++) {
		k = (i * 2654435761u) & (BIG_KEYS - 1);
		err = bt_insert(bt, k, i, false);
		if (err == -ENOMEM) {
			(*short_)++;
			err = arena_heap_reserve(BT_NODE_SIZE, 256) ?: bt_insert(bt, k, i, false);
		}
		if (err)
			return err;
	}
	return i == BIG_KEYS ? 0 : -E2BIG;
}

static __noinline int big_find(struct btree __arena *bt)
{
	u64 v = 0;
	u32 i;

	for (i = zero; i < BIG_KEYS && can_loop; i += 7)
		if (bt_find(bt, (i * 2654435761u) & (BIG_KEYS - 1), &v) || v != i)
			return 1;
	return bt_find(bt, BIG_KEYS, &v) == -ENOENT ? 0 : 2;
}

__weak int btree_million(u32 seed)
{
	s64 out_before = blocks_out();
	struct btree __arena *bt;
	u32 short_ = 0;
	u64 bytes;

	/* Room for the nodes at two-thirds fill, made ahead (sleepable here). */
	ARENA_ASSERT_EQ(arena_heap_reserve(BT_NODE_SIZE, 3 * BIG_KEYS / (2 * BT_MAX_KEYS)), 0);
	bt = bt_create();
	ARENA_ASSERT(bt);
	ARENA_ASSERT_EQ(big_insert(bt, &short_), 0);
	ARENA_ASSERT_EQ(bt_count(bt), BIG_KEYS);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	ARENA_ASSERT_EQ(big_find(bt), 0);
	ARENA_ASSERT_EQ(bt_range(bt, 0, ~0ull, NULL, ~0u), BIG_KEYS);
	ARENA_ASSERT_EQ(blocks_out() - out_before, bt->nr_nodes + 1);
	bytes = bt->nr_nodes * BT_NODE_SIZE;
	arena_stdout("btree: %u keys in %llu nodes, height %u, %llu.%llu bytes per key; "
		     "%u inserts found the reserve short", BIG_KEYS, bt->nr_nodes, bt->height,
		     bytes / BIG_KEYS, bytes * 10 / BIG_KEYS % 10, short_);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	ARENA_ASSERT_EQ(blocks_out(), out_before);
	return 0;
}

/* Damage: each call that meets it stops with -EUCLEAN and a log line; nothing hangs. */
__weak int btree_damaged(u32 seed)
{
	struct btree __arena *bt = tens();
	struct bt_node __arena *saved, *leaf;
	struct bt_cursor c;
	u64 v = 0, k;
	u16 nr;

	ARENA_ASSERT(bt);
	ARENA_ASSERT(bt->height >= 2);
	ARENA_ASSERT_EQ(bt_first(bt, &c), 0);
	leaf = c.leaf;
	/* A child pointing back at the root: a cycle. */
	saved = bt->root->children[0];
	bt->root->children[0] = bt->root;
	ARENA_ASSERT_EQ(bt_find(bt, 0, &v), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_insert(bt, 1, 1, false), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_remove(bt, 0), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_pop_first(bt, &k, &v), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_first(bt, &c), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_range(bt, 0, 100, NULL, 10), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_print(bt), -EUCLEAN);
	bt->root->children[0] = saved;
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	/* A leaf chain that loops back: scans stop. */
	saved = leaf->next->next;
	leaf->next->next = leaf;
	ARENA_ASSERT_EQ(bt_range(bt, 0, ~0ull, NULL, ~0u), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), -EUCLEAN);
	leaf->next->next = saved;
	/* A fill past the node, then keys out of order. */
	nr = leaf->nr;
	leaf->nr = 60000;
	ARENA_ASSERT_EQ(bt_find(bt, 0, &v), -EUCLEAN);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), -EUCLEAN);
	leaf->nr = nr;
	k = leaf->keys[0];
	leaf->keys[0] = leaf->keys[1];
	ARENA_ASSERT_EQ(bt_integrity_check(bt), -EUCLEAN);
	leaf->keys[0] = k;
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	return 0;
}

__weak int btree_bad_calls(u32 seed)
{
	struct btree __arena *bt;
	struct bt_cursor c;
	u64 v = 0;

	ARENA_ASSERT_EQ(bt_insert(NULL, 1, 1, false), -EINVAL);
	ARENA_ASSERT_EQ(bt_find(NULL, 1, &v), -EINVAL);
	ARENA_ASSERT_EQ(bt_remove(NULL, 1), -EINVAL);
	ARENA_ASSERT_EQ(bt_destroy(NULL), -EINVAL);
	ARENA_ASSERT_EQ(bt_count(NULL), -EINVAL);
	ARENA_ASSERT_EQ(bt_print(NULL), -EINVAL);
	ARENA_ASSERT_EQ(bt_integrity_check(NULL), -EINVAL);
	ARENA_ASSERT_EQ(bt_pop_first(NULL, &v, &v), -EINVAL);
	ARENA_ASSERT_EQ(bt_pop_last(NULL, &v, &v), -EINVAL);
	ARENA_ASSERT_EQ(bt_range(NULL, 0, 1, range_out, 1), -EINVAL);
	ARENA_ASSERT_EQ(bt_first(NULL, &c), -EINVAL);
	ARENA_ASSERT_EQ(bt_last(NULL, &c), -EINVAL);
	ARENA_ASSERT_EQ(bt_lower_bound(NULL, 0, &c), -EINVAL);
	ARENA_ASSERT_EQ(bt_upper_bound(NULL, 0, &c), -EINVAL);
	c.bt = NULL;			/* no tree */
	ARENA_ASSERT_EQ(bt_next(&c), -EINVAL);
	ARENA_ASSERT_EQ(bt_prev(&c), -EINVAL);
	/* Not a tree: a zeroed block of the right size that bt_create did not make. */
	bt = arena_malloc(sizeof(*bt));
	ARENA_ASSERT(bt);
	ARENA_ASSERT_EQ(arena_memset(bt, 0, sizeof(*bt)), 0);
	ARENA_ASSERT_EQ(bt_find(bt, 1, &v), -EINVAL);
	ARENA_ASSERT_EQ(bt_insert(bt, 1, 1, false), -EINVAL);
	ARENA_ASSERT_EQ(arena_free(bt), 0);
	return 0;
}

/*
 * The programs the runner sees: each runs a few of the tests above (its verification
 * pulls in the allocator, the costly part of loading an object, once instead of per test).
 * Every test body is a global function, verified once; those that loop take what they
 * would first call for as an argument (a can_loop function must not open with a call:
 * 6.12's verifier then warns "No program starts at insn"; see the README).
 */
SEC("syscall")
int test_btree_calls(struct arena_test_ctx *ctx)
{
	int ret;

	ret = btree_basic(blocks_out());
	if (ret)
		return ret;
	return btree_bad_calls(ctx->seed);
}

/* Cursors, and ranges and pops: two programs, each on a tree of its own. */
SEC("syscall")
int test_btree_cursors(struct arena_test_ctx *ctx)
{
	return btree_cursors(tens());
}

SEC("syscall")
int test_btree_ranges_and_pops(struct arena_test_ctx *ctx)
{
	return btree_range_and_pops(tens());
}

SEC("syscall")
int test_btree_random_vs_model(struct arena_test_ctx *ctx)
{
	return btree_random_vs_model(ctx->seed);
}

SEC("syscall")
int test_btree_million_keys(struct arena_test_ctx *ctx)
{
	return btree_million(ctx->seed);
}

SEC("syscall")
int test_btree_damaged(struct arena_test_ctx *ctx)
{
	return btree_damaged(ctx->seed);
}

#ifdef LIBARENA_ASAN
/* A cursor kept past bt_destroy: the sanitizer names the use of the freed tree. */
SEC("syscall")
int asan_test_btree_cursor_after_destroy(struct arena_test_ctx *ctx)
{
	struct btree __arena *bt = tens();
	struct bt_cursor c;

	ARENA_ASSERT(bt);
	ARENA_ASSERT_EQ(bt_first(bt, &c), 0);
	ARENA_ASSERT_EQ(bt_destroy(bt), 0);
	bt_next(&c);
	/* The tree is checked whole when a call starts: the report names the caller's line. */
	arena_stdout("asan-expect: use-after-free read of %u bytes", (u32)sizeof(struct btree));
	arena_stdout("asan-expect: into the freed %u-byte block", (u32)sizeof(struct btree));
	arena_stdout("asan-expect: by %s:%s+", __func__, __func__);
	return 0;
}
#endif

/*
 * user_test runs this XDP program (non-sleepable) a thousand times on a tree that
 * btree_xdp_setup made (keys 0..499): run n inserts 1000 + n, finds it and pops the
 * least key, which is n for the first 500 runs and 1000 + n - 500 after.
 */
struct btree __arena_global *xdp_tree;
u64 __arena_global xdp_runs, xdp_bad;

SEC("syscall")
int btree_xdp_setup(void *ctx)
{
	u64 k;

	xdp_tree = bt_create();
	if (!xdp_tree)
		return 1;
	for (k = zero; k < 500 && can_loop; k++)
		if (bt_insert(xdp_tree, k, k, false))
			return 2;
	xdp_runs = 0;
	xdp_bad = 0;
	return 0;
}

SEC("xdp")
int btree_xdp(struct xdp_md *ctx)
{
	struct btree __arena *bt = xdp_tree;
	u64 n = xdp_runs++, k = 0, v = 0;

	if (bt_insert(bt, 1000 + n, n, false) || bt_find(bt, 1000 + n, &v) || v != n ||
	    bt_pop_first(bt, &k, &v) || k != (n < 500 ? n : 500 + n)) {
		xdp_bad++;
		return XDP_DROP;
	}
	return XDP_PASS;
}

SEC("syscall")
int btree_xdp_check(void *ctx)
{
	struct btree __arena *bt = xdp_tree;
	int ret;

	if (xdp_bad || bt_count(bt) != 500 || bt_integrity_check(bt))
		return 1;
	ret = bt_destroy(bt);
	xdp_tree = NULL;
	return ret;
}

/*
 * One tree shared by every CPU under the owner lock, as docs/btree.md shows (6.12 refuses
 * a bt_* call under arena_spin_lock, which disables preemption). Each thread inserts its
 * own keys and removes every other one, and inserts and removes shared keys, counting
 * what each call says it did; a counter of threads inside checks the exclusion. __fini
 * checks the totals exactly, every key, and the tree's integrity.
 */
#define SHARE_THREADS	4
#define SHARE_OWN	400
#define SHARE_KEYS	64
#define SHARE_OWN_BASE	(1ull << 40)
#define SHARE_KEY_BASE	(1ull << 50)

struct btree __arena *share_tree;
struct arena_owner __arena_global share_lock;
u64 __arena_global share_inside;
u64 __arena_global share_added[SHARE_THREADS], share_removed[SHARE_THREADS];
u64 __arena_global share_errors[SHARE_THREADS], share_gave_up[SHARE_THREADS];
u64 __arena_global share_shared, share_wrong;

/*
 * Take the tree: 0, -EUCLEAN when another thread is inside after all, or the lock's
 * -ETIMEDOUT (a stall) or -EDEADLK (its holder on this CPU), with nothing held. Global,
 * so the verifier walks the lock's wait once, not at every call in every round.
 */
__weak int share_take(void)
{
	int err = arena_owner_lock_timeout(&share_lock, ARENA_TEST_RETRY_NS);

	if (err)
		return err;
	/* Alone inside, or the lock does not exclude. */
	return atomic_fetch_add(&share_inside, 1) ? -EUCLEAN : 0;
}

/* Global too: the unlock's hand-over past marked tickets is a loop of its own. */
__weak int share_release(void)
{
	atomic_add(&share_inside, -1);
	arena_owner_unlock(&share_lock);
	return 0;
}

SEC("syscall")
int parallel_test_btree_shared__init(struct arena_test_ctx *ctx)
{
	u32 t;

	share_tree = bt_create();
	ARENA_ASSERT(share_tree);
	arena_memset(&share_lock, 0, sizeof(share_lock));
	share_inside = 0;
	for (t = zero; t < SHARE_THREADS && can_loop; t++)
		share_added[t] = share_removed[t] = share_errors[t] = share_gave_up[t] = 0;
	return 0;
}

/* One call on the shared tree, taken and released around it: its result, counted. */
static __noinline int share_one(u32 me, u64 i, u64 *x)
{
	struct btree __arena *bt = share_tree;
	u64 k = SHARE_KEY_BASE + arena_test_rand(x) % SHARE_KEYS;
	int err, ret;

	err = share_take();
	if (err == -ETIMEDOUT || err == -EDEADLK) {
		share_gave_up[me % SHARE_THREADS]++;	/* counted: it did nothing */
		return 0;
	}
	if (err) {
		share_release();
		return err;
	}
	if (bt_insert(bt, SHARE_OWN_BASE + (u64)me * SHARE_OWN + i, i, false))
		share_errors[me % SHARE_THREADS]++;
	if (i & 1) {
		ret = bt_insert(bt, k, me, false);
		if (!ret)
			share_added[me % SHARE_THREADS]++;
		else if (ret != -EALREADY)
			share_errors[me % SHARE_THREADS]++;
	} else {
		ret = bt_remove(bt, k);
		if (!ret)
			share_removed[me % SHARE_THREADS]++;
		else if (ret != -ENOENT)
			share_errors[me % SHARE_THREADS]++;
	}
	share_release();
	return 0;
}

static __noinline int share_thread(u32 me)
{
	u64 x = me + 1, i;
	int err;

	if (me >= SHARE_THREADS)
		return -EINVAL;
	for (i = zero; i < SHARE_OWN && can_loop; i++) {
		err = share_one(me, i, &x);
		if (err)
			return err;
	}
	/* Every other key of ours out again. */
	for (i = 1; i < SHARE_OWN && can_loop; i += 2) {
		err = share_take();
		if (err == -ETIMEDOUT || err == -EDEADLK) {
			share_gave_up[me]++;
			continue;
		}
		if (!err && bt_remove(share_tree, SHARE_OWN_BASE + (u64)me * SHARE_OWN + i))
			share_errors[me]++;
		share_release();
		if (err)
			return err;
	}
	return 0;
}

SEC("syscall")
int parallel_test_btree_shared__0(struct arena_test_ctx *ctx) { return share_thread(0); }
SEC("syscall")
int parallel_test_btree_shared__1(struct arena_test_ctx *ctx) { return share_thread(1); }
SEC("syscall")
int parallel_test_btree_shared__2(struct arena_test_ctx *ctx) { return share_thread(2); }
SEC("syscall")
int parallel_test_btree_shared__3(struct arena_test_ctx *ctx) { return share_thread(3); }

/* Own key n (thread n / SHARE_OWN's i-th): 1 when it is not as it should be. */
__weak int share_key_wrong(u64 n)
{
	u64 i = n % SHARE_OWN, v = ~0ull;
	int ret;

	ret = bt_find(share_tree, SHARE_OWN_BASE + n, &v);
	if (i & 1)
		return ret != -ENOENT;	/* removed again */
	return ret || v != i;
}

SEC("syscall")
int parallel_test_btree_shared__fini(struct arena_test_ctx *ctx)
{
	struct btree __arena *bt = share_tree;
	u64 added = 0, removed = 0, t, i;
	int ret;

	for (t = zero; t < SHARE_THREADS && can_loop; t++) {
		ARENA_ASSERT_EQ(share_errors[t], 0);
		ARENA_ASSERT_EQ(share_gave_up[t], 0);
		added += share_added[t];
		removed += share_removed[t];
	}
	ARENA_ASSERT(!arena_spin_is_locked(&share_lock.lock));
	ARENA_ASSERT_EQ(share_lock.cpu, 0);
	ARENA_ASSERT_EQ(share_inside, 0);
	ARENA_ASSERT_EQ(bt_integrity_check(bt), 0);
	/* Every insert and remove the calls reported, and nothing else, happened. */
	/* Counted in the arena, where the verifier tracks no value: its walk settles. */
	share_shared = share_wrong = 0;
	for (i = zero; i < SHARE_KEYS && can_loop; i++)
		share_shared += !bt_find(bt, SHARE_KEY_BASE + i, NULL);
	ARENA_ASSERT_EQ(added - removed, share_shared);
	for (i = zero; i < SHARE_THREADS * SHARE_OWN && can_loop; i++)
		share_wrong += share_key_wrong(i);
	ARENA_ASSERT_EQ(share_wrong, 0);
	ARENA_ASSERT_EQ(bt_count(bt), SHARE_THREADS * SHARE_OWN / 2 + share_shared);
	ret = bt_destroy(bt);
	for (i = zero; ret == -EAGAIN && i < 64 && can_loop; i++)
		ret = bt_destroy(bt);
	ARENA_ASSERT_EQ(ret, 0);
	share_tree = NULL;
	return 0;
}
