// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The intrusive MPSC queue: order, a producer caught between its exchange and its link
 * (the consumer stops, keeps the order, loses nothing), bad calls; then producers on
 * every CPU sending to one consumer, every node out exactly once and each producer's
 * nodes in order.
 */
#include <libarena/common.h>
#include <libarena/mpsc.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

struct item {
	struct mpsc_node node;
	u32 producer;
	u32 seq;
};

struct mpsc_queue __arena_global tq;
struct item __arena_global titems[8];

static __always_inline u32 seq_of(struct mpsc_node __arena *n)
{
	return n ? ((struct item __arena *)n)->seq : ~0u;
}

SEC("syscall")
int test_mpsc_order(struct arena_test_ctx *ctx)
{
	struct mpsc_node __arena *n = NULL;
	int i;

	ARENA_ASSERT_EQ(mpsc_init(&tq), 0);
	ARENA_ASSERT_EQ(mpsc_empty(&tq), 1);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), -ENOENT);
	for (i = zero; i < 5 && can_loop; i++) {
		titems[i].seq = i;
		ARENA_ASSERT_EQ(mpsc_push(&tq, &titems[i].node), 0);
	}
	ARENA_ASSERT_EQ(mpsc_empty(&tq), 0);
	/* Two out; three more in behind those already taken. */
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), 0);
	ARENA_ASSERT_EQ(seq_of(n), 0);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), 0);
	ARENA_ASSERT_EQ(seq_of(n), 1);
	for (i = zero; i < 3 && can_loop; i++) {
		titems[5 + i].seq = 5 + i;
		ARENA_ASSERT_EQ(mpsc_push(&tq, &titems[5 + i].node), 0);
	}
	for (i = zero; i < 6 && can_loop; i++) {
		ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), 0);
		ARENA_ASSERT_EQ(seq_of(n), 2 + i);
		ARENA_ASSERT_EQ(n->next, 0);
	}
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), -ENOENT);
	ARENA_ASSERT(!n);
	ARENA_ASSERT_EQ(tq.pops, 8);
	ARENA_ASSERT_EQ(mpsc_empty(&tq), 1);
	return 0;
}

/* A producer between its exchange and its link: a stands behind b, which c follows. */
SEC("syscall")
int test_mpsc_hanging_producer(struct arena_test_ctx *ctx)
{
	struct mpsc_node __arena *n = NULL;
	u64 prev;

	ARENA_ASSERT_EQ(mpsc_init(&tq), 0);
	titems[0].seq = 0;
	titems[1].seq = 1;
	titems[2].seq = 2;
	ARENA_ASSERT_EQ(mpsc_push(&tq, &titems[0].node), 0);
	/* The first half of b's push. */
	titems[1].node.next = MPSC_LINKING;
	prev = xchg(&tq.head, (u64)&titems[1].node);
	ARENA_ASSERT_EQ(mpsc_push(&tq, &titems[2].node), 0);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), -EAGAIN);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), -EAGAIN);
	ARENA_ASSERT_EQ(tq.stalls, 2);
	/* c was reversed already and waits for a and b. */
	ARENA_ASSERT_EQ(tq.later, (u64)&titems[2].node);
	smp_store_release(&titems[1].node.next, prev);	/* b's producer goes on */
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), 0);
	ARENA_ASSERT_EQ(seq_of(n), 0);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), 0);
	ARENA_ASSERT_EQ(seq_of(n), 1);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), 0);
	ARENA_ASSERT_EQ(seq_of(n), 2);
	ARENA_ASSERT_EQ(mpsc_pop(&tq, &n), -ENOENT);
	return 0;
}

SEC("syscall")
int test_mpsc_bad_calls(struct arena_test_ctx *ctx)
{
	u64 addr = 0;

	ARENA_ASSERT_EQ(mpsc_init(NULL), -EINVAL);
	ARENA_ASSERT_EQ(mpsc_push(NULL, &titems[0].node), -EINVAL);
	ARENA_ASSERT_EQ(mpsc_push(&tq, NULL), -EINVAL);
	ARENA_ASSERT_EQ(mpsc_pop_addr(NULL, &addr), -EINVAL);
	ARENA_ASSERT_EQ(mpsc_pop_addr(&tq, NULL), -EINVAL);
	ARENA_ASSERT_EQ(mpsc_empty(NULL), -EINVAL);
	return 0;
}

/*
 * Threads 1 .. 3 each push RACE_NODES nodes of their own; thread 0 pops. Under the
 * guest's PREEMPT_NONE a thread sharing the consumer's CPU runs only after it returns,
 * so the consumer waits only for the producers on other CPUs, and __fini (the same
 * single consumer, later) takes the rest. Each pop checks that its producer's nodes come
 * in order; __fini that each came out exactly once.
 */
#define RACE_THREADS	4
#define RACE_NODES	(1u << 13)
#define RACE_WAIT_NS	(30ull * 1000000000)

struct mpsc_queue __arena_global race_q;
struct item __arena_global race_items[RACE_THREADS][RACE_NODES];
u8 __arena_global race_seen[RACE_THREADS][RACE_NODES];
u32 __arena_global race_next[RACE_THREADS];	/* the seq each producer's next node must have */
u32 __arena_global race_finished[RACE_THREADS];	/* set by each producer after its last push */
u64 __arena_global race_got, race_bad, race_disorder, race_again, race_once;

SEC("syscall")
int parallel_test_mpsc_race__init(struct arena_test_ctx *ctx)
{
	int i;

	ARENA_ASSERT_EQ(mpsc_init(&race_q), 0);
	race_got = race_bad = race_disorder = race_again = race_once = 0;
	for (i = zero; i < RACE_THREADS && can_loop; i++)
		race_next[i] = race_finished[i] = 0;
	return 0;
}

static __noinline int race_take(void)
{
	struct mpsc_node __arena *n = NULL;
	struct item __arena *it;
	int ret;

	ret = mpsc_pop(&race_q, &n);
	if (ret == -EAGAIN)
		race_again++;
	if (ret)
		return ret;
	it = (struct item __arena *)n;
	if (it->producer >= RACE_THREADS || it->seq >= RACE_NODES) {
		race_bad++;
		return 0;
	}
	if (it->seq != race_next[it->producer])
		race_disorder++;
	race_next[it->producer] = it->seq + 1;
	race_seen[it->producer][it->seq]++;
	race_got++;
	return 0;
}

static __noinline int race_producer(u32 p)
{
	struct item __arena *it;
	u32 i;

	if (p >= RACE_THREADS)
		return -EINVAL;
	for (i = zero; i < RACE_NODES && can_loop; i++) {
		it = &race_items[p][i];
		it->producer = p;
		it->seq = i;
		if (mpsc_push(&race_q, &it->node))
			return -EIO;
	}
	/* After the pushes' exchanges (full barriers): a pop that sees this sees them. */
	smp_store_release(&race_finished[p], 1);
	return i == RACE_NODES ? 0 : -E2BIG;
}

/* Whether the producers that run beside us (thread k on CPU k % nr_cpus) are done. */
static __always_inline bool others_done(struct arena_test_ctx *ctx)
{
	u32 k;

	for (k = 1; k < RACE_THREADS; k++) {
		/* Pairs with the producer's release: seen finished, its pushes are seen too. */
		if (ctx->nr_cpus && k % ctx->nr_cpus && !smp_load_acquire(&race_finished[k]))
			return false;
	}
	return true;
}

static __noinline int race_consumer(struct arena_test_ctx *ctx)
{
	u64 begin = bpf_ktime_get_ns(), start = begin, seen = race_got;
	bool done;

	while (can_loop) {
		/* Read before the pop: an empty queue then means they are all out. */
		done = others_done(ctx);
		if (race_take() == -ENOENT && done)
			return 0;
		/*
		 * Give up when no node came for RACE_WAIT_NS, however long the race, or
		 * after 50 s in all: the guest's soft-lockup watchdog panics at 60.
		 */
		if (race_got != seen) {
			seen = race_got;
			start = bpf_ktime_get_ns();
		} else if (bpf_ktime_get_ns() - start > RACE_WAIT_NS ||
			   bpf_ktime_get_ns() - begin > 50ull * 1000000000) {
			arena_stderr("consumer: gave up, no node for %llu ms, %llu in all",
				     (bpf_ktime_get_ns() - start) / 1000000, race_got);
			return -ETIMEDOUT;
		}
	}
	/*
	 * The loop budget ran out first (a producer's vCPU stalled for a second or more):
	 * not a failure, as __fini, the same single consumer later, takes the rest and
	 * checks every node.
	 */
	return 0;
}

SEC("syscall")
int parallel_test_mpsc_race__0(struct arena_test_ctx *ctx) { return race_consumer(ctx); }
SEC("syscall")
int parallel_test_mpsc_race__1(struct arena_test_ctx *ctx) { return race_producer(1); }
SEC("syscall")
int parallel_test_mpsc_race__2(struct arena_test_ctx *ctx) { return race_producer(2); }
SEC("syscall")
int parallel_test_mpsc_race__3(struct arena_test_ctx *ctx) { return race_producer(3); }

SEC("syscall")
int parallel_test_mpsc_race__fini(struct arena_test_ctx *ctx)
{
	u64 before = race_got;
	u32 p, i;

	while (!race_take() && can_loop)
		;
	for (p = 1; p < RACE_THREADS; p++)
		for (i = zero; i < RACE_NODES && can_loop; i++)
			if (race_seen[p & 3][i] == 1)
				race_once++;
	arena_stdout(
		     "mpsc race: %u producers, %llu nodes out exactly once (%llu while they pushed), the consumer stopped at a link %llu times",
		     RACE_THREADS - 1, race_once, before, race_again);
	ARENA_ASSERT_EQ(race_bad, 0);
	ARENA_ASSERT_EQ(race_disorder, 0);
	ARENA_ASSERT_EQ(race_got, (RACE_THREADS - 1) * RACE_NODES);
	ARENA_ASSERT_EQ(race_once, (RACE_THREADS - 1) * RACE_NODES);
	ARENA_ASSERT_EQ(mpsc_empty(&race_q), 1);
	return 0;
}
