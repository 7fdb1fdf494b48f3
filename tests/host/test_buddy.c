// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The buddy allocator compiled natively over mmap: random operation sequences checked
 * against a model (every live block keeps its own bytes, statistics agree, bad frees
 * change nothing), then threads sharing one allocator, under the sanitizers.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/buddy.h>
#include "check.h"

char libarena_host_arena;

#define LIVE 512

struct live {
	u8 *p;
	u64 size;
	u8 tag;
};

static struct buddy b;

/* Each test starts from a new allocator, whatever the one before left. */
static int fresh(void)
{
	if (b.magic == BUDDY_MAGIC)
		buddy_destroy(&b);
	return buddy_init(&b);
}

/* Blocks in the CPUs' caches: exact while nobody allocates or frees. */
static u64 cached(struct buddy *a)
{
	u64 n = 0;

	for (int c = 0; c < BUDDY_CACHE_CPUS; c++)
		for (int o = 0; o < BUDDY_CACHE_ORDERS; o++)
			n += a->cache[c].nr[o];
	return n;
}

/* Blocks spilled from a cache onto the deferred list, which the next allocation frees. */
static u64 deferred(struct buddy *a)
{
	u64 n = 0;

	for (u64 p = a->deferred; p && n < (1 << 20); p = *(u64 *)(uintptr_t)p)
		n++;
	return n;
}

/* Blocks the program has: the statistics count cached and deferred ones as in use too. */
static u64 in_use(struct buddy *a)
{
	u64 n = 0;

	for (int o = 0; o < BUDDY_ORDERS; o++)
		n += a->stats.blocks_in_use[o];
	return n - cached(a) - deferred(a);
}

/* The first and last 256 bytes of a block carry its pattern: overlaps show up there. */
#define EDGE 256

static void stamp(struct live *l)
{
	for (u64 i = 0; i < l->size; i++) {
		if (i == EDGE && l->size > 2 * EDGE)
			i = l->size - EDGE;
		l->p[i] = l->tag + i;
	}
}

static bool intact(const struct live *l)
{
	for (u64 i = 0; i < l->size; i++) {
		if (i == EDGE && l->size > 2 * EDGE)
			i = l->size - EDGE;
		if (l->p[i] != (u8)(l->tag + i))
			return false;
	}
	return true;
}

extern struct buddy_registry buddy_registry;

/*
 * The shape buddy.h promises, from the metadata of every chunk b owns: each chunk's
 * in_use count is its used blocks, a spare is a chunk with none, and two free buddies
 * are apart only as the one pair of their order that lazy[] names.
 */
static int check_shape(struct buddy *a, int op)
{
	u64 base = ARENA_USER_BASE, spares = 0, held = 0;
	u32 pairs[BUDDY_ORDERS] = {};

	for (u32 s = 0; s < BUDDY_NR_SLOTS; s++) {
		u8 *meta = (u8 *)(uintptr_t)(base + BUDDY_META_START + (u64)s * BUDDY_META_SIZE);
		u32 used = 0;

		if (buddy_registry.owner[s] != (u64)(uintptr_t)a)
			continue;
		held++;
		for (u32 u = 0; u < BUDDY_META_SIZE; ) {
			u8 m = meta[u], o = m & BUDDY_META_ORDER;
			u32 bu = u ^ (1u << o);

			CHECK(m == (BUDDY_META_FREE | o) || m == (BUDDY_META_USED | o) ||
			      m == (BUDDY_META_CACHED | o),
			      "op %d: slot %u unit %u: no block starts there (%#x)",
			      op, s, u, m);
			/* A block in a CPU's cache is in use to its chunk. */
			used += !!(m & (BUDDY_META_USED | BUDDY_META_CACHED));
			/* Count each pair once, from its lower block. */
			if ((m & BUDDY_META_FREE) && o < BUDDY_MAX_ORDER && bu > u &&
			    meta[bu] == m) {
				u64 lo = base + BUDDY_WINDOW_START + ((u64)s << BUDDY_CHUNK_SHIFT) +
					 ((u64)u << BUDDY_MIN_SHIFT);
				u64 hi = lo + ((u64)BUDDY_MIN_SIZE << o);

				pairs[o]++;
				CHECK((a->lazy_mask & (1u << o)) &&
				      (a->lazy[o] == BUDDY_LAZY(lo, o) ||
				       a->lazy[o] == BUDDY_LAZY(hi, o)),
				      "op %d: order %u: a pair apart that lazy[] does not name",
				      op, o);
			}
			u += 1u << o;
		}
		CHECK(buddy_registry.in_use[s] == used, "op %d: slot %u: in_use %u, %u used",
		      op, s, buddy_registry.in_use[s], used);
		spares += !used;
	}
	for (u32 o = 0; o < BUDDY_ORDERS; o++)
		CHECK(pairs[o] <= 1, "op %d: order %u: %u pairs apart", op, o, pairs[o]);
	CHECK(a->stats.chunks_held == held && a->stats.chunks_spare == spares,
	      "op %d: %llu held, %llu spare; the metadata says %llu, %llu", op,
	      (unsigned long long)a->stats.chunks_held,
	      (unsigned long long)a->stats.chunks_spare, (unsigned long long)held,
	      (unsigned long long)spares);
	return 0;
}

static int test_model(void)
{
	static struct live live[LIVE];
	int n = 0, ops = 200000;
	u64 size;

	CHECK(fresh() == 0, "");
	CHECK(buddy_init(&b) == -EBUSY, "");
	srandom(42);
	for (int op = 0; op < ops; op++) {
		int r = random() % 100, k;

		if (r < 50 && n < LIVE) {
			/* Sizes across every order, odd ones included, and some page runs. */
			switch (random() % 10) {
			case 0:
				size = 1 + random() % 16;
				break;
			case 9:
				size = 1 + random() % (BUDDY_MAX_SIZE + 300000);
				break;
			default:
				size = 1 + random() % (1u << (random() % 14 + 4));
				break;
			}
			live[n].p = buddy_alloc(&b, size);
			CHECK(live[n].p, "alloc %llu failed", (unsigned long long)size);
			CHECK(((uintptr_t)live[n].p & 7) == 0, "");
			live[n].size = size;
			live[n].tag = random();
			stamp(&live[n]);
			n++;
		} else if (r < 90 && n) {
			k = random() % n;
			CHECK(intact(&live[k]), "block %p of %llu bytes was overwritten",
			      live[k].p, (unsigned long long)live[k].size);
			CHECK(buddy_free(&b, live[k].p) == 0, "");
			/* Freeing again, or inside another block, must change nothing. */
			CHECK(buddy_free(&b, live[k].p) == -EINVAL, "double free accepted");
			live[k] = live[--n];
			if (n && live[0].size > 16)
				CHECK(buddy_free(&b, live[0].p + 16) == -EINVAL, "interior free");
		} else if (r < 92) {
			CHECK(buddy_trim(&b) >= 0, "");
			CHECK(cached(&b) == 0, "trim left %llu cached",
			      (unsigned long long)cached(&b));
		} else if (r < 93) {
			u64 had = cached(&b);

			CHECK(buddy_flush_caches(&b) == (int)had, "");
			CHECK(cached(&b) == 0 && !b.deferred, "");
		}
		CHECK(in_use(&b) + b.stats.runs_in_use == (u64)n, "op %d: %llu in use, %d live",
		      op, (unsigned long long)(in_use(&b) + b.stats.runs_in_use), n);
		if (op % 500 == 0 && check_shape(&b, op))
			return 1;
	}
	while (n) {
		CHECK(intact(&live[n - 1]), "");
		CHECK(buddy_free(&b, live[--n].p) == 0, "");
	}
	CHECK(in_use(&b) == 0 && b.stats.runs_in_use == 0, "");
	if (check_shape(&b, ops))
		return 1;
	CHECK(buddy_trim(&b) >= 0 && b.stats.chunks_held == 1, "%llu held",
	      (unsigned long long)b.stats.chunks_held);
	/* Trimming merged every pair: the one chunk left is one free block. */
	CHECK(b.lazy_mask == 0 && b.free_head[BUDDY_MAX_ORDER] && b.stats.coalesces,
	      "lazy %x, coalesces %llu", b.lazy_mask, (unsigned long long)b.stats.coalesces);
	if (check_shape(&b, ops))
		return 1;
	CHECK(b.stats.corruptions == 0 && b.stats.lock_timeouts == 0, "");
	printf(
	       "    %d operations, %llu allocs, %llu frees left apart, %llu chunks returned, %llu bad calls refused\n",
	       ops, (unsigned long long)b.stats.allocs, (unsigned long long)b.stats.lazy_frees,
	       (unsigned long long)b.stats.chunks_returned,
	       (unsigned long long)b.stats.bad_calls);
	CHECK(buddy_destroy(&b) == 0, "");
	return 0;
}

/*
 * A scribbled free list: the allocator notices, drops the list, and keeps working. 64
 * bytes go through a CPU's cache, 8 KiB through the lists.
 */
static int corrupted_list(u64 size)
{
	u8 *p, *q;

	CHECK(fresh() == 0, "");
	p = buddy_alloc(&b, size);
	q = buddy_alloc(&b, size);
	CHECK(p && q, "");
	CHECK(buddy_free(&b, p) == 0, "");
	/* p is on a list now; point its link into the middle of nowhere. */
	((u64 *)p)[0] = 0x1234567;
	CHECK(buddy_alloc(&b, size) != NULL, "");
	CHECK(buddy_alloc(&b, size) != NULL, "");
	CHECK(b.stats.corruptions >= 1, "");
	CHECK(buddy_destroy(&b) == 0, "");
	return 0;
}

static int test_corrupted_list(void)
{
	return corrupted_list(64) || corrupted_list(8192);
}

/*
 * The caches keep the checks: a cached block freed again, a block freed into one cache
 * while another thread frees it too (only one free may win), a flush that finds a
 * cache busy leaves it alone.
 */
static int test_cache_checks(void)
{
	u8 *p, *q;

	CHECK(fresh() == 0, "");
	host_cpu = 1;
	p = buddy_alloc(&b, 100);
	CHECK(p && b.stats.cache_refills == 1 && cached(&b) == BUDDY_CACHE_BATCH - 1, "");
	CHECK(buddy_free(&b, p) == 0 && cached(&b) == BUDDY_CACHE_BATCH, "");
	CHECK(buddy_free(&b, p) == -EINVAL && b.stats.bad_calls == 1, "cached block freed twice");
	/* From another CPU's cache too. */
	host_cpu = 2;
	CHECK(buddy_free(&b, p) == -EINVAL && b.stats.bad_calls == 2, "");
	q = buddy_alloc(&b, 100);
	CHECK(q && q != p, "another CPU's cached block handed out");
	CHECK(buddy_free(&b, q) == 0, "");
	host_cpu = 1;
	CHECK(buddy_alloc(&b, 100) == p, "the cache is last in, first out");
	CHECK(buddy_free(&b, p) == 0, "");
	b.cache[1].busy = 1;
	CHECK(buddy_flush_caches(&b) == BUDDY_CACHE_BATCH, "only CPU 2's blocks");
	b.cache[1].busy = 0;
	CHECK(buddy_flush_caches(&b) == BUDDY_CACHE_BATCH, "");
	CHECK(cached(&b) == 0 && in_use(&b) == 0 && b.stats.allocs == b.stats.frees, "");
	host_cpu = -1;
	CHECK(check_shape(&b, 0) == 0, "");
	CHECK(buddy_destroy(&b) == 0, "");
	return 0;
}

#define THREADS 4
#define ROUNDS 20000

static void *worker(void *arg)
{
	u8 *mine[16] = {};
	u64 x = (uintptr_t)arg * 7919 + 1;

	for (int i = 0; i < ROUNDS; i++) {
		int k;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		k = x % 16;
		if (mine[k]) {
			if (mine[k][0] != (u8)(uintptr_t)arg || buddy_free(&b, mine[k]))
				return (void *)1;
			mine[k] = NULL;
		} else {
			mine[k] = buddy_alloc(&b, 1 + x % 2048);
			if (!mine[k])
				return (void *)1;
			mine[k][0] = (u8)(uintptr_t)arg;
		}
	}
	for (int k = 0; k < 16; k++)
		if (mine[k] && buddy_free(&b, mine[k]))
			return (void *)1;
	return NULL;
}

static int test_threads(void)
{
	pthread_t t[THREADS];
	void *ret;
	int bad = 0;

	CHECK(fresh() == 0, "");
	for (long i = 0; i < THREADS; i++)
		CHECK(!pthread_create(&t[i], NULL, worker, (void *)(i + 1)), "");
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], &ret);
		bad += ret != NULL;
	}
	CHECK(bad == 0, "%d threads failed", bad);
	/* What the caches (and the deferred list) hold goes back: every block is free. */
	CHECK(buddy_flush_caches(&b) >= 0 && cached(&b) == 0 && !b.deferred, "");
	CHECK(in_use(&b) == 0, "%llu in use", (unsigned long long)in_use(&b));
	CHECK(b.stats.allocs == b.stats.frees, "%llu allocs, %llu frees",
	      (unsigned long long)b.stats.allocs, (unsigned long long)b.stats.frees);
	CHECK(b.stats.cache_refills && b.stats.cache_spills, "");
	CHECK(b.stats.lock_timeouts == 0 && b.stats.corruptions == 0, "");
	CHECK(buddy_destroy(&b) == 0, "");
	return 0;
}

int main(void)
{
	/* The model makes thousands of bad calls on purpose: count them, do not print. */
	host_begin(true);
	host_run("host", "buddy_model", test_model);
	host_run("host", "buddy_corrupted_list", test_corrupted_list);
	host_run("host", "buddy_cache_checks", test_cache_checks);
	host_run("host", "buddy_threads", test_threads);
	return host_summary();
}
