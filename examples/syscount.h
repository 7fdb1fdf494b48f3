/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/* syscount's shared layout: one definition for the BPF side and for user space. */
#ifndef __SYSCOUNT_H
#define __SYSCOUNT_H

#define SYSCOUNT_MAX 512

struct syscount {
	u32 target_tgid;
	u32 pad;
	u64 total;
	u64 out_of_range;
	u64 seen[SYSCOUNT_MAX / 64];
	u64 count[SYSCOUNT_MAX];
};

struct syscount_setup {
	u32 tgid;	/* in: the process to count */
	u32 pad;
	u64 stats;	/* out: user address of struct syscount */
};

#endif
