// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The concurrent hash map. include/libarena/hashmap.h states the API, the design and the
 * memory ordering.
 *
 * Nodes are ordered by (hash, kind): a bucket's sentinel comes before an entry of the same
 * hash. A region's lock guards the next links of the nodes whose hash lies in the region,
 * its count and its free list; a region's part of the list starts at a sentinel (there are
 * at least as many buckets as regions), so a writer walks only nodes its lock guards.
 *
 * Everything between lock and unlock is inline or static (6.12 allows no global call with
 * preemption disabled), and the file is left uninstrumented in the sanitizer build
 * (__noasan): the sanitizer's checks are global calls.
 */
#include <libarena/hashmap.h>
#include <libarena/heap.h>

#define BLOCK_SIZE	(1u << HMAP_BLOCK_BITS)
#define HMAP_FREE_MAX	(1u << 22)	/* nodes one free_all() walk frees (its loop budget) */
#define HMAP_RESERVE_TRIES	4	/* doublings hmap_reserve() tries that find no memory */

/* m is a live map; if not, fn logs it (the caller fails with -EINVAL). */
static __always_inline bool map_ok(const char *fn, struct hmap __arena *m)
{
	return arena_live(fn, m, HMAP_MAGIC, "map");
}

enum write_op { HM_INSERT, HM_UPDATE, HM_UPSERT, HM_DELETE };

static __always_inline __noasan u32 stripe_of(u64 hash)
{
	return hash >> (64 - HMAP_STRIPE_BITS);
}

/* The map's bits, or 0 when user space wrote over them. */
static __always_inline __noasan u32 map_bits(u32 bits, u32 base_bits)
{
	return bits >= base_bits && base_bits >= HMAP_MIN_BITS && bits <= HMAP_MAX_BITS ?
	       bits : 0;
}

/*
 * The index of x's lowest set bit (x not 0): a de Bruijn multiply, no loop, no branch.
 * The table lives in the arena: the verifier does not follow arena values, so a bucket
 * number that reaches it does not become a value the verifier must track exactly (a
 * read-only map's would, and the loops over buckets would no longer converge).
 */
u8 __arena_global hmap_debruijn_index[64] = {
	0, 1, 48, 2, 57, 49, 28, 3, 61, 58, 50, 42, 38, 29, 17, 4,
	62, 55, 59, 36, 53, 51, 43, 22, 45, 39, 33, 30, 24, 18, 12, 5,
	63, 47, 56, 27, 60, 41, 37, 16, 54, 35, 52, 21, 44, 32, 23, 11,
	46, 26, 40, 15, 34, 20, 31, 10, 25, 14, 19, 9, 13, 8, 7, 6,
};

static __always_inline __noasan u32 lowest_bit(u64 x)
{
	return hmap_debruijn_index[((x & -x) * 0x03f79d71b4cb0a89ull) >> 58];
}

/*
 * Bucket b's sentinel with 2^bits buckets. Buckets whose number has its low
 * bits - base_bits bits clear are level 0's (b >> that); any other was added by the
 * doubling to bits - lowest_bit(b), which made the odd buckets of its table: its level's
 * entry b >> (lowest_bit(b) + 1).
 */
static __always_inline __noasan hmap_node_ptr sentinel_of(struct hmap __arena *m, u64 b,
							   u32 bits, u32 base_bits)
{
	u32 shift = bits - base_bits, level = 0, low;
	u64 idx = b >> shift;

	if (b & ((1ull << shift) - 1)) {
		low = lowest_bit(b);
		level = shift - low;
		idx = b >> (low + 1);
	}
	return &m->blocks[(m->level_block[level % (HMAP_MAX_BITS + 1)] + (idx >> HMAP_BLOCK_BITS)) %
			  HMAP_MAX_BLOCKS][idx & (BLOCK_SIZE - 1)];
}

/* The sentinel of the bucket that holds hash, with the map's bits now; NULL if damaged. */
static __always_inline __noasan hmap_node_ptr bucket_start(struct hmap __arena *m, u64 hash)
{
	/* bits before its buckets' sentinels: pairs with the release in hmap_grow(). */
	u32 base_bits = m->base_bits, bits = map_bits(smp_load_acquire(&m->bits), base_bits);

	if (!bits)
		return NULL;
	return sentinel_of(m, hash >> (64 - bits), bits, base_bits);
}

/*
 * Where a walk starts: past the bucket's sentinel start, which is never deleted and lies
 * at or before the hash sought. What the walk knows of it is read from it (gen 0, kind
 * sentinel), not assumed: values the verifier does not know let its states at the loop
 * head converge. The node after it.
 */
static __always_inline __noasan hmap_node_ptr walk_from(hmap_node_ptr start, u32 *gen,
							 u32 *kind, u64 *hash)
{
	/*
	 * Each load before the next, as in read_first(); the link last, pairing with the
	 * release store that linked the node after.
	 */
	*gen = smp_load_acquire(&start->gen);
	*kind = smp_load_acquire(&start->kind);	/* after gen */
	*hash = smp_load_acquire(&start->hash);	/* after kind */
	return smp_load_acquire(&start->next);	/* after hash */
}

/*
 * Lock-free: the first node at or after hash in the list, as of some moment during the
 * call. lookup: stop at the first node past hash or at an entry of hash (a sentinel of
 * hash comes before it); otherwise (iteration): at the first entry at or after hash.
 * 0 and the entry's hash and value; -ENOENT; -EFAULT for a damaged map; -EAGAIN when the
 * loop budget ran out (writers kept changing the nodes under the walk).
 *
 * Nodes on the way are read without a check: a node deleted or reused under us may lead
 * the walk astray, but what it ends on is checked. An entry found is one whose gen did
 * not change around the reads of its hash and value; a "not there" holds only if the
 * node before, with the gen we read, still points at the node after, whose gen did not
 * change either: both live and next to each other at that moment.
 *
 * A walk is a struct and a call per node (__hmap_walk_step), so that the loop carries
 * nothing the verifier must follow: the many ways through a node would otherwise make
 * it walk the loop over and over (an iteration took 45,622 instructions inline, 1,587
 * this way). A node or two a lookup, at the cost of a call each.
 */
struct hmap_walk {
	hmap_node_ptr start, pred, node;
	u64 hash;		/* in: the hash sought */
	u64 prev;		/* pred's hash */
	u64 found, val;		/* out */
	u32 gen, pred_gen, kind, pred_kind;
	u32 lookup;		/* in */
	u32 disorder;		/* nodes out of order were seen */
};

/* What walk_node() says when the walk goes on, or starts over (walk_start()). */
#define HMAP_WALK_ON		1
#define HMAP_WALK_RESTART	2

/*
 * A walk for hash, every field set (field by field: a sanitizer build would make "= {}"
 * a call of its memset).
 */
static __always_inline __noasan void walk_init(struct hmap_walk *w, u64 hash, u32 lookup)
{
	w->start = w->pred = w->node = NULL;
	w->hash = hash;
	w->prev = w->found = w->val = 0;
	w->gen = w->pred_gen = w->kind = w->pred_kind = 0;
	w->lookup = lookup;
	w->disorder = 0;
}

/* (Re)start at the bucket's sentinel: HMAP_WALK_ON, or -EFAULT. */
static __always_inline __noasan int walk_start(struct hmap __arena *m, struct hmap_walk *w)
{
	w->start = bucket_start(m, w->hash);
	if (!w->start)
		return -EFAULT;
	w->pred = w->start;
	w->node = walk_from(w->start, &w->pred_gen, &w->pred_kind, &w->prev);
	return HMAP_WALK_ON;
}

/*
 * One node of the walk: HMAP_WALK_ON to go on, HMAP_WALK_RESTART to start over (the
 * step calls walk_start(): one copy of it, not one per reason), or the walk's result.
 */
static __always_inline __noasan int walk_node(struct hmap __arena *m, struct hmap_walk *w)
{
	hmap_node_ptr node = w->node, pred = w->pred, next;
	u32 gen, kind;
	u64 nh, v = 0;
	bool hit;

	if (!node)
		return -ENOENT;	/* pred was live and last */
	/*
	 * Acquire loads, each ordered before the next (on x86-64 plain loads): the fields
	 * between the two loads of gen, as a seqcount's reader. next pairs with the release
	 * store that linked the node after.
	 */
	gen = smp_load_acquire(&node->gen);
	nh = smp_load_acquire(&node->hash);	/* after gen */
	kind = smp_load_acquire(&node->kind);	/* after hash */
	next = smp_load_acquire(&node->next);	/* after kind */
	if (node == w->start || nh < w->prev || (nh == w->prev && kind <= w->pred_kind)) {
		/* Out of order: reused under us, or a list user space wrote over. */
		w->disorder = 1;
		return HMAP_WALK_RESTART;
	}
	hit = kind == HMAP_ENTRY && nh >= w->hash;
	if (hit) {
		/* The value after the fields above, before gen is read again. */
		v = smp_load_acquire(&node->val);
		/* gen again, after the value: the same even gen, the same entry. */
		if ((gen & 1) || smp_load_acquire(&node->gen) != gen)
			return HMAP_WALK_RESTART;	/* deleted, reused or not yet whole */
		if (nh == w->hash) {
			w->found = nh;
			w->val = v;
			return 0;
		}
	}
	if (hit || nh > w->hash) {
		/*
		 * Past hash: nothing between pred and node at this moment, if pred, still in
		 * the life we read (its link first, then its gen, as a seqcount's reader),
		 * still points at node, still in its own.
		 */
		if (smp_load_acquire(&pred->next) != node || (w->pred_gen & 1))
			return HMAP_WALK_RESTART;
		/* pred's gen after its link, as a seqcount reader's second load. */
		if (smp_load_acquire(&pred->gen) != w->pred_gen || (gen & 1))
			return HMAP_WALK_RESTART;
		/* node's gen last, after everything read of pred and of node. */
		if (smp_load_acquire(&node->gen) != gen)
			return HMAP_WALK_RESTART;
		if (w->lookup)
			return -ENOENT;
		if (hit) {
			w->found = nh;
			w->val = v;
			return 0;
		}
		/* A walk past a sentinel it checked goes on from there. */
	}
	if (!next) {
		/* The last node: nothing after it, if it was live then. */
		if ((gen & 1) || smp_load_acquire(&node->gen) != gen)
			return HMAP_WALK_RESTART;
		return -ENOENT;
	}
	w->prev = nh;
	w->pred = node;
	w->pred_gen = gen;
	w->pred_kind = kind;
	w->node = next;
	return HMAP_WALK_ON;
}

/* walk_node() as a step: a call per node. */
__weak __noasan int __hmap_walk_step(struct hmap __arena *m __arg_arena, struct hmap_walk *w)
{
	int ret;

	arena_subprog_init();
	if (!w)
		return -EFAULT;
	ret = w->start ? walk_node(m, w) : HMAP_WALK_RESTART;
	return ret == HMAP_WALK_RESTART ? walk_start(m, w) : ret;
}

/* A walk: its loop only calls the step (see struct hmap_walk). */
static __always_inline __noasan int read_first(struct hmap __arena *m, u64 hash, bool lookup,
					       u64 *found, u64 *val)
{
	struct hmap_walk w;
	int ret = HMAP_WALK_ON;

	walk_init(&w, hash, lookup);
	while (ret == HMAP_WALK_ON && can_loop)
		ret = __hmap_walk_step(m, &w);
	if (ret == HMAP_WALK_ON)
		return w.disorder ? -EFAULT : -EAGAIN;
	if (!ret) {
		*found = w.found;
		*val = w.val;
	}
	return ret;
}

/*
 * Under the region's lock: the node after which an entry of hash belongs (its next is
 * the first node at or after (hash, HMAP_ENTRY)), walking from start; NULL when the list
 * is damaged (out of order, leaving the region, or longer than the loop budget).
 */
static __always_inline __noasan hmap_node_ptr find_pred(hmap_node_ptr start, u64 hash)
{
	hmap_node_ptr pred = start, next;

	if (!start || start->kind != HMAP_SENTINEL || start->hash > hash ||
	    stripe_of(start->hash) != stripe_of(hash))
		return NULL;
	while (can_loop) {
		next = pred->next;
		if (!next || next->hash > hash || (next->hash == hash && next->kind == HMAP_ENTRY))
			return pred;
		/* (hash, kind) must grow strictly: a cycle or disorder is damage. */
		if (next->hash < pred->hash ||
		    (next->hash == pred->hash && next->kind <= pred->kind))
			return NULL;
		pred = next;
	}
	return NULL;
}

/* How a write ended, for the log line after the lock is let go. */
enum { WR_DONE, WR_UPDATED, WR_ABSENT, WR_EXISTS, WR_NEED_NODE, WR_DAMAGED };

/*
 * Under the region's lock: do op. spare is a node for a new entry when the free list has
 * none (it joins the free list if unused). The result is one of the enum above.
 */
static __always_inline __noasan int write_locked(struct hmap_stripe __arena *s,
						 hmap_node_ptr start, u64 hash, u64 val,
						 enum write_op op, hmap_node_ptr spare, u64 *old)
{
	hmap_node_ptr pred = find_pred(start, hash), node, fresh;
	int ret = WR_DAMAGED;

	if (pred) {
		node = pred->next;
		if (node && (node->hash != hash || node->kind != HMAP_ENTRY))
			node = NULL;
		if (node) {
			if (op == HM_INSERT) {
				ret = WR_EXISTS;
			} else if (op == HM_DELETE) {
				*old = node->val;
				/*
				 * A release, as every store that makes a node reachable: the
				 * node after was filled by another CPU, whose writes readers
				 * coming this way must see.
				 */
				smp_store_release(&pred->next, node->next);
				/*
				 * Odd before the link is reused (the release orders the two):
				 * readers on it start over.
				 */
				WRITE_ONCE(node->gen, node->gen + 1);
				/* After gen went odd: a reader led here by the new link sees it. */
				smp_store_release(&node->next, s->free);
				WRITE_ONCE(s->free, node);
				s->nr_free++;
				WRITE_ONCE(s->count, s->count - 1);
				ret = WR_DONE;
			} else {
				WRITE_ONCE(node->val, val);
				ret = WR_UPDATED;
			}
		} else if (op == HM_UPDATE || op == HM_DELETE) {
			ret = WR_ABSENT;
		} else {
			fresh = s->free;
			if (fresh) {
				WRITE_ONCE(s->free, fresh->next);
				s->nr_free--;
			} else {
				fresh = spare;
				spare = NULL;
			}
			if (fresh) {
				/*
				 * Filled while gen is odd, linked, then made even: releases, so a
				 * reader that sees a new field sees gen odd or even again.
				 */
				smp_store_release(&fresh->hash, hash);
				smp_store_release(&fresh->val, val);	/* after hash */
				smp_store_release(&fresh->kind, HMAP_ENTRY);	/* after val */
				smp_store_release(&fresh->next, pred->next);	/* after kind */
				/* Linked once whole: pairs with the readers' acquire of next. */
				smp_store_release(&pred->next, fresh);
				/*
				 * Even only once linked: a reader that meets it odd starts over,
				 * so none returns an entry whose insert has not happened.
				 */
				smp_store_release(&fresh->gen, fresh->gen + 1);
				WRITE_ONCE(s->count, s->count + 1);
				ret = WR_DONE;
			} else {
				/* another insert took the free node we saw */
				ret = WR_NEED_NODE;
			}
		}
	}
	if (spare) {
		/* Unused: it waits in the free list, odd, for the region's next insert. */
		spare->next = s->free;
		WRITE_ONCE(s->free, spare);
		s->nr_free++;
	}
	return ret;
}


/* Whether the region of s holds more than HMAP_LOAD entries a bucket: time to double. */
static __always_inline __noasan bool wants_growth(struct hmap __arena *m,
						  struct hmap_stripe __arena *s)
{
	u32 bits = map_bits(READ_ONCE(m->bits), m->base_bits);

	return bits && bits < HMAP_MAX_BITS && !READ_ONCE(m->growing) &&
	       READ_ONCE(s->count) > ((u64)HMAP_LOAD << (bits - HMAP_STRIPE_BITS)) &&
	       bpf_ktime_get_ns() >= READ_ONCE(m->grow_after_ns);
}

/* The calls' names for the log, by enum write_op (bpf_snprintf reads %s at run time). */
static const char op_names[4][12] = { "hmap_insert", "hmap_update", "hmap_upsert",
				      "hmap_delete" };

#define WANTS_GROWTH	2	/* write_op: done, and the table should double */

/* A write as the locked step takes it: in, and out (old, the value a delete took). */
struct hmap_write_req {
	u64 hash;
	u64 val;
	u64 old;
	struct hmap_node __arena *spare;	/* a node for a new entry, or NULL */
	u32 op;				/* enum write_op */
	u32 pad;
};

/*
 * The write under its region's lock: a step of its own (it calls nothing), verified once
 * in a program however many hmap_* calls it has. The enum above, or -ETIMEDOUT (lock),
 * -EINVAL (the map was destroyed meanwhile: nothing touched). The spare, unused, waits
 * in the region's free list.
 */
__weak __noasan int __hmap_write(struct hmap __arena *m __arg_arena,
				 struct hmap_write_req *req)
{
	struct hmap_stripe __arena *s;
	hmap_node_ptr start;
	int ret;

	arena_subprog_init();
	if (!req)
		return -EINVAL;
	s = &m->stripes[stripe_of(req->hash)];
	start = bucket_start(m, req->hash);
	ret = arena_spin_lock_live(&s->lock, m, HMAP_MAGIC);
	if (ret)
		return ret;
	ret = write_locked(s, start, req->hash, req->val, req->op, req->spare, &req->old);
	arena_spin_unlock(&s->lock);
	return ret;
}

/*
 * A write, inline in each hmap_* call: the node for a new entry is allocated in the
 * call's own frame, so that the allocator's steps stay within ARENA_CALL_FRAMES.
 */
static __always_inline __noasan int write_op(struct hmap __arena *m, u64 key, u64 val,
					     enum write_op op, u64 *old)
{
	const char *fn = op_names[op & 3];
	struct hmap_write_req req;
	int ret = WR_NEED_NODE, try;
	hmap_node_ptr spare;

	if (!map_ok(fn, m))
		return -EINVAL;
	req.hash = hmap_hash(key);
	req.val = val;
	req.old = 0;
	req.op = op;
	/*
	 * A node for a new entry is allocated before the lock when none waits for reuse. If
	 * another insert took the one we saw, the second try has its own.
	 */
	for (try = zero; try < 2 && ret == WR_NEED_NODE && can_loop; try++) {
		spare = NULL;
		if ((op == HM_INSERT || op == HM_UPSERT) &&
		    (try || !READ_ONCE(m->stripes[stripe_of(req.hash)].free))) {
			spare = arena_malloc(sizeof(*spare));
			if (!spare) {
				arena_stderr("%s: out of memory for an entry of %llx", fn, (u64)m);
				return -ENOMEM;
			}
			spare->gen = 1;
			spare->kind = HMAP_ENTRY;
			spare->next = NULL;
		}
		req.spare = spare;
		ret = __hmap_write(m, &req);
		if (ret < 0) {
			arena_free_call(spare);	/* seldom: not the inlined fast path */
			return ret;
		}
	}
	switch (ret) {
	case WR_DONE:
		if (op == HM_DELETE && old)
			*old = req.old;
		if ((op == HM_INSERT || op == HM_UPSERT) &&
		    wants_growth(m, &m->stripes[stripe_of(req.hash)]))
			return WANTS_GROWTH;
		return 0;
	case WR_UPDATED:
		return op == HM_UPSERT ? 1 : 0;
	case WR_ABSENT:
		return -ENOENT;
	case WR_EXISTS:
		return -EEXIST;
	}
	arena_stderr("%s: map %llx is damaged near key %llx", fn, (u64)m, key);
	return -EFAULT;
}

static __always_inline __noasan int grow(struct hmap __arena *m);
static __always_inline __noasan int grow_failed(struct hmap __arena *m, int ret);

/* An insert that wants the table doubled: it was done, whatever the doubling does. */
static __always_inline __noasan int after_insert(struct hmap __arena *m, int ret)
{
	if (ret != WANTS_GROWTH)
		return ret;
	grow_failed(m, grow(m));
	return 0;
}

__weak __noasan int hmap_insert(struct hmap __arena *m __arg_arena, u64 key, u64 val)
{
	return after_insert(m, write_op(m, key, val, HM_INSERT, NULL));
}

__weak __noasan int hmap_update(struct hmap __arena *m __arg_arena, u64 key, u64 val)
{
	return write_op(m, key, val, HM_UPDATE, NULL);
}

__weak __noasan int hmap_upsert(struct hmap __arena *m __arg_arena, u64 key, u64 val)
{
	return after_insert(m, write_op(m, key, val, HM_UPSERT, NULL));
}

__weak __noasan int hmap_delete(struct hmap __arena *m __arg_arena, u64 key, u64 *val)
{
	return write_op(m, key, 0, HM_DELETE, val);
}

__weak __noasan int hmap_lookup(struct hmap __arena *m __arg_arena, u64 key, u64 *val)
{
	u64 hash = hmap_hash(key), found = 0, v = 0;
	int ret;

	if (!map_ok(__func__, m))
		return -EINVAL;
	ret = read_first(m, hash, true, &found, &v);
	if (!ret && val)
		*val = v;
	if (ret == -EFAULT || ret == -EAGAIN)
		arena_stderr("%s: map %llx: %s near key %llx", __func__, (u64)m,
			     ret == -EFAULT ? "damaged" : "the loop budget ran out", key);
	return ret;
}

__weak __noasan int hmap_iter(struct hmap __arena *m __arg_arena, struct hmap_cursor *cursor,
			      u64 *key, u64 *val)
{
	u64 found = 0, v = 0;
	int ret;

	if (!map_ok(__func__, m) || !arena_given(__func__, cursor, "cursor"))
		return -EINVAL;
	if (cursor->done)
		return -ENOENT;
	ret = read_first(m, cursor->hash, false, &found, &v);
	if (ret == -ENOENT) {
		cursor->done = 1;
		return ret;
	}
	if (ret) {
		arena_stderr("%s: map %llx: %s", __func__, (u64)m,
			     ret == -EFAULT ? "damaged" : "the loop budget ran out");
		return ret;
	}
	if (key)
		*key = hmap_unhash(found);
	if (val)
		*val = v;
	if (found == ~0ull)
		cursor->done = 1;
	else
		cursor->hash = found + 1;
	return 0;
}

__weak __noasan s64 hmap_count(struct hmap __arena *m __arg_arena)
{
	s64 sum = 0;
	u32 i;

	if (!map_ok(__func__, m))
		return -EINVAL;
	for (i = zero; i < HMAP_STRIPES && can_loop; i++)
		sum += READ_ONCE(m->stripes[i].count);
	return sum;
}

__weak __noasan s64 hmap_buckets(struct hmap __arena *m __arg_arena)
{
	u32 bits;

	if (!map_ok(__func__, m))
		return -EINVAL;
	/* Pairs with the release of bits in hmap_grow(). */
	bits = map_bits(smp_load_acquire(&m->bits), m->base_bits);
	return bits ? 1ll << bits : -EFAULT;
}

/* Free the sentinel blocks from first on (all of them: 0) and forget them. */
static __always_inline __noasan void free_blocks(struct hmap __arena *m, u32 first)
{
	u32 i;

	/* + zero: a counter up from a known 0 would keep the verifier's loop apart. */
	for (i = first + zero; i < m->nr_blocks && i < HMAP_MAX_BLOCKS && can_loop; i++)
		arena_free_call(m->blocks[i]);
	m->nr_blocks = first;
}

/*
 * Memory for nr new sentinels, in blocks listed in the map from m->nr_blocks on: the
 * sentinels per block, or 0 when memory ran out (nothing kept).
 */
static __always_inline __noasan u32 alloc_blocks(struct hmap __arena *m, u32 nr)
{
	u32 block_size = nr < BLOCK_SIZE ? nr : BLOCK_SIZE, first = m->nr_blocks, i;
	hmap_node_ptr block;

	if (!block_size || first + nr / block_size > HMAP_MAX_BLOCKS)
		return 0;
	for (i = zero; i < nr / block_size && can_loop; i++) {
		/* At most HMAP_BLOCK_BYTES, a heap size: the heaps' call alone. */
		block = (hmap_node_ptr)arena_malloc_small_addr((u64)block_size *
							       sizeof(struct hmap_node));
		if (!block)
			goto nomem;
		m->blocks[(first + i) % HMAP_MAX_BLOCKS] = block;
		m->nr_blocks = first + i + 1;
	}
	if (i == nr / block_size)
		return block_size;
nomem:
	free_blocks(m, first);
	return 0;
}

/* Fill 2^nr_bits sentinels from block first on (see make_level). 0, or -E2BIG. A step. */
__weak __noasan int __hmap_init_level(struct hmap __arena *m __arg_arena, u32 first,
				      u32 block_size, u32 bits, u32 nr_bits)
{
	u64 i, b, nr = 1ull << (nr_bits & 31);
	hmap_node_ptr sent;

	for (i = zero; i < nr && can_loop; i++) {
		sent = &m->blocks[(first + i / block_size) % HMAP_MAX_BLOCKS][i % block_size];
		b = nr_bits == bits ? i : 2 * i + 1;
		sent->next = NULL;
		sent->hash = b << (64 - bits);
		sent->val = 0;
		sent->gen = 0;
		sent->kind = HMAP_SENTINEL;
	}
	return i == nr ? 0 : -E2BIG;
}

/*
 * A level of 2^nr_bits sentinels for a table of 2^bits buckets, unlinked: level 0 (all
 * buckets) when nr_bits == bits, else the odd buckets. 0, or -ENOMEM with nothing kept.
 * Inline: its allocations stay one frame below the caller.
 */
static __always_inline __noasan int make_level(struct hmap __arena *m, u32 level, u32 bits,
					       u32 nr_bits)
{
	u32 first = m->nr_blocks, block_size;

	block_size = alloc_blocks(m, 1u << (nr_bits & 31));
	if (!block_size)
		return -ENOMEM;
	if (!__hmap_init_level(m, first, block_size, bits, nr_bits)) {
		m->level_block[level % (HMAP_MAX_BITS + 1)] = first;
		return 0;
	}
	free_blocks(m, first);
	return -ENOMEM;
}

/*
 * Under the lock: link sentinel sent after the last node before it, walking from pred (a
 * sentinel before it). Linking one already linked (a doubling cut short and resumed)
 * changes nothing. 0, or -EFAULT on a damaged list.
 */
static __always_inline __noasan int link_one(hmap_node_ptr pred, hmap_node_ptr sent)
{
	u64 sh = sent->hash, prev = 0;
	hmap_node_ptr next;

	while (can_loop) {
		next = pred->next;
		if (next == sent)
			return 0;
		/* Before the first node past the sentinel's place: (hash, kind) order. */
		if (!next || next->hash > sh || (next->hash == sh && next->kind == HMAP_ENTRY)) {
			WRITE_ONCE(sent->next, next);
			/* sent's link before sent is reachable: pairs with the readers' acquire. */
			smp_store_release(&pred->next, sent);
			return 0;
		}
		/* Another sentinel of this hash, or nodes out of order: damage. */
		if ((next->hash == sh && next->kind == HMAP_SENTINEL) || next->hash < prev)
			return -EFAULT;
		prev = next->hash;
		pred = next;
	}
	return -EFAULT;
}

/*
 * Link the sentinels of the doubling to bits + 1 in region s, under its lock: a step
 * (it calls nothing), verified once. 0, -ETIMEDOUT (the lock), or -EFAULT (damage).
 */
__weak __noasan int __hmap_link_region(struct hmap __arena *m __arg_arena, u32 bits, u32 s)
{
	u32 per = 1u << ((bits - HMAP_STRIPE_BITS) & 31), base_bits = m->base_bits, i;
	struct hmap_stripe __arena *st = &m->stripes[s % HMAP_STRIPES];
	int ret = 0;
	u64 b;

	arena_subprog_init();
	if (arena_spin_lock(&st->lock)) {
		atomic_add(&m->lock_timeouts, 1);
		return -ETIMEDOUT;
	}
	for (i = zero; i < per && can_loop; i++) {
		b = (u64)s * per + i;
		if (link_one(sentinel_of(m, b, bits, base_bits),
			     sentinel_of(m, 2 * b + 1, bits + 1, base_bits))) {
			ret = -EFAULT;
			break;
		}
	}
	arena_spin_unlock(&st->lock);
	return ret ?: (i == per ? 0 : -EFAULT);
}

/*
 * The doubling from 2^bits buckets, once its new level's blocks are there (from block
 * first on, block_size sentinels each; nothing new when m->pending says a doubling cut
 * short is resumed): the sentinels filled, then linked region by region. A step of its
 * own, so that grow()'s callers walk a call, not its loops. 0, -E2BIG (the sentinels
 * could not be filled: the caller frees the blocks), -ETIMEDOUT, -EAGAIN or -EFAULT.
 */
__weak __noasan int __hmap_grow_level(struct hmap __arena *m __arg_arena, u32 bits, u32 first,
				      u32 block_size)
{
	u32 s;
	int ret;

	arena_subprog_init();
	if (!m->pending) {
		if (__hmap_init_level(m, first, block_size, bits + 1, bits))
			return -E2BIG;
		m->level_block[(bits + 1 - m->base_bits) % (HMAP_MAX_BITS + 1)] = first;
		m->pending = bits + 1 - m->base_bits;
	}
	for (s = zero; s < HMAP_STRIPES && can_loop; s++) {
		ret = __hmap_link_region(m, bits, s);
		if (ret)
			return ret;
	}
	if (s != HMAP_STRIPES)
		return -EAGAIN;
	/* Every sentinel linked: readers and writers may use the new buckets. */
	smp_store_release(&m->bits, bits + 1);
	m->pending = 0;
	m->grows++;
	return 0;
}

/*
 * Double the table: one caller at a time (-EBUSY for the others). 0; -ENOMEM when its
 * memory could not be had (an insert's next try waits HMAP_GROW_RETRY_NS); -ETIMEDOUT
 * when a region's lock could not be had (the next call resumes); -E2BIG at HMAP_MAX_BITS.
 * Inline in hmap_grow and in the inserts that trigger it: the sentinels' memory comes
 * from the call's own frame, and the rest is steps.
 */
static __always_inline __noasan int grow(struct hmap __arena *m)
{
	u32 bits, first = 0, block_size = 0;
	int ret = 0;

	if (cmpxchg(&m->growing, 0, 1) != 0)
		return -EBUSY;
	bits = map_bits(m->bits, m->base_bits);
	if (!bits || bits >= HMAP_MAX_BITS) {
		ret = bits ? -E2BIG : -EFAULT;
		goto out;
	}
	if (!m->pending) {
		/* The new level's memory, from this frame; the rest is a step. */
		first = m->nr_blocks;
		block_size = alloc_blocks(m, 1u << bits);
		if (!block_size) {
			/* The callers say so (grow_failed()): not from here, inside their loops. */
			m->grow_failures++;
			WRITE_ONCE(m->grow_after_ns, bpf_ktime_get_ns() + HMAP_GROW_RETRY_NS);
			ret = -ENOMEM;
			goto out;
		}
	}
	ret = __hmap_grow_level(m, bits, first, block_size);
	if (ret == -E2BIG)
		free_blocks(m, first);	/* its sentinels could not be filled */
out:
	if (ret == -EFAULT)
		arena_stderr("hmap: map %llx is damaged: no doubling", (u64)m);
	/* This doubling's stores before the next grower's compare-and-swap of growing. */
	smp_store_release(&m->growing, 0);
	return ret;
}

/* A doubling that found no memory, logged: ret. */
static __always_inline __noasan int grow_failed(struct hmap __arena *m, int ret)
{
	if (ret == -ENOMEM)
		arena_stderr("hmap: cannot grow map %llx to %llu buckets: out of memory", (u64)m,
			     2ull << map_bits(m->bits, m->base_bits));
	return ret;
}

__weak __noasan int hmap_grow(struct hmap __arena *m __arg_arena)
{
	if (!map_ok(__func__, m))
		return -EINVAL;
	return grow_failed(m, grow(m));
}

__weak __noasan int hmap_reserve(struct hmap __arena *m __arg_arena, u32 capacity)
{
	u32 want = HMAP_MIN_BITS, bits, i, tries = zero;
	u64 nr, pieces;
	int ret;

	if (!map_ok(__func__, m))
		return -EINVAL;
	/* Buckets for capacity entries at HMAP_LOAD per bucket: a power of two. */
	while (want < HMAP_MAX_BITS && ((u64)HMAP_LOAD << want) < capacity && can_loop)
		want++;
	/* Opaque from here: a target the verifier knows would split the loop's states. */
	want += zero;
	for (i = zero; i < HMAP_MAX_BITS + HMAP_RESERVE_TRIES && can_loop; i++) {
		/* Pairs with hmap_grow()'s release: the buckets of bits are linked. */
		bits = map_bits(smp_load_acquire(&m->bits), m->base_bits);
		if (!bits)
			return -EFAULT;
		if (bits >= want)
			break;
		/*
		 * Room made first for the doubling's blocks of sentinels, so that its plain
		 * arena_malloc() calls find it.
		 */
		nr = 1ull << bits;
		ret = arena_heap_reserve_small(nr < BLOCK_SIZE ?
					       nr * sizeof(struct hmap_node) : HMAP_BLOCK_BYTES,
					       nr < BLOCK_SIZE ? 1 : nr / BLOCK_SIZE);
		if (ret)
			return ret;
		ret = grow(m);
		/*
		 * A sleepable program may move to another CPU between the reservation and the
		 * doubling, whose heap then has no room: reserve there and try again. An
		 * insert's doubling under way (-EBUSY) is waited for the same way.
		 */
		if ((ret == -ENOMEM || ret == -EBUSY) && ++tries < HMAP_RESERVE_TRIES)
			continue;
		if (ret)
			return grow_failed(m, ret);
	}
	/* The doublings of this call or another, as hmap_grow() released them. */
	if (map_bits(smp_load_acquire(&m->bits), m->base_bits) < want)
		return -EAGAIN;
	/* And room on this CPU for the entries to come: a bulk build needs nothing more. */
	nr = hmap_count(m);
	pieces = (u64)HMAP_LOAD << HMAP_MAX_BITS;	/* as many as the largest table is for */
	if (capacity < pieces)
		pieces = capacity;
	return pieces > nr ? arena_heap_reserve_small(sizeof(struct hmap_node), pieces - nr) : 0;
}

__weak __noasan u64 hmap_create_addr(u32 capacity)
{
	struct hmap __arena *m;
	hmap_node_ptr sent;
	u32 bits = HMAP_MIN_BITS;
	u64 b, nb;

	while (bits < HMAP_MAX_BITS && ((u64)HMAP_LOAD << bits) < capacity && can_loop)
		bits++;
	m = arena_malloc_call(sizeof(*m));
	if (!m)
		goto nomem;
	arena_memset(m, 0, sizeof(*m));
	m->base_bits = bits;
	if (make_level(m, 0, bits, bits)) {
		arena_free_call(m);
		goto nomem;
	}
	/* The sentinels in order: nobody else sees the map yet. */
	nb = 1ull << bits;
	for (b = zero; b + 1 < nb && can_loop; b++) {
		sent = sentinel_of(m, b, bits, bits);
		sent->next = sentinel_of(m, b + 1, bits, bits);
	}
	if (b + 1 < nb) {
		free_blocks(m, 0);
		arena_free_call(m);
		goto nomem;
	}
	m->bits = bits;
	/* Every field before the magic, which map_ok() reads with an acquire. */
	smp_store_release(&m->magic, HMAP_MAGIC);
	return (u64)m;
nomem:
	arena_stderr(
		"hmap_create: out of memory for %u entries (a sleepable program may create a small map and hmap_reserve() it)",
		capacity);
	return 0;
}

/*
 * Free the entries of a chain from node on (sentinels are skipped: their memory is a
 * block's), up to HMAP_FREE_MAX nodes: 0, or -E2BIG when more were left.
 */
static __always_inline __noasan int free_all(hmap_node_ptr node)
{
	hmap_node_ptr next;
	u32 i;

	for (i = zero; node && i < HMAP_FREE_MAX && can_loop; i++) {
		next = node->next;
		if (node->kind == HMAP_ENTRY)
			arena_free_call(node);
		node = next;
	}
	return node ? -E2BIG : 0;
}

__weak __noasan int hmap_destroy(struct hmap __arena *m __arg_arena)
{
	int ret = 0;
	u32 i;

	if (!map_ok(__func__, m))
		return -EINVAL;
	if (cmpxchg(&m->growing, 0, 1) != 0) {
		arena_stderr("%s: map %llx is growing: in use", __func__, (u64)m);
		return -EBUSY;
	}
	m->magic = 0;
	/* Bucket 0's sentinel starts the list. */
	if (m->nr_blocks)
		ret = free_all(m->blocks[0]);
	for (i = zero; i < HMAP_STRIPES && can_loop; i++)
		ret = free_all(m->stripes[i].free) ?: ret;
	free_blocks(m, 0);
	if (ret)
		arena_stderr("%s: map %llx: more entries than one call frees: some leaked",
			     __func__, (u64)m);
	arena_free_call(m);
	return ret;
}
