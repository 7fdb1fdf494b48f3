// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The concurrent hash map against BPF_MAP_TYPE_HASH (bench/bench_hashmap.c drives it):
 * both hold the same N keys; hm_op runs lookups or updates of random existing keys on one
 * thread (one per CPU when run side by side) and reports the time they took.
 */
#include <libarena/common.h>
#include <libarena/heap.h>
#include <libarena/hashmap.h>

char _license[] SEC("license") = "Dual BSD/GPL";

enum { K_HMAP, K_BPF_HASH };
enum { HM_LOOKUP, HM_UPDATE };

struct hm_args {
	u32 kind, op, thread, keys;	/* keys: a power of two */
	u64 ops;			/* operations to run */
	u64 ns;				/* out: the time they took */
	u64 done;			/* out: operations that did what they should */
};

#define MAX_KEYS	(1u << 16)

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_KEYS);
	__type(key, u64);
	__type(value, u64);
} bpf_hash SEC(".maps");

struct hmap __arena_global *bench_map;

/* A bijection of u64: distinct i give distinct, well spread keys. */
static __always_inline u64 key_of(u64 i)
{
	return i * 0x9e3779b97f4a7c15ull + 12345;
}

/* Fill both maps with keys 0 .. keys - 1 (sleepable: the hash map is reserved first). */
SEC("syscall")
int hm_setup(struct hm_args *a)
{
	u64 i, v, done = zero;
	u32 n = a->keys;

	if (n > MAX_KEYS || (n & (n - 1)))
		return -EINVAL;
	if (bench_map)
		hmap_destroy(bench_map);
	bench_map = hmap_create(0);
	if (!bench_map || hmap_reserve(bench_map, n))
		return -ENOMEM;
	for (i = zero; i < n && can_loop; i++) {
		v = i;
		done += !hmap_insert(bench_map, key_of(i), i);
		done += !bpf_map_update_elem(&bpf_hash, &(u64){ key_of(i) }, &v, BPF_ANY);
	}
	a->done = done;
	return done == 2 * (u64)n ? 0 : -EIO;
}

SEC("syscall")
int hm_op(struct hm_args *a)
{
	u64 i, k, v = 0, x = a->thread * 0x2545f4914f6cdd1dull + 1, t0, done = zero;
	u64 mask = a->keys - 1, ops = a->ops, *p;
	struct hmap __arena *m = bench_map;
	u32 kind = a->kind, op = a->op;

	if (!m)
		return -ENOENT;
	t0 = bpf_ktime_get_ns();
	for (i = zero; i < ops && can_loop; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = key_of(x & mask);
		if (kind == K_HMAP) {
			if (op == HM_LOOKUP)
				done += !hmap_lookup(m, k, &v);
			else
				done += !hmap_update(m, k, i);
		} else {
			if (op == HM_LOOKUP) {
				p = bpf_map_lookup_elem(&bpf_hash, &k);
				done += !!p;
			} else {
				v = i;
				done += !bpf_map_update_elem(&bpf_hash, &k, &v, BPF_EXIST);
			}
		}
	}
	a->ns = bpf_ktime_get_ns() - t0;
	a->done = done;
	return 0;
}
