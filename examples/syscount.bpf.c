// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * syscount: count one process's system calls from a tracing program into the arena.
 * User space reads the counts straight from the shared mapping, with no system call and
 * no map lookups, and gets a log line from BPF each time a new system call shows up.
 */
#include <libarena/common.h>
#include "syscount.h"

char _license[] SEC("license") = "Dual BSD/GPL";

struct syscount __arena_global stats;

/* Run once by user space before it attaches: whom to watch, and where the stats are. */
SEC("syscall")
int syscount_setup(struct syscount_setup *args)
{
	stats.target_tgid = args->tgid;
	args->stats = (u64)&stats;
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(count_syscall, struct pt_regs *regs, long id)
{
	u64 bit, old;
	u32 nr;

	if ((bpf_get_current_pid_tgid() >> 32) != stats.target_tgid)
		return 0;
	if (id < 0 || id >= SYSCOUNT_MAX) {
		atomic_add(&stats.out_of_range, 1);
		return 0;
	}
	nr = id;
	atomic_add(&stats.count[nr], 1);
	atomic_add(&stats.total, 1);

	/* The first CPU to see this call number sets its bit and says so. */
	bit = 1ull << (nr % 64);
	old = atomic_fetch_or(&stats.seen[nr / 64], bit);
	if (!(old & bit))
		arena_stdout("syscount: first syscall %u from tgid %u, on cpu %u", nr,
			     stats.target_tgid, bpf_get_smp_processor_id());
	return 0;
}
