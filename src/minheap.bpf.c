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

/* h is a live heap; if not, fn logs it (the caller fails with -EINVAL). */
static __always_inline bool heap_ok(const char *fn, struct minheap __arena *h)
{
	return arena_live(fn, h, MINHEAP_MAGIC, "heap");
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

/* h checked and locked for fn: 0 with the lock held, or the error. */
static __always_inline __noasan int lock_heap(const char *fn, struct minheap __arena *h)
{
	if (!heap_ok(fn, h))
		return -EINVAL;
	return arena_spin_lock_live(&h->lock, h, MINHEAP_MAGIC);
}

/*
 * The frame of every call on the entries: h checked and locked (their errors returned),
 * and -EFAULT, reported once the lock is let go, for a damaged heap. 0 with the lock
 * held and the counts sound: the call then unlocks.
 */
static __always_inline __noasan int enter_heap(const char *fn, struct minheap __arena *h)
{
	int ret = lock_heap(fn, h);

	if (ret)
		return ret;
	if (damaged(h)) {
		arena_spin_unlock(&h->lock);
		report_damage(fn, h);
		return -EFAULT;
	}
	return 0;
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

	ret = lock_heap(__func__, h);
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

	ret = enter_heap(__func__, h);
	if (ret)
		return ret;
	ret = -ENOSPC;
	if (h->count < h->capacity && h->nr_free) {
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
	return ret;
}

/* The smallest entry into *key and *value (either may be NULL), taken out with pop. */
static __always_inline __noasan int first(const char *fn, struct minheap __arena *h,
					  u64 *key, u64 *value, bool pop)
{
	int ret = enter_heap(fn, h);

	if (ret)
		return ret;
	ret = -ENOENT;
	if (h->count && pop) {
		/* zero, not 0: a constant index would make the verifier walk every sift apart. */
		take_out(h, zero, key, value);
		ret = 0;
	} else if (h->count) {
		if (key)
			*key = h->entries[0].key;
		if (value)
			*value = h->entries[0].value;
		ret = 0;
	}
	arena_spin_unlock(&h->lock);
	return ret;
}

__weak __noasan int minheap_peek(struct minheap __arena *h __arg_arena, u64 *key, u64 *value)
{
	return first(__func__, h, key, value, false);
}

__weak __noasan int minheap_pop(struct minheap __arena *h __arg_arena, u64 *key, u64 *value)
{
	return first(__func__, h, key, value, true);
}

/*
 * The entry index of handle, with h locked for fn; or the error, unlocked (a handle
 * that is not one of h's logged).
 */
static __always_inline __noasan int enter_entry(const char *fn, struct minheap __arena *h,
						s64 handle)
{
	int ret = enter_heap(fn, h);

	if (ret)
		return ret;
	ret = index_of(h, handle);
	if (ret < 0) {
		arena_spin_unlock(&h->lock);
		if (ret == -EINVAL)
			arena_stderr("%s: handle %lld is not one of heap %llx", fn, handle,
				     (u64)h);
	}
	return ret;
}

__weak __noasan int minheap_remove(struct minheap __arena *h __arg_arena, s64 handle,
				   u64 *key, u64 *value)
{
	int i = enter_entry(__func__, h, handle);

	if (i < 0)
		return i;
	take_out(h, i, key, value);
	arena_spin_unlock(&h->lock);
	return 0;
}

__weak __noasan int minheap_update(struct minheap __arena *h __arg_arena, s64 handle, u64 key)
{
	struct minheap_entry __arena *e;
	int i = enter_entry(__func__, h, handle);

	if (i < 0)
		return i;
	e = &h->entries[i];
	e->key = key;
	e->seq = h->next_seq++;
	if (sift_up(h, i) == i)
		sift_down(h, i);
	arena_spin_unlock(&h->lock);
	return 0;
}

__weak __noasan int minheap_count(struct minheap __arena *h __arg_arena)
{
	if (!heap_ok(__func__, h))
		return -EINVAL;
	return READ_ONCE(h->count);
}
