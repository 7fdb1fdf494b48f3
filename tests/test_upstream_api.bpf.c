// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Compatibility suite: the names of upstream's common.h, bitmap.h, rbtree.h and spmc.h
 * and the helper headers they include, used the way upstream programs use them. Like
 * upstream's rbtree, spmc and bitmap tests it names no licence: the library's "GPL" is
 * the program's.
 */
#include <libarena/common.h>
#include <libarena/bitmap.h>
#include <libarena/rbtree.h>
#include <libarena/spmc.h>

#define TEST_BITS	BYTES_TO_BITS(64)

/* A global of its own section, as upstream's private() makes one. */
private(COMPAT) u64 compat_private_word;
private(COMPAT) arena_spinlock_t __arena *compat_lock_ptr;

arena_spinlock_t __arena_global compat_lock;
u64 __arena_global compat_counter;

/*
 * What 6.12 forces on the sanitizer build: the compiler's checks are global calls, which
 * 6.12 refuses while a spin lock holds preemption off, so the locked code is __noasan.
 */
static __noinline __noasan u64 locked_increment(void)
{
	u64 now;

	compat_lock_ptr = &compat_lock;
	if (arena_spin_lock(compat_lock_ptr))
		return 0;
	now = ++compat_counter;
	arena_spin_unlock(compat_lock_ptr);
	return now;
}

SEC("syscall")
__weak int test_upstream_common_names(void)
{
	u64 __maybe_unused unused = 1;
	void __arena *base = arena_base(&arena);
	u64 __arena *p;

	arena_subprog_init();
	if (ARENA_RESERVE_PAGES_DFL != 8 || arena_fls(0) != 0 || arena_fls(1) != 1 ||
	    arena_fls(1ULL << 63) != 64)
		return -EINVAL;
	p = arena_malloc(sizeof(*p));
	if (!p)
		return -ENOMEM;
	cast_kern(p);
	*p = 42;
	cast_user(p);
	/* arena_base() is the arena's user-space start: every arena pointer lies above it. */
	if ((u64)p < (u64)base || (u64)p - (u64)base >= (1ULL << 32)) {
		arena_stdout("%p is not in the arena at %p", p, base);
		return -EINVAL;
	}
	arena_free(p);
	compat_private_word = 0x5eed;
	if (compat_private_word != 0x5eed)
		return -EINVAL;
	return locked_increment() == 1 ? 0 : -EINVAL;
}

SEC("syscall")
__weak int test_upstream_bitmap(void)
{
	struct arena_bitmap __arena *a, *b;
	int ret = 0;

	if (BITS_PER_BYTE != 8 || BITS_PER_LONG_LONG != 64 || BITS_TO_LONG_LONGS(65) != 2 ||
	    BITS_TO_LONG_LONGS(TEST_BITS) != 8 || BIT_WORD(TEST_BITS - 1) != 7 ||
	    BIT_MASK(65) != 2)
		return -EINVAL;
	a = bmp_alloc(TEST_BITS);
	b = bmp_alloc(TEST_BITS);
	if (!a || !b)
		return -ENOMEM;
	bmp_set_bit(3, a);
	bmp_set_bit(TEST_BITS - 1, a);
	__bmp_set_bit(3, b);
	if (!bmp_test_bit(TEST_BITS - 1, a) || !bmp_subset(TEST_BITS, a, b) ||
	    !bmp_intersects(TEST_BITS, a, b) || bmp_test_and_set_bit(70, b) ||
	    !bmp_test_and_clear_bit(70, b) || bmp_empty(TEST_BITS, a))
		ret = -EINVAL;
	bmp_clear(TEST_BITS, a);
	if (!bmp_empty(TEST_BITS, a))
		ret = -EINVAL;
	bmp_free(a);
	bmp_free(b);
	return ret;
}

SEC("syscall")
__weak int test_upstream_rbtree(void)
{
	struct rbtree __arena *rb;
	u64 key, value;
	int ret = 0;
	u32 i;

	rb = rb_create(RB_ALLOC, RB_DEFAULT);
	if (!rb)
		return -ENOMEM;
	for (i = zero; i < 100 && can_loop; i++)
		if (rb_insert(rb, (i * 37) % 100, i))
			ret = -EINVAL;
	if (rb_insert(rb, 37, 0) != -EALREADY || rb_find(rb, 1000, &value) != -ENOENT)
		ret = -EINVAL;
	if (rb_least(rb, &key, &value) || key != 0)
		ret = -EINVAL;
	if (rb_pop(rb, &key, &value) || key != 0 || rb_integrity_check(rb))
		ret = -EINVAL;
	if (RB_MAXLVL_PRINT < 1 || rb_print(rb))
		ret = -EINVAL;
	rb_destroy(rb);
	return ret;
}

SEC("syscall")
__weak int test_upstream_spmc(void)
{
	struct spmc __arena *q;
	u64 v, sum = 0;
	int ret = 0, i;

	q = spmc_create();
	if (!q)
		return -ENOMEM;
	for (i = zero; i < 300 && can_loop; i++)
		if (spmc_owned_add(q, i + 1))
			ret = -EINVAL;
	/* Thieves take the oldest value, the owner the newest. */
	if (spmc_steal(q, &v) || v != 1 || spmc_owned_remove(q, &v) || v != 300)
		ret = -EINVAL;
	while (!spmc_owned_remove(q, &v) && can_loop)
		sum += v;
	if (sum != 300 * 301 / 2 - 1 - 300 || spmc_steal(q, &v) != -ENOENT)
		ret = -EINVAL;
	spmc_destroy(q);
	return ret;
}
