// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* The common layer compiled natively: arena_fls, atomics and ordering under threads. */
#include <pthread.h>
#include <stdlib.h>
#include <libarena/spinlock.h>
#include "check.h"

static int test_fls(void)
{
	CHECK(arena_fls(0) == 0, "");
	for (int i = 0; i < 64; i++) {
		u64 bit = 1ull << i;

		CHECK(arena_fls(bit) == i + 1, "bit %d", i);
		CHECK(arena_fls(bit | (bit - 1)) == i + 1, "bit %d", i);
	}
	/* Against the compiler's count of leading zeros, on random words. */
	srandom(1);
	for (int i = 0; i < 1000000; i++) {
		u64 w = ((u64)random() << 33) ^ ((u64)random() << 11) ^ random();

		w >>= random() % 64;
		CHECK(arena_fls(w) == (w ? 64 - __builtin_clzll(w) : 0), "%#llx",
		      (unsigned long long)w);
	}
	return 0;
}

static int test_atomics(void)
{
	u64 v64 = 5;
	u32 v32 = 7;

	CHECK(cmpxchg(&v64, 5, 6) == 5 && v64 == 6, "");
	CHECK(cmpxchg(&v64, 5, 7) == 6 && v64 == 6, "");
	CHECK(xchg(&v32, 9) == 7 && v32 == 9, "");
	CHECK(atomic_fetch_add(&v32, 1) == 9 && v32 == 10, "");
	CHECK(atomic_fetch_or(&v64, 0x30) == 6 && v64 == 0x36, "");
	CHECK(atomic_fetch_and(&v64, 0x0f) == 0x36 && v64 == 6, "");
	CHECK(atomic_fetch_xor(&v64, 0xff) == 6 && v64 == 0xf9, "");
	atomic_or(&v64, 0x100);
	atomic_and(&v64, 0x1f0);
	atomic_xor(&v64, 0x1);
	CHECK(v64 == 0x1f1, "%#llx", (unsigned long long)v64);
	return 0;
}

#define THREADS 4
#define ROUNDS 200000

static u64 counter_add, counter_cas;

static void *counter_fn(void *arg)
{
	for (int i = 0; i < ROUNDS; i++) {
		u64 old;

		atomic_add(&counter_add, 1);
		do
			old = READ_ONCE(counter_cas);
		while (cmpxchg(&counter_cas, old, old + 1) != old);
	}
	return arg;
}

static int test_parallel_counter(void)
{
	pthread_t t[THREADS];

	for (int i = 0; i < THREADS; i++)
		CHECK(!pthread_create(&t[i], NULL, counter_fn, NULL), "");
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK(counter_add == THREADS * ROUNDS, "%llu", (unsigned long long)counter_add);
	CHECK(counter_cas == THREADS * ROUNDS, "%llu", (unsigned long long)counter_cas);
	return 0;
}

static u64 mp_data[16], mp_flag;
static int mp_bad;

static void *mp_writer(void *arg)
{
	for (u64 i = 1; i <= ROUNDS; i++) {
		WRITE_ONCE(mp_data[i % 16], i);
		/* The data before the flag: pairs with mp_reader()'s acquire. */
		smp_store_release(&mp_flag, i);
	}
	return arg;
}

static void *mp_reader(void *arg)
{
	for (int n = 0; n < ROUNDS; n++) {
		/* The flag before the data: pairs with mp_writer()'s release. */
		u64 f = smp_load_acquire(&mp_flag);

		/* The slot f wrote is at least f; it may already hold a newer value. */
		if (f && READ_ONCE(mp_data[f % 16]) < f)
			__atomic_add_fetch(&mp_bad, 1, __ATOMIC_RELAXED);
	}
	return arg;
}

static int test_message_passing(void)
{
	pthread_t w, r[2];

	CHECK(!pthread_create(&w, NULL, mp_writer, NULL), "");
	for (int i = 0; i < 2; i++)
		CHECK(!pthread_create(&r[i], NULL, mp_reader, NULL), "");
	pthread_join(w, NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(r[i], NULL);
	CHECK(mp_bad == 0, "%d stale reads", mp_bad);
	return 0;
}

int main(void)
{
	host_run("host", "fls", test_fls);
	host_run("host", "atomics", test_atomics);
	host_run("host", "parallel_counter", test_parallel_counter);
	host_run("host", "message_passing", test_message_passing);
	return host_summary();
}
