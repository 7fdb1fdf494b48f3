/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena work-stealing deque (Chase-Lev): one owner, many thieves, u64 values.
 *
 * The owner pushes and pops at the bottom (LIFO, no atomic instruction unless the deque
 * is down to its last value); any CPU steals from the top (FIFO, one compare-and-swap).
 * Typical use: a per-CPU run queue of a scheduler, whose CPU works from the bottom while
 * idle CPUs steal from the top.
 *
 *   spmc_create()                 a new empty deque (SPMC_ARR_BASESZ slots), or NULL
 *                                 and a log line
 *   spmc_destroy(q)               free the deque and every array it used; values still
 *                                 in it are dropped. Nobody may use q any more.
 *   spmc_owned_add(q, val)        owner: push val at the bottom. 0; -E2BIG when
 *                                 SPMC_MAX_VALUES are in already; -ENOMEM when the array
 *                                 cannot grow
 *   spmc_owned_remove(q, &val)    owner: pop the newest value. 0; -ENOENT when empty;
 *                                 -EAGAIN when a thief took the last value first
 *   spmc_steal(q, &val)           anyone: take the oldest value. 0; -ENOENT when empty;
 *                                 -EAGAIN when another taker won the race (try again)
 *   spmc_count(q)                 how many values are in it (a snapshot while others
 *                                 work on it)
 *
 * Every pushed value is taken exactly once, by the owner or by one thief. A NULL or
 * destroyed deque, or a NULL val: -EINVAL and a log line.
 *
 * Rules: one owner at a time calls spmc_owned_* (handing ownership to another CPU needs
 * a lock or a full barrier between the two); thieves are unlimited. spmc_destroy needs
 * everyone to be done. A push that fills the array allocates one twice its size
 * (arena_malloc, so on 6.12 with the buddy allocator a push may need a sleepable
 * program) and copies the live values; the outgrown array stays until spmc_destroy,
 * because a thief may still be reading it. Memory: at most twice the largest array.
 *
 * Memory ordering (x86-64 is TSO; the host build uses C11 atomics and runs under
 * ThreadSanitizer): a push writes its slot, then publishes bottom with a release store;
 * a thief reads top, then bottom with acquire loads, reads the slot, and claims it by
 * a compare-and-swap on top; the owner's pop lowers bottom and then reads top across a
 * full barrier, the one store-to-load order TSO does not keep, so a thief and the owner
 * never both take the last value. A grown array is filled before it is published (store
 * release of cur), and a thief reads it through an acquire load.
 */
#ifndef __LIBARENA_SPMC_H
#define __LIBARENA_SPMC_H

#include <libarena/base.h>
#include <libarena/log.h>

#define SPMC_ARR_BASESZ		128		/* slots of the first array */
#define SPMC_ARR_ORDERS		10		/* arrays of 128 .. 64K slots */
#define SPMC_MAX_VALUES		(SPMC_ARR_BASESZ << (SPMC_ARR_ORDERS - 1))
#define SPMC_MAGIC		0x53504d43u	/* "CMPS": a live deque */

struct spmc_arr {
	u64 __arena *data;	/* SPMC_ARR_BASESZ << order slots; index & (size - 1) */
	u64 order;
};

struct spmc {
	u64 top;		/* next value to steal: compare-and-swap by takers */
	u64 pad0[7];		/* top and bottom on separate cache lines */
	u64 bottom;		/* next slot to push: written by the owner only */
	struct spmc_arr __arena *cur;	/* the array in use: one of arr[] */
	u32 magic;
	u32 pad1;
	u64 grows;		/* times the array doubled */
	struct spmc_arr arr[SPMC_ARR_ORDERS];
};

u64 spmc_create_addr(void);
int spmc_destroy(struct spmc __arena *q __arg_arena);
int spmc_owned_add(struct spmc __arena *q __arg_arena, u64 val);
int spmc_owned_remove(struct spmc __arena *q __arg_arena, u64 *val);
int spmc_steal(struct spmc __arena *q __arg_arena, u64 *val);
int spmc_count(struct spmc __arena *q __arg_arena);

static __always_inline struct spmc __arena *spmc_create(void)
{
	return (struct spmc __arena *)spmc_create_addr();
}

#endif /* __LIBARENA_SPMC_H */
