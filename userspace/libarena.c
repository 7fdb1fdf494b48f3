// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* libarena user-space helpers: program runs, arena info and the log reader. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>

int libarena_run_prog(struct bpf_program *prog, void *arg, size_t size, int *retval)
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

int libarena_get_info(struct bpf_object *obj, struct arena_get_info_args *info)
{
	struct bpf_program *prog;
	int err, ret;

	prog = bpf_object__find_program_by_name(obj, "arena_get_info");
	if (!prog)
		return -ENOENT;
	memset(info, 0, sizeof(*info));
	err = libarena_run_prog(prog, info, sizeof(*info), &ret);
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
	struct buddy_stats st;
	unsigned long long blocks = 0, bytes = 0;

	if (!b || !out)
		return -EINVAL;
	memcpy(&st, (const void *)&b->stats, sizeof(st));
	for (int o = 0; o < BUDDY_ORDERS; o++) {
		blocks += st.blocks_in_use[o];
		bytes += (unsigned long long)st.blocks_in_use[o] << (o + BUDDY_MIN_SHIFT);
	}
	fprintf(out, "buddy %s: %llu blocks (%llu bytes) in use, %llu page runs (%llu pages)\n",
		b->magic == BUDDY_MAGIC ? "ready" : "not initialised", blocks, bytes,
		(unsigned long long)st.runs_in_use, (unsigned long long)st.run_pages_in_use);
	fprintf(out, "  chunks: %llu held (%llu spare), %llu returned; %llu pages returned\n",
		(unsigned long long)st.chunks_held, (unsigned long long)st.chunks_spare,
		(unsigned long long)st.chunks_returned, (unsigned long long)st.pages_returned);
	fprintf(out, "  calls: %llu allocs, %llu frees, %llu failed, %llu bad, "
		"%llu lock timeouts, %llu corruptions\n",
		(unsigned long long)st.allocs, (unsigned long long)st.frees,
		(unsigned long long)st.failed_allocs, (unsigned long long)st.bad_calls,
		(unsigned long long)st.lock_timeouts, (unsigned long long)st.corruptions);
	for (int o = 0; o < BUDDY_ORDERS; o++)
		if (st.blocks_in_use[o])
			fprintf(out, "  order %2d (%6u B): %llu blocks, %llu bytes\n", o,
				BUDDY_MIN_SIZE << o, (unsigned long long)st.blocks_in_use[o],
				(unsigned long long)st.blocks_in_use[o] << (o + BUDDY_MIN_SHIFT));
	return 0;
}
