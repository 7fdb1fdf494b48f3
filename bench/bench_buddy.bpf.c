// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Allocator benchmark programs, driven by bench/bench.c: malloc+free pairs, batches
 * allocated then freed, and a mixed workload whose memory overhead is measured.
 */
#include <libarena/common.h>

char _license[] SEC("license") = "Dual BSD/GPL";

struct bench_args {
	u32 ops;		/* in: operations to do */
	u32 size;		/* in: block size (0: the mixed workload) */
	u32 done;		/* out: operations done */
	u32 failed;		/* out: allocations that returned NULL */
	u64 live_bytes;		/* out: bytes asked for and still allocated (mixed) */
	u64 block_bytes;	/* out: bytes of the blocks and runs holding them */
	u64 pages_held;		/* out: arena pages the allocator holds, metadata included */
};

struct buddy __arena_global bench_b;

#define BATCH 256
u64 __arena_global batch[BATCH];

SEC("syscall")
int bench_reset(struct bench_args *a)
{
	if (bench_b.magic == BUDDY_MAGIC)
		buddy_destroy(&bench_b);
	return buddy_init(&bench_b);
}

SEC("syscall")
int bench_pairs(struct bench_args *a)
{
	void __arena *p;
	u32 i;

	a->failed = 0;
	for (i = zero; i < a->ops && can_loop; i++) {
		p = buddy_alloc(&bench_b, a->size);
		if (!p) {
			a->failed++;
			continue;
		}
		buddy_free(&bench_b, p);
	}
	a->done = i;
	return 0;
}

SEC("syscall")
int bench_batch(struct bench_args *a)
{
	u32 i, k, n = 0;

	a->failed = 0;
	for (i = zero; i < a->ops / BATCH && can_loop; i++) {
		for (k = 0; k < BATCH && can_loop; k++) {
			batch[k] = (u64)buddy_alloc(&bench_b, a->size);
			a->failed += !batch[k];
		}
		for (k = 0; k < BATCH && can_loop; k++)
			buddy_free(&bench_b, (void __arena *)batch[k]);
		n += BATCH;
	}
	a->done = n;
	return 0;
}

/* Mixed sizes, half of them freed again in between: what stays is live_bytes. */
#define MIX 2048
u64 __arena_global mix_ptr[MIX];

SEC("syscall")
int bench_mixed(struct bench_args *a)
{
	u64 x, size, live;
	u32 i;

	/* Opaque starts: the verifier must not follow the generator's constant values. */
	x = zero + 0x9e3779b97f4a7c15ull;
	live = zero;
	for (i = zero; i < MIX && can_loop; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		/* Mostly small objects, some medium, a few large: 16 B .. 64 KiB. */
		switch (x % 8) {
		case 0: case 1: case 2: size = 16 + x % 48; break;
		case 3: case 4: size = 64 + x % 192; break;
		case 5: size = 256 + x % 768; break;
		case 6: size = 1024 + x % 3072; break;
		default: size = 4096 + x % 61440; break;
		}
		mix_ptr[i & (MIX - 1)] = (u64)buddy_alloc(&bench_b, size);
		if (!mix_ptr[i & (MIX - 1)])
			return -ENOMEM;
		live += size;
		/* Free every third allocation right away: holes as in real use. */
		if (i % 3 == 2) {
			buddy_free(&bench_b, (void __arena *)mix_ptr[i & (MIX - 1)]);
			mix_ptr[i & (MIX - 1)] = 0;
			live -= size;
		}
	}
	a->live_bytes = live;
	a->done = i;
	a->block_bytes = bench_b.stats.run_pages_in_use * 4096;
	for (i = zero; i < BUDDY_ORDERS && can_loop; i++)
		a->block_bytes += bench_b.stats.blocks_in_use[i & 15] << (i + BUDDY_MIN_SHIFT);
	a->pages_held = bench_b.stats.chunks_held * (BUDDY_CHUNK_PAGES + BUDDY_META_PAGES) +
			bench_b.stats.run_pages_in_use;
	return 0;
}
