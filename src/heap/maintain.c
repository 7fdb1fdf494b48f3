// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * heap.bpf.c, part 6 of 7: maintenance: mapping, trimming and giving back spans
 * (sleepable only).
 */
#include "internal.h"

/* ---- maintenance: sleepable only ---- */

/* Map a span of a kind (and its descriptor page, the first time): its index, or -errno. */
static __always_inline int span_new(u32 kind)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	u32 s, page, i, pages = kind_pages(kind);
	void __arena *p;

	for (i = zero; i < SPAN_TRIES && can_loop; i++) {
		if (!arena_claim_bit(g->claimed, HEAP_NR_SPANS / 64, &s))
			return -ENOMEM;
		page = s / 64;			/* 64 descriptors per page */
		if (!(READ_ONCE(g->desc_mapped[page / 64]) & (1ull << (page % 64)))) {
			p = bpf_arena_alloc_pages(&arena, (void __arena *)(ARENA_USER_BASE +
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
		sp = __heap_span(s);
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
			arena_clear_bit(g->claimed, s);
			return -ENOMEM;
		}
		atomic_add(&g->spans_mapped, 1);
		atomic_add(&g->pages_mapped, pages);
		/*
		 * And the granule before it, so p[-1] of its first object is caught. Before
		 * span 0 that is outside the window: only that one granule is poisoned.
		 */
		asan_hook_map(span_addr(s) - ASAN_SHADOW_SCALE, HEAP_SPAN_SIZE + ASAN_SHADOW_SCALE,
			      s ? ASAN_UNALLOCATED : 0);
		if (!s)
			asan_hook_poison(span_addr(0) - ASAN_SHADOW_SCALE, ASAN_SHADOW_SCALE,
					 ASAN_UNALLOCATED);
		asan_hook_poison(span_addr(s), HEAP_SPAN_SIZE, ASAN_UNALLOCATED);
		return s;
	}
	return -ENOMEM;
}

/* Give a span's pages back to the kernel and its slot to whoever maps next. */
static __always_inline int span_unmap(u32 s, u32 pages)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp = __heap_span(s);

	if (s >= HEAP_NR_SPANS || pages > MEDIUM_PAGES)
		return -EINVAL;
	sp->magic = 0;
	sp->state = 0;
	bpf_arena_free_pages(&arena, (void __arena *)span_addr(s), pages);
	asan_hook_poison(span_addr(s), HEAP_SPAN_SIZE, ASAN_RELEASED);
	arena_clear_bit(g->claimed, s);
	atomic_add(&g->spans_mapped, -1);
	atomic_add(&g->pages_mapped, -(s64)pages);
	atomic_add(&g->spans_returned, 1);
	atomic_add(&g->unmap_calls, 1);
	atomic_add(&g->unmap_pages, pages);
	return 0;
}

/* The same as a call (heap.h), sleepable: maintenance's, and tests'. */
__weak int arena_heap_span_unmap(u32 s, u32 pages)
{
	arena_subprog_init();
	return span_unmap(s, pages);
}

/*
 * Give the pool's due spans back to the kernel (only trimmed ones unless may_unmap:
 * their pages cannot serve again). A span still on the trim stack, or being trimmed,
 * waits for the next pass: the trim walk reads its descriptor. The pool is held only
 * for the walk; the unmaps, slow, come after the rest is back. Returns how many went.
 */
static __always_inline int pool_purge(bool may_unmap)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 s, i, next, trim, now = now_ms(), delay = READ_ONCE(g->purge_delay);
	struct pool_chain keep = {}, gone = {};
	struct arena_heap_span __arena *sp;

	if (!READ_ONCE(g->release))
		return 0;
	pool_for_each_span(s, sp, next, i) {
		trim = READ_ONCE(sp->trim);
		if (trim == HEAP_TRIM_DONE ||
		    (may_unmap && trim == HEAP_TRIM_NONE && (s32)(now - sp->bump - delay) >= 0)) {
			chain_append(&gone, s);
		} else {
			due_at(sp->bump + delay);
			chain_append(&keep, s);
		}
	}
	chain_to_pool(&keep);
	pool_unhold();
	/* Only this walk knows the gone chain: nobody else reads it now. */
	s = gone.first;
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = __heap_span(s - 1);
		next = sp->link;
		if (READ_ONCE(sp->trim) == HEAP_TRIM_DONE)
			span_unmap(s - 1, class_pages(sp->cls % HEAP_NR_CLASSES));
		else
			span_unmap(s - 1, kind_pages(sp->kind & 1));
		s = next;
	}
	return gone.n;
}

/*
 * A quiet heap's spares beyond the target: its reserves taken whole, target of them
 * back to the incoming one, the rest to the pool, due at once (they waited already).
 * The owner meanwhile finds its reserve empty and takes from the pool: nothing is lost.
 */
static __always_inline u32 reserve_shed(struct arena_heap __arena *h, u32 kind,
					u32 target)
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
		sp = __heap_span(s - 1);
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
			/* Waited already: due at once. */
			span_mark_released(sp, now - READ_ONCE(g->purge_delay));
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
					    &__heap_span(keep_last - 1)->next, kept))
		atomic_add(&g->lost_spans, kept);
	chain_to_pool(&shed);
	pool_unhold();
	if (!shed.first)
		return 0;
	atomic_add(&g->spares_shed, shed.n);
	due_at(now);
	return shed.n;
}

/* Span s is BUSY: give back the pages its class leaves unused, then make it DONE. */
static __always_inline void trim_span(u32 s, struct arena_heap_span __arena *sp)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 used = class_pages(sp->cls % HEAP_NR_CLASSES);

	/* take_reserve queues only such spans; checked again as a bound. */
	if (used < MEDIUM_PAGES) {
		bpf_arena_free_pages(&arena, (void __arena *)(span_addr(s) + used * 4096ull),
				     MEDIUM_PAGES - used);
		atomic_add(&g->pages_mapped, -(s64)(MEDIUM_PAGES - used));
		atomic_add(&g->unmap_calls, 1);
		atomic_add(&g->unmap_pages, MEDIUM_PAGES - used);
		atomic_add(&g->pages_trimmed, MEDIUM_PAGES - used);
	}
	/* The pages given back and counted before DONE, which pool and owner test. */
	smp_store_release(&sp->trim, HEAP_TRIM_DONE);
}

/*
 * Give back the pages that spans taken since the last pass leave unused. The owner may
 * be retiring a span meanwhile: whoever moves it off HEAP_TRIM_PENDING first decides.
 */
static __always_inline int trim_spans(void)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	u32 s, i, next, t;
	int n = 0;
	u64 r;

	r = xchg(&g->trim, 0);
	s = HEAP_WORD_FIRST(r);
	for (i = zero; s && i < HEAP_NR_SPANS && can_loop; i++) {
		sp = __heap_span(s - 1);
		if (sp->magic != HEAP_SPAN_MAGIC)
			break;
		next = sp->trim_link;
		/*
		 * PENDING: trim it. CANCELLED (emptied before its turn): whole, and off the
		 * stack now. Between the two compare-and-swaps the owner may take the span
		 * again (CANCELLED to PENDING, which counts on it being queued) or retire
		 * it (PENDING to CANCELLED): look again, or it would stay off the stack.
		 * Anything else is damage (the descriptor is arena memory): leave it.
		 */
		while (can_loop) {
			t = READ_ONCE(sp->trim);
			if (t != HEAP_TRIM_PENDING && t != HEAP_TRIM_CANCELLED) {
				atomic_add(&g->lost_spans, 1);
				break;
			}
			if (cmpxchg(&sp->trim, HEAP_TRIM_PENDING, HEAP_TRIM_BUSY) ==
			    HEAP_TRIM_PENDING) {
				trim_span(s - 1, sp);
				n++;
				break;
			}
			if (cmpxchg(&sp->trim, HEAP_TRIM_CANCELLED, HEAP_TRIM_NONE) ==
			    HEAP_TRIM_CANCELLED)
				break;
		}
		s = next;
	}
	return n;
}

static __always_inline int heap_create(u32 id)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap __arena *h = __heap_of(id);
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
	/* The zeroed heap before the magic that lets the other paths use it. */
	smp_store_release(&h->magic, HEAP_MAGIC);
	if (READ_ONCE(h->magic) != HEAP_MAGIC) {
		arena_clear_bit(arena_heap_created, id);
		return -ENOMEM;
	}
	return 0;
}

/*
 * ---- maintenance's steps ----
 *
 * Each a global function that calls nothing of ours, verified once in a program: the
 * passes (arena_heap_maintain, arena_heap_fill, arena_heap_reserve) are loops of calls
 * to them, so the verifier's walk of a pass stays small, and a pass takes two frames
 * below its caller. Sleepable.
 */

/* Create heap id, unless someone made (or is making) it: 0 or -ENOMEM. */
__weak int __heap_create(u32 id)
{
	arena_subprog_init();
	return heap_create(id % HEAP_MAX_HEAPS);
}

/* Map a span of a kind into h's incoming reserve: 0, or -ENOMEM, -EAGAIN (the push). */
__weak int __heap_map_span(struct arena_heap __arena *h __arg_arena, u32 kind)
{
	int s;

	arena_subprog_init();
	s = span_new(kind & 1);
	if (s < 0)
		return -ENOMEM;
	if (!stack_push(&h->reserve_in[kind & 1], &__heap_span(s)->next, s + 1)) {
		atomic_add(&arena_heap_global.lost_spans, 1);
		return -EAGAIN;
	}
	return 0;
}

/* pool_take as a step: up to n spans of a kind from the pool for h. How many. */
__weak int __heap_pool_take(struct arena_heap __arena *h __arg_arena, u32 kind, u32 n)
{
	arena_subprog_init();
	return pool_take(h, kind & 1, n);
}

/* reserve_shed as a step: h's spares of a kind beyond target to the pool. How many. */
__weak int __heap_reserve_shed(struct arena_heap __arena *h __arg_arena, u32 kind, u32 target)
{
	arena_subprog_init();
	return reserve_shed(h, kind & 1, target);
}

/* trim_spans and pool_purge as steps. */
__weak int __heap_trim_spans(void)
{
	arena_subprog_init();
	return trim_spans();
}

__weak int __heap_pool_purge(u32 may_unmap)
{
	arena_subprog_init();
	return pool_purge(may_unmap);
}

static __always_inline int global_setup(void)
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
	/* The settings before the magic that the waiters above and the paths test. */
	smp_store_release(&g->magic, HEAP_GLOBAL_MAGIC);
	return 0;
}

/* Map n spans of a kind into h's incoming reserve. Sleepable. 0 or -errno. */
static __always_inline int reserve_map(struct arena_heap __arena *h, u32 kind, u32 n,
				       const char *who)
{
	u32 j;
	int err;

	for (j = zero; j < n && can_loop; j++) {
		err = __heap_map_span(h, kind);
		if (err == -ENOMEM)
			arena_stderr("%s: no pages for a span", who);
		if (err)
			return err;
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
	struct arena_heap __arena *h = __heap_of(id);
	u32 kind, have, target, now, taken, delay, since, rest;
	int err, mapped = 0;
	bool quiet;

	arena_subprog_init();
	if (id >= HEAP_MAX_HEAPS)
		return -EINVAL;
	if (READ_ONCE(h->magic) != HEAP_MAGIC) {
		err = __heap_create(id);
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
				__heap_reserve_shed(h, kind, target);
			else
				due_at(since + delay);
			continue;
		}
		if (have < target)
			have += __heap_pool_take(h, kind, target - have);
		if (have >= target)
			continue;
		err = reserve_map(h, kind, target - have, "arena_heap_maintain");
		if (err)
			return err;
		mapped += target - have;
	}
	return mapped;
}

/*
 * Spare chunks of the large sizes' allocator up to spares, mapped by a step each (not
 * buddy_reserve(), a frame more). Sleepable. 0 or -errno, with a log line.
 */
static __always_inline int large_reserve(u64 spares, const char *who)
{
	struct buddy __arena *b;
	int err;
	u32 i;

	err = __buddy_setup_default();
	if (err) {
		arena_stderr("%s: the large sizes' allocator: no set-up: %d", who, err);
		return err;
	}
	b = (struct buddy __arena *)arena_buddy_addr();
	for (i = zero; i < BUDDY_NR_SLOTS && can_loop; i++) {
		if (READ_ONCE(b->stats.chunks_spare) >= spares)
			return 0;
		err = __buddy_add_chunk(b);
		if (err) {
			arena_stderr("%s: no chunk for the large sizes: %d", who, err);
			return err;
		}
	}
	return -E2BIG;
}

/*
 * Give the large sizes' allocator's spare chunks beyond keep back to the kernel: the
 * pairs apart merged, then a chunk at a time, by steps (not buddy_trim_keep(), whose
 * flush of the CPUs' caches and drain serve small blocks, which arena_malloc never
 * takes from it; the next allocation drains what waits). Sleepable.
 */
static __always_inline void large_trim(struct buddy __arena *b, u32 keep)
{
	s64 slot;
	u32 i;

	for (i = zero; i < BUDDY_NR_SLOTS && can_loop; i++) {
		slot = buddy_patiently(b, buddy_coalesce(b) ?: __buddy_take_spare(b, 0, keep));
		if (slot <= 0)
			break;
		__buddy_release_chunk(b, slot - 1);
	}
}

/* Spare chunks of the large sizes' allocator: kept to reserve_large, never churned. */
static __always_inline int large_maintain(bool mapped)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 keep = READ_ONCE(g->reserve_large), now = now_ms(), allocs;
	struct buddy __arena *b;
	u64 maps;
	int err;

	err = __buddy_setup_default();
	if (err) {
		arena_stderr("arena_heap_maintain: the large sizes' allocator: no set-up: %d", err);
		return err;
	}
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
			large_trim(b, keep);
			g->large_since = 0;
		} else {
			due_at(g->large_since + READ_ONCE(g->purge_delay));
		}
		return 0;
	}
	g->large_since = 0;
	maps = READ_ONCE(b->stats.map_calls);
	err = large_reserve(READ_ONCE(g->reserve_large), "arena_heap_maintain");
	if (err < 0)
		return err;
	return READ_ONCE(b->stats.map_calls) != maps;
}

/*
 * large_maintain() as a call of its own: the pass's frame then holds neither its state
 * nor that of the heaps' refill (arena_heap_fill) at once. It calls only steps.
 */
__weak int __heap_large_maintain(u32 mapped)
{
	arena_subprog_init();
	return large_maintain(mapped);
}

/*
 * One pass at a time, so that a caller's pass sees the work of the one before it done
 * (the spans it took out of the pool to give back really gone). Passes were always safe
 * side by side: after HEAP_MAINTAIN_WAIT_NS (a stuck flag, say) this one runs anyway.
 * True when this pass holds the flag.
 */
static __always_inline bool maintain_begin(void)
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

/* One pass at a time (see maintain_begin()): true when this pass holds the flag. */
__weak bool __heap_maintain_begin(void)
{
	arena_subprog_init();
	return maintain_begin();
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
	err = global_setup();
	if (err) {
		arena_stderr("%s: allocator state is being set up elsewhere", __func__);
		return err;
	}
	alone = __heap_maintain_begin();
	/* Cleared first: a request made while we work brings us back. */
	WRITE_ONCE(g->want, 0);
	WRITE_ONCE(g->purge_due, 0);
	__heap_trim_spans();
	n = READ_ONCE(g->nr_cpus) * HEAP_LEVELS;
	for (id = zero; id < n && can_loop; id++) {
		err = arena_heap_fill(id);
		if (err < 0)
			goto out;
		mapped += err;
	}
	err = __heap_large_maintain(mapped);
	if (err > 0)
		mapped += err;
	__heap_pool_purge(!mapped);
	if (mapped)
		atomic_add(&g->refills, 1);
out:
	atomic_add(&g->maintain_passes, 1);
	atomic_add(&g->maintain_ns, bpf_ktime_get_ns() - t0);
	if (alone) {
		/* This pass's stores before the next pass claims maintaining by a swap. */
		smp_store_release(&g->maintaining, 0);
	}
	return err < 0 ? err : 0;
}

/*
 * Room on this CPU for count objects of size bytes (see heap.h). Sleepable. Large sizes
 * are the buddy's: its spare chunks are raised to what the objects need.
 */
/* The heaps' part of arena_heap_reserve: size (with its redzone) a heap size. */
static __always_inline int reserve_small(u64 size, u64 count, const char *who)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 cpu = bpf_get_smp_processor_id(), cls, kind, per, have, want, got;
	struct arena_heap __arena *h;
	u64 spans;

	h = __heap_of(cpu * HEAP_LEVELS);
	/* A CPU with a heap to be: created here if maintenance has not yet. */
	if (cpu < READ_ONCE(g->nr_cpus) && cpu < HEAP_MAX_CPUS &&
	    READ_ONCE(h->magic) != HEAP_MAGIC)
		__heap_create(cpu * HEAP_LEVELS);
	if (cpu >= READ_ONCE(g->nr_cpus) || cpu >= HEAP_MAX_CPUS ||
	    READ_ONCE(h->magic) != HEAP_MAGIC) {
		arena_stderr("%s: CPU %u has no heap (run arena_heap_refill)", who, cpu);
		return -ENOENT;
	}
	cls = __heap_class(size) % HEAP_NR_CLASSES;
	kind = cls >= HEAP_NR_SMALL;
	per = HEAP_KIND_SPAN(kind) / class_size(cls);
	spans = (count + per - 1) / per;
	if (spans > HEAP_NR_SPANS) {
		arena_stderr("%s: %llu objects of %llu bytes: too many", who, count, size);
		return -E2BIG;
	}
	/* A fresh reservation is not a quiet heap's spare. */
	h->quiet_since = now_ms() | 1;
	want = spans + heap_target(h, kind);
	have = reserve_count(h, kind);
	if (have >= want)
		return 0;
	got = __heap_pool_take(h, kind, want - have);
	if (have + got >= want)
		return 0;
	return reserve_map(h, kind, want - have - got, who);
}

__weak int arena_heap_reserve(u64 size, u64 count)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u64 spans, per;
	int err;

	arena_subprog_init();
	if (!count)
		return 0;
	if (!size || size > BUDDY_MAX_SIZE) {
		arena_stderr("%s: %llu bytes: arena_malloc serves 1 to %u", __func__,
			     size, BUDDY_MAX_SIZE);
		return -EINVAL;
	}
	err = global_setup();
	if (err)
		return err;
	/* arena_malloc asks for the redzone too: room for objects of that size. */
	size = alloc_size(size);
	if (size <= HEAP_MEDIUM_MAX)
		return reserve_small(size, count, __func__);
	per = BUDDY_CHUNK_SIZE >> (64 - __builtin_clzll((size - 1) | 15));
	per = per ? per : 1;
	spans = (count + per - 1) / per + READ_ONCE(g->reserve_large);
	if (spans > BUDDY_NR_SLOTS) {
		arena_stderr("%s: %llu objects of %llu bytes: too many", __func__, count, size);
		return -E2BIG;
	}
	g->large_since = 0;
	return large_reserve(spans, __func__);
}

/*
 * The same for sizes the heaps serve, without the large sizes' part: a program that
 * reserves only such sizes never reaches the buddy allocator (heap.h).
 */
__weak int arena_heap_reserve_small(u64 size, u64 count)
{
	int err;

	arena_subprog_init();
	if (!count)
		return 0;
	if (!size || alloc_size(size) > HEAP_MEDIUM_MAX) {
		arena_stderr("%s: %llu bytes: not a size of the heaps", __func__, size);
		return -EINVAL;
	}
	err = global_setup();
	return err ?: reserve_small(alloc_size(size), count, "arena_heap_reserve");
}

/*
 * Sleepable programs only (it reaches the page kfuncs): arena_malloc, and when that
 * fails, room made for the object and one more try: a span reserved on this CPU (its
 * heap created first if need be), or for the large sizes a chunk mapped. Not a whole
 * maintenance pass: that would take a frame more than the call may.
 */
__weak u64 arena_malloc_sleepable_addr(u64 size)
{
	u64 addr;

	arena_subprog_init();
	if (size <= HEAP_MEDIUM_MAX && global_setup())
		return 0;
	addr = arena_malloc_addr(size);
	if (addr || !size || size > BUDDY_MAX_SIZE || arena_heap_reserve(size, 1))
		return addr;
	return arena_malloc_addr(size);
}
