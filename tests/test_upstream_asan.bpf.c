// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Compatibility suite: upstream's sanitizer tests. The sanitizer build is selected by
 * BPF_ARENA_ASAN; a test checks asan_violated after each access and states the report
 * it expects with __stderr() lines, matched in order against what the runner prints.
 */
#include <libarena/common.h>
#include <libarena/asan.h>
#include <libarena/buddy.h>

#include "test_progs_compat.h"

extern struct buddy __arena buddy;

#ifdef BPF_ARENA_ASAN

/*
 * Take the sanitizer's verdict on the accesses since the last call (asan_violated, which
 * this clears): 0 when there was a report exactly when want_report says there should
 * be; else -EINVAL, with a line that says which way it went wrong and addr's shadow.
 */
static __always_inline int expect_report(bool want_report, void __arena *addr)
{
	u64 seen = asan_violated;

	asan_violated = 0;
	if (!seen != want_report)
		return 0;
	arena_stdout("%p: %s report (asan_violated %llx), shadow %d, granule offset %d", addr,
		     want_report ? "no" : "an unexpected", seen, *mem_to_shadow(addr),
		     ASAN_GRANULE(addr));
	return -EINVAL;
}

__weak int upstream_oob_one(size_t size)
{
	u8 __arena *mem;
	int ret = 0, i;

	mem = buddy_alloc(&buddy, size);
	if (!mem)
		return -ENOMEM;
	for (i = zero; i < size && can_loop; i++) {
		mem[i] = 0xba;
		if (asan_violated) {
			arena_stdout("in bounds byte %d of %lu reported", i, size);
			ret = -EINVAL;
		}
	}
	/* One past the end: reported, and the program goes on. */
	mem[size] = 0xba;
	if (!ret)
		ret = expect_report(true, &mem[size]);
	if (!ret && !asan_shadow_set(&mem[size]))
		ret = -EINVAL;
	buddy_free(&buddy, mem);
	return ret;
}

SEC("syscall")
__stderr("Memory violation for address {{.*}} for write of size 1")
__stderr("CPU: {{[0-9]+}} UID: 0 PID: {{[0-9]+}} Comm: {{.*}}")
__stderr("Call trace:\n{{([ \t]+[^\n]+\n)*}}")
__weak int asan_test_upstream_oob(void)
{
	size_t sizes[] = { 7, 8, 17, 64, 317, 1024 };
	int ret;
	u32 i;

	if (!asan_ready() || ASAN_SHADOW_SCALE != 8 || ASAN_GRANULE_MASK != 7 ||
	    ASAN_GRANULE(13) != 5)
		return -EINVAL;
	ret = buddy_init(&buddy);
	if (ret)
		return ret;
	for (i = zero; i < ARRAY_SIZE(sizes) && can_loop; i++) {
		barrier_var(i);
		ret = upstream_oob_one(sizes[i]);
		if (ret) {
			arena_stdout("%s: size %lu: %d", __func__, sizes[i], ret);
			break;
		}
	}
	buddy_destroy(&buddy);
	return ret;
}

SEC("syscall")
__stderr("Memory violation for address {{.*}} for write of size 1")
__weak int asan_test_upstream_uaf(void)
{
	u8 __arena *mem;
	u32 reported;
	int ret, i;

	ret = buddy_init(&buddy);
	if (ret)
		return ret;
	mem = buddy_alloc(&buddy, 64);
	if (!mem)
		return -ENOMEM;
	mem[0] = 1;
	ret = expect_report(false, mem);
	buddy_free(&buddy, mem);
	reported = asan_reported;
	/* Every byte of the freed block but its header is poisoned. */
	for (i = zero; i < 64 && !ret && can_loop; i++) {
		if (i >= BUDDY_HEADER_OFF && i < BUDDY_HEADER_OFF + sizeof(struct buddy_header))
			continue;
		mem[i] = 0xba;
		ret = expect_report(true, &mem[i]);
	}
	if (!ret && asan_reported == reported)
		ret = -EINVAL;
	buddy_destroy(&buddy);
	return ret;
}

#else /* !BPF_ARENA_ASAN */

/* The plain build: the runtime's calls exist and do nothing, and it is always ready. */
SEC("syscall")
__weak int test_upstream_asan_plain(void)
{
	u8 __arena *mem;
	int ret = 0;

	mem = arena_malloc(16);
	if (!mem)
		return -ENOMEM;
	if (!asan_ready() || asan_poison(mem, ASAN_FREED, 16) || asan_unpoison(mem, 16) ||
	    asan_shadow_set(mem) || ASAN_GRANULE(mem + 3) != ((u64)mem & 7) + 3)
		ret = -EINVAL;
	mem[15] = 1;
	if (asan_violated || asan_reported)
		ret = -EINVAL;
	arena_free(mem);
	return ret;
}

#endif /* BPF_ARENA_ASAN */

char _license[] SEC("license") = "GPL";
