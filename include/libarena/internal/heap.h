/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Not API: the heap's internals that arena_malloc() and arena_free() inline into the
 * caller (include/libarena/heap.h), shared with the library's own code (src/heap/).
 * Names and layout change without notice; programs use heap.h.
 */
#ifndef __LIBARENA_INTERNAL_HEAP_H
#define __LIBARENA_INTERNAL_HEAP_H

#include <libarena/base.h>
#include <libarena/alloc_types.h>

/*
 * Object index = ((offset / 16) * recip) >> HEAP_RECIP_SHIFT, exact while
 * offset / 16 * size / 16 < 2^31 (offsets < 128 KiB and sizes <= 64 KiB: at most 2^25).
 */
#define HEAP_RECIP_SHIFT	31

static __always_inline u32 span_recip(u32 size)
{
	u32 d = size >> 4;

	return d ? ((1u << HEAP_RECIP_SHIFT) + d - 1) / d : 0;
}

/*
 * ---- The layout as code: shared by the library and the inlined fast paths ----
 *
 * The arena lives at ARENA_USER_BASE (the arena map's map_extra; arena_heap_refill
 * refuses to start otherwise), so every address below is a constant plus an offset.
 */

static __always_inline struct arena_heap_span __arena *__heap_span(u32 s)
{
	return (struct arena_heap_span __arena *)(ARENA_USER_BASE + HEAP_DESC_START +
						  (u64)(s & (HEAP_NR_SPANS - 1)) * 64);
}

/* Heap id (cpu * HEAP_LEVELS + level); callers keep it below HEAP_MAX_HEAPS. */
static __always_inline struct arena_heap __arena *__heap_of(u32 id)
{
	return (struct arena_heap __arena *)(ARENA_USER_BASE + HEAP_HEAPS_START +
					     (u64)id * HEAP_HEAP_SIZE);
}

/* The span slot of an address; >= HEAP_NR_SPANS when it is outside the heap window. */
static __always_inline u32 __heap_span_of(u64 addr)
{
	u64 hi = addr >> 32;

	barrier_var(hi);	/* a shift and a compare, not a 64-bit mask and constant */
	if (hi != ARENA_USER_BASE >> 32)
		return HEAP_NR_SPANS;
	return ((u32)addr - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
}

/*
 * Size classes: 16..128 by 16, four per power of two to 8 KiB, then 10 KiB and whole
 * pages to 64 KiB (so a trimmed span maps exactly what its objects cover). Every class
 * boundary up to 1 KiB is a multiple of 16 and up to 8 KiB a multiple of 128, so two
 * tables (65 entries used of 128) give the class of a small size with one load.
 * arena_heap_class_size states the rule they were generated from; test_heap_classes
 * checks every size.
 */
static const u8 __heap_class_by_16[128] = {	/* up to 1 KiB, by (size + 15) / 16 */
	0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 9, 9, 10, 10, 11, 11,
	12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15,
	16, 16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17, 17, 17, 17,
	18, 18, 18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19,
};

static const u8 __heap_class_by_128[128] = {	/* up to 8 KiB, by (size + 127) / 128 */
	20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 21, 21, 22, 22, 23, 23,
	24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26, 26, 27, 27, 27, 27,
	28, 28, 28, 28, 28, 28, 28, 28, 29, 29, 29, 29, 29, 29, 29, 29,
	30, 30, 30, 30, 30, 30, 30, 30, 31, 31, 31, 31, 31, 31, 31, 31,
};

/* The class of 1 .. HEAP_MEDIUM_MAX bytes: no division, no loop. */
static __always_inline u32 __heap_class(u64 size)
{
	u64 i;

	/*
	 * The masks bound the index for the verifier, which cannot tie it to the size check
	 * once clang computed it (and spilled it) earlier; barrier_var keeps clang from
	 * proving the mask useless and dropping it.
	 */
	if (size <= 1024) {
		i = (size + 15) >> 4;
		barrier_var(i);
		return __heap_class_by_16[i & 127];
	}
	if (size <= HEAP_SMALL_MAX) {
		i = (size + 127) >> 7;
		barrier_var(i);
		return __heap_class_by_128[i & 127];
	}
	if (size <= (10u << 10))
		return HEAP_NR_SMALL;
	return HEAP_NR_SMALL + (u32)((size + 4095) >> 12) - 2;
}

/* Why an object cannot be freed (HEAP_FREE_OK: it can). */
enum {
	HEAP_FREE_OK,
	HEAP_FREE_NO_SPAN,	/* not in an allocated span */
	HEAP_FREE_INTERIOR,	/* into the middle of an object */
	HEAP_FREE_NEVER,	/* beyond what the span ever handed out */
	HEAP_FREE_DOUBLE,	/* already free */
};

/*
 * Is obj where an object of span sp starts, and has the span handed it out? The index
 * comes from the span's reciprocal (no division); index * size == offset is the exact
 * test, so a damaged reciprocal can only refuse a free.
 */
static __always_inline bool __heap_obj_start(struct arena_heap_span __arena *sp, u64 obj)
{
	u32 rel = (u32)obj & (HEAP_SPAN_SIZE - 1), idx;

	idx = ((u64)(rel >> 4) * sp->recip) >> HEAP_RECIP_SHIFT;
	/* The owner raises bump while another CPU frees here: a racy read, by design. */
	return idx * sp->size == rel && idx < READ_ONCE(sp->bump);
}

static __always_inline bool __heap_obj_free(u64 obj)
{
	return ((u32 __arena *)obj)[2] == (HEAP_FREE_TAG ^ (u32)obj);
}

static __always_inline void __heap_tag_free(u64 obj)
{
	((u32 __arena *)obj)[2] = HEAP_FREE_TAG ^ (u32)obj;
}

/*
 * The object tests of a free without their branches, for the fast paths: nonzero when
 * obj is not where an object of size bytes starts, was never handed out (bump: the
 * span's, read once by the caller), or is free already. A nonzero answer goes to
 * __heap_free_check(), which says why.
 */
static __always_inline u64 __heap_obj_bad(struct arena_heap_span __arena *sp, u64 obj,
					  u64 size, u64 bump)
{
	u64 rel = (u32)obj & (HEAP_SPAN_SIZE - 1), idx, tag;

	idx = ((rel >> 4) * sp->recip) >> HEAP_RECIP_SHIFT;	/* < 2^14 */
	tag = ((u32 __arena *)obj)[2] ^ HEAP_FREE_TAG ^ (u32)obj;	/* 0: free */
	barrier_var(tag);
	return ((idx * size) ^ rel) |		/* not where an object starts */
	       ((bump - 1 - idx) >> 63) |	/* never handed out */
	       ((tag - 1) >> 63);		/* already free */
}

/* Why obj of span sp cannot be freed (HEAP_FREE_OK: it can). */
static __always_inline int __heap_free_check(struct arena_heap_span __arena *sp, u64 obj)
{
	u32 rel = (u32)obj & (HEAP_SPAN_SIZE - 1);

	if (sp->magic != HEAP_SPAN_MAGIC || sp->state != HEAP_SPAN_ACTIVE || !sp->size)
		return HEAP_FREE_NO_SPAN;
	if (!__heap_obj_start(sp, obj))
		return (rel / sp->size) * sp->size != rel ? HEAP_FREE_INTERIOR : HEAP_FREE_NEVER;
	if (__heap_obj_free(obj))
		return HEAP_FREE_DOUBLE;
	return HEAP_FREE_OK;
}

/*
 * Take heap h for this CPU's current program, or false when something below us has it.
 * A heap not created yet reads as all zeroes (its page is fresh or not mapped at all),
 * so it is "entered" and has no current span: the caller ends up on the slow path.
 */
static __always_inline bool __heap_try_enter(struct arena_heap __arena *h)
{
	if (h->busy)
		return false;
	/* An interrupting program runs to completion before we go on. */
	WRITE_ONCE(h->busy, 1);
	barrier();
	return true;
}

/*
 * The inlined paths take only level 0 of their CPU: NULL for a CPU beyond the heaps or
 * a busy level 0 (we interrupted its user), which the library handles.
 */
static __always_inline struct arena_heap __arena *__heap_enter_cpu(u32 cpu)
{
	struct arena_heap __arena *h = __heap_of(cpu * HEAP_LEVELS);

	if ((cpu & ~(HEAP_MAX_CPUS - 1)) | h->busy)
		return NULL;
	WRITE_ONCE(h->busy, 1);
	barrier();
	return h;
}

static __always_inline void __heap_leave(struct arena_heap __arena *h)
{
	barrier();
	WRITE_ONCE(h->busy, 0);
}

/*
 * Pop an object of class cls from h's current span: the local free list, else the next
 * never-used object. 0 when the span has none (or its list points outside the span,
 * which the library's slow path repairs).
 */
static __always_inline u64 __heap_pop(struct arena_heap __arena *h, u32 cls)
{
	struct arena_heap_span __arena *sp;
	u32 s = h->current[cls], off, bump;
	u64 obj;

	/*
	 * No bound on cls or s needed: a wild index still reads arena memory. s == 0 (no
	 * current span) reads the descriptor before the first one, which the tests below
	 * then refuse: one branch for the common case, a list head inside the span.
	 */
	sp = (struct arena_heap_span __arena *)(ARENA_USER_BASE + HEAP_DESC_START - 64 +
						(u64)s * 64);
	off = sp->local;
	if (((off - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT) + 1 == s) {
		obj = ARENA_USER_BASE + off;
		sp->local = *(u32 __arena *)obj;
	} else if (!off && s) {
		bump = sp->bump;
		if (bump >= sp->capacity)
			return 0;	/* span used up */
		obj = ARENA_USER_BASE + HEAP_WINDOW_START +
		      ((u64)((s - 1) & (HEAP_NR_SPANS - 1)) << HEAP_SPAN_SHIFT) +
		      (u64)bump * sp->size;
		WRITE_ONCE(sp->bump, bump + 1);
	} else {
		return 0;	/* no span, or a damaged list */
	}
	((u32 __arena *)obj)[2] = 0;		/* no longer tagged free */
	sp->used++;
	h->stats.allocs++;
	return obj;
}

/*
 * Push a checked object onto its span's local list: the owner, under its heap. used is
 * sp->used as the caller read it, at least 1.
 */
static __always_inline void __heap_push(struct arena_heap __arena *h,
					struct arena_heap_span __arena *sp, u64 obj, u32 used)
{
	*(u32 __arena *)obj = sp->local;
	__heap_tag_free(obj);
	sp->local = (u32)obj;
	sp->used = used - 1;
	h->stats.frees++;
}

#ifdef __BPF__
/*
 * The fast paths that arena_malloc() and arena_free() inline in the plain build (and the
 * sanitizer build's library calls run first): the CPU's level-0 heap, preemption off.
 * An object of class cls from its current span, or 0.
 */
static __always_inline u64 __heap_malloc_fast(u32 cls)
{
	struct arena_heap __arena *h;
	u64 addr = 0;

	arena_subprog_init();
	bpf_preempt_disable();
	h = __heap_enter_cpu(bpf_get_smp_processor_id());
	if (h) {
		addr = __heap_pop(h, cls);
		__heap_leave(h);
	}
	bpf_preempt_enable();
	return addr;
}

/*
 * Free obj, in span s of the heap window, onto its span's local list: true when done.
 * The span's owner is checked with the heap held: owner != 0 only while the span is
 * active, and only the owner moves its local list, bump and used, so the other checks
 * read settled values. Everything this does not take (the tests below, each nonzero
 * when it fails) goes to the library, which checks again and says why.
 */
static __always_inline bool __heap_free_fast(u64 obj, u32 s)
{
	u64 used, bump, listed, bad;
	struct arena_heap_span __arena *sp;
	struct arena_heap __arena *h;
	bool done = false;
	u32 cpu;

	sp = __heap_span(s);
	arena_subprog_init();
	bpf_preempt_disable();
	cpu = bpf_get_smp_processor_id();
	h = __heap_enter_cpu(cpu);
	if (h) {
		used = sp->used;
		bump = sp->bump;
		listed = sp->listed & 1;
		barrier_var(used);
		barrier_var(bump);
		bad = (sp->owner ^ (cpu * HEAP_LEVELS + 1)) |	/* not ours, or not active */
		      __heap_obj_bad(sp, obj, sp->size, bump) |
		      (READ_ONCE(sp->remote) >> 63) |		/* parked full */
		      ((used - 1) >> 63) |			/* nothing out: damaged */
		      ((((used ^ 1) - 1) >> 63) & listed);	/* the last of a listed span */
		if (!bad) {
			__heap_push(h, sp, obj, used);
			done = true;
		}
		__heap_leave(h);
	}
	bpf_preempt_enable();
	return done;
}
#else
/* The host tests' natively compiled library: no fast path, the library's own serves. */
static __always_inline u64 __heap_malloc_fast(u32 cls)
{
	(void)cls;
	return 0;
}

static __always_inline bool __heap_free_fast(u64 obj, u32 s)
{
	(void)obj;
	(void)s;
	return false;
}
#endif

#endif /* __LIBARENA_INTERNAL_HEAP_H */
