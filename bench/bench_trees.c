// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * bench_trees OBJECT: the B-tree against the red-black tree (and a BPF hash map for
 * lookups) at 1K, 64K and 1M random keys: ns per insert, lookup hit, lookup miss, scan
 * step and remove, bytes per key, and the ratios, all measured in one run. Each figure
 * is the best of BENCH_ROUNDS rounds (default 3), the maps taking turns within a round.
 * BENCH_TREE_MAX caps the key counts (a power of two); BENCH_TREE_ONLY=btree measures
 * the B-tree alone (scripts/btree-node-sizes).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>

enum { T_BTREE, T_RBTREE, T_HASH, NR_KINDS };
enum { TOP_BUILD, TOP_HIT, TOP_MISS, TOP_SCAN, TOP_RANGE, TOP_REMOVE, TOP_NR };

static const char *const kind_names[] = { "btree", "rbtree", "hashmap" };
static const char *const op_names[] = { "insert", "lookup hit", "lookup miss", "scan (next)",
					"scan (range)", "remove" };

struct tree_args {
	u32 kind, op, keys, height;
	u64 ns;
	u64 done;
	u64 bytes;
};

static struct bpf_program *prog;
static struct arena_log *ring;

static int run(u32 kind, u32 op, u32 keys, struct tree_args *a)
{
	int ret = 0, err;

	memset(a, 0, sizeof(*a));
	a->kind = kind;
	a->op = op;
	a->keys = keys;
	err = libarena_prog_run(prog, a, sizeof(*a), &ret);
	if (err || ret) {
		fprintf(stderr, "bench_trees: %s %s at %u keys: %d %d\n", kind_names[kind],
			op_names[op], keys, err, ret);
		return -1;
	}
	/* A scan of the hash map is not a thing: no figure, not a failure. */
	/* Said, and the round's figure left out: the other rounds still count. */
	if (a->done != keys && !(kind == T_HASH && (op == TOP_SCAN || op == TOP_RANGE))) {
		printf("bench_trees: %s %s at %u keys: %llu of %u done (figure left out)\n",
		       kind_names[kind], op_names[op], keys, (unsigned long long)a->done, keys);
		libarena_log_print(ring, stdout, stdout);
		a->done = 0;
	}
	return 0;
}

/* Every operation once on one map of keys keys: the best times so far, the build's size. */
static int run_ops(u32 kind, u32 keys, double best[TOP_NR], double *bytes, u32 *height)
{
	struct tree_args a;
	int fails = 0;

	for (u32 o = 0; o < TOP_NR; o++) {
		if (run(kind, o, keys, &a)) {
			fails++;
			continue;
		}
		if (!a.done)
			continue;
		if (o == TOP_BUILD) {
			*bytes = (double)a.bytes / keys;
			if (kind == T_BTREE)
				*height = a.height;
		}
		if ((double)a.ns / a.done < best[o])
			best[o] = (double)a.ns / a.done;
	}
	return fails;
}

int main(int argc, char **argv)
{
	static const u32 counts[] = { 1u << 10, 1u << 16, 1u << 20 };
	double best[3][NR_KINDS][TOP_NR], bytes[3][NR_KINDS];
	const char *s = getenv("BENCH_ROUNDS"), *m = getenv("BENCH_TREE_MAX");
	const char *only = getenv("BENCH_TREE_ONLY");
	int rounds = s ? atoi(s) : 3, c, r, k, o, fails = 0;
	u32 max = m ? strtoul(m, NULL, 0) : 1u << 20, height[3] = {};
	struct bpf_object *obj;

	if (argc != 2) {
		fprintf(stderr, "usage: bench_trees OBJECT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "bench_trees: cannot load %s\n", argv[1]);
		return 1;
	}
	prog = bpf_object__find_program_by_name(obj, "tree_op");
	ring = libarena_log(obj);
	if (!prog || libarena_heap_refill(obj, NULL)) {
		fprintf(stderr, "bench_trees: no tree_op, or arena_heap_refill failed\n");
		return 1;
	}
	for (c = 0; c < 3; c++)
		for (k = 0; k < NR_KINDS; k++)
			for (o = 0; o < TOP_NR; o++)
				best[c][k][o] = 1e30;
	printf("ordered maps: %d rounds, best of each (ns per operation)\n", rounds);
	for (r = 0; r < rounds; r++) {
		for (c = 0; c < 3 && counts[c] <= max; c++) {
			for (k = 0; k < NR_KINDS; k++) {
				if (only && strcmp(only, kind_names[k]))
					continue;
				fails += run_ops(k, counts[c], best[c][k], &bytes[c][k],
						 &height[c]);
			}
		}
	}
	for (c = 0; c < 3 && counts[c] <= max; c++) {
		printf("\n%u keys (B-tree height %u)\n", counts[c], height[c]);
		printf("%-14s %10s %10s %10s %12s %12s\n", "operation", "btree", "rbtree",
		       "hashmap", "rbtree/btree", "hash/btree");
		for (o = 0; o < TOP_NR; o++) {
			double bt = best[c][T_BTREE][o], rb = best[c][T_RBTREE][o];
			double hm = best[c][T_HASH][o];

			printf("%-14s %10.1f %10.1f ", op_names[o], bt, rb);
			if (hm < 1e29)
				printf("%10.1f %11.2fx %11.2fx\n", hm, rb / bt, hm / bt);
			else
				printf("%10s %11.2fx %12s\n", "-", rb / bt, "-");
		}
		printf("%-14s %10.1f %10.1f %10s %11.2fx\n", "bytes per key", bytes[c][T_BTREE],
		       bytes[c][T_RBTREE], "-", bytes[c][T_RBTREE] / bytes[c][T_BTREE]);
	}
	/* The goals, at 64K keys and beyond. */
	printf("\n");
	for (c = 1; c < 3 && counts[c] <= max; c++) {
		double hit = best[c][T_RBTREE][TOP_HIT] / best[c][T_BTREE][TOP_HIT];
		double scan = best[c][T_RBTREE][TOP_SCAN] / best[c][T_BTREE][TOP_SCAN];
		double range = best[c][T_RBTREE][TOP_RANGE] / best[c][T_BTREE][TOP_RANGE];
		double mem = bytes[c][T_BTREE] / bytes[c][T_RBTREE];

		printf(
		       "goal at %u keys: lookups %.2fx faster than the rbtree (>= 2x: %s), scans %.2fx by cursor and %.2fx by range (>= 5x: %s), %.2f of its bytes per key (<= 0.5: %s)\n",
		       counts[c], hit, hit >= 2 ? "met" : "NOT met", scan, range,
		       scan >= 5 ? "met" : range >= 5 ? "met by range" : "NOT met", mem,
		       mem <= 0.5 ? "met" : "NOT met");
	}
	bpf_object__close(obj);
	return fails ? 1 : 0;
}
