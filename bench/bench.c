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

enum { ALLOC_HEAP, ALLOC_BUDDY, ALLOC_OBJ, ALLOC_HASH, NR_ALLOCS };
static const char *const alloc_names[] = { "heap", "buddy", "obj_new", "hashmap" };

struct bench_args {
	u32 alloc, batch, size, ops, thread, done, failed, pad;
	u64 live_bytes, block_bytes, pages_held, pages_reserve;
};

#define MAX_THREADS 8

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
	t->err = libarena_run_prog(t->prog, &t->a, sizeof(t->a), &ret);
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

	err = libarena_run_prog(bpf_object__find_program_by_name(obj, name), a, sizeof(*a), &ret);
	return err ? err : ret;
}

/* Spans held spare in the heaps' reserves, in pages. */
static u64 heap_reserve_pages(const struct arena_heap_global *g)
{
	uintptr_t base = (uintptr_t)g & ~(uintptr_t)0xffffffff;
	u64 pages = 0;

	for (u32 id = 0; id < g->nr_cpus * HEAP_LEVELS; id++) {
		const struct arena_heap *h = (const void *)(base + HEAP_HEAPS_START +
							    (uintptr_t)id * HEAP_HEAP_SIZE);

		if (h->magic != HEAP_MAGIC)
			continue;
		for (int k = 0; k < HEAP_KINDS; k++) {
			u64 n = h->reserve_nr[k] + ((h->reserve_in[k] >> 32) & HEAP_REMOTE_COUNT);

			pages += n * HEAP_KIND_SPAN(k) / 4096;
		}
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

	printf("\nheap against its peers, 1 thread: x faster than each (their ns / heap's), "
	       "and x the limit (heap's ns / the preemption-disabled free list's)\n");
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

int main(int argc, char **argv)
{
	static struct result res[2][2][NR_SIZES][NR_ALLOCS], ref[2][NR_REFS];
	const char *data_path = getenv("BENCH_DATA");
	bool quick = getenv("BENCH_QUICK");
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
	printf("each figure: the best of %d rounds, the allocators taking turns within a "
	       "round,\nso a busy host slows all of them alike.\n", rounds);
	for (int ti = 0; ti < 2; ti++) {
		int threads = ti ? ncpu : 1;

		if (ti && (ncpu == 1 || quick))
			break;
		for (int round = 0; round < rounds; round++) {
			for (u32 r = 0; r < NR_REFS; r++)
				measure_ref(&ref[ti][r], r, threads);
			for (u32 b = 0; b < 2; b++)
				for (u32 s = 0; s < NR_SIZES; s++)
					for (u32 al = 0; al < NR_ALLOCS; al++)
						if (!quick || (!b && s < 2 && (al == ALLOC_HEAP ||
									    al == ALLOC_OBJ)))
							measure(&res[ti][b][s][al], al, b,
								sizes[s], threads);
		}
		if (quick) {
			/* BENCH_QUICK: for work on the fast path, the heap's pairs only. */
			for (u32 r = 0; r < NR_REFS; r++)
				printf("  %-42s %9.1f\n", ref_names[r], ns_of(&ref[0][r], 1));
			print_versus(res, ref);
			return 0;
		}
		printf("\n%d thread%s: the platform's limit, ns per iteration (64-byte nodes)\n",
		       threads, threads > 1 ? "s" : "");
		for (u32 r = 0; r < NR_REFS; r++)
			printf("  %-42s %9.1f\n", ref_names[r], ns_of(&ref[ti][r], threads));
		printf("\n%d thread%s (one per CPU), allocations per second and ns per "
		       "allocation+free\n", threads, threads > 1 ? "s" : "");
		printf("%-6s %-5s %-8s %12s %9s %7s\n", "work", "size", "alloc", "allocs/s",
		       "ns/op", "ratio");
		for (u32 b = 0; b < 2; b++)
			for (u32 s = 0; s < NR_SIZES; s++)
				for (u32 al = 0; al < NR_ALLOCS; al++)
					print_result(&res[ti][b][s][al], &res[ti][b][s][ALLOC_HEAP],
						     al, b, sizes[s], threads);
	}
	print_versus(res, ref);
	if (ncpu > 1) {
		printf("\nscaling: allocs/s on %d CPUs at once / allocs/s on 1 (%d would be "
		       "perfect; below 1, a lock collapses)\n", ncpu, ncpu);
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
	}

	if (data_path)
		write_data(data_path, res, ref, ncpu);
	g = libarena_heap(obj);
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
		printf("\nmixed workload, %s: %u allocations of 16 B..64 KiB (a third freed again), "
		       "%llu bytes live in %llu bytes of objects\n", alloc_names[al], a.done,
		       (unsigned long long)a.live_bytes, (unsigned long long)a.block_bytes);
		printf("  pages held %llu (%llu of them spare): overhead %.2fx (held / live), "
		       "%.2fx without the spares, rounding alone %.2fx\n",
		       (unsigned long long)a.pages_held, (unsigned long long)a.pages_reserve,
		       a.pages_held * 4096.0 / a.live_bytes,
		       (a.pages_held - a.pages_reserve) * 4096.0 / a.live_bytes,
		       (double)a.block_bytes / a.live_bytes);
		run_simple("bench_mixed_free", &a);
	}
	if (g)
		libarena_heap_stats_print(g, stdout);
	bpf_object__close(obj);
	return 0;
}
