// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The bounded MPMC queue. include/libarena/mpmcq.h states the API, the design and the
 * memory ordering.
 *
 * Positions only grow (u64: they do not wrap in practice); position p lives in cell
 * p & mask. With c = capacity, a cell's seq is p when it waits for the push of p,
 * p + 1 once that push is published, and p + c once the pop of p handed it on.
 */
#include <libarena/mpmcq.h>
#include <libarena/heap.h>

/* q is a live queue; if not, fn logs it (the caller fails with -EINVAL). */
static __always_inline bool queue_ok(const char *fn, struct mpmcq __arena *q)
{
	return arena_live(fn, q, MPMCQ_MAGIC, "queue");
}

__weak u64 mpmcq_create_addr(u32 capacity)
{
	struct mpmcq_cell __arena *cells;
	struct mpmcq __arena *q;
	u32 size, i;

	if (!capacity || capacity > MPMCQ_MAX_CAPACITY) {
		arena_stderr("mpmcq_create: capacity %u is not 1 .. %u", capacity,
			     MPMCQ_MAX_CAPACITY);
		return 0;
	}
	/* The next power of two, at least 2: the buddy allocator's orders do the same. */
	size = capacity <= 2 ? 2 : 1u << arena_fls(capacity - 1);
	q = arena_malloc_call(sizeof(*q));
	cells = arena_malloc_call((u64)size * sizeof(*cells));
	if (!q || !cells) {
		arena_stderr("mpmcq_create: out of memory for %u values", size);
		arena_free_call(cells);
		arena_free_call(q);
		return 0;
	}
	for (i = zero; i < size && can_loop; i++) {
		cells[i].seq = i;
		cells[i].val = 0;
	}
	if (i != size) {
		arena_free_call(cells);
		arena_free_call(q);
		return 0;
	}
	arena_memset(q, 0, sizeof(*q));
	q->cells = cells;
	q->mask = size - 1;
	/* The cells are ready before the queue can be found live. */
	smp_store_release(&q->magic, MPMCQ_MAGIC);
	return (u64)q;
}

__weak int mpmcq_destroy(struct mpmcq __arena *q __arg_arena)
{
	if (!queue_ok(__func__, q))
		return -EINVAL;
	q->magic = 0;
	arena_free_call(q->cells);
	q->cells = NULL;
	return arena_free_call(q);
}

/*
 * Push and pop are the two sides of one protocol and mirror each other: each claims a
 * position by compare-and-swap once its cell's sequence says it is its turn, and
 * publishes by setting the sequence the other side waits for.
 */
__weak int mpmcq_push(struct mpmcq __arena *q __arg_arena, u64 val)
{
	struct mpmcq_cell __arena *cell;
	u64 pos, seq, mask, seen;
	s64 diff;

	if (!queue_ok(__func__, q))
		return -EINVAL;
	mask = q->mask;
	pos = READ_ONCE(q->tail);
	while (can_loop) {
		cell = &q->cells[pos & mask];
		/* seq before the cell is written: pairs with the pop's release that freed it. */
		seq = smp_load_acquire(&cell->seq);
		diff = (s64)(seq - pos);
		if (diff == 0) {
			seen = cmpxchg(&q->tail, pos, pos + 1);
			if (seen == pos) {
				WRITE_ONCE(cell->val, val);
				/* The value before the seq that publishes it to mpmcq_pop(). */
				smp_store_release(&cell->seq, pos + 1);
				return 0;
			}
			pos = seen;		/* another producer took pos */
		} else if (diff > 0) {
			seen = READ_ONCE(q->tail);
			if (seen == pos) {
				arena_stderr("%s: queue %llx is broken: tail %llu, cell seq %llu",
					     __func__, (u64)q, pos, seq);
				return -EFAULT;
			}
			pos = seen;
		} else {
			/* The cell still holds the value of position pos - capacity. */
			return -ENOSPC;
		}
	}
	return -EAGAIN;
}

__weak int mpmcq_pop(struct mpmcq __arena *q __arg_arena, u64 *val)
{
	struct mpmcq_cell __arena *cell;
	u64 pos, seq, mask, seen, v;
	s64 diff;

	if (!queue_ok(__func__, q) || !arena_given(__func__, val, "val"))
		return -EINVAL;
	mask = q->mask;
	pos = READ_ONCE(q->head);
	while (can_loop) {
		cell = &q->cells[pos & mask];
		/* seq before the value: pairs with the release in mpmcq_push(). */
		seq = smp_load_acquire(&cell->seq);
		diff = (s64)(seq - (pos + 1));
		if (diff == 0) {
			seen = cmpxchg(&q->head, pos, pos + 1);
			if (seen == pos) {
				v = READ_ONCE(cell->val);
				/* The value is read before the cell goes to the next lap. */
				smp_store_release(&cell->seq, pos + mask + 1);
				*val = v;
				return 0;
			}
			pos = seen;		/* another consumer took pos */
		} else if (diff > 0) {
			seen = READ_ONCE(q->head);
			if (seen == pos) {
				arena_stderr("%s: queue %llx is broken: head %llu, cell seq %llu",
					     __func__, (u64)q, pos, seq);
				return -EFAULT;
			}
			pos = seen;
		} else {
			/* Position pos is not pushed (or not yet published). */
			return -ENOENT;
		}
	}
	return -EAGAIN;
}

__weak int mpmcq_count(struct mpmcq __arena *q __arg_arena)
{
	u64 head, tail, cap;

	if (!queue_ok(__func__, q))
		return -EINVAL;
	cap = q->mask + 1;
	head = READ_ONCE(q->head);
	tail = READ_ONCE(q->tail);
	if ((s64)(tail - head) <= 0)
		return 0;
	return tail - head > cap ? (int)cap : (int)(tail - head);
}

__weak int mpmcq_capacity(struct mpmcq __arena *q __arg_arena)
{
	if (!queue_ok(__func__, q))
		return -EINVAL;
	return (int)(q->mask + 1);
}
