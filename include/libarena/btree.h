/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena B-tree: an ordered map from unique u64 keys to u64 values in arena memory,
 * for large key sets. A B+ tree: keys and values sit in leaves of up to BT_MAX_KEYS
 * pairs, linked left to right for scans; inner nodes hold only separators. A lookup
 * touches one node per level (three levels hold 100,000 keys, four 5 million) and a
 * scan walks arrays, where a red-black tree spends a 48-byte node and a pointer chase
 * on every key.
 *
 * Calls (pointers are arena pointers; out-parameters may be NULL):
 *
 *   bt_create()                    a new empty tree, or NULL and a log line
 *   bt_destroy(bt)                 free every node and the tree; -EAGAIN after freeing
 *                                  BT_DESTROY_MAX nodes of a larger tree (call again)
 *   bt_insert(bt, key, value, update)
 *                                  add a pair; a key present already gives -EALREADY,
 *                                  or has its value replaced when update is true;
 *                                  -ENOMEM (the tree is unchanged)
 *   bt_remove(bt, key)             remove the pair of key; -ENOENT
 *   bt_find(bt, key, &value)       the value of key; -ENOENT
 *   bt_print(bt)                   log the tree: its figures and a line per node
 *                                  (level, fill, first and last key), BT_PRINT_MAX nodes
 *   bt_count(bt)                   the number of keys (or -EINVAL)
 *   bt_pop_first(bt, &key, &value) remove the least pair and return it; -ENOENT when
 *   bt_pop_last(bt, &key, &value)  empty (pop_last: the greatest)
 *   bt_range(bt, lo, hi, out, max) copy the pairs with lo <= key <= hi in key order
 *                                  into the arena array out[] (struct bt_pair), at most
 *                                  max; returns how many. out NULL: count them only
 *   bt_integrity_check(bt)         0, or -EUCLEAN and a log line naming the broken rule
 *                                  and the node: key order, separator bounds, fill,
 *                                  sentinels, levels, leaf links, key and node counts
 *
 * Cursors walk the keys in order. A cursor lives wherever the caller likes (the BPF
 * stack will do: the calls that start a walk fill it in, and a privileged loader's
 * verifier passes uninitialised stack) and holds the pair it stands on in c->key and
 * c->value:
 *
 *   bt_first(bt, &c), bt_last(bt, &c)         the least / greatest pair
 *   bt_lower_bound(bt, key, &c)               the first pair with a key >= key
 *   bt_upper_bound(bt, key, &c)               the first pair with a key > key
 *   bt_next(&c), bt_prev(&c)                  the neighbour in key order
 *
 * each 0, or -ENOENT when there is no such pair (the cursor is then spent). A cursor
 * survives changes to the tree: a step after an insert or remove finds its place again
 * by c->key, so a walk may remove the pair it stands on and go on.
 *
 * Errors: a NULL or destroyed tree: -EINVAL. Every error is a negative errno with one
 * arena_stderr line, and a failed call changes nothing. A tree that user space scribbled
 * over stops a call with -EUCLEAN and a log line: walks check each node's level and
 * fill and are bounded by the height and the node count, so they always end (a change
 * that meets the damage halfway may leave part of itself done, or nodes leaked).
 *
 * Limits: no locking, callers serialise access to one tree (the tree keeps the path of
 * the running call in its own struct). Works from any program type arena_malloc() serves,
 * sleepable or not. Nodes are BT_NODE_SIZE bytes from arena_malloc(); the height stays
 * below BT_MAX_HEIGHT for any tree that fits in an arena. Global functions return scalars
 * on 6.12, hence bt_create_addr() behind bt_create().
 */
#ifndef __LIBARENA_BTREE_H
#define __LIBARENA_BTREE_H

#include <libarena/base.h>
#include <libarena/log.h>

/*
 * A node searches its keys in BT_SEARCH_STEPS unrolled halvings over BT_SLOTS slots; the
 * slots past the node's keys hold BT_SENTINEL, so the search needs no bound. Nodes are
 * then 16 << BT_SEARCH_STEPS bytes: 6 (1 KiB, 62 keys) was the fastest of 4..8 in
 * make bench (README: "B-tree").
 */
#ifndef BT_SEARCH_STEPS
#define BT_SEARCH_STEPS	6
#endif
#define BT_SLOTS	((1u << BT_SEARCH_STEPS) - 1)	/* keys[]: keys, then sentinels */
#define BT_MAX_KEYS	(BT_SLOTS - 1)		/* keys in a node: the last slot stays a sentinel */
#define BT_MIN_KEYS	(BT_MAX_KEYS / 2)	/* in every node but the root */
#define BT_SENTINEL	(~0ull)
#define BT_MAX_HEIGHT	10		/* 2 * 32^8 * 31 keys: more than an arena holds */
#ifndef BT_DESTROY_MAX
#define BT_DESTROY_MAX	(1u << 20)	/* nodes bt_destroy frees in one call */
#endif
#define BT_PRINT_MAX	64		/* nodes bt_print shows */
#define BT_MAGIC	0x42547265u	/* "erTB": a live tree */

/*
 * Call depth: every bt_* call keeps to ARENA_CALL_FRAMES and ARENA_CALL_STACK (base.h),
 * the allocator's frames included.
 */

/*
 * A node. Leaves (level 0) pair keys[i] with values[i] and link their neighbours; inner
 * nodes have children[0..nr], and children[i + 1] holds the keys from keys[i] up to
 * keys[i + 1] (exclusive). So in both kinds keys[i] goes with the u64 slot after it,
 * which lets one move loop serve both.
 */
struct bt_node {
	u16 nr;			/* keys in use */
	u16 level;		/* 0: a leaf; the root is at height - 1 */
	u32 pad;
	u64 keys[BT_SLOTS];	/* ascending; BT_SENTINEL from keys[nr] on */
	union {
		struct {
			u64 values[BT_MAX_KEYS];
			struct bt_node __arena *next;	/* leaf on the right, or NULL */
			struct bt_node __arena *prev;	/* leaf on the left, or NULL */
		};
		struct bt_node __arena *children[BT_MAX_KEYS + 1];
	};
};

#define BT_NODE_SIZE	sizeof(struct bt_node)

/* One level of the path of the running call: a node and the slot it took there. */
struct bt_step {
	struct bt_node __arena *node;
	u32 idx;
	u32 pad;
	u64 lo, hi;		/* bt_integrity_check: the keys allowed below (hi exclusive) */
};

struct btree {
	struct bt_node __arena *root;
	u64 count;		/* keys */
	u64 nr_nodes;
	u64 gen;		/* bumped by every insert and remove: cursors find their way back */
	u32 height;		/* levels: 0 when empty */
	u32 magic;		/* BT_MAGIC from bt_create to bt_destroy */
	u32 depth;		/* bt_destroy: where a call that returned -EAGAIN stopped */
	u32 pad;		/* bt_destroy: path[depth] not visited yet */
	struct bt_step path[BT_MAX_HEIGHT];	/* indexed by level */
	struct bt_node __arena *spare[BT_MAX_HEIGHT + 1];	/* nodes taken before a split */
};

/* What bt_range copies out. */
struct bt_pair {
	u64 key;
	u64 value;
};

struct bt_cursor {
	struct btree __arena *bt;
	struct bt_node __arena *leaf;	/* NULL: spent */
	u64 gen;		/* bt->gen when leaf and idx were right */
	u64 key;
	u64 value;
	u32 idx;
	u32 pad;
};

u64 bt_create_addr(void);
int bt_destroy(struct btree __arena *bt __arg_arena);
int bt_insert(struct btree __arena *bt __arg_arena, u64 key, u64 value, bool update);
int bt_remove(struct btree __arena *bt __arg_arena, u64 key);
int bt_find(struct btree __arena *bt __arg_arena, u64 key, u64 *value);
int bt_print(struct btree __arena *bt __arg_arena);
s64 bt_count(struct btree __arena *bt __arg_arena);
int bt_pop_first(struct btree __arena *bt __arg_arena, u64 *key, u64 *value);
int bt_pop_last(struct btree __arena *bt __arg_arena, u64 *key, u64 *value);
int bt_range(struct btree __arena *bt __arg_arena, u64 lo, u64 hi,
	     struct bt_pair __arena *out __arg_arena, u32 max);
int bt_integrity_check(struct btree __arena *bt __arg_arena);

int bt_first(struct btree __arena *bt __arg_arena, struct bt_cursor *c);
int bt_last(struct btree __arena *bt __arg_arena, struct bt_cursor *c);
int bt_lower_bound(struct btree __arena *bt __arg_arena, u64 key, struct bt_cursor *c);
int bt_upper_bound(struct btree __arena *bt __arg_arena, u64 key, struct bt_cursor *c);
int bt_cursor_step(struct bt_cursor *c, int dir);

/*
 * bt_next and bt_prev: a step within the cursor's leaf runs inline in the caller (a scan
 * then costs a few loads per pair); crossing to another leaf, a changed tree and every
 * error go to bt_cursor_step().
 */
static __always_inline int bt_next(struct bt_cursor *c)
{
	struct bt_node __arena *leaf = c->leaf;
	struct btree __arena *bt = c->bt;
	u32 idx = c->idx + 1;

	if (leaf && bt && bt->magic == BT_MAGIC && bt->gen == c->gen && idx < leaf->nr) {
		c->idx = idx;
		c->key = leaf->keys[idx];
		c->value = leaf->values[idx];
		return 0;
	}
	return bt_cursor_step(c, 1);
}

static __always_inline int bt_prev(struct bt_cursor *c)
{
	struct bt_node __arena *leaf = c->leaf;
	struct btree __arena *bt = c->bt;
	u32 idx = c->idx;

	if (leaf && bt && bt->magic == BT_MAGIC && bt->gen == c->gen && idx &&
	    idx <= leaf->nr) {
		c->idx = --idx;
		c->key = leaf->keys[idx];
		c->value = leaf->values[idx];
		return 0;
	}
	return bt_cursor_step(c, 0);
}

static __always_inline struct btree __arena *bt_create(void)
{
	return (struct btree __arena *)bt_create_addr();
}

#endif /* __LIBARENA_BTREE_H */
