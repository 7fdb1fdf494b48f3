// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * kmemtrace OBJECT: the kernel's outstanding allocations, traced by the arena tracer and
 * by the same tracer on BPF maps (kmemtrace.bpf.c), on one workload in one boot:
 *
 *   1. the arena tracer attached while the workload (processes that create files,
 *      sockets and pipes) runs, a report every second read in place from the arena:
 *      the top call sites by outstanding bytes and the oldest outstanding allocations;
 *   2. the workload untraced, under the arena tracer and under the map tracer, in turn,
 *      three times: its slowdown under each (the cost per event), the events each
 *      dropped, the memory each used and the time one full report takes to read;
 *   3. arena-top (tools/arena-top.c, next to the build's examples/) run on this process,
 *      its figures checked against the program's own;
 *   4. checks: exact accounting (seen = outstanding + freed + dropped) for both, no
 *      sanitizer report, every record freed at the end (the allocator back to its start).
 *
 * Prints "ok"/"FAIL" lines and "N passed, N failed"; exits non-zero on a failure.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include <libarena/btree.h>
#include "kmemtrace.h"

#define ROUNDS		3
#define CHILDREN	96	/* processes per workload run, two at a time */
#define HELD		2500	/* socket pairs the workload holds open while it runs */
#define TOP		8

static struct bpf_object *obj;
static struct kmt_state *st;
static int passed, failed;

static void check(int ok, const char *what, ...)
{
	va_list ap;

	va_start(ap, what);
	printf("  %s ", ok ? "ok  " : "FAIL");
	vprintf(what, ap);
	putchar('\n');
	va_end(ap);
	ok ? passed++ : failed++;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- the workload: files, sockets, pipes and processes ---- */

static const char *tmpdir = "/tmp";

static void child_work(int id)
{
	char path[256], buf[4096];
	int fd, sv[2], p[2];

	memset(buf, id, sizeof(buf));
	for (int i = 0; i < 16; i++) {
		snprintf(path, sizeof(path), "%s/kmt.%d.%d", tmpdir, getpid(), i);
		fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
		if (fd < 0)
			_exit(1);
		if (write(fd, buf, sizeof(buf)) != sizeof(buf))
			_exit(1);
		close(fd);
		unlink(path);
	}
	for (int i = 0; i < 8; i++) {
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(p))
			_exit(1);
		if (send(sv[0], buf, 512, 0) != 512 || recv(sv[1], buf, 512, 0) != 512 ||
		    write(p[1], buf, 64) != 64 || read(p[0], buf, 64) != 64)
			_exit(1);
		close(sv[0]);
		close(sv[1]);
		close(p[0]);
		close(p[1]);
	}
	_exit(0);
}

/* Start the workload's next pair of processes; how many are left to start. */
static int workload_step(int *left)
{
	for (int k = 0; k < 2 && *left > 0; k++, (*left)--) {
		pid_t pid = fork();

		if (pid == 0)
			child_work(*left);
		if (pid < 0)
			return -errno;
	}
	return 0;
}

static int wait_children(int n)
{
	int status, bad = 0;

	for (int i = 0; i < n; i++)
		if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			bad++;
	return bad;
}

/*
 * The workload: HELD socket pairs opened and held (thousands of the kernel's objects
 * outstanding at once, more than the map tracer's table holds), processes two at a
 * time, then the pairs closed. Its wall time in ms (< 0: it failed).
 */
static double workload(void (*every_second)(void))
{
	static int held[HELD][2];
	double t0 = now_ms(), next = t0 + 1000;
	int left = CHILDREN, bad = 0, n;

	for (n = 0; n < HELD; n++)
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, held[n]))
			break;
	while (left > 0) {
		if (workload_step(&left))
			return -1;
		bad += wait_children(2);
		if (every_second && now_ms() >= next) {
			every_second();
			next += 1000;
		}
	}
	for (int i = 0; i < n; i++) {
		close(held[i][0]);
		close(held[i][1]);
	}
	return bad || n < HELD ? -1 : now_ms() - t0;
}

/* ---- the arena tracer's report, read in place ---- */

static bool in_arena(u64 p)
{
	return p >= ARENA_USER_BASE && p < ARENA_USER_BASE + (u64)ARENA_PAGES * 4096;
}

struct site_row {
	u64 site;
	s64 bytes, count;
	u64 allocs;
};

static int by_bytes(const void *a, const void *b)
{
	const struct site_row *x = a, *y = b;

	return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

static int by_ts(const void *a, const void *b)
{
	const struct kmt_rec *x = a, *y = b;

	return x->ts > y->ts ? 1 : x->ts < y->ts ? -1 : 0;
}

static struct site_row rows[KMT_MAX_SITES + KMT_MAP_SITES];	/* either tracer's */
static struct kmt_rec recs[1 << 18];

/* Append the records of one tree by age to recs[], leaf by leaf: 0 or -EFAULT. */
static int tree_read(u64 tree, u32 *nr)
{
	struct btree *bt = (struct btree *)(uintptr_t)tree;
	struct bt_node *n;
	u32 hops = 0;

	if (!in_arena(tree) || !bt->root)
		return 0;
	n = (struct bt_node *)(uintptr_t)bt->root;
	for (u32 l = 0; l < BT_MAX_HEIGHT && in_arena((u64)(uintptr_t)n) && n->level > 0; l++)
		n = (struct bt_node *)(uintptr_t)n->children[0];
	for (; n && hops++ < (1u << 20); n = (struct bt_node *)(uintptr_t)n->next) {
		if (!in_arena((u64)(uintptr_t)n) || n->level || n->nr > BT_MAX_KEYS)
			return -EFAULT;
		for (u32 k = 0; k < n->nr && *nr < ARRAY_SIZE(recs); k++) {
			struct kmt_rec *r = (struct kmt_rec *)(uintptr_t)n->values[k];

			if (in_arena((u64)(uintptr_t)r))
				recs[(*nr)++] = *r;
		}
	}
	return 0;
}

/* The oldest records of a report: the map tracer's after its sort, the arena's merged. */
static struct kmt_rec oldest[4];
static int nr_oldest;

/*
 * Every call site and every outstanding record of the arena tracer into rows[] and
 * recs[], straight from the arena: the sites from the table, the records from each
 * CPU's tree by age, leaf by leaf (each CPU's run oldest first, so the oldest of all
 * are a merge of the runs' heads: no sort). Bounded whatever the arena holds: each
 * pointer is checked to be in the arena, each walk by a hop count and the arrays' size.
 */
static int arena_read(int *nsites, int *nrecs)
{
	u32 ns = st->nr_sites, nc = st->nr_cpus, nr = 0, start[KMT_MAX_CPUS + 1] = { 0 };
	u32 pos[KMT_MAX_CPUS];
	int err = 0;

	if (ns > KMT_MAX_SITES)
		ns = KMT_MAX_SITES;
	if (nc > KMT_MAX_CPUS)
		nc = KMT_MAX_CPUS;
	*nsites = 0;
	for (u32 i = 0; i < ns; i++) {
		struct kmt_site *s = (struct kmt_site *)(uintptr_t)st->site_tab[i];

		if (!in_arena((u64)(uintptr_t)s))
			continue;
		rows[(*nsites)++] = (struct site_row){ s->site, s->bytes, s->count, s->allocs };
	}
	for (u32 c = 0; c < nc && !err; c++) {
		err = tree_read(st->age[c], &nr);
		start[c + 1] = nr;
	}
	for (u32 c = 0; c < nc; c++)
		pos[c] = start[c];
	for (nr_oldest = 0; nr_oldest < (int)ARRAY_SIZE(oldest); nr_oldest++) {
		int best = -1;

		for (u32 c = 0; c < nc; c++)
			if (pos[c] < start[c + 1] &&
			    (best < 0 || recs[pos[c]].seq < recs[pos[best]].seq))
				best = c;
		if (best < 0)
			break;
		oldest[nr_oldest] = recs[pos[best]++];
	}
	*nrecs = nr;
	return err;
}

/* A hash map's entries by batch lookups into keys[] and vals[]: how many, or -errno. */
static int batch_read(int fd, u64 *keys, void *vals, size_t val_size, u32 max)
{
	u64 in = 0, out;
	u32 n, total = 0;
	int err;

	do {
		n = max - total;
		err = bpf_map_lookup_batch(fd, total ? &in : NULL, &out, keys + total,
					   (char *)vals + total * val_size, &n, NULL);
		total += n;
		in = out;
	} while (!err && total < max);
	return err && errno != ENOENT ? -errno : (int)total;
}

/* The same for the map tracer: batch lookups, then sorted by age (a map has no order). */
static int map_read(int *nsites, int *nrecs)
{
	static u64 keys[KMT_MAP_ENTRIES];
	static struct kmt_site vals[KMT_MAP_SITES];
	int live = bpf_map__fd(bpf_object__find_map_by_name(obj, "kmt_map_live"));
	int sites = bpf_map__fd(bpf_object__find_map_by_name(obj, "kmt_map_sites"));
	int n;

	n = batch_read(live, keys, recs, sizeof(recs[0]), KMT_MAP_ENTRIES);
	if (n < 0)
		return n;
	*nrecs = n;
	qsort(recs, n, sizeof(recs[0]), by_ts);
	for (nr_oldest = 0; nr_oldest < (int)ARRAY_SIZE(oldest) && nr_oldest < n; nr_oldest++)
		oldest[nr_oldest] = recs[nr_oldest];
	n = batch_read(sites, keys, vals, sizeof(vals[0]), KMT_MAP_SITES);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++)
		rows[i] = (struct site_row){ vals[i].site, vals[i].bytes, vals[i].count,
					     vals[i].allocs };
	*nsites = n;
	return 0;
}

static void print_report(const char *who, int nsites, int nrecs)
{
	u64 now = 0;
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = ts.tv_sec * 1000000000ull + ts.tv_nsec;
	qsort(rows, nsites, sizeof(rows[0]), by_bytes);
	printf("%s: %d outstanding allocations, %d call sites; top sites by outstanding bytes:\n",
	       who, nrecs, nsites);
	for (int i = 0; i < nsites && i < TOP && rows[i].bytes > 0; i++)
		printf("  %#18llx %10lld bytes %7lld objects (%llu allocated while traced)\n",
		       (unsigned long long)rows[i].site, (long long)rows[i].bytes,
		       (long long)rows[i].count, (unsigned long long)rows[i].allocs);
	printf("  oldest:");
	for (int i = 0; i < nr_oldest; i++)
		printf(" %#llx (%llu B from %#llx, %.1f s old)", (unsigned long long)oldest[i].addr,
		       (unsigned long long)oldest[i].bytes, (unsigned long long)oldest[i].site,
		       (now - oldest[i].ts) / 1e9);
	putchar('\n');
	fflush(stdout);
}

static void arena_report(void)
{
	int ns, nr;

	if (!arena_read(&ns, &nr))
		print_report("arena tracer", ns, nr);
}

/* ---- attach, detach, measure ---- */

static struct bpf_link *links[4];

static int attach(const char *const names[4])
{
	for (int i = 0; i < 4; i++) {
		links[i] = bpf_program__attach(bpf_object__find_program_by_name(obj, names[i]));
		if (!links[i])
			return -errno;
	}
	return 0;
}

/* Detach, then let the tree by age take what waits in its queues (kmt_flush). */
static void detach(void)
{
	int ret;

	for (int i = 0; i < 4; i++) {
		bpf_link__destroy(links[i]);
		links[i] = NULL;
	}
	libarena_prog_run(bpf_object__find_program_by_name(obj, "kmt_flush"), NULL, 0, &ret);
}

static const char *const arena_progs[4] = {
	"kmt_kmalloc", "kmt_cache_alloc", "kmt_kfree", "kmt_cache_free",
};
static const char *const map_progs[4] = {
	"kmt_map_kmalloc", "kmt_map_cache_alloc", "kmt_map_kfree", "kmt_map_cache_free",
};

static double median3(double *v)
{
	double a = v[0], b = v[1], c = v[2];

	return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

/* Best of five full reads, in microseconds; nsites/nrecs from the last. */
static double read_us(int (*read)(int *, int *), int *ns, int *nr)
{
	double best = 1e18;

	for (int i = 0; i < 5; i++) {
		double t0 = now_ms();

		if (read(ns, nr))
			return -1;
		if ((now_ms() - t0) * 1e3 < best)
			best = (now_ms() - t0) * 1e3;
	}
	return best;
}

/* Bytes the library's allocators hold: the heap's pages and the buddy's chunks. */
static u64 arena_bytes(void)
{
	struct arena_heap_global *g = libarena_heap(obj);
	struct buddy *b = libarena_buddy(obj);

	return (g ? g->pages_mapped * 4096 : 0) +
	       (b ? b->stats.chunks_held * (u64)BUDDY_CHUNK_SIZE : 0);
}

/* A map's memory as the kernel accounts it (fdinfo's memlock). */
static u64 map_bytes(const char *name)
{
	char path[64], line[128];
	unsigned long long v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d",
		 bpf_map__fd(bpf_object__find_map_by_name(obj, name)));
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "memlock: %llu", &v) == 1)
			break;
	fclose(f);
	return v;
}

static s64 arena_outstanding_records(void)
{
	int ns, nr;

	return arena_read(&ns, &nr) ? -1 : nr;
}

static s64 map_outstanding_records(void)
{
	int ns, nr;

	return map_read(&ns, &nr) ? -1 : nr;
}

static void check_counts(const char *who, const struct kmt_counts *c, s64 outstanding)
{
	printf("%s: %llu allocations seen = %lld outstanding + %llu freed + %llu dropped\n",
	       who, (unsigned long long)c->seen, (long long)outstanding,
	       (unsigned long long)c->freed, (unsigned long long)c->dropped);
	printf("  dropped: %llu table full, %llu no memory, %llu lock busy, %llu no site\n",
	       (unsigned long long)c->drop_full, (unsigned long long)c->drop_nomem,
	       (unsigned long long)c->drop_busy, (unsigned long long)c->drop_site);
	printf("  %llu addresses reused with no traced free, %llu older allocations freed\n",
	       (unsigned long long)c->reused, (unsigned long long)c->unknown_frees);
	printf("  %llu changes to the trees by age deferred\n", (unsigned long long)c->deferred);
	check(outstanding >= 0 && c->seen == (u64)outstanding + c->freed + c->dropped,
	      "%s: seen = outstanding + freed + dropped", who);
}

/*
 * arena-top on this process, as a user would run it on a tracer they did not write: its
 * output shown, and its objects-out and log figures held to the program's own.
 */
static void arena_top_check(void)
{
	char exe[4096], cmd[4200], line[512];
	long long out = -1, ours;
	unsigned long long written = ~0ull;
	struct kmt_teardown o = { 0 };
	struct arena_log *log = libarena_log(obj);
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int ret, rc;
	FILE *f;

	if (n <= 0) {
		check(0, "arena-top: cannot find this program's directory");
		return;
	}
	exe[n] = 0;
	*strrchr(exe, '/') = 0;
	snprintf(cmd, sizeof(cmd), "%s/../arena-top -P %d -n 1", exe, getpid());
	printf("\n$ arena-top -P %d   (the tracer's arena, from outside)\n", getpid());
	f = popen(cmd, "r");
	if (!f) {
		check(0, "arena-top: %s", strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		fputs(line, stdout);
		if (sscanf(line, "objects out: %lld", &out) == 1)
			continue;
		if (sscanf(line, "log: %llu lines written", &written) == 1)
			continue;
	}
	rc = pclose(f);
	ours = libarena_prog_run(bpf_object__find_program_by_name(obj, "kmt_outstanding"), &o,
				 sizeof(o), &ret) ? -1 : o.heap_after;
	check(rc == 0 && out == ours,
	      "arena-top: %lld objects out; the program's arena_heap_outstanding(): %lld",
	      out, ours);
	check(log && written == log->written,
	      "arena-top: %llu log lines written, the ring's own count %llu", written,
	      log ? (unsigned long long)log->written : 0ull);
}

int main(int argc, char **argv)
{
	struct kmt_setup setup = { .nr_cpus = libbpf_num_possible_cpus() };
	struct kmt_teardown td = { 0 };
	/*
	 * Reserves for the workload's peak (some 20,000 records and hash map entries at
	 * once, from tracepoints): 32 spans of each small class a CPU, so that no event
	 * waits on the background refill (an allocation that finds the reserve empty fails).
	 */
	struct arena_heap_refill_args cfg = { .reserve_small = 32 };
	struct asan_state *asan;
	double t_none[ROUNDS], t_arena[ROUNDS], t_maps[ROUNDS], us_arena, us_maps;
	double none, on_arena, on_maps;
	u64 mem_before, mem_arena, mem_maps, ev_arena, ev_maps;
	int err, ret, ns, nr_arena, nr_maps, reports;
	double per_arena, per_maps, full, per_rec;

	if (argc != 2) {
		fprintf(stderr, "usage: kmemtrace OBJECT\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "kmemtrace: cannot load %s\n", argv[1]);
		return 1;
	}
	asan = libarena_asan_start(obj, NULL);
	err = libarena_heap_refill(obj, &cfg);
	mem_before = arena_bytes();
	if (!err)
		err = libarena_prog_run(bpf_object__find_program_by_name(obj, "kmt_setup"),
					&setup, sizeof(setup), &ret) ?: ret;
	if (err) {
		fprintf(stderr, "kmemtrace: setup: %s\n", strerror(-err));
		libarena_log_print(libarena_log(obj), stdout, stderr);
		return 1;
	}
	st = (struct kmt_state *)(uintptr_t)setup.state;

	/* 1: the arena tracer on the workload, a report every second. */
	printf("kmemtrace: the kernel's allocations while %d processes make files and sockets\n",
	       CHILDREN);
	printf("  and %d socket pairs stay open\n", HELD);
	if (getenv("TMPDIR"))
		tmpdir = getenv("TMPDIR");
	/* Two descriptors a held pair, and the loader's own. */
	setrlimit(RLIMIT_NOFILE, &(struct rlimit){ 2 * HELD + 256, 2 * HELD + 256 });
	if (workload(NULL) < 0) {
		fprintf(stderr, "kmemtrace: the workload failed (files in %s)\n", tmpdir);
		return 1;
	}
	err = attach(arena_progs);
	if (err) {
		fprintf(stderr, "kmemtrace: attach: %s\n", strerror(-err));
		return 1;
	}
	workload(arena_report);
	detach();
	arena_report();
	arena_top_check();

	/* 2: untraced, arena, maps, in turn. */
	ev_arena = st->arena.seen;
	ev_maps = st->maps.seen;
	for (int r = 0; r < ROUNDS; r++) {
		t_none[r] = workload(NULL);
		attach(arena_progs);
		t_arena[r] = workload(NULL);
		detach();
		attach(map_progs);
		t_maps[r] = workload(NULL);
		detach();
	}
	ev_arena = (st->arena.seen - ev_arena) / ROUNDS;
	ev_maps = (st->maps.seen - ev_maps) / ROUNDS;
	none = median3(t_none);
	on_arena = median3(t_arena);
	on_maps = median3(t_maps);
	mem_arena = arena_bytes() - mem_before;
	mem_maps = map_bytes("kmt_map_live") + map_bytes("kmt_map_sites");
	us_arena = read_us(arena_read, &ns, &nr_arena);
	print_report("arena tracer", ns, nr_arena);
	us_maps = read_us(map_read, &ns, &nr_maps);
	print_report("map tracer", ns, nr_maps);
	per_arena = (on_arena - none) * 1e6 / (ev_arena ? ev_arena : 1);
	per_maps = (on_maps - none) * 1e6 / (ev_maps ? ev_maps : 1);

	printf("\nside by side (%d rounds in turn, medians; %d processes, %d socket pairs):\n",
	       ROUNDS, CHILDREN, HELD);
	printf("  workload: %.0f ms untraced, %.0f ms traced by the arena (%.2fx)\n",
	       none, on_arena, on_arena / none);
	printf("    %.0f ms traced by the maps (%.2fx)\n", on_maps, on_maps / none);
	printf("  cost per event: arena %.0f ns, maps %.0f ns (%llu and %llu allocations)\n",
	       per_arena, per_maps, (unsigned long long)ev_arena, (unsigned long long)ev_maps);
	printf("    %.2fx (goal: at most 1.0x: %s)\n", per_arena / per_maps,
	       per_arena <= per_maps ? "met" : "not met");
	printf("  events dropped: arena %llu, maps %llu (its table holds %d)\n",
	       (unsigned long long)st->arena.dropped, (unsigned long long)st->maps.dropped,
	       KMT_MAP_ENTRIES);
	printf("    goal: none where the maps drop: %s\n", !st->arena.dropped ? "met" : "not met");
	printf("  memory: arena %llu KiB mapped by the allocators, maps %llu KiB (memlock)\n",
	       (unsigned long long)mem_arena >> 10, (unsigned long long)mem_maps >> 10);
	full = us_maps / us_arena;
	per_rec = (us_maps / (nr_maps ? nr_maps : 1)) / (us_arena / (nr_arena ? nr_arena : 1));
	printf("  one full report read: arena %.0f us in place (%d records), maps %.0f us (%d)\n",
	       us_arena, nr_arena, us_maps, nr_maps);
	printf("    %.1fx, per record %.1fx (goal: at least 10x: %s)\n", full, per_rec,
	       full >= 10 ? "met" : per_rec >= 10 ?
	       "met per record; the arena's report also holds what the maps dropped" : "not met");

	/* 3: checks. */
	printf("\n");
	check_counts("arena tracer", &st->arena, arena_outstanding_records());
	check_counts("map tracer", &st->maps, map_outstanding_records());
	check(st->arena.drop_nomem + st->arena.drop_site == 0,
	      "arena tracer: no event dropped for memory or a call site");
	reports = asan ? libarena_asan_print(obj, asan, stdout) : 0;
	check(reports == 0, "sanitizer: %d reports%s", reports, asan ? "" : " (plain build)");
	err = libarena_prog_run(bpf_object__find_program_by_name(obj, "kmt_teardown"), &td,
				sizeof(td), &ret) ?: ret;
	check(!err && td.heap_after == st->heap_before,
	      "teardown (%s): %lld records freed; arena_heap_outstanding %lld before, %lld after",
	      err ? strerror(-err) : "done", (long long)td.freed, (long long)st->heap_before,
	      (long long)td.heap_after);
	libarena_log_print(libarena_log(obj), stdout, stderr);
	printf("%d passed, %d failed\n", passed, failed);
	bpf_object__close(obj);
	return failed ? 1 : 0;
}
