// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * verifier-cost: what the verifier does with each program of a linked object, in the VM.
 *
 *   verifier-cost [-j N] [-l] [-p PREFIX] [-P N] [-V] [-T N] OBJECT...
 *
 * Loads each program of each object through the real verifier, one at a time and alone
 * (with the functions it calls, as a loader that loads only it would), and prints a line:
 *
 *   cost OBJECT PROGRAM INSNS PEAK_STATES TOTAL_STATES
 *   fail OBJECT PROGRAM          (and the end of the verifier's log on stderr)
 *
 * INSNS is the kernel's own count of the instructions it walked (bpf_prog_info's
 * verified_insns), the states come from its statistics (log level 4). Both are
 * deterministic for a given object and kernel. With -p only the programs whose name
 * starts with PREFIX are loaded.
 *
 * -P N profiles each program instead (a slow log of every step): the N source lines the
 * verifier walked most, with the global function it was validating, to show where a
 * program's cost goes.
 *
 * -V prints that log whole instead. -j N loads N programs at once (one a vCPU).
 *
 * -T N loads each object whole N times instead, as its loader would, and prints
 *   loadtime OBJECT MEDIAN_MS MIN_MS
 *
 * -l adds what survived of each function after the verifier removed the code it never
 * walked (6.12 removes it from privileged programs): for all the programs together,
 *
 *   func OBJECT FUNCTION             a function present in a loaded program
 *   line OBJECT FUNCTION LINE FILE<tab>TEXT   a source line of it with an instruction left
 *
 * scripts/verifier-budget compares that with the object's own line info to find lines
 * the verifier dropped as dead. Exits 1 when a program does not load.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#define STATS_LOG_SIZE	4096
#define USAGE	"usage: verifier-cost [-j N] [-l] [-p PREFIX] [-P N] [-V] [-T N] OBJECT...\n"

static const char *prefix;
static bool want_lines;
static int profile;		/* -P N: the N source lines walked most */
static bool raw_log;		/* -V: the whole level-2 log, for a person to read */
static int load_rounds;		/* -T N: time N loads of each object whole */
static int jobs = 1;		/* -j N: programs loading at once */

/* A surviving (function, file, line), as printed; sorted and made unique at the end. */
static char **seen;
static size_t nr_seen, cap_seen;

static void keep(char *s)
{
	if (!s) {
		perror("verifier-cost");
		exit(2);
	}
	if (nr_seen == cap_seen) {
		cap_seen = cap_seen ? 2 * cap_seen : 4096;
		seen = realloc(seen, cap_seen * sizeof(*seen));
		if (!seen) {
			perror("verifier-cost");
			exit(2);
		}
	}
	seen[nr_seen++] = s;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The -l records kept so far, sorted, each once. */
static void flush_seen(void)
{
	size_t i;

	qsort(seen, nr_seen, sizeof(*seen), cmp_str);
	for (i = 0; i < nr_seen; i++) {
		if (!i || strcmp(seen[i], seen[i - 1]))
			printf("%s\n", seen[i]);
		free(seen[i]);
	}
	free(seen);
	seen = NULL;
	nr_seen = cap_seen = 0;
	fflush(stdout);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

static long stat_of(const char *log, const char *name)
{
	const char *p = log ? strstr(log, name) : NULL;

	return p ? strtol(p + strlen(name), NULL, 10) : -1;
}

/* The functions and the lines the loaded program kept. */
static int collect_lines(const char *obj, int fd)
{
	struct bpf_prog_info info = {};
	struct bpf_func_info *funcs;
	struct bpf_line_info *lines;
	__u32 len = sizeof(info), nr_funcs, nr_lines, i, f;
	struct btf *btf;
	char *s;
	int err;

	if (bpf_prog_get_info_by_fd(fd, &info, &len))
		return -errno;
	nr_funcs = info.nr_func_info;
	nr_lines = info.nr_line_info;
	if (!nr_funcs || !nr_lines || !info.btf_id)
		return 0;
	funcs = calloc(nr_funcs, sizeof(*funcs));
	lines = calloc(nr_lines, sizeof(*lines));
	if (!funcs || !lines)
		return -ENOMEM;
	memset(&info, 0, sizeof(info));
	info.nr_func_info = nr_funcs;
	info.func_info_rec_size = sizeof(*funcs);
	info.func_info = (__u64)(unsigned long)funcs;
	info.nr_line_info = nr_lines;
	info.line_info_rec_size = sizeof(*lines);
	info.line_info = (__u64)(unsigned long)lines;
	len = sizeof(info);
	err = bpf_prog_get_info_by_fd(fd, &info, &len) ? -errno : 0;
	btf = err ? NULL : btf__load_from_kernel_by_id(info.btf_id);
	if (!err && !btf)
		err = -errno;
	for (i = 0, f = 0; !err && i < nr_lines; i++) {
		const struct btf_type *t;
		const char *line;

		while (f + 1 < nr_funcs && funcs[f + 1].insn_off <= lines[i].insn_off)
			f++;
		t = btf__type_by_id(btf, funcs[f].type_id);
		line = btf__str_by_offset(btf, lines[i].line_off);
		if (!t || !line)
			continue;
		if (asprintf(&s, "line %s %s %u %s\t%s", obj,
			     btf__name_by_offset(btf, t->name_off),
			     BPF_LINE_INFO_LINE_NUM(lines[i].line_col),
			     btf__str_by_offset(btf, lines[i].file_name_off), line) < 0)
			s = NULL;
		keep(s);
	}
	for (f = 0; !err && f < nr_funcs; f++) {
		const struct btf_type *t = btf__type_by_id(btf, funcs[f].type_id);

		if (!t)
			continue;
		if (asprintf(&s, "func %s %s", obj, btf__name_by_offset(btf, t->name_off)) < 0)
			s = NULL;
		keep(s);
	}
	btf__free(btf);
	free(funcs);
	free(lines);
	return err;
}

/* One source line of a verifier log and how often the verifier walked its code. */
struct walked {
	char *where;		/* the log's "; text @ file:line" comment */
	char *section;		/* the global function being validated, or the program */
	long count;
};

static int cmp_walked(const void *a, const void *b)
{
	const struct walked *x = a, *y = b;

	return (y->count > x->count) - (y->count < x->count);
}

/*
 * A level-2 log prints each instruction the verifier walks ("N: (op) ..."), after a
 * comment naming its source line when that changed since the last one printed, and
 * "Validating F() func#N..." at the start of each global function. Count the walks per
 * instruction, name each instruction by the comment printed right before it (or before
 * the closest instruction above it that had one), and sum per source line.
 */
static void print_profile(const char *obj, const char *name, char *log)
{
	char *line, *save, *last = NULL, *section = strdup(name);
	char **where = NULL, **sect = NULL;
	long *count = NULL, total = 0;
	struct walked *w = NULL;
	size_t nr = 0, cap = 0, len = 0, i, j;

	for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *end;
		long idx;

		if (!strncmp(line, "Validating ", 11)) {
			free(section);
			section = strndup(line + 11, strcspn(line + 11, "("));
			last = NULL;
			continue;
		}
		if (line[0] == ';') {
			last = line + 2;
			continue;
		}
		idx = strtol(line, &end, 10);
		if (end == line || strncmp(end, ": (", 3) || idx < 0) {
			last = NULL;
			continue;
		}
		if ((size_t)idx >= len) {
			size_t n = (idx + 1) * 2;

			count = realloc(count, n * sizeof(*count));
			where = realloc(where, n * sizeof(*where));
			sect = realloc(sect, n * sizeof(*sect));
			memset(count + len, 0, (n - len) * sizeof(*count));
			memset(where + len, 0, (n - len) * sizeof(*where));
			memset(sect + len, 0, (n - len) * sizeof(*sect));
			len = n;
		}
		count[idx]++;
		total++;
		if (last && !where[idx])
			where[idx] = strdup(last);
		if (!sect[idx])
			sect[idx] = strdup(section);
		last = NULL;
	}
	/* Per source line: each instruction named by the comment above it. */
	for (i = 0, last = NULL; i < len; i++) {
		if (where[i])
			last = where[i];
		if (!count[i] || !last)
			continue;
		for (j = 0; j < nr; j++)
			if (!strcmp(w[j].where, last) && !strcmp(w[j].section, sect[i]))
				break;
		if (j == nr) {
			if (nr == cap) {
				cap = cap ? 2 * cap : 1024;
				w = realloc(w, cap * sizeof(*w));
			}
			w[nr++] = (struct walked){ last, sect[i], 0 };
		}
		w[j].count += count[i];
	}
	qsort(w, nr, sizeof(*w), cmp_walked);
	printf("profile %s %s: %ld instructions walked in the log\n", obj, name, total);
	/* Per function validated: the first line of each section in w sums it. */
	for (i = 0; i < nr; i++) {
		long sum = 0;

		for (j = 0; j < i && strcmp(w[j].section, w[i].section); j++)
			;
		if (j < i)
			continue;
		for (j = i; j < nr; j++)
			if (!strcmp(w[j].section, w[i].section))
				sum += w[j].count;
		printf("  %8ld  in %s\n", sum, w[i].section);
	}
	for (i = 0; i < nr && (int)i < profile; i++)
		printf("  %8ld  [%s] %s\n", w[i].count, w[i].section, w[i].where);
	for (i = 0; i < len; i++) {
		free(where[i]);
		free(sect[i]);
	}
	free(where);
	free(sect);
	free(count);
	free(w);
	free(section);
}

/* The last lines of a log: why a program was refused. */
static void print_tail(const char *log, int lines)
{
	const char *p = log + strlen(log);

	while (p > log && lines >= 0)
		if (*--p == '\n')
			lines--;
	fprintf(stderr, "%s\n", p);
}

/*
 * Load one program of the object (and what it calls), alone: a program that fails does
 * not hide the others, and nothing else loads with it. 0, or -1 when it failed.
 */
static int cost_program(const char *path, const char *name, int level)
{
	size_t size = level & 2 ? (1u << 29) - 1 : level > 4 ? 16 << 20 : STATS_LOG_SIZE;
	const char *obj = base_name(path);
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);
	struct bpf_program *prog;
	struct bpf_object *o;
	char *log;
	int err;

	o = bpf_object__open_file(path, NULL);
	log = calloc(1, size);
	if (!o || !log) {
		fprintf(stderr, "verifier-cost: %s: cannot open: %s\n", obj, strerror(errno));
		return -1;
	}
	bpf_object__for_each_program(prog, o)
		bpf_program__set_autoload(prog, !strcmp(bpf_program__name(prog), name));
	prog = bpf_object__find_program_by_name(o, name);
	bpf_program__set_log_buf(prog, log, size);
	/* 4: the statistics only; a refused program is loaded again for its whole log. */
	bpf_program__set_log_level(prog, level);
	err = bpf_object__load(o);
	if (err && level == 4 && !profile) {
		bpf_object__close(o);
		free(log);
		return cost_program(path, name, 1 | 4);
	}
	if (err) {
		printf("fail %s %s\n", obj, name);
		fprintf(stderr, "verifier-cost: %s: %s: load failed: %s; %s:\n", obj, name,
			strerror(-err), raw_log ? "the verifier's log" : "the verifier's log ends");
		if (raw_log)
			fputs(log, stdout);
		else
			print_tail(log, 30);
		if (profile)
			print_profile(obj, name, log);
	} else if (!bpf_prog_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
		printf("cost %s %s %u %ld %ld\n", obj, name, info.verified_insns,
		       stat_of(log, "peak_states "), stat_of(log, "total_states "));
		if (raw_log)
			fputs(log, stdout);
		if (profile)
			print_profile(obj, name, log);
		if (want_lines && collect_lines(obj, bpf_program__fd(prog)))
			fprintf(stderr, "verifier-cost: %s: %s: no line info: %s\n", obj, name,
				strerror(errno));
	}
	fflush(stdout);
	bpf_object__close(o);
	free(log);
	return err ? -1 : 0;
}

/* An unnamed file in $TMPDIR (tmpfile() uses /tmp, read-only in the guest). */
static FILE *scratch_file(void)
{
	const char *dir = getenv("TMPDIR");
	char path[4096];
	int fd;

	snprintf(path, sizeof(path), "%s/verifier-cost.XXXXXX", dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return NULL;
	unlink(path);
	return fdopen(fd, "w+");
}

/*
 * Load programs [k], [k + jobs], ... in child k, jobs at once (the VM's vCPUs), each
 * child's lines into a file of its own, printed in order once all are done: 0, or 1
 * when a program failed.
 */
static int run_programs(const char *path, char **names, int n)
{
	int failed = 0, k, i, status, level = profile || raw_log ? 2 | 4 : 4;
	FILE *out[16];
	pid_t pid[16];
	char buf[4096];
	size_t len;

	if (jobs <= 1 || profile || raw_log) {
		for (i = 0; i < n; i++)
			failed |= cost_program(path, names[i], level) < 0;
		return failed;
	}
	if (jobs > 16)
		jobs = 16;
	fflush(stdout);
	for (k = 0; k < jobs; k++) {
		out[k] = scratch_file();
		if (!out[k]) {
			perror("verifier-cost: a scratch file in $TMPDIR");
			return 1;
		}
		pid[k] = fork();
		if (pid[k] < 0) {
			perror("verifier-cost: fork");
			return 1;
		}
		if (!pid[k]) {
			if (dup2(fileno(out[k]), STDOUT_FILENO) < 0)
				_exit(2);
			for (i = k; i < n; i += jobs)
				failed |= cost_program(path, names[i], level) < 0;
			flush_seen();
			_exit(failed);
		}
	}
	for (k = 0; k < jobs; k++) {
		if (waitpid(pid[k], &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			failed = 1;
		rewind(out[k]);
		while ((len = fread(buf, 1, sizeof(buf), out[k])) > 0)
			fwrite(buf, 1, len, stdout);
		fclose(out[k]);
	}
	fflush(stdout);
	return failed;
}

static int cost_object(const char *path)
{
	struct bpf_program *prog;
	struct bpf_object *o;
	int failed = 0, n = 0, i;
	char **names;

	o = bpf_object__open_file(path, NULL);
	if (!o) {
		fprintf(stderr, "verifier-cost: %s: cannot open: %s\n", base_name(path),
			strerror(errno));
		return -1;
	}
	bpf_object__for_each_program(prog, o)
		n++;
	names = calloc(n, sizeof(*names));
	if (!names)
		return -1;
	n = 0;
	bpf_object__for_each_program(prog, o)
		if (!prefix || !strncmp(bpf_program__name(prog), prefix, strlen(prefix)))
			names[n++] = strdup(bpf_program__name(prog));
	bpf_object__close(o);
	failed = run_programs(path, names, n);
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return failed ? -1 : 0;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/*
 * Load the object whole, as its loader would (every program, its maps), rounds times:
 * "loadtime OBJECT MEDIAN_MS MIN_MS". What a program costs its user in load time.
 */
static int time_object(const char *path, int rounds)
{
	double t[16], t0;
	struct bpf_object *o;
	int i, err;

	if (rounds > 16)
		rounds = 16;
	for (i = 0; i < rounds; i++) {
		o = bpf_object__open_file(path, NULL);
		if (!o) {
			fprintf(stderr, "verifier-cost: %s: cannot open: %s\n", base_name(path),
				strerror(errno));
			return -1;
		}
		t0 = now_ms();
		err = bpf_object__load(o);
		t[i] = now_ms() - t0;
		bpf_object__close(o);
		if (err) {
			fprintf(stderr, "verifier-cost: %s: load failed: %s\n", base_name(path),
				strerror(-err));
			return -1;
		}
	}
	qsort(t, rounds, sizeof(t[0]), cmp_double);
	printf("loadtime %s %.0f %.0f\n", base_name(path), t[rounds / 2], t[0]);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	int c, failed = 0;

	while ((c = getopt(argc, argv, "lp:P:VT:j:")) != -1) {
		switch (c) {
		case 'l':
			want_lines = true;
			break;
		case 'p':
			prefix = optarg;
			break;
		case 'P':
			profile = atoi(optarg);
			break;
		case 'V':
			raw_log = true;
			break;
		case 'T':
			load_rounds = atoi(optarg);
			break;
		case 'j':
			jobs = atoi(optarg);
			break;
		default:
			fputs(USAGE, stderr);
			return 2;
		}
	}
	if (optind == argc) {
		fputs(USAGE, stderr);
		return 2;
	}
	/* Our own lines say what failed, with the end of the log. */
	libbpf_set_print(NULL);
	for (; optind < argc; optind++) {
		if (load_rounds > 0) {
			failed |= time_object(argv[optind], load_rounds) < 0;
			continue;
		}
		failed |= cost_object(argv[optind]) < 0;
		fflush(stdout);
	}
	flush_seen();
	return failed;
}
