// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The ordered maps side by side (bench/bench_trees.c drives it): the B-tree, the
 * red-black tree and, for lookups, a BPF hash map, each filled with the same N random
 * unique keys. tree_op runs one operation N times and reports the nanoseconds it took:
 *
 *   BUILD    insert the N keys into an empty map (the allocator's reserve is filled
 *            first, outside the timing)
 *   HIT      look each key up again, in another order
 *   MISS     look up N keys that are not there
 *   SCAN     walk every pair in key order (the trees: cursor or next-node calls)
 *   RANGE    the same with the range call into an arena array, 256 pairs a call
 *   REMOVE   remove every key, in another order, and destroy the empty map
 */
#include <libarena/common.h>
#include <libarena/heap.h>
#include <libarena/btree.h>
#include <libarena/rbtree.h>

char _license[] SEC("license") = "Dual BSD/GPL";

enum { T_BTREE, T_RBTREE, T_HASH };
enum { TOP_BUILD, TOP_HIT, TOP_MISS, TOP_SCAN, TOP_RANGE, TOP_REMOVE };

struct tree_args {
	u32 kind, op, keys, height;
	u64 ns;		/* the operation's time, all N of it */
	u64 done;	/* operations that did what they should (N when all went well) */
	u64 bytes;	/* BUILD: bytes the map holds in the allocator's classes */
};

#define MAX_KEYS	(1u << 20)
#define RANGE_CHUNK	256

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, u64);
	__type(value, u64);
} hmap SEC(".maps");

struct btree __arena_global *bench_bt;
struct rbtree __arena_global *bench_rb;
struct bt_pair __arena_global bt_out[RANGE_CHUNK];
struct rb_pair __arena_global rb_out[RANGE_CHUNK];

/* A bijection of u64: distinct i give distinct, well spread keys. */
static __always_inline u64 key_of(u64 i)
{
	i *= 0x9e3779b97f4a7c15ull;
	i ^= i >> 29;
	i *= 0xbf58476d1ce4e5b9ull;
	return i ^ (i >> 32);
}

/* Another order of 0 .. n - 1 (n a power of two): an odd multiplier permutes them. */
static __always_inline u64 shuffled(u64 i, u32 n)
{
	return (i * 2654435761u) & (n - 1);
}

static __always_inline u64 class_bytes(u64 size)
{
	return arena_heap_class_size(arena_heap_class(size));
}

__weak int bench_build(u32 kind, u32 n, u64 *ns)
{
	u64 i, v, t0, done = zero;

	if (!ns)
		return -EINVAL;
	t0 = bpf_ktime_get_ns();
	for (i = zero; i < n && can_loop; i++) {
		v = i;
		if (kind == T_BTREE)
			done += !bt_insert(bench_bt, key_of(i), i, false);
		else if (kind == T_RBTREE)
			done += !rb_insert(bench_rb, key_of(i), i);
		else
			done += !bpf_map_update_elem(&hmap, &(u64){ key_of(i) }, &v, BPF_NOEXIST);
	}
	*ns = bpf_ktime_get_ns() - t0;
	return done;
}

__weak int bench_lookup(u32 kind, u32 n, u32 miss, u64 *ns)
{
	u64 i, k, v = 0, t0, done = zero;

	if (!ns)
		return -EINVAL;
	t0 = bpf_ktime_get_ns();
	for (i = zero; i < n && can_loop; i++) {
		k = miss ? key_of(n + i) : key_of(shuffled(i, n));
		if (kind == T_BTREE)
			done += !bt_find(bench_bt, k, &v) != !!miss;
		else if (kind == T_RBTREE)
			done += !rb_find(bench_rb, k, &v) != !!miss;
		else
			done += !bpf_map_lookup_elem(&hmap, &k) == !!miss;
	}
	*ns = bpf_ktime_get_ns() - t0;
	return done;
}

/* In key order: each key must be above the one before. */
__weak int bench_scan(u32 kind, u64 *ns)
{
	struct rbnode __arena *node;
	u64 t0, done = zero, last = 0;
	struct bt_cursor c;
	int ret;

	if (!ns)
		return -EINVAL;
	t0 = bpf_ktime_get_ns();
	if (kind == T_BTREE) {
		for (ret = bt_first(bench_bt, &c); !ret && can_loop; ret = bt_next(&c)) {
			done += !done || c.key > last;
			last = c.key;
		}
	} else {
		for (node = rb_first(bench_rb); node && can_loop; node = rb_next(node)) {
			done += !done || node->key > last;
			last = node->key;
		}
	}
	*ns = bpf_ktime_get_ns() - t0;
	return done;
}

__weak int bench_range(u32 kind, u64 *ns)
{
	u64 t0, done = zero, lo = 0, last = 0;
	int got, i;

	if (!ns)
		return -EINVAL;
	t0 = bpf_ktime_get_ns();
	while (can_loop) {
		if (kind == T_BTREE) {
			got = bt_range(bench_bt, lo, ~0ull, bt_out, RANGE_CHUNK);
			last = got > 0 ? bt_out[(got - 1) & (RANGE_CHUNK - 1)].key : 0;
		} else {
			got = rb_range(bench_rb, lo, ~0ull, rb_out, RANGE_CHUNK);
			last = got > 0 ? rb_out[(got - 1) & (RANGE_CHUNK - 1)].key : 0;
		}
		if (got <= 0)
			break;
		done += got;
		if (got < RANGE_CHUNK || last == ~0ull)
			break;
		lo = last + 1;
	}
	*ns = bpf_ktime_get_ns() - t0;
	i = done;
	return i;
}

__weak int bench_remove(u32 kind, u32 n, u64 *ns)
{
	u64 i, k, t0, done = zero;

	if (!ns)
		return -EINVAL;
	t0 = bpf_ktime_get_ns();
	for (i = zero; i < n && can_loop; i++) {
		k = key_of(shuffled(i, n));
		if (kind == T_BTREE)
			done += !bt_remove(bench_bt, k);
		else if (kind == T_RBTREE)
			done += !rb_remove(bench_rb, k);
		else
			done += !bpf_map_delete_elem(&hmap, &k);
	}
	*ns = bpf_ktime_get_ns() - t0;
	return done;
}

SEC("syscall")
int tree_op(struct tree_args *a)
{
	u32 n = a->keys, kind = a->kind;
	u64 ns = 0;
	int ret = 0;

	if (n > MAX_KEYS || n & (n - 1))
		return -EINVAL;
	switch (a->op) {
	case TOP_BUILD:
		/* No tree of an earlier round may be used if this one is not made. */
		bench_bt = NULL;
		bench_rb = NULL;
		if (kind == T_BTREE) {
			/* Room for two-thirds full nodes, made ahead and not timed. */
			if (arena_heap_reserve(BT_NODE_SIZE, 3 * n / (2 * BT_MAX_KEYS) + 8))
				return -ENOMEM;
			bench_bt = bt_create();
			if (!bench_bt)
				return -ENOMEM;
		} else if (kind == T_RBTREE) {
			if (arena_heap_reserve(sizeof(struct rbnode), n))
				return -ENOMEM;
			bench_rb = rb_create(RB_ALLOC, RB_DEFAULT);
			if (!bench_rb)
				return -ENOMEM;
		}
		ret = bench_build(kind, n, &ns);
		if (kind == T_BTREE) {
			a->bytes = bench_bt->nr_nodes * class_bytes(BT_NODE_SIZE) +
				   class_bytes(sizeof(struct btree));
			a->height = bench_bt->height;
		} else if (kind == T_RBTREE) {
			a->bytes = bench_rb->nr_nodes * class_bytes(sizeof(struct rbnode)) +
				   class_bytes(sizeof(struct rbtree));
		}
		break;
	case TOP_HIT:
	case TOP_MISS:
		ret = bench_lookup(kind, n, a->op == TOP_MISS, &ns);
		break;
	case TOP_SCAN:
		ret = kind == T_HASH ? 0 : bench_scan(kind, &ns);
		break;
	case TOP_RANGE:
		ret = kind == T_HASH ? 0 : bench_range(kind, &ns);
		break;
	case TOP_REMOVE:
		ret = bench_remove(kind, n, &ns);
		if (kind == T_BTREE && bt_destroy(bench_bt))
			return -EUCLEAN;
		if (kind == T_RBTREE && rb_destroy(bench_rb))
			return -EUCLEAN;
		bench_bt = NULL;
		bench_rb = NULL;
		break;
	default:
		return -EINVAL;
	}
	if (ret < 0)
		return ret;
	a->done = ret;
	a->ns = ns;
	return 0;
}
