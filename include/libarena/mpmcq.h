/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena bounded MPMC queue: a ring of sequence-numbered cells (Vyukov's design), u64
 * values, any number of producers and consumers on any CPUs, no lock.
 *
 *   mpmcq_create(capacity)   a new empty queue of capacity values (rounded up to a power
 *                            of two, 2 .. MPMCQ_MAX_CAPACITY), or NULL and a log line
 *   mpmcq_push(q, val)       add val at the tail. 0; -ENOSPC when full
 *   mpmcq_pop(q, &val)       take the value at the head. 0; -ENOENT when empty
 *   mpmcq_count(q)           values in it (a snapshot while others work on it)
 *   mpmcq_capacity(q)        values it holds when full
 *   mpmcq_destroy(q)         free it; values still in it are dropped. Nobody may use q
 *                            any more
 *
 * Every pushed value is popped exactly once, and in the order of the pushes (two pushes
 * that raced are ordered by which claimed its cell first). A NULL or destroyed queue, or
 * a NULL val: -EINVAL and a log line; a queue user space wrote over: -EFAULT and a log
 * line, never an endless loop.
 *
 * How: cell i of lap k says by its sequence number whether it waits for the push of
 * position k * capacity + i (seq == position) or for its pop (seq == position + 1). A
 * producer claims the position at the tail by one compare-and-swap, writes the value and
 * publishes it by storing seq; a consumer claims the head the same way, reads the value
 * and hands the cell to the next lap (seq = position + capacity). Losing a swap means
 * another producer (consumer) moved on: try the next position. Each call retries only
 * as long as others keep winning, bounded by the verifier's loop budget (then -EAGAIN,
 * having taken nothing).
 *
 * Not lock-free in one respect, as in every queue of this design: a producer that has
 * claimed a cell but not yet published it (a program preempted between the two, possible
 * for sleepable and preemptible programs) makes consumers see the queue empty at that
 * cell until it does; a consumer between claim and hand-over makes producers see it
 * full. Nothing is lost either way.
 *
 * Memory ordering: the value is written before the release store of seq that publishes
 * it, and read after the acquire load of seq that found it published; the consumer's
 * read of the value comes before its release store of seq that lets a producer reuse
 * the cell. The head and tail swaps are full barriers (x86-64: locked instructions).
 */
#ifndef __LIBARENA_MPMCQ_H
#define __LIBARENA_MPMCQ_H

#include <libarena/base.h>
#include <libarena/log.h>

#define MPMCQ_MAX_CAPACITY	(1u << 15)	/* 16-byte cells: arena_malloc's 512 KiB */
#define MPMCQ_MAGIC		0x4d504d51u	/* "QMPM": a live queue */

struct mpmcq_cell {
	u64 seq;
	u64 val;
};

struct mpmcq {
	u64 head;		/* next position to pop: consumers' compare-and-swap */
	u64 pad0[7];		/* head and tail on cache lines of their own */
	u64 tail;		/* next position to push: producers' compare-and-swap */
	u64 pad1[7];
	struct mpmcq_cell __arena *cells;
	u64 mask;		/* capacity - 1 */
	u32 magic;
	u32 pad2;
};

u64 mpmcq_create_addr(u32 capacity);
int mpmcq_destroy(struct mpmcq __arena *q __arg_arena);
int mpmcq_push(struct mpmcq __arena *q __arg_arena, u64 val);
int mpmcq_pop(struct mpmcq __arena *q __arg_arena, u64 *val);
int mpmcq_count(struct mpmcq __arena *q __arg_arena);
int mpmcq_capacity(struct mpmcq __arena *q __arg_arena);

static __always_inline struct mpmcq __arena *mpmcq_create(u32 capacity)
{
	return (struct mpmcq __arena *)mpmcq_create_addr(capacity);
}

#endif /* __LIBARENA_MPMCQ_H */
