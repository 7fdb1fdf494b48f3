/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal to heap.bpf.c: what its parts (the files in src/heap/, each using only the
 * parts before it) share. The inlined fast paths' internals are in
 * include/libarena/internal/heap.h.
 */
#ifndef __LIBARENA_HEAP_INTERNAL_H
#define __LIBARENA_HEAP_INTERNAL_H

#include <libarena/heap.h>
#include <libarena/buddy.h>
#include "../alloc_internal.h"
#include "../buddy/steps.h"

#define SPAN_TRIES		8	/* slots to try when the kernel has a page there */
#define SLOW_ROUNDS		4
#define MEDIUM_PAGES		(HEAP_MEDIUM_SPAN / 4096)
#define MEDIUM_FIRST		(10u << 10)	/* the medium class below 3 pages */
#define CLOCK_MONOTONIC		1

/* What arena_heap_alloc_current() says when frees came back to a used-up span. */
#define HEAP_ALLOC_AGAIN	1

/* Spans linked through link, in the order appended: what goes back onto the pool. */
struct pool_chain {
	u32 first, last, n;
};

/* layout.c: addresses, classes, the lock-free stacks, the clock. */
static __always_inline u64 span_addr(u32 s);
static __always_inline bool in_heap_window(u64 addr);
static __always_inline u32 kind_pages(u32 kind);
static __always_inline u32 class_size(u32 cls);
static __always_inline u32 class_pages(u32 cls);
static __always_inline u32 heap_target(struct arena_heap __arena *h, u32 kind);
static __always_inline bool stack_push_chain(u64 __arena *word, u32 first,
					     u32 __arena *last_link, u32 n);
static __always_inline bool stack_push(u64 __arena *word, u32 __arena *link, u32 item);
static __always_inline bool list_push(u32 __arena *head, u32 __arena *link, u32 item);
static __always_inline u32 now_ms(void);
static __always_inline void due_at(u32 t);
static __always_inline u32 reserve_count(struct arena_heap __arena *h, u32 kind);

/* pool.c: the spans no heap holds. */
static __always_inline struct arena_heap_span __arena *pool_span(u32 s);
static __always_inline void chain_append(struct pool_chain *c, u32 s);
static __always_inline void chain_to_pool(struct pool_chain *c);
static __always_inline void pool_hold(void);
static __always_inline void pool_unhold(void);
static __always_inline void span_mark_released(struct arena_heap_span __arena *sp, u32 when);
static __always_inline u64 pool_grab(void);
static __always_inline u32 pool_take(struct arena_heap __arena *h, u32 kind, u32 n);
static __always_inline u32 pool_pop(struct arena_heap __arena *h, u32 kind);
static __always_inline void pool_add(struct arena_heap __arena *h, u32 s,
				     struct arena_heap_span __arena *sp);

/*
 * Walk the pool, taken whole by pool_grab(): sp is span s, next the one after it. The
 * walk counts down from unknown values and tests heads, not counters: a counter up from
 * 0 that a branch tests is a new verifier state at every round.
 */
#define pool_for_each_span(s, sp, next, i)					\
	for (s = (u32)pool_grab(), i = zero;					\
	     s && i < HEAP_NR_SPANS && can_loop && (sp = pool_span(s)) &&	\
	     ((next = sp->link) || true);					\
	     i++, s = next)

/* owner.c: a heap's owner, and its steps (global functions that call nothing of ours). */
static __always_inline struct arena_heap __arena *heap_claim(void);
static __always_inline void heap_unclaim(struct arena_heap __arena *h);
static __always_inline void span_retire(struct arena_heap __arena *h, u32 s,
					struct arena_heap_span __arena *sp);
static __always_inline bool collect(struct arena_heap_span __arena *sp, u32 s);
static __always_inline void take_revived(struct arena_heap __arena *h);
static __always_inline u32 span_of(u64 obj);
static __always_inline void drain_parked(struct arena_heap __arena *h);
u64 arena_heap_alloc_current(struct arena_heap __arena *h __arg_arena, u32 cls);
bool arena_heap_take_span(struct arena_heap __arena *h __arg_arena, u32 cls);
int arena_heap_free_local(struct arena_heap __arena *h __arg_arena, u32 s, u64 obj);
int arena_heap_free_remote(struct arena_heap __arena *h __arg_arena, u32 s, u64 obj);

/* calls.c */
static __always_inline u64 alloc_size(u64 size);

/* maintain.c and programs.c */
static __always_inline int global_setup(void);
int arena_heap_fill(u32 id);

#endif /* __LIBARENA_HEAP_INTERNAL_H */
