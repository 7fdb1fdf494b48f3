// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The libarena test runner: loads linked BPF objects through the real verifier and runs
 * the tests they hold (naming conventions in include/libarena/test.h).
 *
 *   runner [-v] [-a] [-u] [-j N] [-s SEED] [-f PATTERN]... [-x TEXT] OBJECT...
 *
 *   -f PATTERN  run only tests whose name (or object:name) matches the glob; repeatable;
 *               also taken from $LIBARENA_TEST_FILTER (comma separated)
 *   -a          the objects are the sanitizer build: run asan_test_* too, print every
 *               sanitizer report into the test's log, fail a test_* that made one and
 *               an asan_test_* whose reports lack what it expects (asan-expect: lines)
 *   -u          run arena_buddy_reset before tests as upstream's harness does, in every
 *               object (without -u: in objects written for that harness, see test.h)
 *   -x TEXT     the objects must FAIL to load, with TEXT in the verifier log
 *   -v          show every test's log lines, not only a failing test's
 *   -s SEED     seed handed to the tests (default: time)
 *   -j N        objects loading at once, each in a process of its own (default: the
 *               online CPUs; tests never run while an object loads, see run_objects())
 *
 * Prints a line per test and ends with "N passed, N failed[, N skipped]"; exits 1 on any
 * failure.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <poll.h>
#include <signal.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include <libarena/test.h>

#define MAX_FILTERS	64
#define MAX_THREADS	64
/* The kernel's shorthand: the compiler checks the format against the arguments. */
#define __printf(a, b)	__attribute__((format(printf, a, b)))

static struct {
	bool verbose, asan, upstream;
	const char *expect_fail;
	const char *filters[MAX_FILTERS];
	int nr_filters;
	unsigned int seed;
	int nr_cpus;
	int jobs;		/* objects loading at once (-j) */
} opt;

/* What one object's tests came to: a child sends it to the parent (run_objects()). */
struct tally {
	int passed, failed, skipped;
	int seeded, seeded_caught, asan_reports;
};

static struct tally tally;

/* libbpf's messages for the object being loaded: shown when something goes wrong. */
static char *libbpf_msgs;
static size_t libbpf_msgs_len;
static FILE *libbpf_stream;

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG)
		return 0;
	if (libbpf_stream)
		return vfprintf(libbpf_stream, fmt, ap);
	return vfprintf(stderr, fmt, ap);
}

static void capture_libbpf(void)
{
	free(libbpf_msgs);
	libbpf_msgs = NULL;
	libbpf_stream = open_memstream(&libbpf_msgs, &libbpf_msgs_len);
}

static const char *captured_libbpf(void)
{
	if (libbpf_stream) {
		fclose(libbpf_stream);
		libbpf_stream = NULL;
	}
	return libbpf_msgs ? libbpf_msgs : "";
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static bool selected(const char *obj, const char *name)
{
	char full[512];

	if (!opt.nr_filters)
		return true;
	snprintf(full, sizeof(full), "%s:%s", obj, name);
	for (int i = 0; i < opt.nr_filters; i++)
		if (!fnmatch(opt.filters[i], name, 0) || !fnmatch(opt.filters[i], full, 0) ||
		    strstr(name, opt.filters[i]))
			return true;
	return false;
}

static bool has_prefix(const char *s, const char *p)
{
	return !strncmp(s, p, strlen(p));
}

/*
 * The log lines a test wrote, kept until we know whether it passed; and a copy of its
 * stderr (stderr lines and sanitizer reports) for its __stderr expectations.
 */
struct test_log {
	char *buf, *ebuf;
	size_t len, elen;
	FILE *f, *ef;
};

static void log_begin(struct test_log *tl)
{
	tl->buf = tl->ebuf = NULL;
	tl->f = open_memstream(&tl->buf, &tl->len);
	tl->ef = open_memstream(&tl->ebuf, &tl->elen);
}

static int log_line(const struct libarena_log_line *l, void *p)
{
	struct test_log *tl = p;

	fprintf(tl->f, "%s\n", l->text);
	if (l->stream == ARENA_LOG_STDERR)
		fprintf(tl->ef, "%s\n", l->text);
	return 0;
}

/* Move the ring's lines into the test's log. */
static void log_drain(struct test_log *tl, struct arena_log *ring)
{
	unsigned long long dropped = 0, d;
	int n, rounds = 0;

	if (!ring)
		return;
	do {
		d = 0;
		n = libarena_log_drain(ring, log_line, tl, &d);
		dropped += d;
	} while (n > 0 && ++rounds < 1000);
	if (n == -EUCLEAN)
		fprintf(tl->f, "libarena: the log ring is corrupted\n");
	if (dropped)
		fprintf(tl->f, "libarena: %llu log lines dropped\n", dropped);
	fflush(tl->f);
	fflush(tl->ef);
}

/* Text to both the log and the stderr copy (sanitizer reports). */
static void log_err_text(struct test_log *tl, const char *text)
{
	fputs(text, tl->f);
	fputs(text, tl->ef);
	fflush(tl->f);
	fflush(tl->ef);
}

static void log_end(struct test_log *tl, struct arena_log *ring, bool show)
{
	log_drain(tl, ring);
	fclose(tl->f);
	fclose(tl->ef);
	free(tl->ebuf);
	if (show && tl->len) {
		enum { MAX_LINES = 60 };
		char *line, *save = NULL;
		int n = 0, total = 0;

		for (char *c = tl->buf; *c; c++)
			total += *c == '\n';
		/* A flood of lines hides the one that matters, usually among the last. */
		for (line = strtok_r(tl->buf, "\n", &save); line;
		     line = strtok_r(NULL, "\n", &save), n++) {
			if (total > MAX_LINES && n == MAX_LINES / 2)
				printf("    | [... %d lines omitted ...]\n", total - MAX_LINES);
			if (total > MAX_LINES && n >= MAX_LINES / 2 && n < total - MAX_LINES / 2)
				continue;
			printf("    | %s\n", line);
		}
	}
	free(tl->buf);
}

static void report(const char *obj, const char *name, int result, const char *why, double ms)
{
	switch (result) {
	case 0:
		tally.passed++;
		printf("  ok   %s:%s (%.0f ms)\n", obj, name, ms);
		break;
	case 1:
		tally.skipped++;
		printf("  skip %s:%s: %s\n", obj, name, why);
		break;
	default:
		tally.failed++;
		printf("  FAIL %s:%s: %s\n", obj, name, why);
		break;
	}
	fflush(stdout);
}

static void init_ctx(struct arena_test_ctx *ctx, int thread, int nr_threads)
{
	memset(ctx, 0, sizeof(*ctx));
	ctx->nr_cpus = opt.nr_cpus;
	ctx->thread = thread;
	ctx->nr_threads = nr_threads;
	ctx->seed = opt.seed;
}

/* Run one program; 0 when it returned 0, else a message in why. */
static int run_one(struct bpf_program *prog, int thread, int nr_threads, int *retval,
		   char *why, size_t whylen)
{
	struct arena_test_ctx ctx;
	int err;

	init_ctx(&ctx, thread, nr_threads);
	err = libarena_prog_run(prog, &ctx, sizeof(ctx), retval);
	if (err) {
		snprintf(why, whylen, "%s: test run failed: %s", bpf_program__name(prog),
			 strerror(-err));
		return -1;
	}
	if (*retval) {
		snprintf(why, whylen, "%s returned %d", bpf_program__name(prog), *retval);
		return -1;
	}
	return 0;
}

/*
 * The sanitizer build: print the reports a test made into its log and judge them. An
 * asan_test_* names the reports it expects with log lines "asan-expect: TEXT" (each TEXT
 * must be in some report) or "asan-expect: none"; any other test must make no report
 * of a bad access (its deliberate bad frees are errors it checks itself). A test may
 * also log "asan-seeded: caught N of M", which the runner adds up.
 */
static int asan_judge(struct bpf_object *o, struct asan_state *st, struct test_log *tl,
		      bool asan_test, bool tagged, char *why, size_t whylen)
{
	char *reports = NULL, *line, *save = NULL, *copy;
	size_t len = 0;
	FILE *f = open_memstream(&reports, &len);
	int n, expects = 0, bad = 0, caught, seeded;

	n = libarena_asan_print(o, st, f);
	fclose(f);
	log_err_text(tl, reports ? reports : "");
	copy = strdup(tl->buf ? tl->buf : "");
	for (line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *e = strstr(line, "asan-expect: ");

		if (sscanf(line, "%*[^a]asan-seeded: caught %d of %d", &caught, &seeded) == 2 ||
		    sscanf(line, "asan-seeded: caught %d of %d", &caught, &seeded) == 2) {
			tally.seeded_caught += caught;
			tally.seeded += seeded;
		}
		if (!e)
			continue;
		e += strlen("asan-expect: ");
		expects++;
		if (!strcmp(e, "none")) {
			if (n > 0 && !bad) {
				snprintf(why, whylen, "a sanitizer report, none expected");
				bad = 1;
			}
		} else if (!strstr(reports ? reports : "", e) && !bad) {
			snprintf(why, whylen, "no sanitizer report says \"%s\"", e);
			bad = 1;
		}
	}
	free(copy);
	/* __stderr tags are the expectations of a test that has them. */
	if (!bad && asan_test && !expects && !tagged) {
		snprintf(why, whylen, "names no expected report (asan-expect: TEXT or none)");
		bad = 1;
	}
	/* A test_* that expects reports (a deliberate misuse) is judged by its expectations. */
	if (!bad && !asan_test && !expects && !tagged && reports &&
	    (strstr(reports, "out-of-bounds") || strstr(reports, "use-after-free") ||
	     strstr(reports, "wild access"))) {
		snprintf(why, whylen, "the sanitizer reported a bad access");
		bad = 1;
	}
	tally.asan_reports += n > 0 ? n : 0;
	free(reports);
	return bad ? -1 : 0;
}

/* The object's arena_buddy_reset when its tests want it (upstream's harness), or NULL. */
static struct bpf_program *buddy_reset;

static int run_buddy_reset(char *why, size_t whylen)
{
	int err, ret = 0;

	err = libarena_prog_run(buddy_reset, NULL, 0, &ret);
	if (!err && !ret)
		return 0;
	snprintf(why, whylen, "arena_buddy_reset: %s", strerror(err ? -err : ret < 0 ? -ret : EIO));
	return -1;
}

/* The text of a "comment:<counter>:<key>=<value>" decl tag with this key, and its counter. */
static const char *tag_value(const char *tag, const char *key, long *counter)
{
	char *end;

	if (!has_prefix(tag, "comment:"))
		return NULL;
	*counter = strtol(tag + strlen("comment:"), &end, 10);
	if (end == tag + strlen("comment:") || *end != ':' || !has_prefix(end + 1, key))
		return NULL;
	return end + 1 + strlen(key);
}

/* A test program's __stderr messages, in source order. */
struct expects {
	int n;
	const char **msgs;
	long *order;
};

static void expects_load(struct bpf_object *o, const char *prog, struct expects *e)
{
	struct btf *btf = bpf_object__btf(o);
	u32 id, nr = btf ? btf__type_cnt(btf) : 0;

	memset(e, 0, sizeof(*e));
	for (id = 1; id < nr; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id), *f;
		const char *msg;
		long counter;
		int i;

		if (!btf_is_decl_tag(t) || btf_decl_tag(t)->component_idx != -1)
			continue;
		f = btf__type_by_id(btf, t->type);
		if (!f || !btf_is_func(f) || strcmp(btf__name_by_offset(btf, f->name_off), prog))
			continue;
		msg = tag_value(btf__name_by_offset(btf, t->name_off), "test_expect_stderr=",
				&counter);
		if (!msg)
			continue;
		e->msgs = realloc(e->msgs, (e->n + 1) * sizeof(*e->msgs));
		e->order = realloc(e->order, (e->n + 1) * sizeof(*e->order));
		if (!e->msgs || !e->order) {
			fprintf(stderr, "runner: out of memory\n");
			exit(2);
		}
		/* Insertion by counter: a handful of tags at most. */
		for (i = e->n++; i > 0 && e->order[i - 1] > counter; i--) {
			e->msgs[i] = e->msgs[i - 1];
			e->order[i] = e->order[i - 1];
		}
		e->msgs[i] = msg;
		e->order[i] = counter;
	}
}

static void expects_free(struct expects *e)
{
	free(e->msgs);
	free(e->order);
}

/* 0 when the test's stderr holds every expected message, in order. */
static int expects_check(const struct expects *e, struct test_log *tl, char *why,
			 size_t whylen)
{
	int bad = 0, r;

	fflush(tl->ef);
	r = libarena_stderr_match(e->msgs, e->n, tl->ebuf ? tl->ebuf : "", &bad);
	if (!r)
		return 0;
	if (r < 0)
		snprintf(why, whylen, "__stderr #%d is not a valid pattern: \"%s\"", bad,
			 e->msgs[bad - 1]);
	else
		snprintf(why, whylen, "stderr lacks __stderr #%d (of %d, in order): \"%s\"", r,
			 e->n, e->msgs[r - 1]);
	return -1;
}

/*
 * Objects written for upstream's harness, which want arena_buddy_reset before their
 * tests: those with a global named libarena_upstream_harness (test.h).
 */
static bool upstream_object(struct bpf_object *o)
{
	struct btf *btf = bpf_object__btf(o);
	u32 id, nr = btf ? btf__type_cnt(btf) : 0;

	for (id = 1; id < nr; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);

		if (btf_is_var(t) &&
		    !strcmp(btf__name_by_offset(btf, t->name_off), "libarena_upstream_harness"))
			return true;
	}
	return false;
}

static void run_single(const char *obj, struct bpf_object *o, struct bpf_program *prog,
		       struct arena_log *ring, struct asan_state *st)
{
	const char *name = bpf_program__name(prog);
	struct expects ex;
	struct test_log tl;
	char why[512] = "";
	double t0 = now_ms();
	int ret, res;

	log_begin(&tl);
	expects_load(o, name, &ex);
	/* Upstream's harness: a fresh allocator for all but the allocator's own tests. */
	if (buddy_reset && !strstr(name, "test_buddy") && run_buddy_reset(why, sizeof(why)))
		res = -1;
	else
		res = run_one(prog, 0, 1, &ret, why, sizeof(why)) ? -1 : 0;
	log_drain(&tl, ring);
	if (st) {
		if (asan_judge(o, st, &tl, has_prefix(name, "asan_test_"), ex.n > 0,
			       res ? why + strlen(why) : why,
			       res ? 0 : sizeof(why)) && !res)
			res = -1;
	}
	if (ex.n && !res && expects_check(&ex, &tl, why, sizeof(why)))
		res = -1;
	expects_free(&ex);
	report(obj, name, res, why, now_ms() - t0);
	log_end(&tl, ring, res < 0 || opt.verbose);
}

struct thread_arg {
	struct bpf_program *prog;
	pthread_barrier_t *barrier;
	int thread, nr_threads, retval, failed;
	char why[256];
};

static void *thread_fn(void *p)
{
	struct thread_arg *a = p;
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(a->thread % opt.nr_cpus, &set);
	sched_setaffinity(0, sizeof(set), &set);
	pthread_barrier_wait(a->barrier);
	a->failed = run_one(a->prog, a->thread, a->nr_threads, &a->retval, a->why,
			    sizeof(a->why));
	return NULL;
}

static struct bpf_program *find_prog(struct bpf_object *o, const char *base, const char *sfx)
{
	char name[256];

	snprintf(name, sizeof(name), "%s__%s", base, sfx);
	return bpf_object__find_program_by_name(o, name);
}

/* The last line the test logged so far (a skip's reason), or "". */
static void last_line(struct test_log *tl, char *buf, size_t len)
{
	const char *end, *start;

	*buf = 0;
	fflush(tl->f);
	if (!tl->buf || !tl->len)
		return;
	end = tl->buf + tl->len;
	while (end > tl->buf && end[-1] == '\n')
		end--;
	for (start = end; start > tl->buf && start[-1] != '\n'; start--)
		;
	snprintf(buf, len, "%.*s", (int)(end - start), start);
}

/* parallel_test_NAME: __enabled?, __init?, __0..__N at once, __fini? */
static void run_parallel(const char *obj, struct bpf_object *o, const char *base,
			 struct arena_log *ring, struct asan_state *st)
{
	struct thread_arg args[MAX_THREADS];
	pthread_t tids[MAX_THREADS];
	pthread_barrier_t barrier;
	struct bpf_program *p;
	char why[256] = "", idx[16];
	struct test_log tl;
	double t0 = now_ms();
	int n, ret = 0, res = 0;

	for (n = 0; n < MAX_THREADS; n++) {
		snprintf(idx, sizeof(idx), "%d", n);
		if (!find_prog(o, base, idx))
			break;
	}
	log_begin(&tl);
	if (!n) {
		snprintf(why, sizeof(why), "no %s__0 program", base);
		res = -1;
		goto out;
	}
	/* Upstream's convention: 0 runs the test, -EOPNOTSUPP skips it, all else fails. */
	p = find_prog(o, base, "enabled");
	if (p) {
		struct arena_test_ctx ctx;
		int err;

		init_ctx(&ctx, 0, n);
		err = libarena_prog_run(p, &ctx, sizeof(ctx), &ret);
		if (err) {
			snprintf(why, sizeof(why), "__enabled: test run failed: %s",
				 strerror(-err));
			res = -1;
			goto out;
		}
		if (ret == -EOPNOTSUPP) {
			char reason[200];

			log_drain(&tl, ring);
			last_line(&tl, reason, sizeof(reason));
			snprintf(why, sizeof(why), "__enabled returned -EOPNOTSUPP%s%s",
				 *reason ? ": " : "", reason);
			res = 1;
			goto out;
		}
		if (ret) {
			snprintf(why, sizeof(why),
				 "__enabled returned %d (0 runs the test, -EOPNOTSUPP skips it)",
				 ret);
			res = -1;
			goto out;
		}
	}
	if (buddy_reset && run_buddy_reset(why, sizeof(why))) {
		res = -1;
		goto out;
	}
	p = find_prog(o, base, "init");
	if (p && run_one(p, 0, n, &ret, why, sizeof(why))) {
		res = -1;
		goto out;
	}
	pthread_barrier_init(&barrier, NULL, n);
	for (int i = 0; i < n; i++) {
		snprintf(idx, sizeof(idx), "%d", i);
		args[i] = (struct thread_arg){ .prog = find_prog(o, base, idx),
					       .barrier = &barrier, .thread = i,
					       .nr_threads = n };
		if (pthread_create(&tids[i], NULL, thread_fn, &args[i])) {
			fprintf(stderr, "runner: pthread_create failed\n");
			exit(2);
		}
	}
	for (int i = 0; i < n; i++) {
		pthread_join(tids[i], NULL);
		if (args[i].failed && !res) {
			snprintf(why, sizeof(why), "%s", args[i].why);
			res = -1;
		}
	}
	pthread_barrier_destroy(&barrier);
	/* Make room: the threads may have filled the ring, and __fini may need to log. */
	log_drain(&tl, ring);
	p = find_prog(o, base, "fini");
	if (p) {
		char fini_why[256];

		if (run_one(p, 0, n, &ret, fini_why, sizeof(fini_why)) && !res) {
			snprintf(why, sizeof(why), "%s", fini_why);
			res = -1;
		}
	}
out:
	log_drain(&tl, ring);
	if (st) {
		if (asan_judge(o, st, &tl, false, false, res ? why + strlen(why) : why,
			       res ? 0 : sizeof(why)) && !res)
			res = -1;
	}
	report(obj, base, res, why, now_ms() - t0);
	log_end(&tl, ring, res < 0 || opt.verbose);
}

/*
 * A rejected program can leave a verifier log of a million lines; the end says why.
 * Show the head and the tail (all of it with LIBARENA_FULL_LOG set).
 */
static void print_msgs(const char *msgs)
{
	enum { HEAD = 40, TAIL = 160 };
	const char *p, *tail;
	int lines = 0, n;

	for (p = msgs; *p; p++)
		lines += *p == '\n';
	if (lines <= HEAD + TAIL || getenv("LIBARENA_FULL_LOG")) {
		printf("%s", msgs);
		return;
	}
	for (p = msgs, n = 0; n < HEAD; p++)
		n += *p == '\n';
	printf("%.*s    [... %d lines of verifier log omitted ...]\n", (int)(p - msgs), msgs,
	       lines - HEAD - TAIL);
	for (tail = msgs + strlen(msgs), n = 0; tail > p; tail--)
		if (tail[-1] == '\n' && ++n > TAIL)
			break;
	printf("%s", tail);
}

/* The name an object's lines carry: its file name without the directory. */
static const char *object_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* An object as load_object() left it: loaded, or why not. */
struct loaded_object {
	const char *path;
	struct bpf_object *obj;	/* NULL when it could not be opened */
	int open_errno;
	int err;		/* of bpf_object__load() */
	const char *msgs;	/* what libbpf and the verifier said */
};

static void load_object(struct loaded_object *lo)
{
	struct bpf_program *prog;

	capture_libbpf();
	lo->obj = bpf_object__open_file(lo->path, NULL);
	if (!lo->obj) {
		lo->open_errno = errno;
		lo->msgs = captured_libbpf();
		return;
	}
	/* A debugging aid: load only the programs whose name has this in it. */
	if (getenv("LIBARENA_LOAD_ONLY"))
		bpf_object__for_each_program(prog, lo->obj)
			bpf_program__set_autoload(prog, !!strstr(bpf_program__name(prog),
								getenv("LIBARENA_LOAD_ONLY")));
	lo->err = bpf_object__load(lo->obj);
	lo->msgs = captured_libbpf();
	/* Another: what the verifier walked of each program (its cost under TCG). */
	if (!lo->err && getenv("LIBARENA_VERIFIED_INSNS"))
		bpf_object__for_each_program(prog, lo->obj) {
			struct bpf_prog_info info = {};
			__u32 len = sizeof(info);

			if (bpf_program__fd(prog) >= 0 &&
			    !bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len))
				printf("runner: %s: %u instructions verified\n",
				       bpf_program__name(prog), info.verified_insns);
		}
}

static void run_object(struct loaded_object *lo)
{
	const char *obj = object_name(lo->path);
	struct bpf_object *o = lo->obj;
	const char *msgs = lo->msgs;
	struct arena_log *ring = NULL;
	struct bpf_program *prog;
	char why[512];
	int err = lo->err;

	if (!o) {
		snprintf(why, sizeof(why), "cannot open: %s", strerror(lo->open_errno));
		report(obj, "open", -1, why, 0);
		return;
	}
	if (opt.expect_fail) {
		bool match = err && strstr(msgs, opt.expect_fail);

		snprintf(why, sizeof(why), err ? "verifier log lacks \"%s\"" :
			 "loaded, but it must be rejected (\"%s\")", opt.expect_fail);
		report(obj, "load_fails", match ? 0 : -1, why, 0);
		/* Show the rejection: this is what a user sees when their program fails. */
		print_msgs(msgs);
		bpf_object__close(o);
		return;
	}
	if (err) {
		snprintf(why, sizeof(why), "load failed: %s; libbpf and verifier output:",
			 strerror(-err));
		report(obj, "load", -1, why, 0);
		print_msgs(msgs);
		bpf_object__close(o);
		return;
	}

	if (bpf_object__find_program_by_name(o, "arena_get_info")) {
		ring = libarena_log(o);
		if (!ring)
			fprintf(stderr, "runner: %s: no log ring: %s\n", obj, strerror(errno));
	}

	struct asan_state *st = NULL;

	buddy_reset = NULL;
	if (opt.upstream || upstream_object(o))
		buddy_reset = bpf_object__find_program_by_name(o, "arena_buddy_reset");

	if (opt.asan && bpf_object__find_program_by_name(o, "asan_init")) {
		st = libarena_asan_start(o, NULL);
		if (!st) {
			snprintf(why, sizeof(why), "asan_init: %s", strerror(errno));
			report(obj, "asan_init", -1, why, 0);
		}
	}

	/*
	 * Objects with the fast allocator get their heaps before any test allocates, with
	 * reserves for tests that build big structures from syscall programs.
	 */
	if (bpf_object__find_program_by_name(o, "arena_heap_refill")) {
		struct arena_heap_refill_args cfg = {
			.reserve_small = 32, .reserve_medium = 8,
			/* The sanitizer's redzones and quarantine hold more large blocks. */
			.reserve_large = opt.asan ? 8 : 4,
		};

		err = libarena_heap_refill(o, &cfg);
		if (err) {
			snprintf(why, sizeof(why), "arena_heap_refill: %s", strerror(-err));
			report(obj, "heap_refill", -1, why, 0);
		}
	}

	int before = tally.passed + tally.failed + tally.skipped;

	bpf_object__for_each_program(prog, o) {
		const char *name = bpf_program__name(prog);
		size_t len = strlen(name);

		if (has_prefix(name, "test_")) {
			if (selected(obj, name))
				run_single(obj, o, prog, ring, st);
		} else if (has_prefix(name, "asan_test_")) {
			if (!selected(obj, name))
				continue;
			if (opt.asan)
				run_single(obj, o, prog, ring, st);
			else
				report(obj, name, 1, "needs the sanitizer build", 0);
		} else if (has_prefix(name, "parallel_test_") && len > 3 &&
			   !strcmp(name + len - 3, "__0")) {
			char base[256];

			snprintf(base, sizeof(base), "%.*s", (int)len - 3, name);
			if (selected(obj, base))
				run_parallel(obj, o, base, ring, st);
		}
	}
	/* An object that holds no test proves nothing: say so, unless a filter chose none. */
	if (tally.passed + tally.failed + tally.skipped == before && !opt.nr_filters)
		report(obj, "tests", -1, "the object holds no test_* or parallel_test_* program",
		       0);
	/* Lines logged outside any test (or after the last drain) are not lost. */
	if (ring)
		libarena_log_print(ring, stdout, stdout);
	bpf_object__close(o);
}

static void tally_add(struct tally *sum, const struct tally *t)
{
	sum->passed += t->passed;
	sum->failed += t->failed;
	sum->skipped += t->skipped;
	sum->seeded += t->seeded;
	sum->seeded_caught += t->seeded_caught;
	sum->asan_reports += t->asan_reports;
}

/* An object's place in the load order. */
struct load_order {
	int index;
	off_t size;
};

/* One object's child: its pid and the two pipes to it. */
struct child {
	pid_t pid;
	int go;		/* parent writes a byte: run the tests now */
	int result;	/* child writes its struct tally, then exits */
};

static void close_child(struct child *c)
{
	if (c->go >= 0)
		close(c->go);
	if (c->result >= 0)
		close(c->result);
	c->go = c->result = -1;
}

/*
 * A child process for the object: it loads the object at once, runs its tests when the
 * parent writes to its go pipe, sends back its tally and exits. A process per object, as
 * every object maps its arena at the same fixed address (ARENA_USER_BASE).
 */
static void start_child(struct child *children, int n, int i, const char *path)
{
	struct child *c = &children[i];
	int go[2], result[2];
	char byte;

	if (pipe(go) || pipe(result)) {
		perror("runner: pipe");
		exit(2);
	}
	fflush(stdout);
	fflush(stderr);
	c->pid = fork();
	if (c->pid < 0) {
		perror("runner: fork");
		exit(2);
	}
	if (c->pid) {
		close(go[0]);
		close(result[1]);
		c->go = go[1];
		c->result = result[0];
		return;
	}
	/* The child: the other children's pipes are not its business. */
	for (int k = 0; k < n; k++)
		if (k != i)
			close_child(&children[k]);
	close(go[1]);
	close(result[0]);
	memset(&tally, 0, sizeof(tally));

	struct loaded_object lo = { .path = path };
	double t0 = now_ms();

	load_object(&lo);
	/* Where a run's time goes: the verifier, under TCG, takes most of it. */
	printf("runner: %s loaded in %.1f s\n", object_name(path), (now_ms() - t0) / 1000);
	fflush(stdout);
	/* Loaded: the parent starts no test while any object still loads. */
	if (write(result[1], "L", 1) == 1 && read(go[0], &byte, 1) == 1)
		run_object(&lo);
	fflush(stdout);
	if (write(result[1], &tally, sizeof(tally)) != sizeof(tally))
		_exit(2);
	_exit(0);
}

/* Every thread's kernel stack of a process: what it waits for. */
static void show_stacks(pid_t pid)
{
	char path[300], line[256];
	struct dirent *d;
	DIR *dir;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/stack", pid, d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		printf("    | process %d, thread %s:\n", pid, d->d_name);
		while (fgets(line, sizeof(line), f))
			printf("    |   %s", line);
		fclose(f);
	}
	closedir(dir);
}

/*
 * Children that gave no sign in time: say so (fmt), show where each one waits, then end
 * them so that the run goes on. The load and the test timeouts both come here.
 */
static __printf(3, 4) void end_stuck(const pid_t *pids, int n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	for (int j = 0; j < n; j++)
		show_stacks(pids[j]);
	for (int j = 0; j < n; j++)
		kill(pids[j], SIGKILL);
}

/*
 * Wait for the child's tally for up to CHILD_WAIT_S. A child that takes longer is stuck:
 * its object loads in two minutes at most, and a test that held a CPU for a minute would
 * have fired the guest's watchdog. Show where it waits and end it, so that the run goes on.
 */
#define CHILD_WAIT_S	1200

static bool child_answers(struct child *c, const char *obj)
{
	struct pollfd pfd = { .fd = c->result, .events = POLLIN };

	if (poll(&pfd, 1, CHILD_WAIT_S * 1000) > 0)
		return true;
	end_stuck(&c->pid, 1, "runner: %s: no result after %d s; its process's kernel stacks:\n",
		  obj, CHILD_WAIT_S);
	return false;
}

/* Largest object first: the verifier's time grows with the code a file holds. */
static int by_size(const void *a, const void *b)
{
	const struct load_order *x = a, *y = b;

	return x->size < y->size ? 1 : x->size > y->size ? -1 : x->index - y->index;
}

/*
 * Wait until one of the loading children says it is loaded (or died loading), for up to
 * CHILD_WAIT_S; its index, or -1 after showing the stuck ones' stacks and ending them.
 */
static int wait_loaded(struct child *children, const bool *loading, int n)
{
	struct pollfd pfd[n];
	int idx[n], m = 0;
	pid_t pids[n];
	char byte;

	for (int k = 0; k < n; k++) {
		if (!loading[k])
			continue;
		pfd[m] = (struct pollfd){ .fd = children[k].result, .events = POLLIN };
		pids[m] = children[k].pid;
		idx[m++] = k;
	}
	if (poll(pfd, m, CHILD_WAIT_S * 1000) <= 0) {
		end_stuck(pids, m,
			  "runner: no object loaded after %d s; the loading processes' stacks:\n",
			  CHILD_WAIT_S);
		return -1;
	}
	for (int j = 0; j < m; j++) {
		if (!pfd[j].revents)
			continue;
		/* One that died loading: its tally's read below says so. */
		(void)!read(children[idx[j]].result, &byte, 1);
		return idx[j];
	}
	return -1;
}

/*
 * Load every object first, opt.jobs at a time, each in its process, the largest first and
 * the next as soon as one is done; then run their tests one object after the other, in
 * the order given, with nothing loading. Under TCG the verifier takes most of a run (two
 * minutes for the heap's tests in the sanitizer build), and the tests have the guest to
 * themselves, as with -j 1. Loading in fixed batches instead waited for each batch's
 * slowest object with a CPU idle.
 */
static void run_objects(char **paths, int n)
{
	struct child *children = calloc(n, sizeof(*children));
	struct load_order *order = calloc(n, sizeof(*order));
	bool *loading = calloc(n, sizeof(*loading));
	int next = 0, busy = 0, done;

	if (!children || !order || !loading) {
		fprintf(stderr, "runner: out of memory\n");
		exit(2);
	}
	for (int i = 0; i < n; i++) {
		struct stat st;

		children[i].go = children[i].result = -1;
		order[i].index = i;
		order[i].size = stat(paths[i], &st) ? 0 : st.st_size;
	}
	qsort(order, n, sizeof(*order), by_size);
	while (next < n || busy) {
		for (; next < n && busy < opt.jobs; next++, busy++) {
			start_child(children, n, order[next].index, paths[order[next].index]);
			loading[order[next].index] = true;
		}
		done = wait_loaded(children, loading, n);
		if (done < 0) {
			/* All that were loading are ended: their tests report them. */
			for (int k = 0; k < n; k++)
				loading[k] = false;
			busy = 0;
			continue;
		}
		loading[done] = false;
		busy--;
	}
	for (int i = 0; i < n; i++) {
		const char *obj = object_name(paths[i]);
		struct tally t = {};
		int status = 0;
		char why[128];

		if (write(children[i].go, "g", 1) != 1 ||
		    !child_answers(&children[i], obj) ||
		    read(children[i].result, &t, sizeof(t)) != sizeof(t)) {
			waitpid(children[i].pid, &status, 0);
			snprintf(why, sizeof(why), "the process that ran its tests died (%s %d)",
				 WIFSIGNALED(status) ? "signal" : "exit status",
				 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
			report(obj, "runner", -1, why, 0);
		} else {
			waitpid(children[i].pid, &status, 0);
		}
		close_child(&children[i]);
		tally_add(&tally, &t);
	}
	free(loading);
	free(order);
	free(children);
}

static void print_usage(void)
{
	fprintf(stderr,
		"usage: runner [-v] [-a] [-u] [-j N] [-s SEED] [-f PATTERN]... [-x TEXT] OBJECT...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	char *env;
	int c;

	opt.seed = time(NULL);
	while ((c = getopt(argc, argv, "vauf:x:s:j:h")) != -1) {
		switch (c) {
		case 'v':
			opt.verbose = true;
			break;
		case 'a':
			opt.asan = true;
			break;
		case 'u':
			opt.upstream = true;
			break;
		case 'x':
			opt.expect_fail = optarg;
			break;
		case 's':
			opt.seed = strtoul(optarg, NULL, 0);
			break;
		case 'j':
			opt.jobs = atoi(optarg);
			break;
		case 'f':
			if (opt.nr_filters < MAX_FILTERS)
				opt.filters[opt.nr_filters++] = optarg;
			break;
		default:
			print_usage();
		}
	}
	if (optind >= argc)
		print_usage();
	env = getenv("LIBARENA_TEST_FILTER");
	if (env && *env) {
		env = strdup(env);
		for (char *s = strtok(env, ","); s && opt.nr_filters < MAX_FILTERS;
		     s = strtok(NULL, ","))
			opt.filters[opt.nr_filters++] = s;
	}
	if (getenv("LIBARENA_VERBOSE"))
		opt.verbose = true;
	opt.nr_cpus = sysconf(_SC_NPROCESSORS_ONLN);
	if (opt.nr_cpus < 1)
		opt.nr_cpus = 1;
	if (opt.jobs < 1)
		opt.jobs = opt.nr_cpus;
	/* A child that died before its turn must not take the parent with it. */
	signal(SIGPIPE, SIG_IGN);
	libbpf_set_print(libbpf_print);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("runner: %d CPUs, seed %u\n", opt.nr_cpus, opt.seed);

	run_objects(argv + optind, argc - optind);

	if (opt.asan)
		printf("asan: %d reports; seeded bugs caught: %d of %d\n", tally.asan_reports,
		       tally.seeded_caught, tally.seeded);
	printf("%d passed, %d failed", tally.passed, tally.failed);
	if (tally.skipped)
		printf(", %d skipped", tally.skipped);
	printf("\n");
	return tally.failed ? 1 : 0;
}
