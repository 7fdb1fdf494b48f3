// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The buddy allocator: life cycle, every order, odd sizes, alignment, scrambled frees back
 * to a clean state, exhaustion and recovery, page runs, every bad input, and a parallel
 * stress test. Each test makes its own allocator (arena_malloc's tests: test_heap.bpf.c).
 */
#include <libarena/log.h>
#include <libarena/buddy.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

struct buddy __arena_global tb;
struct buddy __arena_global tb2;

#define NR_PTRS 512
u64 __arena_global ptrs[NR_PTRS];
u64 __arena_global sizes[NR_PTRS];

/* A fresh allocator whatever earlier tests left behind. */
static __noinline int fresh(struct buddy __arena *b)
{
	if (b->magic == BUDDY_MAGIC)
		buddy_destroy(b);
	return buddy_init(b);
}

/*
 * Write a pattern derived from (addr, tag) over size bytes, then check it. Global, so
 * verified once (not at every caller with its sizes, which the sanitizer build cannot
 * afford in test_buddy_every_order).
 */
__weak int fill(u64 addr, u64 size, u64 tag)
{
	u64 __arena *w = (u64 __arena *)addr;
	u8 __arena *p = (u8 __arena *)addr;
	u64 i, n = size / 8;

	for (i = zero; i < n && can_loop; i++)
		w[i] = addr ^ tag ^ i;
	for (i = n * 8; i < size && can_loop; i++)
		p[i] = (u8)(tag + i);
	return i == size ? 0 : -E2BIG;
}

__weak int verify(u64 addr, u64 size, u64 tag)
{
	u64 __arena *w = (u64 __arena *)addr;
	u8 __arena *p = (u8 __arena *)addr;
	u64 i, n = size / 8;

	for (i = zero; i < n && can_loop; i++)
		if (w[i] != (addr ^ tag ^ i)) {
			arena_stderr("%s: %llx + %llu: pattern broken", __func__, addr, i * 8);
			return -EUCLEAN;
		}
	for (i = n * 8; i < size && can_loop; i++)
		if (p[i] != (u8)(tag + i))
			return -EUCLEAN;
	return i == size ? 0 : -E2BIG;
}

/*
 * Blocks in b's CPU caches (exact while nobody else allocates or frees). Global: verified
 * once, not at each call.
 */
__weak u64 cached_blocks(struct buddy __arena *b __arg_arena)
{
	u32 i, c, o;
	u64 n = 0;

	/* One loop: nested ones over constants make the verifier walk every pair. */
	for (i = zero; i < BUDDY_CACHE_CPUS * BUDDY_CACHE_ORDERS && can_loop; i++) {
		c = i / BUDDY_CACHE_ORDERS;
		o = i % BUDDY_CACHE_ORDERS;
		n += b->cache[c & (BUDDY_CACHE_CPUS - 1)].nr[o];
	}
	return n;
}

/* Blocks the program has: the statistics count the cached ones as in use too. */
static __noinline u64 blocks_in_use(struct buddy __arena *b)
{
	u64 n = 0;
	int i;

	for (i = zero; i < BUDDY_ORDERS && can_loop; i++)
		n += b->stats.blocks_in_use[i & BUDDY_META_ORDER];
	return n - cached_blocks(b);
}

SEC("syscall")
int test_buddy_init_destroy_many(struct arena_test_ctx *ctx)
{
	u64 returned = 0;
	void __arena *p;
	int i;

	if (tb.magic == BUDDY_MAGIC)
		buddy_destroy(&tb);
	for (i = zero; i < 20 && can_loop; i++) {
		ARENA_ASSERT_EQ(buddy_init(&tb), 0);
		ARENA_ASSERT_EQ(buddy_init(&tb), -EBUSY);
		ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
		returned = tb.stats.chunks_returned;
		p = buddy_alloc(&tb, 100);
		ARENA_ASSERT(p);
		ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
		ARENA_ASSERT_EQ(tb.stats.chunks_returned, returned + 1);
		ARENA_ASSERT_EQ(tb.stats.chunks_held, 0);
		ARENA_ASSERT_EQ(buddy_destroy(&tb), -EINVAL);
		ARENA_ASSERT(!buddy_alloc(&tb, 16));
		ARENA_ASSERT_EQ(buddy_free(&tb, p), -EINVAL);
	}
	ARENA_ASSERT_EQ(i, 20);
	return 0;
}

/*
 * The default allocator is upstream's global buddy, ready whoever initialises it:
 * buddy_init(&buddy) is 0 when it is, and it can be destroyed and made ready again.
 */
SEC("syscall")
int test_buddy_default_global(struct arena_test_ctx *ctx)
{
	void __arena *p;

	ARENA_ASSERT_EQ(arena_buddy_addr(), (u64)&buddy);
	ARENA_ASSERT_EQ(buddy_init(&buddy), 0);
	ARENA_ASSERT_EQ(arena_buddy_is_ready(), 1);
	ARENA_ASSERT_EQ(buddy_init(&buddy), 0);
	p = buddy_alloc(&buddy, 100);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(buddy_free(&buddy, p), 0);
	/*
	 * Destroyed, then ready again. Whether anyone sees it in between is not checked:
	 * the heap's workqueue, on the other CPU, may make it ready again at once.
	 */
	ARENA_ASSERT_EQ(buddy_destroy(&buddy), 0);
	ARENA_ASSERT_EQ(arena_buddy_setup(), 0);
	ARENA_ASSERT_EQ(arena_buddy_is_ready(), 1);
	p = buddy_alloc(&buddy, 200000);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(buddy_free(&buddy, p), 0);
	/* Any other allocator is initialised once. */
	ARENA_ASSERT_EQ(fresh(&tb), 0);
	ARENA_ASSERT_EQ(buddy_init(&tb), -EBUSY);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

SEC("syscall")
int test_buddy_every_order(struct arena_test_ctx *ctx)
{
	u64 size, addr;
	int o;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	for (o = zero; o < BUDDY_ORDERS && can_loop; o++) {
		size = (u64)BUDDY_MIN_SIZE << o;
		addr = (u64)buddy_alloc(&tb, size);
		ARENA_ASSERT(addr);
		/* A block is aligned to its size (and always to 8 bytes). */
		ARENA_ASSERT_EQ(addr & (size - 1), 0);
		ARENA_ASSERT_EQ(blocks_in_use(&tb), 1);
		ARENA_ASSERT_EQ(fill(addr, size, o), 0);
		ARENA_ASSERT_EQ(verify(addr, size, o), 0);
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)addr), 0);
		ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	}
	ARENA_ASSERT_EQ(o, BUDDY_ORDERS);
	/*
	 * The whole-chunk block found the lists empty and took back what the CPU's cache
	 * kept of the small orders: one spare chunk, no cached block, no second chunk.
	 */
	ARENA_ASSERT_EQ(cached_blocks(&tb), 0);
	ARENA_ASSERT_EQ(buddy_flush_caches(&tb), 0);
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, 1);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

static const u64 odd_sizes[] = { 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 317, 1000, 1023,
				 4095, 4097, 10000, 65537, 300000, 524287, 524288 };

/*
 * A pair freed apart (buddy.h): one size (8 KiB, above the CPU caches' sizes) allocated
 * and freed on an otherwise empty chunk costs no split and no merge, the chunk still
 * counts as a spare, a double free of the block is still refused, and the pairs are
 * merged before a larger block needs a new chunk and before a spare goes back.
 */
#define LAZY_ORDER	BUDDY_CACHE_ORDERS
#define LAZY_SIZE	(BUDDY_MIN_SIZE << LAZY_ORDER)

SEC("syscall")
int test_buddy_lazy_pairs(struct arena_test_ctx *ctx)
{
	u64 lazy, maps, p, q;
	int i;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	maps = tb.stats.map_calls;
	for (i = zero; i < 100 && can_loop; i++) {
		p = (u64)buddy_alloc(&tb, LAZY_SIZE);
		ARENA_ASSERT(p);
		ARENA_ASSERT_EQ(tb.stats.chunks_spare, 0);
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
		ARENA_ASSERT_EQ(tb.stats.chunks_spare, 1);
	}
	ARENA_ASSERT_EQ(i, 100);
	/* The first free merges nothing (its buddy is the only 8 KiB block): all of them. */
	ARENA_ASSERT_EQ(tb.stats.lazy_frees, 100);
	ARENA_ASSERT(tb.lazy_mask & (1u << LAZY_ORDER));
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), -EINVAL);

	/* The whole chunk: the pairs merge, and no chunk is mapped. */
	lazy = tb.stats.coalesces;
	q = (u64)buddy_alloc(&tb, BUDDY_CHUNK_SIZE);
	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(tb.stats.coalesces, lazy + 1);
	ARENA_ASSERT_EQ(tb.stats.map_calls, maps);
	ARENA_ASSERT_EQ(tb.lazy_mask, 0);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);

	/* Two spares, one of them split by a pair apart: trimming merges it and gives one. */
	p = (u64)buddy_alloc(&tb, LAZY_SIZE);
	q = (u64)buddy_alloc(&tb, BUDDY_CHUNK_SIZE);
	ARENA_ASSERT(p && q);
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 2);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	ARENA_ASSERT(tb.lazy_mask);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, 2);
	ARENA_ASSERT_EQ(buddy_trim(&tb), 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, 1);
	ARENA_ASSERT_EQ(tb.lazy_mask, 0);
	/* What is left is one whole block again. */
	maps = tb.stats.map_calls;
	q = (u64)buddy_alloc(&tb, BUDDY_CHUNK_SIZE);
	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(tb.stats.map_calls, maps);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

SEC("syscall")
int test_buddy_odd_sizes(struct arena_test_ctx *ctx)
{
	u32 n = ARRAY_SIZE(odd_sizes), i;
	u64 size;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	/* All live at once, then verified and freed: no block overlaps another. */
	for (i = zero; i < n && can_loop; i++) {
		barrier_var(i);
		if (i >= ARRAY_SIZE(odd_sizes))
			break;
		size = odd_sizes[i];
		ptrs[i & (NR_PTRS - 1)] = (u64)buddy_alloc(&tb, size);
		ARENA_ASSERT(ptrs[i & (NR_PTRS - 1)]);
		ARENA_ASSERT_EQ(ptrs[i & (NR_PTRS - 1)] & 7, 0);
		ARENA_ASSERT_EQ(fill(ptrs[i & (NR_PTRS - 1)], size, i), 0);
	}
	for (i = zero; i < n && can_loop; i++) {
		barrier_var(i);
		if (i >= ARRAY_SIZE(odd_sizes))
			break;
		ARENA_ASSERT_EQ(verify(ptrs[i & (NR_PTRS - 1)], odd_sizes[i], i), 0);
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]), 0);
	}
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

SEC("syscall")
int test_buddy_scrambled_free(struct arena_test_ctx *ctx)
{
	u64 x = ctx->seed | 1, size, held, t;
	u32 i, j;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	for (i = zero; i < NR_PTRS && can_loop; i++) {
		/* Mostly small, some up to 64 KiB: several chunks get used. */
		size = 1 + arena_test_rand(&x) % ((arena_test_rand(&x) & 7) ? 512 : 65536);
		sizes[i & (NR_PTRS - 1)] = size;
		ptrs[i & (NR_PTRS - 1)] = (u64)buddy_alloc(&tb, size);
		ARENA_ASSERT(ptrs[i & (NR_PTRS - 1)]);
		ARENA_ASSERT_EQ(fill(ptrs[i & (NR_PTRS - 1)], size < 64 ? size : 64, i), 0);
	}
	held = tb.stats.chunks_held;
	ARENA_ASSERT(held >= 2);
	/* A random permutation of the frees. */
	for (i = zero; i < NR_PTRS && can_loop; i++) {
		j = i + arena_test_rand(&x) % (NR_PTRS - i);
		t = ptrs[i & (NR_PTRS - 1)];
		ptrs[i & (NR_PTRS - 1)] = ptrs[j & (NR_PTRS - 1)];
		ptrs[j & (NR_PTRS - 1)] = t;
		t = sizes[i & (NR_PTRS - 1)];
		sizes[i & (NR_PTRS - 1)] = sizes[j & (NR_PTRS - 1)];
		sizes[j & (NR_PTRS - 1)] = t;
	}
	for (i = zero; i < NR_PTRS && can_loop; i++)
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]), 0);
	ARENA_ASSERT_EQ(i, NR_PTRS);
	/*
	 * Clean once the CPU's cache and the batches it gave back (on the deferred list,
	 * counted in use until the lock's next holder frees them) are back: nothing in use;
	 * the recent peak is kept as spares until trimmed.
	 */
	ARENA_ASSERT(buddy_flush_caches(&tb) > 0);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, tb.stats.chunks_held);
	t = tb.stats.chunks_held;
	ARENA_ASSERT_EQ(buddy_trim(&tb), t - 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_returned, held - 1);
	/* Fully merged: the spare serves a whole-chunk block without a new chunk. */
	ARENA_ASSERT(buddy_alloc(&tb, BUDDY_MAX_SIZE));
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
	arena_stdout("scrambled: %u blocks over %llu chunks, all merged back", NR_PTRS, held);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

/* A workload that keeps returning to the same size keeps its chunks: no map/unmap churn. */
SEC("syscall")
int test_buddy_steady_workload_keeps_chunks(struct arena_test_ctx *ctx)
{
	u64 returned = 0;
	u32 r, k;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	for (r = zero; r < 10 && can_loop; r++) {
		/* Four 256 KiB blocks: two chunks, all freed again. */
		for (k = 0; k < 4 && can_loop; k++) {
			ptrs[k & 3] = (u64)buddy_alloc(&tb, 200000);
			ARENA_ASSERT(ptrs[k & 3]);
		}
		for (k = 0; k < 4 && can_loop; k++)
			ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[k & 3]), 0);
		if (r == 0)
			returned = tb.stats.chunks_returned;
	}
	ARENA_ASSERT_EQ(tb.stats.chunks_returned, returned);	/* no churn */
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 2);
	ARENA_ASSERT_EQ(tb.stats.chunks_peak, 2);
	/* Trim gives back all spares beyond one. */
	ARENA_ASSERT_EQ(buddy_trim(&tb), 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
	ARENA_ASSERT_EQ(tb.stats.chunks_returned, returned + 1);
	ARENA_ASSERT_EQ(buddy_trim(&tb), 0);
	ARENA_ASSERT_EQ(buddy_trim(NULL), -EINVAL);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

SEC("syscall")
int test_buddy_exhaustion_and_recovery(struct arena_test_ctx *ctx)
{
	u32 i, n;
	u64 p;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	tb.max_chunks = 3;
	n = zero;	/* an opaque start keeps the verifier from tracking every value */
	for (i = zero; i < 64 && can_loop; i++) {
		p = (u64)buddy_alloc(&tb, 200000);	/* 256 KiB blocks: 2 per chunk */
		if (!p)
			break;
		ptrs[i & (NR_PTRS - 1)] = p;
		n++;
	}
	ARENA_ASSERT_EQ(n, 6);
	ARENA_ASSERT_EQ(tb.stats.failed_allocs, 1);
	/* Small blocks fail too now: there is no room anywhere. */
	ARENA_ASSERT(!buddy_alloc(&tb, 16));
	for (i = zero; i < n && can_loop; i++)
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]), 0);
	/* Recovered: all of it can be had again. */
	for (i = zero; i < n && can_loop; i++) {
		ptrs[i & (NR_PTRS - 1)] = (u64)buddy_alloc(&tb, 200000);
		ARENA_ASSERT(ptrs[i & (NR_PTRS - 1)]);
	}
	for (i = zero; i < n && can_loop; i++)
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]), 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

SEC("syscall")
int test_buddy_page_runs(struct arena_test_ctx *ctx)
{
	static const u64 run_sizes[] = { BUDDY_MAX_SIZE + 1, 600000, 1 << 20, 3 << 20 };
	u64 p, size, returned;
	u32 i;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	returned = tb.stats.pages_returned;
	for (i = zero; i < ARRAY_SIZE(run_sizes) && can_loop; i++) {
		barrier_var(i);
		size = run_sizes[i & 3];
		p = (u64)buddy_alloc(&tb, size);
		ARENA_ASSERT(p);
		ARENA_ASSERT_EQ(p & 4095, 0);
		ptrs[i & (NR_PTRS - 1)] = p;
		*(u64 __arena *)p = size;
		*(u8 __arena *)(p + size - 1) = 0x5a;
	}
	ARENA_ASSERT_EQ(tb.stats.runs_in_use, 4);
	for (i = zero; i < ARRAY_SIZE(run_sizes) && can_loop; i++) {
		p = ptrs[i & (NR_PTRS - 1)];
		barrier_var(i);
		size = run_sizes[i & 3];
		ARENA_ASSERT_EQ(*(u64 __arena *)p, size);
		ARENA_ASSERT_EQ(*(u8 __arena *)(p + size - 1), 0x5a);
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
		/* The run's pages are gone: a second free finds no header. */
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), -EINVAL);
	}
	ARENA_ASSERT_EQ(tb.stats.runs_in_use, 0);
	ARENA_ASSERT_EQ(tb.stats.run_pages_in_use, 0);
	ARENA_ASSERT(tb.stats.pages_returned > returned + (5 << 20) / 4096);
	/* A run left allocated is freed by destroy. */
	ARENA_ASSERT(buddy_alloc(&tb, 2 << 20));
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

u64 __arena_global not_from_buddy[4];

SEC("syscall")
int test_buddy_bad_input(struct arena_test_ctx *ctx)
{
	u64 p, q, used;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	ARENA_ASSERT_EQ(fresh(&tb2), 0);
	p = (u64)buddy_alloc(&tb, 64);
	q = (u64)buddy_alloc(&tb, 64);
	ARENA_ASSERT(p && q);
	used = blocks_in_use(&tb);

	ARENA_ASSERT_EQ(buddy_free(&tb, NULL), 0);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)(p + 1)), -EINVAL);	/* misaligned */
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)(p + 16)), -EINVAL);	/* interior */
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)(p + 8)), -EINVAL);
	ARENA_ASSERT_EQ(buddy_free(&tb2, (void __arena *)p), -EINVAL);	/* other allocator */
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)&not_from_buddy[0]), -EINVAL);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)(p + (1 << 20))), -EINVAL);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), used);		/* nothing was lost */

	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), -EINVAL);	/* double free */
	ARENA_ASSERT_EQ(blocks_in_use(&tb), used - 1);
	ARENA_ASSERT_EQ(tb.stats.bad_calls, 6);
	ARENA_ASSERT_EQ(tb2.stats.bad_calls, 1);

	ARENA_ASSERT(!buddy_alloc(&tb, 0));
	ARENA_ASSERT(!buddy_alloc(&tb, 1ull << 40));
	ARENA_ASSERT(!buddy_alloc(NULL, 16));
	ARENA_ASSERT_EQ(buddy_init(&tb), -EBUSY);
	ARENA_ASSERT_EQ(buddy_init(NULL), -EINVAL);

	/* Still works, and q is intact. */
	ARENA_ASSERT(buddy_alloc(&tb, 64));
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb2), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

/*
 * A free that times out on the lock loses nothing: the block waits on the allocator's
 * deferred list and the next allocation frees it first (a size the CPU caches do not
 * take, which would never wait for the lock). Frees leave the list alone: draining it
 * would take them past the stack arena_free() promises. The test holds the lock itself, as
 * a holder whose vCPU the host descheduled would: the free waits BUDDY_LOCK_PATIENCE_NS
 * before it defers.
 */
SEC("syscall")
int test_buddy_lock_timeout_defers_free(struct arena_test_ctx *ctx)
{
	u64 p, q, r, used, t0, t1;
	u32 waits;
	int ret, again;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	p = (u64)buddy_alloc(&tb, LAZY_SIZE);
	q = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT(p && q);
	used = blocks_in_use(&tb);
	waits = arena_spin_timeouts(&tb.lock);
	tb.lock.next++;			/* a ticket held by someone else */
	t0 = bpf_ktime_get_ns();
	ret = buddy_free(&tb, (void __arena *)p);
	t1 = bpf_ktime_get_ns();
	__arena_spin_release(&tb.lock);	/* which lets go, skipping the tickets given up */
	ARENA_ASSERT_EQ(ret, 0);
	ARENA_ASSERT(arena_spin_timeouts(&tb.lock) - waits >= 2);
	ARENA_ASSERT(t1 - t0 >= BUDDY_LOCK_PATIENCE_NS);
	ARENA_ASSERT_EQ(tb.stats.lock_timeouts, 1);
	ARENA_ASSERT_EQ(tb.stats.deferred_frees, 1);
	ARENA_ASSERT_EQ(tb.deferred, p);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), used);		/* not freed yet */
	/* A free leaves it waiting; the next allocation frees it first. */
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);
	ARENA_ASSERT_EQ(tb.deferred, p);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), used - 1);
	r = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT(r);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), used - 1);	/* p freed, r taken */
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)r), 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), used - 2);
	ARENA_ASSERT_EQ(tb.stats.bad_calls, 0);
	/*
	 * Only a block that looks allocated is deferred: not a second free of p. (The holder
	 * is this CPU this time, so the call gives up without waiting.)
	 */
	tb.lock.next++;
	tb.holder = bpf_get_smp_processor_id() + 1;
	again = buddy_free(&tb, (void __arena *)p);
	tb.holder = 0;
	__arena_spin_release(&tb.lock);
	ARENA_ASSERT_EQ(again, -ETIMEDOUT);
	ARENA_ASSERT_EQ(tb.stats.deferred_frees, 1);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	/* And the allocator goes on: p's memory is handed out again. */
	p = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

/*
 * A lock held on the caller's own CPU is a context the caller interrupted: no wait can
 * help, so an allocation fails at once (no wait timed out) and a free is deferred at
 * once. Another CPU's holder is waited for, for BUDDY_LOCK_PATIENCE_NS.
 */
SEC("syscall")
int test_buddy_lock_holder_cpu(struct arena_test_ctx *ctx)
{
	u32 self = bpf_get_smp_processor_id() + 1, waits;
	u64 p, q, t0, t1;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	p = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT(p);
	waits = arena_spin_timeouts(&tb.lock);
	tb.lock.next++;
	tb.holder = self;
	q = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT_EQ(q, 0);
	ARENA_ASSERT_EQ(arena_spin_timeouts(&tb.lock), waits);
	ARENA_ASSERT_EQ(tb.stats.lock_timeouts, 1);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(tb.deferred, p);
	ARENA_ASSERT_EQ(arena_spin_timeouts(&tb.lock), waits);
	/* Another CPU holds it and never lets go: every wait times out, then the call fails. */
	tb.holder = self + 1;
	t0 = bpf_ktime_get_ns();
	q = (u64)buddy_alloc(&tb, LAZY_SIZE);
	t1 = bpf_ktime_get_ns();
	ARENA_ASSERT_EQ(q, 0);
	ARENA_ASSERT(arena_spin_timeouts(&tb.lock) - waits >= 2);
	ARENA_ASSERT(t1 - t0 >= BUDDY_LOCK_PATIENCE_NS);
	ARENA_ASSERT_EQ(tb.stats.lock_timeouts, 3);
	tb.holder = 0;
	__arena_spin_release(&tb.lock);
	/* Let go: the deferred free is done by the next holder, and allocations work. */
	q = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	ARENA_ASSERT_EQ(tb.holder, 0);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

/*
 * A holder on another CPU that keeps the lock past a wait's timeout (a vCPU the host
 * descheduled): the waiter queues again and its allocation succeeds. Thread 0 holds the
 * lock with preemption disabled, as the allocator's own holders do, until thread 1's
 * first wait has timed out and it has queued again; thread 1 allocates.
 */
#define LOCK_RETRY_DEADLINE_NS	(10ull * 1000 * 1000 * 1000)

struct buddy __arena_global retry_b;
u32 __arena_global retry_held;
u64 __arena_global retry_block;

SEC("syscall")
int parallel_test_buddy_lock_retry__enabled(struct arena_test_ctx *ctx)
{
	if (ctx->nr_cpus >= 2)
		return 0;
	arena_stdout("needs 2 CPUs: the holder and the waiter spin at once");
	return -EOPNOTSUPP;
}

SEC("syscall")
int parallel_test_buddy_lock_retry__init(struct arena_test_ctx *ctx)
{
	retry_held = 0;
	retry_block = 0;
	return fresh(&retry_b);
}

/* Spin until the waiter queued twice (tickets past ours: 2), for one loop budget. */
static __noinline bool retry_requeued(u32 ticket)
{
	u32 i;

	arena_subprog_init();
	for (i = zero; i < (1u << 20) && can_loop; i++) {
		if (READ_ONCE(retry_b.lock.next) - ticket >= 3)
			return true;
		arena_cpu_relax();
	}
	return false;
}

SEC("syscall")
int parallel_test_buddy_lock_retry__0(struct arena_test_ctx *ctx)
{
	u64 deadline = bpf_ktime_get_ns() + LOCK_RETRY_DEADLINE_NS;
	bool requeued = false;
	u32 ticket;

	bpf_preempt_disable();
	if (!__arena_spin_take_free(&retry_b.lock)) {
		bpf_preempt_enable();
		arena_stderr("the lock was not free");
		return -EBUSY;
	}
	ticket = (u32)retry_b.lock.state;
	retry_b.holder = bpf_get_smp_processor_id() + 1;
	WRITE_ONCE(retry_held, 1);
	while (!requeued && bpf_ktime_get_ns() < deadline && can_loop)
		requeued = retry_requeued(ticket);
	retry_b.holder = 0;
	__arena_spin_release(&retry_b.lock);
	bpf_preempt_enable();
	if (!requeued)
		arena_stderr("the waiter did not queue again in 10 s");
	return requeued ? 0 : -ETIMEDOUT;
}

SEC("syscall")
int parallel_test_buddy_lock_retry__1(struct arena_test_ctx *ctx)
{
	u64 deadline = bpf_ktime_get_ns() + LOCK_RETRY_DEADLINE_NS;

	while (!READ_ONCE(retry_held) && bpf_ktime_get_ns() < deadline && can_loop)
		arena_cpu_relax();
	if (!READ_ONCE(retry_held)) {
		arena_stderr("the holder did not take the lock in 10 s");
		return -ETIMEDOUT;
	}
	retry_block = (u64)buddy_alloc(&retry_b, 64);
	return retry_block ? 0 : -ENOMEM;
}

SEC("syscall")
int parallel_test_buddy_lock_retry__fini(struct arena_test_ctx *ctx)
{
	struct buddy __arena *b = &retry_b;

	arena_stdout("waits timed out: %u", arena_spin_timeouts(&b->lock));
	ARENA_ASSERT(retry_block);
	ARENA_ASSERT(arena_spin_timeouts(&b->lock) >= 1);
	ARENA_ASSERT_EQ(b->stats.lock_timeouts, 0);
	ARENA_ASSERT_EQ(b->stats.failed_allocs, 0);
	ARENA_ASSERT_EQ(buddy_free(b, (void __arena *)retry_block), 0);
	ARENA_ASSERT_EQ(blocks_in_use(b), 0);
	ARENA_ASSERT_EQ(buddy_destroy(b), 0);
	return 0;
}

/* 4 threads share one allocator: random sizes, patterns checked, nothing lost. */
#define STRESS_THREADS	4
#define STRESS_LIVE	32
#define STRESS_ROUNDS	1500

struct buddy __arena_global stress_b;
u64 __arena_global stress_ptr[STRESS_THREADS][STRESS_LIVE];
u64 __arena_global stress_size[STRESS_THREADS][STRESS_LIVE];
u64 __arena_global stress_done[STRESS_THREADS];

SEC("syscall")
int parallel_test_buddy_stress__init(struct arena_test_ctx *ctx)
{
	return fresh(&stress_b);
}

static __noinline int stress(u32 t, u32 seed)
{
	u64 x = ((u64)seed << 8) | (t + 1), size, p;
	u32 i, k;

	t &= STRESS_THREADS - 1;
	for (k = zero; k < STRESS_LIVE && can_loop; k++)
		stress_ptr[t][k] = 0;
	for (i = zero; i < STRESS_ROUNDS && can_loop; i++) {
		k = arena_test_rand(&x) % STRESS_LIVE;
		p = stress_ptr[t][k];
		if (p) {
			if (verify(p, stress_size[t][k], t * 1000 + k))
				return -EUCLEAN;
			if (buddy_free(&stress_b, (void __arena *)p))
				return -EINVAL;
			stress_ptr[t][k] = 0;
			continue;
		}
		size = 1 + arena_test_rand(&x) % ((arena_test_rand(&x) & 15) ? 256 : 16384);
		p = (u64)buddy_alloc(&stress_b, size);
		if (!p)
			return -ENOMEM;
		if (fill(p, size, t * 1000 + k))
			return -E2BIG;
		stress_ptr[t][k] = p;
		stress_size[t][k] = size;
	}
	for (k = zero; k < STRESS_LIVE && can_loop; k++) {
		p = stress_ptr[t][k];
		if (p && (verify(p, stress_size[t][k], t * 1000 + k) ||
			  buddy_free(&stress_b, (void __arena *)p)))
			return -EUCLEAN;
	}
	stress_done[t] = i;
	return i == STRESS_ROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_buddy_stress__0(struct arena_test_ctx *ctx) { return stress(0, ctx->seed); }
SEC("syscall")
int parallel_test_buddy_stress__1(struct arena_test_ctx *ctx) { return stress(1, ctx->seed); }
SEC("syscall")
int parallel_test_buddy_stress__2(struct arena_test_ctx *ctx) { return stress(2, ctx->seed); }
SEC("syscall")
int parallel_test_buddy_stress__3(struct arena_test_ctx *ctx) { return stress(3, ctx->seed); }

SEC("syscall")
int parallel_test_buddy_stress__fini(struct arena_test_ctx *ctx)
{
	struct buddy __arena *b = &stress_b;

	arena_stdout("stress: %llu allocs, %llu frees, %llu chunks held, %llu lock timeouts",
		     b->stats.allocs, b->stats.frees, b->stats.chunks_held,
		     b->stats.lock_timeouts);
	arena_stdout("stress: %llu cache refills, %llu spills", b->stats.cache_refills,
		     b->stats.cache_spills);
	/* Every block back from the caches and the deferred list: then as many frees. */
	ARENA_ASSERT(buddy_flush_caches(b) >= 0);
	ARENA_ASSERT_EQ(cached_blocks(b), 0);
	ARENA_ASSERT_EQ(b->deferred, 0);
	ARENA_ASSERT_EQ(blocks_in_use(b), 0);
	ARENA_ASSERT(b->stats.cache_refills > 0);
	ARENA_ASSERT_EQ(b->stats.allocs, b->stats.frees);
	ARENA_ASSERT_EQ(b->stats.failed_allocs, 0);
	ARENA_ASSERT_EQ(b->stats.lock_timeouts, 0);
	ARENA_ASSERT_EQ(b->stats.corruptions, 0);
	ARENA_ASSERT(buddy_trim(b) >= 0);
	ARENA_ASSERT(b->stats.chunks_held <= 1);
	ARENA_ASSERT_EQ(buddy_destroy(b), 0);
	return 0;
}

/*
 * A CPU's cache (buddy.h): an empty one takes a batch of BUDDY_CACHE_BATCH blocks in one
 * lock hold and hands them out in address order without the lock; frees fill it up to
 * BUDDY_CACHE_CAP() (2 KiB blocks: BUDDY_CACHE_MAX) and give a batch back beyond; a
 * cached block freed again is a double free; buddy_flush_caches() gives everything back.
 */
#define CACHE_ORDER	7
#define CACHE_SIZE	(BUDDY_MIN_SIZE << CACHE_ORDER)
_Static_assert(BUDDY_CACHE_CAP(CACHE_ORDER) == BUDDY_CACHE_MAX, "2 KiB: the smallest cap");

SEC("syscall")
int test_buddy_cpu_cache(struct arena_test_ctx *ctx)
{
	struct buddy_cpu_cache __arena *c;
	u64 p, first;
	u32 i, tickets;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	c = &tb.cache[bpf_get_smp_processor_id() & (BUDDY_CACHE_CPUS - 1)];
	first = (u64)buddy_alloc(&tb, CACHE_SIZE);
	ARENA_ASSERT(first);
	ptrs[0] = first;
	ARENA_ASSERT_EQ(tb.stats.cache_refills, 1);
	ARENA_ASSERT_EQ(tb.stats.allocs, BUDDY_CACHE_BATCH);
	ARENA_ASSERT_EQ(c->nr[CACHE_ORDER], BUDDY_CACHE_BATCH - 1);
	/* The rest of the batch, in address order, and no ticket of the lock taken. */
	tickets = tb.lock.next;
	for (i = 1; i < BUDDY_CACHE_BATCH && can_loop; i++) {
		p = (u64)buddy_alloc(&tb, CACHE_SIZE);
		ARENA_ASSERT_EQ(p, first + CACHE_SIZE * i);
		ptrs[i & (NR_PTRS - 1)] = p;
	}
	ARENA_ASSERT_EQ(tb.lock.next, tickets);
	ARENA_ASSERT_EQ(c->nr[CACHE_ORDER], 0);
	/* Three batches more: 64 blocks live, four refills. */
	for (i = BUDDY_CACHE_BATCH; i < 64 && can_loop; i++) {
		ptrs[i & (NR_PTRS - 1)] = (u64)buddy_alloc(&tb, CACHE_SIZE);
		ARENA_ASSERT(ptrs[i & (NR_PTRS - 1)]);
	}
	ARENA_ASSERT_EQ(tb.stats.cache_refills, 4);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 64);
	/* Freed: the cache fills to BUDDY_CACHE_MAX, then gives a batch back, twice. */
	for (i = zero; i < 64 && can_loop; i++)
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]), 0);
	ARENA_ASSERT_EQ(c->nr[CACHE_ORDER], BUDDY_CACHE_MAX);
	ARENA_ASSERT_EQ(tb.stats.cache_spills, 2);
	/* The two batches wait on the deferred list, the allocator's still, for the lock. */
	ARENA_ASSERT(tb.deferred);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 2 * BUDDY_CACHE_BATCH);
	/* A cached block freed again is a double free, and changes nothing. */
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[63]), -EINVAL);
	ARENA_ASSERT_EQ(tb.stats.bad_calls, 1);
	ARENA_ASSERT_EQ(c->nr[CACHE_ORDER], BUDDY_CACHE_MAX);
	/* Given back, with the spilled batches: every block free, the chunk a spare. */
	ARENA_ASSERT_EQ(buddy_flush_caches(&tb), BUDDY_CACHE_MAX);
	ARENA_ASSERT_EQ(c->nr[CACHE_ORDER], 0);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	ARENA_ASSERT_EQ(tb.stats.allocs, tb.stats.frees);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, 1);
	ARENA_ASSERT_EQ(buddy_flush_caches(&tb), 0);
	ARENA_ASSERT_EQ(buddy_flush_caches(NULL), -EINVAL);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	ARENA_ASSERT_EQ(buddy_flush_caches(&tb), -EINVAL);
	return 0;
}

/*
 * A cache that someone else has (a program that interrupted its user, a flush from
 * another CPU) is never waited for: an allocation takes one block through the lock (no
 * batch: nowhere to put it), a free takes the lock. Nothing is lost.
 */
SEC("syscall")
int test_buddy_cpu_cache_busy(struct arena_test_ctx *ctx)
{
	struct buddy_cpu_cache __arena *c;
	u64 p, q;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	c = &tb.cache[bpf_get_smp_processor_id() & (BUDDY_CACHE_CPUS - 1)];
	c->busy = 1;
	p = (u64)buddy_alloc(&tb, 256);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(c->nr[4], 0);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	ARENA_ASSERT_EQ(tb.stats.cache_refills, 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 1);
	q = (u64)buddy_alloc(&tb, LAZY_SIZE);
	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(tb.deferred, 0);
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 2);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(c->nr[4], 0);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)q), 0);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), -EINVAL);
	/* A flush passes a busy cache by. */
	ARENA_ASSERT_EQ(buddy_flush_caches(&tb), 0);
	c->busy = 0;
	ARENA_ASSERT_EQ(blocks_in_use(&tb), 0);
	ARENA_ASSERT_EQ(tb.stats.allocs, tb.stats.frees);
	ARENA_ASSERT_EQ(tb.stats.chunks_spare, 1);
	ARENA_ASSERT_EQ(tb.stats.corruptions, 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

/*
 * Blocks in a cache are the allocator's: before an allocation fails (or maps a chunk) it
 * takes them back. One chunk, handed out whole as 4 KiB blocks, freed (32 of them stay in
 * the cache, the rest wait on the deferred list): a whole-chunk block still comes.
 */
SEC("syscall")
int test_buddy_cpu_cache_before_failing(struct arena_test_ctx *ctx)
{
	u32 n = BUDDY_CHUNK_SIZE / 4096, i;
	u64 p;

	ARENA_ASSERT_EQ(fresh(&tb), 0);
	tb.max_chunks = 1;
	for (i = zero; i < n && can_loop; i++) {
		ptrs[i & (NR_PTRS - 1)] = (u64)buddy_alloc_nosleep(&tb, 4096);
		ARENA_ASSERT(ptrs[i & (NR_PTRS - 1)]);
	}
	ARENA_ASSERT(!buddy_alloc_nosleep(&tb, 16));
	ARENA_ASSERT_EQ(tb.stats.failed_allocs, 1);
	for (i = zero; i < n && can_loop; i++)
		ARENA_ASSERT_EQ(buddy_free_nosleep(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]),
				0);
	ARENA_ASSERT_EQ(cached_blocks(&tb), BUDDY_CACHE_MAX);
	p = (u64)buddy_alloc_nosleep(&tb, BUDDY_CHUNK_SIZE);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(cached_blocks(&tb), 0);
	ARENA_ASSERT_EQ(tb.stats.chunks_held, 1);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	/* The sleepable allocation too, instead of mapping a chunk it may not have. */
	for (i = zero; i < 64 && can_loop; i++) {
		ptrs[i & (NR_PTRS - 1)] = (u64)buddy_alloc(&tb, 4096);
		ARENA_ASSERT(ptrs[i & (NR_PTRS - 1)]);
	}
	for (i = zero; i < 64 && can_loop; i++)
		ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)ptrs[i & (NR_PTRS - 1)]), 0);
	ARENA_ASSERT(cached_blocks(&tb));
	p = (u64)buddy_alloc(&tb, BUDDY_CHUNK_SIZE);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(tb.stats.failed_allocs, 1);
	ARENA_ASSERT_EQ(buddy_free(&tb, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&tb), 0);
	return 0;
}

/*
 * Other CPUs' caches too: two threads on two CPUs each leave BUDDY_CACHE_MAX blocks in
 * their CPU's cache; a whole-chunk allocation of a one-chunk allocator then needs both.
 */
struct buddy __arena_global cache_b;
u32 __arena_global cache_cpu[2];

SEC("syscall")
int parallel_test_buddy_cpu_caches_flushed__enabled(struct arena_test_ctx *ctx)
{
	if (ctx->nr_cpus >= 2)
		return 0;
	arena_stdout("needs 2 CPUs: one cache each");
	return -EOPNOTSUPP;
}

SEC("syscall")
int parallel_test_buddy_cpu_caches_flushed__init(struct arena_test_ctx *ctx)
{
	int err = fresh(&cache_b);

	cache_b.max_chunks = 1;
	return err;
}

static __noinline int fill_cache(u32 t)
{
	u64 __arena *mine = &ptrs[(t & 1) * BUDDY_CACHE_MAX];
	u32 i;

	cache_cpu[t & 1] = bpf_get_smp_processor_id();
	for (i = zero; i < BUDDY_CACHE_MAX && can_loop; i++) {
		mine[i & (BUDDY_CACHE_MAX - 1)] = (u64)buddy_alloc(&cache_b, 1024);
		if (!mine[i & (BUDDY_CACHE_MAX - 1)])
			return -ENOMEM;
	}
	for (i = zero; i < BUDDY_CACHE_MAX && can_loop; i++)
		if (buddy_free(&cache_b, (void __arena *)mine[i & (BUDDY_CACHE_MAX - 1)]))
			return -EINVAL;
	return 0;
}

SEC("syscall")
int parallel_test_buddy_cpu_caches_flushed__0(struct arena_test_ctx *ctx)
{
	return fill_cache(0);
}

SEC("syscall")
int parallel_test_buddy_cpu_caches_flushed__1(struct arena_test_ctx *ctx)
{
	return fill_cache(1);
}

SEC("syscall")
int parallel_test_buddy_cpu_caches_flushed__fini(struct arena_test_ctx *ctx)
{
	u32 a = cache_cpu[0], b = cache_cpu[1];
	u64 p;

	ARENA_ASSERT(a != b);
	ARENA_ASSERT_EQ(cache_b.cache[a & (BUDDY_CACHE_CPUS - 1)].nr[6], BUDDY_CACHE_MAX);
	ARENA_ASSERT_EQ(cache_b.cache[b & (BUDDY_CACHE_CPUS - 1)].nr[6], BUDDY_CACHE_MAX);
	p = (u64)buddy_alloc_nosleep(&cache_b, BUDDY_CHUNK_SIZE);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(cached_blocks(&cache_b), 0);
	ARENA_ASSERT_EQ(cache_b.stats.failed_allocs, 0);
	ARENA_ASSERT_EQ(buddy_free(&cache_b, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&cache_b), 0);
	return 0;
}

/* Driven by tests/user_test.c: allocate or free blocks of the default allocator. */
struct stats_args {
	u32 count;		/* 0: free what an earlier call allocated */
	u32 size;
};

#define STATS_MAX 64
u64 __arena_global stats_ptr[STATS_MAX];

SEC("syscall")
int alloc_for_stats(struct stats_args *args)
{
	u32 i, n = args->count < STATS_MAX ? args->count : STATS_MAX;

	if (!args->count) {
		for (i = zero; i < STATS_MAX && can_loop; i++) {
			buddy_free((struct buddy __arena *)arena_buddy_addr(),
				   (void __arena *)stats_ptr[i & (STATS_MAX - 1)]);
			stats_ptr[i & (STATS_MAX - 1)] = 0;
		}
		return 0;
	}
	for (i = zero; i < n && can_loop; i++) {
		stats_ptr[i & (STATS_MAX - 1)] =
			(u64)buddy_alloc((struct buddy __arena *)arena_buddy_addr(), args->size);
		if (!stats_ptr[i & (STATS_MAX - 1)])
			return -ENOMEM;
	}
	return 0;
}
