// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* libarena user-space helpers: program runs, arena info and the log reader. */
#include <errno.h>
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

struct arena_log *libarena_log(struct bpf_object *obj)
{
	struct arena_get_info_args info;
	int err;

	err = libarena_get_info(obj, &info);
	if (err) {
		errno = -err;
		return NULL;
	}
	if (!info.log) {
		errno = ENOENT;
		return NULL;
	}
	return (struct arena_log *)(uintptr_t)info.log;
}
