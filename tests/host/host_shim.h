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

#include <libarena/common.h>

static inline u32 bpf_get_smp_processor_id(void)
{
	int cpu = sched_getcpu();

	return cpu < 0 ? 0 : cpu;
}

/*
 * The arena kfuncs over mmap: pages at a given address, or anywhere in a region of our
 * own; MAP_FIXED_NOREPLACE fails, as the kernel does, where pages exist already.
 */
#include <stdint.h>
#include <sys/mman.h>
#include <time.h>

#define SEC(name)
extern char libarena_host_arena;
#define arena libarena_host_arena

/*
 * Pages the kernel would place anywhere come from the top of the 4 GiB "arena" that
 * holds our globals, above the allocator's window, and are never reused.
 */
#define HOST_RUNS_OFF 0xd0000000ull

static inline u64 host_runs_base(void)
{
	return ((u64)(uintptr_t)&libarena_host_arena & ~0xffffffffull) + HOST_RUNS_OFF;
}

static inline void *bpf_arena_alloc_pages(void *map, void *addr, u32 pages, int node,
					  u64 flags)
{
	static u64 next_run;
	size_t len = (size_t)pages * 4096;
	void *p;

	if (!addr)
		addr = (void *)(uintptr_t)(host_runs_base() +
			__atomic_fetch_add(&next_run, len + 4096, __ATOMIC_RELAXED));
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

/* Like an arena, a freed page then reads as zeroes: runs are never reused here. */
static inline void bpf_arena_free_pages(void *map, void *addr, u32 pages)
{
	size_t len = (size_t)pages * 4096;

	if ((u64)(uintptr_t)addr >= host_runs_base())
		mmap(addr, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	else
		munmap(addr, len);
}

static inline u64 bpf_ktime_get_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline void bpf_preempt_disable(void) { }
static inline void bpf_preempt_enable(void) { }

#endif
