// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* heap.bpf.c, part 2 of 7: the pool of whole spare spans, and the reserves' counts. */
#include "internal.h"

/*
 * The descriptor of span s (index + 1) met in a walk of the pool taken whole, or NULL
 * where the pool is damaged: the walk ends there and the rest is dropped (counted).
 */
static __always_inline struct arena_heap_span __arena *pool_span(u32 s)
{
	struct arena_heap_span __arena *sp = __heap_span(s - 1);

	if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RELEASE) {
		atomic_add(&arena_heap_global.lost_spans, 1);
		return NULL;
	}
	return sp;
}

static __always_inline void chain_append(struct pool_chain *c, u32 s)
{
	__heap_span(s - 1)->link = 0;
	if (c->last)
		__heap_span(c->last - 1)->link = s;
	else
		c->first = s;
	c->last = s;
	c->n++;
}

static __always_inline void chain_to_pool(struct pool_chain *c)
{
	struct arena_heap_global __arena *g = &arena_heap_global;

	if (c->first && !stack_push_chain(&g->release, c->first,
					  &__heap_span(c->last - 1)->link, c->n))
		atomic_add(&g->lost_spans, c->n);
}

/*
 * A walk that holds spans out of sight (the pool taken whole, a reserve being shed) is
 * counted for its duration, so that an owner finding nothing meanwhile waits for it
 * (pool_wait) instead of failing. Counted before the spans disappear: the
 * exchange that takes them is fully ordered after the add.
 */
static __always_inline struct arena_heap __arena *cpu_heap(u32 cpu)
{
	struct arena_heap __arena *h = __heap_of(cpu * HEAP_LEVELS);

	/* Heaps exist for CPUs below nr_cpus once set up; the rest is never touched. */
	if (cpu >= READ_ONCE(arena_heap_global.nr_cpus) || cpu >= HEAP_MAX_CPUS ||
	    READ_ONCE(h->magic) != HEAP_MAGIC)
		return NULL;
	return h;
}

/* h0: the walker's CPU's level-0 heap, or NULL when that CPU has none. */
static __always_inline void pool_hold_count(struct arena_heap __arena *h0, int d)
{
	atomic_add(&arena_heap_global.pool_holders, d);
	/* Per CPU too: a waiter on this CPU interrupted the walk and must not wait. */
	if (h0)
		atomic_add(&h0->pool_held, d);
}

/* Maintenance's walks: on whichever CPU they run. */
static __always_inline void pool_hold(void)
{
	pool_hold_count(cpu_heap(bpf_get_smp_processor_id()), 1);
}

static __always_inline void pool_unhold(void)
{
	pool_hold_count(cpu_heap(bpf_get_smp_processor_id()), -1);
}

/* The pool whole, for a walk: pool_unhold() once what is left is back. */
static __always_inline u64 pool_grab(void)
{
	pool_hold();
	return xchg(&arena_heap_global.release, 0);
}

/*
 * Take up to n whole spans of a kind from the pool into h's incoming reserve: the pool
 * is taken whole, the rest goes back in its order with one compare-and-swap. Returns
 * how many. It maps nothing (no page kfunc); arena_heap_fill and arena_heap_reserve
 * refill from it before they map. The owner, with its reserves empty, takes one span
 * by pool_pop instead, so a burst that follows a burst of frees needs no maintenance.
 */
static __always_inline u32 pool_take(struct arena_heap __arena *h, u32 kind, u32 n)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 s, next, i, trim, left = n, got, got_first = 0, got_last = 0;
	struct pool_chain keep = {};
	struct arena_heap_span __arena *sp;

	if (!n || !READ_ONCE(g->release))
		return 0;
	pool_for_each_span(s, sp, next, i) {
		trim = READ_ONCE(sp->trim);
		if (left && sp->kind == kind &&
		    (trim == HEAP_TRIM_NONE || trim == HEAP_TRIM_CANCELLED)) {
			sp->state = HEAP_SPAN_RESERVE;
			sp->next = got_first;
			got_first = s;
			if (!got_last)
				got_last = s;
			left--;
		} else {
			chain_append(&keep, s);
		}
	}
	chain_to_pool(&keep);
	got = n - left;
	if (got_first && !stack_push_chain(&h->reserve_in[kind & 1], got_first,
					   &__heap_span(got_last - 1)->next, got)) {
		atomic_add(&g->lost_spans, got);
		got = 0;
	}
	pool_unhold();
	if (got)
		atomic_add(&g->pool_reused, got);
	return got;
}

/*
 * The owner found the pool empty (its reserve, too). If walks on other CPUs hold spans
 * out of sight, wait for them to end: 1 when they did (look again), 0 when none was
 * under way, one is under way on this CPU (interrupted by us: it cannot end first), or
 * HEAP_POOL_WAIT_NS passed first. h0: the owner's level-0 heap.
 */
static __always_inline int pool_wait(struct arena_heap __arena *h0)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u64 start;
	u32 i;

	if (!READ_ONCE(g->pool_holders) || READ_ONCE(h0->pool_held))
		return 0;
	atomic_add(&g->pool_waits, 1);
	start = bpf_ktime_get_ns();
	for (i = zero; i < (1u << 20) && can_loop; i++) {
		if (!READ_ONCE(g->pool_holders))
			return 1;
		if (bpf_ktime_get_ns() - start > HEAP_POOL_WAIT_NS)
			break;
	}
	return 0;
}

/*
 * The owner's way into the pool when its reserves are empty: one whole span of the
 * kind, the rest back in its order. A loop with little state, so that the verifier
 * checks it cheaply at every allocation path of every program. Its index + 1, or 0.
 */
static __always_inline u32 pool_pop(struct arena_heap __arena *h, u32 kind)
{
	struct arena_heap __arena *h0 = __heap_of(h->id / HEAP_LEVELS * HEAP_LEVELS);
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 head, s, next, prev = 0, found = 0, trim, i, n;
	struct arena_heap_span __arena *sp;
	u64 r;

	/* Empty, or taken whole by a walk: once that walk ends, look again. */
	if (!READ_ONCE(g->release) && !(pool_wait(h0) && READ_ONCE(g->release)))
		return 0;
	pool_hold_count(h0, 1);
	r = xchg(&g->release, 0);
	head = HEAP_WORD_FIRST(r);
	n = HEAP_WORD_COUNT(r);
	s = head;
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = __heap_span(s - 1);
		next = sp->link;
		trim = READ_ONCE(sp->trim);
		if (!found && sp->kind == kind && sp->magic == HEAP_SPAN_MAGIC &&
		    sp->state == HEAP_SPAN_RELEASE &&
		    (trim == HEAP_TRIM_NONE || trim == HEAP_TRIM_CANCELLED)) {
			found = s;
			if (prev)
				__heap_span(prev - 1)->link = next;
			else
				head = next;
		} else {
			prev = s;
		}
		s = next;
	}
	/* A damaged or endless list is cut where the walk stopped. */
	if (prev)
		__heap_span(prev - 1)->link = 0;
	if (head && prev && !stack_push_chain(&g->release, head, &__heap_span(prev - 1)->link,
					       n > !!found ? n - !!found : 1))
		atomic_add(&g->lost_spans, 1);
	pool_hold_count(h0, -1);
	if (found) {
		sp = __heap_span(found - 1);
		sp->state = HEAP_SPAN_RESERVE;
		atomic_add(&g->pool_reused, 1);
	}
	return found;
}

/*
 * Span sp bound for the pool, waiting there since when (ms clock): bump holds that time
 * from now on, and capacity 0 says so to shadow_dirty().
 */
static __always_inline void span_mark_released(struct arena_heap_span __arena *sp, u32 when)
{
	sp->state = HEAP_SPAN_RELEASE;
	sp->bump = when;
	sp->capacity = 0;
}

/* A spare span into the pool, due once it has stayed there for the purge delay. */
static __always_inline void pool_add(struct arena_heap __arena *h, u32 s,
				     struct arena_heap_span __arena *sp)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 now = now_ms();

	span_mark_released(sp, now);
	if (stack_push(&g->release, &sp->link, s + 1)) {
		h->stats.spans_released++;
		due_at(now + READ_ONCE(g->purge_delay));
	} else {
		atomic_add(&g->lost_spans, 1);
	}
}
