// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * btree.bpf.c, part 5 of 5: depth-first walks: destroy, the integrity check and print.
 */
#include "internal.h"

/*
 * Depth-first walks (check, print, destroy) over bt->path. From path[*l], go down to
 * the next child not yet visited (1: its first visit) or report that the node is done
 * (0: the caller goes back up). lo and hi carry the key bounds down (BT_HAS_LO/HI).
 */
#define BT_HAS_LO	1u
#define BT_HAS_HI	2u

/*
 * A call of its own, verified once: the walks' loops then carry only what it returns,
 * which the verifier does not know, and their states at the loop head match at once.
 * The level below l it went down to (path[l - 1] set up), or -1 when path[l] is done.
 */
__weak int __bt_dfs_down(struct btree __arena *bt __arg_arena, u32 l)
{
	btnode_t *n;
	u32 i;

	if (!l || l >= BT_MAX_HEIGHT)
		return -1;
	n = bt->path[l].node;
	i = bt->path[l].idx;
	if (i > n->nr || n->nr > BT_MAX_KEYS)
		return -1;
	bt->path[l].idx = i + 1;
	bt->path[l - 1].node = n->children[i];
	bt->path[l - 1].idx = 0;
	bt->path[l - 1].pad = (i ? BT_HAS_LO : bt->path[l].pad & BT_HAS_LO) |
			      (i < n->nr ? BT_HAS_HI : bt->path[l].pad & BT_HAS_HI);
	bt->path[l - 1].lo = i ? n->keys[i - 1] : bt->path[l].lo;
	bt->path[l - 1].hi = i < n->nr ? n->keys[i] : bt->path[l].hi;
	return l - 1;
}

/* Down from path[*lp] if it has a child left: 1 (*lp one lower), or 0 (done). */
static __always_inline int dfs_down(btree_t *bt, u32 *lp)
{
	int l = __bt_dfs_down(bt, *lp);

	if (l < 0)
		return 0;
	*lp = l;
	return 1;
}

/*
 * One level up. The level comes back opaque: a level the verifier knows (0 after
 * dfs_down's "!l") would count up by one per pass, precise, and no state would prune.
 */
static __always_inline u32 up(u32 *lp)
{
	u32 l = *lp + 1;

	if (l > BT_MAX_HEIGHT)
		l = BT_MAX_HEIGHT;
	*lp = l | zero;
	return *lp;
}

static __always_inline void dfs_start(btree_t *bt)
{
	u32 top = bt->height - 1;

	if (top >= BT_MAX_HEIGHT)
		return;
	bt->path[top].node = bt->root;
	bt->path[top].idx = 0;
	bt->path[top].pad = 0;
	bt->path[top].lo = 0;
	bt->path[top].hi = 0;
}

__weak int bt_destroy(struct btree __arena *bt __arg_arena)
{
	u32 l, freed = zero, height;
	btnode_t *n;
	bool first;

	arena_subprog_init();
	if (!bt || (bt->magic != BT_MAGIC && bt->magic != BT_DYING)) {
		arena_stderr("%s: %llx is not a live tree", __func__, (u64)bt);
		return -EINVAL;
	}
	height = bt->height;
	if (bt->root && (!height || height > BT_MAX_HEIGHT))
		return DAMAGED("bt_destroy", bt, bt->root);
	if (bt->root && bt->magic == BT_MAGIC) {
		dfs_start(bt);
		bt->depth = height - 1;
		bt->magic = BT_DYING;
		first = true;
	} else {
		/* Again after -EAGAIN: whether path[depth] still waits for its first visit. */
		first = bt->pad;
	}
	l = bt->depth;
	while (bt->root && can_loop) {
		if (first) {
			n = bt->path[l].node;
			if (!node_ok(n, l) || !bt->nr_nodes) {
				/* Leave the walk where a repaired tree can go on from. */
				if (l + 1 < height && l + 1 < BT_MAX_HEIGHT) {
					bt->depth = l + 1;
					bt->path[l + 1].idx--;
				} else {
					bt->magic = BT_MAGIC;
				}
				return DAMAGED("bt_destroy", bt, n);
			}
		}
		first = dfs_down(bt, &l);
		if (first)
			continue;
		/*
		 * Done below path[l]: free it and go up. A freed node reads as no level, so a
		 * child that user space linked twice stops the walk instead of a double free.
		 */
		n = bt->path[l].node;
		n->level = BT_FREED_LEVEL;
		arena_free_call(n);
		bt->nr_nodes--;
		if (up(&l) >= height) {
			bt->root = NULL;
			break;
		}
		if (++freed >= BT_DESTROY_MAX) {
			bt->depth = l;
			bt->pad = false;
			arena_stdout("%s: freed %u nodes, %llu left: call again", __func__, freed,
				     bt->nr_nodes);
			return -EAGAIN;
		}
	}
	if (bt->root) {
		/* The loop budget ran out first. */
		bt->depth = l;
		bt->pad = first;
		return -EAGAIN;
	}
	bt->magic = 0;
	arena_free_call(bt);
	return 0;
}

/* What bt_integrity_check says of one node; 0 when it keeps rules 1-4. */
enum bt_fault {
	BT_OK,
	BT_MISSING,
	BT_LEVEL,
	BT_OVERFULL,
	BT_UNDERFULL,
	BT_ORDER,
	BT_BELOW,
	BT_ABOVE,
	BT_SENTINELS,
};

__weak int __bt_check_node(struct btree __arena *bt __arg_arena, u32 l)
{
	btnode_t *n = bt->path[l].node;
	u32 flags = bt->path[l].pad, nr, i;
	u64 lo = bt->path[l].lo, hi = bt->path[l].hi, k, prev = 0;

	if (!n)
		return BT_MISSING;
	CHECK_NODE(n);
	if (n->level != l)
		return BT_LEVEL;
	nr = n->nr;
	if (nr > BT_MAX_KEYS)
		return BT_OVERFULL;
	if (!nr || (nr < BT_MIN_KEYS && l != bt->height - 1))
		return BT_UNDERFULL;
	/*
	 * Indexes start opaque: a test the verifier can decide from an index's range (i != 0,
	 * i < BT_SLOTS) marks it precise, and a precise counter never prunes.
	 */
	prev = n->keys[0];
	if (((flags & BT_HAS_LO) && prev < lo) || ((flags & BT_HAS_HI) && prev >= hi))
		return prev < lo ? BT_BELOW : BT_ABOVE;
	for (i = zero + 1; i < nr && can_loop; i++) {
		k = n->keys[i];
		if (k <= prev)
			return BT_ORDER;
		if ((flags & BT_HAS_HI) && k >= hi)
			return BT_ABOVE;
		prev = k;
	}
	for (i = zero; l && i <= nr && can_loop; i++)
		if (!n->children[i])
			return BT_MISSING;
	for (i = nr | zero; i < BT_SLOTS && can_loop; i++)
		if (n->keys[i] != BT_SENTINEL)
			return BT_SENTINELS;
	return BT_OK;
}

static __always_inline const char *fault_name(int f)
{
	switch (f) {
	case BT_MISSING:	return "a child is missing";
	case BT_LEVEL:		return "a node at the wrong level";
	case BT_OVERFULL:	return "more keys than BT_MAX_KEYS";
	case BT_UNDERFULL:	return "fewer keys than BT_MIN_KEYS (or an empty root)";
	case BT_ORDER:		return "keys out of order or equal";
	case BT_BELOW:		return "a key below its parent's separator";
	case BT_ABOVE:		return "a key at or above its parent's separator";
	default:		return "a sentinel slot holds a key";
	}
}

__weak int bt_integrity_check(struct btree __arena *bt __arg_arena)
{
	btnode_t *n = NULL, *prev_leaf = NULL;
	/* Counters start opaque: a known count is a new state on every pass. */
	u64 nodes = zero, keys = zero;
	const char *what = NULL;
	u32 l, height;
	int fault, down = 1;

	if (!tree_ok(__func__, bt))
		return -EINVAL;
	height = bt->height;
	if (!bt->root) {
		if (height || bt->count || bt->nr_nodes)
			what = "an empty tree with a height or counts";
		goto out;
	}
	if (!height || height > BT_MAX_HEIGHT) {
		what = "a height of 0 or past BT_MAX_HEIGHT";
		goto out;
	}
	dfs_start(bt);
	l = height - 1;
	while (can_loop) {
		n = bt->path[l].node;
		if (down) {
			if (++nodes > bt->nr_nodes) {
				what = "more nodes than nr_nodes, or a cycle";
				break;
			}
			fault = __bt_check_node(bt, l);
			if (fault) {
				what = fault_name(fault);
				break;
			}
			if (!l) {
				if (n->prev != prev_leaf) {
					what = "a leaf's prev link is wrong";
					break;
				}
				if (prev_leaf && prev_leaf->next != n) {
					what = "a leaf's next link is wrong";
					break;
				}
				prev_leaf = n;
				keys += n->nr;
			}
		}
		down = dfs_down(bt, &l);
		if (!down && up(&l) >= height) {
			n = NULL;
			break;
		}
	}
	if (!what && n)
		what = "the walk did not end (loop budget)";
	else if (!what && prev_leaf && prev_leaf->next)
		what = "the last leaf has a next link";
	else if (!what && keys != bt->count)
		what = "count is not the number of keys";
	else if (!what && nodes != bt->nr_nodes)
		what = "nr_nodes is not the number of nodes";
out:
	if (!what)
		return 0;
	arena_stderr("%s: tree %llx: %s, at node %llx", __func__, (u64)bt, what, (u64)n);
	return -EUCLEAN;
}

__weak int bt_print(struct btree __arena *bt __arg_arena)
{
	u32 l, height, shown = zero;
	btnode_t *n;
	int down = 1;

	if (!tree_ok(__func__, bt))
		return -EINVAL;
	height = bt->height;
	arena_stdout("btree %llx: %llu keys, %llu nodes of %u bytes, height %u", (u64)bt,
		     bt->count, bt->nr_nodes, (u32)BT_NODE_SIZE, height);
	if (!bt->root || !height || height > BT_MAX_HEIGHT)
		return 0;
	dfs_start(bt);
	l = height - 1;
	while (shown < BT_PRINT_MAX && can_loop) {
		if (down) {
			n = bt->path[l].node;
			if (!node_ok(n, l) || !n->nr)
				return DAMAGED("bt_print", bt, n);
			arena_stdout("  level %u node %llx: %u keys, %llu .. %llu", l, (u64)n,
				     n->nr, n->keys[0], n->keys[n->nr - 1]);
			shown++;
		}
		down = dfs_down(bt, &l);
		if (!down && up(&l) >= height)
			return 0;
	}
	arena_stdout("  ... %llu nodes not shown", bt->nr_nodes - shown);
	return 0;
}
