// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * bench OBJECT: allocator figures, measured in one run. Timings come from wherever this
 * runs (a TCG guest under `make bench`): only ratios within one run mean anything.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>

struct bench_args {
	u32 ops, size, done, failed;
	u64 live_bytes, block_bytes, pages_held;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run(struct bpf_object *o, const char *prog, struct bench_args *a, double *secs)
{
	double t0 = now();
	int ret, err;

	err = libarena_run_prog(bpf_object__find_program_by_name(o, prog), a, sizeof(*a), &ret);
	*secs = now() - t0;
	return err ? err : ret;
}

int main(int argc, char **argv)
{
	static const unsigned int sizes[] = { 16, 64, 256, 1024, 4096 };
	struct bpf_object *o;
	struct bench_args a;
	double secs;

	if (argc != 2) {
		fprintf(stderr, "usage: bench OBJECT\n");
		return 2;
	}
	o = bpf_object__open_file(argv[1], NULL);
	if (!o || bpf_object__load(o)) {
		fprintf(stderr, "bench: cannot load %s\n", argv[1]);
		return 1;
	}
	printf("buddy allocator, one thread (timings from this machine; compare ratios only)\n");
	printf("%-8s %-6s %12s %10s\n", "workload", "size", "ops/s", "ns/op");
	for (unsigned int i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const char *progs[] = { "bench_pairs", "bench_batch" };

		for (int p = 0; p < 2; p++) {
			memset(&a, 0, sizeof(a));
			if (run(o, "bench_reset", &a, &secs))
				return 1;
			a.ops = 200 * 1024;	/* a multiple of the batch */
			a.size = sizes[i];
			if (run(o, progs[p], &a, &secs) || a.failed || a.done != a.ops) {
				fprintf(stderr, "bench: %s failed (done %u, failed %u)\n", progs[p],
					a.done, a.failed);
				return 1;
			}
			/* A pair is two calls: count calls. */
			printf("%-8s %-6u %12.0f %10.1f\n", p ? "batch" : "pairs", sizes[i],
			       2.0 * a.done / secs, secs * 1e9 / (2.0 * a.done));
		}
	}

	memset(&a, 0, sizeof(a));
	if (run(o, "bench_reset", &a, &secs) || run(o, "bench_mixed", &a, &secs)) {
		fprintf(stderr, "bench: mixed workload failed\n");
		return 1;
	}
	printf("mixed workload: %u allocations (a third freed again), %llu bytes live in "
	       "%llu bytes of blocks; allocator holds %llu pages = %llu bytes\n", a.done,
	       (unsigned long long)a.live_bytes, (unsigned long long)a.block_bytes,
	       (unsigned long long)a.pages_held, (unsigned long long)a.pages_held * 4096);
	printf("mixed workload: overhead %.2fx (held / live), rounding alone %.2fx "
	       "(blocks / live)\n", a.pages_held * 4096.0 / a.live_bytes,
	       (double)a.block_bytes / a.live_bytes);
	bpf_object__close(o);
	return 0;
}
