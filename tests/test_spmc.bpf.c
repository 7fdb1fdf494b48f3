// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The Chase-Lev deque on one CPU: empty, one, many values in LIFO and FIFO order,
 * growth to the largest array and past it, bad calls, random operations against a
 * model. The races between an owner and thieves are in test_spmc_race.bpf.c.
 */
#include <libarena/common.h>
#include <libarena/spmc.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

SEC("syscall")
int test_spmc_empty(struct arena_test_ctx *ctx)
{
	struct spmc __arena *q = spmc_create();
	u64 v = 0;

	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(spmc_owned_remove(q, &v), -ENOENT);
	ARENA_ASSERT_EQ(spmc_steal(q, &v), -ENOENT);
	ARENA_ASSERT_EQ(spmc_count(q), 0);
	/* An empty pop leaves the deque as it was. */
	ARENA_ASSERT_EQ(spmc_owned_add(q, 5), 0);
	ARENA_ASSERT_EQ(spmc_steal(q, &v), 0);
	ARENA_ASSERT_EQ(v, 5);
	ARENA_ASSERT_EQ(spmc_owned_remove(q, &v), -ENOENT);
	ARENA_ASSERT_EQ(q->top, q->bottom);
	ARENA_ASSERT_EQ(spmc_destroy(q), 0);
	return 0;
}

SEC("syscall")
int test_spmc_one(struct arena_test_ctx *ctx)
{
	struct spmc __arena *q = spmc_create();
	u64 i, v = 0;

	ARENA_ASSERT(q);
	for (i = zero; i < 10 && can_loop; i++) {
		ARENA_ASSERT_EQ(spmc_owned_add(q, i), 0);
		ARENA_ASSERT_EQ(spmc_count(q), 1);
		ARENA_ASSERT_EQ(spmc_steal(q, &v), 0);
		ARENA_ASSERT_EQ(v, i);
		ARENA_ASSERT_EQ(spmc_owned_add(q, i + 100), 0);
		ARENA_ASSERT_EQ(spmc_owned_remove(q, &v), 0);
		ARENA_ASSERT_EQ(v, i + 100);
	}
	ARENA_ASSERT_EQ(spmc_count(q), 0);
	ARENA_ASSERT_EQ(spmc_destroy(q), 0);
	return 0;
}

SEC("syscall")
int test_spmc_lifo_fifo(struct arena_test_ctx *ctx)
{
	struct spmc __arena *q = spmc_create();
	u64 i, v = 0;

	ARENA_ASSERT(q);
	/* The owner gets the newest first, a thief the oldest first. */
	for (i = zero; i < 500 && can_loop; i++)
		ARENA_ASSERT_EQ(spmc_owned_add(q, i), 0);
	for (i = zero; i < 500 && can_loop; i++) {
		ARENA_ASSERT_EQ(spmc_owned_remove(q, &v), 0);
		ARENA_ASSERT_EQ(v, 499 - i);
	}
	for (i = zero; i < 500 && can_loop; i++)
		ARENA_ASSERT_EQ(spmc_owned_add(q, i), 0);
	for (i = zero; i < 500 && can_loop; i++) {
		ARENA_ASSERT_EQ(spmc_steal(q, &v), 0);
		ARENA_ASSERT_EQ(v, i);
	}
	/* Both ends at once meet in the middle. */
	for (i = zero; i < 300 && can_loop; i++)
		ARENA_ASSERT_EQ(spmc_owned_add(q, i), 0);
	for (i = zero; i < 150 && can_loop; i++) {
		ARENA_ASSERT_EQ(spmc_steal(q, &v), 0);
		ARENA_ASSERT_EQ(v, i);
		ARENA_ASSERT_EQ(spmc_owned_remove(q, &v), 0);
		ARENA_ASSERT_EQ(v, 299 - i);
	}
	ARENA_ASSERT_EQ(spmc_steal(q, &v), -ENOENT);
	ARENA_ASSERT_EQ(spmc_destroy(q), 0);
	return 0;
}

/* From 128 slots to the largest array, values intact across every copy; then full. */
SEC("syscall")
int test_spmc_growth_and_full(struct arena_test_ctx *ctx)
{
	struct spmc __arena *q = spmc_create();
	u64 i, v = 0;

	ARENA_ASSERT(q);
	/* Steal a few first: the live values do not start at slot 0 when it grows. */
	for (i = zero; i < 100 && can_loop; i++)
		ARENA_ASSERT_EQ(spmc_owned_add(q, 1000000 + i), 0);
	for (i = zero; i < 100 && can_loop; i++)
		ARENA_ASSERT_EQ(spmc_steal(q, &v), 0);
	for (i = zero; i < SPMC_MAX_VALUES && can_loop; i++)
		if (spmc_owned_add(q, i))
			break;
	ARENA_ASSERT_EQ(i, SPMC_MAX_VALUES);
	ARENA_ASSERT_EQ(spmc_owned_add(q, i), -E2BIG);
	ARENA_ASSERT_EQ(q->grows, SPMC_ARR_ORDERS - 1);
	ARENA_ASSERT_EQ(spmc_count(q), SPMC_MAX_VALUES);
	for (i = zero; i < SPMC_MAX_VALUES / 2 && can_loop; i++) {
		ARENA_ASSERT_EQ(spmc_steal(q, &v), 0);
		ARENA_ASSERT_EQ(v, i);
	}
	for (i = zero; i < SPMC_MAX_VALUES / 2 && can_loop; i++) {
		ARENA_ASSERT_EQ(spmc_owned_remove(q, &v), 0);
		ARENA_ASSERT_EQ(v, SPMC_MAX_VALUES - 1 - i);
	}
	ARENA_ASSERT_EQ(spmc_count(q), 0);
	/* It never shrinks: the big array takes the next values. */
	ARENA_ASSERT_EQ(spmc_owned_add(q, 1), 0);
	ARENA_ASSERT_EQ(q->grows, SPMC_ARR_ORDERS - 1);
	ARENA_ASSERT_EQ(spmc_destroy(q), 0);
	return 0;
}

SEC("syscall")
int test_spmc_bad_calls(struct arena_test_ctx *ctx)
{
	struct spmc __arena *q = spmc_create();
	u64 v = 0;

	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(spmc_owned_add(NULL, 1), -EINVAL);
	ARENA_ASSERT_EQ(spmc_owned_remove(NULL, &v), -EINVAL);
	ARENA_ASSERT_EQ(spmc_steal(NULL, &v), -EINVAL);
	ARENA_ASSERT_EQ(spmc_count(NULL), -EINVAL);
	ARENA_ASSERT_EQ(spmc_destroy(NULL), -EINVAL);
	ARENA_ASSERT_EQ(spmc_owned_remove(q, NULL), -EINVAL);
	ARENA_ASSERT_EQ(spmc_steal(q, NULL), -EINVAL);
	/* Something that is not a deque. */
	ARENA_ASSERT_EQ(spmc_steal((struct spmc __arena *)q->arr[0].data, &v), -EINVAL);
	ARENA_ASSERT_EQ(spmc_destroy(q), 0);
	ARENA_ASSERT_EQ(spmc_owned_add(q, 1), -EINVAL);		/* destroyed */
#ifdef LIBARENA_ASAN
	/* That read the freed deque: the sanitizer says so. */
	arena_stdout("asan-expect: use-after-free read of 4 bytes at 0x%llx", (u64)q + 80);
#endif
	return 0;
}

/* One CPU, random operations: the deque must behave exactly like the model ring. */
#define MODEL_SLOTS	4096
#define MODEL_OPS	30000

u64 __arena_global model[MODEL_SLOTS];

static __noinline int model_op(struct spmc __arena *q, u64 *x, u64 *head, u64 *tail, u64 op)
{
	u64 r = arena_test_rand(x) % 100, v = 0, want;
	int ret;

	if (r < 50) {
		if (*tail - *head >= MODEL_SLOTS - 1)
			return 0;
		ret = spmc_owned_add(q, op);
		if (ret)
			return 100 + -ret;
		model[(*tail)++ % MODEL_SLOTS] = op;
		return 0;
	}
	if (r < 75)
		ret = spmc_owned_remove(q, &v);
	else
		ret = spmc_steal(q, &v);
	if (*head == *tail)
		return ret == -ENOENT ? 0 : 200 + -ret;
	want = r < 75 ? model[--(*tail) % MODEL_SLOTS] : model[(*head)++ % MODEL_SLOTS];
	if (ret || v != want)
		return 300 + -ret;
	return 0;
}

SEC("syscall")
int test_spmc_random_vs_model(struct arena_test_ctx *ctx)
{
	struct spmc __arena *q = spmc_create();
	u64 x = ctx->seed | 1, head = zero, tail = zero, i;
	int ret;

	ARENA_ASSERT(q);
	for (i = zero; i < MODEL_OPS && can_loop; i++) {
		/* Now and then a long run of pushes, so the array grows. */
		if ((i / 1000) % 5 == 4 && tail - head < MODEL_SLOTS - 1) {
			ARENA_ASSERT_EQ(spmc_owned_add(q, i), 0);
			model[tail++ % MODEL_SLOTS] = i;
			continue;
		}
		ret = model_op(q, &x, &head, &tail, i);
		if (ret) {
			arena_stderr("op %llu: mismatch %d", i, ret);
			return ret;
		}
		ARENA_ASSERT_EQ(spmc_count(q), tail - head);
	}
	ARENA_ASSERT_EQ(i, MODEL_OPS);
	arena_stdout("spmc model: %llu operations, %llu values left, %llu grows", i,
		     tail - head, q->grows);
	ARENA_ASSERT_EQ(spmc_destroy(q), 0);
	return 0;
}
