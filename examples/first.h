/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/* What the first program's two sides share: the report user space asks for. */
#ifndef FIRST_H
#define FIRST_H

struct first_report {
	__u32 tgid;		/* in: the process to report on */
	__u32 procs;		/* out: processes seen */
	__u64 calls;		/* out: that process's system calls */
};

#endif
