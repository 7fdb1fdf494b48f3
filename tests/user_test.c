// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * User-space side of the library, in the VM: libarena_get_info, libarena_log and the log
 * reader against real BPF writers (order, long lines, overflow accounting, concurrent
 * writers while draining), and the allocator statistics read through the mapping.
 *
 *   user_test TEST_LOG TEST_BUDDY TEST_BITMAP TEST_HEAP TEST_BTREE [ASAN_TEST_LOG]
 *
 * (the built objects of those tests; the last, optional, of the sanitizer build), and
 * the upstream harness's calls (libarena_run_prog, libarena_get_arena_base, ...).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include <libarena/buddy.h>
#include "host/check.h"

struct log_lines_args {
	u32 thread, count, width, stream, written, rejected;
};

static struct bpf_object *obj;

/*
 * Open and load a test object with none of its tests but the one named keep (or none):
 * these tests use the object's other programs, and its tests are most of its load time
 * under TCG (the B-tree's alone take 45 s).
 */
static struct bpf_object *load_without_tests(const char *path, const char *keep)
{
	struct bpf_object *o = bpf_object__open_file(path, NULL);
	struct bpf_program *p;
	const char *name;

	if (!o)
		return NULL;
	bpf_object__for_each_program(p, o) {
		name = bpf_program__name(p);
		if ((libarena_is_test_prog(name) || libarena_is_parallel_test_prog(name) ||
		     libarena_is_asan_test_prog(name)) && (!keep || strcmp(name, keep)))
			bpf_program__set_autoload(p, false);
	}
	if (bpf_object__load(o)) {
		bpf_object__close(o);
		return NULL;
	}
	return o;
}
static const char *buddy_path, *bitmap_path, *heap_path, *btree_path, *asan_path;
static struct bpf_program *log_lines;
static struct arena_log *ring;

static int write_lines(u32 thread, u32 count, u32 width, u32 stream,
		       struct log_lines_args *out)
{
	struct log_lines_args a = { thread, count, width, stream };
	int err, ret;

	err = libarena_prog_run(log_lines, &a, sizeof(a), &ret);
	if (err || ret)
		return err ? err : ret;
	if (out)
		*out = a;
	return 0;
}

struct collect {
	int n, bad, gaps;
	unsigned int next[64];		/* per thread: next expected line index */
	unsigned int width, stream;
	char first[2048];
};

/* Lines read "t=TTT i=IIIIII " then padding: check order per writer and the length. */
static int collect_line(const struct libarena_log_line *l, void *p)
{
	struct collect *c = p;
	unsigned int t, i;

	if (c->n == 0)
		snprintf(c->first, sizeof(c->first), "%s", l->text);
	c->n++;
	if (sscanf(l->text, "t=%u i=%u", &t, &i) != 2 || t >= 64) {
		c->bad++;
		return 0;
	}
	/* Dropped lines leave gaps; a line never comes twice or out of order. */
	if (i < c->next[t] || (c->width && l->len != c->width) ||
	    (c->stream && (unsigned int)l->stream != c->stream) ||
	    strlen(l->text) != l->len) {
		if (!c->bad)
			printf("    bad line (len %u, stream %d, after %u): %.60s...\n", l->len,
			       l->stream, c->next[t], l->text);
		c->bad++;
	}
	if (i != c->next[t])
		c->gaps++;
	c->next[t] = i + 1;
	return 0;
}

static int drain_all(struct collect *c, unsigned long long *dropped)
{
	unsigned long long d = 0, total = 0;
	int n, rounds = 0;

	do {
		n = libarena_log_drain(ring, collect_line, c, &d);
		total += d;
	} while (n > 0 && ++rounds < 100);
	if (dropped)
		*dropped = total;
	return n;
}

static int test_get_info(void)
{
	struct arena_get_info_args info;

	CHECK(libarena_get_info(obj, &info) == 0, "");
	CHECK(info.arena_base == ARENA_USER_BASE, "base %#llx",
	      (unsigned long long)info.arena_base);
	CHECK(info.arena_pages == ARENA_PAGES, "");
	CHECK(info.version == LIBARENA_VERSION, "");
	CHECK(info.log >= info.arena_base && info.log < info.arena_base + (4ull << 30), "");
	CHECK((void *)(uintptr_t)info.log == ring, "");
	return 0;
}

static int test_order_and_content(void)
{
	struct collect c = { .width = 40, .stream = ARENA_LOG_STDERR };
	unsigned long long dropped;

	CHECK(write_lines(0, 200, 40, ARENA_LOG_STDERR, NULL) == 0, "");
	CHECK(drain_all(&c, &dropped) == 0, "");
	CHECK(c.n == 200 && c.bad == 0, "n %d bad %d", c.n, c.bad);
	CHECK(dropped == 0, "");
	/* The writer pads with the tail of its 880-character text. */
	CHECK(!strcmp(c.first, "t=000 i=000000 TUVWXYZ0123456789abcdefgh"),
	      "first line '%s'", c.first);
	CHECK(c.gaps == 0, "");
	/* Nothing is read twice. */
	CHECK(libarena_log_drain(ring, collect_line, &c, NULL) == 0, "");
	return 0;
}

static int test_long_lines(void)
{
	/* Widths around the slot size and up to the longest the writer pads to. */
	/* A %s argument is cut near 500 bytes by bpf_snprintf; see log.h. */
	static const unsigned int widths[] = { 15, 111, 112, 113, 224, 225, 336, 480 };

	for (unsigned int w = 0; w < ARRAY_SIZE(widths); w++) {
		struct collect c = { .width = widths[w], .stream = ARENA_LOG_STDOUT };

		CHECK(write_lines(1, 20, widths[w], ARENA_LOG_STDOUT, NULL) == 0, "");
		CHECK(drain_all(&c, NULL) == 0, "");
		CHECK(c.n == 20 && c.bad == 0, "width %u: n %d bad %d", widths[w], c.n, c.bad);
	}
	return 0;
}

struct lengths {
	int n;
	unsigned int len[8];
	char head[8][16];
};

static int record_length(const struct libarena_log_line *l, void *p)
{
	struct lengths *c = p;

	if (c->n < 8) {
		c->len[c->n] = l->len;
		snprintf(c->head[c->n], sizeof(c->head[0]), "%s", l->text);
	}
	c->n++;
	return 0;
}

static int test_longest_lines(void)
{
	struct bpf_program *prog;
	struct lengths c = {};
	int ret;

	/* It logs a 1040-character line (cut to 1023) and a 1023-character one. */
	prog = bpf_object__find_program_by_name(obj, "test_log_truncates_long_lines");
	CHECK(prog, "");
	CHECK(libarena_prog_run(prog, NULL, 0, &ret) == 0 && ret == 0, "ret %d", ret);
	CHECK(libarena_log_drain(ring, record_length, &c, NULL) == 2, "");
	CHECK(c.n == 2 && c.len[0] == ARENA_LOG_LINE_MAX - 1 && c.len[1] == ARENA_LOG_LINE_MAX - 1,
	      "n %d len %u %u", c.n, c.len[0], c.len[1]);
	CHECK(!strcmp(c.head[0], "0123456789abcde") && !strcmp(c.head[1], "0123456789abcde"), "");
	return 0;
}

static int test_overflow_accounting(void)
{
	struct collect c = { .width = 15 };
	struct log_lines_args out;
	unsigned long long dropped;

	/* One slot a line: exactly ARENA_LOG_SLOTS fit, the rest are dropped and counted. */
	CHECK(write_lines(2, ARENA_LOG_SLOTS + 100, 15, ARENA_LOG_STDOUT, &out) == 0, "");
	CHECK(out.written == ARENA_LOG_SLOTS && out.rejected == 100, "written %u rejected %u",
	      out.written, out.rejected);
	CHECK(drain_all(&c, &dropped) == 0, "");
	CHECK(c.n == ARENA_LOG_SLOTS && c.bad == 0, "n %d bad %d", c.n, c.bad);
	CHECK(dropped == 100, "dropped %llu", dropped);
	/* After the drain the ring takes lines again. */
	CHECK(write_lines(2, 10, 15, ARENA_LOG_STDOUT, &out) == 0 && out.written == 10, "");
	c = (struct collect){ .width = 15 };
	CHECK(drain_all(&c, &dropped) == 0 && c.n == 10 && dropped == 0, "");
	return 0;
}

static int test_print_reports_drops(void)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int n;

	CHECK(write_lines(3, ARENA_LOG_SLOTS + 5, 15, ARENA_LOG_STDERR, NULL) == 0, "");
	n = libarena_log_print(ring, f, f);
	fclose(f);
	CHECK(n == ARENA_LOG_SLOTS, "printed %d", n);
	CHECK(strstr(buf, "libarena: 5 log lines dropped"), "");
	CHECK(strstr(buf, "t=003 i=000511"), "");
	free(buf);
	return 0;
}

static int test_corrupted_ring(void)
{
	struct collect c = {};
	u64 saved;

	CHECK(write_lines(4, 3, 15, ARENA_LOG_STDOUT, NULL) == 0, "");
	/* A scribbled slot header: the reader must notice, skip, and stay bounded. */
	saved = ring->tail;
	ring->slots[saved % ARENA_LOG_SLOTS].nslots = 200;
	CHECK(libarena_log_drain(ring, collect_line, &c, NULL) == -EUCLEAN, "");
	CHECK(ring->tail == ring->head, "");
	/* A tail moved past head: writers refuse rather than overwrite. */
	ring->tail = ring->head + 1000;
	{
		struct log_lines_args out;

		CHECK(write_lines(4, 1, 15, ARENA_LOG_STDOUT, &out) == 0, "");
		CHECK(out.rejected == 1, "");
	}
	/* The reader notices and starts again at head. */
	CHECK(libarena_log_drain(ring, collect_line, &c, NULL) == -EUCLEAN, "");
	CHECK(ring->tail == ring->head, "");
	CHECK(write_lines(4, 1, 15, ARENA_LOG_STDOUT, NULL) == 0, "");
	c = (struct collect){};
	CHECK(drain_all(&c, NULL) == 0 && c.n == 1, "");
	return 0;
}

#define WRITER_LINES 2000

struct writer_arg {
	u32 thread;
	struct log_lines_args out;
	int err;
};

static int writers_done;

static void *writer_fn(void *p)
{
	struct writer_arg *w = p;

	w->err = write_lines(w->thread, WRITER_LINES, 60, ARENA_LOG_STDOUT, &w->out);
	__atomic_add_fetch(&writers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int test_concurrent_writers_and_reader(void)
{
	enum { WRITERS = 4 };
	struct writer_arg w[WRITERS];
	pthread_t tid[WRITERS];
	struct collect c = { .width = 60 };
	unsigned long long dropped = 0, d;
	unsigned long long written = 0, rejected = 0;
	int rounds = 0;

	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer_arg){ .thread = 10 + i };
		CHECK(!pthread_create(&tid[i], NULL, writer_fn, &w[i]), "");
	}
	/* Drain while they write; a line is either read or counted as dropped. */
	while (__atomic_load_n(&writers_done, __ATOMIC_ACQUIRE) < WRITERS) {
		CHECK(libarena_log_drain(ring, collect_line, &c, &d) >= 0, "");
		dropped += d;
		rounds++;
		sched_yield();
	}
	for (int i = 0; i < WRITERS; i++)
		pthread_join(tid[i], NULL);
	CHECK(drain_all(&c, &d) == 0, "");
	dropped += d;
	for (int i = 0; i < WRITERS; i++) {
		CHECK(w[i].err == 0, "writer %d: %d", i, w[i].err);
		written += w[i].out.written;
		rejected += w[i].out.rejected;
	}
	printf("    %d lines read, %llu dropped, %d drain rounds, %d gaps\n", c.n, dropped,
	       rounds, c.gaps);
	CHECK(c.bad == 0, "%d lines out of order or malformed", c.bad);
	CHECK((unsigned long long)c.n == written, "read %d, written %llu", c.n, written);
	CHECK(dropped == rejected, "dropped %llu, rejected %llu", dropped, rejected);
	CHECK(written + rejected == WRITERS * (unsigned long long)WRITER_LINES, "");
	return 0;
}

struct stats_args {
	u32 count, size;
};

static int test_buddy_stats(void)
{
	struct bpf_object *buddy_obj;
	struct bpf_program *reset, *alloc;
	struct stats_args a = { 5, 100 };
	char *buf = NULL;
	size_t len = 0;
	unsigned long long requested;
	struct buddy *b;
	FILE *f;
	int ret;

	/* Loaded on its own: every object maps its arena at the same fixed address. */
	buddy_obj = load_without_tests(buddy_path, NULL);
	CHECK(buddy_obj, "cannot load %s", buddy_path);
	CHECK(libarena_heap_refill(buddy_obj, NULL) == 0, "");
	reset = bpf_object__find_program_by_name(buddy_obj, "arena_buddy_reset");
	alloc = bpf_object__find_program_by_name(buddy_obj, "alloc_for_stats");
	CHECK(reset && alloc, "");
	CHECK(libarena_prog_run(reset, NULL, 0, &ret) == 0 && ret == 0, "reset: %d", ret);
	b = libarena_buddy(buddy_obj);
	CHECK(b && b->magic == BUDDY_MAGIC, "");
	CHECK(b->stats.chunks_held == 1 && b->stats.allocs == 0, "");

	/*
	 * 100 bytes take 128-byte blocks (order 3), a batch of them for the CPU's cache;
	 * the counts are visible right away, the cached ones told apart.
	 */
	CHECK(libarena_prog_run(alloc, &a, sizeof(a), &ret) == 0 && ret == 0, "alloc: %d", ret);
	CHECK(b->stats.blocks_in_use[3] == BUDDY_CACHE_BATCH, "%llu",
	      (unsigned long long)b->stats.blocks_in_use[3]);
	/* What the CPUs' caches served, each counts: the first allocation took the lock. */
	requested = b->stats.bytes_requested;
	for (int c = 0; c < BUDDY_CACHE_CPUS; c++)
		requested += b->cache[c].bytes_requested;
	CHECK(requested == 500 && b->stats.cache_refills == 1, "%llu bytes, %llu refills",
	      (unsigned long long)requested, (unsigned long long)b->stats.cache_refills);
	f = open_memstream(&buf, &len);
	CHECK(libarena_buddy_stats_print(b, f) == 0, "");
	fclose(f);
	printf("%s", buf);
	CHECK(strstr(buf, "buddy ready: 5 blocks (640 bytes) in use, 11 in the CPUs' caches"), "");
	CHECK(strstr(buf, "order  3 (   128 B): 5 blocks, 640 bytes; 11 cached"), "");
	free(buf);

	a.count = 0;
	CHECK(libarena_prog_run(alloc, &a, sizeof(a), &ret) == 0 && ret == 0, "");
	f = open_memstream(&buf, &len);
	CHECK(libarena_buddy_stats_print(b, f) == 0, "");
	fclose(f);
	CHECK(strstr(buf, "buddy ready: 0 blocks (0 bytes) in use, 16 in the CPUs' caches"), "%s",
	      buf);
	free(buf);

	/* arena_alloc_reserve: pages in the arena, mapped and zero; a second call refused. */
	{
		struct arena_alloc_reserve_args r = { .nr_pages = 4 };
		struct bpf_program *reserve;

		reserve = bpf_object__find_program_by_name(buddy_obj, "arena_alloc_reserve");
		CHECK(reserve, "");
		CHECK(libarena_prog_run(reserve, &r, sizeof(r), &ret) == 0 && ret == 0,
		      "reserve: %d", ret);
		CHECK(r.addr && (r.addr & 4095) == 0 && (r.addr >> 32) == ARENA_USER_BASE >> 32,
		      "");
		CHECK(READ_ONCE(((u8 *)(uintptr_t)r.addr)[4 * 4096 - 1]) == 0, "");
		r.nr_pages = 0;
		CHECK(libarena_prog_run(reserve, &r, sizeof(r), &ret) == 0 && ret == -EALREADY,
		      "second reserve: %d", ret);
	}
	/* The frees went to the CPU's cache: the allocator still counts them its own. */
	CHECK(b->stats.blocks_in_use[3] == BUDDY_CACHE_BATCH && b->stats.frees == 0, "");
	CHECK(libarena_buddy_stats_print(NULL, stdout) == -EINVAL, "");
	bpf_object__close(buddy_obj);
	return 0;
}

struct find_lines {
	const char *want[2];
	int found;
};

static int find_line(const struct libarena_log_line *l, void *p)
{
	struct find_lines *f = p;

	for (int i = 0; i < 2; i++)
		if (!strcmp(l->text, f->want[i]))
			f->found |= 1 << i;
	return 0;
}

/* bmp_print's text, as the log delivers it. */
static int test_bitmap_print(void)
{
	struct find_lines f = { { "bitmap(128): 0,5,70,99,120",
				  "bitmap(128): 0-2,5,70-71,99,120,127" } };
	struct bpf_object *o;
	int ret;

	o = load_without_tests(bitmap_path, "test_bitmap_whole_map");
	CHECK(o, "cannot load %s", bitmap_path);
	CHECK(libarena_heap_refill(o, NULL) == 0, "");
	CHECK(libarena_prog_run(bpf_object__find_program_by_name(o, "test_bitmap_whole_map"),
				NULL, 0, &ret) == 0 && ret == 0, "ret %d", ret);
	CHECK(libarena_log_drain(libarena_log(o), find_line, &f, NULL) > 0, "");
	CHECK(f.found == 3, "found %#x", f.found);
	bpf_object__close(o);
	return 0;
}

struct heap_counts {
	u64 ok, fail, null;
	s64 outstanding;
	u64 nested;
	u32 iterations;
	u32 pad;
};

static int heap_counts(struct bpf_object *o, struct heap_counts *c)
{
	int ret;

	if (libarena_prog_run(bpf_object__find_program_by_name(o, "heap_counts"), c,
			      sizeof(*c), &ret) || ret)
		return -1;
	return 0;
}

/* Run an XDP or tc program on a dummy packet, repeat times; its last return value. */
static int run_packet_prog(struct bpf_object *o, const char *name, int repeat, int *retval)
{
	struct bpf_program *p = bpf_object__find_program_by_name(o, name);
	char pkt[64] = { 0 };

	LIBBPF_OPTS(bpf_test_run_opts, opts, .data_in = pkt, .data_size_in = sizeof(pkt),
		    .repeat = repeat);

	if (!p || bpf_prog_test_run_opts(bpf_program__fd(p), &opts))
		return -1;
	*retval = opts.retval;
	return 0;
}

static void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/*
 * The fast allocator from non-sleepable program types: XDP and tc test runs, a tp_btf
 * program on hrtimer expiry (hard interrupt context, nesting into whatever runs), a
 * kprobe; reserve exhaustion from XDP and the background refill; statistics.
 */
static int test_heap_program_types(void)
{
	struct heap_counts c0 = {}, c = {};
	struct arena_heap_global *g;
	struct arena_heap_stats st;
	struct bpf_link *link;
	struct bpf_object *o;
	unsigned long long wq_runs;
	char *buf = NULL;
	size_t len = 0;
	int ret, i;
	FILE *f;

	o = load_without_tests(heap_path, NULL);
	CHECK(o, "cannot load %s", heap_path);
	CHECK(libarena_heap_refill(o, NULL) == 0, "");
	g = libarena_heap(o);
	CHECK(g && g->magic == HEAP_GLOBAL_MAGIC, "");
	CHECK(g->nr_cpus == (u32)libbpf_num_possible_cpus(), "%u CPUs", g->nr_cpus);
	pin_to_cpu(0);
	CHECK(heap_counts(o, &c0) == 0, "");

	CHECK(run_packet_prog(o, "heap_xdp", 1000, &ret) == 0 && ret == XDP_PASS, "xdp %d", ret);
	CHECK(run_packet_prog(o, "heap_tc", 1000, &ret) == 0 && ret == 0, "tc %d", ret);
	CHECK(heap_counts(o, &c) == 0, "");
	CHECK(c.ok - c0.ok == 2000 && c.fail == c0.fail, "ok %llu fail %llu",
	      (unsigned long long)(c.ok - c0.ok), (unsigned long long)(c.fail - c0.fail));

	/* A kprobe program allocates on every nanosleep. */
	link = bpf_program__attach(bpf_object__find_program_by_name(o, "heap_kprobe"));
	CHECK(link, "kprobe attach: %s", strerror(errno));
	for (i = 0; i < 20; i++)
		usleep(100);
	bpf_link__destroy(link);
	c0 = c;
	CHECK(heap_counts(o, &c) == 0, "");
	CHECK(c.ok - c0.ok >= 20 && c.fail == c0.fail, "kprobe ok %llu",
	      (unsigned long long)(c.ok - c0.ok));

	/*
	 * Timer interrupts allocate while a syscall program churns on the same CPU: some
	 * land inside a malloc or free and must take the next heap level. Bounded: stop at
	 * the first nesting seen, or after 60 rounds.
	 */
	link = bpf_program__attach(bpf_object__find_program_by_name(o, "heap_hrtimer"));
	CHECK(link, "tp_btf attach: %s", strerror(errno));
	c0 = c;
	for (i = 0; i < 60; i++) {
		struct heap_counts churn = { .iterations = 200000 };

		CHECK(libarena_prog_run(bpf_object__find_program_by_name(o, "heap_churn"),
					&churn, sizeof(churn), &ret) == 0 && ret == 0,
		      "churn %d", ret);
		CHECK(heap_counts(o, &c) == 0, "");
		if (c.nested > c0.nested)
			break;
	}
	bpf_link__destroy(link);
	CHECK(heap_counts(o, &c) == 0, "");
	printf(
	       "    hrtimer program: %llu rounds allocated, %llu met an empty reserve, %llu nested heap uses, %d churn runs\n",
	       (unsigned long long)(c.ok - c0.ok),
	       (unsigned long long)(c.null - c0.null), (unsigned long long)(c.nested - c0.nested),
	       i + 1);
	CHECK(c.ok > c0.ok && c.fail == c0.fail, "");
	CHECK(c.nested > c0.nested, "no interrupt landed in a heap operation");
	CHECK(c.outstanding == c0.outstanding, "outstanding %lld, was %lld",
	      (long long)c.outstanding, (long long)c0.outstanding);

	/*
	 * XDP drains its CPU's reserve: a clean NULL; the background refill brings more.
	 * Counted from before the drain: the workqueue may run before we look.
	 */
	wq_runs = g->wq_runs;
	CHECK(run_packet_prog(o, "heap_xdp_hoard", 1, &ret) == 0 && ret == XDP_DROP,
	      "hoard %d", ret);
	libarena_heap_totals(g, &st);
	CHECK(st.shortfalls > 0, "");
	/* Until the hoard gets memory again: only the background refill can give it. */
	for (i = 0; i < 400; i++) {
		usleep(5000);
		CHECK(run_packet_prog(o, "heap_xdp_hoard", 1, &ret) == 0, "");
		if (ret == XDP_PASS)
			break;
	}
	CHECK(ret == XDP_PASS, "no refill within 2 s");
	CHECK(g->wq_runs > wq_runs, "the workqueue never ran");
	printf("    background refill after %d ms\n", i * 5);
	CHECK(libarena_prog_run(bpf_object__find_program_by_name(o, "heap_hoard_free"), NULL, 0,
				&ret) == 0 && ret == 0, "");
	CHECK(libarena_heap_collect(o) >= 0, "");

	f = open_memstream(&buf, &len);
	CHECK(libarena_heap_stats_print(g, f) == 0, "");
	fclose(f);
	printf("%s", buf);
	CHECK(strstr(buf, "heap ready:"), "");
	CHECK(strstr(buf, "by the workqueue"), "");
	free(buf);
	CHECK(libarena_heap_stats_print(NULL, stdout) == -EINVAL, "");
	bpf_object__close(o);
	return 0;
}

/* The B-tree from a non-sleepable program: an XDP test run, a thousand times. */
static int test_btree_from_xdp(void)
{
	struct bpf_object *o;
	int ret = -1;

	o = load_without_tests(btree_path, NULL);
	CHECK(o, "cannot load %s", btree_path);
	CHECK(libarena_heap_refill(o, NULL) == 0, "");
	CHECK(libarena_prog_run(bpf_object__find_program_by_name(o, "btree_xdp_setup"), NULL,
				0, &ret) == 0 && ret == 0, "setup: %d", ret);
	CHECK(run_packet_prog(o, "btree_xdp", 1000, &ret) == 0 && ret == XDP_PASS, "xdp %d", ret);
	CHECK(libarena_prog_run(bpf_object__find_program_by_name(o, "btree_xdp_check"), NULL,
				0, &ret) == 0 && ret == 0, "the tree after 1000 XDP runs: %d", ret);
	bpf_object__close(o);
	return 0;
}

static int prog_fd(struct bpf_object *o, const char *name)
{
	struct bpf_program *p = bpf_object__find_program_by_name(o, name);

	return p ? bpf_program__fd(p) : -1;
}

/* The upstream harness's calls, on program fds of the log test's object. */
static int test_upstream_calls(void)
{
	int info_fd = prog_fd(obj, "arena_get_info"), lines_fd = prog_fd(obj, "log_lines");
	struct bpf_map *arena = bpf_object__find_map_by_name(obj, "arena");
	struct log_lines_args a = { 7, 3, 20, ARENA_LOG_STDOUT };
	struct arena_get_info_args info = { 1 };
	struct collect c = {};
	size_t data_size = 0;
	void *base = NULL, *mapped;
	u64 pages = 0;
	int err;

	CHECK(info_fd >= 0 && lines_fd >= 0 && arena, "");
	CHECK(libarena_is_test_prog("test_x") && !libarena_is_test_prog("tests") &&
	      !libarena_is_test_prog("asan_test_x") && !libarena_is_test_prog(NULL), "");
	CHECK(libarena_is_asan_test_prog("asan_test_x") &&
	      libarena_is_asan_test_prog("asan_test") &&
	      !libarena_is_asan_test_prog("test_asan"), "");
	CHECK(libarena_is_parallel_test_prog("parallel_test_x__0") &&
	      !libarena_is_parallel_test_prog("parallel_tes"), "");

	/* A run: its error if it failed, else the program's return value. */
	CHECK(libarena_run_prog_args(info_fd, &info, sizeof(info)) == 0, "");
	CHECK(info.arena_base == ARENA_USER_BASE && info.version == LIBARENA_VERSION, "");
	CHECK(libarena_run_prog_args(lines_fd, &a, sizeof(a)) == 0 && a.written == 3, "");
	CHECK(drain_all(&c, NULL) == 0 && c.n == 3 && c.bad == 0, "n %d", c.n);
	/* A context smaller than the program reads: the run fails (6.12: -EINVAL). */
	CHECK(libarena_run_prog_args(lines_fd, &a, 4) == -EINVAL, "");
	CHECK(libarena_run_prog(-1) == -EBADF, "");
	/* No context at all: arena_buddy_reset reads none. */
	CHECK(libarena_run_prog(prog_fd(obj, "arena_buddy_reset")) == 0, "");

	/* The base, where libbpf mapped the arena. */
	mapped = bpf_map__initial_value(arena, &data_size);
	CHECK(libarena_get_arena_base(info_fd, &base) == 0, "");
	CHECK(base && base == mapped && base == (void *)(uintptr_t)ARENA_USER_BASE,
	      "base %p, mapped at %p", base, mapped);

	/* The globals' pages: libbpf's arena data, rounded up; the same from any program. */
	CHECK(libarena_get_globals_pages(info_fd, ARENA_PAGES, &pages) == 0, "");
	CHECK(pages >= 1 && pages == (data_size + 4095) / 4096 && pages < ARENA_PAGES / 2,
	      "pages %llu, arena data %zu bytes", (unsigned long long)pages, data_size);
	CHECK(libarena_get_globals_pages(lines_fd, ARENA_PAGES, &pages) == 0 &&
	      pages == (data_size + 4095) / 4096, "");
	CHECK(pages == 1 || libarena_get_globals_pages(info_fd, 1, &pages) == -E2BIG, "");
	err = libarena_get_globals_pages(-1, ARENA_PAGES, &pages);
	CHECK(err < 0, "%d", err);
	return 0;
}

/* Upstream's libarena_asan_init on the sanitizer build of the log test. */
static int test_upstream_asan_init(void)
{
	struct bpf_object *o = load_without_tests(asan_path, NULL);
	struct bpf_map *arena;
	struct asan_state *st;
	size_t data_size = 0;
	u64 pages;
	int info_fd, init_fd;

	CHECK(o, "cannot load %s", asan_path);
	info_fd = prog_fd(o, "arena_get_info");
	init_fd = prog_fd(o, "asan_init");
	arena = bpf_object__find_map_by_name(o, "arena");
	CHECK(info_fd >= 0 && init_fd >= 0 && arena, "not the sanitizer build?");
	bpf_map__initial_value(arena, &data_size);
	pages = (data_size + 4095) / 4096;
	CHECK(libarena_asan_init(info_fd, init_fd, ARENA_PAGES) == 0, "");
	CHECK(libarena_asan_init(info_fd, -1, ARENA_PAGES) == -EBADF, "");
	/* Ours on the same object: the state asan_init set up, the globals' shadow mapped. */
	st = libarena_asan_start(o, NULL);
	CHECK(st && st->magic == ASAN_STATE_MAGIC, "");
	CHECK(st->low_pages >= pages && st->low_pages >= ASAN_LOW_PAGES, "low pages %llu of %llu",
	      (unsigned long long)st->low_pages, (unsigned long long)pages);
	bpf_object__close(o);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 6 && argc != 7) {
		fprintf(stderr,
			"usage: user_test TEST_LOG TEST_BUDDY TEST_BITMAP TEST_HEAP TEST_BTREE [ASAN_TEST_LOG] (objects)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	obj = load_without_tests(argv[1], "test_log_truncates_long_lines");
	if (!obj) {
		fprintf(stderr, "user_test: cannot load %s\n", argv[1]);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	log_lines = bpf_object__find_program_by_name(obj, "log_lines");
	ring = libarena_log(obj);
	if (!log_lines || !ring) {
		fprintf(stderr, "user_test: %s lacks log_lines or the log ring\n", argv[1]);
		printf("0 passed, 1 failed\n");
		return 1;
	}
	buddy_path = argv[2];
	bitmap_path = argv[3];
	heap_path = argv[4];
	btree_path = argv[5];
	asan_path = argc > 6 ? argv[6] : NULL;
	host_run("user", "get_info", test_get_info);
	host_run("user", "upstream_calls", test_upstream_calls);
	host_run("user", "log_order_and_content", test_order_and_content);
	host_run("user", "log_long_lines", test_long_lines);
	host_run("user", "log_longest_lines", test_longest_lines);
	host_run("user", "log_overflow_accounting", test_overflow_accounting);
	host_run("user", "log_print_reports_drops", test_print_reports_drops);
	host_run("user", "log_corrupted_ring", test_corrupted_ring);
	host_run("user", "log_concurrent_writers_and_reader", test_concurrent_writers_and_reader);
	bpf_object__close(obj);
	host_run("user", "buddy_stats", test_buddy_stats);
	host_run("user", "bitmap_print", test_bitmap_print);
	host_run("user", "heap_program_types", test_heap_program_types);
	host_run("user", "btree_from_xdp", test_btree_from_xdp);
	if (asan_path)
		host_run("user", "upstream_asan_init", test_upstream_asan_init);
	return host_summary();
}
