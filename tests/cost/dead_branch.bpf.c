// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The dead-code check's own test (scripts/verifier-budget dead): a global function with
 * a branch the program can take, made unreachable to the verifier on purpose. The flag
 * lives in .rodata, a frozen map the verifier reads as the constant 0, while the
 * compiler (volatile) keeps the branch; the verifier then never walks it and removes
 * its code, as 6.12 does to a path it wrongly prunes. The check must fail on this
 * object, naming the function and the line; tests/vm-suite.sh makes sure it does.
 */
#include <libarena/common.h>

char _license[] SEC("license") = "GPL";

const volatile u32 cost_dead_flag = 0;
u64 cost_dead_hits;

__weak int cost_dead_branch(u64 x)
{
	if (cost_dead_flag) {
		/* The branch the verifier drops: lines of their own, with code of their own. */
		cost_dead_hits += x;
		x = bpf_ktime_get_ns();
	}
	return x & 0xff;
}

SEC("syscall") int cost__dead_branch(u64 *ctx)
{
	return cost_dead_branch(ctx[0]);
}
