// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The B-tree compiled natively: a fuzzer that runs random operations (insert, update,
 * remove, find, bounds, cursors, ranges, pops, full scans) against a sorted-array model,
 * in phases that grow the tree to thousands of keys and shrink it to nothing, with
 * bt_integrity_check after every operation in sampled stretches; then sequential fills,
 * memory exhaustion in the middle of split cascades, a damaged tree and bad calls. Nodes
 * come from libc malloc (host_malloc.h), so the sanitizers see each one on its own.
 *
 * test_btree4.c builds the same file with 14-key nodes (BT_SEARCH_STEPS=4), which makes
 * trees of the same key counts twice as high, and a small BT_DESTROY_MAX.
 *
 * HOST_FUZZ_OPS=N sets the number of operations, HOST_FUZZ_SEED the seed.
 */
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/btree.h>
#include "check.h"
#include "host_malloc.h"

char libarena_host_arena;

#ifndef SUITE
#define SUITE "btree"
#endif
#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS 50000	/* nothing concurrent here: TSan only slows it down */
#else
#define DEFAULT_OPS 1000000
#endif
#define MAX_LIVE 6000
#define KEYSPACE (3 * MAX_LIVE)
#define RANGE_MAX 200

static u64 rng;

/* bt_destroy until done: it frees BT_DESTROY_MAX nodes a call. */
static int destroy(struct btree *bt)
{
	int ret, calls = 0;

	while ((ret = bt_destroy(bt)) == -EAGAIN && calls++ < 100000)
		;
	return ret;
}

static u64 rnd(void)
{
	return host_rnd(&rng);
}

/* Keys spread over the whole u64 range, both ends included. */
static u64 key_of(u64 x)
{
	if (x == KEYSPACE - 1)
		return ~0ull;
	return x * 1000000007ull;
}

static u64 rnd_key(void)
{
	return key_of(rnd() % KEYSPACE);
}

#define MODEL_ENTRY	struct bt_pair
#define MODEL_MAX	MAX_LIVE
#include "model.h"

static long total_ops, checks, max_live, phases;
static u32 max_height;

static void model_insert(u64 key, u64 value)
{
	model_put((struct bt_pair){ key, value }, 0);
}

/* The cursor must stand on model[at] (at == nr: spent, ret -ENOENT). */
static int at_model(struct bt_cursor *c, int ret, int at, const char *what)
{
	if (at < 0 || at >= nr) {
		CHECK(ret == -ENOENT && !c->leaf, "%s: expected the end, got %d key %llu", what,
		      ret, c->key);
		return 0;
	}
	CHECK(ret == 0, "%s: %d, expected key %llu", what, ret, model[at].key);
	CHECK(c->key == model[at].key && c->value == model[at].value,
	      "%s: key %llu value %llu, expected %llu %llu", what, c->key, c->value,
	      model[at].key, model[at].value);
	return 0;
}

static int check_scan(struct btree *bt)
{
	struct bt_cursor c = {};
	int i, ret;

	ret = bt_first(bt, &c);
	for (i = 0; i < nr; i++, ret = bt_next(&c))
		if (at_model(&c, ret, i, "bt_next"))
			return -1;
	if (at_model(&c, ret, nr, "bt_next at the end"))
		return -1;
	CHECK(bt_next(&c) == -ENOENT, "a spent cursor stays spent");
	ret = bt_last(bt, &c);
	for (i = nr - 1; i >= 0; i--, ret = bt_prev(&c))
		if (at_model(&c, ret, i, "bt_prev"))
			return -1;
	return at_model(&c, ret, -1, "bt_prev at the start");
}

static int check_bounds(struct btree *bt, u64 k)
{
	struct bt_cursor c = {};
	int at = first_at_least(k, 0), i, ret;

	if (at_model(&c, bt_lower_bound(bt, k, &c), at, "bt_lower_bound"))
		return -1;
	/* A few steps either way from there. */
	for (i = 0; i < 3 && at < nr; i++)
		if (at_model(&c, bt_next(&c), ++at, "bt_next after a bound"))
			return -1;
	at = first_at_least(k, 1);
	if (at_model(&c, bt_upper_bound(bt, k, &c), at, "bt_upper_bound"))
		return -1;
	for (i = 0; i < 3 && at < nr; i++) {
		ret = bt_prev(&c);
		if (at_model(&c, ret, --at, "bt_prev after a bound"))
			return -1;
		if (ret)
			break;
	}
	return 0;
}

static int check_range(struct btree *bt)
{
	static struct bt_pair out[RANGE_MAX];
	u64 lo = rnd_key(), hi = rnd() & 1 ? ~0ull : lo + (rnd() % KEYSPACE) * 100000000ull;
	u32 max = rnd() % RANGE_MAX;
	int got, at = first_at_least(lo, 0), want = 0, all = 0;

	if (hi < lo)
		hi = ~0ull;
	while (at + all < nr && model[at + all].key <= hi)
		all++;
	want = all < (int)max ? all : (int)max;
	got = bt_range(bt, lo, hi, out, max);
	CHECK(got == want, "bt_range(%llu, %llu, %u): %d pairs, expected %d", lo, hi, max, got,
	      want);
	for (int i = 0; i < got; i++)
		CHECK(out[i].key == model[at + i].key && out[i].value == model[at + i].value,
		      "bt_range pair %d", i);
	CHECK(bt_range(bt, lo, hi, NULL, max) == want, "bt_range counting");
	CHECK(bt_range(bt, lo, hi, NULL, ~0u) == all, "bt_range counting all");
	return 0;
}

/* Walk from a random key, removing every other pair under the cursor. */
static int walk_and_remove(struct btree *bt)
{
	struct bt_cursor c = {};
	int at = first_at_least(rnd_key(), 0), ret, i;

	ret = bt_lower_bound(bt, at < nr ? model[at].key : 0, &c);
	for (i = 0; i < 40 && at < nr; i++) {
		if (at_model(&c, ret, at, "walk"))
			return -1;
		if (i & 1) {
			CHECK(bt_remove(bt, c.key) == 0, "remove under the cursor");
			model_erase(at);
		} else {
			at++;
		}
		ret = bt_next(&c);
	}
	return 0;
}

/* Walk back from a random key, removing every third pair and inserting behind it. */
static int walk_back_and_change(struct btree *bt)
{
	struct bt_cursor c = {};
	int at = first_at_least(rnd_key(), 1) - 1, ret, i;
	u64 k;

	ret = at >= 0 ? bt_upper_bound(bt, model[at].key - (model[at].key ? 1 : 0), &c) :
			-ENOENT;
	if (at < 0)
		return 0;
	if (model[at].key && (at == 0 || model[at - 1].key != model[at].key - 1))
		CHECK(ret == 0 && c.key == model[at].key, "upper bound for the walk back");
	else
		return 0;
	for (i = 0; i < 30 && at >= 0; i++) {
		if (at_model(&c, ret, at, "walk back"))
			return -1;
		if (i % 3 == 1) {
			CHECK(bt_remove(bt, c.key) == 0, "remove under the cursor");
			model_erase(at);
		} else if (i % 3 == 2 && c.key < ~0ull - 1 && model_find(c.key + 1) < 0 &&
			   nr < MAX_LIVE - 1) {
			/* Just above the cursor: a step back must not see it. */
			k = c.key + 1;
			CHECK(bt_insert(bt, k, 7, false) == 0, "insert behind the cursor");
			model_insert(k, 7);
		}
		at--;
		ret = bt_prev(&c);
	}
	return 0;
}

static int fuzz(long ops)
{
	long base = host_live_blocks;
	struct btree *bt = bt_create();
	int ret, at, r, grow = 1;
	u64 k, v, gk, gv;

	CHECK(bt, "bt_create");
	nr = 0;
	for (long op = 0; op < ops; op++, total_ops++) {
		/* Phases: grow to near MAX_LIVE, shrink to empty, again. */
		if (grow && nr >= MAX_LIVE - 100) {
			grow = 0;
			phases++;
		} else if (!grow && !nr) {
			grow = 1;
			phases++;
		}
		if (nr > max_live)
			max_live = nr;
		if (bt->height > max_height)
			max_height = bt->height;
		r = rnd() % 100;
		k = rnd_key();
		v = rnd();
		if (r < (grow ? 50 : 15)) {
			bool update = rnd() & 1;

			at = model_find(k);
			ret = bt_insert(bt, k, v, update);
			if (at >= 0 && !update) {
				CHECK(ret == -EALREADY, "op %ld: duplicate insert: %d", op, ret);
			} else if (at >= 0) {
				CHECK(ret == 0, "op %ld: update gave %d", op, ret);
				model[at].value = v;
			} else {
				CHECK(ret == 0, "op %ld: insert %llu gave %d", op, k, ret);
				model_insert(k, v);
			}
		} else if (r < (grow ? 62 : 60)) {
			if (nr && (rnd() & 3))
				k = model[rnd() % nr].key;
			at = model_find(k);
			ret = bt_remove(bt, k);
			CHECK(ret == (at >= 0 ? 0 : -ENOENT), "op %ld: bt_remove %llu: %d", op, k,
			      ret);
			if (at >= 0)
				model_erase(at);
		} else if (r < 75) {
			if (nr && (rnd() & 1))
				k = model[rnd() % nr].key;
			at = model_find(k);
			gv = 0;
			ret = bt_find(bt, k, rnd() & 1 ? &gv : NULL);
			CHECK(ret == (at >= 0 ? 0 : -ENOENT), "op %ld: bt_find %llu: %d",
			      op, k, ret);
			CHECK(at < 0 || !gv || gv == model[at].value, "op %ld: bt_find value", op);
		} else if (r < 85) {
			if (check_bounds(bt, rnd() & 7 ? k : ~0ull - (rnd() & 1)))
				return -1;
		} else if (r < 92) {
			if (check_range(bt))
				return -1;
		} else if (r < 97) {
			bool last = rnd() & 1;

			ret = last ? bt_pop_last(bt, &gk, &gv) : bt_pop_first(bt, &gk, &gv);
			if (!nr) {
				CHECK(ret == -ENOENT, "pop on empty: %d", ret);
			} else {
				at = last ? nr - 1 : 0;
				CHECK(ret == 0 && gk == model[at].key && gv == model[at].value,
				      "op %ld: pop %d: %d %llu, expected %llu", op, last, ret, gk,
				      model[at].key);
				model_erase(at);
			}
		} else if (r < 98) {
			if (!grow && (rnd() & 1 ? walk_and_remove(bt) : walk_back_and_change(bt)))
				return -1;
		} else if (r < 99 && !(rnd() & 7)) {
			if (check_scan(bt))
				return -1;
		}
		CHECK(bt_count(bt) == nr, "op %ld: bt_count %lld, model %d", op, bt_count(bt), nr);
		/* Every node is a block of its own: none leaked, none counted twice. */
		CHECK(host_live_blocks - base == (long)bt->nr_nodes + 1,
		      "op %ld: %ld blocks out for %llu nodes", op, host_live_blocks - base,
		      bt->nr_nodes);
		if (op < 50000 || (op / 1000) % 8 == 0) {
			checks++;
			ret = bt_integrity_check(bt);
			CHECK(ret == 0, "op %ld (r %d): integrity check failed", op, r);
		}
	}
	if (check_scan(bt))
		return -1;
	CHECK(destroy(bt) == 0, "bt_destroy");
	CHECK(host_live_blocks == base, "%ld blocks leaked", host_live_blocks - base);
	return 0;
}

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS");

	if (fuzz(s ? atol(s) : DEFAULT_OPS))
		return -1;
	printf(
	       "    %ld random operations, %ld integrity checks, %ld phases, up to %ld keys and height %u\n",
	       total_ops, checks, phases, max_live, max_height);
	CHECK(phases >= 2, "the tree never grew full and shrank to empty");
	return 0;
}

/* Leaves' mean fill in percent. */
static int leaf_fill(struct btree *bt)
{
	struct bt_cursor c = {};
	long leaves = 0;

	bt_first(bt, &c);
	for (struct bt_node *l = c.leaf; l; l = l->next)
		leaves++;
	return leaves ? (int)(100 * bt->count / (leaves * BT_MAX_KEYS)) : 0;
}

/*
 * Ascending and descending keys: neighbours take a full leaf's pairs before it splits,
 * so the leaves end up nearly full, not half. Then removes in strides and pops from both
 * ends take the tree back down through every merge and borrow.
 */
static int test_sequential(void)
{
	long base = host_live_blocks;
	struct btree *bt = bt_create();
	u64 k, v, n = 20000;
	int fill;

	CHECK(bt, "");
	for (k = 0; k < n; k++)
		CHECK(bt_insert(bt, k, k * 3, false) == 0, "");
	CHECK(bt_integrity_check(bt) == 0, "");
	fill = leaf_fill(bt);
	printf("    ascending: %llu keys, %llu nodes, height %u, leaves %d%% full\n",
	       bt->count, bt->nr_nodes, bt->height, fill);
	CHECK(fill >= 90, "ascending keys fill leaves %d%%", fill);
	for (k = 3 * n; k >= 2 * n; k--)
		CHECK(bt_insert(bt, k, k * 3, false) == 0, "");
	CHECK(bt_integrity_check(bt) == 0, "");
	fill = leaf_fill(bt);
	CHECK(fill >= 80, "descending keys fill leaves %d%%", fill);
	for (k = 0; k < n; k += 2)
		CHECK(bt_remove(bt, k) == 0, "");
	CHECK(bt_integrity_check(bt) == 0, "");
	for (k = 1; k < n; k += 2) {
		CHECK(bt_pop_first(bt, &v, NULL) == 0 && v == k, "pop_first %llu", k);
		if (k % 1001 == 1)
			CHECK(bt_integrity_check(bt) == 0, "");
	}
	for (k = 3 * n; k >= 2 * n; k--)
		CHECK(bt_pop_last(bt, &v, NULL) == 0 && v == k, "pop_last %llu", k);
	CHECK(bt_pop_first(bt, &v, &v) == -ENOENT && bt_pop_last(bt, NULL, NULL) == -ENOENT,
	      "");
	CHECK(!bt->root && !bt->height && !bt->nr_nodes && bt_integrity_check(bt) == 0, "");
	CHECK(destroy(bt) == 0, "");
	CHECK(host_live_blocks == base, "");
	return 0;
}

/* Memory runs out at every point of split cascades: the tree never changes. */
static int test_no_memory(void)
{
	long base = host_live_blocks;
	struct btree *bt = bt_create();
	u64 k, nodes, count;
	int ret, fails = 0;

	CHECK(bt, "");
	for (k = 0; k < 4000; k++) {
		nodes = bt->nr_nodes;
		count = bt->count;
		host_malloc_fail_after = rnd() % 3;
		ret = bt_insert(bt, k * 7919 % 4001, k, false);
		host_malloc_fail_after = -1;
		if (ret) {
			CHECK(ret == -ENOMEM, "insert under memory pressure: %d", ret);
			CHECK(bt->nr_nodes == nodes && bt->count == count,
			      "a failed insert changed it");
			CHECK(host_live_blocks - base == (long)nodes + 1, "spares leaked");
			fails++;
			CHECK(bt_insert(bt, k * 7919 % 4001, k, false) == 0, "again with memory");
		}
	}
	CHECK(bt_integrity_check(bt) == 0 && bt->count == 4000, "");
	printf("    %d inserts failed for memory and changed nothing\n", fails);
	CHECK(fails > 10, "too few failures to show anything: %d", fails);
	host_malloc_fail_after = 0;
	CHECK(!bt_create(), "");
	host_malloc_fail_after = -1;
	CHECK(destroy(bt) == 0 && host_live_blocks == base, "");
	return 0;
}

/* Damage: every call ends with an error, nothing hangs or crashes. */
static int test_damaged(void)
{
	struct btree *bt = bt_create();
	struct bt_cursor c = {};
	struct bt_node *leaf, *saved;
	u32 height;
	u16 nr_saved;
	u64 v, k;

	CHECK(bt, "");
	for (k = 0; k < 5000; k++)
		CHECK(bt_insert(bt, k, k, false) == 0, "");
	CHECK(bt->height >= 2 && bt_integrity_check(bt) == 0, "");
	CHECK(bt_first(bt, &c) == 0, "");
	leaf = c.leaf;

	/* A child that points back at the root: a cycle. */
	saved = bt->root->children[0];
	bt->root->children[0] = bt->root;
	CHECK(bt_find(bt, 0, &v) == -EUCLEAN, "find through a cycle");
	CHECK(bt_insert(bt, 0, 0, true) == -EUCLEAN, "");
	CHECK(bt_remove(bt, 1) == -EUCLEAN, "");
	CHECK(bt_pop_first(bt, NULL, NULL) == -EUCLEAN, "");
	CHECK(bt_first(bt, &c) == -EUCLEAN, "");
	CHECK(bt_lower_bound(bt, 3, &c) == -EUCLEAN, "");
	CHECK(bt_range(bt, 0, 5, NULL, 10) == -EUCLEAN, "");
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "");
	CHECK(bt_print(bt) == -EUCLEAN, "");
	bt->root->children[0] = saved;
	CHECK(bt_integrity_check(bt) == 0, "repaired");

	/* A leaf chain that loops: scans stop. */
	saved = leaf->next->next;
	leaf->next->next = leaf;
	CHECK(bt_range(bt, 0, ~0ull, NULL, ~0u) == -EUCLEAN, "a looping chain");
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "");
	leaf->next->next = saved;

	/* One rule broken at a time. */
	nr_saved = leaf->nr;
	leaf->nr = BT_MAX_KEYS + 7;
	CHECK(bt_find(bt, 0, &v) == -EUCLEAN, "overfull");
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "");
	leaf->nr = BT_MIN_KEYS - 1;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "underfull");
	leaf->nr = nr_saved;
	CHECK(bt_integrity_check(bt) == 0, "");
	k = leaf->keys[0];
	leaf->keys[0] = leaf->keys[1];
	leaf->keys[1] = k;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "out of order");
	leaf->keys[1] = leaf->keys[0];
	leaf->keys[0] = k;
	leaf->keys[BT_MAX_KEYS] = 5;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "sentinel");
	leaf->keys[BT_MAX_KEYS] = BT_SENTINEL;
	k = leaf->next->keys[0];
	leaf->next->keys[0] = 0;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "below the separator");
	leaf->next->keys[0] = k;
	CHECK(bt_integrity_check(bt) == 0, "");
	k = leaf->keys[leaf->nr - 1];
	leaf->keys[leaf->nr - 1] = leaf->next->keys[0];
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "at the separator");
	leaf->keys[leaf->nr - 1] = k;
	saved = bt->root->children[1];
	bt->root->children[1] = NULL;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "a missing child");
	bt->root->children[1] = saved;
	for (saved = leaf; saved->next; saved = saved->next)
		;
	saved->next = leaf;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "the last leaf links on");
	saved->next = NULL;
	CHECK(bt_integrity_check(bt) == 0, "");
	leaf->level = 1;
	CHECK(bt_integrity_check(bt) == -EUCLEAN && bt_find(bt, 0, &v) == -EUCLEAN, "level");
	leaf->level = 0;
	leaf->next->prev = NULL;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "prev link");
	leaf->next->prev = leaf;
	bt->count++;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "count");
	bt->count--;
	bt->nr_nodes--;
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "nr_nodes");
	bt->nr_nodes++;
	height = bt->height;
	bt->height = BT_MAX_HEIGHT + 3;
	CHECK(bt_find(bt, 0, &v) == -EUCLEAN && bt_integrity_check(bt) == -EUCLEAN, "height");
	bt->height = height;
	CHECK(bt_integrity_check(bt) == 0, "");

	/* An empty leaf in the middle: every walk refuses it. */
	nr_saved = leaf->next->nr;
	leaf->next->nr = 0;
	CHECK(bt_range(bt, 0, ~0ull, NULL, ~0u) == -EUCLEAN, "an empty leaf in a scan");
	CHECK(bt_find(bt, leaf->next->keys[0], &v) == -EUCLEAN, "an empty leaf in a lookup");
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "");
	leaf->next->nr = nr_saved;
	CHECK(bt_integrity_check(bt) == 0, "");

	/* Destroy meets a cycle: it stops, it does not loop; after repair it finishes. */
	saved = bt->root->children[1];
	bt->root->children[1] = bt->root;
	CHECK(bt_destroy(bt) == -EUCLEAN, "destroy of a cycle");
	bt->root->children[1] = saved;
	CHECK(destroy(bt) == 0, "destroy after repair");

	/*
	 * A child linked twice: the check says so, and a remove that would merge it with
	 * itself stops. (bt_destroy marks what it frees, so it stops at the second sight
	 * too; here that read of a freed node would be ASan's to report.)
	 */
	bt = bt_create();
	CHECK(bt, "");
	for (k = 0; k < 5000; k++)
		CHECK(bt_insert(bt, k, k, false) == 0, "");
	CHECK(bt->height >= 3, "");
	saved = bt->root->children[1]->children[1];
	bt->root->children[1]->children[1] = bt->root->children[1]->children[0];
	CHECK(bt_integrity_check(bt) == -EUCLEAN, "a shared child");
	bt->root->children[1]->children[1] = saved;
	CHECK(bt_integrity_check(bt) == 0 && destroy(bt) == 0, "");
	return 0;
}

static int test_bad_calls(void)
{
	struct bt_cursor c = {};
	struct btree *bt;
	u64 v;

	CHECK(bt_insert(NULL, 1, 1, false) == -EINVAL, "");
	CHECK(bt_find(NULL, 1, &v) == -EINVAL && bt_remove(NULL, 1) == -EINVAL, "");
	CHECK(bt_destroy(NULL) == -EINVAL && bt_integrity_check(NULL) == -EINVAL, "");
	CHECK(bt_count(NULL) == -EINVAL && bt_print(NULL) == -EINVAL, "");
	CHECK(bt_first(NULL, &c) == -EINVAL && bt_next(&c) == -EINVAL, "");
	CHECK(bt_range(NULL, 0, 1, NULL, 1) == -EINVAL, "");
	bt = bt_create();
	CHECK(bt, "");
	CHECK(bt_find(bt, 1, &v) == -ENOENT && bt_remove(bt, 1) == -ENOENT, "");
	CHECK(bt_pop_first(bt, &v, &v) == -ENOENT && bt_first(bt, &c) == -ENOENT, "");
	CHECK(bt_last(bt, &c) == -ENOENT && bt_lower_bound(bt, 0, &c) == -ENOENT, "");
	CHECK(bt_range(bt, 0, ~0ull, NULL, ~0u) == 0 && bt_integrity_check(bt) == 0, "");
	CHECK(bt_insert(bt, 5, 50, false) == 0 && bt_insert(bt, 5, 51, false) == -EALREADY, "");
	CHECK(bt_find(bt, 5, &v) == 0 && v == 50, "the first value stayed");
	CHECK(bt_insert(bt, 5, 52, true) == 0 && bt_find(bt, 5, &v) == 0 && v == 52, "");
	CHECK(bt_range(bt, 6, 4, NULL, 10) == 0, "lo > hi");
	CHECK(bt_print(bt) == 0 && bt_destroy(bt) == 0, "");
	return 0;
}

#ifdef TEST_DESTROY_AGAIN
/* BT_DESTROY_MAX is small here: destroy returns -EAGAIN and picks up where it stopped. */
static int test_destroy_again(void)
{
	long base = host_live_blocks;
	struct btree *bt = bt_create();
	int calls = 0, ret;

	CHECK(bt, "");
	for (u64 k = 0; k < 10000; k++)
		CHECK(bt_insert(bt, k * 31, k, false) == 0, "");
	while ((ret = bt_destroy(bt)) == -EAGAIN && calls < 10000)
		calls++;
	CHECK(ret == 0 && calls >= 5, "destroy: %d after %d calls", ret, calls);
	CHECK(host_live_blocks == base, "");
	return 0;
}
#endif

int main(void)
{
	const char *seed = getenv("HOST_FUZZ_SEED");

	/* The fuzzer makes bad calls on purpose: keep their log lines out of the way. */
	host_begin(true);
	rng = seed ? strtoull(seed, NULL, 0) : 0x9e3779b97f4a7c15ull;
	host_run("host", SUITE "_fuzz", test_fuzz);
	host_run("host", SUITE "_sequential", test_sequential);
	host_run("host", SUITE "_no_memory", test_no_memory);
	host_run("host", SUITE "_damaged", test_damaged);
	host_run("host", SUITE "_bad_calls", test_bad_calls);
#ifdef TEST_DESTROY_AGAIN
	host_run("host", SUITE "_destroy_again", test_destroy_again);
#endif
	return host_summary();
}
