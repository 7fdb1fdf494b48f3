// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The fast allocator (src/heap.bpf.c) compiled natively over mmap: a model check on one
 * "CPU", then threads as CPUs (each its own CPU id) that allocate, free their own
 * objects and each other's (remote frees), while another thread runs maintenance the way
 * the workqueue does, under AddressSanitizer and ThreadSanitizer. Objects stay within
 * the heaps' sizes (at most 64 KiB): larger ones live in the buddy allocator's window,
 * which the host places elsewhere.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libarena/common.h>
#include "check.h"

char libarena_host_arena;

#define NR_TEST_CPUS	4
#define MAX_SIZE	65536u

/* Each test's first step: the allocator state, as arena_heap_refill() would leave it. */
static int setup(void)
{
	struct arena_heap_global *g = (void *)(uintptr_t)arena_heap_global_addr();

	CHECK(host_arena_init() == 0, "no room for the arena at %llx", ARENA_USER_BASE);
	if (g->nr_cpus < NR_TEST_CPUS)
		g->nr_cpus = NR_TEST_CPUS;
	CHECK(arena_heap_maintain() == 0, "the first maintenance pass failed");
	return 0;
}

static u64 pick_size(u64 *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	switch (*x % 8) {
	case 0: return 1 + *x % 16;
	case 7: return 1 + (*x >> 8) % MAX_SIZE;
	default: return 1 + (*x >> 8) % (1u << (4 + *x % 9));
	}
}

/* The first and last bytes of an object (all of a small one) carry its pattern. */
static void stamp(u8 *p, u64 size, u8 tag)
{
	for (u64 i = 0; i < size; i++) {
		if (i == 64 && size > 128)
			i = size - 64;
		p[i] = tag + i;
	}
}

static bool intact(const u8 *p, u64 size, u8 tag)
{
	for (u64 i = 0; i < size; i++) {
		if (i == 64 && size > 128)
			i = size - 64;
		if (p[i] != (u8)(tag + i))
			return false;
	}
	return true;
}

#define LIVE 1024

struct obj {
	u8 *p;
	u64 size;
	u8 tag;
};

/* One CPU: random allocations and frees, every object intact, the count exact. */
static int test_model(void)
{
	static struct obj live[LIVE];
	s64 base;
	u64 x = 42, shortfalls = 0;
	int n = 0, ops = 100000;

	if (setup())
		return 1;
	host_cpu = 0;
	base = arena_heap_outstanding();
	for (int op = 0; op < ops; op++) {
		if (x % 3 && n < LIVE) {
			u64 size = pick_size(&x);
			u8 *p = arena_malloc(size);

			if (!p) {
				/* A non-sleepable caller's reserve ran dry: what the wq is for. */
				shortfalls++;
				CHECK(arena_heap_maintain() == 0, "");
				continue;
			}
			CHECK(((uintptr_t)p & 15) == 0 || size < 16, "%p for %llu bytes", p,
			      (unsigned long long)size);
			live[n] = (struct obj){ p, size, (u8)x };
			stamp(p, size, (u8)x);
			n++;
		} else if (n) {
			int k = x % n;

			CHECK(intact(live[k].p, live[k].size, live[k].tag),
			      "op %d: object %p of %llu bytes was overwritten", op, live[k].p,
			      (unsigned long long)live[k].size);
			CHECK(arena_free(live[k].p) == 0, "op %d: free of %p", op, live[k].p);
			live[k] = live[--n];
		}
		pick_size(&x);
		CHECK(arena_heap_outstanding() == base + n, "op %d: %lld out, %d live", op,
		      (long long)(arena_heap_outstanding() - base), n);
		if (op % 5000 == 0)
			CHECK(arena_heap_maintain() == 0, "");
	}
	while (n) {
		n--;
		CHECK(intact(live[n].p, live[n].size, live[n].tag), "");
		CHECK(arena_free(live[n].p) == 0, "");
	}
	CHECK(arena_heap_outstanding() == base, "%lld left",
	      (long long)(arena_heap_outstanding() - base));
	/* Freeing what is free already, or a pointer into an object, changes nothing. */
	{
		u8 *p = arena_malloc(100);

		CHECK(p, "");
		CHECK(arena_free(p + 16) != 0, "an interior free was taken");
		CHECK(arena_free(p) == 0, "");
		CHECK(arena_heap_outstanding() == base, "");
	}
	printf("    %d operations on one CPU, %llu shortfalls refilled\n", ops,
	       (unsigned long long)shortfalls);
	host_cpu = -1;
	return 0;
}

/*
 * Threads as CPUs. Each allocates, keeps some objects and frees them itself later, and
 * hands others to the next CPU through a mailbox, which frees them there (remote frees).
 * An object's first bytes hold a tag derived from its address.
 */
#define ROUNDS		40000
#define MAILBOX		256
#define KEEP		64

static u64 boxes[NR_TEST_CPUS][MAILBOX];	/* object addresses, 0 when empty */
static int stop_maintenance;
static u64 shortfalls[NR_TEST_CPUS], remote[NR_TEST_CPUS];

static u8 tag_of(const u8 *p)
{
	return (u8)((uintptr_t)p >> 4) ^ 0x5a;
}

static void tag(u8 *p, u64 size)
{
	memset(p, tag_of(p), size < 256 ? size : 256);
}

static bool tagged(const u8 *p, u64 size)
{
	for (u64 i = 0; i < size && i < 256; i++)
		if (p[i] != tag_of(p))
			return false;
	return true;
}

/* Check and free an object another CPU handed over. */
static bool free_handed(u64 v)
{
	u8 *p = (u8 *)(uintptr_t)v;

	return p[0] == tag_of(p) && arena_free(p) == 0;
}

static void *cpu_thread(void *arg)
{
	int cpu = (int)(uintptr_t)arg, n = 0;
	u64 *out = boxes[(cpu + 1) % NR_TEST_CPUS], *in = boxes[cpu];
	struct obj mine[KEEP];
	u64 x = cpu * 7919 + 1;

	host_cpu = cpu;
	for (int r = 0; r < ROUNDS; r++) {
		u64 size = pick_size(&x), v;
		u8 *p;

		v = __atomic_exchange_n(&in[x % MAILBOX], 0, __ATOMIC_ACQUIRE);
		if (v) {
			if (!free_handed(v))
				return (void *)1;
			remote[cpu]++;
		}
		p = arena_malloc(size);
		if (!p) {
			shortfalls[cpu]++;
			sched_yield();
			continue;
		}
		tag(p, size);
		if (x % 4 == 0) {
			v = __atomic_exchange_n(&out[(x >> 8) % MAILBOX], (u64)(uintptr_t)p,
						__ATOMIC_ACQ_REL);
			if (v && !free_handed(v))
				return (void *)1;
		} else if (n < KEEP) {
			mine[n++] = (struct obj){ p, size, 0 };
		} else {
			if (!tagged(mine[x % KEEP].p, mine[x % KEEP].size) ||
			    arena_free(mine[x % KEEP].p))
				return (void *)1;
			mine[x % KEEP] = (struct obj){ p, size, 0 };
		}
	}
	for (int i = 0; i < n; i++)
		if (!tagged(mine[i].p, mine[i].size) || arena_free(mine[i].p))
			return (void *)1;
	return NULL;
}

/* The workqueue's part: maintenance passes while the CPUs run. */
static void *maintenance_thread(void *arg)
{
	u64 passes = 0;

	while (!__atomic_load_n(&stop_maintenance, __ATOMIC_ACQUIRE)) {
		if (arena_heap_maintain())
			return (void *)1;
		passes++;
		usleep(200);
	}
	return (void *)(uintptr_t)(passes ? 0 : 1);
}

static int test_threads(void)
{
	pthread_t t[NR_TEST_CPUS], m;
	s64 base;
	void *ret;
	int bad = 0;
	u64 sf = 0, rf = 0;

	if (setup())
		return 1;
	base = arena_heap_outstanding();
	__atomic_store_n(&stop_maintenance, 0, __ATOMIC_RELEASE);
	CHECK(!pthread_create(&m, NULL, maintenance_thread, NULL), "");
	for (long i = 0; i < NR_TEST_CPUS; i++)
		CHECK(!pthread_create(&t[i], NULL, cpu_thread, (void *)i), "");
	for (int i = 0; i < NR_TEST_CPUS; i++) {
		pthread_join(t[i], &ret);
		bad += ret != NULL;
	}
	__atomic_store_n(&stop_maintenance, 1, __ATOMIC_RELEASE);
	pthread_join(m, &ret);
	CHECK(bad == 0, "%d CPUs found a damaged object or a refused free", bad);
	CHECK(ret == NULL, "maintenance failed");
	/* What is left in the mailboxes is freed from one more CPU. */
	host_cpu = 0;
	for (int c = 0; c < NR_TEST_CPUS; c++)
		for (int k = 0; k < MAILBOX; k++) {
			if (boxes[c][k])
				CHECK(free_handed(boxes[c][k]), "mailbox object %llx",
				      (unsigned long long)boxes[c][k]);
			boxes[c][k] = 0;
		}
	host_cpu = -1;
	/* Remote frees are counted on their span: a collection settles them. */
	CHECK(arena_heap_maintain() == 0, "");
	CHECK(arena_heap_outstanding() == base, "%lld objects out after every free",
	      (long long)(arena_heap_outstanding() - base));
	for (int c = 0; c < NR_TEST_CPUS; c++) {
		sf += shortfalls[c];
		rf += remote[c];
	}
	CHECK(rf > 0, "no remote free happened");
	printf("    %d CPUs x %d rounds: %llu remote frees, %llu shortfalls waited out\n",
	       NR_TEST_CPUS, ROUNDS, (unsigned long long)rf, (unsigned long long)sf);
	return 0;
}

int main(void)
{
	/* Shortfalls log a line each: count them, do not print them. */
	host_begin(true);
	host_run("host", "heap_model", test_model);
	host_run("host", "heap_threads", test_threads);
	return host_summary();
}
