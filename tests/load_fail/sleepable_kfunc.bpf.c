// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The verifier must reject this object. On 6.12 the arena page kfuncs are sleepable-only,
 * and a non-sleepable program (here a tc classifier) that can reach one is refused, even
 * when the call is on a path that never runs. The runner checks the verifier log says:
 * expect-load-fail: program must be sleepable to call sleepable kfunc bpf_arena_alloc_pages
 */
#include <libarena/base.h>

char _license[] SEC("license") = "Dual BSD/GPL";

u64 __arena_global pages_wanted;

SEC("tc")
int grab_page(struct __sk_buff *skb)
{
	void __arena *page;

	if (!pages_wanted)
		return 0;
	page = bpf_arena_alloc_pages(&arena, NULL, 1, -1, 0);
	return page ? 1 : 0;
}
