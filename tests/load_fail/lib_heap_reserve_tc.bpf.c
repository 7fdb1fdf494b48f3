// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The verifier must reject this object: arena_heap_reserve() maps pages, which 6.12
 * allows only in sleepable programs, so a tc classifier that can reach it is refused
 * even on a path that never runs. Linked with libarena.bpf.o, as a user's object is.
 * expect-load-fail: program must be sleepable to call sleepable kfunc bpf_arena_alloc_pages
 */
#include <libarena/common.h>

char _license[] SEC("license") = "Dual BSD/GPL";

u64 __arena_global objects_wanted;

SEC("tc")
int reserve_in_tc(struct __sk_buff *skb)
{
	if (!objects_wanted)
		return 0;
	return arena_heap_reserve(64, objects_wanted) ? 1 : 0;
}
