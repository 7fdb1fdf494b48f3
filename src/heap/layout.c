// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * heap.bpf.c, part 1 of 7: where things are: span and heap addresses, size classes,
 * the lock-free stacks, the clock.
 */
#include "internal.h"

struct arena_heap_global __arena_global arena_heap_global;

/* Heaps claimed for creation: only the claimer initialises one. */
u64 __arena_global arena_heap_created[HEAP_MAX_HEAPS / 64];

static __always_inline u64 span_addr(u32 s)
{
	return ARENA_USER_BASE + HEAP_WINDOW_START +
	       ((u64)(s & (HEAP_NR_SPANS - 1)) << HEAP_SPAN_SHIFT);
}

static __always_inline bool in_heap_window(u64 addr)
{
	return __heap_span_of(addr) < HEAP_NR_SPANS;
}

static __always_inline u32 kind_pages(u32 kind)
{
	return HEAP_KIND_SPAN(kind) / 4096;
}

/* Size classes: __heap_class() in heap.h maps a size; this is the rule behind it. */
static __always_inline u32 class_size(u32 cls)
{
	u32 k, q;

	if (cls < 8)
		return (cls + 1) * 16;
	if (cls < HEAP_NR_SMALL) {
		k = (cls - 8) / 4 + 7;
		q = (cls - 8) % 4 + 5;
		return q << (k - 2);
	}
	if (cls == HEAP_NR_SMALL)
		return MEDIUM_FIRST;
	return (cls - HEAP_NR_SMALL + 2) * 4096;
}

/* Pages a span of the class needs mapped: its objects, rounded up to pages. */
static __always_inline u32 class_pages(u32 cls)
{
	u32 size = class_size(cls), span;

	span = cls < HEAP_NR_SMALL ? HEAP_SMALL_SPAN : HEAP_MEDIUM_SPAN;
	return (span / size * size + 4095) / 4096;
}

__weak u32 arena_heap_class(u64 size)
{
	if (!size || size > HEAP_MEDIUM_MAX)
		return HEAP_NR_CLASSES;
	return __heap_class(size);
}

__weak u32 arena_heap_class_size(u32 cls)
{
	return cls < HEAP_NR_CLASSES ? class_size(cls) : 0;
}

__weak u64 arena_heap_global_addr(void)
{
	return (u64)&arena_heap_global;
}

/* Reserve target of a heap for a kind. */
static __always_inline u32 heap_target(struct arena_heap __arena *h, u32 kind)
{
	struct arena_heap_global __arena *g = &arena_heap_global;

	if (h->id % HEAP_LEVELS)
		return h->used ? HEAP_RESERVE_NESTED : 0;
	return g->reserve[kind & 1];
}

/*
 * Push onto a lock-free stack whose word is (index + 1) | count << 32, linking through
 * *link. Only ever taken whole, so no ABA. A failed round means another push won: retry
 * for as long as the verifier's loop budget lasts (BPF_MAX_LOOPS rounds of the calling
 * function), never a fixed count that TCG's unfair atomics could exhaust. False only
 * when that budget is spent.
 */
static __always_inline bool stack_push_chain(u64 __arena *word, u32 first,
					     u32 __arena *last_link, u32 n)
{
	u64 old, new;

	while (can_loop) {
		old = READ_ONCE(*word);
		*last_link = HEAP_WORD_FIRST(old);
		new = HEAP_WORD(first, HEAP_WORD_COUNT(old) + n);
		if (cmpxchg(word, old, new) == old)
			return true;
	}
	return false;
}

static __always_inline bool stack_push(u64 __arena *word, u32 __arena *link, u32 item)
{
	return stack_push_chain(word, item, link, 1);
}

/* The same for a list head without a count (a heap's own reserve). */
static __always_inline bool list_push(u32 __arena *head, u32 __arena *link, u32 item)
{
	u32 old;

	while (can_loop) {
		old = READ_ONCE(*head);
		*link = old;
		if (cmpxchg(head, old, item) == old)
			return true;
	}
	return false;
}

/* The purge clock: milliseconds, wrapping; compare with (s32)(a - b). */
static __always_inline u32 now_ms(void)
{
	return bpf_ktime_get_ns() / 1000000;
}

/* Bring the next purge forward to t (a hint for the timer: races only cost a pass). */
static __always_inline void due_at(u32 t)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 d = READ_ONCE(g->purge_due);

	t |= !t;
	if (!d || (s32)(t - d) < 0)
		WRITE_ONCE(g->purge_due, t);
}

/* A reserve's count, as a bound: user space may have scribbled on it. */
static __always_inline u32 reserve_count(struct arena_heap __arena *h, u32 kind)
{
	u32 n = READ_ONCE(h->reserve_nr[kind & 1]) +
		HEAP_WORD_COUNT(READ_ONCE(h->reserve_in[kind & 1]));

	return n > HEAP_NR_SPANS ? HEAP_NR_SPANS : n;
}
