// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * btree.bpf.c, part 1 of 5: checks of a tree and a node, the search in a node, and the descent
 * from the root.
 */
#include "internal.h"

/* bt is a live tree; if not, fn logs it (the caller fails with -EINVAL). */
static __always_inline bool tree_ok(const char *fn, btree_t *bt)
{
	arena_subprog_init();
	if (bt)
		BT_ASAN_CHECK(bt, sizeof(struct btree));
	return arena_live(fn, bt, BT_MAGIC, "tree");
}

/* The caller passed a cursor; if not, fn logs it and fails with -EINVAL. */
static __always_inline bool cursor_ok(const char *fn, struct bt_cursor *c)
{
	return arena_given(fn, c, "cursor");
}

/* The slot that follows keys[0]: values[0] in a leaf, children[1] in an inner node. */
static __always_inline u64 __arena *slots(btnode_t *n)
{
	return n->level ? (u64 __arena *)&n->children[1] : n->values;
}

/*
 * How many of n's keys are below key (le: at most key). Sentinels are never below a
 * key; with le they can equal BT_SENTINEL, hence the clamp.
 */
static __always_inline u32 search(btnode_t *n, u64 key, bool le)
{
	u64 __arena *k = n->keys;
	/*
	 * Opaque from the start: clang 19 builds i by or-ing constants in, a known value on
	 * each of the 2^BT_SEARCH_STEPS paths, which a later test the verifier can decide
	 * (i > nr) makes precise, and then no path prunes another.
	 */
	u32 i = zero;

#define HALVE(w)								\
	do {									\
		if (le ? k[i + (w) - 1] <= key : k[i + (w) - 1] < key)		\
			i += (w);						\
	} while (0)
#if BT_SEARCH_STEPS >= 8
	HALVE(128);
#endif
#if BT_SEARCH_STEPS >= 7
	HALVE(64);
#endif
#if BT_SEARCH_STEPS >= 6
	HALVE(32);
#endif
#if BT_SEARCH_STEPS >= 5
	HALVE(16);
#endif
	HALVE(8);
	HALVE(4);
	HALVE(2);
	HALVE(1);
#undef HALVE
	if (le && i > n->nr)
		i = n->nr;
	return i;
}

/* A node a walk may enter at level l: present, at that level, not overfull. */
static __always_inline bool node_ok(btnode_t *n, u32 l)
{
	CHECK_NODE(n);
	return n && n->level == l && n->nr <= BT_MAX_KEYS;
}

/* A leaf a walk may use: one with keys (a tree's nodes never are empty). */
static __always_inline bool leaf_ok(btnode_t *n)
{
	return node_ok(n, 0) && n->nr;
}

/*
 * The leaf where key belongs (or the first or last one), or NULL (*bad: the node at
 * fault) for a damaged tree. Recording, bt->path[l] holds each node and the child it
 * took, and path[0] the leaf and the number of its keys below key (its first or last
 * key's index). The tree is not empty.
 */
static __always_inline btnode_t *descend(btree_t *bt, u64 key, enum bt_way way,
					 btnode_t **bad)
{
	bool record = way != BT_LOOKUP;
	btnode_t *n = bt->root;
	u32 l = bt->height, i;

	if (l > BT_MAX_HEIGHT || !l) {
		*bad = n;
		return NULL;
	}
	for (; l > 1 && can_loop; l--) {
		if (!node_ok(n, l - 1)) {
			*bad = n;
			return NULL;
		}
		i = way == BT_FIRST ? 0 : way == BT_LAST ? n->nr : search(n, key, true);
		if (record) {
			bt->path[l - 1].node = n;
			bt->path[l - 1].idx = i;
		}
		n = n->children[i];
	}
	if (l != 1 || !leaf_ok(n)) {
		*bad = n;
		return NULL;
	}
	if (record) {
		bt->path[0].node = n;
		bt->path[0].idx = way == BT_FIRST ? 0 : way == BT_LAST ? n->nr - 1 :
				  search(n, key, false);
	}
	return n;
}
