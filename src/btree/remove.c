// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * btree.bpf.c, part 3 of 5: remove with borrowing and merging, find, count and the pops.
 */
#include "internal.h"

/*
 * Node n at level l (path[l]) holds one key too few; its parent is path[l + 1]. Borrow a
 * pair from the neighbour (1: done), or merge the two into the left one (0: the parent
 * lost a key and may be short now; the emptied right node goes to bt->spare[l] for the
 * caller to free). left and right are adjacent children of parent, sep the index of the
 * key between them.
 */
__weak int __bt_fix_short(struct btree __arena *bt __arg_arena, u32 l)
{
	btnode_t *n = bt->path[l].node, *parent = bt->path[l + 1].node, *left, *right;
	u32 j = bt->path[l + 1].idx, sep, ln, rn;
	u64 __arena *ls, *rs;

	if (l + 1 >= BT_MAX_HEIGHT || !parent->nr)
		return -EUCLEAN;
	if (j) {
		left = parent->children[j - 1];
		right = n;
		sep = j - 1;
	} else {
		left = n;
		right = parent->children[1];
		sep = 0;
	}
	if (!node_ok(left, l) || !node_ok(right, l) || left == right)
		return -EUCLEAN;
	ln = left->nr;
	rn = right->nr;
	ls = slots(left);
	rs = slots(right);
	if (n == left && rn > BT_MIN_KEYS) {
		/* The right neighbour's first pair comes over (through the parent if inner). */
		if (l) {
			left->keys[ln] = parent->keys[sep];
			ls[ln] = (u64)right->children[0];
			parent->keys[sep] = right->keys[0];
			right->children[0] = (btnode_t *)rs[0];
		} else {
			left->keys[ln] = right->keys[0];
			ls[ln] = rs[0];
			parent->keys[sep] = right->keys[1];
		}
		left->nr = ln + 1;
		return __bt_shift(right, 1, -1) ?: 1;
	}
	if (n == right && ln > BT_MIN_KEYS) {
		/* The left neighbour's last pair comes over. */
		if (__bt_shift(right, 0, 1))
			return -EUCLEAN;
		if (l) {
			right->keys[0] = parent->keys[sep];
			rs[0] = (u64)right->children[0];
			right->children[0] = (btnode_t *)ls[ln - 1];
			parent->keys[sep] = left->keys[ln - 1];
		} else {
			right->keys[0] = left->keys[ln - 1];
			rs[0] = ls[ln - 1];
			parent->keys[sep] = left->keys[ln - 1];
		}
		return __bt_shift(left, ln, -1) ?: 1;
	}
	/* Merge right into left; the parent loses the key between them and right. */
	if (l) {
		if (ln + 1 + rn > BT_MAX_KEYS)
			return -EUCLEAN;
		left->keys[ln] = parent->keys[sep];
		ls[ln] = (u64)right->children[0];
		ln++;
	} else {
		left->next = right->next;
		if (right->next)
			right->next->prev = left;
	}
	if (__bt_copy(left, ln, right, 0, rn))
		return -EUCLEAN;
	left->nr = ln + rn;
	if (__bt_shift(parent, sep + 1, -1))
		return -EUCLEAN;
	bt->spare[l] = right;
	bt->nr_nodes--;
	return 0;
}

/*
 * Remove the pair at path[0] and rebalance on the way up, a call per level from here
 * (the moves then take one frame below it). Returns how many nodes it took out of the
 * tree, parked in bt->spare[] for the caller to free, or -EUCLEAN.
 */
static __always_inline int erase_path(btree_t *bt)
{
	btnode_t *n = bt->path[0].node;
	u32 l, height = bt->height;
	int ret;

	if (__bt_shift(n, bt->path[0].idx + 1, -1))
		return -EUCLEAN;
	bt->count--;
	bt->gen++;
	for (l = zero; l < height && l < BT_MAX_HEIGHT && can_loop; l++) {
		n = bt->path[l].node;
		if (l == height - 1) {
			/* The root: an empty leaf goes, an inner root with one child gives way. */
			if (n->nr)
				return l;
			bt->root = l ? n->children[0] : NULL;
			bt->height = l;
			bt->nr_nodes--;
			bt->spare[l] = n;
			return l + 1;
		}
		if (n->nr >= BT_MIN_KEYS)
			return l;
		ret = __bt_fix_short(bt, l);
		if (ret)
			return ret < 0 ? ret : l;
	}
	return -EUCLEAN;
}

/* Erase path[0] and free what left the tree. */
static __always_inline int erase(btree_t *bt)
{
	int nr = erase_path(bt);

	if (nr < 0)
		return nr;
	free_spares(bt, nr);
	return 0;
}

/*
 * Find key in bt for fn: 0 with its leaf in *leafp and its value in *value (if value),
 * -EINVAL when bt is not a live tree, -ENOENT when key is not in it, -EUCLEAN when it is
 * damaged (each logged but -ENOENT). way is BT_LOOKUP, or BT_PATH to record the path to
 * the leaf (bt->path[0].idx: key's index) for a change.
 */
static __always_inline int find_key(const char *fn, btree_t *bt, u64 key, enum bt_way way,
				    u64 *value, btnode_t **leafp)
{
	btnode_t *leaf, *bad = NULL;
	u32 pos;

	if (!tree_ok(fn, bt))
		return -EINVAL;
	if (!bt->root)
		return -ENOENT;
	leaf = descend(bt, key, way, &bad);
	if (!leaf)
		return DAMAGED(fn, bt, bad);
	pos = way == BT_PATH ? bt->path[0].idx : search(leaf, key, false);
	if (pos >= leaf->nr || leaf->keys[pos] != key)
		return -ENOENT;
	if (value)
		*value = leaf->values[pos];
	*leafp = leaf;
	return 0;
}

__weak int bt_remove(struct btree __arena *bt __arg_arena, u64 key)
{
	btnode_t *leaf;
	int err = find_key(__func__, bt, key, BT_PATH, NULL, &leaf);

	if (err)
		return err;
	if (erase(bt))
		return DAMAGED(__func__, bt, leaf);
	return 0;
}

__weak int bt_find(struct btree __arena *bt __arg_arena, u64 key, u64 *value)
{
	btnode_t *leaf;

	return find_key(__func__, bt, key, BT_LOOKUP, value, &leaf);
}

__weak s64 bt_count(struct btree __arena *bt __arg_arena)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	return bt->count;
}

static __always_inline int pop(btree_t *bt, int dir, u64 *key, u64 *value, const char *fn)
{
	btnode_t *leaf, *bad = NULL;
	u32 pos;

	if (!bt->root)
		return -ENOENT;
	leaf = descend(bt, 0, dir ? BT_LAST : BT_FIRST, &bad);
	if (!leaf)
		return DAMAGED(fn, bt, bad);
	pos = bt->path[0].idx;
	if (key)
		*key = leaf->keys[pos];
	if (value)
		*value = leaf->values[pos];
	if (erase(bt))
		return DAMAGED(fn, bt, leaf);
	return 0;
}

__weak int bt_pop_first(struct btree __arena *bt __arg_arena, u64 *key, u64 *value)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	return pop(bt, 0, key, value, "bt_pop_first");
}

__weak int bt_pop_last(struct btree __arena *bt __arg_arena, u64 *key, u64 *value)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	return pop(bt, 1, key, value, "bt_pop_last");
}
