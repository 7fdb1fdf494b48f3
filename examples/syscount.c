// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * syscount OBJECT: load the linked syscount.bpf.o, count this process's system calls
 * while it does some work, then print the counts read straight from the arena and the
 * log lines the BPF side wrote.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/libbpf.h>
#include <libarena/userspace.h>
#include "syscount.h"

static const struct { int nr; const char *name; } names[] = {
	{ SYS_getpid, "getpid" }, { SYS_write, "write" }, { SYS_read, "read" },
	{ SYS_openat, "openat" }, { SYS_close, "close" }, { SYS_nanosleep, "nanosleep" },
	{ SYS_bpf, "bpf" }, { SYS_ioctl, "ioctl" }, { SYS_getppid, "getppid" },
};

static const char *name_of(int nr)
{
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (names[i].nr == nr)
			return names[i].name;
	return "?";
}

int main(int argc, char **argv)
{
	struct syscount_setup setup = { .tgid = getpid() };
	struct bpf_link *link = NULL;
	struct bpf_object *obj;
	struct syscount *stats;
	struct arena_log *log;
	int err, ret, fd, i, bad = 0;
	char buf[64];
	static unsigned long long counts[SYSCOUNT_MAX];

	if (argc != 2) {
		fprintf(stderr, "usage: syscount OBJECT\n");
		return 2;
	}
	obj = bpf_object__open_file(argv[1], NULL);
	if (!obj || bpf_object__load(obj)) {
		fprintf(stderr, "syscount: cannot load %s\n", argv[1]);
		return 1;
	}
	err = libarena_prog_run(bpf_object__find_program_by_name(obj, "syscount_setup"),
				&setup, sizeof(setup), &ret);
	if (err || ret) {
		fprintf(stderr, "syscount: setup failed: %d %d\n", err, ret);
		return 1;
	}
	stats = (struct syscount *)(uintptr_t)setup.stats;
	log = libarena_log(obj);
	link = bpf_program__attach(bpf_object__find_program_by_name(obj, "count_syscall"));
	if (!link || !log) {
		fprintf(stderr, "syscount: attach failed: %s\n", strerror(errno));
		return 1;
	}

	/* The work: known numbers of a few calls. */
	for (i = 0; i < 1000; i++)
		syscall(SYS_getpid);
	fd = open("/dev/null", O_WRONLY);
	for (i = 0; i < 300; i++)
		if (write(fd, buf, sizeof(buf)) < 0)
			break;
	close(fd);
	for (i = 0; i < 50; i++)
		syscall(SYS_getppid);
	bpf_link__destroy(link);

	/* Read the counts from the arena: plain memory, shared with the BPF program. */
	printf("syscount: %llu system calls by pid %u\n",
	       (unsigned long long)stats->total, setup.tgid);
	memcpy(counts, (const void *)stats->count, sizeof(counts));
	for (int shown = 0; shown < 8; shown++) {
		int best = 0;

		for (int nr = 1; nr < SYSCOUNT_MAX; nr++)
			if (counts[nr] > counts[best])
				best = nr;
		if (!counts[best])
			break;
		printf("  %-10s (%3d) %6llu\n", name_of(best), best,
		       (unsigned long long)counts[best]);
		counts[best] = 0;
	}

	printf("syscount: log from BPF:\n");
	libarena_log_print(log, stdout, stderr);

	/* The example checks itself, so `make run` fails when it does not work. */
	if (stats->count[SYS_getpid] < 1000 || stats->count[SYS_write] < 300 ||
	    stats->count[SYS_getppid] < 50) {
		fprintf(stderr, "syscount: counts too low\n");
		bad = 1;
	}
	bpf_object__close(obj);
	return bad;
}
