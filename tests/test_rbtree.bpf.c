// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The red-black tree under the verifier: every call, every mode and error, nodes
 * embedded in a caller's struct, iteration and range queries, a damaged tree, and random
 * operations checked against a model with rb_integrity_check after each one.
 */
#include <libarena/common.h>
#include <libarena/asan.h>
#include <libarena/rbtree.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

/* Objects the default allocator has out: every node must come back. */
static __noinline s64 blocks_out(void)
{
	return arena_heap_outstanding();
}

static __noinline int rbtree_create_modes(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t;
	int a, m;

	for (a = zero; a <= RB_NOALLOC && can_loop; a++) {
		for (m = 0; m <= RB_DUPLICATE && can_loop; m++) {
			t = rb_create(a, m);
			if (a == RB_NOALLOC && m == RB_UPDATE) {
				ARENA_ASSERT(!t);
				continue;
			}
			ARENA_ASSERT(t);
			ARENA_ASSERT(t->alloc == a && t->insert == m);
			ARENA_ASSERT(!t->root && !t->nr_nodes);
			ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
			ARENA_ASSERT_EQ(rb_destroy(t), 0);
		}
	}
	ARENA_ASSERT(!rb_create(2, RB_DEFAULT));
	ARENA_ASSERT(!rb_create(RB_ALLOC, 3));
	return 0;
}

static __noinline int rbtree_insert_find_remove(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DEFAULT);
	u64 k, v = 0, out = 0;

	ARENA_ASSERT(t);
	ARENA_ASSERT_EQ(rb_find(t, 1, &v), -ENOENT);
	ARENA_ASSERT_EQ(rb_remove(t, 1), -ENOENT);
	/* 200 keys in a scrambled order: (37 * i) mod 211 visits them all once. */
	for (k = zero; k < 200 && can_loop; k++)
		ARENA_ASSERT_EQ(rb_insert(t, (37 * k) % 211, k), 0);
	ARENA_ASSERT_EQ(t->nr_nodes, 200);
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	ARENA_ASSERT_EQ(rb_insert(t, 37, 999), -EALREADY);
	ARENA_ASSERT_EQ(rb_find(t, 37, &v), 0);
	ARENA_ASSERT_EQ(v, 1);		/* the first value stayed */
	ARENA_ASSERT_EQ(rb_find(t, 37, NULL), 0);
	for (k = zero; k < 200 && can_loop; k++) {
		ARENA_ASSERT_EQ(rb_find(t, (37 * k) % 211, &out), 0);
		ARENA_ASSERT_EQ(out, k);
	}
	/* Remove every other one, in another order. */
	for (k = zero; k < 200 && can_loop; k += 2)
		ARENA_ASSERT_EQ(rb_remove(t, (37 * k) % 211), 0);
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	ARENA_ASSERT_EQ(t->nr_nodes, 100);
	ARENA_ASSERT_EQ(rb_remove(t, 0), -ENOENT);	/* k = 0 was key 0 */
	ARENA_ASSERT_EQ(rb_find(t, 37, &v), 0);		/* k = 1 stays */
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}

static __noinline int rbtree_update(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_UPDATE);
	u64 v = 0;

	ARENA_ASSERT(t);
	ARENA_ASSERT_EQ(rb_insert(t, 7, 70), 0);
	ARENA_ASSERT_EQ(rb_insert(t, 7, 71), 0);
	ARENA_ASSERT_EQ(rb_insert(t, 8, 80), 0);
	ARENA_ASSERT_EQ(t->nr_nodes, 2);
	ARENA_ASSERT_EQ(rb_find(t, 7, &v), 0);
	ARENA_ASSERT_EQ(v, 71);
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}

/* Equal keys stay in insertion order: find, pop and remove take the oldest. */
static __noinline int rbtree_duplicate_fifo(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DUPLICATE);
	struct rbnode __arena *n;
	u64 k = 0, v = 0, i;

	ARENA_ASSERT(t);
	for (i = zero; i < 30 && can_loop; i++)
		ARENA_ASSERT_EQ(rb_insert(t, i % 3, i), 0);	/* keys 0 1 2 0 1 2 ... */
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	ARENA_ASSERT_EQ(rb_find(t, 1, &v), 0);
	ARENA_ASSERT_EQ(v, 1);
	ARENA_ASSERT_EQ(rb_remove(t, 1), 0);
	ARENA_ASSERT_EQ(rb_find(t, 1, &v), 0);
	ARENA_ASSERT_EQ(v, 4);
	/* In order: key 0 with values 0 3 6 ..., then key 1 from 4, then key 2. */
	n = rb_first(t);
	for (i = zero; i < 10 && n && can_loop; i++, n = rb_next(n))
		ARENA_ASSERT(n->key == 0 && n->value == 3 * i);
	for (i = 1; i < 10 && n && can_loop; i++, n = rb_next(n))
		ARENA_ASSERT(n->key == 1 && n->value == 3 * i + 1);
	ARENA_ASSERT(n && n->key == 2 && n->value == 2);
	ARENA_ASSERT_EQ(rb_range(t, 1, 1, NULL, 100), 9);
	for (i = zero; i < 10 && can_loop; i++) {
		ARENA_ASSERT_EQ(rb_pop(t, &k, &v), 0);
		ARENA_ASSERT(k == 0 && v == 3 * i);
	}
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}

/* A caller's struct around the node, as a scheduler keeps its tasks. */
struct task_ctx {
	u64 pid;
	struct rbnode node;
	u64 weight;
};

#define NR_TASKS 64

static __noinline int rbtree_noalloc_embedded(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_NOALLOC, RB_DUPLICATE);
	struct task_ctx __arena *tasks, *tc;
	struct rbnode __arena *n;
	u64 i, v = 0, prev = 0;

	ARENA_ASSERT(t);
	tasks = arena_malloc(NR_TASKS * sizeof(*tasks));
	ARENA_ASSERT(tasks);
	for (i = zero; i < NR_TASKS && can_loop; i++) {
		tc = &tasks[i];
		tc->pid = 1000 + i;
		tc->weight = i;
		tc->node.key = (i * 29) % 16;		/* a virtual time, with ties */
		tc->node.value = i;
		ARENA_ASSERT_EQ(rb_insert_node(t, &tc->node), 0);
	}
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	ARENA_ASSERT_EQ(rb_insert_node(t, &tasks[3].node), -EINVAL);	/* linked already */
	/* In key order, and the container comes back from its node. */
	n = rb_first(t);
	for (i = zero; n && i < NR_TASKS && can_loop; i++, n = rb_next(n)) {
		tc = rb_entry(n, struct task_ctx, node);
		ARENA_ASSERT_EQ(tc->pid, 1000 + n->value);
		ARENA_ASSERT_EQ(tc->weight, n->value);
		ARENA_ASSERT(n->key >= prev);
		prev = n->key;
	}
	ARENA_ASSERT_EQ(i, NR_TASKS);
	/* Wrong-mode calls and a non-empty destroy are refused. */
	ARENA_ASSERT_EQ(rb_insert(t, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(rb_remove(t, 1), -EINVAL);
	ARENA_ASSERT_EQ(rb_pop(t, NULL, NULL), -EINVAL);
	ARENA_ASSERT_EQ(rb_destroy(t), -EBUSY);
	ARENA_ASSERT_EQ(rb_node_free(&tasks[5].node), -EBUSY);
	/* Remove the nodes one by one from the middle: the rest stays valid. */
	for (i = zero; i < NR_TASKS && can_loop; i++) {
		tc = &tasks[(i * 7) % NR_TASKS];
		ARENA_ASSERT_EQ(rb_remove_node(t, &tc->node), 0);
		ARENA_ASSERT_EQ(rb_remove_node(t, &tc->node), -EINVAL);	/* not in it now */
		if (!(i % 8))
			ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	}
	ARENA_ASSERT(!t->root);
	ARENA_ASSERT_EQ(rb_find(t, 0, &v), -ENOENT);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	arena_free(tasks);
	return 0;
}

static __noinline int rbtree_node_alloc(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_NOALLOC, RB_DEFAULT);
	struct rbtree __arena *t2 = rb_create(RB_NOALLOC, RB_DEFAULT);
	struct rbnode __arena *a = rb_node_alloc(1, 10), *b = rb_node_alloc(1, 11);
	u64 v = 0;

	ARENA_ASSERT(t && t2 && a && b);
	ARENA_ASSERT(!a->parent && !a->left && !a->right && a->key == 1 && a->value == 10);
	ARENA_ASSERT_EQ(rb_insert_node(t, a), 0);
	ARENA_ASSERT_EQ(rb_insert_node(t, b), -EALREADY);
	ARENA_ASSERT_EQ(rb_insert_node(t2, b), 0);
	ARENA_ASSERT_EQ(rb_remove_node(t2, a), -EINVAL);	/* a node of another tree */
	ARENA_ASSERT_EQ(rb_find(t, 1, &v), 0);
	ARENA_ASSERT_EQ(v, 10);
	ARENA_ASSERT_EQ(rb_remove_node(t, a), 0);
	ARENA_ASSERT_EQ(rb_remove_node(t2, b), 0);
	ARENA_ASSERT_EQ(rb_node_free(a), 0);
	ARENA_ASSERT_EQ(rb_node_free(b), 0);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	ARENA_ASSERT_EQ(rb_destroy(t2), 0);
	return 0;
}

#define ITER_N 300
struct rb_pair __arena_global range_out[64];

static __noinline int rbtree_iteration_and_ranges(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DEFAULT);
	struct rbnode __arena *n;
	u64 i, k = 0, v = 0;
	int got;

	ARENA_ASSERT(t);
	ARENA_ASSERT(!rb_first(t) && !rb_last(t));
	ARENA_ASSERT(!rb_lower_bound(t, 0) && !rb_upper_bound(t, 0));
	ARENA_ASSERT_EQ(rb_least(t, &k, &v), -ENOENT);
	ARENA_ASSERT_EQ(rb_pop(t, &k, &v), -ENOENT);
	ARENA_ASSERT_EQ(rb_range(t, 0, ~0ull, range_out, 64), 0);
	/* Keys 10, 20, ..., 3000, inserted backwards. */
	for (i = zero; i < ITER_N && can_loop; i++)
		ARENA_ASSERT_EQ(rb_insert(t, 10 * (ITER_N - i), i), 0);
	n = rb_first(t);
	for (i = 1; i <= ITER_N && n && can_loop; i++, n = rb_next(n))
		ARENA_ASSERT_EQ(n->key, 10 * i);
	ARENA_ASSERT(!n);
	ARENA_ASSERT_EQ(i, ITER_N + 1);
	n = rb_last(t);
	for (i = ITER_N; i >= 1 && n && can_loop; i--, n = rb_prev(n))
		ARENA_ASSERT_EQ(n->key, 10 * i);
	ARENA_ASSERT(!n);
	ARENA_ASSERT_EQ(rb_least(t, &k, &v), 0);
	ARENA_ASSERT(k == 10 && v == ITER_N - 1);

	n = rb_lower_bound(t, 55);
	ARENA_ASSERT(n && n->key == 60);
	n = rb_lower_bound(t, 60);
	ARENA_ASSERT(n && n->key == 60);
	n = rb_upper_bound(t, 60);
	ARENA_ASSERT(n && n->key == 70);
	ARENA_ASSERT(!rb_upper_bound(t, 3000) && !rb_lower_bound(t, 3001));
	n = rb_lower_bound(t, 0);
	ARENA_ASSERT(n && n->key == 10);
	n = rb_find_node(t, 120);
	ARENA_ASSERT(n && n->key == 120);
	ARENA_ASSERT(!rb_find_node(t, 121));

	/* [55, 200]: 60 .. 200 is 15 keys; capped at 4; counted with no array. */
	got = rb_range(t, 55, 200, range_out, 64);
	ARENA_ASSERT_EQ(got, 15);
	for (i = zero; i < 15 && can_loop; i++)
		ARENA_ASSERT_EQ(range_out[i & 63].key, 60 + 10 * i);
	ARENA_ASSERT_EQ(range_out[0].value, ITER_N - 6);
	ARENA_ASSERT_EQ(rb_range(t, 55, 200, range_out, 4), 4);
	ARENA_ASSERT_EQ(rb_range(t, 55, 200, NULL, 1000), 15);
	ARENA_ASSERT_EQ(rb_range(t, 201, 209, range_out, 64), 0);
	ARENA_ASSERT_EQ(rb_range(t, 300, 200, range_out, 64), 0);	/* lo > hi */
	ARENA_ASSERT_EQ(rb_range(t, 0, ~0ull, NULL, 1000), ITER_N);
	ARENA_ASSERT_EQ(rb_range(t, 3000, 3000, range_out, 64), 1);

	/* rb_pop drains in order. */
	for (i = 1; i <= ITER_N && can_loop; i++) {
		ARENA_ASSERT_EQ(rb_pop(t, &k, NULL), 0);
		ARENA_ASSERT_EQ(k, 10 * i);
	}
	ARENA_ASSERT(!t->root && !t->nr_nodes);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}

static __noinline int rbtree_bad_calls(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DEFAULT);
	struct rbnode __arena *n = rb_node_alloc(1, 1);
	u64 v = 0;

	ARENA_ASSERT(t && n);
	ARENA_ASSERT_EQ(rb_insert(NULL, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(rb_remove(NULL, 1), -EINVAL);
	ARENA_ASSERT_EQ(rb_find(NULL, 1, &v), -EINVAL);
	ARENA_ASSERT_EQ(rb_least(NULL, &v, &v), -EINVAL);
	ARENA_ASSERT_EQ(rb_pop(NULL, &v, &v), -EINVAL);
	ARENA_ASSERT_EQ(rb_destroy(NULL), -EINVAL);
	ARENA_ASSERT_EQ(rb_print(NULL), -EINVAL);
	ARENA_ASSERT_EQ(rb_integrity_check(NULL), -EINVAL);
	ARENA_ASSERT_EQ(rb_range(NULL, 0, 1, NULL, 1), -EINVAL);
	ARENA_ASSERT(!rb_first(NULL) && !rb_last(NULL) && !rb_lower_bound(NULL, 0));
	ARENA_ASSERT(!rb_next(NULL) && !rb_prev(NULL));
	/* RB_NOALLOC calls on an RB_ALLOC tree. */
	ARENA_ASSERT_EQ(rb_insert_node(t, n), -EINVAL);
	ARENA_ASSERT_EQ(rb_remove_node(t, n), -EINVAL);
	/* Not a tree at all. */
	ARENA_ASSERT_EQ(rb_insert((struct rbtree __arena *)n, 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(rb_node_free(n), 0);
	ARENA_ASSERT_EQ(rb_insert(t, 5, 5), 0);
	ARENA_ASSERT_EQ(rb_print(t), 0);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	/* Destroyed: the magic is gone (the block is still the allocator's to hand out). */
	ARENA_ASSERT_EQ(rb_find(t, 5, &v), -EINVAL);
	ARENA_ASSERT_EQ(rb_destroy(t), -EINVAL);
#ifdef LIBARENA_ASAN
	/* The sanitizer build sees those two calls for what they are: uses after free. */
	arena_stdout("asan-expect: use-after-free read of 4 bytes");
	arena_stdout("asan-expect: into the freed 32-byte block");
	arena_stdout("asan-expect: by test_rbtree_errors_and_damage:rb_find+");
	arena_stdout("asan-expect: by test_rbtree_errors_and_damage:rb_destroy+");
#endif
	return 0;
}

/* A cycle written into the tree: each walk stops with an error, nothing hangs. */
static __noinline int rbtree_damaged(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DEFAULT);
	struct rbnode __arena *least;
	u64 k, v = 0;

	ARENA_ASSERT(t);
	for (k = zero; k < 64 && can_loop; k++)
		ARENA_ASSERT_EQ(rb_insert(t, k, k), 0);
	least = rb_first(t);
	ARENA_ASSERT(least && !least->left);
	least->left = t->root;
	ARENA_ASSERT_EQ(rb_find(t, 0, &v), -EFAULT);
	ARENA_ASSERT_EQ(rb_least(t, &k, &v), -EFAULT);
	ARENA_ASSERT_EQ(rb_remove(t, 0), -EFAULT);
	ARENA_ASSERT_EQ(rb_integrity_check(t), -EUCLEAN);
	ARENA_ASSERT(!rb_first(t));
	least->left = NULL;
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	t->root->is_red = true;
	ARENA_ASSERT_EQ(rb_integrity_check(t), -EUCLEAN);
	t->root->is_red = false;
	least->key = 100;
	ARENA_ASSERT_EQ(rb_integrity_check(t), -EUCLEAN);
	least->key = 0;
	/* A destroy that meets the cycle stops; once repaired, a second one finishes. */
	least->left = t->root;
	ARENA_ASSERT_EQ(rb_destroy(t), -EFAULT);
	ARENA_ASSERT_EQ(rb_find(t, 1, &v), -EINVAL);	/* half destroyed: off limits */
	least->left = NULL;
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}

/*
 * Random insert/remove/find/pop against a model (unique keys, RB_UPDATE), with
 * rb_integrity_check after every operation and the in-order walk compared with the
 * model every 256 operations. Destroy must give back every node.
 */
#define MODEL_KEYS	512
#define MODEL_OPS	6000

u64 __arena_global model_val[MODEL_KEYS];
u64 __arena_global model_has[MODEL_KEYS];
u64 __arena_global model_ops_done;

static __noinline int walk_matches(struct rbtree __arena *t)
{
	struct rbnode __arena *n = rb_first(t);
	u64 k, seen = 0;

	for (k = zero; k < MODEL_KEYS && can_loop; k++) {
		if (!model_has[k & (MODEL_KEYS - 1)])
			continue;
		if (!n || n->key != k || n->value != model_val[k & (MODEL_KEYS - 1)]) {
			arena_stderr("walk: key %llu missing or wrong", k);
			return -1;
		}
		seen++;
		n = rb_next(n);
	}
	if (n || seen != t->nr_nodes)
		return -1;
	return 0;
}

static __noinline int model_op(struct rbtree __arena *t, u64 *x, u64 *live)
{
	u64 r = arena_test_rand(x) % 100, k = arena_test_rand(x) % MODEL_KEYS,
	    v = arena_test_rand(x), got = 0;
	u64 gk = 0;
	int ret;

	if (r < 45) {
		ret = rb_insert(t, k, v);
		if (ret)
			return 1000 + -ret;
		*live += !model_has[k];
		model_has[k] = 1;
		model_val[k] = v;
	} else if (r < 75) {
		ret = rb_remove(t, k);
		if (ret != (model_has[k] ? 0 : -ENOENT))
			return 2000 + -ret;
		*live -= !!model_has[k];
		model_has[k] = 0;
	} else if (r < 92) {
		ret = rb_find(t, k, &got);
		if (ret != (model_has[k] ? 0 : -ENOENT) || (!ret && got != model_val[k]))
			return 3000 + -ret;
	} else {
		ret = rb_pop(t, &gk, &got);
		if (!*live)
			return ret == -ENOENT ? 0 : 4000 + -ret;
		gk &= MODEL_KEYS - 1;
		if (ret || !model_has[gk] || got != model_val[gk])
			return 5000 + -ret;
		/* Nothing smaller was there. */
		if (rb_lower_bound(t, 0) && rb_lower_bound(t, 0)->key < gk)
			return 6000;
		model_has[gk] = 0;
		(*live)--;
	}
	return 0;
}

static __noinline int rbtree_random_vs_model(struct arena_test_ctx *ctx)
{
	u64 x = ctx->seed | 1, live = 0, i;
	s64 out_before = blocks_out();
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_UPDATE);
	int ret;

	ARENA_ASSERT(t);
	for (i = zero; i < MODEL_KEYS && can_loop; i++)
		model_has[i & (MODEL_KEYS - 1)] = 0;
	for (i = zero; i < MODEL_OPS && can_loop; i++) {
		ret = model_op(t, &x, &live);
		if (ret) {
			arena_stderr("op %llu: mismatch %d", i, ret);
			return ret;
		}
		ret = rb_integrity_check(t);
		if (ret) {
			arena_stderr("op %llu: integrity check failed", i);
			return 1;
		}
		ARENA_ASSERT_EQ(t->nr_nodes, live);
		if (!(i % 256))
			ARENA_ASSERT_EQ(walk_matches(t), 0);
	}
	ARENA_ASSERT_EQ(i, MODEL_OPS);
	ARENA_ASSERT_EQ(walk_matches(t), 0);
	model_ops_done += i;
	arena_stdout("rbtree model: %llu operations, each checked; %llu keys live at the end",
		     i, live);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	/* Every node (and the tree) went back, when the allocator can tell. */
	ARENA_ASSERT_EQ(blocks_out(), out_before);
	return 0;
}

/* RB_DUPLICATE at random: per key a FIFO of values, the tree must agree. */
#define DUP_KEYS	16
#define DUP_DEPTH	16
#define DUP_OPS		3000

u64 __arena_global dup_q[DUP_KEYS][DUP_DEPTH];
u64 __arena_global dup_head[DUP_KEYS], dup_tail[DUP_KEYS];

static __noinline int dup_op(struct rbtree __arena *t, u64 *x, u64 seq)
{
	u64 r = arena_test_rand(x) % 100, k = arena_test_rand(x) % DUP_KEYS, got = 0;
	u64 n = dup_tail[k] - dup_head[k];
	int ret;

	if (r < 50) {
		if (n == DUP_DEPTH)
			return 0;
		ret = rb_insert(t, k, seq);
		if (ret)
			return 100 + -ret;
		dup_q[k][dup_tail[k]++ % DUP_DEPTH] = seq;
	} else if (r < 80) {
		ret = rb_find(t, k, &got);
		if (ret != (n ? 0 : -ENOENT) || (n && got != dup_q[k][dup_head[k] % DUP_DEPTH]))
			return 200 + -ret;
		ret = rb_remove(t, k);
		if (ret != (n ? 0 : -ENOENT))
			return 300 + -ret;
		if (n)
			dup_head[k]++;
	} else {
		/* The range of one key is its FIFO, oldest first. */
		if (rb_range(t, k, k, NULL, DUP_DEPTH + 1) != n)
			return 400;
	}
	return 0;
}

static __noinline int rbtree_random_duplicates(struct arena_test_ctx *ctx)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DUPLICATE);
	u64 x = (ctx->seed * 7) | 1, i;
	int ret;

	ARENA_ASSERT(t);
	for (i = zero; i < DUP_KEYS && can_loop; i++) {
		dup_head[i & (DUP_KEYS - 1)] = 0;
		dup_tail[i & (DUP_KEYS - 1)] = 0;
	}
	for (i = zero; i < DUP_OPS && can_loop; i++) {
		ret = dup_op(t, &x, i);
		if (ret) {
			arena_stderr("op %llu: mismatch %d", i, ret);
			return ret;
		}
		ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	}
	ARENA_ASSERT_EQ(i, DUP_OPS);
	model_ops_done += i;
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}

/* Big enough to be deep: 20000 nodes, destroyed in one call, every node returned. */
static __noinline int rbtree_large_destroy(struct arena_test_ctx *ctx)
{
	u64 x = ctx->seed | 1, i, n = 0;
	s64 out_before = blocks_out();
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DEFAULT);
	struct rbnode __arena *p;
	int depth = 0;

	ARENA_ASSERT(t);
	for (i = zero; i < 20000 && can_loop; i++)
		n += rb_insert(t, arena_test_rand(&x) % 1000000, i) == 0;
	ARENA_ASSERT_EQ(t->nr_nodes, n);
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	for (p = t->root; p && depth < RB_MAX_DEPTH && can_loop; p = p->left)
		depth++;
	ARENA_ASSERT(depth <= 2 * 15);	/* 2 log2(20001) */
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	ARENA_ASSERT_EQ(blocks_out(), out_before);
	arena_stdout("rbtree large: %llu nodes, leftmost depth %d, destroyed", n, depth);
	return 0;
}

/*
 * The programs the runner sees: each runs a few of the tests above (its verification
 * pulls in the allocator, the costly part of loading an object, once instead of per test).
 * A failure names its file and line.
 */
SEC("syscall")
/* Not instrumented: keeps this load well under 1M verified instructions. */
__noasan int test_rbtree_modes_and_map_calls(struct arena_test_ctx *ctx)
{
	int ret;

	ret = rbtree_create_modes(ctx);
	if (ret)
		return ret;
	ret = rbtree_insert_find_remove(ctx);
	if (ret)
		return ret;
	ret = rbtree_update(ctx);
	if (ret)
		return ret;
	return rbtree_duplicate_fifo(ctx);
}

SEC("syscall")
int test_rbtree_embedded_nodes(struct arena_test_ctx *ctx)
{
	int ret;

	ret = rbtree_noalloc_embedded(ctx);
	if (ret)
		return ret;
	return rbtree_node_alloc(ctx);
}

SEC("syscall")
int test_rbtree_iteration_and_ranges(struct arena_test_ctx *ctx)
{
	return rbtree_iteration_and_ranges(ctx);
}

SEC("syscall")
int test_rbtree_errors_and_damage(struct arena_test_ctx *ctx)
{
	int ret;
#ifdef LIBARENA_ASAN
	struct asan_state __arena *st = (struct asan_state __arena *)asan_state_addr();
	u64 before = READ_ONCE(st->nr_reports);
#endif

	ret = rbtree_bad_calls(ctx);
	if (ret)
		return ret;
	ret = rbtree_damaged(ctx);
	if (ret)
		return ret;
#ifdef LIBARENA_ASAN
	/* The two uses of a destroyed tree rbtree_bad_calls expects, and nothing else. */
	ARENA_ASSERT_EQ(READ_ONCE(st->nr_reports) - before, 2);
#endif
	return 0;
}

SEC("syscall")
int test_rbtree_random_vs_model(struct arena_test_ctx *ctx)
{
	int ret;

	ret = rbtree_random_vs_model(ctx);
	if (ret)
		return ret;
	return rbtree_random_duplicates(ctx);
}

SEC("syscall")
int test_rbtree_large_destroy(struct arena_test_ctx *ctx)
{
	return rbtree_large_destroy(ctx);
}

/*
 * A bulk build in one sleepable program, as programs written for upstream do: one
 * arena_heap_reserve() call ahead, no maintenance on the way, no allocation failing.
 */
#define BULK_KEYS	65536

static __noinline int bulk_insert(struct rbtree __arena *t, u32 n)
{
	u32 i;

	for (i = zero; i < n && can_loop; i++)
		if (rb_insert(t, (u64)i * 2654435761u % 1000003 * BULK_KEYS + i, i))
			return -ENOMEM;
	return 0;
}

SEC("syscall")
int test_rbtree_bulk_build(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = (void __arena *)arena_heap_global_addr();
	u64 mapped = g->map_calls, passes = g->maintain_passes;
	struct rbtree __arena *t;
	int err;

	ARENA_ASSERT_EQ(arena_heap_reserve(sizeof(struct rbnode), BULK_KEYS), 0);
	t = rb_create(RB_ALLOC, RB_DEFAULT);
	ARENA_ASSERT(t);
	err = bulk_insert(t, BULK_KEYS);
	ARENA_ASSERT_EQ(err, 0);
	ARENA_ASSERT_EQ(t->nr_nodes, BULK_KEYS);
	ARENA_ASSERT_EQ(rb_integrity_check(t), 0);
	arena_stdout(
		     "bulk: %u keys; %llu maps and %llu maintenance passes during the build (the reservation's and the background's)",
		     BULK_KEYS, g->map_calls - mapped, g->maintain_passes - passes);
	ARENA_ASSERT_EQ(rb_destroy(t), 0);
	return 0;
}
