/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena red-black tree: an ordered map from u64 keys to u64 values in arena memory,
 * O(log n) insert, remove and lookup, with no recursion and every walk bounded.
 *
 * Two ways to own the nodes, chosen at rb_create():
 *
 *   RB_ALLOC     the tree allocates and frees its nodes (arena_malloc): rb_insert,
 *                rb_remove, rb_pop
 *   RB_NOALLOC   the caller embeds a struct rbnode in its own struct and links it:
 *                rb_insert_node, rb_remove_node; rb_entry() gets the container back
 *
 * and what an insert does with a key already present:
 *
 *   RB_DEFAULT   refuse it: -EALREADY
 *   RB_UPDATE    replace the value (RB_ALLOC trees only)
 *   RB_DUPLICATE keep both; equal keys stay in insertion order, so find, least, pop and
 *                remove act on the oldest of them (FIFO among equals)
 *
 * Calls (pointers are arena pointers; key and value out-parameters may be NULL):
 *
 *   rb_create(alloc, insert)       a new empty tree, or NULL and a log line (bad mode, or
 *                                  RB_NOALLOC with RB_UPDATE)
 *   rb_destroy(t)                  free the tree and, for RB_ALLOC, every node; -EBUSY
 *                                  for an RB_NOALLOC tree that still holds nodes
 *   rb_insert(t, key, value)       RB_ALLOC: add a pair; -EALREADY, -ENOMEM
 *   rb_remove(t, key)              RB_ALLOC: remove and free the (oldest) node of key;
 *                                  -ENOENT
 *   rb_pop(t, &key, &value)        RB_ALLOC: remove the least pair and return it; -ENOENT
 *   rb_insert_node(t, node)        RB_NOALLOC: link a caller's node (key and value set);
 *                                  -EALREADY
 *   rb_remove_node(t, node)        RB_NOALLOC: unlink it (nothing is freed); -EINVAL when
 *                                  the node is not in t
 *   rb_node_alloc(key, value)      a zeroed node from arena_malloc, for RB_NOALLOC trees
 *   rb_node_free(node)             give it back (it must not be in a tree)
 *   rb_find(t, key, &value)        the value of key; -ENOENT
 *   rb_least(t, &key, &value)      the least pair; -ENOENT on an empty tree
 *   rb_print(t)                    log the tree, a line per node in key order, depth and
 *                                  colour (the first RB_PRINT_MAX nodes, RB_MAXLVL_PRINT levels)
 *   rb_integrity_check(t)          0, or -EUCLEAN and a log line naming the broken rule
 *                                  and the node: order, links, colours, black heights,
 *                                  node count, depth
 *
 * What the upstream library lacks, both modes:
 *
 *   rb_first(t), rb_last(t)        the least / greatest node, NULL when empty
 *   rb_next(node), rb_prev(node)   in-order successor / predecessor, NULL at the end
 *   rb_find_node(t, key)           the (oldest) node of key, or NULL
 *   rb_lower_bound(t, key)         the first node with a key >= key, or NULL
 *   rb_upper_bound(t, key)         the first node with a key > key, or NULL
 *   rb_range(t, lo, hi, out, max)  copy the pairs with lo <= key <= hi, in key order,
 *                                  into the arena array out[] (struct rb_pair), at most
 *                                  max; returns how many. out NULL: count them only
 *
 * Errors: a NULL or destroyed tree, a call of the other mode, a bad mode: -EINVAL. Every
 * error is a negative errno with one arena_stderr line; nothing is changed by a failed
 * call. A walk that meets a broken tree (a cycle, a depth past RB_MAX_DEPTH, more steps
 * than the node count allows) stops with -EFAULT and a log line, whatever user space
 * wrote into the arena.
 *
 * Limits: no locking, callers serialise access to one tree. The depth of a valid tree
 * is at most 2 log2(n + 1), below RB_MAX_DEPTH for any tree that fits in an arena.
 * Whole-tree walks (destroy, integrity check, print) do up to 3 steps per node and a
 * BPF call has 8M loop steps: rb_destroy of a larger tree returns -EAGAIN after freeing
 * a part (call it again); rb_integrity_check returns -E2BIG past RB_CHECK_MAX nodes.
 * Global functions return scalars on 6.12, hence the _addr functions behind the calls
 * that return pointers.
 */
#ifndef __LIBARENA_RBTREE_H
#define __LIBARENA_RBTREE_H

#include <libarena/base.h>
#include <libarena/log.h>

/* The struct that holds member at ptr (arena pointers). */
#ifndef arena_container_of
#define arena_container_of(ptr, type, member)					\
	((type __arena *)((char __arena *)(ptr) - __builtin_offsetof(type, member)))
#endif
#define rb_entry(ptr, type, member) arena_container_of(ptr, type, member)

#define RB_MAX_DEPTH	64		/* deeper is corruption: 2^26 nodes reach 52 */
#define RB_CHECK_MAX	(1u << 21)	/* nodes rb_integrity_check walks in one call */
#define RB_DESTROY_MAX	(1u << 21)	/* nodes rb_destroy frees in one call */
#define RB_PRINT_MAX	128		/* nodes rb_print walks */
#define RB_MAXLVL_PRINT	16		/* levels rb_print shows (the upstream name) */
#define RB_MAGIC	0x52427472u	/* "rtBR": a live tree */

enum rbtree_alloc {
	RB_ALLOC,
	RB_NOALLOC,
};

enum rbtree_insert_mode {
	RB_DEFAULT,
	RB_UPDATE,
	RB_DUPLICATE,
};

struct rbnode {
	struct rbnode __arena *parent;
	union {
		struct {
			struct rbnode __arena *left;
			struct rbnode __arena *right;
		};
		struct rbnode __arena *child[2];	/* [0] left, [1] right */
	};
	u64 key;
	u64 value;
	bool is_red;
};

/* What rb_range copies out. */
struct rb_pair {
	u64 key;
	u64 value;
};

struct rbtree {
	struct rbnode __arena *root;
	enum rbtree_alloc alloc;
	enum rbtree_insert_mode insert;
	u64 nr_nodes;		/* nodes in the tree */
	u32 magic;		/* RB_MAGIC from rb_create to rb_destroy */
	u32 pad;
};

u64 rb_create_addr(enum rbtree_alloc alloc, enum rbtree_insert_mode insert);
int rb_destroy(struct rbtree __arena *t __arg_arena);

int rb_insert(struct rbtree __arena *t __arg_arena, u64 key, u64 value);
int rb_remove(struct rbtree __arena *t __arg_arena, u64 key);
int rb_pop(struct rbtree __arena *t __arg_arena, u64 *key,
	   u64 *value);

int rb_insert_node(struct rbtree __arena *t __arg_arena, struct rbnode __arena *node __arg_arena);
int rb_remove_node(struct rbtree __arena *t __arg_arena, struct rbnode __arena *node __arg_arena);
u64 rb_node_alloc_addr(u64 key, u64 value);
int rb_node_free(struct rbnode __arena *node __arg_arena);

int rb_find(struct rbtree __arena *t __arg_arena, u64 key, u64 *value);
int rb_least(struct rbtree __arena *t __arg_arena, u64 *key,
	     u64 *value);
int rb_print(struct rbtree __arena *t __arg_arena);
int rb_integrity_check(struct rbtree __arena *t __arg_arena);

u64 rb_first_addr(struct rbtree __arena *t __arg_arena);
u64 rb_last_addr(struct rbtree __arena *t __arg_arena);
u64 rb_next_addr(struct rbnode __arena *node __arg_arena);
u64 rb_prev_addr(struct rbnode __arena *node __arg_arena);
u64 rb_find_node_addr(struct rbtree __arena *t __arg_arena, u64 key);
u64 rb_lower_bound_addr(struct rbtree __arena *t __arg_arena, u64 key);
u64 rb_upper_bound_addr(struct rbtree __arena *t __arg_arena, u64 key);
int rb_range(struct rbtree __arena *t __arg_arena, u64 lo, u64 hi,
	     struct rb_pair __arena *out __arg_arena, u32 max);

static __always_inline struct rbtree __arena *rb_create(enum rbtree_alloc alloc,
							 enum rbtree_insert_mode insert)
{
	return (struct rbtree __arena *)rb_create_addr(alloc, insert);
}

static __always_inline struct rbnode __arena *rb_node_alloc(u64 key, u64 value)
{
	return (struct rbnode __arena *)rb_node_alloc_addr(key, value);
}

static __always_inline struct rbnode __arena *rb_first(struct rbtree __arena *t)
{
	return (struct rbnode __arena *)rb_first_addr(t);
}

static __always_inline struct rbnode __arena *rb_last(struct rbtree __arena *t)
{
	return (struct rbnode __arena *)rb_last_addr(t);
}

static __always_inline struct rbnode __arena *rb_next(struct rbnode __arena *node)
{
	return (struct rbnode __arena *)rb_next_addr(node);
}

static __always_inline struct rbnode __arena *rb_prev(struct rbnode __arena *node)
{
	return (struct rbnode __arena *)rb_prev_addr(node);
}

static __always_inline struct rbnode __arena *rb_find_node(struct rbtree __arena *t, u64 key)
{
	return (struct rbnode __arena *)rb_find_node_addr(t, key);
}

static __always_inline struct rbnode __arena *rb_lower_bound(struct rbtree __arena *t, u64 key)
{
	return (struct rbnode __arena *)rb_lower_bound_addr(t, key);
}

static __always_inline struct rbnode __arena *rb_upper_bound(struct rbtree __arena *t, u64 key)
{
	return (struct rbnode __arena *)rb_upper_bound_addr(t, key);
}

#endif /* __LIBARENA_RBTREE_H */
