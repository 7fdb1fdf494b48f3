// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The fast allocator. include/libarena/heap.h states the design; in short:
 *   - a heap (per CPU and nesting level) is used only with preemption disabled and while
 *     marked busy, so its owner-only fields need no atomics;
 *   - everything a heap's user does under preemption is static (6.12 forbids global
 *     calls there) and loop-free on the fast paths; log lines come after;
 *   - lock-free stacks that are only ever taken whole (remote frees, revived spans,
 *     incoming reserve, released spans): pushes by compare-and-swap, one exchange to take;
 *   - page kfuncs only in the maintenance code, which non-sleepable programs never reach.
 */
#include <libarena/heap.h>

#ifdef LIBARENA_ASAN
/* Free objects hold the allocator's links: its own accesses are not checked. */
#pragma clang attribute push(__attribute__((no_sanitize("kernel-address"))), \
			     apply_to = function)
#endif

#define SPAN_TRIES		8	/* slots to try when the kernel has a page there */
#define SLOW_ROUNDS		4
#define MEDIUM_PAGES		(HEAP_MEDIUM_SPAN / 4096)
#define MEDIUM_FIRST		(10u << 10)	/* the medium class below 3 pages */
#define CLOCK_MONOTONIC		1

_Static_assert(sizeof(struct arena_heap_span) == 64, "64 descriptors per page");

struct arena_heap_global __arena_global arena_heap_global;

/* Heaps claimed for creation: only the claimer initialises one. */
u64 __arena_global arena_heap_created[HEAP_MAX_HEAPS / 64];

#ifdef __BPF__
/* Maintenance in the background: a timer polls for requests, a workqueue serves them. */
struct heap_timer {
	struct bpf_timer timer;
};

struct heap_wq {
	struct bpf_wq wq;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, int);
	__type(value, struct heap_timer);
} arena_heap_timer SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, int);
	__type(value, struct heap_wq);
} arena_heap_wq SEC(".maps");

int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym __weak;
int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym __weak;
int bpf_wq_set_callback_impl(struct bpf_wq *wq,
			     int (callback_fn)(void *map, int *key, void *value),
			     unsigned int flags, void *aux__ign) __ksym __weak;
#endif

static __always_inline u64 heap_base(void)
{
	return ARENA_USER_BASE;
}

static __always_inline struct arena_heap_span __arena *span_desc(u32 s)
{
	return __heap_span(s);
}

static __always_inline u64 span_addr(u32 s)
{
	return heap_base() + HEAP_WINDOW_START + ((u64)(s & (HEAP_NR_SPANS - 1)) << HEAP_SPAN_SHIFT);
}

static __always_inline struct arena_heap __arena *heap_at(u32 id)
{
	return __heap_of(id);
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
		*last_link = (u32)old;
		new = (u64)first | ((((old >> 32) & HEAP_REMOTE_COUNT) + n) << 32);
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
		((READ_ONCE(h->reserve_in[kind & 1]) >> 32) & HEAP_REMOTE_COUNT);

	return n > HEAP_NR_SPANS ? HEAP_NR_SPANS : n;
}

/* Spans linked through link, in the order appended: what goes back onto the pool. */
struct pool_chain {
	u32 first, last, n;
};

static __always_inline void chain_append(struct pool_chain *c, u32 s)
{
	span_desc(s - 1)->link = 0;
	if (c->last)
		span_desc(c->last - 1)->link = s;
	else
		c->first = s;
	c->last = s;
	c->n++;
}

static __always_inline void chain_to_pool(struct pool_chain *c)
{
	struct arena_heap_global __arena *g = &arena_heap_global;

	if (c->first && !stack_push_chain(&g->release, c->first,
					  &span_desc(c->last - 1)->link, c->n))
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
	struct arena_heap __arena *h = heap_at(cpu * HEAP_LEVELS);

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
 * how many. Any program may call it (no page kfunc); the owner does, when its reserves
 * are empty, so a burst that follows a burst of frees needs no maintenance.
 */
static __noinline u32 pool_take(struct arena_heap __arena *h, u32 kind, u32 n)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 s, next, i, trim, left = n, got, got_first = 0, got_last = 0;
	struct pool_chain keep = {};
	struct arena_heap_span __arena *sp;

	/*
	 * The loops count down from unknown values and test heads, not counters: a counter
	 * up from 0 that a branch tests is a new verifier state at every round.
	 */
	if (!n || !READ_ONCE(g->release))
		return 0;
	s = (u32)pool_grab();
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = span_desc(s - 1);
		if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RELEASE) {
			atomic_add(&g->lost_spans, 1);	/* a damaged pool: the rest is dropped */
			break;
		}
		next = sp->link;
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
		s = next;
	}
	chain_to_pool(&keep);
	got = n - left;
	if (got_first && !stack_push_chain(&h->reserve_in[kind & 1], got_first,
					   &span_desc(got_last - 1)->next, got)) {
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
	struct arena_heap __arena *h0 = heap_at(h->id / HEAP_LEVELS * HEAP_LEVELS);
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 head, s, next, prev = 0, found = 0, trim, i, n;
	struct arena_heap_span __arena *sp;
	u64 r;

	/* Empty, or taken whole by a walk: once that walk ends, look again. */
	if (!READ_ONCE(g->release) && !(pool_wait(h0) && READ_ONCE(g->release)))
		return 0;
	pool_hold_count(h0, 1);
	r = xchg(&g->release, 0);
	head = (u32)r;
	n = (r >> 32) & HEAP_REMOTE_COUNT;
	s = head;
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = span_desc(s - 1);
		next = sp->link;
		trim = READ_ONCE(sp->trim);
		if (!found && sp->kind == kind && sp->magic == HEAP_SPAN_MAGIC &&
		    sp->state == HEAP_SPAN_RELEASE &&
		    (trim == HEAP_TRIM_NONE || trim == HEAP_TRIM_CANCELLED)) {
			found = s;
			if (prev)
				span_desc(prev - 1)->link = next;
			else
				head = next;
		} else {
			prev = s;
		}
		s = next;
	}
	/* A damaged or endless list is cut where the walk stopped. */
	if (prev)
		span_desc(prev - 1)->link = 0;
	if (head && prev && !stack_push_chain(&g->release, head, &span_desc(prev - 1)->link,
					       n > !!found ? n - !!found : 1))
		atomic_add(&g->lost_spans, 1);
	pool_hold_count(h0, -1);
	if (found) {
		sp = span_desc(found - 1);
		sp->state = HEAP_SPAN_RESERVE;
		atomic_add(&g->pool_reused, 1);
	}
	return found;
}

/* A spare span into the pool, due once it has stayed there for the purge delay. */
static __always_inline void pool_add(struct arena_heap __arena *h, u32 s,
				     struct arena_heap_span __arena *sp)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 now = now_ms();

	sp->state = HEAP_SPAN_RELEASE;
	sp->bump = now;
	if (stack_push(&g->release, &sp->link, s + 1)) {
		h->stats.spans_released++;
		due_at(now + READ_ONCE(g->purge_delay));
	} else {
		atomic_add(&g->lost_spans, 1);
	}
}

/* ---- owner side: everything below runs with preemption disabled, heap busy ---- */

static __always_inline struct arena_heap __arena *heap_enter(void)
{
	struct arena_heap __arena *h;
	u32 cpu = bpf_get_smp_processor_id(), lvl;

	/* A heap not created yet reads magic 0, mapped or not: no need to load nr_cpus. */
	if (cpu >= HEAP_MAX_CPUS)
		return NULL;
#pragma unroll
	for (lvl = 0; lvl < HEAP_LEVELS; lvl++) {
		h = heap_at(cpu * HEAP_LEVELS + lvl);
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			return NULL;
		if (__heap_try_enter(h)) {
			if (lvl) {
				h->used = 1;
				h->stats.nested++;
			}
			return h;
		}
	}
	return NULL;
}

static __always_inline void heap_exit(struct arena_heap __arena *h)
{
	__heap_leave(h);
}

static __always_inline void link_partial(struct arena_heap __arena *h, u32 s,
					 struct arena_heap_span __arena *sp)
{
	u32 cls = sp->cls % HEAP_NR_CLASSES, head = h->partial[cls];

	sp->prev = 0;
	sp->next = head;
	if (head)
		span_desc(head - 1)->prev = s + 1;
	h->partial[cls] = s + 1;
	sp->listed = 1;
}

static __always_inline void unlink_partial(struct arena_heap __arena *h, u32 s,
					   struct arena_heap_span __arena *sp)
{
	u32 cls = sp->cls % HEAP_NR_CLASSES;

	if (sp->prev)
		span_desc(sp->prev - 1)->next = sp->next;
	else if (h->partial[cls] == s + 1)
		h->partial[cls] = sp->next;
	if (sp->next)
		span_desc(sp->next - 1)->prev = sp->prev;
	sp->next = sp->prev = 0;
	sp->listed = 0;
}

/* An entirely free span leaves its class: to the reserve, or beyond it to the kernel. */
static __noinline void span_retire(struct arena_heap __arena *h, u32 s,
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
static __noinline bool collect(struct arena_heap_span __arena *sp, u32 s)
{
	u32 head, cnt, tail, next, i;
	u64 r;

	if (!READ_ONCE(sp->remote))
		return false;
	r = xchg(&sp->remote, 0);
	head = (u32)r;
	cnt = (r >> 32) & HEAP_REMOTE_COUNT;
	if (!head)
		return false;
	if (sp->local) {
		tail = head;
		for (i = zero; i < sp->capacity && can_loop; i++) {
			next = *(u32 __arena *)(heap_base() + tail);
			if (!next)
				break;
			if (((next - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT) != s)
				return false;	/* a damaged list: leave both alone */
			tail = next;
		}
		*(u32 __arena *)(heap_base() + tail) = sp->local;
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
		sp = span_desc(s - 1);
		/* A local list that leaves the span is damaged: drop it, go on with the rest. */
		if (sp->local && ((sp->local - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT) != s - 1)
			sp->local = 0;
	}
	return 0;
}

/* Full spans some remote free made usable again: back onto their class lists. */
static __noinline void take_revived(struct arena_heap __arena *h)
{
	struct arena_heap_span __arena *sp;
	u32 cur, next, i;

	if (!READ_ONCE(h->revived))
		return;
	cur = (u32)xchg(&h->revived, 0);
	for (i = zero; cur && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = span_desc(cur - 1);
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
	if (s && cmpxchg(&h->reserve[kind], s, span_desc(s - 1)->next) == s) {
		atomic_add(&h->reserve_nr[kind], -1);
		return s;
	}
	r = xchg(&h->reserve_in[kind], 0);
	s = (u32)r;
	if (!s)
		return 0;
	cnt = (r >> 32) & HEAP_REMOTE_COUNT;
	if (cnt > 1)
		atomic_add(&h->reserve_nr[kind], cnt - 1);
	/* Only the owner pushes onto its list, and it was empty: no race to lose. */
	WRITE_ONCE(h->reserve[kind], span_desc(s - 1)->next);
	return s;
}

/* A fresh span for a class, from the heap's reserve: its index + 1, 0 when empty. */
static __noinline u32 take_reserve(struct arena_heap __arena *h, u32 cls)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 kind = cls >= HEAP_NR_SMALL, s;
	struct arena_heap_span __arena *sp;

	s = reserve_pop(h, kind);
	if (!s)
		s = pool_pop(h, kind);
	if (!s) {
		h->stats.shortfalls++;
		WRITE_ONCE(g->want, 1);
		return 0;
	}
	sp = span_desc(s - 1);
	if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RESERVE || sp->kind != kind) {
		/* A damaged reserve: drop it rather than hand out what is not ours. */
		xchg(&h->reserve[kind], 0);
		h->reserve_nr[kind] = 0;
		h->stats.shortfalls++;
		return 0;
	}
	if (reserve_count(h, kind) * 2 < heap_target(h, kind))
		WRITE_ONCE(g->want, 1);
#ifdef LIBARENA_ASAN
	/* Whatever a former class left in the shadow: none of it is allocated now. */
	asan_poison_inline(span_addr(s - 1), HEAP_SPAN_SIZE, ASAN_UNALLOCATED);
#endif
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

static __noinline u64 alloc_slow(struct arena_heap __arena *h, u32 cls)
{
	struct arena_heap_span __arena *sp;
	u32 s, i;
	u64 addr;

	for (i = zero; i < SLOW_ROUNDS && can_loop; i++) {
		s = h->current[cls];
		if (s) {
			sp = span_desc(s - 1);
			if (collect(sp, s - 1)) {
				addr = alloc_fast(h, cls);
				if (addr)
					return addr;
			}
			/* Exhausted: park it as full, unless frees arrived meanwhile. */
			if (cmpxchg(&sp->remote, 0, HEAP_REMOTE_FULL) != 0)
				continue;
			h->current[cls] = 0;
		}
		s = h->partial[cls];
		if (!s) {
			take_revived(h);
			s = h->partial[cls];
		}
		if (s) {
			unlink_partial(h, s - 1, span_desc(s - 1));
		} else {
			s = take_reserve(h, cls);	/* span + 1, like every list */
			if (!s)
				return 0;
		}
		h->current[cls] = s;
		addr = alloc_fast(h, cls);
		if (addr)
			return addr;
	}
	return 0;
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
		*(u32 __arena *)obj = (u32)old;
		new = (obj & 0xffffffffull) | ((((old >> 32) & HEAP_REMOTE_COUNT) + 1) << 32);
		if (cmpxchg(&sp->remote, old, new) != old)
			continue;
		if (old & HEAP_REMOTE_FULL) {
			owner = heap_at((sp->owner - 1) % HEAP_MAX_HEAPS);
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
static __noinline void drain_parked(struct arena_heap __arena *h)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 off = h->parked, next, i;
	u64 obj;

	h->parked = 0;
	for (i = zero; off && i < HEAP_NR_SPANS * 4096 && can_loop; i++) {
		obj = heap_base() + off;
		if (!in_heap_window(obj)) {
			atomic_add(&g->lost_frees, 1);	/* a damaged list: stop here */
			return;
		}
		next = *(u32 __arena *)obj;
		if (READ_ONCE(g->fail_remote) || !remote_push(span_of(obj), span_desc(span_of(obj)),
							   obj)) {
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
	if (!READ_ONCE(g->fail_remote) && remote_push(s, sp, obj))
		return 0;
	if (!h)
		return -EAGAIN;
	*(u32 __arena *)obj = h->parked;
	h->parked = (u32)obj;
	h->parked_nr++;
	h->stats.parked++;
	return 0;
}

/* ---- the public calls ---- */

static __always_inline u64 malloc_large(u64 size)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u64 addr;

	if (!arena_buddy_is_ready()) {
		arena_stderr("arena_malloc: %llu bytes: the large allocator is not ready "
			     "(run arena_heap_refill)", size);
		return 0;
	}
#ifdef LIBARENA_ASAN
	/* A redzone after the block, unless that would need more than the largest block. */
	u64 asz = size + ASAN_REDZONE_SIZE <= BUDDY_MAX_SIZE ? size + ASAN_REDZONE_SIZE : size;

	addr = buddy_alloc_nosleep_addr((struct buddy __arena *)arena_buddy_addr(), asz);
	if (addr)
		asan_alloc_hook(addr, size, asz <= BUDDY_MIN_SIZE ? BUDDY_MIN_SIZE :
					    1ull << arena_fls(asz - 1));
#else
	addr = buddy_alloc_nosleep_addr((struct buddy __arena *)arena_buddy_addr(), size);
#endif
	if (addr)
		atomic_add(&g->large_allocs, 1);
	else
		WRITE_ONCE(g->want, 1);
	return addr;
}

__weak u64 arena_malloc_addr(u64 size)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap __arena *h;
	u64 addr = 0, asz = size;
	u32 cls;

	arena_subprog_init();
	if (!size) {
		arena_stderr("arena_malloc: size 0");
		return 0;
	}
#ifdef LIBARENA_ASAN
	/* At least a redzone of slack after every object: p[size] is always poisoned. */
	asz = size + ASAN_REDZONE_SIZE;
#endif
	if (asz > HEAP_MEDIUM_MAX)
		return malloc_large(size);
	cls = __heap_class(asz);
	bpf_preempt_disable();
	h = heap_enter();
	if (h) {
		addr = alloc_fast(h, cls);
		if (!addr)
			addr = alloc_slow(h, cls);
		heap_exit(h);
	}
	bpf_preempt_enable();
	if (!h) {
		atomic_add(&g->no_heap, 1);
		WRITE_ONCE(g->want, 1);
		arena_stderr("arena_malloc: no heap free on CPU %u (run arena_heap_refill)",
			     bpf_get_smp_processor_id());
		return 0;
	}
	if (!addr)
		arena_stderr("arena_malloc: %llu bytes: the CPU's span reserve is empty", size);
#ifdef LIBARENA_ASAN
	else
		asan_alloc_hook(addr, size, class_size(cls));
#endif
	return addr;
}

/*
 * Sleepable programs only (it reaches the page kfuncs): arena_malloc, and when the
 * reserve is empty, refill it here and try again instead of failing.
 */
__weak u64 arena_malloc_sleepable_addr(u64 size)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	bool reserved = false;
	u64 addr;
	int i;

	for (i = zero; i < 3 && can_loop; i++) {
		if (size > HEAP_MEDIUM_MAX || READ_ONCE(g->magic) == HEAP_GLOBAL_MAGIC) {
			addr = arena_malloc_addr(size);
			if (addr || !size || size > BUDDY_MAX_SIZE)
				return addr;
			/* Room for this object on this CPU, even with a reserve target of 0. */
			if (!reserved && !arena_heap_reserve(size, 1)) {
				reserved = true;
				continue;
			}
		}
		if (arena_heap_maintain())
			return 0;
	}
	return 0;
}

/* Why a pointer cannot be freed, or NULL. */
static __always_inline const char *bad_free(u32 s, struct arena_heap_span __arena *sp,
					    u64 obj)
{
	switch (__heap_free_check(s, sp, obj)) {
	case HEAP_FREE_OK:
		return NULL;
	case HEAP_FREE_NO_SPAN:
		return "is not in an allocated span";
	case HEAP_FREE_INTERIOR:
		return "points into the middle of an object";
	case HEAP_FREE_NEVER:
		return "was never allocated";
	default:
		return "is already free (double free)";
	}
}

static __always_inline int heap_free(void __arena *ptr)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	struct arena_heap __arena *h;
	u64 obj = (u64)ptr;
	const char *why;
	int err = 0;
	u32 s;

	if (!ptr)
		return 0;
	if (!in_heap_window(obj)) {
		if (arena_buddy_is_ready()) {
			err = buddy_free_nosleep((struct buddy __arena *)arena_buddy_addr(), ptr);
			atomic_add(err ? &g->bad_frees : &g->large_frees, 1);
			return err;
		}
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx was not allocated by arena_malloc", obj);
		return -EINVAL;
	}
	s = span_of(obj);
	sp = span_desc(s);
	why = bad_free(s, sp, obj);
	if (why) {
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx %s", obj, why);
		return -EINVAL;
	}
	bpf_preempt_disable();
	h = heap_enter();
	if (h && sp->owner == h->id + 1)
		free_local(h, s, sp, obj);
	else
		err = free_remote(h, s, sp, obj);
	if (h)
		heap_exit(h);
	bpf_preempt_enable();
	if (err) {
		atomic_add(&g->lost_frees, 1);
		arena_stderr("arena_free: %llx: no heap free on CPU %u and the span's remote "
			     "list stayed contended: lost", obj, bpf_get_smp_processor_id());
	}
	return err;
}

#ifdef LIBARENA_ASAN
/* The quarantine's free: the block was checked and poisoned when it came in. */
__weak int arena_free_now(void __arena *ptr __arg_arena)
{
	return heap_free(ptr);
}

/*
 * Check and poison the block, then park it in the quarantine; the block that leaves the
 * quarantine is freed for real. Double and invalid frees are reported (and logged).
 */
__weak int arena_free_slow(void __arena *ptr __arg_arena)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	u64 obj = (u64)ptr, slot, b;
	int kind = 0;
	u32 s;

	if (!ptr)
		return 0;
	if (in_heap_window(obj)) {
		s = ((u32)obj - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
		sp = span_desc(s);
		switch (__heap_free_check(s, sp, obj)) {
		case HEAP_FREE_OK:
			break;
		case HEAP_FREE_DOUBLE:
			kind = ASAN_DOUBLE_FREE;
			break;
		default:
			kind = ASAN_INVALID_FREE;
		}
		slot = sp->size;
	} else {
		b = arena_buddy_is_ready() ? buddy_block_of(obj) : 0;
		if (!b || (u32)b != (u32)obj)
			kind = ASAN_INVALID_FREE;
		else if (b >> 63)
			kind = ASAN_DOUBLE_FREE;
		slot = (b >> 32) & 0xffffffffull;
	}
	if (!kind && asan_shadow_of(obj) == ASAN_FREED)
		kind = ASAN_DOUBLE_FREE;
	if (kind) {
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx %s", obj, kind == ASAN_DOUBLE_FREE ?
			     "is already free (double free)" : "was not allocated by arena_malloc");
		asan_free_report(obj, kind, 2);
		return -EINVAL;
	}
	asan_free_hook(obj, slot);
	obj = asan_quarantine_push(obj, slot);
	if (obj)
		heap_free((void __arena *)obj);
	return 0;
}
#else
__weak int arena_free_slow(void __arena *ptr __arg_arena)
{
	return heap_free(ptr);
}
#endif

__weak int arena_memset(void __arena *ptr __arg_arena, int c, u64 n)
{
	u64 __arena *w = ptr;
	u8 __arena *p = ptr;
	u64 word = (u8)c, i;

	if (!ptr)
		return -EINVAL;
#ifdef LIBARENA_ASAN
	asan_check_range((u64)ptr, n, 1);
#endif
	word |= word << 8;
	word |= word << 16;
	word |= word << 32;
	if (((u64)ptr & 7) == 0) {
		for (i = zero; i < n / 8 && can_loop; i++)
			w[i] = word;
		i *= 8;
	} else {
		i = 0;
	}
	for (; i < n && can_loop; i++)
		p[i] = c;
	return i == n ? 0 : -E2BIG;
}

__weak u64 arena_calloc_addr(u64 n, u64 size)
{
	u64 addr, limit;

	if (size) {
		limit = ~0ull / size;
		/* Else clang turns the test into a 128-bit multiply BPF does not have. */
		barrier_var(limit);
	}
	if (size && n > limit) {
		arena_stderr("arena_calloc: %llu x %llu bytes overflows", n, size);
		return 0;
	}
	addr = arena_malloc_addr(n * size);
	if (addr && arena_memset((void __arena *)addr, 0, n * size)) {
		arena_free((void __arena *)addr);
		return 0;
	}
	return addr;
}

/* ---- collection, on the CPU that runs it ---- */

/*
 * Collection runs preemptible: it claims the heap with a compare-and-swap instead, and an
 * allocation that interrupts or preempts it on this CPU finds the heap busy and moves
 * to the next level. Global functions, so the verifier checks each once.
 */
__weak int arena_heap_tidy_span(struct arena_heap __arena *h __arg_arena, u32 s)
{
	struct arena_heap_span __arena *sp = span_desc(s);

	if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_ACTIVE ||
	    sp->owner != h->id + 1)
		return 0;
	collect(sp, s);
	if (sp->used)
		return 0;
	span_retire(h, s, sp);
	return 1;
}

__weak int arena_heap_tidy(struct arena_heap __arena *h __arg_arena)
{
	u32 cls, s, next, walked = zero;
	int n = 0;

	if (h->parked)
		drain_parked(h);
	take_revived(h);
	for (cls = zero; cls < HEAP_NR_CLASSES && can_loop; cls++) {
		s = h->current[cls];
		if (s)
			n += arena_heap_tidy_span(h, s - 1);
		for (s = h->partial[cls]; s && walked < HEAP_NR_SPANS && can_loop;
		     s = next, walked++) {
			next = span_desc(s - 1)->next;
			n += arena_heap_tidy_span(h, s - 1);
		}
	}
	return n;
}

/*
 * Collect remote frees into every heap of the CPU this runs on and retire the spans that
 * are entirely free. Returns how many were retired. Any program, any time.
 */
__weak int arena_heap_collect_cpu(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 cpu = bpf_get_smp_processor_id(), lvl;
	struct arena_heap __arena *h;
	int n = 0;

	arena_subprog_init();
	if (cpu >= READ_ONCE(g->nr_cpus))
		return 0;
	for (lvl = 0; lvl < HEAP_LEVELS; lvl++) {
		h = heap_at(cpu * HEAP_LEVELS + lvl);
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			break;
		if (cmpxchg(&h->busy, 0, 1) != 0)
			continue;
		n += arena_heap_tidy(h);
		smp_store_release(&h->busy, 0);
	}
	return n;
}

__weak s64 arena_heap_outstanding(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap __arena *h;
	u32 id, n = READ_ONCE(g->nr_cpus) * HEAP_LEVELS;
	s64 out;

	out = (s64)READ_ONCE(g->large_allocs) - (s64)READ_ONCE(g->large_frees);
	for (id = zero; id < n && id < HEAP_MAX_HEAPS && can_loop; id++) {
		h = heap_at(id);
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			continue;
		out += (s64)h->stats.allocs - (s64)h->stats.frees - (s64)h->stats.remote_frees;
	}
#ifdef LIBARENA_ASAN
	/* arena_free took those back; the sanitizer holds them a while. */
	out -= asan_quarantine_count();
#endif
	return out;
}

/* ---- maintenance: sleepable only ---- */

static __always_inline bool heap_claim_bit(u64 __arena *words, u32 nr_words, u32 *bit)
{
	u64 bits, low;
	u32 w;

	/* A word is left only when full: a lost race is retried, never counted. */
	for (w = zero; w < nr_words && can_loop; w++) {
		while (can_loop) {
			bits = READ_ONCE(words[w]);
			if (bits == ~0ull)
				break;
			low = ~bits & (bits + 1);
			if (cmpxchg(&words[w], bits, bits | low) == bits) {
				*bit = w * 64 + arena_fls(low) - 1;
				return true;
			}
		}
	}
	return false;
}

static __always_inline void heap_clear_bit(u64 __arena *words, u32 bit)
{
	atomic_and(&words[bit / 64], ~(1ull << (bit % 64)));
}

/* Map a span of a kind (and its descriptor page, the first time): its index, or -errno. */
static __noinline int span_new(u32 kind)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	u32 s, page, i, pages = kind_pages(kind);
	void __arena *p;

	for (i = zero; i < SPAN_TRIES && can_loop; i++) {
		if (!heap_claim_bit(g->claimed, HEAP_NR_SPANS / 64, &s))
			return -ENOMEM;
		page = s / 64;			/* 64 descriptors per page */
		if (!(READ_ONCE(g->desc_mapped[page / 64]) & (1ull << (page % 64)))) {
			p = bpf_arena_alloc_pages(&arena, (void __arena *)(heap_base() +
						  HEAP_DESC_START + (u64)page * 4096),
						  1, NUMA_NO_NODE, 0);
			/* NULL: mapped by a concurrent maintainer, or taken: checked below. */
			if (p) {
				atomic_or(&g->desc_mapped[page / 64], 1ull << (page % 64));
				atomic_add(&g->pages_mapped, 1);
				atomic_add(&g->map_calls, 1);
				atomic_add(&g->map_pages, 1);
			}
		}
		p = bpf_arena_alloc_pages(&arena, (void __arena *)span_addr(s), pages,
					  NUMA_NO_NODE, 0);
		if (!p) {
			/* Someone else's pages there: leave the slot claimed, try another. */
			atomic_add(&g->map_failures, 1);
			continue;
		}
		atomic_add(&g->map_calls, 1);
		atomic_add(&g->map_pages, pages);
		sp = span_desc(s);
		sp->remote = 0;
		sp->local = sp->used = sp->bump = sp->capacity = sp->size = 0;
		sp->cls = 0;
		sp->kind = kind;
		sp->owner = sp->next = sp->prev = sp->link = 0;
		sp->trim = sp->trim_link = 0;
		sp->listed = 0;
		sp->state = HEAP_SPAN_RESERVE;
		sp->magic = HEAP_SPAN_MAGIC;
		if (sp->magic != HEAP_SPAN_MAGIC) {
			/* The descriptor page is not there after all. */
			bpf_arena_free_pages(&arena, p, pages);
			atomic_add(&g->unmap_calls, 1);
			atomic_add(&g->unmap_pages, pages);
			heap_clear_bit(g->claimed, s);
			return -ENOMEM;
		}
		atomic_add(&g->spans_mapped, 1);
		atomic_add(&g->pages_mapped, pages);
#ifdef LIBARENA_ASAN
		/*
		 * And the granule before it, so p[-1] of its first object is caught. Before
		 * span 0 that is outside the window: only that one granule is poisoned.
		 */
		asan_shadow_map(span_addr(s) - ASAN_GRANULE, HEAP_SPAN_SIZE + ASAN_GRANULE,
				s ? ASAN_UNALLOCATED : 0);
		if (!s)
			asan_poison((void __arena *)(span_addr(0) - ASAN_GRANULE),
				    ASAN_UNALLOCATED, ASAN_GRANULE);
		asan_poison((void __arena *)span_addr(s), ASAN_UNALLOCATED, HEAP_SPAN_SIZE);
#endif
		return s;
	}
	return -ENOMEM;
}

/*
 * Give a span's pages back to the kernel and its slot to whoever maps next. Global: a
 * call inside the pool walk, checked inline at every round, would overflow the
 * verifier's jump history. Sleepable (maintenance only).
 */
__weak int arena_heap_span_unmap(u32 s, u32 pages)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp = span_desc(s);

	if (s >= HEAP_NR_SPANS || pages > MEDIUM_PAGES)
		return -EINVAL;
	sp->magic = 0;
	sp->state = 0;
	bpf_arena_free_pages(&arena, (void __arena *)span_addr(s), pages);
#ifdef LIBARENA_ASAN
	asan_poison((void __arena *)span_addr(s), ASAN_RELEASED, HEAP_SPAN_SIZE);
#endif
	heap_clear_bit(g->claimed, s);
	atomic_add(&g->spans_mapped, -1);
	atomic_add(&g->pages_mapped, -(s64)pages);
	atomic_add(&g->spans_returned, 1);
	atomic_add(&g->unmap_calls, 1);
	atomic_add(&g->unmap_pages, pages);
	return 0;
}

/*
 * Give the pool's due spans back to the kernel (only trimmed ones unless may_unmap:
 * their pages cannot serve again). A span still on the trim stack, or being trimmed,
 * waits for the next pass: the trim walk reads its descriptor. The pool is held only
 * for the walk; the unmaps, slow, come after the rest is back. Returns how many went.
 */
static __noinline int pool_purge(bool may_unmap)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 s, i, next, trim, now = now_ms(), delay = READ_ONCE(g->purge_delay);
	struct pool_chain keep = {}, gone = {};
	struct arena_heap_span __arena *sp;

	if (!READ_ONCE(g->release))
		return 0;
	s = (u32)pool_grab();
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = span_desc(s - 1);
		if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RELEASE) {
			atomic_add(&g->lost_spans, 1);	/* a damaged pool: the rest is dropped */
			break;
		}
		next = sp->link;
		trim = READ_ONCE(sp->trim);
		if (trim == HEAP_TRIM_DONE ||
		    (may_unmap && trim == HEAP_TRIM_NONE && (s32)(now - sp->bump - delay) >= 0)) {
			chain_append(&gone, s);
		} else {
			due_at(sp->bump + delay);
			chain_append(&keep, s);
		}
		s = next;
	}
	chain_to_pool(&keep);
	pool_unhold();
	/* Only this walk knows the gone chain: nobody else reads it now. */
	s = gone.first;
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = span_desc(s - 1);
		next = sp->link;
		if (READ_ONCE(sp->trim) == HEAP_TRIM_DONE)
			arena_heap_span_unmap(s - 1, class_pages(sp->cls % HEAP_NR_CLASSES));
		else
			arena_heap_span_unmap(s - 1, kind_pages(sp->kind & 1));
		s = next;
	}
	return gone.n;
}

/*
 * A quiet heap's spares beyond the target: its reserves taken whole, target of them
 * back to the incoming one, the rest to the pool, due at once (they waited already).
 * The owner meanwhile finds its reserve empty and takes from the pool: nothing is lost.
 */
static __noinline u32 reserve_shed(struct arena_heap __arena *h, u32 kind, u32 target)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 s, next, i, own = 0, in, in_done = 0, now = now_ms();
	u32 kept = 0, keep_first = 0, keep_last = 0;
	struct pool_chain shed = {};
	struct arena_heap_span __arena *sp;

	kind &= 1;
	pool_hold();
	s = xchg(&h->reserve[kind], 0);
	in = (u32)xchg(&h->reserve_in[kind], 0);
	for (i = zero; i < 2 * HEAP_NR_SPANS && can_loop; i++) {
		if (!s) {
			if (in_done)
				break;
			in_done = 1;
			s = in;
			continue;
		}
		sp = span_desc(s - 1);
		if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_RESERVE ||
		    sp->kind != kind) {
			atomic_add(&g->lost_spans, 1);	/* a damaged reserve: the rest dropped */
			if (in_done)
				break;
			s = 0;
			continue;
		}
		next = sp->next;
		own += !in_done;
		if (target) {
			target--;
			sp->next = keep_first;
			keep_first = s;
			if (!keep_last)
				keep_last = s;
			kept++;
		} else {
			sp->state = HEAP_SPAN_RELEASE;
			sp->bump = now - READ_ONCE(g->purge_delay);	/* waited already */
			chain_append(&shed, s);
		}
		s = next;
	}
	/*
	 * Opaque to clang, which turns an add of a known 0 into a fetch-or (refused in
	 * arenas); and not tested, which would make the verifier track it every round.
	 */
	barrier_var(own);
	atomic_add(&h->reserve_nr[kind], -(s32)own);
	if (keep_first && !stack_push_chain(&h->reserve_in[kind], keep_first,
					    &span_desc(keep_last - 1)->next, kept))
		atomic_add(&g->lost_spans, kept);
	chain_to_pool(&shed);
	pool_unhold();
	if (!shed.first)
		return 0;
	atomic_add(&g->spares_shed, shed.n);
	due_at(now);
	return shed.n;
}

/*
 * Give back the pages that spans taken since the last pass leave unused. The owner may
 * be retiring a span meanwhile: whoever moves it off HEAP_TRIM_PENDING first decides.
 */
static __noinline int trim_spans(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	u32 s, i, next, used;
	int n = 0;
	u64 r;

	r = xchg(&g->trim, 0);
	s = (u32)r;
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = span_desc(s - 1);
		if (sp->magic != HEAP_SPAN_MAGIC)
			break;
		next = sp->trim_link;
		if (cmpxchg(&sp->trim, HEAP_TRIM_PENDING, HEAP_TRIM_BUSY) == HEAP_TRIM_PENDING) {
			used = class_pages(sp->cls % HEAP_NR_CLASSES);
			/* take_reserve queues only such spans; checked again as a bound. */
			if (used < MEDIUM_PAGES) {
				bpf_arena_free_pages(&arena, (void __arena *)(span_addr(s - 1) +
						     used * 4096ull), MEDIUM_PAGES - used);
				atomic_add(&g->pages_mapped, -(s64)(MEDIUM_PAGES - used));
				atomic_add(&g->unmap_calls, 1);
				atomic_add(&g->unmap_pages, MEDIUM_PAGES - used);
				atomic_add(&g->pages_trimmed, MEDIUM_PAGES - used);
			}
			smp_store_release(&sp->trim, HEAP_TRIM_DONE);
			n++;
		} else {
			/* Emptied before its turn: whole, and off the stack now. */
			cmpxchg(&sp->trim, HEAP_TRIM_CANCELLED, HEAP_TRIM_NONE);
		}
		s = next;
	}
	return n;
}

static __noinline int heap_create(u32 id)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap __arena *h = heap_at(id);
	u64 page = (u64)h & ~4095ull;
	u32 i;

	if (READ_ONCE(arena_heap_created[id / 64]) & (1ull << (id % 64)))
		return 0;	/* someone made (or is making) it */
	if (atomic_fetch_or(&arena_heap_created[id / 64], 1ull << (id % 64)) &
	    (1ull << (id % 64)))
		return 0;
	if (bpf_arena_alloc_pages(&arena, (void __arena *)page, 1, NUMA_NO_NODE, 0)) {
		atomic_add(&g->pages_mapped, 1);
		atomic_add(&g->map_calls, 1);
		atomic_add(&g->map_pages, 1);
	}
	for (i = zero; i < HEAP_HEAP_SIZE / 8 && can_loop; i++)
		((u64 __arena *)h)[i] = 0;
	h->id = id;
	smp_store_release(&h->magic, HEAP_MAGIC);
	if (READ_ONCE(h->magic) != HEAP_MAGIC) {
		heap_clear_bit(arena_heap_created, id);
		return -ENOMEM;
	}
	return 0;
}

static __always_inline int global_ready(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 state = READ_ONCE(g->magic), i;

	if (state == HEAP_GLOBAL_MAGIC)
		return 0;
	if (state || cmpxchg(&g->magic, 0, 1) != 0) {
		for (i = zero; i < (1u << 20) && can_loop; i++)
			if (READ_ONCE(g->magic) == HEAP_GLOBAL_MAGIC)
				return 0;
		return -EBUSY;
	}
	g->reserve[0] = HEAP_RESERVE_SMALL;
	g->reserve[1] = HEAP_RESERVE_MEDIUM;
	g->high_water = HEAP_HIGH_WATER;
	g->reserve_large = 1;
	g->purge_delay = HEAP_PURGE_DELAY_MS;
	if (!g->nr_cpus)
		g->nr_cpus = 1;
	smp_store_release(&g->magic, HEAP_GLOBAL_MAGIC);
	return 0;
}

/* Map n spans of a kind into h's incoming reserve. Sleepable. 0 or -errno. */
static __always_inline int reserve_map(struct arena_heap __arena *h, u32 kind, u32 n,
				  const char *who)
{
	u32 j;
	int s;

	for (j = zero; j < n && can_loop; j++) {
		s = span_new(kind);
		if (s < 0) {
			arena_stderr("%s: no pages for a span", who);
			return -ENOMEM;
		}
		if (!stack_push(&h->reserve_in[kind & 1], &span_desc(s)->next, s + 1)) {
			atomic_add(&arena_heap_global.lost_spans, 1);
			return -EAGAIN;
		}
	}
	return 0;
}

/*
 * Create heap id if needed and bring its reserves to their targets: spans from the pool
 * first, else new ones; spares beyond a target go to the pool once the heap has been
 * quiet for the purge delay. One global function per heap, so the verifier checks it
 * once rather than once per loop round. Sleepable. Returns the spans mapped, or -errno.
 */
__weak int arena_heap_fill(u32 id)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap __arena *h = heap_at(id);
	u32 kind, have, target, now, taken, delay, since, rest;
	int err, mapped = 0;
	bool quiet;

	arena_subprog_init();
	if (id >= HEAP_MAX_HEAPS)
		return -EINVAL;
	if (READ_ONCE(h->magic) != HEAP_MAGIC) {
		err = heap_create(id);
		if (err) {
			arena_stderr("arena_heap_maintain: no page for heap %u", id);
			return err;
		}
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			return 0;	/* another maintainer is creating it */
	}
	now = now_ms();
	delay = READ_ONCE(g->purge_delay);
	taken = (u32)READ_ONCE(h->stats.spans_taken);
	if (taken != h->quiet_taken || !h->quiet_since) {
		h->quiet_taken = taken;
		h->quiet_since = now | !now;
	}
	since = h->quiet_since;
	if ((s32)(READ_ONCE(g->woken) - since) > 0)
		since = READ_ONCE(g->woken);
	quiet = (s32)(now - since - delay) >= 0;
	rest = READ_ONCE(g->reserve_rest);
	for (kind = 0; kind < HEAP_KINDS; kind++) {
		target = heap_target(h, kind);
		if (quiet && rest && rest < target)
			target = rest;
		have = reserve_count(h, kind);
		if (have > target) {
			if (quiet)
				reserve_shed(h, kind, target);
			else
				due_at(since + delay);
			continue;
		}
		if (have < target)
			have += pool_take(h, kind, target - have);
		if (have >= target)
			continue;
		err = reserve_map(h, kind, target - have, "arena_heap_maintain");
		if (err)
			return err;
		mapped += target - have;
	}
	return mapped;
}

/* Spare chunks of the large sizes' allocator: kept to reserve_large, never churned. */
static __always_inline int large_maintain(bool mapped)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 keep = READ_ONCE(g->reserve_large), now = now_ms(), allocs;
	struct buddy __arena *b;
	u64 maps;
	int err;

	err = arena_buddy_ready();
	if (err)
		return err;
	b = (struct buddy __arena *)arena_buddy_addr();
	if (keep < BUDDY_SPARE_CHUNKS)
		keep = BUDDY_SPARE_CHUNKS;
	allocs = (u32)READ_ONCE(b->stats.allocs);
	if (READ_ONCE(b->stats.chunks_spare) > keep) {
		/* Quiet: no allocation since large_since. */
		if (!g->large_since || allocs != g->large_allocs_seen) {
			g->large_since = now | !now;
			g->large_allocs_seen = allocs;
		}
		if (!mapped && (s32)(now - g->large_since - READ_ONCE(g->purge_delay)) >= 0) {
			buddy_trim_keep(b, keep);
			g->large_since = 0;
		} else {
			due_at(g->large_since + READ_ONCE(g->purge_delay));
		}
		return 0;
	}
	g->large_since = 0;
	maps = READ_ONCE(b->stats.map_calls);
	err = buddy_reserve(b, READ_ONCE(g->reserve_large));
	if (err < 0)
		return err;
	return READ_ONCE(b->stats.map_calls) != maps;
}

/*
 * One pass at a time, so that a caller's pass sees the work of the one before it done
 * (the spans it took out of the pool to give back really gone). Passes were always safe
 * side by side: after HEAP_MAINTAIN_WAIT_NS (a stuck flag, say) this one runs anyway.
 * True when this pass holds the flag.
 */
static __noinline bool maintain_begin(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 i, me = bpf_get_smp_processor_id() + 1, cur;
	u64 start = bpf_ktime_get_ns();

	for (i = zero; i < (1u << 22) && can_loop; i++) {
		cur = READ_ONCE(g->maintaining);
		if (!cur && !cmpxchg(&g->maintaining, 0, me))
			return true;
		/* A pass on this CPU is under us (it slept or was interrupted): no wait. */
		if (cur == me || bpf_ktime_get_ns() - start > HEAP_MAINTAIN_WAIT_NS)
			break;
	}
	atomic_add(&g->maintain_overlaps, 1);
	return false;
}

/*
 * One maintenance pass: trim, refill (pool first), shed quiet spares, and give back
 * what is due, never in a pass that mapped: an idle pass maps and unmaps nothing.
 */
__weak int arena_heap_maintain(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u64 t0 = bpf_ktime_get_ns();
	int err, mapped = 0;
	bool alone;
	u32 id, n;

	arena_subprog_init();
	err = global_ready();
	if (err) {
		arena_stderr("arena_heap_maintain: allocator state is being set up elsewhere");
		return err;
	}
	alone = maintain_begin();
	/* Cleared first: a request made while we work brings us back. */
	WRITE_ONCE(g->want, 0);
	WRITE_ONCE(g->purge_due, 0);
	trim_spans();
	n = READ_ONCE(g->nr_cpus) * HEAP_LEVELS;
	for (id = zero; id < n && can_loop; id++) {
		err = arena_heap_fill(id);
		if (err < 0)
			goto out;
		mapped += err;
	}
	err = large_maintain(mapped);
	if (err > 0)
		mapped += err;
	pool_purge(!mapped);
	if (mapped)
		atomic_add(&g->refills, 1);
out:
	atomic_add(&g->maintain_passes, 1);
	atomic_add(&g->maintain_ns, bpf_ktime_get_ns() - t0);
	if (alone)
		smp_store_release(&g->maintaining, 0);
	return err < 0 ? err : 0;
}

/*
 * Room on this CPU for count objects of size bytes (see heap.h). Sleepable. Large sizes
 * are the buddy's: its spare chunks are raised to what the objects need.
 */
__weak int arena_heap_reserve(u64 size, u64 count)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 cpu = bpf_get_smp_processor_id(), cls, kind, per, have, want, got;
	struct arena_heap __arena *h;
	u64 spans;
	int err;

	arena_subprog_init();
	if (!count)
		return 0;
	if (!size || size > BUDDY_MAX_SIZE) {
		arena_stderr("arena_heap_reserve: %llu bytes: arena_malloc serves 1 to %u",
			     size, BUDDY_MAX_SIZE);
		return -EINVAL;
	}
	err = global_ready();
	if (err)
		return err;
#ifdef LIBARENA_ASAN
	/* arena_malloc asks for the redzone too: room for objects of that size. */
	if (size + ASAN_REDZONE_SIZE <= BUDDY_MAX_SIZE)
		size += ASAN_REDZONE_SIZE;
#endif
	if (size > HEAP_MEDIUM_MAX) {
		per = BUDDY_CHUNK_SIZE >> (64 - __builtin_clzll((size - 1) | 15));
		per = per ? per : 1;
		spans = (count + per - 1) / per + READ_ONCE(g->reserve_large);
		if (spans > BUDDY_NR_SLOTS) {
			arena_stderr("arena_heap_reserve: %llu objects of %llu bytes: too many",
				     count, size);
			return -E2BIG;
		}
		err = arena_buddy_ready();
		if (!err)
			err = buddy_reserve((struct buddy __arena *)arena_buddy_addr(), spans);
		g->large_since = 0;
		return err;
	}
	h = heap_at(cpu * HEAP_LEVELS);
	if (cpu >= READ_ONCE(g->nr_cpus) || cpu >= HEAP_MAX_CPUS ||
	    READ_ONCE(h->magic) != HEAP_MAGIC) {
		arena_stderr("arena_heap_reserve: CPU %u has no heap (run arena_heap_refill)",
			     cpu);
		return -ENOENT;
	}
	cls = __heap_class(size) % HEAP_NR_CLASSES;
	kind = cls >= HEAP_NR_SMALL;
	per = HEAP_KIND_SPAN(kind) / class_size(cls);
	spans = (count + per - 1) / per;
	if (spans > HEAP_NR_SPANS) {
		arena_stderr("arena_heap_reserve: %llu objects of %llu bytes: too many", count,
			     size);
		return -E2BIG;
	}
	/* A fresh reservation is not a quiet heap's spare. */
	h->quiet_since = now_ms() | 1;
	want = spans + heap_target(h, kind);
	have = reserve_count(h, kind);
	if (have >= want)
		return 0;
	got = pool_take(h, kind, want - have);
	if (have + got >= want)
		return 0;
	return reserve_map(h, kind, want - have - got, "arena_heap_reserve");
}

#ifdef __BPF__
static int heap_wq_cb(void *map, int *key, void *value)
{
	atomic_add(&arena_heap_global.wq_runs, 1);
	arena_heap_maintain();
	return 0;
}

static int heap_timer_cb(void *map, int *key, struct heap_timer *t)
{
	u32 due = READ_ONCE(arena_heap_global.purge_due);
	struct heap_wq *w;
	int k = 0;

	if (READ_ONCE(arena_heap_global.want) || (due && (s32)(now_ms() - due) >= 0)) {
		w = bpf_map_lookup_elem(&arena_heap_wq, &k);
		if (w)
			bpf_wq_start(&w->wq, 0);
	}
	bpf_timer_start(&t->timer, HEAP_POLL_NS, 0);
	return 0;
}

/* Arm the background refill: idempotent. */
static __always_inline int heap_arm(void)
{
	struct heap_timer *t;
	struct heap_wq *w;
	int k = 0, err;

	w = bpf_map_lookup_elem(&arena_heap_wq, &k);
	t = bpf_map_lookup_elem(&arena_heap_timer, &k);
	if (!w || !t)
		return -ENOENT;
	err = bpf_wq_init(&w->wq, &arena_heap_wq, 0);
	if (err && err != -EBUSY)
		return err;
	err = bpf_wq_set_callback_impl(&w->wq, heap_wq_cb, 0, NULL);
	if (err)
		return err;
	err = bpf_timer_init(&t->timer, &arena_heap_timer, CLOCK_MONOTONIC);
	if (err && err != -EBUSY)
		return err;
	err = bpf_timer_set_callback(&t->timer, heap_timer_cb);
	if (err)
		return err;
	return bpf_timer_start(&t->timer, HEAP_POLL_NS, 0);
}

/*
 * Create the heaps, fill the reserves, arm the background refill. User space runs it once
 * before programs allocate (libarena_heap_refill()), and whenever it likes after that.
 */
SEC("syscall")
__weak int arena_heap_refill(struct arena_heap_refill_args *args)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 n = args->nr_cpus;
	int err;

	/* The inlined fast paths in heap.h address the arena from this constant. */
	if (((u64)&arena_heap_global & ~0xffffffffull) != ARENA_USER_BASE) {
		arena_stderr("arena_heap_refill: the arena is at %llx, not at ARENA_USER_BASE "
			     "(%llx): was its map_extra changed?",
			     (u64)&arena_heap_global & ~0xffffffffull, ARENA_USER_BASE);
		return -EINVAL;
	}
	err = global_ready();
	if (err)
		return err;
	if (n > HEAP_MAX_CPUS) {
		arena_stderr("arena_heap_refill: %u CPUs, at most %u", n, HEAP_MAX_CPUS);
		return -E2BIG;
	}
	if (n > g->nr_cpus)
		g->nr_cpus = n;
	if (args->reserve_small)
		g->reserve[0] = args->reserve_small;
	if (args->reserve_medium)
		g->reserve[1] = args->reserve_medium;
	if (args->high_water)
		g->high_water = args->high_water;
	if (args->reserve_large)
		g->reserve_large = args->reserve_large;
	if (args->purge_delay_ms)
		g->purge_delay = args->purge_delay_ms;
	if (args->reserve_rest)
		g->reserve_rest = args->reserve_rest;
	/* A refill asks for the targets: no heap counts as quiet from here. */
	g->woken = now_ms() | 1;
#ifdef LIBARENA_ASAN
	asan_map_low(0);
#endif
	err = arena_heap_maintain();
	args->spans_mapped = g->spans_mapped;
	args->pages_mapped = g->pages_mapped;
	if (err)
		return err;
	err = heap_arm();
	if (err)
		arena_stderr("arena_heap_refill: no background refill: %d", err);
	return err;
}

/* The program's body for user space: see arena_heap_collect_cpu(). */
SEC("syscall")
__weak int arena_heap_collect(void *ctx)
{
	return arena_heap_collect_cpu();
}
#endif

#ifdef LIBARENA_ASAN
#pragma clang attribute pop
#endif
