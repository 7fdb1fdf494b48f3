// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The B-tree. include/libarena/btree.h states the API and its limits.
 *
 * The rules every call leaves true (bt_integrity_check checks each):
 *   1. a node's keys ascend strictly, and the slots from keys[nr] on hold BT_SENTINEL;
 *   2. below an inner node, children[i] holds only keys k with keys[i - 1] <= k < keys[i]
 *      (no bound where i - 1 or i is past the ends);
 *   3. every leaf is at level 0 and a node's children are one level below it, so every
 *      leaf is height - 1 steps below the root;
 *   4. every node but the root holds BT_MIN_KEYS to BT_MAX_KEYS keys, the root at least
 *      one (an inner root: at least two children); an empty tree has no root;
 *   5. the leaves' next and prev links chain them in key order, NULL at both ends;
 *   6. count and nr_nodes are exact.
 *
 * The search in a node is a fixed run of halvings over BT_SLOTS keys (rule 1 keeps the
 * slots past nr out of it), so it has no loop and no bound checks. Writes shift, copy and
 * trim pairs: keys[i] together with the u64 slot that follows it, values[i] in a leaf and
 * children[i + 1] in an inner node, so the same few moves serve both kinds.
 *
 * A full leaf first passes pairs to a neighbour with room (so sequential keys fill
 * leaves nearly full, not half), and only splits when both neighbours are full. Every
 * node a split cascade needs is allocated before anything moves: -ENOMEM changes nothing.
 * A remove that leaves a node below BT_MIN_KEYS borrows from a neighbour, or merges with
 * it and goes on at the parent; a root left with one child gives way to it.
 *
 * BPF has no recursion: calls keep their path from the root in bt->path (callers
 * serialise, so one path per tree is enough), and whole-tree walks run a depth-first
 * state machine over it. Every loop is bounded by the height, BT_SLOTS or the node count.
 */
#include <libarena/btree.h>
#include <libarena/heap.h>
#include <libarena/asan.h>

/*
 * The sanitizer build checks the tree node by node instead of access by access: its
 * checks on every key and slot multiply the verifier's work past its budget. Every node
 * a call touches is checked whole (BT_ASAN_CHECK) when the call reaches it: from the
 * root, along the leaf links, or as a neighbour through its parent; and the tree when a
 * call starts. A node in use is one arena_malloc block of BT_NODE_SIZE bytes, so a use
 * after free or a pointer into something else is caught just the same.
 */
ARENA_NOASAN_BEGIN
#define BT_ASAN_CHECK(p, size)	asan_check_range((u64)(p), size, 0)
#define CHECK_NODE(n)								\
	do {									\
		if (n)								\
			BT_ASAN_CHECK(n, BT_NODE_SIZE);				\
	} while (0)

typedef struct bt_node __arena btnode_t;
typedef struct btree __arena btree_t;

_Static_assert(BT_SEARCH_STEPS >= 4 && BT_SEARCH_STEPS <= 8, "4 to 8 halvings");
_Static_assert(sizeof(struct bt_node) == (16u << BT_SEARCH_STEPS), "a node is a size class");
_Static_assert(2 * BT_MIN_KEYS <= BT_MAX_KEYS, "two nodes one short of the minimum merge");

#define HALF		(BT_MAX_KEYS / 2)
#define BT_DYING	0x42547964u	/* a bt_destroy returned -EAGAIN */
#define BT_FREED_LEVEL	0xffff		/* written into a node bt_destroy frees */

/* bt is a live tree; if not, fn logs it and fails with -EINVAL. */
static __always_inline bool tree_ok(const char *fn, btree_t *bt)
{
	arena_subprog_init();
	if (bt)
		BT_ASAN_CHECK(bt, sizeof(struct btree));
	if (!bt || bt->magic != BT_MAGIC) {
		arena_stderr("%s: %llx is not a live tree", fn, (u64)bt);
		return false;
	}
	return true;
}

/* The caller passed a cursor; if not, fn logs it and fails with -EINVAL. */
static __always_inline bool cursor_ok(const char *fn, struct bt_cursor *c)
{
	if (!c) {
		arena_stderr("%s: no cursor", fn);
		return false;
	}
	return true;
}

#define DAMAGED(fn, bt, n)							\
	({									\
		arena_stderr("%s: tree %llx is damaged at node %llx (level, fill or links)", \
			     fn, (u64)(bt), (u64)(n));				\
		-EUCLEAN;							\
	})

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

/* Where a descent goes (a constant: each caller's copy keeps only its own case). */
enum bt_way {
	BT_LOOKUP,	/* to key's leaf */
	BT_PATH,	/* the same, recording the path */
	BT_FIRST,	/* to the first leaf, recording the path */
	BT_LAST,	/* to the last leaf, recording the path */
};

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
	/* Four pairs a round: the loop's own work is most of a pair's cost. */
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

__weak int bt_remove(struct btree __arena *bt __arg_arena, u64 key)
{
	btnode_t *leaf, *bad = NULL;
	u32 pos;

	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!bt->root)
		return -ENOENT;
	leaf = descend(bt, key, BT_PATH, &bad);
	if (!leaf)
		return DAMAGED("bt_remove", bt, bad);
	pos = bt->path[0].idx;
	if (pos >= leaf->nr || leaf->keys[pos] != key)
		return -ENOENT;
	if (erase(bt))
		return DAMAGED("bt_remove", bt, leaf);
	return 0;
}

__weak int bt_find(struct btree __arena *bt __arg_arena, u64 key, u64 *value)
{
	btnode_t *leaf, *bad = NULL;
	u32 pos;

	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!bt->root)
		return -ENOENT;
	leaf = descend(bt, key, BT_LOOKUP, &bad);
	if (!leaf)
		return DAMAGED("bt_find", bt, bad);
	pos = search(leaf, key, false);
	if (pos >= leaf->nr || leaf->keys[pos] != key)
		return -ENOENT;
	if (value)
		*value = leaf->values[pos];
	return 0;
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

static __always_inline int edge(btree_t *bt, int dir, struct bt_cursor *c, const char *fn)
{
	btnode_t *leaf, *bad = NULL;

	if (!bt->root)
		return stand(c, bt, NULL, 0);
	leaf = descend(bt, 0, dir ? BT_LAST : BT_FIRST, &bad);
	if (!leaf)
		return DAMAGED(fn, bt, bad);
	return stand(c, bt, leaf, bt->path[0].idx);
}

__weak int bt_first(struct btree __arena *bt __arg_arena, struct bt_cursor *c)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!cursor_ok(__func__, c))
		return -EINVAL;
	return edge(bt, 0, c, "bt_first");
}

__weak int bt_last(struct btree __arena *bt __arg_arena, struct bt_cursor *c)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!cursor_ok(__func__, c))
		return -EINVAL;
	return edge(bt, 1, c, "bt_last");
}

static __always_inline int bound(btree_t *bt, u64 key, bool strict, struct bt_cursor *c,
				 const char *fn)
{
	btnode_t *leaf, *bad = NULL;

	if (!bt->root)
		return stand(c, bt, NULL, 0);
	leaf = descend(bt, key, BT_LOOKUP, &bad);
	if (!leaf)
		return DAMAGED(fn, bt, bad);
	return stand_at(c, bt, leaf, search(leaf, key, strict), fn);
}

__weak int bt_lower_bound(struct btree __arena *bt __arg_arena, u64 key, struct bt_cursor *c)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!cursor_ok(__func__, c))
		return -EINVAL;
	return bound(bt, key, false, c, "bt_lower_bound");
}

__weak int bt_upper_bound(struct btree __arena *bt __arg_arena, u64 key, struct bt_cursor *c)
{
	if (!tree_ok(__func__, bt))
		return -EINVAL;
	if (!cursor_ok(__func__, c))
		return -EINVAL;
	return bound(bt, key, true, c, "bt_upper_bound");
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

ARENA_NOASAN_END
