// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The bounded MPMC queue: every call and error on one CPU, capacities rounded up, many
 * laps around the ring, random operations against a model, a queue user space wrote
 * over; then threads on every CPU that each push tagged values and pop whatever comes,
 * every value out exactly once and in each producer's order.
 */
#include <libarena/common.h>
#include <libarena/mpmcq.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

SEC("syscall")
int test_mpmcq_push_pop(struct arena_test_ctx *ctx)
{
	struct mpmcq __arena *q = mpmcq_create(3);
	u64 v = 0;
	int i;

	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(mpmcq_capacity(q), 4);		/* rounded up */
	ARENA_ASSERT_EQ(mpmcq_pop(q, &v), -ENOENT);
	for (i = zero; i < 4 && can_loop; i++)
		ARENA_ASSERT_EQ(mpmcq_push(q, 100 + i), 0);
	ARENA_ASSERT_EQ(mpmcq_push(q, 104), -ENOSPC);
	ARENA_ASSERT_EQ(mpmcq_count(q), 4);
	for (i = zero; i < 4 && can_loop; i++) {
		ARENA_ASSERT_EQ(mpmcq_pop(q, &v), 0);
		ARENA_ASSERT_EQ(v, 100 + i);			/* FIFO */
	}
	ARENA_ASSERT_EQ(mpmcq_pop(q, &v), -ENOENT);
	ARENA_ASSERT_EQ(mpmcq_count(q), 0);
	ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);

	q = mpmcq_create(1);
	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(mpmcq_capacity(q), 2);
	ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
	return 0;
}

/* 1,000 laps of a ring of 8, half full: positions and sequence numbers keep agreeing. */
SEC("syscall")
int test_mpmcq_laps(struct arena_test_ctx *ctx)
{
	struct mpmcq __arena *q = mpmcq_create(8);
	u64 v = 0, in = 0, out = 0;
	int i;

	ARENA_ASSERT(q);
	for (i = zero; i < 4 && can_loop; i++)
		ARENA_ASSERT_EQ(mpmcq_push(q, in++), 0);
	for (i = zero; i < 8000 && can_loop; i++) {
		ARENA_ASSERT_EQ(mpmcq_push(q, in++), 0);
		ARENA_ASSERT_EQ(mpmcq_pop(q, &v), 0);
		ARENA_ASSERT_EQ(v, out++);
	}
	ARENA_ASSERT_EQ(i, 8000);
	ARENA_ASSERT_EQ(mpmcq_count(q), 4);
	ARENA_ASSERT_EQ(q->tail, 8004);
	ARENA_ASSERT_EQ(q->head, 8000);
	ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
	return 0;
}

/* The largest queue arena_malloc can hold, filled and emptied. */
SEC("syscall")
int test_mpmcq_largest(struct arena_test_ctx *ctx)
{
	struct mpmcq __arena *q = mpmcq_create(MPMCQ_MAX_CAPACITY);
	u64 v = 0;
	u32 i;

	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(mpmcq_capacity(q), MPMCQ_MAX_CAPACITY);
	for (i = zero; i < MPMCQ_MAX_CAPACITY && can_loop; i++)
		ARENA_ASSERT_EQ(mpmcq_push(q, i), 0);
	ARENA_ASSERT_EQ(mpmcq_push(q, 0), -ENOSPC);
	ARENA_ASSERT_EQ(mpmcq_count(q), MPMCQ_MAX_CAPACITY);
	for (i = zero; i < MPMCQ_MAX_CAPACITY && can_loop; i++) {
		ARENA_ASSERT_EQ(mpmcq_pop(q, &v), 0);
		ARENA_ASSERT_EQ(v, i);
	}
	ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
	return 0;
}

SEC("syscall")
int test_mpmcq_bad_calls(struct arena_test_ctx *ctx)
{
	struct mpmcq __arena *q;
	u64 v = 0;

	ARENA_ASSERT(!mpmcq_create(0));
	ARENA_ASSERT(!mpmcq_create(MPMCQ_MAX_CAPACITY + 1));
	ARENA_ASSERT_EQ(mpmcq_push(NULL, 1), -EINVAL);
	ARENA_ASSERT_EQ(mpmcq_pop(NULL, &v), -EINVAL);
	ARENA_ASSERT_EQ(mpmcq_count(NULL), -EINVAL);
	ARENA_ASSERT_EQ(mpmcq_capacity(NULL), -EINVAL);
	ARENA_ASSERT_EQ(mpmcq_destroy(NULL), -EINVAL);
	q = mpmcq_create(16);
	ARENA_ASSERT(q);
	ARENA_ASSERT_EQ(mpmcq_pop(q, NULL), -EINVAL);
	/* Damage: cells that say their position moved on while the head and tail did not. */
	ARENA_ASSERT_EQ(mpmcq_push(q, 7), 0);
	q->cells[0].seq = 5;
	ARENA_ASSERT_EQ(mpmcq_pop(q, &v), -EFAULT);
	q->cells[1].seq = 9;
	ARENA_ASSERT_EQ(mpmcq_push(q, 8), -EFAULT);
	ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
#ifndef LIBARENA_ASAN
	/*
	 * A destroyed queue is refused. Not in the sanitizer build, where the read of the
	 * freed queue is itself reported or not as the quarantine's state decides.
	 */
	ARENA_ASSERT_EQ(mpmcq_push(q, 1), -EINVAL);
	ARENA_ASSERT_EQ(mpmcq_destroy(q), -EINVAL);
#endif
	return 0;
}

/* Random pushes and pops against a model ring, on queues of 1 .. 64 values. */
#define MODEL_OPS	20000
u64 __arena_global model[64];

SEC("syscall")
int test_mpmcq_random(struct arena_test_ctx *ctx)
{
	u64 seed = ctx->seed | 1, head = 0, tail = 0, next = 1, v = 0, cap;
	struct mpmcq __arena *q = NULL;
	int i, ret;

	for (i = zero; i < MODEL_OPS && can_loop; i++) {
		arena_test_rand(&seed);
		if (!q || seed % 500 == 0) {
			if (q)
				ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
			q = mpmcq_create(1 + (seed >> 8) % 64);
			ARENA_ASSERT(q);
			head = tail = 0;
			continue;
		}
		cap = mpmcq_capacity(q);
		if ((seed >> 16) % 100 < 55) {
			ret = mpmcq_push(q, next);
			if (tail - head == cap) {
				ARENA_ASSERT_EQ(ret, -ENOSPC);
			} else {
				ARENA_ASSERT_EQ(ret, 0);
				model[tail++ & 63] = next++;
			}
		} else {
			ret = mpmcq_pop(q, &v);
			if (head == tail) {
				ARENA_ASSERT_EQ(ret, -ENOENT);
			} else {
				ARENA_ASSERT_EQ(ret, 0);
				ARENA_ASSERT_EQ(v, model[head++ & 63]);
			}
		}
		ARENA_ASSERT_EQ(mpmcq_count(q), tail - head);
	}
	ARENA_ASSERT_EQ(i, MODEL_OPS);
	if (q)
		ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
	return 0;
}

/*
 * Every thread pushes RACE_VALUES values tagged with its index and pops as it goes (when
 * the queue is full, and after each push now and then), so producers and consumers race
 * on every CPU without any thread waiting for another. Each pop is counted in race_seen;
 * each thread checks that the values of every producer reach it in increasing order;
 * __fini drains the rest and checks that every value came out exactly once.
 */
#define RACE_THREADS	4
#define RACE_VALUES	(1u << 14)

u64 __arena_global race_q;
u8 __arena_global race_seen[RACE_THREADS][RACE_VALUES];
u64 __arena_global race_last[RACE_THREADS][RACE_THREADS];
u64 __arena_global race_disorder, race_bad, race_full[RACE_THREADS];
u64 __arena_global race_popped[RACE_THREADS];

SEC("syscall")
int parallel_test_mpmcq_race__init(struct arena_test_ctx *ctx)
{
	struct mpmcq __arena *q = mpmcq_create(128);
	int i, j;

	ARENA_ASSERT(q);
	race_q = (u64)q;
	race_disorder = race_bad = 0;
	for (i = zero; i < RACE_THREADS && can_loop; i++) {
		race_full[i] = race_popped[i] = 0;
		for (j = zero; j < RACE_THREADS && can_loop; j++)
			race_last[i][j] = ~0ull;
	}
	return 0;
}

/* One value out: counted, and in order for its producer as this thread sees it. */
static __noinline void race_take(u32 me, u64 v)
{
	u32 p = v >> 32, i = (u32)v;

	if (p >= RACE_THREADS || i >= RACE_VALUES || me >= RACE_THREADS) {
		race_bad++;
		return;
	}
	if (race_last[me][p] != ~0ull && i <= race_last[me][p])
		race_disorder++;
	race_last[me][p] = i;
	race_seen[p][i]++;
	race_popped[me]++;
}

#define RACE_PUSH_WAIT_NS	(30ull * 1000000000)

/* Push val; when the queue is full, make room ourselves, whatever the others are doing. */
static __noinline int race_push_round(struct mpmcq __arena *q, u32 me, u64 val)
{
	int ret = -ENOSPC;
	u64 v = 0;
	u32 k;

	for (k = zero; k < (1u << 20) && can_loop; k++) {
		ret = mpmcq_push(q, val);
		if (ret != -ENOSPC)
			return ret;
		race_full[me & (RACE_THREADS - 1)]++;
		if (!mpmcq_pop(q, &v))
			race_take(me, v);
	}
	return ret;
}

/*
 * Rounds with a loop budget of their own, for up to RACE_PUSH_WAIT_NS: a thread whose
 * vCPU stalls between claiming a slot and handing it over keeps the queue full (and
 * empty to pops) until it runs again, and TCG may leave a vCPU without time for long.
 */
static __noinline int race_push(struct mpmcq __arena *q, u32 me, u64 val)
{
	u64 start = bpf_ktime_get_ns();
	int ret = -ENOSPC;
	u32 r;

	for (r = zero; r < 100000 && can_loop; r++) {
		ret = race_push_round(q, me, val);
		if (ret != -ENOSPC || bpf_ktime_get_ns() - start > RACE_PUSH_WAIT_NS)
			break;
	}
	return ret;
}

static __noinline int race_thread(u32 me)
{
	struct mpmcq __arena *q = (struct mpmcq __arena *)race_q;
	u64 v = 0;
	int ret;
	u32 i;

	if (me >= RACE_THREADS)
		return -EINVAL;
	for (i = zero; i < RACE_VALUES && can_loop; i++) {
		ret = race_push(q, me, (u64)me << 32 | i);
		if (ret) {
			arena_stderr("thread %u: push %u: %d", me, i, ret);
			return -EIO;
		}
		if (i % 3 == me % 3 && !mpmcq_pop(q, &v))
			race_take(me, v);
	}
	return i == RACE_VALUES ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_mpmcq_race__0(struct arena_test_ctx *ctx) { return race_thread(0); }
SEC("syscall")
int parallel_test_mpmcq_race__1(struct arena_test_ctx *ctx) { return race_thread(1); }
SEC("syscall")
int parallel_test_mpmcq_race__2(struct arena_test_ctx *ctx) { return race_thread(2); }
SEC("syscall")
int parallel_test_mpmcq_race__3(struct arena_test_ctx *ctx) { return race_thread(3); }

/* __fini's sums: in arena memory, whose values the verifier does not follow. */
u64 __arena_global race_left, race_once, race_full_all, race_racing;

SEC("syscall")
int parallel_test_mpmcq_race__fini(struct arena_test_ctx *ctx)
{
	struct mpmcq __arena *q = (struct mpmcq __arena *)race_q;
	u64 v = 0;
	u32 p, i;

	race_left = race_once = race_full_all = race_racing = 0;
	/* What is left comes out in order too: __fini counts as a fifth consumer. */
	while (!mpmcq_pop(q, &v) && can_loop) {
		p = v >> 32;
		i = (u32)v;
		if (p >= RACE_THREADS || i >= RACE_VALUES) {
			race_bad++;
			continue;
		}
		race_seen[p][i]++;
		race_left++;
	}
	for (p = zero; p < RACE_THREADS && can_loop; p++) {
		race_full_all += race_full[p];
		race_racing += race_popped[p];
		for (i = zero; i < RACE_VALUES && can_loop; i++)
			if (race_seen[p][i] == 1)
				race_once++;
	}
	arena_stdout(
		     "mpmcq race: %u threads, %llu values out exactly once (%llu popped while racing, %llu left), queue full %llu times",
		     RACE_THREADS, race_once, race_racing, race_left, race_full_all);
	ARENA_ASSERT_EQ(race_bad, 0);
	ARENA_ASSERT_EQ(race_disorder, 0);
	ARENA_ASSERT_EQ(race_once, RACE_THREADS * RACE_VALUES);
	ARENA_ASSERT_EQ(race_racing + race_left, RACE_THREADS * RACE_VALUES);
	ARENA_ASSERT_EQ(mpmcq_count(q), 0);
	ARENA_ASSERT_EQ(mpmcq_destroy(q), 0);
	return 0;
}
