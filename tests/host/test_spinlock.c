// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The arena spin lock compiled natively, under AddressSanitizer and ThreadSanitizer:
 * threads count under it with random timeouts down to a microsecond, so waiters give up
 * while the lock is handed on (and sometimes get it as they mark: the race the mark's
 * atomic add settles); a holder that never lets go, with every thread timing out behind
 * it; and single-threaded, a model of the queue against random hand-overs and marks.
 *
 * HOST_FUZZ_OPS=N sets the model's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/spinlock.h>
#include "check.h"

char libarena_host_arena;

#define THREADS		4
#ifdef __SANITIZE_THREAD__
#define ROUNDS		5000
#else
#define ROUNDS		8000
#endif

static arena_spinlock_t lock;
static u64 count_a, count_b;
static int inside, overlaps;
static u64 done[THREADS], gave_up[THREADS], late[THREADS];

static void *count_thread(void *arg)
{
	long t = (long)arg;
	u64 seed = 0x9e3779b97f4a7c15ull * (t + 1), timeout;

	host_cpu = t;
	while (done[t] < ROUNDS) {
		/* Half the threads give up quickly now and then. */
		timeout = ARENA_SPIN_TIMEOUT_NS;
		if (t % 2 && host_rnd(&seed) % 4 == 0)
			timeout = host_rnd(&seed) % 20000;
		if (arena_spin_lock_timeout(&lock, timeout)) {
			gave_up[t]++;
			continue;
		}
		if (__atomic_exchange_n(&inside, 1, __ATOMIC_RELAXED))
			__atomic_fetch_add(&overlaps, 1, __ATOMIC_RELAXED);
		count_a++;
		if (host_rnd(&seed) % 16 == 0)
			sched_yield();		/* a holder descheduled: waiters time out */
		count_b++;
		__atomic_store_n(&inside, 0, __ATOMIC_RELAXED);
		arena_spin_unlock(&lock);
		done[t]++;
	}
	return NULL;
}

static int test_counter(void)
{
	pthread_t th[THREADS];
	u64 sum = 0, timeouts = 0;
	long t;

	memset(&lock, 0, sizeof(lock));
	for (t = 0; t < THREADS; t++)
		CHECK(!pthread_create(&th[t], NULL, count_thread, (void *)t), "");
	for (t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (t = 0; t < THREADS; t++) {
		sum += done[t];
		timeouts += gave_up[t];
	}
	printf("    %d threads, %llu increments, %llu waits given up\n", THREADS, sum, timeouts);
	CHECK(overlaps == 0, "%d sections overlapped", overlaps);
	CHECK(count_a == sum && count_b == sum, "%llu, %llu, want %llu", count_a, count_b, sum);
	CHECK(lock.timeouts == timeouts, "lock counted %u, threads %llu", lock.timeouts,
	      timeouts);
	CHECK(!arena_spin_is_locked(&lock) && !(lock.state >> 32),
	      "left %llx, next %u", lock.state, lock.next);
	return 0;
}

/* A holder that never lets go: every waiter times out, then it lets go and all is free. */
static void *stuck_thread(void *arg)
{
	long t = (long)arg;
	int i;

	host_cpu = t;
	for (i = 0; i < 50; i++)
		if (arena_spin_lock_timeout(&lock, 200000) != -ETIMEDOUT)
			__atomic_fetch_add(&late[t], 1, __ATOMIC_RELAXED);
	return NULL;
}

static int test_stuck_holder(void)
{
	pthread_t th[THREADS];
	long t;

	memset(&lock, 0, sizeof(lock));
	memset(late, 0, sizeof(late));
	CHECK(arena_spin_trylock(&lock) == 0, "");
	for (t = 0; t < THREADS; t++)
		CHECK(!pthread_create(&th[t], NULL, stuck_thread, (void *)t), "");
	for (t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (t = 0; t < THREADS; t++)
		CHECK(late[t] == 0, "thread %ld got a lock that was held", t);
	CHECK(lock.timeouts == THREADS * 50, "%u timeouts", lock.timeouts);
	/* Waiters marked their tickets until ARENA_SPIN_QUEUE were out; then took none. */
	CHECK(lock.next == ARENA_SPIN_QUEUE, "next %u", lock.next);
	CHECK(lock.state >> 32 == 0xfffffffeull, "marks %llx", lock.state >> 32);
	arena_spin_unlock(&lock);
	CHECK(!arena_spin_is_locked(&lock) && !(lock.state >> 32),
	      "left %llx, next %u", lock.state, lock.next);
	CHECK(arena_spin_lock(&lock) == 0, "");
	arena_spin_unlock(&lock);
	return 0;
}

/*
 * One thread, a model: tickets out are served .. next - 1, each waiting or gone. Random
 * steps take a ticket (as a waiter would), mark one that waits (its timeout), or hand
 * the lock on; the lock's state must match the model after each.
 */
static int test_model(void)
{
	const char *s = getenv("HOST_FUZZ_OPS"), *sd = getenv("HOST_FUZZ_SEED");
	long ops = s ? atol(s) : 1000000, op;
	u64 seed = sd ? strtoull(sd, NULL, 0) : 0x1234567ull;
	bool gone[1u << 16] = { false };	/* by ticket & 0xffff */
	u32 served = 0xfffff000u, next = served + 1, t, k;
	u64 want_marks;

	memset(&lock, 0, sizeof(lock));
	lock.state = served;
	lock.next = next;		/* served is held */
	for (op = 0; op < ops; op++) {
		u64 r = host_rnd(&seed) % 3;

		if (served == next) {
			/* Free: nobody waits and nothing is marked; take it as trylock does. */
			CHECK(!arena_spin_is_locked(&lock), "op %ld", op);
			CHECK(arena_spin_trylock(&lock) == 0, "op %ld", op);
			next++;
		} else if (r == 0 && next - served < ARENA_SPIN_QUEUE) {
			CHECK(__sync_val_compare_and_swap(&lock.next, next, next + 1) == next, "");
			gone[next++ & 0xffff] = false;
		} else if (r == 1 && next - served > 1) {
			t = served + 1 + host_rnd(&seed) % (next - served - 1);
			if (gone[t & 0xffff])
				continue;
			lock.state += __arena_spin_mark(t);
			gone[t & 0xffff] = true;
		} else if (r == 2) {
			__arena_spin_release(&lock);
			do
				served++;
			while (served != next && gone[served & 0xffff]);
		}
		want_marks = 0;
		for (k = served + 1; served != next && k != next; k++)
			if (gone[k & 0xffff])
				want_marks |= __arena_spin_mark(k);
		CHECK((u32)lock.state == served && lock.next == next &&
		      (lock.state & ~0xffffffffull) == want_marks,
		      "op %ld: state %llx next %u, want %x %u %llx", op, lock.state, lock.next,
		      served, next, want_marks);
	}
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("spinlock", "counter", test_counter);
	host_run("spinlock", "stuck_holder", test_stuck_holder);
	host_run("spinlock", "model", test_model);
	return host_summary();
}
