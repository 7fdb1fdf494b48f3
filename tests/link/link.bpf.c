// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * A program as a user writes one: arena globals of its own beside the default
 * allocator, which it declares extern as upstream programs do. tests/link/build.sh links
 * it with the library in both orders, each with every licence line a user may write
 * (LICENCE, or none): every one must give the same correct object and load.
 */
#include <libarena/common.h>
#include <libarena/buddy.h>
#include <libarena/test.h>

#ifdef LICENCE
char _license[] SEC("license") = LICENCE;
#endif

extern struct buddy __arena buddy;

u64 __arena_global link_data[4] = { 11, 22, 33, 44 };
u64 __arena_global link_bss[4];

static bool overlaps(u64 a, u64 a_size, u64 b, u64 b_size)
{
	return a < b + b_size && b < a + a_size;
}

/* Where the linker put the program's globals and the allocator: apart. */
SEC("syscall")
int test_link_globals_apart(void *ctx)
{
	u64 b = (u64)&buddy;

	if (overlaps((u64)link_data, sizeof(link_data), b, sizeof(buddy)) ||
	    overlaps((u64)link_bss, sizeof(link_bss), b, sizeof(buddy)) ||
	    overlaps((u64)link_data, sizeof(link_data), (u64)link_bss, sizeof(link_bss))) {
		arena_stderr("link: data %lx bss %lx buddy %lx overlap",
			     (u64)link_data, (u64)link_bss, b);
		return -EFAULT;
	}
	if (link_data[0] != 11 || link_data[3] != 44 || link_bss[0] || link_bss[3])
		return -EINVAL;
	return 0;
}

/*
 * The allocator through the extern works and leaves the program's globals alone; its
 * kfuncs are GPL-only, so this loads only if the licence came out GPL-compatible.
 */
SEC("syscall")
int test_link_buddy_through_extern(void *ctx)
{
	u64 __arena *p;
	int err;

	link_bss[1] = 5;
	p = buddy_alloc(&buddy, 64);
	if (!p)
		return -ENOMEM;
	p[0] = 1;
	p[7] = 2;
	err = buddy_free(&buddy, p);
	if (err)
		return err;
	if (link_data[1] != 22 || link_data[2] != 33 || link_bss[1] != 5)
		return -EINVAL;
	link_bss[1] = 0;
	return 0;
}
