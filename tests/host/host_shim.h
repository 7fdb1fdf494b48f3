/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Force-included when a library source (src/X.bpf.c) is compiled natively for the host
 * tests: stands in for the few BPF helpers the sources call.
 */
#ifndef __LIBARENA_HOST_SHIM_H
#define __LIBARENA_HOST_SHIM_H

#include <sched.h>
#include <libarena/common.h>

static inline u32 bpf_get_smp_processor_id(void)
{
	int cpu = sched_getcpu();

	return cpu < 0 ? 0 : cpu;
}

#endif
