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

/* Tests make threads stand for CPUs by setting host_cpu (check.h). */
extern __thread int host_cpu;

/* The owner lock (spinlock.h) keeps its holder's CPU. */
static inline uint32_t bpf_get_smp_processor_id(void)
{
	int cpu = host_cpu >= 0 ? host_cpu : sched_getcpu();

	return cpu < 0 ? 0 : cpu;
}

#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/spinlock.h>

/*
 * The arena kfuncs over mmap: pages at a given address of the arena, or anywhere in its
 * top region; a page someone has already fails the call, as the kernel's does.
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
 * The arena at ARENA_USER_BASE, where the library finds it: 4 GiB mapped read-only up front, so
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

/*
 * Pages the kernel would place anywhere (bpf_arena_alloc_pages(NULL)) come from the top
 * of the arena, above the allocators' windows: first fit from a moving cursor, and
 * reused once freed, as the kernel reuses arena pages (the buddy's model test maps far
 * more page runs over its life than this region holds).
 */
#define HOST_RUNS_OFF 0xd0000000ull
#define HOST_RUNS_PAGES (((1ull << 32) - HOST_RUNS_OFF) / 4096)

__weak u64 host_runs_cursor;
__weak pthread_mutex_t host_runs_lock = PTHREAD_MUTEX_INITIALIZER;

static inline bool host_page_taken(u64 page)
{
	return __atomic_load_n(&host_arena_bits[page / 64], __ATOMIC_ACQUIRE) &
	       (1ull << (page % 64));
}

/* Like the kernel's: anywhere free in the region, NULL only when no range fits. */
static inline void *host_runs_alloc(u32 pages)
{
	u64 first = HOST_RUNS_OFF / 4096, len = 0, i, k;
	void *addr = NULL;

	if (!pages || pages > HOST_RUNS_PAGES || host_arena_init())
		return NULL;
	pthread_mutex_lock(&host_runs_lock);
	for (k = 0; k < HOST_RUNS_PAGES + pages && !addr; k++) {
		i = (host_runs_cursor + k) % HOST_RUNS_PAGES;
		/* A run is contiguous: it does not wrap around the region's end. */
		if (!i)
			len = 0;
		if (host_page_taken(first + i)) {
			len = 0;
		} else if (++len == pages) {
			addr = host_arena_alloc((void *)(uintptr_t)(ARENA_USER_BASE +
					(first + i + 1 - pages) * 4096), pages);
			host_runs_cursor = (i + 1) % HOST_RUNS_PAGES;
			len = 0;
		}
	}
	pthread_mutex_unlock(&host_runs_lock);
	return addr;
}

static inline void *bpf_arena_alloc_pages(void *map, void *addr, u32 pages, int node,
					  u64 flags)
{
	if (!addr)
		return host_runs_alloc(pages);
	return host_in_arena(addr) ? host_arena_alloc(addr, pages) : NULL;
}

/* Like an arena, a freed page then reads as zeroes until it is allocated again. */
static inline void bpf_arena_free_pages(void *map, void *addr, u32 pages)
{
	if (host_in_arena(addr))
		host_arena_free(addr, pages);
}


#endif
