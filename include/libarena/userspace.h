/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena user-space helpers: link with libarena_user.a and libbpf.
 *
 *   libarena_get_info(obj, &info)        run the arena_get_info program of a loaded object
 *   libarena_log(obj)                    the object's log ring, mapped in this process
 *   libarena_log_drain(log, fn, ctx)     hand each complete line to fn, oldest first
 *   libarena_log_print(log, out, err)    drain to two FILEs, and report dropped lines
 *   libarena_prog_run(prog, arg, size, &ret)  run a SEC("syscall") program: its result
 *                                        in ret, 0 or a run's error
 *   libarena_buddy(obj)                  the default allocator (struct buddy), mapped here
 *   libarena_buddy_stats_print(b, out)   its statistics, one line per order in use
 *   libarena_heap_refill(obj, cfg)       create the fast allocator's heaps, fill reserves
 *   libarena_heap_collect(obj)           collect remote frees on every CPU
 *   libarena_heap(obj)                   the fast allocator's global state, mapped here
 *   libarena_heap_totals(g, &stats)      its per-heap statistics summed
 *   libarena_heap_stats_print(g, out)    and printed
 *   libarena_asan_start(obj, args)       sanitizer build: options, the report state
 *   libarena_asan_print(obj, st, out)    print the sanitizer's new reports
 *   libarena_asan_where_fd(fd, name, ip, buf, len)  a JIT-ed address's program, function
 *                                        and line, from one program fd (arena-top)
 *   libarena_stderr_match(msgs, n, text) match __stderr() expectations against output
 *
 * and the calls of the upstream libarena's harness (tools/testing/selftests/bpf/libarena
 * in 7.x trees), same names, arguments and results, on program fds:
 *
 *   libarena_run_prog(fd)                     test-run a program: run error ?: retval
 *   libarena_run_prog_args(fd, args, size)    the same with args as its context
 *   libarena_is_test_prog(name)               "test_*"
 *   libarena_is_asan_test_prog(name)          "asan_test*"
 *   libarena_is_parallel_test_prog(name)      "parallel_test*"
 *   libarena_get_arena_base(info_fd, &base)   the arena's user address (arena_get_info)
 *   libarena_get_globals_pages(info_fd, all, &pages)  pages the arena globals take
 *   libarena_asan_init(info_fd, init_fd, all) start the sanitizer (asan_init)
 *
 * Errors of our calls are negative errno values; the upstream calls return what
 * upstream's do (a run's error, else the program's return value). Nothing here prints
 * unless asked to.
 */
#ifndef __LIBARENA_USERSPACE_H
#define __LIBARENA_USERSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/alloc_types.h>
#include <libarena/asan.h>

struct bpf_object;
struct bpf_program;

/* One line drained from the log. text is NUL-terminated and valid during the call. */
struct libarena_log_line {
	const char *text;
	unsigned int len;
	int stream;		/* ARENA_LOG_STDOUT or ARENA_LOG_STDERR */
	unsigned int cpu;
};

typedef int (*libarena_log_fn)(const struct libarena_log_line *line, void *ctx);

/*
 * Run a SEC("syscall") program once with arg (may be NULL) as its context; the program's
 * writes to arg are copied back. Returns 0 and the program's return value in *retval,
 * or a negative errno when the run itself failed.
 */
int libarena_prog_run(struct bpf_program *prog, void *arg, size_t size, int *retval);

/*
 * The upstream harness's calls. A run that fails returns its (negative) error, else the
 * program's return value is returned.
 */
int libarena_run_prog(int prog_fd);
int libarena_run_prog_args(int prog_fd, void *args, size_t argsize);

/* What the upstream runner runs: test_*, asan_test*, parallel_test*. */
bool libarena_is_test_prog(const char *name);
bool libarena_is_asan_test_prog(const char *name);
bool libarena_is_parallel_test_prog(const char *name);

/* Run the arena_get_info program whose fd is given; *arena_base: the arena's address. */
int libarena_get_arena_base(int arena_get_info_fd, void **arena_base);

/*
 * The number of arena pages the object's arena globals take. Upstream (7.x libbpf puts
 * the globals at the arena's end) counts resident pages back from the end with
 * mincore(); here (6.12's libbpf puts them at offset 0) it is the size of the object's
 * arena section (DATASEC ".addr_space.1" in the program's BTF, what libbpf copies into
 * the arena) in pages, which does not change when more pages are touched. The program
 * of arena_get_info_fd must come from the object (any of its programs would do).
 * arena_all_pages bounds the result. 0 or a negative error.
 */
int libarena_get_globals_pages(int arena_get_info_fd, size_t arena_all_pages,
			       u64 *globals_pages);

/* Fill info from the loaded object's arena_get_info program. */
int libarena_get_info(struct bpf_object *obj, struct arena_get_info_args *info);

/* The log ring of a loaded object that links the library, or NULL (errno set). */
struct arena_log *libarena_log(struct bpf_object *obj);

/*
 * Consume every complete line, oldest first, calling fn for each; a non-zero return from
 * fn stops the drain (the line counts as consumed). Stops at a line still being written.
 * Returns the number of lines consumed or a negative errno (-EUCLEAN when the ring is
 * corrupted; the reader then skips to the writers' position). *dropped, if not NULL,
 * receives how many lines writers dropped since the previous call.
 */
int libarena_log_drain(struct arena_log *log, libarena_log_fn fn, void *ctx,
		       unsigned long long *dropped);

/*
 * Drain to out (stdout stream) and err (stderr stream), one line each, and write a line
 * "libarena: N log lines dropped" to err when writers dropped some.
 */
int libarena_log_print(struct arena_log *log, FILE *out, FILE *err);

/*
 * The default allocator of a loaded object (what arena_malloc() uses), read in place
 * through the arena mapping; NULL (errno set) when the object does not link the library.
 * Its statistics are plain memory the BPF side updates: copy them to look at one moment.
 */
struct buddy *libarena_buddy(struct bpf_object *obj);

/* Print b's statistics: totals, then blocks and bytes per order in use. */
int libarena_buddy_stats_print(const struct buddy *b, FILE *out);

/*
 * Run the object's arena_heap_refill program: create a heap per CPU (and nesting level),
 * fill their span reserves and arm the background refill. cfg may be NULL: every
 * possible CPU and the default reserves. Run it after loading, before programs call
 * arena_malloc(); 0 or -errno.
 */
int libarena_heap_refill(struct bpf_object *obj, const struct arena_heap_refill_args *cfg);

/* Run arena_heap_collect on each online CPU in turn; the spans retired, or -errno. */
int libarena_heap_collect(struct bpf_object *obj);

/* The fast allocator's global state, read in place; NULL (errno set) without one. */
struct arena_heap_global *libarena_heap(struct bpf_object *obj);

/* Sum the statistics of every heap; the number of heaps, or -errno. */
int libarena_heap_totals(const struct arena_heap_global *g, struct arena_heap_stats *sum);

/* Print the allocator's state and summed statistics. */
int libarena_heap_stats_print(const struct arena_heap_global *g, FILE *out);

/*
 * The sanitizer build (libarena_asan.bpf.o). Run the object's asan_init program with
 * args (NULL: defaults; report_first, quarantine) and return its report state, read in
 * place, or NULL (errno set; ENOENT: not the sanitizer build).
 */
struct asan_state *libarena_asan_start(struct bpf_object *obj, struct asan_init_args *args);

/*
 * Upstream's: run asan_init (asan_init_fd) with arena_all_pages and the pages of the
 * arena globals, found through arena_asan_init_fd (an arena_get_info program, see
 * libarena_get_globals_pages()); every other option at its default. Returns the run's
 * error or asan_init's return value. The report state: libarena_asan_start(obj, NULL)
 * again, or the state field asan_init writes back (struct asan_init_args).
 */
int libarena_asan_init(int arena_asan_init_fd, int asan_init_fd, size_t arena_all_pages);

/*
 * Print the reports made since the last call, each as a line naming the kind, the
 * access, the address and its block, then a line naming the program, the function and
 * the source line (from the loaded programs' jited line info), then the lines the
 * upstream sanitizer prints, for tests that expect them:
 *
 *   Memory violation for address 0x<hex> for <read|write> of size <n>   (not for frees)
 *   CPU: <cpu> UID: <uid> PID: <thread id> Comm: <comm>
 *   Call trace:
 *   <tab>PROG:FUNC+0xOFF (FILE:LINE)
 *
 * Returns how many were printed (reports beyond the ASAN_MAX_REPORTS kept are counted
 * in a line of their own).
 */
int libarena_asan_print(struct bpf_object *obj, struct asan_state *st, FILE *out);

/*
 * Match expected stderr messages (the __stderr() tags of a test, in source order)
 * against what the test wrote to stderr. Each message is literal text except for
 * {{...}} parts, which are POSIX extended regular expressions; message k must match
 * after the end of message k-1's match. Returns 0 when all match, k (1-based) when
 * message k did not, -EINVAL when a message is not a valid pattern (*bad = its index).
 */
int libarena_stderr_match(const char *const *msgs, int n, const char *text, int *bad);

/* Format one report's first line into buf (what libarena_asan_print prints first). */
int libarena_asan_describe(const struct asan_report *r, char *buf, size_t len);

/*
 * Where a JIT-ed address lies: "PROG:FUNC+0xOFF (FILE:LINE)" into buf, from the object's
 * loaded programs. 0, or -ENOENT when no program of obj holds it.
 */
int libarena_asan_where(struct bpf_object *obj, u64 ip, char *buf, size_t len);

/* The same from one loaded program (a program fd and its name), of any process. */
int libarena_asan_where_fd(int prog_fd, const char *prog_name, u64 ip, char *buf, size_t len);

#endif /* __LIBARENA_USERSPACE_H */
