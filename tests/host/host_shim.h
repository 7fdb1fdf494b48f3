/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Force-included when a library source (src/X.bpf.c) is compiled natively for the host
 * tests: stands in for the few BPF helpers the sources call.
 */
#ifndef __LIBARENA_HOST_SHIM_H
#define __LIBARENA_HOST_SHIM_H

#include <sched.h>
#include <stdio.h>

/* Where the library's log lines go in host tests (check.h sets it; tests may mute it). */
extern FILE *host_log_file;
#define ARENA_HOST_STDERR (host_log_file ? host_log_file : stderr)

/* A descheduled lock holder would make spinners time out: yield instead. */
#define arena_cpu_relax() sched_yield()

/* Before the library's headers: inline code there (the spin lock) calls these. */
#include <stdint.h>
#include <time.h>

static inline uint64_t bpf_ktime_get_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline void bpf_preempt_disable(void) { }
static inline void bpf_preempt_enable(void) { }

#include <libarena/common.h>

/* Tests make threads stand for CPUs by setting host_cpu (check.h). */
extern __thread int host_cpu;

static inline u32 bpf_get_smp_processor_id(void)
{
	int cpu = host_cpu >= 0 ? host_cpu : sched_getcpu();

	return cpu < 0 ? 0 : cpu;
}

/*
 * The arena kfuncs over mmap: pages at a given address, or anywhere in a region of our
 * own; MAP_FIXED_NOREPLACE fails, as the kernel does, where pages exist already.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define SEC(name)
extern char libarena_host_arena;
#define arena libarena_host_arena

/*
 * Pages the kernel would place anywhere come from the top of the 4 GiB "arena" that
 * holds our globals, above the allocator's window: first fit from a moving cursor, and
 * reused once freed, as the kernel reuses arena pages (the model test maps far more runs
 * over its life than this region holds). One state byte a page, shared by every
 * compilation unit (weak), under one lock.
 */
#define HOST_RUNS_OFF 0xd0000000ull
#define HOST_RUNS_PAGES (((1ull << 32) - HOST_RUNS_OFF) / 4096)

enum {
	HOST_RUN_UNTOUCHED,	/* never mapped by us: may be someone else's */
	HOST_RUN_FREE,		/* ours, zeroes read-only: MAP_FIXED may replace */
	HOST_RUN_LIVE,		/* handed out */
	HOST_RUN_FOREIGN,	/* MAP_FIXED_NOREPLACE failed: someone else's */
};

__weak u8 host_runs_state[HOST_RUNS_PAGES];
__weak u64 host_runs_cursor;
__weak pthread_mutex_t host_runs_lock = PTHREAD_MUTEX_INITIALIZER;

static inline u64 host_runs_base(void)
{
	return ((u64)(uintptr_t)&libarena_host_arena & ~0xffffffffull) + HOST_RUNS_OFF;
}

static inline void *host_runs_addr(u64 page)
{
	return (void *)(uintptr_t)(host_runs_base() + page * 4096);
}

static inline bool host_in_runs(const void *addr)
{
	u64 a = (u64)(uintptr_t)addr;

	return a >= host_runs_base() && a < host_runs_base() + HOST_RUNS_PAGES * 4096;
}

/* First page of the first run of n usable pages at or after the cursor, or -1. */
static inline s64 host_runs_find(u64 n)
{
	u64 len = 0, i;

	for (u64 k = 0; k < HOST_RUNS_PAGES + n; k++) {
		i = (host_runs_cursor + k) % HOST_RUNS_PAGES;
		/* A run is contiguous: it does not wrap around the region's end. */
		if (!i)
			len = 0;
		if (host_runs_state[i] == HOST_RUN_LIVE ||
		    host_runs_state[i] == HOST_RUN_FOREIGN)
			len = 0;
		else if (++len == n)
			return i + 1 - n;
	}
	return -1;
}

/*
 * Map pages [first, first + n), all untouched, read-only zeroes without replacing
 * anything. Where that fails, find page by page which are someone else's. 0 if they
 * are all ours now, 1 if some were not (search again), -1 on another error.
 */
static inline int host_runs_claim(u64 first, u64 n)
{
	void *addr = host_runs_addr(first), *p;
	int ret = 0;

	p = mmap(addr, n * 4096, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == addr) {
		memset(&host_runs_state[first], HOST_RUN_FREE, n);
		return 0;
	}
	if (p != MAP_FAILED)
		munmap(p, n * 4096);	/* no NOREPLACE: the address was a hint */
	else if (errno != EEXIST)
		return -1;
	for (u64 i = first; i < first + n; i++) {
		addr = host_runs_addr(i);
		p = mmap(addr, 4096, PROT_READ,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p == addr) {
			host_runs_state[i] = HOST_RUN_FREE;
			continue;
		}
		if (p != MAP_FAILED)
			munmap(p, 4096);
		else if (errno != EEXIST)
			return -1;
		host_runs_state[i] = HOST_RUN_FOREIGN;
		ret = 1;
	}
	return ret;
}

/* Like the kernel's: anywhere free in the region, NULL only when no range fits. */
static inline void *host_runs_alloc(u32 pages)
{
	void *addr = NULL, *p;
	u64 i, j;
	s64 first;
	int err;

	if (!pages || pages > HOST_RUNS_PAGES)
		return NULL;
	pthread_mutex_lock(&host_runs_lock);
again:
	first = host_runs_find(pages);
	if (first < 0)
		goto out;
	for (i = first; i < first + pages; i = j) {
		for (j = i; j < first + pages; j++)
			if (host_runs_state[j] != HOST_RUN_UNTOUCHED)
				break;
		if (j == i) {
			j++;
			continue;
		}
		err = host_runs_claim(i, j - i);
		if (err > 0)
			goto again;
		if (err < 0)
			goto out;
	}
	/* Every page is ours now: fresh zeroes over them. */
	addr = host_runs_addr(first);
	p = mmap(addr, (size_t)pages * 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (p != addr) {
		addr = NULL;
		goto out;
	}
	memset(&host_runs_state[first], HOST_RUN_LIVE, pages);
	host_runs_cursor = (first + pages) % HOST_RUNS_PAGES;
out:
	pthread_mutex_unlock(&host_runs_lock);
	return addr;
}

/* Freed pages read as zeroes until reused; pages not handed out are left alone. */
static inline void host_runs_free(void *addr, u32 pages)
{
	u64 first = ((u64)(uintptr_t)addr - host_runs_base()) / 4096;
	u64 end = first + pages, i, j;

	if (end > HOST_RUNS_PAGES)
		end = HOST_RUNS_PAGES;
	pthread_mutex_lock(&host_runs_lock);
	for (i = first; i < end; i = j) {
		for (j = i; j < end && host_runs_state[j] == HOST_RUN_LIVE; j++)
			;
		if (j == i) {
			j++;
			continue;
		}
		mmap(host_runs_addr(i), (j - i) * 4096, PROT_READ,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		memset(&host_runs_state[i], HOST_RUN_FREE, j - i);
	}
	pthread_mutex_unlock(&host_runs_lock);
}

/*
 * The arena at ARENA_USER_BASE itself (the heap's): 4 GiB mapped read-only up front, so
 * that, as in an arena, a page nobody allocated reads as zeroes; an allocated page is
 * made writable, a freed one zeroed and read-only again. A bitmap (one bit per page,
 * shared by every compilation unit: weak) says which are allocated. Writes to a page
 * nobody allocated fault here, where the kernel would drop them: a bug either way.
 */
#define HOST_ARENA_SIZE (1ull << 32)

__weak u64 host_arena_bits[HOST_ARENA_SIZE / 4096 / 64];

__weak int host_arena_init(void)
{
	static int done;
	void *p;

	if (__atomic_load_n(&done, __ATOMIC_ACQUIRE))
		return 0;
	p = mmap((void *)(uintptr_t)ARENA_USER_BASE, HOST_ARENA_SIZE, PROT_READ,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
	if (p != (void *)(uintptr_t)ARENA_USER_BASE)
		return -1;
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	return 0;
}

static inline bool host_in_arena(const void *addr)
{
	u64 a = (u64)(uintptr_t)addr;

	return a >= ARENA_USER_BASE && a < ARENA_USER_BASE + HOST_ARENA_SIZE;
}

/* Give back pages [first, first + n) of the arena's bitmap. */
static inline void host_arena_clear(u64 first, u64 n)
{
	for (u64 i = first; i < first + n; i++)
		__atomic_fetch_and(&host_arena_bits[i / 64], ~(1ull << (i % 64)),
				   __ATOMIC_RELEASE);
}

static inline void *host_arena_alloc(void *addr, u32 pages)
{
	u64 first = ((u64)(uintptr_t)addr - ARENA_USER_BASE) / 4096, i;

	if (host_arena_init() || first + pages > HOST_ARENA_SIZE / 4096)
		return NULL;
	for (i = first; i < first + pages; i++)
		if (__atomic_fetch_or(&host_arena_bits[i / 64], 1ull << (i % 64),
				      __ATOMIC_ACQUIRE) & (1ull << (i % 64)))
			break;
	if (i < first + pages) {
		/* Someone has page i: the kernel fails the whole call, so do we. */
		host_arena_clear(first, i - first);
		return NULL;
	}
	if (mprotect(addr, (size_t)pages * 4096, PROT_READ | PROT_WRITE)) {
		host_arena_clear(first, pages);
		return NULL;
	}
	return addr;
}

static inline void host_arena_free(void *addr, u32 pages)
{
	u64 first = ((u64)(uintptr_t)addr - ARENA_USER_BASE) / 4096;
	size_t len = (size_t)pages * 4096;

	madvise(addr, len, MADV_DONTNEED);
	mprotect(addr, len, PROT_READ);
	host_arena_clear(first, pages);
}

static inline void *bpf_arena_alloc_pages(void *map, void *addr, u32 pages, int node,
					  u64 flags)
{
	size_t len = (size_t)pages * 4096;
	void *p;

	if (addr && host_in_arena(addr))
		return host_arena_alloc(addr, pages);
	if (!addr)
		return host_runs_alloc(pages);
	p = mmap(addr, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	if (p != addr) {
		munmap(p, len);
		return NULL;
	}
	return p;
}

/* Like an arena, a freed page then reads as zeroes, in a run until it is reused. */
static inline void bpf_arena_free_pages(void *map, void *addr, u32 pages)
{
	if (host_in_arena(addr))
		host_arena_free(addr, pages);
	else if (host_in_runs(addr))
		host_runs_free(addr, pages);
	else
		munmap(addr, (size_t)pages * 4096);
}


#endif
