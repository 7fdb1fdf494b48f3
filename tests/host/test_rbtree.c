// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The red-black tree compiled natively: a fuzzer that runs random operation sequences
 * in every mode against a sorted-array model, with rb_integrity_check after each
 * operation, plus a damaged tree, memory exhaustion and bad calls. Nodes come from libc
 * malloc (host_malloc.h), so the sanitizers see every node on its own.
 *
 * HOST_FUZZ_OPS=N sets the operations per mode, HOST_FUZZ_SEED the seed.
 */
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/rbtree.h>
#include "check.h"
#include "host_malloc.h"

char libarena_host_arena;

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS 10000	/* nothing concurrent here: TSan only slows it down */
#else
#define DEFAULT_OPS 100000
#endif
#define MAX_LIVE 1024
#define RANGE_MAX 64

static u64 rng;

static u64 rnd(void)
{
	return host_rnd(&rng);
}

/* A caller's struct with the node inside, as RB_NOALLOC users have it. */
struct item {
	u64 before;
	struct rbnode node;
	u64 after;
	int in_tree;
};

/* The model: pairs sorted by key, equal keys in insertion order. */
struct entry {
	u64 key, value;
	struct item *item;
};

#define MODEL_ENTRY	struct entry
#define MODEL_MAX	MAX_LIVE
#include "model.h"

static struct item items[MAX_LIVE];
static long total_ops;

/* Equal keys in insertion order, as the tree keeps them. */
static void model_insert(u64 key, u64 value, struct item *it)
{
	model_put((struct entry){ key, value, it }, 1);
}

static struct item *free_item(void)
{
	for (int tries = 0; tries < 4 * MAX_LIVE; tries++) {
		struct item *it = &items[rnd() % MAX_LIVE];

		if (!it->in_tree)
			return it;
	}
	return NULL;
}

/* The node at model index at (NULL past the end) must be n. */
static int expect(struct rbnode *n, int at, const char *what)
{
	if (at >= nr) {
		CHECK(!n, "%s: expected no node, got key %llu", what, n->key);
		return 0;
	}
	CHECK(n, "%s: expected key %llu, got none", what, model[at].key);
	CHECK(n->key == model[at].key && n->value == model[at].value,
	      "%s: key %llu value %llu, expected %llu %llu", what, n->key, n->value,
	      model[at].key, model[at].value);
	if (model[at].item)
		CHECK(n == &model[at].item->node, "%s: another node of the same key", what);
	return 0;
}

static int check_iteration(struct rbtree *t)
{
	struct rbnode *n = rb_first(t);
	int i;

	for (i = 0; i < nr; i++, n = rb_next(n))
		if (expect(n, i, "rb_next"))
			return -1;
	CHECK(!n, "rb_next went past the model's end");
	n = rb_last(t);
	for (i = nr - 1; i >= 0; i--, n = rb_prev(n))
		if (expect(n, i, "rb_prev"))
			return -1;
	CHECK(!n, "rb_prev went past the model's start");
	return 0;
}

static int check_range(struct rbtree *t, u64 keyspace)
{
	static struct rb_pair out[RANGE_MAX];
	u64 lo = rnd() % keyspace, hi = lo + rnd() % (keyspace / 4 + 1);
	u32 max = rnd() % RANGE_MAX;
	int got, at = first_at_least(lo, 0), want = 0;

	while (at + want < nr && model[at + want].key <= hi && want < (int)max)
		want++;
	got = rb_range(t, lo, hi, out, max);
	CHECK(got == want, "rb_range(%llu, %llu, %u): %d pairs, expected %d", lo, hi, max, got,
	      want);
	for (int i = 0; i < got; i++)
		CHECK(out[i].key == model[at + i].key && out[i].value == model[at + i].value,
		      "rb_range pair %d", i);
	CHECK(rb_range(t, lo, hi, NULL, max) == want, "rb_range counting");
	return 0;
}

/* One mode: ops random operations against the model. */
static int fuzz(enum rbtree_alloc alloc, enum rbtree_insert_mode mode, long ops, u64 keyspace)
{
	bool own = alloc == RB_ALLOC;
	long base = host_live_blocks;
	struct rbtree *t = rb_create(alloc, mode);
	u64 k, v, gk, gv;
	int ret, at;

	CHECK(t, "rb_create(%d, %d)", alloc, mode);
	nr = 0;
	memset(items, 0, sizeof(items));
	for (long op = 0; op < ops; op++, total_ops++) {
		int r = rnd() % 100;

		k = rnd() % keyspace;
		v = rnd();
		if (r < 40 && nr < MAX_LIVE - 1) {
			struct item *it = own ? NULL : free_item();

			at = model_find(k);
			if (own) {
				ret = rb_insert(t, k, v);
			} else {
				if (!it)
					continue;
				it->node.key = k;
				it->node.value = v;
				/* Garbage in the links: rb_insert_node must not trust them. */
				it->node.left = (void *)0xdead;
				it->node.is_red = rnd() & 1;
				ret = rb_insert_node(t, &it->node);
			}
			if (at >= 0 && mode == RB_DEFAULT) {
				CHECK(ret == -EALREADY, "op %ld: duplicate insert: %d", op, ret);
			} else if (at >= 0 && mode == RB_UPDATE) {
				CHECK(ret == 0, "op %ld: update gave %d", op, ret);
				model[at].value = v;
			} else {
				CHECK(ret == 0, "op %ld: insert %llu gave %d", op, k, ret);
				model_insert(k, v, it);
				if (it)
					it->in_tree = 1;
			}
		} else if (r < 65) {
			if (own) {
				/* Mostly keys that are there. */
				if (nr && (rnd() & 3))
					k = model[rnd() % nr].key;
				at = model_find(k);
				ret = rb_remove(t, k);
				CHECK(ret == (at >= 0 ? 0 : -ENOENT), "op %ld: rb_remove %llu: %d",
				      op, k, ret);
				if (at >= 0)
					model_erase(at);
			} else if (nr) {
				/* Any node, also one of several equal keys. */
				at = rnd() % nr;
				ret = rb_remove_node(t, &model[at].item->node);
				CHECK(ret == 0, "op %ld: rb_remove_node: %d", op, ret);
				model[at].item->in_tree = 0;
				CHECK(!model[at].item->node.parent && !model[at].item->node.left,
				      "removed node keeps links");
				model_erase(at);
			}
		} else if (r < 80) {
			at = model_find(k);
			ret = rb_find(t, k, &gv);
			CHECK(ret == (at >= 0 ? 0 : -ENOENT), "op %ld: rb_find %llu: %d", op, k,
			      ret);
			if (at >= 0)
				CHECK(gv == model[at].value, "op %ld: rb_find value", op);
			if (expect(rb_find_node(t, k), at >= 0 ? at : nr, "rb_find_node"))
				return -1;
		} else if (r < 85) {
			ret = rb_pop(t, &gk, &gv);
			if (!own) {
				CHECK(ret == -EINVAL, "rb_pop on RB_NOALLOC: %d", ret);
			} else if (!nr) {
				CHECK(ret == -ENOENT, "rb_pop on empty: %d", ret);
			} else {
				CHECK(ret == 0 && gk == model[0].key && gv == model[0].value,
				      "op %ld: rb_pop %d %llu", op, ret, gk);
				model_erase(0);
			}
		} else if (r < 90) {
			ret = rb_least(t, &gk, &gv);
			CHECK(ret == (nr ? 0 : -ENOENT), "rb_least: %d", ret);
			if (nr)
				CHECK(gk == model[0].key && gv == model[0].value, "rb_least");
			if (expect(rb_lower_bound(t, k), first_at_least(k, 0), "rb_lower_bound") ||
			    expect(rb_upper_bound(t, k), first_at_least(k, 1), "rb_upper_bound"))
				return -1;
		} else if (r < 95) {
			if (check_range(t, keyspace))
				return -1;
		} else if (r < 96) {
			if (check_iteration(t))
				return -1;
		} else {
			/* The calls of the other mode change nothing. */
			if (own) {
				CHECK(rb_insert_node(t, &items[0].node) == -EINVAL, "");
				CHECK(rb_remove_node(t, t->root) == -EINVAL, "");
			} else {
				CHECK(rb_insert(t, k, v) == -EINVAL, "");
				CHECK(rb_remove(t, k) == -EINVAL, "");
				/* A node that is not in the tree. */
				struct item *it = free_item();

				if (it)
					CHECK(rb_remove_node(t, &it->node) == -EINVAL, "");
			}
		}
		ret = rb_integrity_check(t);
		CHECK(ret == 0, "op %ld (r %d): integrity check failed", op, r);
		CHECK(t->nr_nodes == (u64)nr, "op %ld: %llu nodes, model %d", op, t->nr_nodes, nr);
	}
	if (check_iteration(t))
		return -1;
	if (!own) {
		CHECK(nr == 0 || rb_destroy(t) == -EBUSY, "RB_NOALLOC destroy with nodes");
		while (nr) {
			CHECK(rb_remove_node(t, &model[nr - 1].item->node) == 0, "");
			nr--;
		}
	}
	CHECK(rb_destroy(t) == 0, "rb_destroy");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

static long fuzz_ops(void)
{
	const char *s = getenv("HOST_FUZZ_OPS");

	return s ? atol(s) : DEFAULT_OPS;
}

static int test_fuzz_alloc_default(void)
{
	return fuzz(RB_ALLOC, RB_DEFAULT, fuzz_ops(), 2048);
}

static int test_fuzz_alloc_update(void)
{
	return fuzz(RB_ALLOC, RB_UPDATE, fuzz_ops(), 2048);
}

static int test_fuzz_alloc_duplicate(void)
{
	/* A small key space: long runs of equal keys. */
	return fuzz(RB_ALLOC, RB_DUPLICATE, fuzz_ops(), 64);
}

static int test_fuzz_noalloc_default(void)
{
	return fuzz(RB_NOALLOC, RB_DEFAULT, fuzz_ops(), 4096);
}

static int test_fuzz_noalloc_duplicate(void)
{
	return fuzz(RB_NOALLOC, RB_DUPLICATE, fuzz_ops(), 32);
}

/* Sequential keys, up and down: the shapes that need every rotation. */
static int test_sequential(void)
{
	struct rbtree *t = rb_create(RB_ALLOC, RB_DEFAULT);
	u64 k, v;
	int n = 20000;

	CHECK(t, "");
	for (k = 0; k < (u64)n; k++)
		CHECK(rb_insert(t, k, k * 3) == 0, "");
	CHECK(rb_integrity_check(t) == 0, "");
	for (k = 2 * n; k >= (u64)n; k--)
		CHECK(rb_insert(t, k, k * 3) == 0, "");
	CHECK(rb_integrity_check(t) == 0, "");
	/* Height stays logarithmic: walk down the leftmost path. */
	int depth = 0;

	for (struct rbnode *x = t->root; x; x = x->left)
		depth++;
	CHECK(depth <= 2 * 16, "depth %d for %d nodes", depth, 2 * n);
	for (k = 0; k <= 2 * (u64)n; k += 2)
		CHECK(rb_remove(t, k) == 0, "");
	CHECK(rb_integrity_check(t) == 0, "");
	for (k = 1; k < 2 * (u64)n; k += 2) {
		CHECK(rb_pop(t, &v, NULL) == 0 && v == k, "pop %llu", k);
		if (k % 1001 == 0)
			CHECK(rb_integrity_check(t) == 0, "");
	}
	CHECK(rb_pop(t, &v, &v) == -ENOENT, "");
	CHECK(rb_destroy(t) == 0, "");
	return 0;
}

/* Damage: every walk ends with an error, nothing hangs or crashes. */
static int test_damaged(void)
{
	struct rbtree *t = rb_create(RB_ALLOC, RB_DEFAULT);
	struct rbnode *leaf, *saved;
	u64 v;

	CHECK(t, "");
	for (u64 k = 0; k < 100; k++)
		CHECK(rb_insert(t, k, k) == 0, "");
	CHECK(rb_integrity_check(t) == 0, "");
	leaf = rb_first(t);
	CHECK(leaf && !leaf->left, "");
	/* A cycle: the least node's left child is the root. */
	leaf->left = t->root;
	CHECK(rb_find(t, 0, &v) == -EFAULT, "find in a cycle");
	CHECK(rb_insert(t, 0, 0) != 0, "");
	CHECK(rb_integrity_check(t) == -EUCLEAN, "");
	CHECK(rb_first(t) == NULL, "rb_first in a cycle");
	CHECK(rb_least(t, &v, NULL) == -EFAULT, "");
	CHECK(rb_range(t, 0, 5, NULL, 10) == -EFAULT, "");
	leaf->left = NULL;
	CHECK(rb_integrity_check(t) == 0, "repaired");
	/* A wrong colour, a wrong parent, a wrong count, keys out of order. */
	t->root->is_red = true;
	CHECK(rb_integrity_check(t) == -EUCLEAN, "red root");
	t->root->is_red = false;
	saved = t->root->left->parent;
	t->root->left->parent = t->root->right;
	CHECK(rb_integrity_check(t) == -EUCLEAN, "bad parent");
	t->root->left->parent = saved;
	t->nr_nodes++;
	CHECK(rb_integrity_check(t) == -EUCLEAN, "bad count");
	t->nr_nodes--;
	leaf->key = 1000;
	CHECK(rb_integrity_check(t) == -EUCLEAN, "out of order");
	leaf->key = 0;
	leaf->is_red = !leaf->is_red;
	CHECK(rb_integrity_check(t) == -EUCLEAN, "black heights");
	leaf->is_red = !leaf->is_red;
	CHECK(rb_integrity_check(t) == 0, "");
	/* A cycle that destroy meets: it stops, it does not loop. */
	leaf->left = t->root;
	CHECK(rb_destroy(t) == -EFAULT, "destroy of a cycle");
	leaf->left = NULL;
	CHECK(rb_destroy(t) == 0, "destroy after repair");
	return 0;
}

static int test_bad_calls(void)
{
	struct rbtree *t, *nt;
	struct rbnode *n, *m;
	u64 v;

	CHECK(!rb_create(RB_NOALLOC, RB_UPDATE), "RB_NOALLOC with RB_UPDATE");
	CHECK(!rb_create(2, RB_DEFAULT), "");
	CHECK(!rb_create(RB_ALLOC, 3), "");
	CHECK(rb_insert(NULL, 1, 1) == -EINVAL, "");
	CHECK(rb_find(NULL, 1, &v) == -EINVAL, "");
	CHECK(rb_destroy(NULL) == -EINVAL, "");
	CHECK(rb_integrity_check(NULL) == -EINVAL, "");
	CHECK(rb_first(NULL) == NULL, "");
	t = rb_create(RB_ALLOC, RB_DEFAULT);
	nt = rb_create(RB_NOALLOC, RB_DEFAULT);
	CHECK(t && nt, "");
	CHECK(rb_insert_node(nt, NULL) == -EINVAL, "");
	n = rb_node_alloc(5, 50);
	CHECK(n && n->key == 5 && n->value == 50 && !n->parent, "");
	CHECK(rb_insert_node(nt, n) == 0, "");
	CHECK(rb_insert_node(nt, n) == -EINVAL, "the same node twice");
	CHECK(rb_find(nt, 5, NULL) == 0 && rb_find(nt, 5, &v) == 0 && v == 50, "");
	/* A node of another tree. */
	CHECK(rb_remove_node(nt, &(struct rbnode){ .key = 5 }) == -EINVAL, "");
	m = rb_node_alloc(6, 60);
	CHECK(m && rb_insert_node(nt, m) == 0, "");
	CHECK(rb_node_free(n) == -EBUSY && rb_node_free(m) == -EBUSY, "freeing linked nodes");
	CHECK(rb_destroy(nt) == -EBUSY, "");
	CHECK(rb_remove_node(nt, m) == 0 && rb_node_free(m) == 0, "");
	CHECK(rb_remove_node(nt, n) == 0, "");
	CHECK(rb_remove_node(nt, n) == -EINVAL, "removed twice");
	CHECK(rb_node_free(n) == 0, "");
	CHECK(rb_destroy(nt) == 0, "");
	/* Out of memory: nothing changes. */
	CHECK(rb_insert(t, 1, 1) == 0, "");
	host_malloc_fail_after = 0;
	CHECK(rb_insert(t, 2, 2) == -ENOMEM, "");
	CHECK(!rb_create(RB_ALLOC, RB_DEFAULT), "");
	CHECK(!rb_node_alloc(1, 1), "");
	host_malloc_fail_after = -1;
	CHECK(t->nr_nodes == 1 && rb_integrity_check(t) == 0, "");
	CHECK(rb_print(t) == 0, "");
	CHECK(rb_destroy(t) == 0, "");
	return 0;
}

int main(void)
{
	const char *seed = getenv("HOST_FUZZ_SEED");

	/* The fuzzer makes bad calls on purpose: keep their log lines out of the way. */
	host_begin(true);
	rng = seed ? strtoull(seed, NULL, 0) : 0x2545f4914f6cdd1dull;
	host_run("host", "rbtree_fuzz_alloc_default", test_fuzz_alloc_default);
	host_run("host", "rbtree_fuzz_alloc_update", test_fuzz_alloc_update);
	host_run("host", "rbtree_fuzz_alloc_duplicate", test_fuzz_alloc_duplicate);
	host_run("host", "rbtree_fuzz_noalloc_default", test_fuzz_noalloc_default);
	host_run("host", "rbtree_fuzz_noalloc_duplicate", test_fuzz_noalloc_duplicate);
	printf("    %ld random operations, each followed by rb_integrity_check\n", total_ops);
	host_run("host", "rbtree_sequential", test_sequential);
	host_run("host", "rbtree_damaged", test_damaged);
	host_run("host", "rbtree_bad_calls", test_bad_calls);
	return host_summary();
}
