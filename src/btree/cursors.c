// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * btree.bpf.c, part 4 of 5: ranges, cursors, bounds and steps.
 */
#include "internal.h"

/* What __bt_range_leaf() adds to its count when the range ends in its leaf. */
#define BT_RANGE_END	(1 << 16)

/*
 * bt_range's work in one leaf, a call of its own so that the loop over the leaves keeps
 * no state the verifier must follow round after round: the pairs from pos on up to hi,
 * room of them at most, copied into out[] (NULL: counted only). How many, plus
 * BT_RANGE_END when the range ends here (a key past hi, or no room left); -EUCLEAN for
 * a leaf that does not hold together.
 */
__weak int __bt_range_leaf(struct bt_node __arena *leaf __arg_arena, u32 pos, u64 hi,
			   struct bt_pair __arena *out __arg_arena, u32 room)
{
	u32 nr = leaf->nr, cnt, end = 0, j;
	u64 __arena *k, *v;

	if (nr > BT_MAX_KEYS || pos > nr)
		return -EUCLEAN;
	cnt = nr - pos;
	if (cnt >= room) {
		cnt = room;
		end = BT_RANGE_END;
	}
	if (cnt && leaf->keys[pos + cnt - 1] > hi) {
		/* The range ends in here. */
		nr = search(leaf, hi, true);
		cnt = nr > pos ? nr - pos : 0;
		end = BT_RANGE_END;
	}
	if (out) {
		k = &leaf->keys[pos];
		v = &leaf->values[pos];
		for (j = zero; j < cnt && can_loop; j++) {
			out[j].key = k[j];
			out[j].value = v[j];
		}
	}
	return cnt | end;
}

/*
 * A leaf at a time (__bt_range_leaf): what of it lies in range is found by its last key
 * (all of it) or one search (the end of the range), then copied in one loop.
 */
__weak int bt_range(struct btree __arena *bt __arg_arena, u64 lo, u64 hi,
		    struct bt_pair __arena *out __arg_arena, u32 max)
{
	btnode_t *leaf, *bad = NULL;
	u32 i = zero, pos;
	u64 last;
	int r;

	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!bt->root || lo > hi || !max)
		return 0;
	leaf = descend(bt, lo, BT_LOOKUP, &bad);
	if (!leaf)
		return DAMAGED("bt_range", bt, bad);
	pos = search(leaf, lo, false);
	while (i < max && can_loop) {
		r = __bt_range_leaf(leaf, pos, hi, out ? &out[i] : NULL, max - i);
		if (r < 0)
			return DAMAGED("bt_range", bt, leaf);
		i += r & (BT_RANGE_END - 1);
		if (r & BT_RANGE_END)
			break;
		last = leaf->keys[leaf->nr - 1];
		leaf = leaf->next;
		if (!leaf)
			break;
		/* Keys ascend along the chain, so a cycle ends at a smaller key. */
		if (!leaf_ok(leaf) || leaf->keys[0] <= last)
			return DAMAGED("bt_range", bt, leaf);
		pos = 0;
	}
	return i;
}

/* Cursors: keep the position, or say there is none. */
static __always_inline int stand(struct bt_cursor *c, btree_t *bt, btnode_t *leaf, u32 idx)
{
	c->bt = bt;
	c->gen = bt->gen;
	if (!leaf) {
		c->leaf = NULL;
		return -ENOENT;
	}
	c->leaf = leaf;
	c->idx = idx;
	c->key = leaf->keys[idx];
	c->value = leaf->values[idx];
	return 0;
}

/* From pos in leaf, the pair there, or the first of the next leaf. */
static __always_inline int stand_at(struct bt_cursor *c, btree_t *bt, btnode_t *leaf,
				    u32 pos, const char *fn)
{
	if (pos >= leaf->nr) {
		leaf = leaf->next;
		pos = 0;
		if (leaf && !leaf_ok(leaf))
			return DAMAGED(fn, bt, leaf);
	}
	return stand(c, bt, leaf, pos);
}

/* The pair before pos in leaf, or the last of the leaf before. */
static __always_inline int stand_before(struct bt_cursor *c, btree_t *bt, btnode_t *leaf,
					u32 pos, const char *fn)
{
	if (!pos) {
		leaf = leaf->prev;
		if (leaf && !leaf_ok(leaf))
			return DAMAGED(fn, bt, leaf);
		pos = leaf ? leaf->nr : 0;
	}
	return stand(c, bt, leaf, pos - 1);
}

/* Stand at the first (dir 0) or last key, for fn. */
static __always_inline int edge(btree_t *bt, int dir, struct bt_cursor *c, const char *fn)
{
	btnode_t *leaf, *bad = NULL;

	if (!tree_ok(fn, bt) || !cursor_ok(fn, c))
		return -EINVAL;
	if (!bt->root)
		return stand(c, bt, NULL, 0);
	leaf = descend(bt, 0, dir ? BT_LAST : BT_FIRST, &bad);
	if (!leaf)
		return DAMAGED(fn, bt, bad);
	return stand(c, bt, leaf, bt->path[0].idx);
}

__weak int bt_first(struct btree __arena *bt __arg_arena, struct bt_cursor *c)
{
	return edge(bt, 0, c, __func__);
}

__weak int bt_last(struct btree __arena *bt __arg_arena, struct bt_cursor *c)
{
	return edge(bt, 1, c, __func__);
}

static __always_inline int bound(btree_t *bt, u64 key, bool strict, struct bt_cursor *c,
				 const char *fn)
{
	btnode_t *leaf, *bad = NULL;

	if (!tree_ok(fn, bt) || !cursor_ok(fn, c))
		return -EINVAL;
	if (!bt->root)
		return stand(c, bt, NULL, 0);
	leaf = descend(bt, key, BT_LOOKUP, &bad);
	if (!leaf)
		return DAMAGED(fn, bt, bad);
	return stand_at(c, bt, leaf, search(leaf, key, strict), fn);
}

__weak int bt_lower_bound(struct btree __arena *bt __arg_arena, u64 key, struct bt_cursor *c)
{
	return bound(bt, key, false, c, __func__);
}

__weak int bt_upper_bound(struct btree __arena *bt __arg_arena, u64 key, struct bt_cursor *c)
{
	return bound(bt, key, true, c, __func__);
}

/*
 * A step from the cursor's pair (bt_next and bt_prev in the header take the steps that
 * stay in the leaf themselves). If the tree changed since the cursor stood there, the
 * pair may have moved or gone: find the place again from its key.
 */
__weak int bt_cursor_step(struct bt_cursor *c, int dir)
{
	const char *fn = dir ? "bt_next" : "bt_prev";
	btnode_t *leaf, *bad = NULL;
	btree_t *bt;
	u32 idx;

	if (!cursor_ok(fn, c))
		return -EINVAL;
	bt = c->bt;
	leaf = c->leaf;
	idx = c->idx;
	if (!tree_ok(fn, bt))
		return -EINVAL;
	if (!leaf)
		return -ENOENT;
	if (c->gen != bt->gen) {
		if (!bt->root)
			return stand(c, bt, NULL, 0);
		leaf = descend(bt, c->key, BT_LOOKUP, &bad);
		if (!leaf)
			return DAMAGED(fn, bt, bad);
		/* next: the first key above c->key; prev: the last one below it. */
		idx = search(leaf, c->key, dir);
		return dir ? stand_at(c, bt, leaf, idx, fn) : stand_before(c, bt, leaf, idx, fn);
	}
	if (!leaf_ok(leaf) || idx >= leaf->nr)
		return DAMAGED(fn, bt, leaf);
	return dir ? stand_at(c, bt, leaf, idx + 1, fn) : stand_before(c, bt, leaf, idx, fn);
}
