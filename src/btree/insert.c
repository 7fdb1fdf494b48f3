// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * btree.bpf.c, part 2 of 5: node moves (shift, copy), new nodes and trees, and the
 * insert with its lending and splitting.
 */
#include "internal.h"

/*
 * Move the pairs [from, nr) of n by delta (> 0 opens a gap of delta pairs at from, < 0
 * drops the delta pairs before from) and set nr. The pairs of a gap are the caller's to
 * fill; dropped slots at the end become sentinels. shift(n, n->nr, -k) trims k pairs.
 */
__weak int __bt_shift(struct bt_node __arena *n __arg_arena, u32 from, int delta)
{
	u64 __arena *k = n->keys, *s = slots(n), *dk, *ds;
	u32 nr = n->nr, i, cnt;

	if (from > nr || (int)nr + delta > (int)BT_MAX_KEYS || (int)from + delta < 0)
		return -EUCLEAN;
	/*
	 * Four pairs a round: the loop's own work is most of a pair's cost. The two
	 * directions mirror each other and stay written out: a gap copies from the end, a
	 * drop from the front, each in the order that never overwrites what it still reads.
	 */
	cnt = nr - from;
	if (delta > 0) {
		k += nr;
		s += nr;
		dk = k + delta;
		ds = s + delta;
		for (i = cnt / 4; i && can_loop; i--) {
			k -= 4, s -= 4, dk -= 4, ds -= 4;
			dk[3] = k[3];
			ds[3] = s[3];
			dk[2] = k[2];
			ds[2] = s[2];
			dk[1] = k[1];
			ds[1] = s[1];
			dk[0] = k[0];
			ds[0] = s[0];
		}
		for (i = cnt % 4; i && can_loop; i--) {
			k--, s--, dk--, ds--;
			dk[0] = k[0];
			ds[0] = s[0];
		}
	} else if (delta < 0) {
		k += from;
		s += from;
		dk = k + delta;
		ds = s + delta;
		for (i = cnt / 4; i && can_loop; i--) {
			dk[0] = k[0];
			ds[0] = s[0];
			dk[1] = k[1];
			ds[1] = s[1];
			dk[2] = k[2];
			ds[2] = s[2];
			dk[3] = k[3];
			ds[3] = s[3];
			k += 4, s += 4, dk += 4, ds += 4;
		}
		for (i = cnt % 4; i && can_loop; i--) {
			dk[0] = k[0];
			ds[0] = s[0];
			k++, s++, dk++, ds++;
		}
		for (i = nr + delta; i < nr && can_loop; i++)
			n->keys[i] = BT_SENTINEL;
	}
	n->nr = nr + delta;
	return 0;
}

/* Copy cnt pairs from src[spos] to dst[dpos]; neither nr changes. */
__weak int __bt_copy(struct bt_node __arena *dst __arg_arena, u32 dpos,
		     struct bt_node __arena *src __arg_arena, u32 spos, u32 cnt)
{
	u64 __arena *dk = dst->keys, *ds = slots(dst), *sk = src->keys, *ss = slots(src);
	u32 i;

	if (dpos + cnt > BT_MAX_KEYS || spos + cnt > BT_MAX_KEYS)
		return -EUCLEAN;
	for (i = zero; i < cnt && can_loop; i++) {
		dk[dpos + i] = sk[spos + i];
		ds[dpos + i] = ss[spos + i];
	}
	return 0;
}

/* Open a gap at pos and put a pair there. */
static __always_inline int put(btnode_t *n, u32 pos, u64 key, u64 slot)
{
	if (__bt_shift(n, pos, 1))
		return -EUCLEAN;
	n->keys[pos] = key;
	slots(n)[pos] = slot;
	return 0;
}

/* A node fresh from arena_malloc, made empty: every slot a sentinel. */
__weak int __bt_node_init(struct bt_node __arena *n __arg_arena, u32 level)
{
	u32 i;

	n->nr = 0;
	n->level = level;
	n->pad = 0;
	for (i = zero; i < BT_SLOTS && can_loop; i++)
		n->keys[i] = BT_SENTINEL;
	n->next = NULL;
	n->prev = NULL;
	return 0;
}

/*
 * An empty node. Allocation and freeing stay in the public calls' own frames (inlined
 * here), so the B-tree adds one frame to the allocator's depth.
 */
static __always_inline btnode_t *node_new(u32 level)
{
	btnode_t *n = arena_malloc(BT_NODE_SIZE);

	if (n)
		__bt_node_init(n, level);
	return n;
}

/* Give back nodes the tree parked in bt->spare[]: unused spares, or merged-away nodes. */
static __always_inline void free_spares(btree_t *bt, u32 nr)
{
	u32 i;

	for (i = zero; i < nr && i <= BT_MAX_HEIGHT && can_loop; i++)
		arena_free_call(bt->spare[i]);
}

__weak u64 bt_create_addr(void)
{
	btree_t *bt = arena_malloc_call(sizeof(*bt));

	if (!bt) {
		arena_stderr("bt_create: out of memory");
		return 0;
	}
	bt->root = NULL;
	bt->count = 0;
	bt->nr_nodes = 0;
	bt->gen = 0;
	bt->height = 0;
	bt->depth = 0;
	bt->pad = 0;
	bt->magic = BT_MAGIC;
	return (u64)bt;
}

/*
 * The full leaf path[0] has a neighbour under the same parent with room: the leaf's pairs
 * with the new one among them are 63, and half the neighbour's room of them, from the
 * near end, go over. 1 when done, 0 when both neighbours are full (or there are none).
 */
__weak int __bt_lend(struct btree __arena *bt __arg_arena, u64 key, u64 value)
{
	btnode_t *leaf = bt->path[0].node, *parent, *sib;
	u32 pos = bt->path[0].idx, j, m, sn, keep;

	if (bt->height < 2)
		return 0;
	parent = bt->path[1].node;
	j = bt->path[1].idx;
	sib = j ? parent->children[j - 1] : NULL;
	if (sib && node_ok(sib, 0) && sib->nr < BT_MAX_KEYS) {
		/* The first m go to the end of the left neighbour. */
		sn = sib->nr;
		m = (BT_MAX_KEYS - sn + 1) / 2;
		if (pos < m) {
			/* The new pair is one of them. */
			if (__bt_copy(sib, sn, leaf, 0, m - 1) ||
			    __bt_shift(leaf, m - 1, -(int)(m - 1)))
				return -EUCLEAN;
			sib->nr = sn + m - 1;
			if (put(sib, sn + pos, key, value))
				return -EUCLEAN;
		} else {
			if (__bt_copy(sib, sn, leaf, 0, m) || __bt_shift(leaf, m, -(int)m))
				return -EUCLEAN;
			sib->nr = sn + m;
			if (put(leaf, pos - m, key, value))
				return -EUCLEAN;
		}
		parent->keys[j - 1] = leaf->keys[0];
		return 1;
	}
	sib = j < parent->nr ? parent->children[j + 1] : NULL;
	if (sib && node_ok(sib, 0) && sib->nr < BT_MAX_KEYS) {
		/* The last m go to the front of the right neighbour. */
		m = (BT_MAX_KEYS - sib->nr + 1) / 2;
		keep = BT_MAX_KEYS + 1 - m;
		if (pos >= keep) {
			/* The new pair is one of them. */
			if (__bt_shift(sib, 0, m - 1) || __bt_copy(sib, 0, leaf, keep, m - 1) ||
			    __bt_shift(leaf, BT_MAX_KEYS, -(int)(m - 1)) ||
			    put(sib, pos - keep, key, value))
				return -EUCLEAN;
		} else {
			if (__bt_shift(sib, 0, m) || __bt_copy(sib, 0, leaf, keep - 1, m) ||
			    __bt_shift(leaf, BT_MAX_KEYS, -(int)m) || put(leaf, pos, key, value))
				return -EUCLEAN;
		}
		parent->keys[j] = sib->keys[0];
		return 1;
	}
	return 0;
}

/*
 * Split the full inner node n (path[l]) into n and right (empty, level l), with the pair
 * (*sep, child) still to go in at key index j. Both halves end with BT_MIN_KEYS or more
 * keys; the key that separates them comes back in *sep for the parent.
 */
__weak int __bt_split_inner(struct bt_node __arena *n __arg_arena,
			    struct bt_node __arena *right __arg_arena, u32 j, u64 *sep,
			    struct bt_node __arena *child __arg_arena)
{
	u32 m = j < HALF ? HALF - 1 : HALF;
	u64 mid;

	if (!sep || n->nr != BT_MAX_KEYS || j > BT_MAX_KEYS)
		return -EUCLEAN;
	mid = j == HALF ? *sep : n->keys[m];
	if (j == HALF) {
		/* The new key itself goes up; its child starts right. */
		right->children[0] = child;
		if (__bt_copy(right, 0, n, HALF, BT_MAX_KEYS - HALF))
			return -EUCLEAN;
		right->nr = BT_MAX_KEYS - HALF;
		return __bt_shift(n, BT_MAX_KEYS, -(int)(BT_MAX_KEYS - HALF));
	}
	/* keys[m] goes up, children[m + 1] starts right, the pairs after m follow it. */
	right->children[0] = n->children[m + 1];
	if (__bt_copy(right, 0, n, m + 1, BT_MAX_KEYS - m - 1))
		return -EUCLEAN;
	right->nr = BT_MAX_KEYS - m - 1;
	if (__bt_shift(n, BT_MAX_KEYS, -(int)(BT_MAX_KEYS - m)))
		return -EUCLEAN;
	if (j < HALF ? put(n, j, *sep, (u64)child) : put(right, j - m - 1, *sep, (u64)child))
		return -EUCLEAN;
	*sep = mid;
	return 0;
}

/*
 * Split the full leaf path[0] into it and bt->spare[0], with (key, value) among them;
 * the key that separates the halves comes back in *sep for the parent.
 */
__weak int __bt_split_leaf(struct btree __arena *bt __arg_arena, u64 key, u64 value,
			   u64 *sep)
{
	btnode_t *leaf = bt->path[0].node, *right = bt->spare[0];
	u32 pos = bt->path[0].idx, s;

	if (!sep)
		return -EUCLEAN;
	/* The upper half moves right, the new pair joins its side. */
	s = pos <= HALF ? HALF : HALF + 1;
	if (__bt_copy(right, 0, leaf, s, BT_MAX_KEYS - s))
		return -EUCLEAN;
	right->nr = BT_MAX_KEYS - s;
	if (__bt_shift(leaf, BT_MAX_KEYS, -(int)(BT_MAX_KEYS - s)))
		return -EUCLEAN;
	right->next = leaf->next;
	right->prev = leaf;
	if (leaf->next)
		leaf->next->prev = right;
	leaf->next = right;
	if (pos <= HALF ? put(leaf, pos, key, value) : put(right, pos - s, key, value))
		return -EUCLEAN;
	*sep = right->keys[0];
	return 0;
}

/*
 * Put (key, value) in the full leaf path[0] by splitting it and the need - 1 full nodes
 * above it (a new root when need > height), with the empty nodes in bt->spare[0..need).
 * Each level is a call from here, so that the moves take one frame below them.
 */
static __always_inline int split(btree_t *bt, u64 key, u64 value, u32 need)
{
	btnode_t *n, *root;
	u32 l, height = bt->height;
	u64 sep;

	if (!need || need > height + 1 || need > BT_MAX_HEIGHT)
		return -EUCLEAN;
	if (__bt_split_leaf(bt, key, value, &sep))
		return -EUCLEAN;
	/* Up: each full node splits and passes its middle key on. */
	for (l = zero + 1; l < need && l < height && l < BT_MAX_HEIGHT && can_loop; l++) {
		n = bt->path[l].node;
		if (__bt_split_inner(n, bt->spare[l], bt->path[l].idx, &sep, bt->spare[l - 1]))
			return -EUCLEAN;
	}
	if (need > height) {
		if (height >= BT_MAX_HEIGHT || !height)
			return -EUCLEAN;
		root = bt->spare[height];
		root->children[0] = bt->root;
		root->keys[0] = sep;
		root->children[1] = bt->spare[height - 1];
		root->nr = 1;
		bt->root = root;
		bt->height = height + 1;
	} else {
		n = bt->path[need].node;
		if (put(n, bt->path[need].idx, sep, (u64)bt->spare[need - 1]))
			return -EUCLEAN;
	}
	bt->nr_nodes += need;
	return 0;
}

/*
 * The leaf path[0] is full: lend to a neighbour, or split. Every node the split needs
 * is allocated before anything moves, so running out of memory changes nothing.
 */
static __always_inline int insert_full(btree_t *bt, u64 key, u64 value)
{
	u32 need, l;
	btnode_t *n;
	int ret;

	ret = __bt_lend(bt, key, value);
	if (ret)
		return ret < 0 ? ret : 0;
	/* Levels 0 .. need - 1 split; a split root needs a new root above it. */
	for (need = zero; need < bt->height && need < BT_MAX_HEIGHT && can_loop; need++)
		if (bt->path[need].node->nr < BT_MAX_KEYS)
			break;
	if (need == bt->height)
		need++;
	if (need > BT_MAX_HEIGHT) {
		arena_stderr("bt_insert: tree %llx would grow past BT_MAX_HEIGHT", (u64)bt);
		return -E2BIG;
	}
	for (l = zero; l < need && l <= BT_MAX_HEIGHT && can_loop; l++) {
		n = node_new(l);
		if (!n) {
			free_spares(bt, l);
			arena_stderr("bt_insert: out of memory for key %llu", key);
			return -ENOMEM;
		}
		bt->spare[l] = n;
	}
	return split(bt, key, value, need);
}

__weak int bt_insert(struct btree __arena *bt __arg_arena, u64 key, u64 value, bool update)
{
	btnode_t *leaf, *bad = NULL;
	u32 pos;
	int ret;

	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!bt->root) {
		leaf = node_new(0);
		if (!leaf) {
			arena_stderr("%s: out of memory for key %llu", __func__, key);
			return -ENOMEM;
		}
		leaf->keys[0] = key;
		leaf->values[0] = value;
		leaf->nr = 1;
		bt->root = leaf;
		bt->height = 1;
		bt->nr_nodes = 1;
		bt->count = 1;
		bt->gen++;
		return 0;
	}
	leaf = descend(bt, key, BT_PATH, &bad);
	if (!leaf)
		return DAMAGED("bt_insert", bt, bad);
	pos = bt->path[0].idx;
	if (pos < leaf->nr && leaf->keys[pos] == key) {
		if (!update)
			return -EALREADY;
		leaf->values[pos] = value;
		return 0;
	}
	if (leaf->nr < BT_MAX_KEYS)
		ret = put(leaf, pos, key, value);
	else
		ret = insert_full(bt, key, value);
	if (ret == -EUCLEAN)
		return DAMAGED("bt_insert", bt, leaf);
	if (ret)
		return ret;
	bt->count++;
	bt->gen++;
	return 0;
}
