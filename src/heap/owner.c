// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * heap.bpf.c, part 3 of 7: the owner's side: everything here runs with preemption
 * disabled and the heap busy.
 */
#include "internal.h"

/* ---- owner side: everything below runs with the heap held (busy) ---- */

/*
 * Hold a heap of this CPU for a slow path: the first level nobody holds, taken by
 * compare-and-swap, so that the slow paths run preemptible and call global functions
 * (each verified once). A program that interrupts or preempts the holder on this CPU
 * finds the level busy and takes the next; the inlined fast paths, which take level 0
 * with a plain store, do so with preemption disabled, so nothing preempts them half way.
 * NULL when every level is held, or the heaps are not created yet.
 */
static __always_inline struct arena_heap __arena *heap_claim(void)
{
	struct arena_heap __arena *h;
	u32 cpu = bpf_get_smp_processor_id(), lvl;

	/* A heap not created yet reads magic 0, mapped or not: no need to load nr_cpus. */
	if (cpu >= HEAP_MAX_CPUS)
		return NULL;
#pragma unroll
	for (lvl = 0; lvl < HEAP_LEVELS; lvl++) {
		h = __heap_of(cpu * HEAP_LEVELS + lvl);
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			return NULL;
		if (!READ_ONCE(h->busy) && !cmpxchg(&h->busy, 0, 1)) {
			if (lvl) {
				h->used = 1;
				h->stats.nested++;
			}
			return h;
		}
	}
	return NULL;
}

static __always_inline void heap_unclaim(struct arena_heap __arena *h)
{
	/* The holder's stores before the next holder takes it by a swap. */
	smp_store_release(&h->busy, 0);
}

static __always_inline void link_partial(struct arena_heap __arena *h, u32 s,
					 struct arena_heap_span __arena *sp)
{
	u32 cls = sp->cls % HEAP_NR_CLASSES, head = h->partial[cls];

	sp->prev = 0;
	sp->next = head;
	if (head)
		__heap_span(head - 1)->prev = s + 1;
	h->partial[cls] = s + 1;
	sp->listed = 1;
}

static __always_inline void unlink_partial(struct arena_heap __arena *h, u32 s,
					   struct arena_heap_span __arena *sp)
{
	u32 cls = sp->cls % HEAP_NR_CLASSES;

	if (sp->prev)
		__heap_span(sp->prev - 1)->next = sp->next;
	else if (h->partial[cls] == s + 1)
		h->partial[cls] = sp->next;
	if (sp->next)
		__heap_span(sp->next - 1)->prev = sp->prev;
	sp->next = sp->prev = 0;
	sp->listed = 0;
}

/* An entirely free span leaves its class: to the reserve, or beyond it to the kernel. */
static __always_inline void span_retire(struct arena_heap __arena *h, u32 s,
					struct arena_heap_span __arena *sp)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 kind = sp->kind & 1, limit, trim;

	if (sp->listed)
		unlink_partial(h, s, sp);
	if (h->current[sp->cls % HEAP_NR_CLASSES] == s + 1)
		h->current[sp->cls % HEAP_NR_CLASSES] = 0;
	limit = heap_target(h, kind) * g->high_water;
	/* Owned only while active: the inlined free's owner test stands for the state test. */
	sp->owner = 0;
	/* Not trimmed yet: cancel it, the span is whole. Trimmed (or being): the kernel's. */
	if (READ_ONCE(sp->trim) == HEAP_TRIM_PENDING)
		cmpxchg(&sp->trim, HEAP_TRIM_PENDING, HEAP_TRIM_CANCELLED);
	trim = READ_ONCE(sp->trim);
	if (trim == HEAP_TRIM_BUSY || trim == HEAP_TRIM_DONE)
		limit = 0;
	if (reserve_count(h, kind) < limit) {
		sp->state = HEAP_SPAN_RESERVE;
		/* Counted first: the count is never below what the list holds. */
		atomic_add(&h->reserve_nr[kind], 1);
		if (list_push(&h->reserve[kind], &sp->next, s + 1)) {
			h->stats.spans_emptied++;
			return;
		}
		atomic_add(&h->reserve_nr[kind], -1);
	}
	pool_add(h, s, sp);
}

/*
 * Take the span's remote frees into its local list. Returns false when there were none.
 * The slow path calls it with the local list empty (O(1)); arena_heap_collect may call
 * it with a local list, and then walks the remote one to its end, bounded by capacity.
 */
static __always_inline bool collect(struct arena_heap_span __arena *sp, u32 s)
{
	u32 head, cnt, tail, next, i;
	u64 r;

	if (!READ_ONCE(sp->remote))
		return false;
	r = xchg(&sp->remote, 0);
	head = HEAP_WORD_FIRST(r);
	cnt = HEAP_WORD_COUNT(r);
	if (!head)
		return false;
	if (sp->local) {
		tail = head;
		for (i = zero; i < sp->capacity && can_loop; i++) {
			next = *(u32 __arena *)(ARENA_USER_BASE + tail);
			if (!next)
				break;
			if (((next - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT) != s)
				return false;	/* a damaged list: leave both alone */
			tail = next;
		}
		*(u32 __arena *)(ARENA_USER_BASE + tail) = sp->local;
	}
	sp->local = head;
	sp->used = cnt > sp->used ? 0 : sp->used - cnt;
	return true;
}

static __always_inline u64 alloc_fast(struct arena_heap __arena *h, u32 cls)
{
	struct arena_heap_span __arena *sp;
	u64 obj = __heap_pop(h, cls);
	u32 s;

	if (obj)
		return obj;
	s = h->current[cls];
	if (s) {
		sp = __heap_span(s - 1);
		/* A local list that leaves the span is damaged: drop it, go on with the rest. */
		if (sp->local && ((sp->local - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT) != s - 1)
			sp->local = 0;
	}
	return 0;
}

/* Full spans some remote free made usable again: back onto their class lists. */
static __always_inline void take_revived(struct arena_heap __arena *h)
{
	struct arena_heap_span __arena *sp;
	u32 cur, next, i;

	if (!READ_ONCE(h->revived))
		return;
	cur = (u32)xchg(&h->revived, 0);
	for (i = zero; cur && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = __heap_span(cur - 1);
		next = sp->link;
		if (sp->magic == HEAP_SPAN_MAGIC && sp->owner == h->id + 1 && !sp->listed &&
		    h->current[sp->cls % HEAP_NR_CLASSES] != cur) {
			link_partial(h, cur - 1, sp);
			h->stats.revived++;
		}
		cur = next;
	}
}

/*
 * Queue span s (index + 1) for maintenance to trim. A span still queued from an earlier
 * use (cancelled when it emptied) is only marked again: a stack holds an item once.
 */
static __always_inline void trim_request(u32 s, struct arena_heap_span __arena *sp)
{
	struct arena_heap_global __arena *g = &arena_heap_global;

	if (cmpxchg(&sp->trim, HEAP_TRIM_CANCELLED, HEAP_TRIM_PENDING) == HEAP_TRIM_CANCELLED)
		return;
	sp->trim = HEAP_TRIM_PENDING;
	if (stack_push(&g->trim, &sp->trim_link, s))
		WRITE_ONCE(g->want, 1);
	else
		sp->trim = HEAP_TRIM_NONE;	/* stays whole */
}

/*
 * Pop the heap's own reserve, else take the incoming one whole. Maintenance may take the
 * own list whole meanwhile: then the compare-and-swap fails and we look further.
 */
static __always_inline u32 reserve_pop(struct arena_heap __arena *h, u32 kind)
{
	u32 s, cnt;
	u64 r;

	kind &= 1;
	s = READ_ONCE(h->reserve[kind]);
	if (s && cmpxchg(&h->reserve[kind], s, __heap_span(s - 1)->next) == s) {
		atomic_add(&h->reserve_nr[kind], -1);
		return s;
	}
	r = xchg(&h->reserve_in[kind], 0);
	s = HEAP_WORD_FIRST(r);
	if (!s)
		return 0;
	cnt = HEAP_WORD_COUNT(r);
	if (cnt > 1)
		atomic_add(&h->reserve_nr[kind], cnt - 1);
	/* Only the owner pushes onto its list, and it was empty: no race to lose. */
	WRITE_ONCE(h->reserve[kind], __heap_span(s - 1)->next);
	return s;
}

/*
 * Bytes at the start of a span from the heap's reserve that its former class handed
 * out (and freed): its objects below bump, in whole shadow words (64 bytes each). A
 * span fresh from the kernel (size 0) has none; one that went through the pool
 * (capacity 0: bump held a time there) counts as wholly used.
 */
static __always_inline u32 shadow_dirty(struct arena_heap_span __arena *sp)
{
	u64 n = (u64)sp->bump * sp->size;

	if (!sp->size)
		return 0;
	if (!sp->capacity || n >= HEAP_SPAN_SIZE)
		return HEAP_SPAN_SIZE;
	return (n + 63) & ~63ull;
}

/* A fresh span for a class, from the heap's reserve: its index + 1, 0 when empty. */
static __always_inline u32 take_reserve(struct arena_heap __arena *h, u32 cls)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 kind = cls >= HEAP_NR_SMALL, s, dirty;
	struct arena_heap_span __arena *sp;

	s = reserve_pop(h, kind);
	/* From the reserve: its former class handed out no object past bump. */
	dirty = s ? shadow_dirty(__heap_span(s - 1)) : HEAP_SPAN_SIZE;
	if (!s)
		s = pool_pop(h, kind);
	if (!s) {
		h->stats.shortfalls++;
		WRITE_ONCE(g->want, 1);
		return 0;
	}
	sp = __heap_span(s - 1);
	if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RESERVE || sp->kind != kind) {
		/* A damaged reserve: drop it rather than hand out what is not ours. */
		xchg(&h->reserve[kind], 0);
		h->reserve_nr[kind] = 0;
		h->stats.shortfalls++;
		return 0;
	}
	if (reserve_count(h, kind) * 2 < heap_target(h, kind))
		WRITE_ONCE(g->want, 1);
	/*
	 * Whatever a former class left in the shadow (its objects' freed marks): none of
	 * it is allocated now. Past those objects the shadow says so already.
	 */
	asan_hook_poison_inline(span_addr(s - 1), dirty, ASAN_UNALLOCATED);
	sp->cls = cls;
	sp->bump = 0;
	sp->size = class_size(cls);
	sp->recip = span_recip(sp->size);
	sp->capacity = HEAP_KIND_SPAN(kind) / sp->size;
	sp->bump = sp->local = sp->used = 0;
	sp->remote = 0;
	sp->owner = h->id + 1;
	sp->next = sp->prev = 0;
	sp->listed = 0;
	sp->state = HEAP_SPAN_ACTIVE;
	/* One writer (the owner); maintenance reads it to tell a quiet heap. */
	WRITE_ONCE(h->stats.spans_taken, h->stats.spans_taken + 1);
	/* Pages the class leaves unused: maintenance gives them back. */
	if (kind && class_pages(cls) < MEDIUM_PAGES)
		trim_request(s, sp);
	return s;
}

static __always_inline void free_local(struct arena_heap __arena *h, u32 s,
				       struct arena_heap_span __arena *sp, u64 obj)
{
	__heap_push(h, sp, obj, sp->used ? sp->used : 1);
	if (READ_ONCE(sp->remote) & HEAP_REMOTE_FULL) {
		/* Parked full: unpark, unless a remote free did and queued it as revived. */
		if (cmpxchg(&sp->remote, HEAP_REMOTE_FULL, 0) != HEAP_REMOTE_FULL)
			return;
		link_partial(h, s, sp);
	}
	if (!sp->used && sp->listed)
		span_retire(h, s, sp);
}

/*
 * Push obj onto span s's remote list; revive the span if it was parked full. False only
 * when the loop budget ran out before a compare-and-swap got through.
 */
static __always_inline bool remote_push(u32 s, struct arena_heap_span __arena *sp, u64 obj)
{
	struct arena_heap __arena *owner;
	u64 old, new;

	while (can_loop) {
		old = READ_ONCE(sp->remote);
		*(u32 __arena *)obj = HEAP_WORD_FIRST(old);
		new = HEAP_WORD(obj, HEAP_WORD_COUNT(old) + 1);
		if (cmpxchg(&sp->remote, old, new) != old)
			continue;
		if (old & HEAP_REMOTE_FULL) {
			owner = __heap_of((sp->owner - 1) % HEAP_MAX_HEAPS);
			if (!stack_push(&owner->revived, &sp->link, s + 1))
				atomic_add(&arena_heap_global.lost_spans, 1);
		}
		return true;
	}
	return false;
}

/* The span a heap-window address belongs to. */
static __always_inline u32 span_of(u64 obj)
{
	return ((u32)obj - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
}

/*
 * Retry the remote frees parked on h, oldest last. A push that fails again (or the loop
 * budget running out) leaves it and the rest parked for the next try: nothing is lost.
 */
static __always_inline void drain_parked(struct arena_heap __arena *h)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 off = h->parked, next, i;
	u64 obj;

	h->parked = 0;
	for (i = zero; off && i < HEAP_NR_SPANS * 4096 && can_loop; i++) {
		obj = ARENA_USER_BASE + off;
		if (!in_heap_window(obj)) {
			atomic_add(&g->lost_frees, 1);	/* a damaged list: stop here */
			return;
		}
		next = *(u32 __arena *)obj;
		if (READ_ONCE(g->fail_remote) ||
		    !remote_push(span_of(obj), __heap_span(span_of(obj)), obj)) {
			*(u32 __arena *)obj = next;
			break;
		}
		h->parked_nr--;
		off = next;
	}
	h->parked = off;
}

/*
 * A free into a span of another heap (h: the freeing heap, NULL when the CPU has none
 * free). Tagged free first, so a second free of a parked object is caught too. When the
 * push cannot get through, the object waits on h's parked list; only without any heap
 * can a free be lost, and that is counted.
 */
static __always_inline int free_remote(struct arena_heap __arena *h, u32 s,
				       struct arena_heap_span __arena *sp, u64 obj)
{
	struct arena_heap_global __arena *g = &arena_heap_global;

	__heap_tag_free(obj);
	if (h) {
		h->stats.remote_frees++;
		if (h->parked)
			drain_parked(h);
	}
	if (!READ_ONCE(g->fail_remote) && remote_push(s, sp, obj)) {
		if (!h)		/* no heap free on this CPU to count it in */
			atomic_add(&g->orphan_frees, 1);
		return 0;
	}
	if (!h)
		return -EAGAIN;
	*(u32 __arena *)obj = h->parked;
	h->parked = (u32)obj;
	h->parked_nr++;
	h->stats.parked++;
	return 0;
}

/*
 * The owner's calls, each a global function: verified once in a program however often
 * it calls them, and leaves (they call nothing), so that arena_malloc and arena_free
 * take two frames below their caller at most. h is held (heap_claim); preemption is on.
 */

/*
 * An object of class cls from the current span: its local list, else its remote frees.
 * A span used up is parked full (the next remote free revives it) and is current no
 * more: 0 then, and HEAP_ALLOC_AGAIN when frees arrived before it could be parked.
 */
__weak u64 arena_heap_alloc_current(struct arena_heap __arena *h __arg_arena, u32 cls)
{
	struct arena_heap_span __arena *sp;
	u64 addr;
	u32 s;

	arena_subprog_init();
	cls %= HEAP_NR_CLASSES;
	addr = alloc_fast(h, cls);
	if (addr)
		return addr;
	s = h->current[cls];
	if (!s)
		return 0;
	sp = __heap_span(s - 1);
	if (collect(sp, s - 1)) {
		addr = alloc_fast(h, cls);
		if (addr)
			return addr;
	}
	/* Exhausted: park it as full, unless frees arrived meanwhile. */
	if (cmpxchg(&sp->remote, 0, HEAP_REMOTE_FULL) != 0)
		return HEAP_ALLOC_AGAIN;
	h->current[cls] = 0;
	return 0;
}

/*
 * Make a span current for class cls, which has none: a partial one (or one a remote free
 * revived), else a fresh one from the reserves or the pool. False when there is none.
 */
__weak bool arena_heap_take_span(struct arena_heap __arena *h __arg_arena, u32 cls)
{
	u32 s;

	arena_subprog_init();
	cls %= HEAP_NR_CLASSES;
	s = h->partial[cls];
	if (!s) {
		take_revived(h);
		s = h->partial[cls];
	}
	if (s) {
		unlink_partial(h, s - 1, __heap_span(s - 1));
	} else {
		s = take_reserve(h, cls);	/* span + 1, like every list */
		if (!s)
			return false;
	}
	h->current[cls] = s;
	return true;
}

/* A checked object of h's own span s back onto its local list. */
__weak int arena_heap_free_local(struct arena_heap __arena *h __arg_arena, u32 s, u64 obj)
{
	arena_subprog_init();
	s &= HEAP_NR_SPANS - 1;
	free_local(h, s, __heap_span(s), obj);
	return 0;
}

/* A checked object of another heap's span s (h: the freeing heap, or NULL). */
__weak int arena_heap_free_remote(struct arena_heap __arena *h __arg_arena, u32 s, u64 obj)
{
	arena_subprog_init();
	s &= HEAP_NR_SPANS - 1;
	return free_remote(h, s, __heap_span(s), obj);
}
