// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The fast allocator behind arena_malloc: every size class with patterns, reuse, large
 * sizes, every bad input, reserve exhaustion and refill, spans going back to the kernel,
 * nesting (a busy heap level), and in parallel: remote frees of objects other CPUs
 * allocated, with an exact account at the end, and a mixed stress test. The runner made
 * the heaps (arena_heap_refill) before the first test.
 */
#include <libarena/common.h>
#include <libarena/asan.h>
#include <libarena/buddy.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#ifdef LIBARENA_ASAN
/*
 * The sanitizer build keeps a redzone after every object (so classes shift), and parks
 * freed objects in a quarantine: tests that watch the allocator's own moves turn it off.
 */
#define HEAP_SLACK ASAN_REDZONE_SIZE
#define exact_frees()								\
	do {									\
		((struct asan_state __arena *)asan_state_addr())->quarantine_len = 0; \
		arena_quarantine_flush();					\
	} while (0)
#else
#define HEAP_SLACK 0
#define exact_frees() do { } while (0)
#endif

#define NR_PTRS 512
u64 __arena_global hp[NR_PTRS];

static __always_inline struct arena_heap_global __arena *glob(void)
{
	return (struct arena_heap_global __arena *)arena_heap_global_addr();
}

static __always_inline struct arena_heap __arena *heap_of(u32 id)
{
	return (struct arena_heap __arena *)((arena_heap_global_addr() & ~0xffffffffull) +
					     HEAP_HEAPS_START + (u64)id * HEAP_HEAP_SIZE);
}

static __always_inline struct arena_heap_span __arena *span_of(u64 addr)
{
	u32 s = ((u32)addr - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;

	return (struct arena_heap_span __arena *)((addr & ~0xffffffffull) + HEAP_DESC_START +
						  (u64)s * 64);
}

/*
 * Objects out in every active span: used minus what waits on remote lists. Global, as
 * the helpers the parallel tests' __fini programs call are; the heap's state is an
 * argument, as a can_loop function must not open with a call (README).
 */
__weak s64 count_outstanding(struct arena_heap_global __arena *g __arg_arena)
{
	u64 base = (u64)g & ~0xffffffffull;
	struct arena_heap_span __arena *sp;
	s64 n = 0;
	u32 s;

	for (s = zero; s < HEAP_NR_SPANS && can_loop; s++) {
		if (!(g->claimed[s / 64] & (1ull << (s % 64))))
			continue;
		sp = (struct arena_heap_span __arena *)(base + HEAP_DESC_START + (u64)s * 64);
		if (sp->magic == HEAP_SPAN_MAGIC && sp->state == HEAP_SPAN_ACTIVE)
			n += (s64)sp->used - (s64)((sp->remote >> 32) & HEAP_REMOTE_COUNT);
	}
	return n;
}

static __always_inline s64 outstanding(void)
{
	return count_outstanding(glob());
}

SEC("syscall")
int test_heap_classes(struct arena_test_ctx *ctx)
{
	u32 cls, size, prev = 0, c;
	u64 s;

	/* Every size maps to the smallest class that holds it; classes grow. */
	for (s = zero + 1; s <= HEAP_MEDIUM_MAX && can_loop; s++) {
		c = arena_heap_class(s);
		ARENA_ASSERT(c < HEAP_NR_CLASSES);
		ARENA_ASSERT(arena_heap_class_size(c) >= s);
		if (c)
			ARENA_ASSERT(arena_heap_class_size(c - 1) < s);
	}
	ARENA_ASSERT_EQ(s, HEAP_MEDIUM_MAX + 1);
	for (cls = zero; cls < HEAP_NR_CLASSES && can_loop; cls++) {
		size = arena_heap_class_size(cls);
		ARENA_ASSERT(size > prev);
		ARENA_ASSERT_EQ(size % 16, 0);
		prev = size;
	}
	ARENA_ASSERT_EQ(prev, HEAP_MEDIUM_MAX);
	ARENA_ASSERT_EQ(arena_heap_class(0), HEAP_NR_CLASSES);
	ARENA_ASSERT_EQ(arena_heap_class(HEAP_MEDIUM_MAX + 1), HEAP_NR_CLASSES);
	ARENA_ASSERT_EQ(arena_heap_class_size(HEAP_NR_CLASSES), 0);
	return 0;
}

/* Per class: a few objects at its exact size and one byte less, patterns, then free. */
SEC("syscall")
int test_heap_every_class(struct arena_test_ctx *ctx)
{
	u32 cls, size, k, n = zero;
	u8 __arena *p;

	for (cls = zero; cls < HEAP_NR_CLASSES && can_loop; cls++) {
		size = arena_heap_class_size(cls);
		for (k = zero; k < 4 && can_loop; k++) {
			/* A span per class: more than a reserve holds. */
			p = arena_malloc_sleepable(size - (k & 1));
			ARENA_ASSERT(p);
			ARENA_ASSERT_EQ((u64)p & 15, 0);
			ARENA_ASSERT(size - (k & 1) + HEAP_SLACK > HEAP_MEDIUM_MAX ||
				     span_of((u64)p)->cls ==
				     arena_heap_class(size - (k & 1) + HEAP_SLACK));
			hp[(cls * 4 + k) % NR_PTRS] = (u64)p;
			ARENA_ASSERT_EQ(arena_test_fill(p, size - (k & 1), cls * 4 + k), 0);
		}
	}
	for (cls = zero; cls < HEAP_NR_CLASSES && can_loop; cls++) {
		size = arena_heap_class_size(cls);
		for (k = zero; k < 4 && can_loop; k++) {
			p = (u8 __arena *)hp[(cls * 4 + k) % NR_PTRS];
			ARENA_ASSERT_EQ(arena_test_check(p, size - (k & 1), cls * 4 + k), 0);
			ARENA_ASSERT_EQ(arena_free(p), 0);
			n++;
		}
	}
	ARENA_ASSERT_EQ(n, HEAP_NR_CLASSES * 4);
	return 0;
}

/* A freed object is the next one its CPU's heap hands out for the class (LIFO). */
SEC("syscall")
int test_heap_reuse(struct arena_test_ctx *ctx)
{
	s64 out = arena_heap_outstanding();
	void __arena *a, *b, *c;

	exact_frees();

	a = arena_malloc(100);
	b = arena_malloc(100);
	ARENA_ASSERT(a && b && a != b);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), out + 2);
	ARENA_ASSERT_EQ(arena_free(a), 0);
	c = arena_malloc(112);		/* same class as 100 */
	ARENA_ASSERT(c == a);
	ARENA_ASSERT_EQ(arena_free(b), 0);
	ARENA_ASSERT_EQ(arena_free(c), 0);
	/* calloc gives zeroes even where a pattern was. */
	a = arena_malloc(64);
	ARENA_ASSERT(a);
	ARENA_ASSERT_EQ(arena_test_fill(a, 64, 5), 0);
	ARENA_ASSERT_EQ(arena_free(a), 0);
	b = arena_calloc(4, 16);
	ARENA_ASSERT(b == a);
	ARENA_ASSERT_EQ(arena_test_check(b, 64, 0) != 0, 1);
	ARENA_ASSERT_EQ(((u64 __arena *)b)[0] | ((u64 __arena *)b)[7], 0);
	ARENA_ASSERT_EQ(arena_free(b), 0);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), out);
	return 0;
}

/* Beyond 64 KiB: the buddy allocator, through the same calls. */
SEC("syscall")
int test_heap_large(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	s64 out = arena_heap_outstanding();
	void __arena *p;
	u64 la, lf;

	exact_frees();
	la = g->large_allocs;
	lf = g->large_frees;

	p = arena_malloc(HEAP_MEDIUM_MAX + 1);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), out + 1);
	ARENA_ASSERT(!((u64)p >= (((u64)p & ~0xffffffffull) | HEAP_WINDOW_START) &&
		       (u32)(u64)p < HEAP_WINDOW_END));
	ARENA_ASSERT_EQ(arena_test_fill(p, 4096, 9), 0);
	ARENA_ASSERT_EQ(arena_free(p), 0);
	ARENA_ASSERT_EQ(g->large_allocs, la + 1);
	ARENA_ASSERT_EQ(g->large_frees, lf + 1);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), out);
	/* More than a buddy chunk: not from a non-sleepable path. */
	ARENA_ASSERT(!arena_malloc(BUDDY_MAX_SIZE + 1));
	return 0;
}

u64 __arena_global not_from_malloc[4];

SEC("syscall")
int test_heap_bad_calls(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	u64 bad = g->bad_frees;
	struct buddy __arena *ob;
	u8 __arena *p, *q;

	exact_frees();

	ARENA_ASSERT(!arena_malloc(0));
	ARENA_ASSERT_EQ(arena_free(NULL), 0);
	p = arena_malloc(48);
	q = arena_malloc(48);
	ARENA_ASSERT(p && q);
	ARENA_ASSERT_EQ(arena_free(p + 16), -EINVAL);		/* interior */
	ARENA_ASSERT_EQ(arena_free(p + 1), -EINVAL);		/* misaligned */
	/* Past everything this span ever carved. */
	ARENA_ASSERT_EQ(arena_free(q + 48 * 64), -EINVAL);
	ARENA_ASSERT_EQ(arena_free(p), 0);
	ARENA_ASSERT_EQ(arena_free(p), -EINVAL);		/* double free */
	ARENA_ASSERT_EQ(arena_free(q), 0);
	ARENA_ASSERT_EQ(arena_free(q), -EINVAL);
	/* A global of the program; a span slot never mapped; another allocator's block. */
	ARENA_ASSERT_EQ(arena_free(&not_from_malloc[1]), -EINVAL);
	ARENA_ASSERT_EQ(arena_free((void __arena *)(((u64)p & ~0xffffffffull) +
						    HEAP_WINDOW_END - HEAP_SPAN_SIZE)), -EINVAL);
	ob = arena_malloc(sizeof(*ob));
	ARENA_ASSERT(ob);
	ARENA_ASSERT_EQ(arena_memset(ob, 0, sizeof(*ob)), 0);
	ARENA_ASSERT_EQ(buddy_init(ob), 0);
	p = buddy_alloc(ob, 64);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_free(p), -EINVAL);
	ARENA_ASSERT_EQ(buddy_free(ob, p), 0);
	ARENA_ASSERT_EQ(buddy_destroy(ob), 0);
	ARENA_ASSERT_EQ(arena_free(ob), 0);
	/* The buddy window's frees are reported the same way. */
	ARENA_ASSERT_EQ(g->bad_frees, bad + 8);
	/* Nothing was lost: the next allocations work. */
	p = arena_malloc(48);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_free(p), 0);
	return 0;
}

/*
 * Allocate 8 KiB objects until the reserve runs dry; refill; all works again. Whatever
 * the reserve targets (the runner sets roomy ones), a heap holds at most target x
 * high_water spare spans: XP objects are far beyond that.
 */
#define XP 4096
u64 __arena_global xp[XP];

SEC("syscall")
int test_heap_exhaust_refill(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	struct arena_heap __arena *h;
	u64 shortfalls, p;
	u32 i, n = zero, cpu = bpf_get_smp_processor_id();

	ARENA_ASSERT((u64)g->reserve[0] * g->high_water * (HEAP_SMALL_SPAN / 8192) < XP / 2);
	h = heap_of(cpu * HEAP_LEVELS);
	shortfalls = h->stats.shortfalls;
	for (i = zero; i < XP && can_loop; i++) {
		p = (u64)arena_malloc(8192);
		xp[i] = p;
		if (!p)
			break;
		n++;
	}
	ARENA_ASSERT(n < XP);
	ARENA_ASSERT(h->stats.shortfalls > shortfalls);
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	p = (u64)arena_malloc(8192);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_free((void __arena *)p), 0);
	for (i = zero; i < n && i < XP && can_loop; i++)
		ARENA_ASSERT_EQ(arena_free((void __arena *)xp[i]), 0);
	arena_stdout("exhaust: %u objects of 8 KiB before the reserve ran dry", n);
	return 0;
}

/*
 * Free spans go back: to the reserve, beyond the high-water mark to the pool, where an
 * allocation burst takes them again without maintenance, and only once they are due
 * (the purge delay) to the kernel. With a small target for the test's duration, 20
 * spans are far beyond it; the delay is a minute until the last step sets it to 0.
 */
static __always_inline int pool_round(bool sleepable)
{
	u32 i, k;

	for (k = zero; k < 5 && can_loop; k++) {
		if (sleepable && arena_heap_maintain())
			return __LINE__;
		for (i = zero; i < 64 && can_loop; i++) {
			hp[(k * 64 + i) % NR_PTRS] = sleepable ?
				(u64)arena_malloc_sleepable(4096) : (u64)arena_malloc(4096);
			if (!hp[(k * 64 + i) % NR_PTRS])
				return __LINE__;
		}
	}
	return 0;
}

static __always_inline int pool_free_all(void)
{
	u32 i;
	int err = 0;

	for (i = zero; i < 5 * 64 && i < NR_PTRS && can_loop; i++) {
		if (arena_free((void __arena *)hp[i]))
			err = __LINE__;
		/* A burst that stopped early leaves no stale pointer for the next attempt. */
		hp[i] = 0;
	}
	arena_heap_collect_cpu();
	return err;
}

/* What one attempt of test_heap_pages_returned saw. */
struct {
	u64 mapped, pooled, reused, maps;
} __arena_global pool_seen;

/*
 * One attempt: a sleepable burst that maps, its spans freed to the pool, then the same
 * burst non-sleepable, which the pool alone must serve. -EAGAIN when a background pass
 * ran into that second burst. A function of its own, so that the verifier's states
 * converge at the caller's retry loop (inlined, clang-19's build ran out of them). g is
 * an argument so that its first instruction is not a call: 6.12's verifier misplaces a
 * backward call that opens a function using can_loop (see docs/verifier.md).
 */
static __noinline __noasan int pool_attempt(struct arena_heap_global __arena *g)
{
	u64 passes, reused, maps;
	int err, busy;

	/* Start from a reserve at its target: earlier tests leave up to 4x theirs. */
	g->purge_delay = 0;
	if (arena_heap_maintain() || arena_heap_maintain())
		return __LINE__;
	g->purge_delay = 60000;
	err = pool_round(true);
	pool_seen.mapped = g->spans_mapped;
	if (pool_free_all() && !err)
		err = __LINE__;
	/* Not due: a pass keeps them all. */
	if (arena_heap_maintain() && !err)
		err = __LINE__;
	if (err)
		return err;
	/* Still in the pool (a background pass may have given back older, trimmed ones). */
	pool_seen.pooled = (g->release >> 32) & HEAP_REMOTE_COUNT;
	/*
	 * The burst lets the reserve fall below half, which asks for a background pass;
	 * the timer starts it well after the burst, unless a vCPU stalls. A pass that ran
	 * into the burst moves spans between the pool and the reserves: none may be under
	 * way at the start or at the end, and none may have ended in between.
	 */
	busy = READ_ONCE(g->maintaining);
	passes = g->maintain_passes;
	reused = g->pool_reused;
	maps = g->map_calls;
	err = pool_round(false);
	pool_seen.reused = g->pool_reused - reused;
	pool_seen.maps = g->map_calls - maps;
	busy |= READ_ONCE(g->maintaining);
	if (busy || g->maintain_passes != passes)
		err = -EAGAIN;
	if (pool_free_all() && !err)
		err = __LINE__;
	return err;
}

SEC("syscall")
/* Not instrumented: its own stack and the sanitizer's calls exceed 512 bytes. */
__noasan int test_heap_pages_returned(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	u64 returned = g->spans_returned, end_mapped, start = bpf_ktime_get_ns();
	u32 target = g->reserve[0], high = g->high_water, delay = g->purge_delay;
	int err = -EAGAIN, tries;

	/* Frees must free: the sanitizer's quarantine would keep the spans in use. */
	exact_frees();
	g->reserve[0] = 2;
	g->high_water = 1;
	for (tries = zero; tries < 1000 && can_loop; tries++) {
		err = pool_attempt(g);
		if (err != -EAGAIN || bpf_ktime_get_ns() - start >= ARENA_TEST_RETRY_NS)
			break;
	}
	/* Due now: two passes (the first may map a reserve, and then gives back nothing). */
	g->purge_delay = 0;
	if (!err && (arena_heap_maintain() || arena_heap_maintain()))
		err = __LINE__;
	/*
	 * Read before the targets go back up: a background pass right after refills every
	 * heap to them (about 100 spans), which is not this test's business.
	 */
	end_mapped = g->spans_mapped;
	returned = g->spans_returned - returned;
	g->reserve[0] = target;
	g->high_water = high;
	g->purge_delay = delay;
	arena_stdout(
		     "returned: %llu spans mapped at the peak, %llu pooled, %llu reused from the pool (%llu maps), %llu given back, %llu mapped at the end; %d attempts, error %d",
		     pool_seen.mapped, pool_seen.pooled, pool_seen.reused, pool_seen.maps,
		     returned, end_mapped, tries, err);
	if (err == -EAGAIN)
		arena_stderr("a background pass ran into every burst for %llu s",
			     ARENA_TEST_RETRY_NS / 1000000000);
	ARENA_ASSERT_EQ(err, 0);
	ARENA_ASSERT(pool_seen.pooled >= 16);
	/* 20 spans' worth: the reserve (2) and a current span, then the pool; no map. */
	ARENA_ASSERT(pool_seen.reused >= 16);
	ARENA_ASSERT_EQ(pool_seen.maps, 0);
	ARENA_ASSERT(returned >= 16);
	ARENA_ASSERT(end_mapped < pool_seen.mapped);
	return 0;
}

/*
 * Maintenance with nothing to do maps and unmaps nothing: settle with a purge delay of 0
 * (refill, shed the spares, give back the due ones), then two idle passes in a row.
 */
SEC("syscall")
int test_heap_idle_passes(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	struct buddy __arena *b = (struct buddy __arena *)arena_buddy_addr();
	u64 maps, pages, unmaps, upages, bmaps, bunmaps, passes, ns, t0, t1;
	u32 delay = g->purge_delay, i;

	g->purge_delay = 0;
	for (i = zero; i < 4 && can_loop; i++)
		ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	g->purge_delay = delay;
	maps = g->map_calls;
	pages = g->map_pages;
	unmaps = g->unmap_calls;
	upages = g->unmap_pages;
	bmaps = b->stats.map_calls;
	bunmaps = b->stats.unmap_calls;
	passes = g->maintain_passes;
	ns = g->maintain_ns;
	t0 = bpf_ktime_get_ns();
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	t1 = bpf_ktime_get_ns();
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	arena_stdout("idle passes: %llu ns and %llu ns (the passes' own count: %llu ns)",
		     t1 - t0, bpf_ktime_get_ns() - t1, g->maintain_ns - ns);
	ARENA_ASSERT_EQ(g->map_calls, maps);
	ARENA_ASSERT_EQ(g->map_pages, pages);
	ARENA_ASSERT_EQ(g->unmap_calls, unmaps);
	ARENA_ASSERT_EQ(g->unmap_pages, upages);
	ARENA_ASSERT_EQ(b->stats.map_calls, bmaps);
	ARENA_ASSERT_EQ(b->stats.unmap_calls, bunmaps);
	ARENA_ASSERT(g->maintain_passes >= passes + 2);
	return 0;
}

/*
 * A reserve's spans beyond its target, unused for the purge delay, leave it: after a
 * reservation nobody used, the next pass (delay 0) sheds them and the one after gives
 * them back. The target itself stays.
 */
SEC("syscall")
int test_heap_reserve_shed(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	u32 cpu = bpf_get_smp_processor_id(), delay = g->purge_delay, target = g->reserve[0];
	struct arena_heap __arena *h = heap_of(cpu * HEAP_LEVELS);
	u64 shed = g->spares_shed, returned = g->spans_returned;
	u32 have;

	ARENA_ASSERT_EQ(arena_heap_reserve(64, 40 * (HEAP_SMALL_SPAN / 64)), 0);
	have = h->reserve_nr[0] + ((h->reserve_in[0] >> 32) & HEAP_REMOTE_COUNT);
	ARENA_ASSERT(have >= 40 + target);
	/* Within the delay nothing leaves (a minute: no pass can find it due). */
	g->purge_delay = 60000;
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	ARENA_ASSERT_EQ(g->spares_shed, shed);
	g->purge_delay = 0;
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	g->purge_delay = delay;
	ARENA_ASSERT(g->spares_shed >= shed + 40);
	ARENA_ASSERT(g->spans_returned >= returned + 40);
	have = h->reserve_nr[0] + ((h->reserve_in[0] >> 32) & HEAP_REMOTE_COUNT);
	arena_stdout("shed: %llu spans, %u left in the reserve (target %u)",
		     g->spares_shed - shed, have, target);
	ARENA_ASSERT_EQ(have, target);
	/* With a rest level, a quiet heap keeps only that; its target comes back after. */
	g->purge_delay = 0;
	g->reserve_rest = 1;
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	have = h->reserve_nr[0] + ((h->reserve_in[0] >> 32) & HEAP_REMOTE_COUNT);
	g->reserve_rest = 0;
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	g->purge_delay = delay;
	ARENA_ASSERT_EQ(have, 1);
	have = h->reserve_nr[0] + ((h->reserve_in[0] >> 32) & HEAP_REMOTE_COUNT);
	ARENA_ASSERT_EQ(have, target);
	return 0;
}

/*
 * arena_heap_reserve: room for a bulk build in a sleepable program, with no maintenance
 * on the way and no shortfall; bad requests get an errno, large sizes raise the buddy's
 * spares.
 */
#define BULK 20000
u64 __arena_global bulk[BULK];

SEC("syscall")
int test_heap_reserve(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	struct buddy __arena *b = (struct buddy __arena *)arena_buddy_addr();
	u32 cpu = bpf_get_smp_processor_id(), i, n = zero;
	struct arena_heap __arena *h = heap_of(cpu * HEAP_LEVELS);
	u64 shortfalls = h->stats.shortfalls, passes, p;

	ARENA_ASSERT_EQ(arena_heap_reserve(0, 1), -EINVAL);
	ARENA_ASSERT_EQ(arena_heap_reserve(BUDDY_MAX_SIZE + 1, 1), -EINVAL);
	ARENA_ASSERT_EQ(arena_heap_reserve(64, 1ull << 40), -E2BIG);
	ARENA_ASSERT_EQ(arena_heap_reserve(64, 0), 0);
	ARENA_ASSERT_EQ(arena_heap_reserve(256 << 10, 8), 0);
	ARENA_ASSERT(b->stats.chunks_spare >= 4);

	ARENA_ASSERT_EQ(arena_heap_reserve(48, BULK), 0);
	passes = g->maintain_passes;
	for (i = zero; i < BULK && can_loop; i++) {
		p = (u64)arena_malloc(48);
		bulk[i] = p;
		if (!p)
			break;
		n++;
	}
	/* The background workqueue may have run a pass meanwhile: none is needed. */
	ARENA_ASSERT_EQ(n, BULK);
	ARENA_ASSERT_EQ(h->stats.shortfalls, shortfalls);
	for (i = zero; i < BULK && can_loop; i++)
		ARENA_ASSERT_EQ(arena_free((void __arena *)bulk[i]), 0);
	arena_stdout("reserve: %u objects of 48 B, %llu maintenance passes meanwhile", n,
		     g->maintain_passes - passes);
	return 0;
}

/*
 * A sleepable allocation finds room where maintenance would map nothing: with the
 * reserve targets at 0 and this CPU drained of 16-byte objects (what a sched_ext
 * ops.init_task meets in a fork storm), arena_malloc fails and arena_malloc_sleepable
 * maps what the one object needs. The drained objects hold their own list.
 */
SEC("syscall")
int test_heap_sleepable_no_target(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	u32 small = g->reserve[0], medium = g->reserve[1], i, n = zero;
	u64 __arena *obj = NULL, *p;	/* NULL: clang 19 reads it even if no round ran */
	u64 list = 0, next;
	bool drained;
	int err = 0;

	g->reserve[0] = 0;
	g->reserve[1] = 0;
	for (i = zero; i < (1u << 22) && can_loop; i++) {
		obj = arena_malloc(16);
		if (!obj)
			break;
		*obj = list;
		list = (u64)obj;
		n++;
	}
	drained = !obj;		/* the loop ended on a failure, not on its bound */
	p = arena_malloc_sleepable(16);
	if (p && arena_free(p))
		err = __LINE__;
	for (i = zero; list && i < (1u << 22) && can_loop; i++) {
		obj = (u64 __arena *)list;
		next = *obj;
		if (arena_free(obj))
			err = __LINE__;
		list = next;
	}
	g->reserve[0] = small;
	g->reserve[1] = medium;
	arena_stdout("sleepable, no target: %u objects drained, then one more: %s", n,
		     p ? "yes" : "no");
	ARENA_ASSERT(drained);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(list, 0);
	ARENA_ASSERT_EQ(err, 0);
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	return 0;
}

/*
 * Medium spans whose objects leave pages unused are trimmed by maintenance: two 44 KiB
 * objects use 22 of a span's 32 pages. Trimmed pages are really gone (on 6.12 a store
 * there is dropped and a load reads 0), the objects keep their bytes, and the span goes
 * back to the kernel whole once empty. A span emptied before its trim stays whole and
 * goes on serving from the reserve. The background workqueue may run any time, so the
 * states in between are checked as either side of its work.
 */
#define TRIM_SIZE	(11 * 4096)
#define TRIM_USED	22		/* pages two objects of TRIM_SIZE use */

/* Store to and load from a page that is not there: the allocator's view, unchecked. */
static __noinline __noasan u8 probe_gone_page(u8 __arena *p)
{
	WRITE_ONCE(*p, 0x5a);
	return READ_ONCE(*p);
}

/*
 * arena_heap_maintain(), and whether it ran alone. The background workqueue's pass may
 * be under way, asleep in a page kfunc on this very CPU, where it cannot go on while we
 * run: our pass then runs beside it (counted in maintain_overlaps), and the spans that
 * pass holds in transit are neither in the pool nor given back yet.
 */
static __always_inline int maintain_alone(bool *alone)
{
	u32 overlaps = READ_ONCE(glob()->maintain_overlaps);
	int err = arena_heap_maintain();

	*alone = READ_ONCE(glob()->maintain_overlaps) == overlaps;
	return err;
}

SEC("syscall")
int test_heap_trim(struct arena_test_ctx *ctx)
{
	struct arena_heap_global __arena *g = glob();
	u64 trimmed = g->pages_trimmed, returned = g->spans_returned;
	struct arena_heap_span __arena *sp;
	u8 __arena *a, *b, *tail;
	bool alone;
	u32 t;

	exact_frees();
	ARENA_ASSERT_EQ(arena_heap_class_size(arena_heap_class(TRIM_SIZE)), TRIM_SIZE);
	a = arena_malloc_sleepable(TRIM_SIZE - HEAP_SLACK);
	b = arena_malloc_sleepable(TRIM_SIZE - 100);
	ARENA_ASSERT(a && b);
	sp = span_of((u64)a);
	ARENA_ASSERT(span_of((u64)b) == sp);
	ARENA_ASSERT_EQ(sp->capacity, 2);
	t = sp->trim;
	ARENA_ASSERT(t == HEAP_TRIM_PENDING || t == HEAP_TRIM_BUSY || t == HEAP_TRIM_DONE);
	ARENA_ASSERT_EQ(arena_test_fill(a, TRIM_SIZE - HEAP_SLACK, 1), 0);
	ARENA_ASSERT_EQ(arena_test_fill(b, TRIM_SIZE - 100, 2), 0);

	ARENA_ASSERT_EQ(maintain_alone(&alone), 0);
	/*
	 * Beside a workqueue pass, that pass may hold it still (BUSY, or PENDING on the
	 * trim stack it took whole).
	 */
	if (!alone && READ_ONCE(sp->trim) != HEAP_TRIM_DONE) {
		arena_stdout("trim: maintenance ran beside the workqueue's, mid-trim: not checked");
		ARENA_ASSERT_EQ(arena_test_check(a, TRIM_SIZE - HEAP_SLACK, 1), 0);
		ARENA_ASSERT_EQ(arena_test_check(b, TRIM_SIZE - 100, 2), 0);
		ARENA_ASSERT_EQ(arena_free(a), 0);
		ARENA_ASSERT_EQ(arena_free(b), 0);
		return 0;
	}
	ARENA_ASSERT_EQ(sp->trim, HEAP_TRIM_DONE);
	/*
	 * Trimmed already when we got it: by the workqueue just now, or in an earlier use
	 * as this class's current span (an empty current span stays), before the count we
	 * started from. The pages are gone either way (the probe below); the count moved
	 * for sure only when this test saw the trim still to come.
	 */
	if (t != HEAP_TRIM_DONE)
		ARENA_ASSERT(g->pages_trimmed >= trimmed + 32 - TRIM_USED);
	ARENA_ASSERT_EQ(arena_test_check(a, TRIM_SIZE - HEAP_SLACK, 1), 0);
	ARENA_ASSERT_EQ(arena_test_check(b, TRIM_SIZE - 100, 2), 0);
	/* The first trimmed page: the store is dropped, the load faults to 0. */
	tail = (u8 __arena *)(((u64)a & ~(HEAP_SPAN_SIZE - 1ull)) + TRIM_USED * 4096);
	ARENA_ASSERT_EQ(probe_gone_page(tail), 0);

	/* Emptied after its trim (and retired by a collect): to the kernel, not a reserve. */
	ARENA_ASSERT_EQ(arena_free(a), 0);
	ARENA_ASSERT_EQ(arena_free(b), 0);
	ARENA_ASSERT(arena_heap_collect_cpu() >= 1);
	/* In the pool, or given back already by the workqueue (which clears its magic). */
	ARENA_ASSERT(sp->state == HEAP_SPAN_RELEASE || sp->magic != HEAP_SPAN_MAGIC);
	ARENA_ASSERT_EQ(maintain_alone(&alone), 0);
	/* Beside a workqueue pass, the span may be in that pass's hands still. */
	if (alone) {
		ARENA_ASSERT(g->spans_returned > returned);
		ARENA_ASSERT(sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RELEASE);
	} else {
		arena_stdout("trim: maintenance ran beside the workqueue's: release not checked");
	}

	/* Emptied before: cancelled and whole; a 64 KiB object may use every page. */
	a = arena_malloc(TRIM_SIZE - HEAP_SLACK);
	ARENA_ASSERT(a);
	sp = span_of((u64)a);
	ARENA_ASSERT_EQ(arena_free(a), 0);
	ARENA_ASSERT(arena_heap_collect_cpu() >= 1);
	t = sp->trim;
	/* DONE or BUSY: the workqueue trimmed it in between. */
	ARENA_ASSERT(t == HEAP_TRIM_CANCELLED || t == HEAP_TRIM_DONE || t == HEAP_TRIM_BUSY);
	if (t == HEAP_TRIM_CANCELLED && sp->state == HEAP_SPAN_RESERVE) {
		b = arena_malloc(HEAP_MEDIUM_MAX - HEAP_SLACK);
		ARENA_ASSERT(b);
		if (span_of((u64)b) == sp) {
			ARENA_ASSERT_EQ(arena_test_fill(b, HEAP_MEDIUM_MAX - HEAP_SLACK, 3), 0);
			ARENA_ASSERT_EQ(arena_test_check(b, HEAP_MEDIUM_MAX - HEAP_SLACK, 3), 0);
		}
		ARENA_ASSERT_EQ(arena_free(b), 0);
	}
	ARENA_ASSERT_EQ(maintain_alone(&alone), 0);
	/* Off the trim stack now: whole and unqueued (or given back, which clears it). */
	if (t == HEAP_TRIM_CANCELLED && alone)
		ARENA_ASSERT_EQ(sp->trim, HEAP_TRIM_NONE);
	arena_stdout("trim: %llu pages trimmed in all, %llu during this test",
		     g->pages_trimmed, g->pages_trimmed - trimmed);
	return 0;
}

/*
 * A program interrupting another on this CPU: mark level 0 busy as an interrupted
 * malloc would leave it, then allocate. The first nested use finds no reserve there
 * (nesting levels get one once used), maintenance gives one, and then it works; frees
 * across levels are remote.
 */
SEC("syscall")
int test_heap_nested_level(struct arena_test_ctx *ctx)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct arena_heap __arena *h0 = heap_of(cpu * HEAP_LEVELS);
	struct arena_heap __arena *h1 = heap_of(cpu * HEAP_LEVELS + 1);
	u64 nested = h1->stats.nested, remote, orphans;
	void __arena *p, *q;
	s64 out;
	int err;

	exact_frees();

	ARENA_ASSERT_EQ(h0->magic, HEAP_MAGIC);
	ARENA_ASSERT_EQ(h1->magic, HEAP_MAGIC);
	q = arena_malloc(32);			/* from level 0 */
	ARENA_ASSERT(q);
	h0->busy = 1;
	p = arena_malloc(32);
	if (!p) {
		h0->busy = 0;
		ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
		h0->busy = 1;
		p = arena_malloc(32);
	}
	h0->busy = 0;
	ARENA_ASSERT(p);
	ARENA_ASSERT(h1->stats.nested > nested);
	ARENA_ASSERT_EQ(span_of((u64)p)->owner, cpu * HEAP_LEVELS + 1 + 1);
	ARENA_ASSERT_EQ(span_of((u64)q)->owner, cpu * HEAP_LEVELS + 1);
	/* Level 0 frees the level-1 object: a remote free. */
	remote = h0->stats.remote_frees;
	ARENA_ASSERT_EQ(arena_free(p), 0);
	ARENA_ASSERT_EQ(h0->stats.remote_frees, remote + 1);
	/* And level 1 frees level 0's. */
	h0->busy = 1;
	remote = h1->stats.remote_frees;
	ARENA_ASSERT_EQ(arena_free(q), 0);
	h0->busy = 0;
	ARENA_ASSERT_EQ(h1->stats.remote_frees, remote + 1);
	/* Every level busy: malloc fails cleanly, and says why. */
	h0->busy = h1->busy = heap_of(cpu * HEAP_LEVELS + 2)->busy = 1;
	p = arena_malloc(32);
	h0->busy = h1->busy = heap_of(cpu * HEAP_LEVELS + 2)->busy = 0;
	ARENA_ASSERT(!p);
	/* A free with every level busy still gets through, and the account stays exact. */
	q = arena_malloc(32);
	ARENA_ASSERT(q);
	out = arena_heap_outstanding();
	orphans = glob()->orphan_frees;
	h0->busy = h1->busy = heap_of(cpu * HEAP_LEVELS + 2)->busy = 1;
	err = arena_free(q);
	h0->busy = h1->busy = heap_of(cpu * HEAP_LEVELS + 2)->busy = 0;
	ARENA_ASSERT_EQ(err, 0);
	ARENA_ASSERT_EQ(glob()->orphan_frees, orphans + 1);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), out - 1);
	return 0;
}

/*
 * Parallel: thread t allocates objects and hands them to thread t + 1 (on another CPU)
 * through slots; the receiver checks and frees them: remote frees. The account at the
 * end must be exact.
 */
#define XT		4
#define XSLOTS		16
#define XROUNDS		3000
u64 __arena_global xslot[XT][XSLOTS];
u64 __arena_global xallocs[XT], xfrees[XT], xbad[XT];
s64 __arena_global xbefore;
u64 __arena_global xremote_before;

static __always_inline u64 xsum(u64 __arena *a)
{
	return a[0] + a[1] + a[2] + a[3];
}

/* One counter of struct arena_heap_stats (its byte offset), summed over every heap. */
__weak u64 stat_total(u32 off)
{
	u64 n = 0;
	u32 id;

	for (id = zero; id < glob()->nr_cpus * HEAP_LEVELS && can_loop; id++)
		n += *(u64 __arena *)((u64)&heap_of(id)->stats + (off & ~7u));
	return n;
}

#define remote_frees_total() stat_total(offsetof(struct arena_heap_stats, remote_frees))

SEC("syscall")
int parallel_test_heap_remote__init(struct arena_test_ctx *ctx)
{
	u32 t, k;

	for (t = zero; t < XT && can_loop; t++) {
		xallocs[t] = xfrees[t] = xbad[t] = 0;
		for (k = zero; k < XSLOTS && can_loop; k++)
			xslot[t][k] = 0;
	}
	/* Enough spans for every CPU's heap: many objects are out at once. */
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	xbefore = outstanding();
	xremote_before = remote_frees_total();
	return 0;
}

/* An object's first words say who made it: checked by whoever frees it. */
static __always_inline u64 xtag(u32 t, u32 n)
{
	return 0x5eed000000000000ull | ((u64)t << 32) | n;
}

__weak int xdrain(u32 me, u32 from)
{
	u64 __arena *o;
	u64 v;
	u32 k;

	for (k = zero; k < XSLOTS && can_loop; k++) {
		if (!READ_ONCE(xslot[from][k]))
			continue;
		v = xchg(&xslot[from][k], 0);
		if (!v)
			continue;
		o = (u64 __arena *)v;
		if ((o[0] >> 32) != (0x5eed0000ull | from) || o[1] != ~o[0])
			xbad[me]++;
		if (arena_free(o))
			xbad[me]++;
		xfrees[me]++;
	}
	return 0;
}

static __noinline int xrun(u32 t)
{
	u32 r, k, n = zero, size;
	u64 __arena *o;
	u64 x = t + 11;

	t &= XT - 1;
	for (r = zero; r < XROUNDS && can_loop; r++) {
		xdrain(t, (t + XT - 1) % XT);
		for (k = zero; k < XSLOTS && can_loop; k++) {
			if (READ_ONCE(xslot[t][k]))
				continue;
			size = 16 + (arena_test_rand(&x) % 2048);
			o = arena_malloc_sleepable(size);
			if (!o) {
				xbad[t]++;
				continue;
			}
			o[0] = xtag(t, n++);
			o[1] = ~o[0];
			xallocs[t]++;
			/* The tag words before the slot: xdrain()'s xchg takes both. */
			smp_store_release(&xslot[t][k], (u64)o);
		}
	}
	return r == XROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_heap_remote__0(struct arena_test_ctx *ctx) { return xrun(0); }
SEC("syscall")
int parallel_test_heap_remote__1(struct arena_test_ctx *ctx) { return xrun(1); }
SEC("syscall")
int parallel_test_heap_remote__2(struct arena_test_ctx *ctx) { return xrun(2); }
SEC("syscall")
int parallel_test_heap_remote__3(struct arena_test_ctx *ctx) { return xrun(3); }

/* The account, in a global function: see outstanding() for why. */
__weak int xcheck(u32 nr_cpus)
{
	u64 allocs, frees, remote;
	u32 t;

	/* What is still in the slots goes now. */
	for (t = zero; t < XT && can_loop; t++)
		xdrain(t, t);
	allocs = xsum(xallocs);
	frees = xsum(xfrees);
	remote = remote_frees_total() - xremote_before;
	arena_stdout("remote: %llu objects handed over and freed, %llu remote frees",
		     frees, remote);
	ARENA_ASSERT_EQ(xsum(xbad), 0);
	ARENA_ASSERT_EQ(allocs, frees);
	ARENA_ASSERT(allocs >= XT * XSLOTS);
	/*
	 * Threads run on 2 or more CPUs: frees cross heaps. How many depends on how long
	 * the threads overlap (the guest does not preempt), so only their presence is asked.
	 */
	ARENA_ASSERT(nr_cpus < 2 || remote > 0);
	ARENA_ASSERT_EQ(glob()->lost_frees, 0);
	return 0;
}

SEC("syscall")
int parallel_test_heap_remote__fini(struct arena_test_ctx *ctx)
{
	return xcheck(ctx->nr_cpus);
}

/* Parallel stress: random sizes, patterns checked before every free. */
#define ST		4
#define SLIVE		64
#define SROUNDS		4000
u64 __arena_global sptr[ST][SLIVE];
u32 __arena_global ssize[ST][SLIVE];
s64 __arena_global sbefore;

SEC("syscall")
int parallel_test_heap_stress__init(struct arena_test_ctx *ctx)
{
	u32 t, k;

	for (t = zero; t < ST && can_loop; t++)
		for (k = zero; k < SLIVE && can_loop; k++)
			sptr[t][k] = 0;
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	sbefore = outstanding();
	return 0;
}

static __noinline int srun(u32 t, u32 seed)
{
	u64 x = ((u64)seed << 16) | (t + 1), p;
	u32 r, k, size;

	t &= ST - 1;
	for (r = zero; r < SROUNDS && can_loop; r++) {
		k = arena_test_rand(&x) % SLIVE;
		p = sptr[t][k];
		if (p) {
			if (arena_test_check((u8 __arena *)p, ssize[t][k] < 64 ? ssize[t][k] : 64,
					     t * 977 + k))
				return 1000 + r;
			if (arena_free((void __arena *)p))
				return 2000 + r;
			sptr[t][k] = 0;
			continue;
		}
		size = 1 + arena_test_rand(&x) % (arena_test_rand(&x) & 1 ? 256 : 16384);
		p = (u64)arena_malloc(size);
		if (!p)
			continue;	/* a reserve ran dry: counted, not an error */
		arena_test_fill((u8 __arena *)p, size < 64 ? size : 64, t * 977 + k);
		sptr[t][k] = p;
		ssize[t][k] = size;
	}
	for (k = zero; k < SLIVE && can_loop; k++) {
		p = sptr[t][k];
		if (!p)
			continue;
		if (arena_test_check((u8 __arena *)p, ssize[t][k] < 64 ? ssize[t][k] : 64,
				     t * 977 + k))
			return 3000 + k;
		if (arena_free((void __arena *)p))
			return 4000 + k;
		sptr[t][k] = 0;
	}
	return r == SROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_heap_stress__0(struct arena_test_ctx *ctx) { return srun(0, ctx->seed); }
SEC("syscall")
int parallel_test_heap_stress__1(struct arena_test_ctx *ctx) { return srun(1, ctx->seed); }
SEC("syscall")
int parallel_test_heap_stress__2(struct arena_test_ctx *ctx) { return srun(2, ctx->seed); }
SEC("syscall")
int parallel_test_heap_stress__3(struct arena_test_ctx *ctx) { return srun(3, ctx->seed); }

SEC("syscall")
int parallel_test_heap_stress__fini(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT_EQ(glob()->lost_frees, 0);
	return 0;
}

/*
 * A remote free whose push cannot get through parks the object on the freeing heap
 * instead of giving up: fail_remote makes every push fail. Level 0 owns the objects;
 * with level 0 marked busy, frees run on level 1 and park there. A parked object is
 * already free (a second free is refused), and the next remote free, with pushes
 * working again, drains the parked list: every object goes home, nothing is lost.
 */
#define PARK_N	8
u64 __arena_global park_obj[PARK_N + 1];

/* Objects a span counts out: handed out, less those waiting on its remote list. */
static __always_inline s64 span_count(struct arena_heap_span __arena *sp)
{
	return (s64)sp->used - (s64)((sp->remote >> 32) & HEAP_REMOTE_COUNT);
}

/* Free park_obj[from .. to - 1]: how many went through. Global: see test_heap_parked. */
__weak int park_free(u32 from, u32 to)
{
	u32 k;
	int n = 0;

	for (k = from; k < to && k <= PARK_N && can_loop; k++)
		n += arena_free((void __arena *)park_obj[k]) == 0;
	return n;
}

/* Global, and leak-checked with arena_heap_outstanding(). */
__weak int heap_parked(void)
{
	u32 cpu = bpf_get_smp_processor_id(), k, freed = 0, nr_parked, nr_after;
	struct arena_heap __arena *h0 = heap_of(cpu * HEAP_LEVELS);
	struct arena_heap __arena *h1 = heap_of(cpu * HEAP_LEVELS + 1);
	struct arena_heap_global __arena *g = glob();
	u64 parked = h1->stats.parked, lost = g->lost_frees;
	struct arena_heap_span __arena *sa, *sb;
	s64 before, span_out;
	int again;

	exact_frees();
	ARENA_ASSERT_EQ(h1->magic, HEAP_MAGIC);
	ARENA_ASSERT_EQ(h1->parked_nr, 0);
	before = arena_heap_outstanding();
	/* Sleepable: a reserve that ran dry in earlier tests refills instead of failing. */
	for (k = zero; k < PARK_N + 1 && can_loop; k++) {
		park_obj[k] = (u64)arena_malloc_sleepable(48);
		ARENA_ASSERT(park_obj[k]);
		ARENA_ASSERT_EQ(span_of(park_obj[k])->owner, cpu * HEAP_LEVELS + 1);
	}
	/*
	 * The nine are in the span that was current, and the next one if it ran out (a
	 * class-48 span holds 1365): what those spans count out, less the nine.
	 */
	sa = span_of(park_obj[0]);
	sb = span_of(park_obj[PARK_N]);
	span_out = span_count(sa) + (sb != sa ? span_count(sb) : 0) - (PARK_N + 1);
	/* Every assertion after the state is restored: a failure must not leave it set. */
	g->fail_remote = 1;
	h0->busy = 1;
	/* Loops over the inlined arena_free in a global function: 6.12's jump history. */
	freed = park_free(0, PARK_N);
	again = arena_free((void __arena *)park_obj[0]);
	nr_parked = h1->parked_nr;
	g->fail_remote = 0;
	/* Pushes work again: the next remote free takes the parked ones home first. */
	freed += park_free(PARK_N, PARK_N + 1);
	nr_after = h1->parked_nr;
	h0->busy = 0;
	ARENA_ASSERT_EQ(freed, PARK_N + 1);
	ARENA_ASSERT_EQ(again, -EINVAL);
	ARENA_ASSERT_EQ(nr_parked, PARK_N);
	ARENA_ASSERT_EQ(h1->stats.parked, parked + PARK_N);
	ARENA_ASSERT_EQ(nr_after, 0);
	ARENA_ASSERT_EQ(g->lost_frees, lost);
	/* Every parked object reached its span's remote list: the spans count them back. */
	ARENA_ASSERT_EQ(span_count(sa) + (sb != sa ? span_count(sb) : 0), span_out);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), before);
	/* And level 0 hands them out again. */
	for (k = zero; k < PARK_N + 1 && can_loop; k++) {
		park_obj[k] = (u64)arena_malloc_sleepable(48);
		ARENA_ASSERT(park_obj[k]);
	}
	ARENA_ASSERT_EQ(park_free(0, PARK_N + 1), PARK_N + 1);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), before);
	return 0;
}

SEC("syscall")
int test_heap_parked(struct arena_test_ctx *ctx)
{
	return heap_parked();
}

/*
 * Contention as bad as it gets: the init program's CPU's level-2 heap (what an NMI
 * program would use) owns every object, so every free by every thread, on every CPU,
 * is a remote free into its few spans (sizes 17..96 B: five classes, a span or two
 * each). 4 threads, then 8, on however many vCPUs; every byte is checked before its
 * free, and the account after is exact: all frees remote, none parked for good, none
 * lost, every span's objects all back.
 */
#define CN		8192
#define CMAX_T		8
u64 __arena_global cobj[CN];
u64 __arena_global cbad[CMAX_T], cfreed[CMAX_T];
s64 __arena_global cbefore;
u64 __arena_global cremote_before;

static __always_inline u32 csize_of(u32 k)
{
	return 17 + (k * 37) % 80;
}

/* One object from level 2 of this CPU, as a program interrupting two others gets. */
__weak u64 contend_alloc(u32 size)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct arena_heap __arena *h0 = heap_of(cpu * HEAP_LEVELS);
	struct arena_heap __arena *h1 = heap_of(cpu * HEAP_LEVELS + 1);
	u64 p;

	h0->busy = h1->busy = 1;
	p = (u64)arena_malloc(size);
	h0->busy = h1->busy = 0;
	return p;
}

__weak int contend_init(void)
{
	u32 k, owner = bpf_get_smp_processor_id() * HEAP_LEVELS + 2;
	u64 p;

	exact_frees();
	ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
	cbefore = arena_heap_outstanding();
	cremote_before = remote_frees_total();
	for (k = zero; k < CMAX_T && can_loop; k++)
		cbad[k] = cfreed[k] = 0;
	for (k = zero; k < CN && can_loop; k++) {
		p = contend_alloc(csize_of(k));
		if (!p) {
			/* Level 2's reserve (a span per kind) ran out: maintenance refills it. */
			ARENA_ASSERT_EQ(arena_heap_maintain(), 0);
			p = contend_alloc(csize_of(k));
		}
		ARENA_ASSERT(p);
		ARENA_ASSERT_EQ(span_of(p)->owner, owner + 1);
		ARENA_ASSERT_EQ(arena_test_fill((u8 __arena *)p, csize_of(k), k), 0);
		cobj[k] = p;
	}
	ARENA_ASSERT_EQ(k, CN);
	return 0;
}

/*
 * Thread t of n: check and free objects t, t + n, ... while the others do the same.
 * Global: the verifier must not follow t and n as constants through the loop.
 */
__weak int contend_run(u32 t, u32 n)
{
	u64 p;
	u32 k;

	if (t >= CMAX_T || !n)
		return -EINVAL;
	for (k = t; k < CN && can_loop; k += n) {
		p = cobj[k];
		if (!p || arena_test_check((u8 __arena *)p, csize_of(k), k) ||
		    arena_free((void __arena *)p))
			cbad[t]++;
		else
			cfreed[t]++;
	}
	return k >= CN ? 0 : -E2BIG;
}

/*
 * The account; global, as the __fini programs' helpers must be on 6.12, and by
 * arena_heap_outstanding() (see heap_parked). test_heap_zz_clean_after_parallel, which
 * runs after every parallel test, checks the spans' own counts with outstanding().
 */
__weak int contend_check(u32 n)
{
	struct arena_heap_global __arena *g = glob();
	u64 freed = 0, bad = 0, remote;
	u32 t, id, parked = 0;

	for (t = zero; t < CMAX_T && can_loop; t++) {
		freed += cfreed[t];
		bad += cbad[t];
	}
	for (id = zero; id < g->nr_cpus * HEAP_LEVELS && can_loop; id++)
		parked += heap_of(id)->parked_nr;
	remote = remote_frees_total() - cremote_before;
	arena_stdout(
		     "contend: %u threads freed %llu objects of one heap: %llu remote frees, %u parked now",
		     n, freed, remote, parked);
	ARENA_ASSERT_EQ(bad, 0);
	ARENA_ASSERT_EQ(freed, CN);
	ARENA_ASSERT_EQ(remote, CN);
	ARENA_ASSERT_EQ(parked, 0);
	ARENA_ASSERT_EQ(g->lost_frees, 0);
	ARENA_ASSERT_EQ(g->lost_spans, 0);
	ARENA_ASSERT_EQ(arena_heap_outstanding(), cbefore);
	return 0;
}

SEC("syscall")
int parallel_test_heap_contend4__init(struct arena_test_ctx *ctx) { return contend_init(); }
SEC("syscall")
int parallel_test_heap_contend4__0(struct arena_test_ctx *ctx) { return contend_run(0, 4); }
SEC("syscall")
int parallel_test_heap_contend4__1(struct arena_test_ctx *ctx) { return contend_run(1, 4); }
SEC("syscall")
int parallel_test_heap_contend4__2(struct arena_test_ctx *ctx) { return contend_run(2, 4); }
SEC("syscall")
int parallel_test_heap_contend4__3(struct arena_test_ctx *ctx) { return contend_run(3, 4); }
SEC("syscall")
int parallel_test_heap_contend4__fini(struct arena_test_ctx *ctx) { return contend_check(4); }

SEC("syscall")
int parallel_test_heap_contend8__init(struct arena_test_ctx *ctx) { return contend_init(); }
SEC("syscall")
int parallel_test_heap_contend8__0(struct arena_test_ctx *ctx) { return contend_run(0, 8); }
SEC("syscall")
int parallel_test_heap_contend8__1(struct arena_test_ctx *ctx) { return contend_run(1, 8); }
SEC("syscall")
int parallel_test_heap_contend8__2(struct arena_test_ctx *ctx) { return contend_run(2, 8); }
SEC("syscall")
int parallel_test_heap_contend8__3(struct arena_test_ctx *ctx) { return contend_run(3, 8); }
SEC("syscall")
int parallel_test_heap_contend8__4(struct arena_test_ctx *ctx) { return contend_run(4, 8); }
SEC("syscall")
int parallel_test_heap_contend8__5(struct arena_test_ctx *ctx) { return contend_run(5, 8); }
SEC("syscall")
int parallel_test_heap_contend8__6(struct arena_test_ctx *ctx) { return contend_run(6, 8); }
SEC("syscall")
int parallel_test_heap_contend8__7(struct arena_test_ctx *ctx) { return contend_run(7, 8); }
SEC("syscall")
int parallel_test_heap_contend8__fini(struct arena_test_ctx *ctx) { return contend_check(8); }

/*
 * After the parallel tests (programs run in file order): every object they allocated
 * was freed exactly once, so the heaps hold as many objects as before them. Here, not
 * in their __fini: there it trips the 6.12 verifier bug described at outstanding().
 */
SEC("syscall")
int test_heap_zz_clean_after_parallel(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT_EQ(outstanding(), xbefore);
	ARENA_ASSERT_EQ(outstanding(), sbefore);
	return 0;
}

/*
 * Non-sleepable program types that allocate: these must pass the verifier (the runner
 * loads them); user_test runs the xdp and tc ones and attaches the tracing one.
 */
u64 __arena_global np_ok, np_fail, np_null;

static __always_inline int alloc_round(u32 seed)
{
	u8 __arena *p[4];
	int i, bad = 0, nulls = 0;

	for (i = 0; i < 4; i++) {
		p[i] = arena_malloc(16 << (i * 3));	/* 16, 128, 1024, 8192 */
		if (p[i])
			p[i][0] = seed + i;
	}
	for (i = 0; i < 4; i++) {
		if (!p[i]) {
			nulls++;	/* an empty reserve: a clean NULL, counted */
			continue;
		}
		if (p[i][0] != (u8)(seed + i) || arena_free(p[i]))
			bad++;
	}
	if (bad)
		atomic_add(&np_fail, 1);
	else if (nulls)
		atomic_add(&np_null, 1);
	else
		atomic_add(&np_ok, 1);
	return bad + nulls;
}

SEC("xdp")
int heap_xdp(struct xdp_md *ctx)
{
	return alloc_round(1) ? XDP_DROP : XDP_PASS;
}

SEC("tc")
int heap_tc(struct __sk_buff *skb)
{
	return alloc_round(2) ? 2 /* TC_ACT_SHOT */ : 0;
}

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(heap_hrtimer, struct hrtimer *t, ktime_t *now)
{
	alloc_round(3);
	return 0;
}

SEC("kprobe/do_nanosleep")
int heap_kprobe(void *ctx)
{
	alloc_round(4);
	return 0;
}

/* For user_test: exhaust a reserve from XDP, read the counters, churn, clean up. */
#define HOARD 512
u64 __arena_global hoard[HOARD];
u32 __arena_global hoard_n;

SEC("xdp")
int heap_xdp_hoard(struct xdp_md *ctx)
{
	u32 i, n = hoard_n;
	u64 p;

	for (i = zero; i < HOARD && can_loop; i++) {
		if (n >= HOARD)
			break;
		p = (u64)arena_malloc(4096);
		if (!p)
			return XDP_DROP;	/* the reserve is dry: a clean NULL */
		hoard[n++] = p;
		hoard_n = n;
	}
	return XDP_PASS;
}

SEC("syscall")
int heap_hoard_free(void *ctx)
{
	u32 i, n = hoard_n;

	for (i = zero; i < n && i < HOARD && can_loop; i++)
		if (arena_free((void __arena *)hoard[i]))
			return -EINVAL;
	hoard_n = 0;
	return 0;
}

struct heap_counts {
	u64 ok, fail, null;
	s64 outstanding;
	u64 nested;
	u32 iterations;		/* in: heap_churn rounds */
	u32 pad;
};

/* No loop here, only calls: see outstanding() for the 6.12 verifier bug this avoids. */
SEC("syscall")
int heap_counts(struct heap_counts *c)
{
	c->ok = np_ok;
	c->fail = np_fail;
	c->null = np_null;
	c->outstanding = outstanding();
	c->nested = stat_total(offsetof(struct arena_heap_stats, nested));
	return 0;
}

/* Allocation churn for interrupts to land in. */
SEC("syscall")
int heap_churn(struct heap_counts *c)
{
	u32 i, n = c->iterations;
	void __arena *p;

	for (i = zero; i < n && can_loop; i++) {
		p = arena_malloc(32 + (i & 255));
		if (p && arena_free(p))
			return -EINVAL;
	}
	return 0;
}

SEC("syscall")
int test_arena_malloc_calloc_memset(struct arena_test_ctx *ctx)
{
	u8 __arena *p, *q;
	u64 i;

	p = arena_malloc(300);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_memset(p, 0xab, 300), 0);
	for (i = zero; i < 300 && can_loop; i++)
		ARENA_ASSERT_EQ(p[i], 0xab);
	ARENA_ASSERT_EQ(arena_memset(p + 3, 0x11, 5), 0);		/* unaligned */
	ARENA_ASSERT_EQ(p[2], 0xab);
	ARENA_ASSERT_EQ(p[3], 0x11);
	ARENA_ASSERT_EQ(p[7], 0x11);
	ARENA_ASSERT_EQ(p[8], 0xab);
	ARENA_ASSERT_EQ(arena_free(p), 0);
	/* The same block comes back dirty from malloc, clean from calloc. */
	q = arena_calloc(30, 10);
	ARENA_ASSERT(q);
	for (i = zero; i < 300 && can_loop; i++)
		ARENA_ASSERT_EQ(q[i], 0);
	ARENA_ASSERT_EQ(arena_free(q), 0);
	ARENA_ASSERT_EQ(arena_free(q), -EINVAL);
	ARENA_ASSERT_EQ(arena_free(NULL), 0);
	ARENA_ASSERT(!arena_calloc(1ull << 33, 1ull << 33));		/* overflows */
	ARENA_ASSERT(!arena_malloc(0));
	ARENA_ASSERT_EQ(arena_memset(NULL, 0, 8), -EINVAL);
	return 0;
}

/*
 * Large sizes go to the default buddy allocator, which may be destroyed and set up again
 * under the heaps (test_buddy_default_global does the rest of this).
 */
SEC("syscall")
int test_heap_large_after_buddy_setup(struct arena_test_ctx *ctx)
{
	void __arena *p;

	ARENA_ASSERT_EQ(buddy_destroy(&buddy), 0);
	ARENA_ASSERT_EQ(arena_buddy_setup(), 0);
	ARENA_ASSERT_EQ(arena_buddy_is_ready(), 1);
	p = arena_malloc(200000);
	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_free(p), 0);
	return 0;
}
