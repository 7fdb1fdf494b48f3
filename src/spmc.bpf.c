// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The Chase-Lev work-stealing deque. include/libarena/spmc.h states the API, the rules
 * and the memory ordering.
 *
 * Values live in slots top .. bottom - 1 (positions only ever grow; a slot is
 * position & (size - 1)). top moves only by compare-and-swap, so every position is
 * taken once: by the thief whose swap moved top past it, or by the owner, who takes
 * positions above top without a swap and races for the very last one like a thief.
 */
#include <libarena/spmc.h>
#include <libarena/heap.h>

/*
 * Between a thief's loads of top and bottom: the owner's pop orders its store of bottom
 * before its load of top with a full barrier, and the thief needs its two loads kept in
 * order. x86-64 never reorders loads with loads; elsewhere (and for C11 on the host) it
 * takes a fence.
 */
#if defined(__BPF__) && defined(__TARGET_ARCH_x86)
#define steal_fence() barrier()
#else
/* A full barrier: the thief's load of top before its load of bottom. */
#define steal_fence() smp_mb()
#endif

/* q is a live deque; if not, fn logs it (the caller fails with -EINVAL). */
static __always_inline bool deque_ok(const char *fn, struct spmc __arena *q)
{
	return arena_live(fn, q, SPMC_MAGIC, "deque");
}

static __always_inline u64 arr_size(struct spmc_arr __arena *a)
{
	return (u64)SPMC_ARR_BASESZ << (a->order & 31);
}

__weak u64 spmc_create_addr(void)
{
	struct spmc __arena *q = arena_malloc_call(sizeof(*q));
	u32 i;

	if (!q) {
		arena_stderr("spmc_create: out of memory");
		return 0;
	}
	arena_memset(q, 0, sizeof(*q));
	q->arr[0].data = arena_malloc_call(SPMC_ARR_BASESZ * sizeof(u64));
	if (!q->arr[0].data) {
		arena_stderr("spmc_create: out of memory");
		arena_free_call(q);
		return 0;
	}
	for (i = zero; i < SPMC_ARR_ORDERS && can_loop; i++)
		q->arr[i & 15].order = i;
	q->cur = &q->arr[0];
	q->magic = SPMC_MAGIC;
	return (u64)q;
}

__weak int spmc_destroy(struct spmc __arena *q __arg_arena)
{
	u32 i;

	if (!deque_ok(__func__, q))
		return -EINVAL;
	q->magic = 0;
	for (i = zero; i < SPMC_ARR_ORDERS && can_loop; i++) {
		arena_free_call(q->arr[i & 15].data);
		q->arr[i & 15].data = NULL;
	}
	return arena_free_call(q);
}

/*
 * The array is full: copy the live positions t .. b - 1 into one twice its size and
 * publish it. Thieves keep reading the old one until they see the new cur; the owner
 * never writes the old one again, so what they read there stays right.
 */
static __always_inline int grow(struct spmc __arena *q, struct spmc_arr __arena *old,
				u64 t, u64 b)
{
	struct spmc_arr __arena *new;
	u64 i, old_mask, new_mask;
	u32 order = old->order + 1;

	if (order >= SPMC_ARR_ORDERS) {
		arena_stderr("spmc_owned_add: deque %llx is full (%u values)", (u64)q,
			     SPMC_MAX_VALUES);
		return -E2BIG;
	}
	new = &q->arr[order & 15];
	if (!new->data) {
		new->data = arena_malloc_call(arr_size(new) * sizeof(u64));
		if (!new->data) {
			arena_stderr("spmc_owned_add: no memory to grow deque %llx to %llu slots",
				     (u64)q, arr_size(new));
			return -ENOMEM;
		}
	}
	old_mask = arr_size(old) - 1;
	new_mask = arr_size(new) - 1;
	for (i = t; i != b && can_loop; i++)
		WRITE_ONCE(new->data[i & new_mask], READ_ONCE(old->data[i & old_mask]));
	if (i != b)
		return -EFAULT;
	/* The copied values before the new array: pairs with spmc_steal()'s acquire of cur. */
	smp_store_release(&q->cur, new);
	q->grows++;
	return 0;
}

__weak int spmc_owned_add(struct spmc __arena *q __arg_arena, u64 val)
{
	struct spmc_arr __arena *a;
	u64 b, t;
	int ret;

	if (!deque_ok(__func__, q))
		return -EINVAL;
	b = q->bottom;		/* only the owner writes it */
	/* Acquire: a slot a thief freed is reused only after its read of the slot. */
	t = smp_load_acquire(&q->top);
	a = q->cur;
	if (b - t > arr_size(a)) {
		arena_stderr("%s: deque %llx is broken: top %llu bottom %llu", __func__,
			     (u64)q, t, b);
		return -EFAULT;
	}
	if (b - t == arr_size(a)) {
		ret = grow(q, a, t, b);
		if (ret)
			return ret;
		a = q->cur;
	}
	WRITE_ONCE(a->data[b & (arr_size(a) - 1)], val);
	/* The slot before the position that makes it visible to thieves. */
	smp_store_release(&q->bottom, b + 1);
	return 0;
}

__weak int spmc_owned_remove(struct spmc __arena *q __arg_arena, u64 *val)
{
	struct spmc_arr __arena *a;
	u64 b, t, v;
	bool won;

	if (!deque_ok(__func__, q) || !arena_given(__func__, val, "val"))
		return -EINVAL;
	a = q->cur;
	b = q->bottom - 1;
	/* Claim position b first, then look at top: thieves see the claim or we see theirs. */
	WRITE_ONCE(q->bottom, b);
	/* The store of bottom before the load of top: pairs with steal_fence(). */
	smp_mb();
	t = READ_ONCE(q->top);
	if ((s64)(b - t) < 0) {
		WRITE_ONCE(q->bottom, b + 1);
		return -ENOENT;
	}
	v = READ_ONCE(a->data[b & (arr_size(a) - 1)]);
	if (b != t) {
		*val = v;
		return 0;
	}
	/* The last value: whoever moves top past it has it. */
	won = cmpxchg(&q->top, t, t + 1) == t;
	WRITE_ONCE(q->bottom, b + 1);
	if (!won)
		return -EAGAIN;
	*val = v;
	return 0;
}

__weak int spmc_steal(struct spmc __arena *q __arg_arena, u64 *val)
{
	struct spmc_arr __arena *a;
	u64 b, t, v;

	if (!deque_ok(__func__, q) || !arena_given(__func__, val, "val"))
		return -EINVAL;
	/* top before bottom and the slot: pairs with the takers' compare-and-swap of top. */
	t = smp_load_acquire(&q->top);
	steal_fence();
	/* bottom before the slot: pairs with the release in spmc_owned_add(). */
	b = smp_load_acquire(&q->bottom);
	if ((s64)(b - t) <= 0)
		return -ENOENT;
	/* Read after bottom: an array at least as new as the push of position t. */
	a = smp_load_acquire(&q->cur);
	v = READ_ONCE(a->data[t & (arr_size(a) - 1)]);
	if (cmpxchg(&q->top, t, t + 1) != t)
		return -EAGAIN;
	*val = v;
	return 0;
}

__weak int spmc_count(struct spmc __arena *q __arg_arena)
{
	u64 b, t;

	if (!deque_ok(__func__, q))
		return -EINVAL;
	t = READ_ONCE(q->top);
	b = READ_ONCE(q->bottom);
	return (s64)(b - t) > 0 ? (int)(b - t) : 0;
}
