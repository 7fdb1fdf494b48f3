// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 6 of 9: page runs, the sizes beyond BUDDY_MAX_SIZE. Each run is mapped
 * whole, after a header page that names its owner and links the owner's runs. Sleepable
 * (they map and unmap); the list is b's, changed under its lock by a step each.
 */
#include "internal.h"

/* A run of pages mapped for size bytes joins b's list. Under b's lock. */
static __always_inline void run_link(struct buddy __arena *b, struct buddy_run __arena *run,
				     u64 size)
{
	run->next = b->runs;
	if (b->runs)
		((struct buddy_run __arena *)b->runs)->prev = (u64)run;
	b->runs = (u64)run;
	b->stats.runs_in_use++;
	b->stats.run_pages_in_use += run->pages;
	b->stats.map_calls++;
	b->stats.map_pages += run->pages;
	b->stats.bytes_requested += size;
	b->stats.allocs++;
}

/* A run leaves b's list (its pages still mapped). Under b's lock. */
static __always_inline void run_unlink(struct buddy __arena *b, struct buddy_run __arena *run)
{
	if (run->prev)
		((struct buddy_run __arena *)run->prev)->next = run->next;
	else
		b->runs = run->next;
	if (run->next)
		((struct buddy_run __arena *)run->next)->prev = run->prev;
	run->magic = 0;
	b->stats.runs_in_use--;
	b->stats.run_pages_in_use -= run->pages;
	b->stats.frees++;
}

/* The two as steps: 0 or a lock error. */
__weak int __buddy_run_link(struct buddy __arena *b __arg_arena,
			    struct buddy_run __arena *run __arg_arena, u64 size)
{
	return buddy_locked(b, (run_link(b, run, size), 0));
}

__weak int __buddy_run_unlink(struct buddy __arena *b __arg_arena,
			      struct buddy_run __arena *run __arg_arena)
{
	return buddy_locked(b, (run_unlink(b, run), 0));
}

static __always_inline u64 alloc_run(struct buddy __arena *b, u64 size)
{
	u32 pages = (size + 4095) / 4096 + 1;
	struct buddy_run __arena *run;
	u64 addr, end;

	run = bpf_arena_alloc_pages(&arena, NULL, pages, NUMA_NO_NODE, 0);
	if (!run)
		return 0;
	addr = (u64)run;
	end = (u32)addr + (u64)pages * 4096;
	/* The kernel placed it inside our window: the arena is full below it. */
	if (end > BUDDY_WINDOW_START && (u32)addr < BUDDY_META_END) {
		bpf_arena_free_pages(&arena, run, pages);
		return 0;
	}
	run->magic = BUDDY_RUN_MAGIC;
	run->pages = pages;
	run->owner = (u64)b;
	run->prev = 0;
	if (buddy_patiently(b, __buddy_run_link(b, run, size))) {
		bpf_arena_free_pages(&arena, run, pages);
		return 0;
	}
	/*
	 * The header page is a redzone before the run, the slack of its last page after:
	 * the whole run poisoned (its shadow may say valid, from a run freed there), then
	 * the allocation hook makes the requested bytes valid.
	 */
	asan_hook_map(addr, (u64)pages * 4096, 0);
	asan_hook_poison((u64)run, (u64)pages * 4096, ASAN_REDZONE);
	asan_hook_alloc(addr + 4096, size, (u64)(pages - 1) * 4096);
	return addr + 4096;
}

static __always_inline int free_run(struct buddy __arena *b, u64 addr)
{
	struct buddy_run __arena *run = (struct buddy_run __arena *)(addr - 4096);
	u32 pages;

	if (addr & 4095)
		return -EINVAL;
	/* An unmapped header page reads as zeroes: not ours, or freed already. */
	if (run->magic != BUDDY_RUN_MAGIC || run->owner != (u64)b)
		return -EINVAL;
	pages = run->pages;
	if (pages < 2 || pages > RUN_MAX_PAGES + 1)
		return -EINVAL;
	/*
	 * Valid again, not ASAN_RELEASED: runs lie outside the allocator windows, and the
	 * next bpf_arena_alloc_pages(NULL), the program's own too, may get these pages.
	 */
	asan_hook_poison((u64)run, (u64)pages * 4096, 0);
	if (buddy_patiently(b, __buddy_run_unlink(b, run)))
		return -ETIMEDOUT;
	bpf_arena_free_pages(&arena, run, pages);
	atomic_add(&b->stats.pages_returned, pages);
	atomic_add(&b->stats.unmap_calls, 1);
	return 0;
}
