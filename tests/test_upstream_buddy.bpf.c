// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Compatibility suite: a program written the way the kernel's own libarena
 * (tools/testing/selftests/bpf/libarena of 7.x trees) wants its programs written, with
 * its names only: the default allocator reached as an extern global, globals that take
 * no argument, the "GPL" licence. It must build, link and pass here unchanged; any drift
 * of our names or behaviour from upstream's fails `make test`.
 */
#include <libarena/common.h>
#include <libarena/buddy.h>

extern struct buddy __arena buddy;

#define NR_SIZES 12

/* Sizes across every order from 1 byte to a whole chunk's largest block. */
static const size_t test_sizes[NR_SIZES] = {
	1, 7, 8, 16, 17, 64, 100, 256, 1000, 4096, 65536, 1 << 19,
};

/*
 * arena_malloc()/arena_free() as upstream programs use them. First in the file: the
 * test_buddy_* tests below destroy the default allocator, as upstream's do, and only a
 * harness that resets it before other tests (upstream's, ours for such objects) makes
 * large sizes work again after them.
 */
SEC("syscall")
__weak int test_upstream_malloc(void)
{
	u64 __arena *p, *q;

	p = arena_malloc(64);
	q = arena_malloc(200000);
	if (!p || !q)
		return -ENOMEM;
	p[7] = 7;
	q[24999] = 9;
	if (p[7] != 7 || q[24999] != 9)
		return -EINVAL;
	arena_free(p);
	arena_free(q);
	return 0;
}

/*
 * Allocate every size, fill each block, check nothing overlaps, free in reverse. The one
 * change 6.12 forces on upstream code: __arg_arena on a global's arena argument.
 */
__weak int buddy_fill_and_check(u64 __arena *slots __arg_arena)
{
	u8 __arena *mem;
	size_t size;
	u32 i;

	for (i = zero; i < NR_SIZES && can_loop; i++) {
		barrier_var(i);
		size = test_sizes[i];
		mem = buddy_alloc(&buddy, size);
		if (!mem) {
			arena_stdout("buddy_alloc(%lu) failed", size);
			return -ENOMEM;
		}
		/* At least 8-byte aligned, as upstream promises. */
		if ((u64)mem & 7)
			return -EINVAL;
		mem[0] = i + 1;
		mem[size - 1] = i + 1;
		slots[i] = (u64)mem;
	}
	for (i = zero; i < NR_SIZES && can_loop; i++) {
		barrier_var(i);
		size = test_sizes[i];
		mem = (u8 __arena *)slots[i];
		if (mem[0] != i + 1 || mem[size - 1] != i + 1) {
			arena_stdout("block %d of %lu bytes was overwritten", i, size);
			return -EINVAL;
		}
	}
	for (i = zero; i < NR_SIZES && can_loop; i++) {
		barrier_var(i);
		if (buddy_free(&buddy, (void __arena *)slots[NR_SIZES - 1 - i]))
			return -EINVAL;
	}
	return 0;
}

SEC("syscall")
__weak int test_buddy_upstream_sizes(void)
{
	u64 __arena *slots;
	int ret;

	ret = buddy_init(&buddy);
	if (ret) {
		arena_stdout("buddy_init failed with %d", ret);
		return ret;
	}
	slots = buddy_alloc(&buddy, 16 * sizeof(u64));
	if (!slots)
		return -ENOMEM;
	/* Twice: the second round reuses what the first freed. */
	ret = buddy_fill_and_check(slots);
	if (!ret)
		ret = buddy_fill_and_check(slots);
	buddy_free(&buddy, slots);
	buddy_destroy(&buddy);
	return ret;
}

SEC("syscall")
__weak int test_buddy_upstream_bad_calls(void)
{
	u8 __arena *mem;
	int ret;

	ret = buddy_init(&buddy);
	if (ret)
		return ret;
	/* NULL is a no-op; size 0 is out of range. */
	if (buddy_free(&buddy, NULL) || buddy_alloc(&buddy, 0))
		return -EINVAL;
	mem = buddy_alloc(&buddy, 64);
	if (!mem)
		return -ENOMEM;
	/* A pointer into a block and a double free are refused, and change nothing. */
	if (buddy_free(&buddy, mem + 8) != -EINVAL)
		return -EINVAL;
	if (buddy_free(&buddy, mem))
		return -EINVAL;
	if (buddy_free(&buddy, mem) != -EINVAL)
		return -EINVAL;
	buddy_destroy(&buddy);
	return 0;
}

#ifndef BPF_ARENA_ASAN
/*
 * The free-list links of a freed block stay where BUDDY_HEADER_OFF says, nowhere else:
 * a program may scribble over the rest (the sanitizer build reports that, so only here).
 */
SEC("syscall")
__weak int test_buddy_upstream_header(void)
{
	u8 __arena *mem;
	u64 __arena *blk;
	int ret, i;

	ret = buddy_init(&buddy);
	if (ret)
		return ret;
	mem = buddy_alloc(&buddy, BUDDY_MIN_ALLOC_BYTES * 4);
	if (!mem)
		return -ENOMEM;
	buddy_free(&buddy, mem);
	for (i = zero; i < BUDDY_MIN_ALLOC_BYTES * 4 && can_loop; i++) {
		if (i >= BUDDY_HEADER_OFF && i < BUDDY_HEADER_OFF + sizeof(struct buddy_header))
			continue;
		mem[i] = 0xba;
	}
	/* The allocator goes on as if nothing happened. */
	for (i = zero; i < 64 && can_loop; i++) {
		blk = buddy_alloc(&buddy, BUDDY_MIN_ALLOC_BYTES * 4);
		if (!blk)
			return -ENOMEM;
		blk[0] = i;
		if (buddy_free(&buddy, blk))
			return -EINVAL;
	}
	if (buddy.stats.corruptions)
		return -EUCLEAN;
	buddy_destroy(&buddy);
	return 0;
}
#endif

/* The constants describe an allocator that can serve what they promise. */
SEC("syscall")
__weak int test_buddy_upstream_constants(void)
{
	u8 __arena *mem;
	int ret;

	if (BUDDY_MIN_ALLOC_BYTES != 1 << BUDDY_MIN_ALLOC_SHIFT ||
	    BUDDY_CHUNK_OFFSET_MASK + 1 != BUDDY_CHUNK_BYTES ||
	    BUDDY_CHUNK_ITEMS * BUDDY_MIN_ALLOC_BYTES != BUDDY_CHUNK_BYTES ||
	    BUDDY_VADDR_SIZE / BUDDY_CHUNK_BYTES == 0 || sizeof(struct buddy_header) < 8)
		return -EINVAL;
	ret = buddy_init(&buddy);
	if (ret)
		return ret;
	/* The largest order upstream's constants promise. */
	mem = buddy_alloc(&buddy, BUDDY_MIN_ALLOC_BYTES << (BUDDY_CHUNK_NUM_ORDERS - 1));
	if (!mem)
		return -ENOMEM;
	/* Upstream promises 8-byte alignment; blocks here are aligned to their size. */
	if ((u64)mem & ((BUDDY_MIN_ALLOC_BYTES << (BUDDY_CHUNK_NUM_ORDERS - 1)) - 1))
		return -EINVAL;
	buddy_free(&buddy, mem);
	buddy_destroy(&buddy);
	return 0;
}

char _license[] SEC("license") = "GPL";
