// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The first program's loader: load the linked object, set up, attach, make some system
 * calls, ask for the report and print the log. Usage: first OBJECT
 */
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include "first.h"

static int fail(const char *what)
{
	fprintf(stderr, "first: %s failed\n", what);	/* libbpf has said why */
	return 1;
}

int main(int argc, char **argv)
{
	struct first_report r = { .tgid = getpid() };
	struct bpf_object *obj;
	struct bpf_link *link;
	int i, ret;

	obj = bpf_object__open_file(argc > 1 ? argv[1] : "first.bpf.o", NULL);
	if (!obj || bpf_object__load(obj))
		return fail("loading");
	/* The allocator's per-CPU heaps, once, before any program allocates. */
	if (libarena_heap_refill(obj, NULL))
		return fail("libarena_heap_refill");
	if (libarena_prog_run(bpf_object__find_program_by_name(obj, "setup"), NULL, 0, &ret) ||
	    ret)
		return fail("setup");
	link = bpf_program__attach(bpf_object__find_program_by_name(obj, "on_sys_enter"));
	if (!link)
		return fail("attaching");

	for (i = 0; i < 1000; i++)
		syscall(SYS_getppid);

	if (libarena_prog_run(bpf_object__find_program_by_name(obj, "report"), &r,
			      sizeof(r), &ret) || ret)
		return fail("report");
	bpf_link__destroy(link);
	printf("first: pid %u made %llu system calls; %u processes seen\n", r.tgid,
	       (unsigned long long)r.calls, r.procs);
	libarena_log_print(libarena_log(obj), stdout, stderr);
	bpf_object__close(obj);
	return r.calls >= 1000 ? 0 : 1;
}
