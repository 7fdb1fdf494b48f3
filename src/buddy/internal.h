/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal to buddy.bpf.c: what its parts (the files in src/buddy/, each using only the
 * parts before it) share. The heap reaches the buddy through the steps (steps.h) only.
 */
#ifndef __LIBARENA_BUDDY_INTERNAL_H
#define __LIBARENA_BUDDY_INTERNAL_H

#include <libarena/buddy.h>
#include "../alloc_internal.h"
#include "steps.h"

#define LOCK_SPINS		(1 << 23)	/* waits for the default allocator's set-up */
#define CLAIM_TRIES		8
#define RUN_MAX_PAGES		(64u << 8)	/* 64 MiB */
#define RUNS_MAX		65536		/* bound on walking a run list */

/* What alloc_locked() says when the list it took from was damaged (no address). */
#define BUDDY_TAKE_AGAIN	1

/* meta.c: a block's chunk slot and metadata byte, from its address. */
static __always_inline u32 slot_of(u64 addr);
static __always_inline u64 chunk_addr(u32 slot);
static __always_inline u64 meta_addr(u32 slot);
static __always_inline bool in_window(u64 addr);
static __always_inline bool meta_swap(u64 addr, u8 old, u8 new);
static __always_inline u8 meta_get(u64 addr);
static __always_inline void meta_set(u64 addr, u8 m);

/* lock.c */
static __always_inline int buddy_lock(struct buddy __arena *b);
static __always_inline void buddy_unlock(struct buddy __arena *b);

/*
 * A step's frame: b's lock taken (its error returned), expr evaluated under it, the lock
 * given back, expr's value. 6.12 allows no global call with a lock held, so each step
 * that touches the lists locks for itself and its work under the lock is inline.
 */
#define buddy_locked(b, expr)							\
({										\
	s64 ___ret;								\
										\
	arena_subprog_init();							\
	___ret = buddy_lock(b);							\
	if (!___ret) {								\
		___ret = (expr);						\
		buddy_unlock(b);						\
	}									\
	___ret;									\
})

/* lists.c: under b's lock. */
static __always_inline void list_push(struct buddy __arena *b, u32 order, u64 addr);
static __always_inline void list_drop(struct buddy __arena *b, u32 order);
static __always_inline u64 alloc_locked(struct buddy __arena *b, u32 order, u32 carve);
static __always_inline bool coalesce_one(struct buddy __arena *b, u32 pass);
static __always_inline u32 take_chunk(struct buddy __arena *b, u32 slot);
static __always_inline s64 free_locked(struct buddy __arena *b, u64 addr, u32 flags);
static __always_inline bool defer_chain(struct buddy __arena *b, u64 first, u64 last);
static __always_inline bool defer_free(struct buddy __arena *b, u64 addr);
static __always_inline void drain_deferred(struct buddy __arena *b);
static __always_inline s64 take_counted(struct buddy __arena *b, u32 order, u32 carve,
					u64 size);
static __always_inline s64 put_counted(struct buddy __arena *b, u64 addr, u32 flags);

/* caches.c: this CPU's cache; the flush and reset under b's lock. */
static __always_inline u64 cache_alloc(struct buddy __arena *b, u32 o, u64 size);
static __always_inline int cache_put(struct buddy __arena *b, u64 addr);
static __always_inline u32 cache_spill_batch(struct buddy __arena *b, u64 addr);
static __always_inline void cache_fill(struct buddy __arena *b, u64 addr);
static __always_inline u32 cache_flush(struct buddy __arena *b);
static __always_inline void cache_reset(struct buddy __arena *b);

/* chunks.c: the mapping ones sleepable. */
static __always_inline void release_chunk(struct buddy __arena *b, u32 slot);
static __always_inline int add_chunk(struct buddy __arena *b);
static __always_inline u32 take_spare(struct buddy __arena *b, u64 keep);
static __always_inline u32 spare_beyond(struct buddy __arena *b, u32 by_peak, u32 floor);

/* runs.c: sleepable. */
static __always_inline u64 alloc_run(struct buddy __arena *b, u64 size);
static __always_inline int free_run(struct buddy __arena *b, u64 addr);

/* calls.c and default.c */
static __always_inline int init_one(struct buddy __arena *b);
static __always_inline int destroy_one(struct buddy __arena *b);
static __always_inline int default_destroy(bool quiet);

#endif /* __LIBARENA_BUDDY_INTERNAL_H */
