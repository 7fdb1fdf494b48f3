/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal to btree.bpf.c: what its parts (the files in src/btree/, each using only the
 * parts before it) share.
 */
#ifndef __LIBARENA_BTREE_INTERNAL_H
#define __LIBARENA_BTREE_INTERNAL_H

#include <libarena/btree.h>
#include <libarena/heap.h>
#include <libarena/asan.h>

/* The sanitizer build checks whole nodes (btree.bpf.c says why). */
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

/* Log that bt is damaged at node n, for fn: -EUCLEAN. */
#define DAMAGED(fn, bt, n)							\
	({									\
		arena_stderr("%s: tree %llx is damaged at node %llx (level, fill or links)", \
			     fn, (u64)(bt), (u64)(n));				\
		-EUCLEAN;							\
	})

/* Where a descent goes (a constant: each caller's copy keeps only its own case). */
enum bt_way {
	BT_LOOKUP,	/* to key's leaf */
	BT_PATH,	/* the same, recording the path */
	BT_FIRST,	/* to the first leaf, recording the path */
	BT_LAST,	/* to the last leaf, recording the path */
};

/* search.c */
static __always_inline bool tree_ok(const char *fn, btree_t *bt);
static __always_inline bool cursor_ok(const char *fn, struct bt_cursor *c);
static __always_inline u64 __arena *slots(btnode_t *n);
static __always_inline u32 search(btnode_t *n, u64 key, bool le);
static __always_inline bool node_ok(btnode_t *n, u32 l);
static __always_inline bool leaf_ok(btnode_t *n);
static __always_inline btnode_t *descend(btree_t *bt, u64 key, enum bt_way way,
					 btnode_t **bad);

/* insert.c */
static __always_inline void free_spares(btree_t *bt, u32 nr);

#endif /* __LIBARENA_BTREE_INTERNAL_H */
