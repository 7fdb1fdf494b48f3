// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The red-black tree. include/libarena/rbtree.h states the API and its limits.
 *
 * The rules every call leaves true (rb_integrity_check checks each):
 *   1. keys ascend in order (strictly, unless RB_DUPLICATE: an equal key is linked to
 *      the right of its equals, so equals stay in insertion order);
 *   2. child->parent == node for every link, root->parent == NULL, nr_nodes is exact;
 *   3. the root is black and a red node has no red child;
 *   4. every path from the root down to a missing child meets the same number of blacks.
 * Hence depth <= 2 log2(n + 1). BPF has no recursion: walks follow parent pointers, and
 * every loop is capped by RB_MAX_DEPTH or the node count, so a tree scribbled over by
 * user space ends a call with -EFAULT, never an endless loop.
 *
 * Rotations and the two fix-ups are written once for both sides: child[dir] is the
 * side in question and child[1 - dir] the other.
 */
#include <libarena/rbtree.h>
#include <libarena/heap.h>
#include <libarena/asan.h>

typedef struct rbnode __arena rbnode_t;

/* t is a live tree; if not, fn logs it (the caller fails with -EINVAL). */
static __always_inline bool tree_ok(const char *fn, struct rbtree __arena *t)
{
	return arena_live(fn, t, RB_MAGIC, "tree");
}

/* t allocates its nodes as the call needs (mode); if not, fn logs it and fails with -EINVAL. */
static __always_inline bool mode_ok(const char *fn, struct rbtree __arena *t,
				    enum rbtree_alloc mode)
{
	if (t->alloc != mode) {
		arena_stderr("%s: tree %llx is not %s", fn, (u64)t,
			     mode == RB_ALLOC ? "RB_ALLOC" : "RB_NOALLOC");
		return false;
	}
	return true;
}

#define BROKEN(fn, t)								\
	({									\
		arena_stderr("%s: tree %llx is broken (a cycle or deeper than %d)", \
			     fn, (u64)(t), RB_MAX_DEPTH);				\
		-EFAULT;							\
	})

/* The tree is being taken apart by an rb_destroy that returned -EAGAIN. */
#define RB_DYING	0x52424479u

/*
 * The sanitizer build calls the rebalancing code instead of inlining it, and does not
 * check it access by access: its checks multiply the verifier's pending branches past
 * its limit (8192 jumps). It only touches nodes the checked walks reached, their
 * siblings and their children, and the node being linked (rb_insert_node checks it).
 */
#ifdef LIBARENA_ASAN
#define __rebalance __noinline
#else
#define __rebalance __always_inline
#endif

static __always_inline bool is_red(rbnode_t *n)
{
	return n && n->is_red;
}

/* Hang new (maybe NULL) where old hung below parent, or make it the root. */
static __always_inline void replace_child(struct rbtree __arena *t, rbnode_t *old,
					  rbnode_t *new, rbnode_t *parent)
{
	if (!parent)
		t->root = new;
	else if (parent->left == old)
		parent->left = new;
	else
		parent->right = new;
	if (new)
		new->parent = parent;
}

/*
 * Rotate x down towards dir; its child on the other side takes its place:
 *
 *        x                 y            (dir = 0, a left rotation)
 *       / \               / \
 *      a   y     ==>     x   c
 *         / \           / \
 *        b   c         a   b
 */
static __always_inline void rotate(struct rbtree __arena *t, rbnode_t *x, int dir)
{
	rbnode_t *y = x->child[1 - dir], *b = y->child[dir];

	x->child[1 - dir] = b;
	if (b)
		b->parent = x;
	replace_child(t, x, y, x->parent);
	y->child[dir] = x;
	x->parent = y;
}

/*
 * Where key belongs: below *parent on side *dir (an empty tree: parent NULL). Without
 * RB_DUPLICATE an equal key stops the walk and comes back in *found. Meeting node itself
 * on the way means it is linked already.
 */
static __always_inline int descend(struct rbtree __arena *t, u64 key, rbnode_t *node,
				   rbnode_t **parent, int *dir, rbnode_t **found)
{
	bool dup = t->insert == RB_DUPLICATE;
	rbnode_t *n = t->root;
	u32 depth;

	*parent = NULL;
	*dir = 0;
	*found = NULL;
	for (depth = zero; n && depth < RB_MAX_DEPTH && can_loop; depth++) {
		if (n == node)
			return -EEXIST;
		if (key == n->key && !dup) {
			*found = n;
			return 0;
		}
		*parent = n;
		*dir = key >= n->key;
		n = n->child[*dir];
	}
	return n ? -EFAULT : 0;
}

/*
 * Link a red node below parent and restore the rules. A red parent is the only
 * possible breach; with g the grandparent and u the uncle:
 *
 *   u red:   recolour p and u black, g red, and go on from g (two levels up);
 *   u black: n on the inner side is first rotated to the outer side; then rotate g
 *            towards u and swap the colours of p and g: done.
 *
 *          g(B)                    p(B)
 *         /    \                  /    \
 *       p(R)   u(B)     ==>     n(R)   g(R)
 *       /                                \
 *     n(R)                               u(B)
 */
static __rebalance __noasan int link_node(struct rbtree __arena *t, rbnode_t *node,
					  rbnode_t *parent, int dir)
{
	rbnode_t *n = node, *p, *g, *u;
	int pdir;
	u32 i;

	node->parent = parent;
	node->left = NULL;
	node->right = NULL;
	node->is_red = true;
	if (parent)
		parent->child[dir] = node;
	else
		t->root = node;
	t->nr_nodes++;

	for (i = zero; i < RB_MAX_DEPTH && can_loop; i++) {
		p = n->parent;
		if (!p || !p->is_red)
			break;
		g = p->parent;
		if (!g)
			break;		/* a red root: painted black below */
		pdir = g->right == p;
		u = g->child[1 - pdir];
		if (is_red(u)) {
			p->is_red = false;
			u->is_red = false;
			g->is_red = true;
			n = g;
			continue;
		}
		if (n == p->child[1 - pdir]) {
			rotate(t, p, pdir);
			n = p;
			p = n->parent;
		}
		rotate(t, g, 1 - pdir);
		p->is_red = false;
		g->is_red = true;
		break;
	}
	t->root->is_red = false;
	return 0;
}

/*
 * Restore the black heights after a black node left the side xdir of xp, where x (maybe
 * NULL) now hangs one black short. With w the sibling:
 *
 *   w red:                 rotate xp towards x, recolour: x gets a black sibling;
 *   w black, both its children black: paint w red, the shortage moves up to xp;
 *   w black, its near child red, far one black: rotate w away, the red child becomes
 *                          the sibling with a red far child;
 *   w black, far child red: rotate xp towards x, w takes xp's colour, xp and the far
 *                          child turn black: done.
 */
static __rebalance __noasan int erase_fixup(struct rbtree __arena *t, rbnode_t *x, rbnode_t *xp,
					    int xdir)
{
	rbnode_t *w;
	u32 i;

	for (i = zero; i < 2 * RB_MAX_DEPTH && can_loop; i++) {
		if (x == t->root || is_red(x)) {
			if (x)
				x->is_red = false;
			return 0;
		}
		if (!xp)
			break;
		w = xp->child[1 - xdir];
		if (!w)
			break;
		if (w->is_red) {
			w->is_red = false;
			xp->is_red = true;
			rotate(t, xp, xdir);
			w = xp->child[1 - xdir];
			if (!w)
				break;
		}
		if (!is_red(w->left) && !is_red(w->right)) {
			w->is_red = true;
			x = xp;
			xp = x->parent;
			xdir = xp && xp->right == x;
			continue;
		}
		if (!is_red(w->child[1 - xdir])) {
			w->child[xdir]->is_red = false;
			w->is_red = true;
			rotate(t, w, 1 - xdir);
			w = xp->child[1 - xdir];
		}
		w->is_red = xp->is_red;
		xp->is_red = false;
		if (w->child[1 - xdir])
			w->child[1 - xdir]->is_red = false;
		rotate(t, xp, xdir);
		t->root->is_red = false;
		return 0;
	}
	return -EFAULT;
}

/* Unlink z (in t) and rebalance. z's links are cleared; nothing is freed. */
static __noinline int erase(struct rbtree __arena *t, rbnode_t *z)
{
	rbnode_t *x, *xp, *y;
	bool black_left;
	int xdir;
	u32 i;

	if (z->left && z->right) {
		/* The successor y (no left child) moves into z's place, z's colour too. */
		y = z->right;
		for (i = zero; y->left && i < RB_MAX_DEPTH && can_loop; i++)
			y = y->left;
		if (y->left)
			return -EFAULT;
		black_left = !y->is_red;
		x = y->right;
		if (y->parent == z) {
			xp = y;
			xdir = 1;
		} else {
			xp = y->parent;
			xdir = 0;
			xp->left = x;
			if (x)
				x->parent = xp;
			y->right = z->right;
			y->right->parent = y;
		}
		y->left = z->left;
		y->left->parent = y;
		replace_child(t, z, y, z->parent);
		y->is_red = z->is_red;
	} else {
		x = z->left ? z->left : z->right;
		xp = z->parent;
		xdir = xp && xp->right == z;
		black_left = !z->is_red;
		replace_child(t, z, x, xp);
	}
	t->nr_nodes--;
	z->parent = NULL;
	z->left = NULL;
	z->right = NULL;
	z->is_red = false;
	return black_left ? erase_fixup(t, x, xp, xdir) : 0;
}

/* The end of the subtree of n on side dir: its least (0) or greatest (1) node. */
static __always_inline rbnode_t *extreme(rbnode_t *n, int dir)
{
	u32 i;

	for (i = zero; n && n->child[dir] && i < RB_MAX_DEPTH && can_loop; i++)
		n = n->child[dir];
	return n && n->child[dir] ? NULL : n;
}

/*
 * The first node with a key >= key (strict: > key), or NULL. A walk deeper than
 * RB_MAX_DEPTH gives 1, never a node address (nodes are 8-byte aligned).
 */
#define WALK_BROKEN 1ull

static __noinline u64 bound(struct rbtree __arena *t, u64 key, int strict)
{
	rbnode_t *n = t->root, *cand = NULL;
	u32 depth;

	for (depth = zero; n && depth < RB_MAX_DEPTH && can_loop; depth++) {
		if (n->key > key || (!strict && n->key == key)) {
			cand = n;
			n = n->left;
		} else {
			n = n->right;
		}
	}
	return n ? WALK_BROKEN : (u64)cand;
}

/* In-order neighbour of n: the next one (dir 1) or the previous one (dir 0). */
static __noinline u64 step(rbnode_t *n, int dir)
{
	rbnode_t *p;
	u32 i;

	if (!n)
		return 0;
	if (n->child[dir]) {
		p = extreme(n->child[dir], 1 - dir);
		return p ? (u64)p : WALK_BROKEN;
	}
	for (i = zero; i < RB_MAX_DEPTH && can_loop; i++) {
		p = n->parent;
		if (!p || p->child[1 - dir] == n)
			return (u64)p;
		n = p;
	}
	return WALK_BROKEN;
}

__weak u64 rb_create_addr(enum rbtree_alloc alloc, enum rbtree_insert_mode insert)
{
	struct rbtree __arena *t;

	if ((u32)alloc > RB_NOALLOC || (u32)insert > RB_DUPLICATE ||
	    (alloc == RB_NOALLOC && insert == RB_UPDATE)) {
		/* RB_UPDATE would swap caller-owned nodes behind their owner's back. */
		arena_stderr("rb_create: bad modes alloc %d insert %d%s", alloc, insert,
			     alloc == RB_NOALLOC && insert == RB_UPDATE ?
			     " (RB_NOALLOC cannot have RB_UPDATE)" : "");
		return 0;
	}
	/* As rb_node_alloc_addr(): every field set, for arena_malloc() does not zero. */
	t = arena_malloc_call(sizeof(*t));
	if (!t) {
		arena_stderr("rb_create: out of memory");
		return 0;
	}
	t->root = NULL;
	t->alloc = alloc;
	t->insert = insert;
	t->nr_nodes = 0;
	t->pad = 0;
	t->magic = RB_MAGIC;
	return (u64)t;
}

/*
 * Free the nodes leaf first: go down to a node without children, unhook it from its
 * parent, free it, continue from the parent. Two steps per node at most.
 */
__weak int rb_destroy(struct rbtree __arena *t __arg_arena)
{
	rbnode_t *n, *p;
	u64 freed = zero, steps, max_steps;

	arena_subprog_init();
	if (!t || (t->magic != RB_MAGIC && t->magic != RB_DYING)) {
		arena_stderr("%s: %llx is not a live tree", __func__, (u64)t);
		return -EINVAL;
	}
	if (t->alloc == RB_NOALLOC && t->root) {
		arena_stderr("%s: RB_NOALLOC tree %llx still holds %llu nodes", __func__,
			     (u64)t, t->nr_nodes);
		return -EBUSY;
	}
	t->magic = RB_DYING;
	max_steps = 2 * t->nr_nodes + 2 * RB_MAX_DEPTH;
	n = t->root;
	for (steps = zero; n && steps < max_steps && can_loop; steps++) {
		if (n->left) {
			n = n->left;
			continue;
		}
		if (n->right) {
			n = n->right;
			continue;
		}
		p = n->parent;
		if (!p && t->root == n)
			t->root = NULL;
		else if (p && p->left == n)
			p->left = NULL;
		else if (p && p->right == n)
			p->right = NULL;
		else
			break;
		arena_free_call(n);
		t->nr_nodes--;
		n = p;
		if (++freed >= RB_DESTROY_MAX && t->root) {
			arena_stdout("%s: freed %llu nodes, %llu left: call again", __func__,
				     freed, t->nr_nodes);
			return -EAGAIN;
		}
	}
	if (n || t->root)
		return BROKEN("rb_destroy", t);
	t->magic = 0;
	arena_free_call(t);
	return 0;
}

__weak int rb_insert(struct rbtree __arena *t __arg_arena, u64 key, u64 value)
{
	rbnode_t *parent, *found, *node;
	int dir, ret;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	if (!mode_ok(__func__, t, RB_ALLOC))
		return -EINVAL;
	ret = descend(t, key, NULL, &parent, &dir, &found);
	if (ret)
		return BROKEN("rb_insert", t);
	if (found) {
		if (t->insert != RB_UPDATE)
			return -EALREADY;
		found->value = value;
		return 0;
	}
	node = arena_malloc(sizeof(*node));
	if (!node) {
		arena_stderr("%s: out of memory for key %llu", __func__, key);
		return -ENOMEM;
	}
	node->key = key;
	node->value = value;
	return link_node(t, node, parent, dir);
}

__weak int rb_insert_node(struct rbtree __arena *t __arg_arena,
			  struct rbnode __arena *node __arg_arena)
{
	rbnode_t *parent, *found;
	int dir, ret;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	if (!mode_ok(__func__, t, RB_NOALLOC))
		return -EINVAL;
	if (!node || node == t->root) {
		arena_stderr("%s: bad node %llx for tree %llx", __func__, (u64)node, (u64)t);
		return -EINVAL;
	}
	ret = descend(t, node->key, node, &parent, &dir, &found);
	if (ret == -EEXIST) {
		arena_stderr("%s: node %llx is in tree %llx already", __func__, (u64)node,
			     (u64)t);
		return -EINVAL;
	}
	if (ret)
		return BROKEN("rb_insert_node", t);
	if (found)
		return -EALREADY;
	/* link_node writes the node's links and colour unchecked: check the whole node. */
	asan_check_range((u64)node, sizeof(*node), 1);
	return link_node(t, node, parent, dir);
}

/* The oldest node of key, NULL, or WALK_BROKEN. */
static __always_inline u64 find_node(struct rbtree __arena *t, u64 key)
{
	u64 n = bound(t, key, 0);

	if (n == WALK_BROKEN || !n)
		return n;
	return ((rbnode_t *)n)->key == key ? n : 0;
}

__weak int rb_remove(struct rbtree __arena *t __arg_arena, u64 key)
{
	u64 n;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	if (!mode_ok(__func__, t, RB_ALLOC))
		return -EINVAL;
	n = find_node(t, key);
	if (n == WALK_BROKEN)
		return BROKEN("rb_remove", t);
	if (!n)
		return -ENOENT;
	if (erase(t, (rbnode_t *)n))
		return BROKEN("rb_remove", t);
	arena_free((rbnode_t *)n);
	return 0;
}

__weak int rb_remove_node(struct rbtree __arena *t __arg_arena,
			  struct rbnode __arena *node __arg_arena)
{
	rbnode_t *n = node;
	u32 depth;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	if (!mode_ok(__func__, t, RB_NOALLOC))
		return -EINVAL;
	/* The node belongs to t if its parent chain ends at t's root. */
	for (depth = zero; n && n->parent && depth < RB_MAX_DEPTH && can_loop; depth++)
		n = n->parent;
	if (!n || n != t->root) {
		arena_stderr("%s: node %llx is not in tree %llx", __func__, (u64)node, (u64)t);
		return -EINVAL;
	}
	if (erase(t, node))
		return BROKEN("rb_remove_node", t);
	return 0;
}

/* The least node of t (*np) and its key and value (either may be NULL), for fn. */
static __always_inline int least(const char *fn, struct rbtree __arena *t, u64 *key,
				 u64 *value, rbnode_t **np)
{
	rbnode_t *n;

	if (!t->root)
		return -ENOENT;
	n = extreme(t->root, 0);
	if (!n)
		return BROKEN(fn, t);
	if (key)
		*key = n->key;
	if (value)
		*value = n->value;
	*np = n;
	return 0;
}

__weak int rb_pop(struct rbtree __arena *t __arg_arena, u64 *key,
		  u64 *value)
{
	rbnode_t *n;
	int ret;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	if (!mode_ok(__func__, t, RB_ALLOC))
		return -EINVAL;
	ret = least(__func__, t, key, value, &n);
	if (ret)
		return ret;
	if (erase(t, n))
		return BROKEN("rb_pop", t);
	arena_free(n);
	return 0;
}

__weak u64 rb_node_alloc_addr(u64 key, u64 value)
{
	rbnode_t *n = arena_malloc(sizeof(*n));

	if (!n) {
		arena_stderr("rb_node_alloc: out of memory");
		return 0;
	}
	n->parent = NULL;
	n->left = NULL;
	n->right = NULL;
	n->key = key;
	n->value = value;
	n->is_red = false;
	return (u64)n;
}

__weak int rb_node_free(struct rbnode __arena *node __arg_arena)
{
	arena_subprog_init();
	if (node && (node->parent || node->left || node->right)) {
		arena_stderr("%s: node %llx is still in a tree", __func__, (u64)node);
		return -EBUSY;
	}
	return arena_free(node);
}

__weak int rb_find(struct rbtree __arena *t __arg_arena, u64 key, u64 *value)
{
	u64 n;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	n = find_node(t, key);
	if (n == WALK_BROKEN)
		return BROKEN("rb_find", t);
	if (!n)
		return -ENOENT;
	if (value)
		*value = ((rbnode_t *)n)->value;
	return 0;
}

__weak int rb_least(struct rbtree __arena *t __arg_arena, u64 *key,
		    u64 *value)
{
	rbnode_t *n;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	return least(__func__, t, key, value, &n);
}

/* The iteration calls log a broken tree and return NULL (0). */
#define NODE_OR_NULL(fn, t, addr)						\
	({									\
		u64 ___a = (addr);						\
		if (___a == WALK_BROKEN) {					\
			BROKEN(fn, t);						\
			___a = 0;						\
		}								\
		___a;								\
	})

static __always_inline u64 end_of(struct rbtree __arena *t, int dir)
{
	rbnode_t *n;

	if (!t->root)
		return 0;
	n = extreme(t->root, dir);
	return n ? (u64)n : WALK_BROKEN;
}

__weak u64 rb_first_addr(struct rbtree __arena *t __arg_arena)
{
	if (!tree_ok("rb_first", t))
		return 0;
	return NODE_OR_NULL("rb_first", t, end_of(t, 0));
}

__weak u64 rb_last_addr(struct rbtree __arena *t __arg_arena)
{
	if (!tree_ok("rb_last", t))
		return 0;
	return NODE_OR_NULL("rb_last", t, end_of(t, 1));
}

__weak u64 rb_next_addr(struct rbnode __arena *node __arg_arena)
{
	arena_subprog_init();
	return NODE_OR_NULL("rb_next", node, step(node, 1));
}

__weak u64 rb_prev_addr(struct rbnode __arena *node __arg_arena)
{
	arena_subprog_init();
	return NODE_OR_NULL("rb_prev", node, step(node, 0));
}

__weak u64 rb_find_node_addr(struct rbtree __arena *t __arg_arena, u64 key)
{
	if (!tree_ok("rb_find_node", t))
		return 0;
	return NODE_OR_NULL("rb_find_node", t, find_node(t, key));
}

__weak u64 rb_lower_bound_addr(struct rbtree __arena *t __arg_arena, u64 key)
{
	if (!tree_ok("rb_lower_bound", t))
		return 0;
	return NODE_OR_NULL("rb_lower_bound", t, bound(t, key, 0));
}

__weak u64 rb_upper_bound_addr(struct rbtree __arena *t __arg_arena, u64 key)
{
	if (!tree_ok("rb_upper_bound", t))
		return 0;
	return NODE_OR_NULL("rb_upper_bound", t, bound(t, key, 1));
}

__weak int rb_range(struct rbtree __arena *t __arg_arena, u64 lo, u64 hi,
		    struct rb_pair __arena *out __arg_arena, u32 max)
{
	u64 n;
	u32 i;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	n = bound(t, lo, 0);
	for (i = zero; i < max && n && n != WALK_BROKEN && can_loop; i++) {
		if (((rbnode_t *)n)->key > hi)
			break;
		if (out) {
			out[i].key = ((rbnode_t *)n)->key;
			out[i].value = ((rbnode_t *)n)->value;
		}
		n = step((rbnode_t *)n, 1);
	}
	if (n == WALK_BROKEN)
		return BROKEN("rb_range", t);
	return i;
}

/*
 * Walk the whole tree by parent pointers, checking the rules of the top of this file
 * on the way. Arriving from above (prev == parent) a node is counted and its left side
 * taken; back from the left (or with no left child) it is compared with its in-order
 * predecessor and its right side taken; back from the right the walk goes up. bh counts
 * the black nodes from the root down to n: at every missing child it must be the same.
 */
/*
 * The verifier compares the loop's states by their ranges (may_goto loops do): a black
 * height that only ever moves by one would widen without end, so it is kept in a mask
 * (a height is at most RB_MAX_DEPTH + 1). The height is compared only with one copied at
 * an earlier leaf: a compare with a fresh copy the verifier can decide, then it tracks
 * bh precisely and states stop pruning.
 */
#define BH_MASK		0xff
_Static_assert(RB_MAX_DEPTH + 1 <= BH_MASK, "black heights fit the mask");

/*
 * The walk at child c of *n: a child is checked and walked down into (1: go on from
 * it); a missing one is a leaf, whose black height must be the first leaf's (0: go on
 * at *n). -1 with *what set when a rule is broken.
 */
static __always_inline int down_or_leaf(rbnode_t *c, rbnode_t **n, rbnode_t **prev,
					int *depth, int *bh, int *want_bh, const char **what)
{
	if (c) {
		if (c->parent != *n) {
			*what = "a child does not point back to its parent";
			return -1;
		}
		if ((*n)->is_red && c->is_red) {
			*what = "a red node has a red child";
			return -1;
		}
		if (*depth >= RB_MAX_DEPTH) {
			*what = "deeper than RB_MAX_DEPTH";
			return -1;
		}
		*prev = *n;
		*n = c;
		(*depth)++;
		*bh = (*bh + !c->is_red) & BH_MASK;
		return 1;
	}
	if (*want_bh < 0) {
		*want_bh = *bh;
	} else if (*bh != *want_bh) {
		*what = "black heights differ";
		return -1;
	}
	return 0;
}

__weak __noasan int rb_integrity_check(struct rbtree __arena *t __arg_arena)
{
	rbnode_t *n, *prev = NULL;
	u64 count = zero, last = 0;
	/* Opaque starts: a constant bh widens by one per level and defeats pruning. */
	int depth = zero + 1, bh = (zero + 1) & BH_MASK, want_bh = -1;
	const char *what = NULL;
	bool dup, from_left, seen = false;
	int step;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	dup = t->insert == RB_DUPLICATE;
	n = t->root;
	if (n && n->parent)
		what = "the root has a parent";
	else if (n && n->is_red)
		what = "the root is red";
	while (n && !what && can_loop) {
		if (prev == n->parent) {
			if (++count > t->nr_nodes) {
				what = "more nodes than nr_nodes, or a cycle";
				break;
			}
			if (count > RB_CHECK_MAX) {
				what = "too large to check in one call";
				break;
			}
			if (n->left && n->left == n->right) {
				what = "both children are the same node";
				break;
			}
			step = down_or_leaf(n->left, &n, &prev, &depth, &bh, &want_bh, &what);
			if (step > 0)
				continue;
			if (step < 0)
				break;
			from_left = true;
		} else {
			from_left = n->left && prev == n->left;
		}
		if (from_left) {
			if (seen && (n->key < last || (!dup && n->key == last))) {
				what = dup ? "keys out of order" : "keys out of order or equal";
				break;
			}
			last = n->key;
			seen = true;
			step = down_or_leaf(n->right, &n, &prev, &depth, &bh, &want_bh, &what);
			if (step > 0)
				continue;
			if (step < 0)
				break;
		}
		/* Done with n and below: up. */
		prev = n;
		bh = (bh - !n->is_red) & BH_MASK;
		depth--;
		n = n->parent;
	}
	if (!what && n)
		what = "the walk did not end (loop budget)";
	if (!what && count != t->nr_nodes)
		what = "fewer nodes than nr_nodes";
	if (!what)
		return 0;
	arena_stderr("%s: tree %llx: %s, at node %llx key %llu", __func__, (u64)t, what,
		     (u64)n, n ? n->key : 0);
	return -EUCLEAN;
}

__weak int rb_print(struct rbtree __arena *t __arg_arena)
{
	rbnode_t *n, *p;
	u32 shown, depth, deep = zero;

	if (!tree_ok(__func__, t))
		return -EINVAL;
	arena_stdout("rbtree %llx: %llu nodes, %s, %s", (u64)t, t->nr_nodes,
		     t->alloc == RB_ALLOC ? "RB_ALLOC" : "RB_NOALLOC",
		     t->insert == RB_DEFAULT ? "RB_DEFAULT" :
		     t->insert == RB_UPDATE ? "RB_UPDATE" : "RB_DUPLICATE");
	n = (rbnode_t *)end_of(t, 0);
	for (shown = zero; n && (u64)n != WALK_BROKEN && shown < RB_PRINT_MAX && can_loop;
	     shown++) {
		p = n;
		for (depth = zero; p->parent && depth < RB_MAX_DEPTH && can_loop; depth++)
			p = p->parent;
		if (depth < RB_MAXLVL_PRINT)
			arena_stdout("  depth %2u %s key %llu value %llu", depth,
				     n->is_red ? "red  " : "black", n->key, n->value);
		else
			deep++;
		n = (rbnode_t *)step(n, 1);
	}
	if ((u64)n == WALK_BROKEN)
		return BROKEN("rb_print", t);
	if (deep)
		arena_stdout("  %u nodes deeper than %u levels not shown", deep, RB_MAXLVL_PRINT);
	if (n)
		arena_stdout("  ... %llu more", t->nr_nodes - shown);
	return 0;
}
