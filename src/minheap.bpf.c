// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The min-heap. include/libarena/minheap.h states the API and the layout.
 *
 * Everything between lock and unlock is inline (6.12 allows no global call with
 * preemption disabled): a call finds what went wrong under the lock and logs it after.
 * For the same reason the sanitizer build leaves this file uninstrumented (__noasan):
 * its checks are global calls.
 */
#include <libarena/minheap.h>
#include <libarena/heap.h>

/* h is a live heap; if not, fn logs it and fails with -EINVAL. */
static __always_inline bool heap_ok(const char *fn, struct minheap __arena *h)
{
	arena_subprog_init();
	if (!h || h->magic != MINHEAP_MAGIC) {
		arena_stderr("%s: %llx is not a live heap", fn, (u64)h);
		return false;
	}
	return true;
}

/* Under the lock: failures to report once it is let go. */
enum { FAULT_NONE, FAULT_COUNT, FAULT_SLOT };

static __always_inline __noasan bool before(struct minheap_entry __arena *a,
					    struct minheap_entry __arena *b)
{
	return a->key < b->key || (a->key == b->key && a->seq < b->seq);
}

/* Swap entries i and j, and point their slots at their new places. */
static __always_inline __noasan void swap_entries(struct minheap __arena *h, u32 i, u32 j)
{
	struct minheap_entry __arena *a = &h->entries[i], *b = &h->entries[j];
	u64 key = a->key, seq = a->seq, value = a->value;
	u32 slot = a->slot;

	/* Field by field: a struct copy may become a memcpy, which older clangs get wrong. */
	a->key = b->key;
	a->seq = b->seq;
	a->value = b->value;
	a->slot = b->slot;
	b->key = key;
	b->seq = seq;
	b->value = value;
	b->slot = slot;
	h->slots[a->slot & (MINHEAP_MAX_CAPACITY - 1)].index = i;
	h->slots[b->slot & (MINHEAP_MAX_CAPACITY - 1)].index = j;
}

static __always_inline __noasan u32 sift_up(struct minheap __arena *h, u32 i)
{
	u32 parent, step;

	for (step = zero; step < MINHEAP_LEVELS && i && can_loop; step++) {
		parent = (i - 1) / 2;
		if (!before(&h->entries[i], &h->entries[parent]))
			break;
		swap_entries(h, i, parent);
		i = parent + zero;	/* + zero: the verifier forgets i, and the loop converges */
	}
	return i;
}

static __always_inline __noasan void sift_down(struct minheap __arena *h, u32 i)
{
	u32 n = h->count, l, r, m, step;

	for (step = zero; step < MINHEAP_LEVELS && can_loop; step++) {
		l = 2 * i + 1;
		r = l + 1;
		m = i;
		if (l < n && before(&h->entries[l], &h->entries[m]))
			m = l;
		if (r < n && before(&h->entries[r], &h->entries[m]))
			m = r;
		if (m == i)
			break;
		swap_entries(h, i, m);
		i = m + zero;
	}
}

/* Take entry i out: the last entry takes its place and moves up or down. */
static __always_inline __noasan void take_out(struct minheap __arena *h, u32 i, u64 *key,
					     u64 *value)
{
	struct minheap_entry __arena *e = &h->entries[i];
	struct minheap_slot __arena *s = &h->slots[e->slot & (MINHEAP_MAX_CAPACITY - 1)];
	u32 last = h->count - 1;

	if (key)
		*key = e->key;
	if (value)
		*value = e->value;
	s->index = MINHEAP_NONE;
	s->gen++;
	h->free[h->nr_free & (MINHEAP_MAX_CAPACITY - 1)] = e->slot;
	h->nr_free++;
	if (i != last) {
		swap_entries(h, i, last);
		h->count = last;
		if (sift_up(h, i) == i)
			sift_down(h, i);
	} else {
		h->count = last;
	}
}

/* The entry index of a handle in the heap, or -ENOENT / -EINVAL. Under the lock. */
static __always_inline __noasan int index_of(struct minheap __arena *h, s64 handle)
{
	u64 slot = (u64)handle & ((1u << MINHEAP_SLOT_BITS) - 1);
	struct minheap_slot __arena *s;

	if (handle < 0 || slot >= h->capacity)
		return -EINVAL;
	s = &h->slots[slot & (MINHEAP_MAX_CAPACITY - 1)];
	if (s->index >= h->count || s->gen != (u32)((u64)handle >> MINHEAP_SLOT_BITS))
		return -ENOENT;
	return s->index;
}

/* 0 with the lock held; -ETIMEDOUT, or -EINVAL for a heap destroyed while we waited. */
static __always_inline __noasan int lock_heap(struct minheap __arena *h)
{
	if (arena_spin_lock(&h->lock)) {
		atomic_add(&h->lock_timeouts, 1);
		return -ETIMEDOUT;
	}
	if (h->magic != MINHEAP_MAGIC) {
		/* The caller broke the rule (see minheap.h): let go and touch nothing. */
		arena_spin_unlock(&h->lock);
		return -EINVAL;
	}
	return 0;
}

/* A count past the capacity (user space wrote over the heap): nothing is touched. */
static __always_inline __noasan bool damaged(struct minheap __arena *h)
{
	return h->count > h->capacity || h->nr_free > h->capacity;
}

static __noinline __noasan void report_damage(const char *fn, struct minheap __arena *h)
{
	arena_stderr("%s: heap %llx is broken: count %u, free %u, capacity %u", fn, (u64)h,
		     h->count, h->nr_free, h->capacity);
}

__weak __noasan u64 minheap_create_addr(u32 capacity)
{
	struct minheap __arena *h;
	u32 i;

	if (!capacity || capacity > MINHEAP_MAX_CAPACITY) {
		arena_stderr("minheap_create: capacity %u is not 1 .. %u", capacity,
			     MINHEAP_MAX_CAPACITY);
		return 0;
	}
	h = arena_malloc_call(sizeof(*h));
	if (!h)
		goto nomem;
	arena_memset(h, 0, sizeof(*h));
	h->entries = arena_malloc_call((u64)capacity * sizeof(struct minheap_entry));
	h->slots = arena_malloc_call((u64)capacity * sizeof(struct minheap_slot));
	h->free = arena_malloc_call((u64)capacity * sizeof(u32));
	if (!h->entries || !h->slots || !h->free)
		goto nomem;
	/* Slots handed out from 0 up: free[] is a stack, its top at the end. */
	for (i = zero; i < capacity && can_loop; i++) {
		h->free[i] = capacity - 1 - i;
		h->slots[i].index = MINHEAP_NONE;
		h->slots[i].gen = 0;
	}
	if (i != capacity)
		goto nomem;
	h->capacity = capacity;
	h->nr_free = capacity;
	/* Every field before the magic that tells the other calls the heap is live. */
	smp_store_release(&h->magic, MINHEAP_MAGIC);
	return (u64)h;
nomem:
	arena_stderr("minheap_create: out of memory for %u entries", capacity);
	if (h) {
		arena_free_call(h->entries);
		arena_free_call(h->slots);
		arena_free_call(h->free);
		arena_free_call(h);
	}
	return 0;
}

__weak __noasan int minheap_destroy(struct minheap __arena *h __arg_arena)
{
	int ret;

	if (!heap_ok(__func__, h))
		return -EINVAL;
	ret = lock_heap(h);
	if (ret)
		return ret;
	h->magic = 0;
	arena_spin_unlock(&h->lock);
	arena_free_call(h->entries);
	arena_free_call(h->slots);
	arena_free_call(h->free);
	return arena_free_call(h);
}

__weak __noasan s64 minheap_insert(struct minheap __arena *h __arg_arena, u64 key, u64 value)
{
	struct minheap_entry __arena *e;
	struct minheap_slot __arena *s;
	u32 slot, i;
	s64 ret;

	if (!heap_ok(__func__, h))
		return -EINVAL;
	ret = lock_heap(h);
	if (ret)
		return ret;
	ret = -ENOSPC;
	if (damaged(h)) {
		ret = -EFAULT;
	} else if (h->count < h->capacity && h->nr_free) {
		h->nr_free--;
		slot = h->free[h->nr_free & (MINHEAP_MAX_CAPACITY - 1)] &
		       (MINHEAP_MAX_CAPACITY - 1);
		s = &h->slots[slot];
		i = h->count++;
		e = &h->entries[i];
		e->key = key;
		e->seq = h->next_seq++;
		e->value = value;
		e->slot = slot;
		s->index = i;
		sift_up(h, i);
		ret = (s64)((u64)s->gen << MINHEAP_SLOT_BITS | slot);
	}
	arena_spin_unlock(&h->lock);
	if (ret == -EFAULT)
		report_damage("minheap_insert", h);
	return ret;
}

__weak __noasan int minheap_peek(struct minheap __arena *h __arg_arena, u64 *key, u64 *value)
{
	int ret;

	if (!heap_ok(__func__, h))
		return -EINVAL;
	ret = lock_heap(h);
	if (ret)
		return ret;
	ret = -ENOENT;
	if (damaged(h)) {
		ret = -EFAULT;
	} else if (h->count) {
		if (key)
			*key = h->entries[0].key;
		if (value)
			*value = h->entries[0].value;
		ret = 0;
	}
	arena_spin_unlock(&h->lock);
	if (ret == -EFAULT)
		report_damage("minheap_peek", h);
	return ret;
}

__weak __noasan int minheap_pop(struct minheap __arena *h __arg_arena, u64 *key, u64 *value)
{
	int ret;

	if (!heap_ok(__func__, h))
		return -EINVAL;
	ret = lock_heap(h);
	if (ret)
		return ret;
	ret = -ENOENT;
	if (damaged(h)) {
		ret = -EFAULT;
	} else if (h->count) {
		/* zero, not 0: a constant index would make the verifier walk every sift apart. */
		take_out(h, zero, key, value);
		ret = 0;
	}
	arena_spin_unlock(&h->lock);
	if (ret == -EFAULT)
		report_damage("minheap_pop", h);
	return ret;
}

__weak __noasan int minheap_remove(struct minheap __arena *h __arg_arena, s64 handle,
				   u64 *key, u64 *value)
{
	int ret;

	if (!heap_ok(__func__, h))
		return -EINVAL;
	ret = lock_heap(h);
	if (ret)
		return ret;
	ret = damaged(h) ? -EFAULT : index_of(h, handle);
	if (ret >= 0) {
		take_out(h, ret, key, value);
		ret = 0;
	}
	arena_spin_unlock(&h->lock);
	if (ret == -EFAULT)
		report_damage("minheap_remove", h);
	else if (ret == -EINVAL)
		arena_stderr("%s: handle %lld is not one of heap %llx", __func__, handle, (u64)h);
	return ret;
}

__weak __noasan int minheap_update(struct minheap __arena *h __arg_arena, s64 handle, u64 key)
{
	struct minheap_entry __arena *e;
	int ret;
	u32 i;

	if (!heap_ok(__func__, h))
		return -EINVAL;
	ret = lock_heap(h);
	if (ret)
		return ret;
	ret = damaged(h) ? -EFAULT : index_of(h, handle);
	if (ret >= 0) {
		i = ret;
		e = &h->entries[i];
		e->key = key;
		e->seq = h->next_seq++;
		if (sift_up(h, i) == i)
			sift_down(h, i);
		ret = 0;
	}
	arena_spin_unlock(&h->lock);
	if (ret == -EFAULT)
		report_damage("minheap_update", h);
	else if (ret == -EINVAL)
		arena_stderr("%s: handle %lld is not one of heap %llx", __func__, handle, (u64)h);
	return ret;
}

__weak __noasan int minheap_count(struct minheap __arena *h __arg_arena)
{
	if (!heap_ok(__func__, h))
		return -EINVAL;
	return READ_ONCE(h->count);
}
