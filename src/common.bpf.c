// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* The common layer's programs: what user space asks the library. */
#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/buddy.h>
#include <libarena/heap.h>

/*
 * The library's licence, as upstream's libarena gives it: a program that names none
 * loads as GPL-compatible, which the arena kfuncs require. A program may name its own
 * GPL-compatible licence too: the tree's linker merges such sections (an unpatched 6.12
 * bpftool takes only "GPL" or none).
 */
char _license[] SEC("license") = "GPL";

SEC("syscall")
__weak int arena_get_info(struct arena_get_info_args *args)
{
	if (!args)
		return -EINVAL;
	/* An arena pointer's value is its user-space address. */
	args->log = arena_log_addr();
	args->arena_base = arena_base_of(args->log);
	args->arena_pages = ARENA_PAGES;
	args->version = LIBARENA_VERSION;
	args->buddy = arena_buddy_addr();
	args->heap = arena_heap_global_addr();
	return 0;
}
