// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The intrusive MPSC queue compiled natively: a producer caught between its exchange and
 * its link (the consumer must stop, keep the order and lose nothing), random pushes and
 * pops against a model with such producers left hanging at random, then producers on
 * several threads against one consumer, every node out exactly once and each producer's
 * nodes in order, under AddressSanitizer and ThreadSanitizer.
 *
 * HOST_FUZZ_OPS=N sets the fuzzer's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/mpsc.h>
#include "check.h"

char libarena_host_arena;

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS	200000
#define RACE_NODES	50000
#else
#define DEFAULT_OPS	1000000
#define RACE_NODES	200000
#endif

struct item {
	struct mpsc_node node;
	u32 producer;
	u32 seq;
};

/* The first half of a push: the node is reachable, its link not yet written. */
static u64 push_half(struct mpsc_queue *q, struct item *it)
{
	__atomic_store_n(&it->node.next, MPSC_LINKING, __ATOMIC_RELAXED);
	return __atomic_exchange_n(&q->head, (u64)&it->node, __ATOMIC_SEQ_CST);
}

static int test_hanging_producer(void)
{
	struct mpsc_queue q;
	struct item a = { .seq = 1 }, b = { .seq = 2 }, c = { .seq = 3 };
	struct mpsc_node *n;
	u64 prev;

	CHECK(mpsc_init(&q) == 0, "");
	CHECK(mpsc_empty(&q) == 1, "");
	CHECK(mpsc_pop(&q, &n) == -ENOENT && !n, "");
	CHECK(mpsc_push(&q, &a.node) == 0, "");
	prev = push_half(&q, &b);			/* b's producer stalls */
	CHECK(mpsc_push(&q, &c.node) == 0, "");
	/* a is behind b's missing link: nothing may come out, c least of all. */
	CHECK(mpsc_pop(&q, &n) == -EAGAIN, "");
	CHECK(mpsc_pop(&q, &n) == -EAGAIN, "");
	CHECK(q.stalls == 2 && q.later == (u64)&c.node, "stalls %llu", q.stalls);
	CHECK(mpsc_empty(&q) == 0, "");
	__atomic_store_n(&b.node.next, prev, __ATOMIC_RELEASE);	/* it goes on */
	CHECK(mpsc_pop(&q, &n) == 0 && n == &a.node, "");
	CHECK(mpsc_pop(&q, &n) == 0 && n == &b.node, "");
	CHECK(mpsc_pop(&q, &n) == 0 && n == &c.node, "");
	CHECK(mpsc_pop(&q, &n) == -ENOENT, "");
	CHECK(mpsc_empty(&q) == 1 && q.pops == 3, "");
	CHECK(mpsc_push(NULL, &a.node) == -EINVAL && mpsc_push(&q, NULL) == -EINVAL, "");
	CHECK(mpsc_pop_addr(&q, NULL) == -EINVAL && mpsc_init(NULL) == -EINVAL, "");
	return 0;
}

/*
 * One thread, a model: pushes, pops and now and then a push left half done (finished
 * some operations later). What comes out must be the model's oldest, or -EAGAIN exactly
 * when the oldest not yet out is behind a link still missing.
 */
#define FUZZ_ITEMS	4096

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS"), *sd = getenv("HOST_FUZZ_SEED");
	long ops = s ? atol(s) : DEFAULT_OPS, op;
	u64 seed = sd ? strtoull(sd, NULL, 0) : 0xabcdull, prev = 0;
	static struct item items[FUZZ_ITEMS];
	static u32 model[FUZZ_ITEMS];		/* indexes of queued items, oldest first */
	u32 head = 0, tail = 0, next = 0, hanging = ~0u, hang_pos = 0;
	struct mpsc_queue q;
	struct mpsc_node *n;
	int ret;

	mpsc_init(&q);
	for (op = 0; op < ops; op++) {
		u64 r = host_rnd(&seed) % 100;

		if (hanging != ~0u && r < 5) {
			__atomic_store_n(&items[hanging].node.next, prev, __ATOMIC_RELEASE);
			hanging = ~0u;
		} else if (r < 50 && tail - head < FUZZ_ITEMS) {
			struct item *it = &items[next % FUZZ_ITEMS];

			it->seq = next;
			if (hanging == ~0u && r < 10) {
				prev = push_half(&q, it);
				hanging = next % FUZZ_ITEMS;
				hang_pos = tail;
			} else {
				CHECK(mpsc_push(&q, &it->node) == 0, "");
			}
			model[tail++ % FUZZ_ITEMS] = next++;
		} else {
			ret = mpsc_pop(&q, &n);
			if (head == tail) {
				CHECK(ret == -ENOENT, "op %ld: pop from empty: %d", op, ret);
			} else if (ret == -EAGAIN) {
				/* Only a missing link may hold the oldest back. */
				CHECK(hanging != ~0u && hang_pos >= head,
				      "op %ld: -EAGAIN with no push half done before it", op);
			} else {
				CHECK(ret == 0, "op %ld: pop: %d", op, ret);
				CHECK(((struct item *)n)->seq == model[head % FUZZ_ITEMS],
				      "op %ld: got %u, want %u", op, ((struct item *)n)->seq,
				      model[head % FUZZ_ITEMS]);
				head++;
			}
		}
	}
	return 0;
}

/* Racing: PRODUCERS push their nodes; the main thread is the consumer. */
#define PRODUCERS	4

static struct mpsc_queue race_q;
static struct item *race_items;

static void *producer(void *arg)
{
	long p = (long)arg;
	u32 i;

	for (i = 0; i < RACE_NODES; i++) {
		struct item *it = &race_items[p * RACE_NODES + i];

		it->producer = p;
		it->seq = i;
		mpsc_push(&race_q, &it->node);
		if (i % 64 == 0)
			sched_yield();
	}
	return NULL;
}

static int test_race(void)
{
	pthread_t th[PRODUCERS];
	u32 last[PRODUCERS], got = 0, i;
	long t, again = 0;
	struct mpsc_node *n;
	u8 *seen;
	int ret;

	race_items = calloc(PRODUCERS * RACE_NODES, sizeof(*race_items));
	seen = calloc(PRODUCERS * RACE_NODES, 1);
	CHECK(race_items && seen, "");
	mpsc_init(&race_q);
	for (t = 0; t < PRODUCERS; t++) {
		last[t] = ~0u;
		CHECK(!pthread_create(&th[t], NULL, producer, (void *)t), "");
	}
	while (got < PRODUCERS * RACE_NODES) {
		ret = mpsc_pop(&race_q, &n);
		if (ret == -EAGAIN)
			again++;
		if (ret) {
			sched_yield();
			continue;
		}
		struct item *it = (struct item *)n;

		CHECK(it->producer < PRODUCERS && it->seq < RACE_NODES, "a node not pushed");
		CHECK(last[it->producer] == ~0u || it->seq == last[it->producer] + 1,
		      "producer %u: %u after %u", it->producer, it->seq, last[it->producer]);
		last[it->producer] = it->seq;
		seen[it->producer * RACE_NODES + it->seq]++;
		got++;
	}
	for (t = 0; t < PRODUCERS; t++)
		pthread_join(th[t], NULL);
	printf("    %d producers, %u nodes; the consumer stopped at a link %ld times\n",
	       PRODUCERS, got, again);
	for (i = 0; i < PRODUCERS * RACE_NODES; i++)
		CHECK(seen[i] == 1, "node %u came out %d times", i, seen[i]);
	CHECK(mpsc_pop(&race_q, &n) == -ENOENT, "");
	free(race_items);
	free(seen);
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("mpsc", "hanging_producer", test_hanging_producer);
	host_run("mpsc", "fuzz", test_fuzz);
	host_run("mpsc", "race", test_race);
	return host_summary();
}
