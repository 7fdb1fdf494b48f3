// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* libarena user-space helpers: program runs, arena info and the log reader. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <unistd.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>

int libarena_prog_run(struct bpf_program *prog, void *arg, size_t size, int *retval)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts,
		.ctx_in = arg,
		.ctx_size_in = arg ? size : 0,
	);
	int fd, err;

	if (!prog)
		return -EINVAL;
	fd = bpf_program__fd(prog);
	if (fd < 0)
		return -EBADF;
	err = bpf_prog_test_run_opts(fd, &opts);
	if (err)
		return -errno;
	if (retval)
		*retval = (int)opts.retval;
	return 0;
}

int libarena_run_prog_args(int prog_fd, void *args, size_t argsize)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts,
		.ctx_in = args,
		.ctx_size_in = args ? argsize : 0,
	);
	int err;

	err = bpf_prog_test_run_opts(prog_fd, &opts);
	return err ? err : (int)opts.retval;
}

int libarena_run_prog(int prog_fd)
{
	return libarena_run_prog_args(prog_fd, NULL, 0);
}

static bool starts_with(const char *s, const char *prefix)
{
	return s && !strncmp(s, prefix, strlen(prefix));
}

bool libarena_is_test_prog(const char *name)
{
	return starts_with(name, "test_");
}

bool libarena_is_asan_test_prog(const char *name)
{
	return starts_with(name, "asan_test");
}

bool libarena_is_parallel_test_prog(const char *name)
{
	return starts_with(name, "parallel_test");
}

int libarena_get_arena_base(int arena_get_info_fd, void **arena_base)
{
	struct arena_get_info_args info = {};
	int ret;

	ret = libarena_run_prog_args(arena_get_info_fd, &info, sizeof(info));
	if (ret)
		return ret;
	*arena_base = (void *)(uintptr_t)info.arena_base;
	return 0;
}

/*
 * Bytes of arena globals in the object a program comes from: libbpf copies the ELF
 * section .addr_space.1 into the arena (at offset 0 with 6.12's libbpf), and the BTF it
 * loads with the object describes that section with a DATASEC of the section's size.
 */
static int arena_globals_size(int prog_fd, u64 *size)
{
	struct bpf_prog_info info = {};
	u32 len = sizeof(info), id, n;
	struct btf *btf;
	int err = -ENOENT;

	if (bpf_prog_get_info_by_fd(prog_fd, &info, &len))
		return -errno;
	*size = 0;
	if (!info.btf_id)
		return -ENOENT;
	btf = btf__load_from_kernel_by_id(info.btf_id);
	if (!btf)
		return -errno;
	n = btf__type_cnt(btf);
	for (id = 1; id < n; id++) {
		const struct btf_type *t = btf__type_by_id(btf, id);
		const char *name;

		if (!btf_is_datasec(t))
			continue;
		name = btf__name_by_offset(btf, t->name_off);
		if (name && !strcmp(name, ".addr_space.1")) {
			*size = t->size;
			err = 0;
			break;
		}
	}
	btf__free(btf);
	/* An object without arena globals has none to count. */
	return err == -ENOENT ? 0 : err;
}

int libarena_get_globals_pages(int arena_get_info_fd, size_t arena_all_pages,
			       u64 *globals_pages)
{
	long page = sysconf(_SC_PAGESIZE);
	u64 size, pages;
	int err;

	if (!globals_pages)
		return -EINVAL;
	err = arena_globals_size(arena_get_info_fd, &size);
	if (err)
		return err;
	pages = (size + page - 1) / page;
	if (arena_all_pages && pages > arena_all_pages)
		return -E2BIG;
	*globals_pages = pages;
	return 0;
}

int libarena_get_info(struct bpf_object *obj, struct arena_get_info_args *info)
{
	struct bpf_program *prog;
	int err, ret;

	prog = bpf_object__find_program_by_name(obj, "arena_get_info");
	if (!prog)
		return -ENOENT;
	memset(info, 0, sizeof(*info));
	err = libarena_prog_run(prog, info, sizeof(*info), &ret);
	if (err)
		return err;
	return ret;
}

/* One address arena_get_info reports, or NULL with errno set. */
static void *info_addr(struct bpf_object *obj, size_t field)
{
	struct arena_get_info_args info;
	u64 addr;
	int err;

	err = libarena_get_info(obj, &info);
	if (err) {
		errno = -err;
		return NULL;
	}
	memcpy(&addr, (char *)&info + field, sizeof(addr));
	if (!addr)
		errno = ENOENT;
	return (void *)(uintptr_t)addr;
}

struct arena_log *libarena_log(struct bpf_object *obj)
{
	return info_addr(obj, offsetof(struct arena_get_info_args, log));
}

struct buddy *libarena_buddy(struct bpf_object *obj)
{
	return info_addr(obj, offsetof(struct arena_get_info_args, buddy));
}

int libarena_buddy_stats_print(const struct buddy *b, FILE *out)
{
	unsigned long long blocks = 0, bytes = 0, cached[BUDDY_ORDERS] = {}, in_cache = 0;
	struct buddy_stats st;

	if (!b || !out)
		return -EINVAL;
	memcpy(&st, (const void *)&b->stats, sizeof(st));
	/* The CPUs' caches, read as they are: exact while nobody allocates or frees. */
	for (int c = 0; c < BUDDY_CACHE_CPUS; c++)
		for (int o = 0; o < BUDDY_CACHE_ORDERS; o++)
			cached[o] += READ_ONCE(b->cache[c].nr[o]);
	for (int o = 0; o < BUDDY_ORDERS; o++) {
		if (cached[o] > st.blocks_in_use[o])
			cached[o] = st.blocks_in_use[o];
		st.blocks_in_use[o] -= cached[o];
		in_cache += cached[o];
		blocks += st.blocks_in_use[o];
		bytes += (unsigned long long)st.blocks_in_use[o] << (o + BUDDY_MIN_SHIFT);
	}
	fprintf(out,
		"buddy %s: %llu blocks (%llu bytes) in use, %llu in the CPUs' caches, %llu page runs (%llu pages)\n",
		b->magic == BUDDY_MAGIC ? "ready" : "not initialised", blocks, bytes, in_cache,
		(unsigned long long)st.runs_in_use, (unsigned long long)st.run_pages_in_use);
	fprintf(out,
		"  chunks: %llu held (%llu spare), %llu returned; pages: %llu mapped in %llu calls, %llu returned in %llu calls\n",
		(unsigned long long)st.chunks_held, (unsigned long long)st.chunks_spare,
		(unsigned long long)st.chunks_returned, (unsigned long long)st.map_pages,
		(unsigned long long)st.map_calls, (unsigned long long)st.pages_returned,
		(unsigned long long)st.unmap_calls);
	fprintf(out,
		"  calls: %llu allocs, %llu frees, %llu failed, %llu bad, %llu lock timeouts (%llu frees deferred), %llu corruptions\n",
		(unsigned long long)st.allocs, (unsigned long long)st.frees,
		(unsigned long long)st.failed_allocs, (unsigned long long)st.bad_calls,
		(unsigned long long)st.lock_timeouts, (unsigned long long)st.deferred_frees,
		(unsigned long long)st.corruptions);
	fprintf(out,
		"  merging: %llu frees left a pair of buddies apart, %llu passes merged them; CPU caches: %llu batches taken, %llu given back\n",
		(unsigned long long)st.lazy_frees, (unsigned long long)st.coalesces,
		(unsigned long long)st.cache_refills, (unsigned long long)st.cache_spills);
	for (int o = 0; o < BUDDY_ORDERS; o++)
		if (st.blocks_in_use[o] || cached[o])
			fprintf(out, "  order %2d (%6u B): %llu blocks, %llu bytes; %llu cached\n",
				o, BUDDY_MIN_SIZE << o, (unsigned long long)st.blocks_in_use[o],
				(unsigned long long)st.blocks_in_use[o] << (o + BUDDY_MIN_SHIFT),
				cached[o]);
	return 0;
}

int libarena_heap_refill(struct bpf_object *obj, const struct arena_heap_refill_args *cfg)
{
	struct arena_heap_refill_args args = {};
	struct bpf_program *prog;
	int err, ret, n;
	u64 pages;

	prog = bpf_object__find_program_by_name(obj, "arena_heap_refill");
	if (!prog)
		return -ENOENT;
	if (cfg)
		args = *cfg;
	/*
	 * For the sanitizer build: the shadow of every global mapped, not only the first
	 * pages. An object whose BTF does not say keeps the default.
	 */
	if (!args.globals_pages &&
	    !libarena_get_globals_pages(bpf_program__fd(prog), 0, &pages))
		args.globals_pages = pages;
	if (!args.nr_cpus) {
		n = libbpf_num_possible_cpus();
		if (n < 0)
			return n;
		args.nr_cpus = n;
	}
	err = libarena_prog_run(prog, &args, sizeof(args), &ret);
	return err ? err : ret;
}

int libarena_heap_collect(struct bpf_object *obj)
{
	struct bpf_program *prog;
	cpu_set_t old, one;
	int cpu, n, err = 0, total = 0, ret;

	prog = bpf_object__find_program_by_name(obj, "arena_heap_collect");
	if (!prog)
		return -ENOENT;
	if (sched_getaffinity(0, sizeof(old), &old))
		return -errno;
	n = sysconf(_SC_NPROCESSORS_CONF);
	for (cpu = 0; cpu < n && cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &old))
			continue;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one))
			continue;
		err = libarena_prog_run(prog, NULL, 0, &ret);
		if (err)
			break;
		total += ret;
	}
	sched_setaffinity(0, sizeof(old), &old);
	return err ? err : total;
}

struct arena_heap_global *libarena_heap(struct bpf_object *obj)
{
	return info_addr(obj, offsetof(struct arena_get_info_args, heap));
}

int libarena_heap_totals(const struct arena_heap_global *g, struct arena_heap_stats *sum)
{
	uintptr_t base;
	u32 id, nr;
	int heaps = 0;

	if (!g || !sum)
		return -EINVAL;
	memset(sum, 0, sizeof(*sum));
	if (g->magic != HEAP_GLOBAL_MAGIC)
		return 0;
	base = (uintptr_t)g & ~(uintptr_t)0xffffffff;
	nr = g->nr_cpus * HEAP_LEVELS;
	for (id = 0; id < nr && id < HEAP_MAX_HEAPS; id++) {
		const struct arena_heap *h = (const void *)(base + HEAP_HEAPS_START +
							    (uintptr_t)id * HEAP_HEAP_SIZE);
		const u64 *from = (const u64 *)&h->stats;
		u64 *to = (u64 *)sum;

		if (h->magic != HEAP_MAGIC)
			continue;
		for (size_t i = 0; i < sizeof(*sum) / sizeof(u64); i++)
			to[i] += from[i];
		heaps++;
	}
	return heaps;
}

int libarena_heap_stats_print(const struct arena_heap_global *g, FILE *out)
{
	struct arena_heap_stats st;
	int heaps;

	if (!g || !out)
		return -EINVAL;
	heaps = libarena_heap_totals(g, &st);
	if (heaps < 0)
		return heaps;
	fprintf(out,
		"heap %s: %d heaps on %u CPUs; %llu spans (%llu pages) mapped, %llu returned, %llu unused pages trimmed\n",
		g->magic == HEAP_GLOBAL_MAGIC ? "ready" : "not initialised",
		heaps, g->nr_cpus, (unsigned long long)g->spans_mapped,
		(unsigned long long)g->pages_mapped, (unsigned long long)g->spans_returned,
		(unsigned long long)g->pages_trimmed);
	fprintf(out,
		"  %llu allocs, %llu local + %llu remote frees, %llu shortfalls, %llu nested, %llu without a heap\n",
		(unsigned long long)st.allocs,
		(unsigned long long)st.frees, (unsigned long long)st.remote_frees,
		(unsigned long long)st.shortfalls, (unsigned long long)st.nested,
		(unsigned long long)g->no_heap);
	fprintf(out, "  spans: %llu taken, %llu emptied, %llu released, %llu revived; "
		"%llu refills (%llu by the workqueue), %llu bad frees\n",
		(unsigned long long)st.spans_taken, (unsigned long long)st.spans_emptied,
		(unsigned long long)st.spans_released, (unsigned long long)st.revived,
		(unsigned long long)g->refills, (unsigned long long)g->wq_runs,
		(unsigned long long)g->bad_frees);
	fprintf(out,
		"  pages: %llu mapped in %llu calls, %llu unmapped in %llu calls; pool: %llu spans now, %llu reused, %llu spares shed (purge delay %u ms)\n",
		(unsigned long long)g->map_pages, (unsigned long long)g->map_calls,
		(unsigned long long)g->unmap_pages, (unsigned long long)g->unmap_calls,
		(unsigned long long)((g->release >> 32) & HEAP_REMOTE_COUNT),
		(unsigned long long)g->pool_reused, (unsigned long long)g->spares_shed,
		g->purge_delay);
	fprintf(out, "  maintenance: %llu passes, %.3f ms in all\n",
		(unsigned long long)g->maintain_passes, g->maintain_ns / 1e6);
	fprintf(out,
		"  contention: %llu remote frees parked and retried; given up: %llu frees, %llu spans (both 0 unless the loop budget ran out)\n",
		(unsigned long long)st.parked, (unsigned long long)g->lost_frees,
		(unsigned long long)g->lost_spans);
	return 0;
}
