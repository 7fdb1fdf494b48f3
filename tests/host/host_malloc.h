/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * arena_malloc and friends over libc malloc (the out-of-line arena_malloc_addr and
 * arena_free_slow, which heap.h's arena_malloc/arena_free call outside BPF), for host
 * tests of data structures: every node then is its own heap block, so AddressSanitizer
 * sees a use after free or an overflow of any single node, which a block carved out of
 * a buddy chunk would hide.
 * Include in exactly one file of a test; it counts what is live.
 */
#ifndef __LIBARENA_HOST_MALLOC_H
#define __LIBARENA_HOST_MALLOC_H

#include <stdlib.h>
#include <string.h>

static long host_live_blocks;
static long host_malloc_fail_after = -1;	/* >= 0: that many more succeed, then NULL */

u64 arena_malloc_addr(u64 size)
{
	void *p;

	if (host_malloc_fail_after == 0)
		return 0;
	if (host_malloc_fail_after > 0)
		host_malloc_fail_after--;
	p = malloc(size);
	if (p)
		__atomic_fetch_add(&host_live_blocks, 1, __ATOMIC_RELAXED);
	return (u64)(uintptr_t)p;
}

/* The heaps' own call (the hash map's node blocks): the same, over libc. */
u64 arena_malloc_small_addr(u64 size)
{
	return arena_malloc_addr(size);
}

int arena_free_slow(void *ptr)
{
	if (ptr)
		__atomic_fetch_sub(&host_live_blocks, 1, __ATOMIC_RELAXED);
	free(ptr);
	return 0;
}

int arena_memset(void *ptr, int c, u64 n)
{
	if (!ptr)
		return -EINVAL;
	memset(ptr, c, n);
	return 0;
}

#endif
