// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * bench OBJECT: allocator figures, measured in one run, side by side:
 *
 *   heap     arena_malloc/arena_free, the fast per-CPU allocator
 *   buddy    buddy_alloc/buddy_free on one shared buddy allocator (lock per call)
 *   obj_new  bpf_obj_new/bpf_obj_drop, the kernel's BPF object allocator
 *   hashmap  insert/delete in a preallocated BPF hash map of the value size
 *
 * for malloc+free pairs and batches of 256, sizes 16..4096, on one thread and on every
 * CPU at once (threads pinned one per CPU, started together), and the memory overhead of
 * a mixed workload, then how each allocator's throughput scales from one CPU to all.
 * Timings come from wherever this runs (a TCG guest under `make bench`): only the ratios
 * within one run mean anything. Each figure is the best of BENCH_ROUNDS rounds (default
 * 3) in which the allocators take turns, so a busy host slows all of them alike.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include <libarena/heap.h>

enum { ALLOC_HEAP, ALLOC_BUDDY, ALLOC_OBJ, ALLOC_HASH, NR_ALLOCS };
static const char *const alloc_names[] = { "heap", "buddy", "obj_new", "hashmap" };

struct bench_args {
	u32 alloc, batch, size, ops, thread, done, failed, pad;
	u64 live_bytes, block_bytes, pages_held, pages_reserve;
};

#define MAX_THREADS 8

#define MAINT_PASSES 16

struct maint_args {
	u32 passes, n, size, pad;
	u64 ns_min, ns_max, ns_total;
	u64 map_pages, unmap_pages;
	u64 ns[MAINT_PASSES];
};

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

enum { RB_RESERVE, RB_RITUAL, RB_PREFILLED, NR_RB_MODES };

struct rb_args {
	u32 mode, keys;
	u64 ns, map_pages;
};

struct split_args {
	u32 pairs, pad;
	u64 ns_cached, ns_locked;
};

static struct bpf_object *obj;
static struct bpf_program *run_prog, *ref_prog;
static pthread_barrier_t start;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct thread {
	pthread_t tid;
	struct bpf_program *prog;
	struct bench_args a;
	double t0, t1;
	int err;
};

static void *thread_fn(void *p)
{
	struct thread *t = p;
	cpu_set_t set;
	int ret;

	CPU_ZERO(&set);
	CPU_SET(t->a.thread, &set);
	sched_setaffinity(0, sizeof(set), &set);
	pthread_barrier_wait(&start);
	/*
	 * Timed here, not by the main thread: the guest kernel does not preempt, so a
	 * thread that shares a CPU with a running program waits until it is done.
	 */
	t->t0 = now();
	t->err = libarena_prog_run(t->prog, &t->a, sizeof(t->a), &ret);
	t->t1 = now();
	if (!t->err)
		t->err = ret;
	return NULL;
}

/* Run one cell on n threads; total allocations per second, or < 0. */
static double cell(struct bpf_program *prog, u32 alloc, u32 batch, u32 size, u32 ops, int n,
		   u32 *failed)
{
	struct thread t[MAX_THREADS];
	double t0 = 0, t1 = 0, secs;
	u64 done = 0;
	int i;

	pthread_barrier_init(&start, NULL, n + 1);
	*failed = 0;
	for (i = 0; i < n; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].prog = prog;
		t[i].a = (struct bench_args){ .alloc = alloc, .batch = batch, .size = size,
					      .ops = ops, .thread = i };
		pthread_create(&t[i].tid, NULL, thread_fn, &t[i]);
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < n; i++) {
		pthread_join(t[i].tid, NULL);
		if (!i || t[i].t0 < t0)
			t0 = t[i].t0;
		if (t[i].t1 > t1)
			t1 = t[i].t1;
	}
	secs = t1 - t0;
	pthread_barrier_destroy(&start);
	for (i = 0; i < n; i++) {
		if (t[i].err)
			return -1;
		done += t[i].a.done;
		*failed += t[i].a.failed;
	}
	return done / secs;
}

static int run_simple(const char *name, struct bench_args *a)
{
	int ret, err;

	err = libarena_prog_run(bpf_object__find_program_by_name(obj, name), a, sizeof(*a), &ret);
	return err ? err : ret;
}

/*
 * Pages of spare spans: in the heaps' reserves and in the pool, read from the span
 * descriptors of claimed slots (whose descriptor pages are mapped).
 */
static u64 heap_reserve_pages(const struct arena_heap_global *g)
{
	uintptr_t base = (uintptr_t)g & ~(uintptr_t)0xffffffff;
	u64 pages = 0;

	for (u32 s = 0; s < HEAP_NR_SPANS; s++) {
		const struct arena_heap_span *sp;

		if (!(g->claimed[s / 64] & (1ull << (s % 64))))
			continue;
		sp = (const void *)(base + HEAP_DESC_START + (uintptr_t)s * 64);
		if (sp->magic != HEAP_SPAN_MAGIC)
			continue;
		if (sp->state == HEAP_SPAN_RESERVE ||
		    (sp->state == HEAP_SPAN_RELEASE && sp->trim != HEAP_TRIM_DONE))
			pages += HEAP_KIND_SPAN(sp->kind & 1) / 4096;
	}
	return pages;
}

#define NR_SIZES 5
static const u32 sizes[NR_SIZES] = { 16, 64, 256, 1024, 4096 };

/* One allocator's figure for one cell: the best round, and failures of any round. */
struct result {
	double best;		/* allocs/s; < 0 when a round failed to run */
	u32 failed, ops;
};

static void record(struct result *r, double v, u32 failed, u32 ops)
{
	r->ops = ops;
	if (v < 0 || r->best < 0) {
		r->best = -1;
		return;
	}
	if (failed > r->failed)
		r->failed = failed;
	if (v > r->best)
		r->best = v;
}

/* ns per allocation+free on one thread, or 0 when there is no figure. */
static double ns_of(const struct result *r, int threads)
{
	return r->best > 0 && !r->failed ? 1e9 * threads / r->best : 0;
}

static void measure(struct result *r, u32 al, u32 batch, u32 size, int threads)
{
	u32 ops = al == ALLOC_BUDDY ? 64 * 256 : 256 * 256, failed;
	double v = cell(run_prog, al, batch, size, ops, threads, &failed);

	record(r, v, failed, ops * threads);
}

/* The reference loops of bench_ref (REF_*), pairs of 64-byte nodes. */
enum { REF_LOOP, REF_LIST, REF_PREEMPT, NR_REFS };
static const char *const ref_names[] = {
	"empty can_loop iteration",
	"bare arena free list, pop + push",
	"the same, each half preemption-disabled",
};

static void measure_ref(struct result *r, u32 ref, int threads)
{
	u32 failed;
	double v = cell(ref_prog, ref, 0, 64, 256 * 256, threads, &failed);

	record(r, v, failed, 256 * 256 * threads);
}

/* One round at a thread count: the references, then the allocators in turn at each size. */
static void measure_round(struct result res[2][NR_SIZES][NR_ALLOCS], struct result ref[NR_REFS],
			  int threads, bool quick, bool ours)
{
	for (u32 r = 0; r < NR_REFS; r++)
		measure_ref(&ref[r], r, threads);
	for (u32 b = 0; b < 2; b++)
		for (u32 s = 0; s < NR_SIZES; s++)
			for (u32 al = 0; al < NR_ALLOCS; al++)
				if ((!quick || (!b && s < 2 && al != ALLOC_HASH)) &&
				    (!ours || al <= ALLOC_BUDDY))
					measure(&res[b][s][al], al, b, sizes[s], threads);
}

static void print_result(const struct result *r, const struct result *heap, u32 al,
			 u32 batch, u32 size, int threads)
{
	const char *work = batch ? "batch" : "pairs";

	if (r->best < 0) {
		printf("%-6s %-5u %-8s   (failed to run)\n", work, size, alloc_names[al]);
	} else if (r->failed) {
		/* bpf_obj_new: at most 4 KiB with its header; buddy: its lock timed out */
		printf("%-6s %-5u %-8s   (%u of %u allocations failed: no figure)\n", work, size,
		       alloc_names[al], r->failed, r->ops);
	} else {
		printf("%-6s %-5u %-8s %12.0f %9.1f %6.2fx\n", work, size, alloc_names[al],
		       r->best, 1e9 * threads / r->best,
		       heap->best > 0 ? r->best / heap->best : 0);
	}
}

/* a / b as " 1.23x", or "-" when either has no figure. */
static void print_ratio(double a, double b)
{
	if (a > 0 && b > 0)
		printf(" %8.2fx", a / b);
	else
		printf(" %9s", "-");
}

/* A goal of issue 12 and the worst figure this run measured for it. */
static void print_goal(const char *goal, double worst, bool met, bool measured)
{
	if (measured)
		printf("goal: %s: %.2fx (%s)\n", goal, worst, met ? "met" : "NOT met");
	else
		printf("goal: %s: not measured in this run\n", goal);
}

/*
 * The heap against its peers and the limit, one thread: how many times faster than
 * bpf_obj_new and the buddy allocator, and how many times the preemption-disabled free
 * list (the cheapest per-CPU list this kernel allows) it costs. Then the goals.
 */
static void print_versus(struct result res[2][2][NR_SIZES][NR_ALLOCS],
			 struct result ref[2][NR_REFS])
{
	double limit = ns_of(&ref[0][REF_PREEMPT], 1), worst_limit = 0, worst_obj = 1e9;
	double worst_buddy = 1e9;

	printf(
	       "\nheap against its peers, 1 thread: x faster than each (their ns / heap's), and x the limit (heap's ns / the preemption-disabled free list's)\n");
	printf("%-6s %-5s %9s %9s %9s %9s\n", "work", "size", "heap ns", "obj_new", "buddy",
	       "limit");
	for (u32 b = 0; b < 2; b++) {
		for (u32 s = 0; s < NR_SIZES; s++) {
			double h = ns_of(&res[0][b][s][ALLOC_HEAP], 1);
			double o = ns_of(&res[0][b][s][ALLOC_OBJ], 1);
			double d = ns_of(&res[0][b][s][ALLOC_BUDDY], 1);

			if (!h)
				continue;
			printf("%-6s %-5u %9.1f", b ? "batch" : "pairs", sizes[s], h);
			print_ratio(o, h);
			print_ratio(d, h);
			print_ratio(h, limit);
			printf("\n");
			if (!b && sizes[s] <= 64) {
				if (limit && h / limit > worst_limit)
					worst_limit = h / limit;
				if (o && o / h < worst_obj)
					worst_obj = o / h;
			}
			if (b && d && d / h < worst_buddy)
				worst_buddy = d / h;
		}
	}
	print_goal("16 B and 64 B pairs at most 2x the limit", worst_limit,
		   worst_limit <= 2, worst_limit > 0);
	print_goal("16 B and 64 B pairs at least 5x faster than bpf_obj_new", worst_obj,
		   worst_obj >= 5, worst_obj < 1e9);
	print_goal("batches of 256 at least 5x faster than the buddy allocator", worst_buddy,
		   worst_buddy >= 5, worst_buddy < 1e9);

	/* The buddy allocator against the kernel's (issue 19): ns of a pair / obj_new's. */
	{
		double d = ns_of(&res[0][0][1][ALLOC_BUDDY], 1);
		double o = ns_of(&res[0][0][1][ALLOC_OBJ], 1);

		printf("buddy 64 B pairs: %.1f ns, bpf_obj_new %.1f ns\n", d, o);
		print_goal("buddy 64 B pairs at most 0.8x the time of bpf_obj_new", d / o,
			   d / o <= 0.8, d > 0 && o > 0);
	}
}

/* BENCH_DATA=FILE: the figures as "key value" lines, for scripts/bench-plot. */
static void write_data(const char *path, struct result res[2][2][NR_SIZES][NR_ALLOCS],
		       struct result ref[2][NR_REFS], int ncpu)
{
	FILE *f = fopen(path, "w");

	if (!f) {
		perror(path);
		return;
	}
	fprintf(f, "# work size alloc ns_1_thread allocs_per_s_1 allocs_per_s_all cpus\n");
	for (u32 b = 0; b < 2; b++)
		for (u32 s = 0; s < NR_SIZES; s++)
			for (u32 al = 0; al < NR_ALLOCS; al++)
				fprintf(f, "%s %u %s %.1f %.0f %.0f %d\n", b ? "batch" : "pairs",
					sizes[s], alloc_names[al],
					ns_of(&res[0][b][s][al], 1),
					res[0][b][s][al].failed ? 0 : res[0][b][s][al].best,
					res[1][b][s][al].failed ? 0 : res[1][b][s][al].best, ncpu);
	for (u32 r = 0; r < NR_REFS; r++)
		fprintf(f, "ref %u ref%u %.1f %.0f %.0f %d\n", 64, r, ns_of(&ref[0][r], 1),
			ref[0][r].best, ref[1][r].best, ncpu);
	fclose(f);
}

static int run_args(const char *name, void *args, size_t size)
{
	int ret, err;

	err = libarena_prog_run(bpf_object__find_program_by_name(obj, name), args, size, &ret);
	return err ? err : ret;
}

/* Every pool span and quiet spare given back: a purge delay of 0 for two passes. */
static int purge_all(struct arena_heap_global *g)
{
	struct maint_args m = { .passes = 2 };
	u32 delay = g->purge_delay;
	int err;

	g->purge_delay = 0;
	err = run_args("bench_maintain", &m, sizeof(m));
	g->purge_delay = delay;
	return err;
}

/*
 * The allocator's slow side (issue 19): maintenance passes idle and after work, the
 * maintenance a steady load costs, and a sleepable bulk build.
 */
static int slow_side(struct arena_heap_global *g, int ncpu, int rounds)
{
	static const u32 after[] = { 256, 1024, 4096 };
	struct maint_args m = { .passes = 2 };
	double best[NR_RB_MODES] = { 0 };
	u64 maps0, unmaps0, ns0, passes0;
	u32 failed;
	double t0, secs;
	int err;

	printf("\nmaintenance (arena_heap_maintain), ns per pass\n");
	/* Two passes first: whatever the benchmarks above left to shed or give back. */
	err = purge_all(g) ?: run_args("bench_maintain", &m, sizeof(m));
	m = (struct maint_args){ .passes = MAINT_PASSES };
	if (!err)
		err = run_args("bench_maintain", &m, sizeof(m));
	if (err)
		goto fail;
	qsort(m.ns, MAINT_PASSES, sizeof(m.ns[0]), cmp_u64);
	printf(
	       "  idle: %u passes in a row, min %llu, median %llu, max %llu; pages mapped %llu, unmapped %llu\n",
	       m.passes, (unsigned long long)m.ns[0], (unsigned long long)m.ns[MAINT_PASSES / 2],
	       (unsigned long long)m.ns[MAINT_PASSES - 1],
	       (unsigned long long)m.map_pages, (unsigned long long)m.unmap_pages);
	printf("goal: an idle pass costs at most 50 us: %.1f us median, %.1f us max (%s)\n",
	       m.ns[MAINT_PASSES / 2] / 1e3, m.ns[MAINT_PASSES - 1] / 1e3,
	       m.ns[MAINT_PASSES / 2] <= 50000 ? "met" : "NOT met");
	for (u32 i = 0; i < ARRAY_SIZE(after); i++) {
		/* From an empty pool, so the pass maps what the objects drained. */
		if (purge_all(g))
			goto fail;
		m = (struct maint_args){ .passes = 1, .n = after[i], .size = 4096 };
		err = run_args("bench_maintain", &m, sizeof(m));
		if (err)
			goto fail;
		printf(
		       "  after %4u allocations of 4 KiB: %9llu ns, %4llu pages mapped (%.1f us per page)\n",
		       after[i], (unsigned long long)m.ns_total, (unsigned long long)m.map_pages,
		       m.map_pages ? m.ns_total / 1e3 / m.map_pages : 0.0);
	}

	/*
	 * A steady load on every CPU: batches of 256 x 4 KiB cross spans all the time.
	 * From an empty pool (what the passes above freed would be given back meanwhile),
	 * after a warm-up.
	 */
	if (purge_all(g))
		goto fail;
	cell(run_prog, ALLOC_HEAP, 1, 4096, 256 * 64, ncpu, &failed);
	maps0 = g->map_pages;
	unmaps0 = g->unmap_pages;
	ns0 = g->maintain_ns;
	passes0 = g->maintain_passes;
	t0 = now();
	for (int r = 0; r < 16; r++)
		cell(run_prog, ALLOC_HEAP, 1, 4096, 256 * 1024, ncpu, &failed);
	secs = now() - t0;
	printf(
	       "  steady load (batches of 256 x 4 KiB on %d CPUs, %.2f s): maintenance %.2f ms per second in %.0f passes/s; pages mapped %llu, unmapped %llu after warm-up\n",
	       ncpu, secs, (g->maintain_ns - ns0) / 1e6 / secs,
	       (g->maintain_passes - passes0) / secs,
	       (unsigned long long)(g->map_pages - maps0),
	       (unsigned long long)(g->unmap_pages - unmaps0));

	printf("\nbulk build in one sleepable program: %u-key red-black tree, ns per insert\n",
	       65536);
	for (int round = 0; round < rounds; round++) {
		for (u32 mode = 0; mode < NR_RB_MODES; mode++) {
			struct rb_args rb = { .mode = mode, .keys = 65536 };

			if (purge_all(g))
				goto fail;
			err = run_args("bench_rb_build", &rb, sizeof(rb));
			if (err) {
				fprintf(stderr, "bench: bench_rb_build mode %u: %d\n", mode, err);
				return 1;
			}
			if (!best[mode] || rb.ns / 65536.0 < best[mode])
				best[mode] = rb.ns / 65536.0;
		}
	}
	printf("  %-52s %8.1f\n", "arena_heap_reserve() ahead, timed with the build",
	       best[RB_RESERVE]);
	printf("  %-52s %8.1f\n", "arena_heap_maintain() every 256 inserts", best[RB_RITUAL]);
	printf("  %-52s %8.1f\n", "pre-filled heap (reservation before the clock)",
	       best[RB_PREFILLED]);
	printf("goal: the build with its reservation at most 2x the pre-filled one: %.2fx (%s)\n",
	       best[RB_RESERVE] / best[RB_PREFILLED],
	       best[RB_RESERVE] <= 2 * best[RB_PREFILLED] ? "met" : "NOT met");

	/* Where the buddy allocator's time goes: its CPU caches, its lock and lists. */
	{
		struct split_args sa = { .pairs = 20000 };
		struct bench_args ra = { 0 };
		u64 cached = 0, locked = 0;

		for (int round = 0; round < rounds; round++) {
			if (run_simple("bench_reset", &ra) ||
			    run_args("bench_buddy_split", &sa, sizeof(sa))) {
				fprintf(stderr, "bench: bench_buddy_split failed\n");
				return 1;
			}
			if (!cached || sa.ns_cached < cached)
				cached = sa.ns_cached;
			if (!locked || sa.ns_locked < locked)
				locked = sa.ns_locked;
		}
		printf(
		       "\nbuddy pairs on a private allocator: 64 B (the CPU's cache, no lock) %llu ns, 8 KiB (the lock and the lists; the pair left apart: no split, no merge) %llu ns\n",
		       (unsigned long long)cached, (unsigned long long)locked);
	}
	return 0;
fail:
	fprintf(stderr, "bench: bench_maintain failed: %d\n", err);
	return 1;
}


/*
 * The mixed workload's memory once it ends: after the purge delay and an idle pass, with
 * the benchmark's reserve targets (raised for its batches), with the library's default
 * targets, and with a rest level of one span per kind.
 */
static int at_rest(struct arena_heap_global *g, struct bench_args *a)
{
	static const char *const names[] = {
		"the benchmark's reserve targets kept",
		"the library's default targets",
		"the default targets, reserve_rest 1",
	};
	const struct buddy *b = libarena_buddy(obj);
	u64 chunk = BUDDY_CHUNK_PAGES + BUDDY_META_PAGES, held, spare, large;
	struct maint_args m = { .passes = 1 };
	u32 rest = g->reserve_rest, small = g->reserve[0], medium = g->reserve[1];
	double ratio[3];
	int err = 0;

	for (int k = 0; k < 3 && !err; k++) {
		if (k) {
			g->reserve[0] = HEAP_RESERVE_SMALL;
			g->reserve[1] = HEAP_RESERVE_MEDIUM;
		}
		g->reserve_rest = k == 2 ? 1 : rest;
		usleep((g->purge_delay + 20) * 1000);
		err = run_args("bench_maintain", &m, sizeof(m));
		held = g->pages_mapped;
		spare = heap_reserve_pages(g);
		large = b ? b->stats.chunks_held * chunk : 0;
		ratio[k] = held * 4096.0 / a->live_bytes;
		printf(
		       "  at rest (%s, the purge delay of %u ms passed, an idle pass): %llu pages held (%llu spare): %.2fx; with the large sizes' standing reserve (%llu pages): %.2fx\n",
		       names[k], g->purge_delay, (unsigned long long)held,
		       (unsigned long long)spare, ratio[k], (unsigned long long)large,
		       (held + large) * 4096.0 / a->live_bytes);
	}
	if (!err)
		printf(
		       "goal: at rest at most 1.3x the live bytes, spares included, with the library's defaults: %.2fx (%s); %.2fx with reserve_rest 1\n",
		       ratio[1], ratio[1] <= 1.3 ? "met" : "NOT met", ratio[2]);
	g->reserve_rest = rest;
	g->reserve[0] = small;
	g->reserve[1] = medium;
	return err;
}

/*
 * The sanitizer build: started as a user starts it, with its quarantine as
 * BENCH_QUARANTINE says (blocks, or "off"; unset: the default), so that scripts/asan-bench
 * can tell the quarantine's share of the cost.
 */
static int start_sanitizer(struct bpf_object *o)
{
	const char *q = getenv("BENCH_QUARANTINE");
	struct asan_init_args args = {};

	if (!bpf_object__find_program_by_name(o, "asan_init"))
		return 0;
	if (q)
		args.quarantine = strcmp(q, "off") ? (u32)atoi(q) : ~0u;
	if (!libarena_asan_start(o, &args)) {
		perror("bench: libarena_asan_start");
		return 1;
	}
	printf("sanitizer started, quarantine %s\n", q ? q : "at its default");
	return 0;
}

int main(int argc, char **argv)
{
	static struct result res[2][2][NR_SIZES][NR_ALLOCS], ref[2][NR_REFS];
	const char *data_path = getenv("BENCH_DATA");
	bool quick = getenv("BENCH_QUICK");
	/* BENCH_OURS: the heap and the buddy allocator only, 1 thread (the sanitizer's work). */
	bool ours = getenv("BENCH_OURS");
	const char *env = getenv("BENCH_ROUNDS");
	int rounds = env && atoi(env) > 0 ? atoi(env) : 3;
	struct arena_heap_refill_args cfg = { .reserve_small = 32, .reserve_medium = 8 };
	int ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct arena_heap_global *g;
	struct bench_args a;

	if (argc != 2) {
		fprintf(stderr, "usage: bench OBJECT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (ncpu > MAX_THREADS)
		ncpu = MAX_THREADS;
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "bench: cannot load %s\n", argv[1]);
		return 1;
	}
	run_prog = bpf_object__find_program_by_name(obj, "bench_run");
	ref_prog = bpf_object__find_program_by_name(obj, "bench_ref");
	if (start_sanitizer(obj))
		return 1;
	/* Reserves big enough for a batch of 256 x 4 KiB on every CPU: 16 spans each. */
	if (libarena_heap_refill(obj, &cfg)) {
		fprintf(stderr, "bench: arena_heap_refill failed\n");
		return 1;
	}
	memset(&a, 0, sizeof(a));
	if (run_simple("bench_reset", &a)) {
		fprintf(stderr, "bench: bench_reset failed\n");
		return 1;
	}
	printf("allocator benchmark: timings from this machine (a TCG guest under make bench);\n"
	       "compare the ratios within this run only. ratio = throughput / heap's.\n");
	printf(
	       "each figure: the best of %d rounds, the allocators taking turns within a round,\nso a busy host slows all of them alike.\n",
	       rounds);
	for (int ti = 0; ti < 2; ti++) {
		int threads = ti ? ncpu : 1;

		if (ti && (ncpu == 1 || quick || ours))
			break;
		for (int round = 0; round < rounds; round++)
			measure_round(res[ti], ref[ti], threads, quick, ours);
		if (quick) {
			/* BENCH_QUICK: for work on the fast paths, the pairs only. */
			for (u32 r = 0; r < NR_REFS; r++)
				printf("  %-42s %9.1f\n", ref_names[r], ns_of(&ref[0][r], 1));
			print_versus(res, ref);
			return 0;
		}
		printf("\n%d thread%s: the platform's limit, ns per iteration (64-byte nodes)\n",
		       threads, threads > 1 ? "s" : "");
		for (u32 r = 0; r < NR_REFS; r++)
			printf("  %-42s %9.1f\n", ref_names[r], ns_of(&ref[ti][r], threads));
		printf(
		       "\n%d thread%s (one per CPU), allocations per second and ns per allocation+free\n",
		       threads, threads > 1 ? "s" : "");
		printf("%-6s %-5s %-8s %12s %9s %7s\n", "work", "size", "alloc", "allocs/s",
		       "ns/op", "ratio");
		for (u32 b = 0; b < 2; b++)
			for (u32 s = 0; s < NR_SIZES; s++)
				for (u32 al = 0; al < NR_ALLOCS; al++)
					print_result(&res[ti][b][s][al], &res[ti][b][s][ALLOC_HEAP],
						     al, b, sizes[s], threads);
	}
	if (ours)
		return 0;
	print_versus(res, ref);
	if (ncpu > 1) {
		printf(
		       "\nscaling: allocs/s on %d CPUs at once / allocs/s on 1 (%d would be perfect; below 1, a lock collapses)\n",
		       ncpu, ncpu);
		printf("%-6s %-5s", "work", "size");
		for (u32 al = 0; al < NR_ALLOCS; al++)
			printf(" %8s", alloc_names[al]);
		printf("\n");
		for (u32 b = 0; b < 2; b++) {
			for (u32 s = 0; s < NR_SIZES; s++) {
				printf("%-6s %-5u", b ? "batch" : "pairs", sizes[s]);
				for (u32 al = 0; al < NR_ALLOCS; al++) {
					struct result *one = &res[0][b][s][al];
					struct result *all = &res[1][b][s][al];

					if (one->best <= 0 || all->best <= 0 || one->failed ||
					    all->failed)
						printf(" %8s", "-");
					else
						printf(" %7.2fx", all->best / one->best);
				}
				printf("\n");
			}
		}
		{
			struct result *one = &res[0][0][1][ALLOC_HEAP];
			struct result *all = &res[1][0][1][ALLOC_HEAP];
			double sc = one->best > 0 && all->best > 0 ? all->best / one->best : 0;

			printf("goal: 64 B pairs on 2 CPUs at least 1.8x one: %.2fx on %d (%s)\n",
			       sc, ncpu, ncpu == 2 ? (sc >= 1.8 ? "met" : "NOT met") :
			       "not 2 CPUs: no verdict");
		}
		{
			/* One lock for the whole buddy allocator: it must not collapse. */
			double worst = 1e9;

			for (u32 s = 0; s < NR_SIZES; s++) {
				struct result *one = &res[0][1][s][ALLOC_BUDDY];
				struct result *all = &res[1][1][s][ALLOC_BUDDY];

				if (one->best > 0 && all->best > 0 && !one->failed &&
				    !all->failed && all->best / one->best < worst)
					worst = all->best / one->best;
			}
			print_goal("buddy batches on every CPU at least 1x one, every size", worst,
				   worst >= 1, worst < 1e9);
		}
	}

	if (data_path)
		write_data(data_path, res, ref, ncpu);
	g = libarena_heap(obj);
	if (g && slow_side(g, ncpu, rounds))
		return 1;
	for (u32 al = ALLOC_HEAP; al <= ALLOC_BUDDY; al++) {
		memset(&a, 0, sizeof(a));
		a.alloc = al;
		if (al == ALLOC_BUDDY && run_simple("bench_reset", &a)) {
			fprintf(stderr, "bench: bench_reset failed\n");
			return 1;
		}
		if (run_simple("bench_mixed", &a)) {
			fprintf(stderr, "bench: mixed workload (%s) failed\n", alloc_names[al]);
			return 1;
		}
		if (al == ALLOC_HEAP && g)
			a.pages_reserve = heap_reserve_pages(g);
		printf(
		       "\nmixed workload, %s: %u allocations of 16 B..64 KiB (a third freed again), %llu bytes live in %llu bytes of objects\n",
		       alloc_names[al], a.done,
		       (unsigned long long)a.live_bytes, (unsigned long long)a.block_bytes);
		printf(
		       "  pages held %llu (%llu of them spare): overhead %.2fx (held / live), %.2fx without the spares, rounding alone %.2fx\n",
		       (unsigned long long)a.pages_held, (unsigned long long)a.pages_reserve,
		       a.pages_held * 4096.0 / a.live_bytes,
		       (a.pages_held - a.pages_reserve) * 4096.0 / a.live_bytes,
		       (double)a.block_bytes / a.live_bytes);
		if (al == ALLOC_HEAP && g && at_rest(g, &a))
			return 1;
		run_simple("bench_mixed_free", &a);
	}
	if (g)
		libarena_heap_stats_print(g, stdout);
	bpf_object__close(obj);
	return 0;
}
