/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena min-heap: a bounded priority queue of (u64 key, u64 value) entries, smallest
 * key first and equal keys in insertion order, with handles to remove or re-key an entry
 * wherever it is. The sched_ext use: runnable tasks by deadline, the earliest picked, a
 * task that leaves (dequeue) removed by its handle.
 *
 *   minheap_create(capacity)             an empty heap of up to capacity entries
 *                                        (1 .. MINHEAP_MAX_CAPACITY), or NULL, a log line
 *   minheap_insert(h, key, value)        add an entry: its handle (an s64 >= 0);
 *                                        -ENOSPC full
 *   minheap_peek(h, &key, &value)        the first entry, left in: 0; -ENOENT empty
 *   minheap_pop(h, &key, &value)         the first entry, taken out: 0; -ENOENT empty
 *   minheap_remove(h, handle, &key, &value)  take out the entry of handle: 0; -ENOENT
 *                                        when it is not in the heap (popped or removed
 *                                        already: handles carry the slot's 32-bit
 *                                        generation, so a stale one does not hit the
 *                                        entry that reused its slot)
 *   minheap_update(h, handle, key)       give the entry of handle a new key (it moves;
 *                                        among equals it goes last): 0; -ENOENT
 *   minheap_count(h)                     entries in it
 *   minheap_destroy(h)                   free it; entries still in it are dropped.
 *                                        Nobody may use h any more, nor wait for it
 *
 * key and value pointers may be NULL where the caller does not want them. A NULL or
 * destroyed heap, a handle out of range: -EINVAL and a log line; a heap whose count
 * user space wrote past its capacity: -EFAULT and a log line.
 *
 * Concurrency: every call takes the heap's arena spin lock (libarena/spinlock.h), so any
 * CPU may call any of them; a call that times out on the lock returns -ETIMEDOUT with
 * the heap unchanged. Each call is O(log n): a sift of at most MINHEAP_LEVELS steps.
 *
 * Layout: an array of entries in heap order (entry i's children are 2i + 1 and 2i + 2),
 * each naming its slot; a slot table mapping a handle's slot to the entry's place, with
 * the slot's generation; a stack of free slots. Handles are generation << 20 | slot.
 * MINHEAP_MAX_CAPACITY is what arena_malloc serves in one piece (512 KiB of entries).
 */
#ifndef __LIBARENA_MINHEAP_H
#define __LIBARENA_MINHEAP_H

#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/spinlock.h>

#define MINHEAP_MAX_CAPACITY	(1u << 14)	/* 32-byte entries: arena_malloc's 512 KiB */
#define MINHEAP_LEVELS		15		/* sift steps in a heap of 2^14 entries */
#define MINHEAP_SLOT_BITS	20		/* handle: generation << 20 | slot */
#define MINHEAP_NONE		0xffffffffu	/* a free slot's index */
#define MINHEAP_MAGIC		0x48504d4eu	/* "NMPH": a live heap */

struct minheap_entry {
	u64 key;
	u64 seq;		/* insertion order, for ties */
	u64 value;
	u32 slot;		/* its handle's slot */
	u32 pad;
};

struct minheap_slot {
	u32 index;		/* the entry's place in the array; MINHEAP_NONE when free */
	u32 gen;		/* bumped each time the slot is freed */
};

struct minheap {
	arena_spinlock_t lock;
	u32 magic;
	u32 capacity;
	u32 count;		/* entries 0 .. count - 1 are in heap order */
	u32 nr_free;		/* free[0 .. nr_free - 1]: slots to hand out */
	u64 next_seq;
	struct minheap_entry __arena *entries;
	struct minheap_slot __arena *slots;
	u32 __arena *free;
	u64 lock_timeouts;	/* calls that gave up on the lock */
};

u64 minheap_create_addr(u32 capacity);
int minheap_destroy(struct minheap __arena *h __arg_arena);
s64 minheap_insert(struct minheap __arena *h __arg_arena, u64 key, u64 value);
int minheap_peek(struct minheap __arena *h __arg_arena, u64 *key, u64 *value);
int minheap_pop(struct minheap __arena *h __arg_arena, u64 *key, u64 *value);
int minheap_remove(struct minheap __arena *h __arg_arena, s64 handle, u64 *key, u64 *value);
int minheap_update(struct minheap __arena *h __arg_arena, s64 handle, u64 key);
int minheap_count(struct minheap __arena *h __arg_arena);

static __always_inline struct minheap __arena *minheap_create(u32 capacity)
{
	return (struct minheap __arena *)minheap_create_addr(capacity);
}

#endif /* __LIBARENA_MINHEAP_H */
