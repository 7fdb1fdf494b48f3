// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A first program: count every process's system calls, in a record per process that is
 * allocated in the arena and found through the library's hash map. The README shows
 * this file whole; make test builds and runs it.
 */
#include <libarena/common.h>
#include <libarena/hashmap.h>
#include "first.h"

char _license[] SEC("license") = "GPL";	/* the arena kfuncs are GPL-only */

struct proc_stats {
	u64 calls;
	u64 last_nr;
};

/* tgid -> struct proc_stats __arena * (hash map values are u64: records are pointers) */
struct hmap __arena *procs;

/* Set-up, run once by the loader before anything is attached. */
SEC("syscall")
int setup(void *ctx)
{
	procs = hmap_create(256);
	return procs ? 0 : -ENOMEM;
}

/* A tracepoint cannot sleep: arena_malloc() takes from the per-CPU reserves. */
SEC("tp_btf/sys_enter")
int BPF_PROG(on_sys_enter, struct pt_regs *regs, long nr)
{
	u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct proc_stats __arena *st;
	u64 val;

	if (hmap_lookup(procs, tgid, &val) == 0) {
		st = (struct proc_stats __arena *)val;
	} else {
		st = arena_malloc(sizeof(*st));
		if (!st)
			return 0;
		st->calls = 0;
		if (hmap_insert(procs, tgid, (u64)st)) {	/* another CPU was first */
			arena_free(st);
			return 0;
		}
		arena_stdout("first: a new process, %u", tgid);
	}
	atomic_add(&st->calls, 1);
	st->last_nr = nr;
	return 0;
}

/* The report, run by the loader: one process's count and how many there are. */
SEC("syscall")
int report(struct first_report *r)
{
	struct proc_stats __arena *st;
	u64 val;

	r->procs = hmap_count(procs);
	if (hmap_lookup(procs, r->tgid, &val))
		return -ENOENT;
	st = (struct proc_stats __arena *)val;
	r->calls = st->calls;
	return 0;
}
