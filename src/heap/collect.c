// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* heap.bpf.c, part 5 of 7: collection of remote frees, on the CPU that runs it. */
#include "internal.h"

/* ---- collection, on the CPU that runs it ---- */

/*
 * Collection runs preemptible: it claims the heap with a compare-and-swap instead, and an
 * allocation that interrupts or preempts it on this CPU finds the heap busy and moves
 * to the next level. Global functions, so the verifier checks each once.
 */
__weak int arena_heap_tidy_span(struct arena_heap __arena *h __arg_arena, u32 s)
{
	struct arena_heap_span __arena *sp = __heap_span(s);

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
			next = __heap_span(s - 1)->next;
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
		h = __heap_of(cpu * HEAP_LEVELS + lvl);
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			break;
		if (cmpxchg(&h->busy, 0, 1) != 0)
			continue;
		n += arena_heap_tidy(h);
		/* The tidying's stores before the heap's next user takes it by a swap. */
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
		h = __heap_of(id);
		if (READ_ONCE(h->magic) != HEAP_MAGIC)
			continue;
		out += (s64)h->stats.allocs - (s64)h->stats.frees - (s64)h->stats.remote_frees;
	}
	out -= (s64)READ_ONCE(g->orphan_frees);
	/* arena_free took those back; the sanitizer holds them a while. */
	out -= asan_hook_quarantined();
	return out;
}
