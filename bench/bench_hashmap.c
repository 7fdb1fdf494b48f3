// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * bench_hashmap OBJECT: the concurrent hash map (hmap_*) against BPF_MAP_TYPE_HASH with the
 * same 65,536 keys, lookups and updates of random existing keys, on 1 thread and on one
 * thread per CPU at once. Prints ns per operation, operations per second over all
 * threads, and the ratios, measured in this run; each figure the best of BENCH_ROUNDS
 * rounds (default 3), the maps taking turns within a round.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>

#define KEYS		(1u << 16)
#define OPS		200000
#define MAX_THREADS	64

enum { K_HMAP, K_BPF_HASH, NR_KINDS };
enum { HM_LOOKUP, HM_UPDATE, HM_NR_OPS };

static const char *const kind_names[] = { "hmap", "BPF hash" };
static const char *const op_names[] = { "lookup", "update" };

struct hm_args {
	u32 kind, op, thread, keys;
	u64 ops;
	u64 ns;
	u64 done;
};

struct thread {
	pthread_t tid;
	struct hm_args a;
	int err;
};

static struct bpf_program *op_prog;
static pthread_barrier_t start;

static void *thread_fn(void *p)
{
	struct thread *t = p;
	cpu_set_t set;
	int ret = 0;

	CPU_ZERO(&set);
	CPU_SET(t->a.thread, &set);
	sched_setaffinity(0, sizeof(set), &set);
	pthread_barrier_wait(&start);
	t->err = libarena_prog_run(op_prog, &t->a, sizeof(t->a), &ret);
	if (!t->err)
		t->err = ret;
	return NULL;
}

/*
 * One cell on n threads at once: ns per operation of one thread (the slowest) and
 * operations per second over all; -1 on failure.
 */
static int cell(u32 kind, u32 op, int n, double *ns_per_op, double *ops_per_s)
{
	struct thread t[MAX_THREADS];
	u64 max_ns = 0, total = 0;
	int i, err = 0;

	pthread_barrier_init(&start, NULL, n + 1);
	for (i = 0; i < n; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		t[i].a = (struct hm_args){ .kind = kind, .op = op, .thread = i, .keys = KEYS,
					   .ops = OPS };
		pthread_create(&t[i].tid, NULL, thread_fn, &t[i]);
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < n; i++) {
		pthread_join(t[i].tid, NULL);
		if (t[i].err || t[i].a.done != OPS) {
			fprintf(stderr,
				"bench_hashmap: %s %s thread %d: error %d, %llu of %u done\n",
				kind_names[kind], op_names[op], i, t[i].err,
				(unsigned long long)t[i].a.done, OPS);
			err = -1;
		}
		if (t[i].a.ns > max_ns)
			max_ns = t[i].a.ns;
		total += t[i].a.done;
	}
	pthread_barrier_destroy(&start);
	if (err || !max_ns)
		return -1;
	*ns_per_op = (double)max_ns / OPS;
	*ops_per_s = total * 1e9 / max_ns;
	return 0;
}

int main(int argc, char **argv)
{
	double ns[2][NR_KINDS][HM_NR_OPS], rate[2][NR_KINDS][HM_NR_OPS], v, r;
	const char *s = getenv("BENCH_ROUNDS");
	int rounds = s ? atoi(s) : 3, ncpu = sysconf(_SC_NPROCESSORS_ONLN), threads[2];
	struct bpf_program *setup;
	struct bpf_object *obj;
	struct hm_args a = { .keys = KEYS };
	int i, k, o, round, ret = 0, fails = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: bench_hashmap OBJECT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "bench_hashmap: cannot load %s\n", argv[1]);
		return 1;
	}
	setup = bpf_object__find_program_by_name(obj, "hm_setup");
	op_prog = bpf_object__find_program_by_name(obj, "hm_op");
	if (!setup || !op_prog || libarena_heap_refill(obj, NULL) ||
	    libarena_prog_run(setup, &a, sizeof(a), &ret) || ret) {
		fprintf(stderr, "bench_hashmap: setup failed (%d)\n", ret);
		libarena_log_print(libarena_log(obj), stdout, stderr);
		return 1;
	}
	if (ncpu > MAX_THREADS)
		ncpu = MAX_THREADS;
	threads[0] = 1;
	threads[1] = ncpu;
	for (i = 0; i < 2; i++)
		for (k = 0; k < NR_KINDS; k++)
			for (o = 0; o < HM_NR_OPS; o++) {
				ns[i][k][o] = 1e30;
				rate[i][k][o] = 0;
			}
	printf("hash maps: %u keys, %u random operations a thread, best of %d rounds\n", KEYS,
	       OPS, rounds);
	for (round = 0; round < rounds; round++)
		for (i = 0; i < 2; i++)
			for (o = 0; o < HM_NR_OPS; o++)
				for (k = 0; k < NR_KINDS; k++) {
					if (cell(k, o, threads[i], &v, &r)) {
						fails++;
						continue;
					}
					if (v < ns[i][k][o])
						ns[i][k][o] = v;
					if (r > rate[i][k][o])
						rate[i][k][o] = r;
				}
	for (i = 0; i < 2; i++) {
		printf("\n%d thread%s (one per CPU)\n", threads[i], threads[i] > 1 ? "s" : "");
		printf("%-8s %12s %12s %14s %14s %9s\n", "op", "hmap ns", "BPF hash ns",
		       "hmap ops/s", "BPF ops/s", "speedup");
		for (o = 0; o < HM_NR_OPS; o++)
			printf("%-8s %12.1f %12.1f %14.0f %14.0f %8.2fx\n", op_names[o],
			       ns[i][K_HMAP][o], ns[i][K_BPF_HASH][o], rate[i][K_HMAP][o],
			       rate[i][K_BPF_HASH][o], rate[i][K_HMAP][o] / rate[i][K_BPF_HASH][o]);
	}
	printf("\n");
	for (i = 0; i < 2; i++) {
		double lk = rate[i][K_HMAP][HM_LOOKUP] / rate[i][K_BPF_HASH][HM_LOOKUP];
		double up = rate[i][K_HMAP][HM_UPDATE] / rate[i][K_BPF_HASH][HM_UPDATE];

		printf(
		       "goal on %d thread%s: lookups %.2fx the BPF hash map's rate (>= 1x: %s), updates %.2fx (>= 2x: %s)\n",
		       threads[i], threads[i] > 1 ? "s" : "", lk,
		       lk >= 1 ? "met" : "NOT met", up, up >= 2 ? "met" : "NOT met");
	}
	bpf_object__close(obj);
	return fails ? 1 : 0;
}
