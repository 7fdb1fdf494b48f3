// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * heap.bpf.c, part 4 of 7: the public calls: arena_malloc_addr, arena_free_slow and
 * the rest.
 */
#include "internal.h"

/* ---- the public calls ---- */

/*
 * Bytes to ask an allocator for size bytes: in the sanitizer build, size and a redzone
 * after it, unless that would need more than the largest block (the block then ends
 * where the object does). The one place the redzone is added.
 */
static __always_inline u64 alloc_size(u64 size)
{
	if (ASAN_ENABLED && size <= BUDDY_MAX_SIZE - ASAN_REDZONE_SIZE)
		return size + ASAN_REDZONE_SIZE;
	return size;
}

/* A buddy block for size bytes (asz with the redzone); *slot its bytes. */
static __always_inline u64 malloc_large(u64 size, u64 asz, u64 *slot)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct buddy __arena *b;
	s64 addr;
	u32 order;

	if (!arena_buddy_is_ready()) {
		/* The background refill makes it ready (a program may have destroyed it). */
		WRITE_ONCE(g->want, 1);
		arena_stderr(
			"arena_malloc: %llu bytes: the large allocator is not ready (run arena_heap_refill)",
			size);
		return 0;
	}
	if (asz > BUDDY_MAX_SIZE) {
		arena_stderr("arena_malloc: %llu bytes: more than the %u the allocator serves",
			     size, BUDDY_MAX_SIZE);
		return 0;
	}
	b = (struct buddy __arena *)arena_buddy_addr();
	/* Once, kept opaque: recomputed, its steps' temporaries would be spilled. */
	order = buddy_order(asz);
	barrier_var(order);
	addr = buddy_take_block(b, order, 0, asz, false, false);
	if (addr < 0) {
		WRITE_ONCE(g->want, 1);
		arena_stderr("arena_malloc: %llu bytes: %s", size, addr == -ETIMEDOUT ?
			     "the large allocator's lock timed out" :
			     "no room in the large allocator's chunks");
		return 0;
	}
	*slot = (u64)BUDDY_MIN_SIZE << order;
	atomic_add(&g->large_allocs, 1);
	return addr;
}

/*
 * An object of class cls from held heap h: the current span, else the next one, each
 * step a global call (see owner.c). A round makes a span current; the one after it
 * takes from it.
 */
static __always_inline u64 heap_alloc(struct arena_heap __arena *h, u32 cls)
{
	u64 addr;
	u32 i;

	for (i = zero; i < SLOW_ROUNDS + 1 && can_loop; i++) {
		addr = arena_heap_alloc_current(h, cls);
		if (addr == HEAP_ALLOC_AGAIN)
			continue;
		if (addr || !arena_heap_take_span(h, cls))
			return addr;
	}
	return 0;
}

/* A heap object for size bytes (with its redzone, asz: at most HEAP_MEDIUM_MAX). */
static __always_inline u64 malloc_small(u64 size, u64 asz, u64 *slot)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap __arena *h;
	u64 addr = 0;
	u32 cls;

	cls = __heap_class(asz);
	*slot = class_size(cls);
	/* The sanitizer build's programs do not inline the fast path: it runs here. */
	addr = ASAN_ENABLED ? __heap_malloc_fast(cls) : 0;
	if (addr)
		return addr;
	h = heap_claim();
	if (h) {
		addr = heap_alloc(h, cls);
		heap_unclaim(h);
	} else {
		atomic_add(&g->no_heap, 1);
		WRITE_ONCE(g->want, 1);
		arena_stderr("arena_malloc: no heap free on CPU %u (run arena_heap_refill)",
			     bpf_get_smp_processor_id());
		return 0;
	}
	if (!addr)
		arena_stderr("arena_malloc: %llu bytes: the CPU's span reserve is empty", size);
	return addr;
}

/* size bytes (asz with the redzone), from either allocator: the one hook of a malloc. */
static __always_inline u64 malloc_hooked(u64 size, u64 asz)
{
	u64 addr, slot = 0;

	if (asz > HEAP_MEDIUM_MAX)
		addr = malloc_large(size, asz, &slot);
	else
		addr = malloc_small(size, asz, &slot);
	if (addr)
		asan_hook_alloc(addr, size, slot);
	return addr;
}

__weak u64 arena_malloc_addr(u64 size)
{
	u64 asz;

	arena_subprog_init();
	if (!size) {
		arena_stderr("arena_malloc: size 0");
		return 0;
	}
	asz = alloc_size(size);
	return malloc_hooked(size, asz);
}

/*
 * The same for sizes the heaps serve (1 .. HEAP_MEDIUM_MAX): what the inlined
 * arena_malloc() calls when it knows the size is one, so that a program that allocates
 * only such sizes never reaches the large sizes' allocator, and the verifier never walks
 * it (a size beyond is refused: arena_malloc_addr() serves it).
 */
__weak u64 arena_malloc_small_addr(u64 size)
{
	u64 asz = alloc_size(size);

	arena_subprog_init();
	if (!size || asz > HEAP_MEDIUM_MAX) {
		arena_stderr("arena_malloc: %llu bytes: not a size of the heaps", size);
		return 0;
	}
	return malloc_hooked(size, asz);
}

/* Why a pointer cannot be freed, or NULL. */
static __always_inline const char *bad_free(struct arena_heap_span __arena *sp, u64 obj)
{
	switch (__heap_free_check(sp, obj)) {
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

/* A block of the large sizes' allocator (the default buddy), any program. */
static __always_inline int free_large(u64 obj)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	s64 ret;

	ret = buddy_put_block((struct buddy __arena *)arena_buddy_addr(), obj,
			      BUDDY_FREE_KEEP_SPARE);
	if (ret == -ETIMEDOUT) {
		arena_stderr("arena_free: %llx: the large allocator's lock timed out", obj);
		return -ETIMEDOUT;
	}
	if (ret < 0) {
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx %s", obj,
			     ret == -(BUDDY_BAD + BUDDY_BAD_DOUBLE_FREE) ?
			     "is already free (double free)" : "was not allocated by arena_malloc");
		return -EINVAL;
	}
	if (ret == BUDDY_PUT_DEFERRED)
		arena_stderr("arena_free: %llx: the large allocator's lock timed out: deferred",
			     obj);
	atomic_add(&g->large_frees, 1);
	return 0;
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
		if (arena_buddy_is_ready())
			return free_large(obj);
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx was not allocated by arena_malloc", obj);
		return -EINVAL;
	}
	s = span_of(obj);
	sp = __heap_span(s);
	why = bad_free(sp, obj);
	if (why) {
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx %s", obj, why);
		return -EINVAL;
	}
	h = heap_claim();
	if (h && sp->owner == h->id + 1)
		arena_heap_free_local(h, s, obj);
	else
		err = arena_heap_free_remote(h, s, obj);
	if (h)
		heap_unclaim(h);
	if (err) {
		atomic_add(&g->lost_frees, 1);
		arena_stderr(
			"arena_free: %llx: no heap free on CPU %u and the span's remote list stayed contended: lost",
			obj, bpf_get_smp_processor_id());
	}
	return err;
}

/*
 * __heap_free_check() says HEAP_FREE_OK: its tests without their branches, as
 * __heap_free_fast() makes them. For the sanitizer build's free, which has no inlined
 * fast path; a "no" asks __heap_free_check() why.
 */
static __always_inline bool free_ok(struct arena_heap_span __arena *sp, u64 obj)
{
	u64 size = sp->size, bump = READ_ONCE(sp->bump);

	barrier_var(size);
	barrier_var(bump);
	return !((sp->magic ^ HEAP_SPAN_MAGIC) | (sp->state ^ HEAP_SPAN_ACTIVE) |
		 ((size - 1) >> 63) |			/* no object size */
		 __heap_obj_bad(sp, obj, size, bump));
}

/*
 * The sanitizer build checks and poisons the block, then parks it in the quarantine;
 * the block that leaves the quarantine is freed for real. Double and invalid frees are
 * reported (and logged). The plain build frees at once.
 */
__weak int arena_free_slow(void __arena *ptr __arg_arena)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	struct arena_heap_span __arena *sp;
	u64 obj = (u64)ptr, slot, b;
	int kind = 0;
	u32 s;

	if (!ASAN_ENABLED)
		return heap_free(ptr);
	if (!ptr)
		return 0;
	if (in_heap_window(obj)) {
		s = ((u32)obj - HEAP_WINDOW_START) >> HEAP_SPAN_SHIFT;
		sp = __heap_span(s);
		switch (free_ok(sp, obj) ? HEAP_FREE_OK : __heap_free_check(sp, obj)) {
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
		else if (b & ARENA_BLOCK_FREE)
			kind = ASAN_DOUBLE_FREE;
		slot = (b & ~ARENA_BLOCK_FREE) >> 32;
	}
	if (!kind && asan_hook_freed(obj))
		kind = ASAN_DOUBLE_FREE;
	if (kind) {
		atomic_add(&g->bad_frees, 1);
		arena_stderr("arena_free: %llx %s", obj, kind == ASAN_DOUBLE_FREE ?
			     "is already free (double free)" : "was not allocated by arena_malloc");
		asan_hook_bad_free(obj, kind);
		return -EINVAL;
	}
	/* Poisoned and parked; the block that leaves the quarantine is freed for real. */
	obj = asan_hook_park(obj, slot);
	if (obj && !(in_heap_window(obj) && __heap_free_fast(obj, span_of(obj))))
		heap_free((void __arena *)obj);
	return 0;
}

/*
 * Free every block the sanitizer's quarantine holds back, now: how many. Any program;
 * 0 in the plain build, which has no quarantine. Each block was checked and poisoned
 * when arena_free took it.
 */
__weak int arena_quarantine_flush(void)
{
	u64 addr;
	int n = 0;
	u32 i;

	for (i = zero; ASAN_ENABLED && i < ASAN_QUARANTINE_MAX && can_loop; i++) {
		addr = asan_hook_quarantine_take(i);
		if (addr && !heap_free((void __arena *)addr))
			n++;
	}
	return n;
}

__weak int arena_memset(void __arena *ptr __arg_arena, int c, u64 n)
{
	u64 __arena *w = ptr;
	u8 __arena *p = ptr;
	u64 word = (u8)c, i;

	arena_subprog_init();
	if (!ptr)
		return -EINVAL;
	asan_hook_check((u64)ptr, n, 1);
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
