/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Internal to the library: the buddy allocator's steps, for its own entry points
 * (buddy.bpf.c) and for arena_malloc's large sizes (heap.bpf.c).
 *
 * Each step is a global function that calls nothing else of ours (the sanitizer's hooks
 * aside): the verifier checks it once in a program however many entry points call it,
 * and an entry point that calls it takes one frame below its own. The steps that touch
 * the lists take b's lock and give it back themselves (6.12 allows no global call with
 * a lock held), so an entry point's logic runs unlocked, and logs there.
 */
#ifndef __LIBARENA_BUDDY_STEPS_H
#define __LIBARENA_BUDDY_STEPS_H

#include <libarena/buddy.h>

/* Rounds of buddy_take_block() at most: each maps a chunk, drops a list or waits. */
#define BUDDY_ROUNDS		(BUDDY_NR_SLOTS + BUDDY_ORDERS + BUDDY_LOCK_MAX_WAITS)

/* How a block is freed (__buddy_put): a chunk left free stays a spare; a deferred one. */
#define BUDDY_FREE_KEEP_SPARE	1
#define BUDDY_FREE_DEFERRED	2

/*
 * Why __buddy_put refused a block: it returns -(BUDDY_BAD + reason), apart from the
 * errno values of the lock.
 */
#define BUDDY_BAD		4096
enum {
	BUDDY_BAD_FOREIGN = 1,
	BUDDY_BAD_MISALIGNED,
	BUDDY_BAD_DOUBLE_FREE,
	BUDDY_BAD_INTERIOR,
	BUDDY_BAD_METADATA,
};

/* What buddy_put_block() says of a block that waits on the deferred list. */
#define BUDDY_PUT_DEFERRED	(1 << 30)

/* What __buddy_cache_get says when this CPU's cache had no block: a batch would fill it. */
#define BUDDY_CACHE_EMPTY	1

/* What __buddy_cache_put did. */
enum {
	BUDDY_PUT_NOT_CACHED,	/* not a used block of a cached order, or the cache is busy */
	BUDDY_PUT_CACHED,
	BUDDY_PUT_FULL,		/* BUDDY_CACHE_CAP() blocks of its order there already */
};

/*
 * Under b's lock: a lock that stays busy makes them return -ETIMEDOUT (one wait ran out:
 * call again while buddy_wait_more() says so) or -EDEADLK (its holder is a context this
 * CPU interrupted: give up at once).
 */
s64 __buddy_take(struct buddy __arena *b __arg_arena, u32 order, u32 carve, u64 size);
int __buddy_drain(struct buddy __arena *b __arg_arena);
int __buddy_coalesce(struct buddy __arena *b __arg_arena, u32 pass);
s64 __buddy_take_chunk(struct buddy __arena *b __arg_arena, u32 slot);
s64 __buddy_put(struct buddy __arena *b __arg_arena, u64 addr, u32 flags);
s64 __buddy_take_spare(struct buddy __arena *b __arg_arena, u32 by_peak, u32 floor);
int __buddy_kill(struct buddy __arena *b __arg_arena);
/* Without it. */
int __buddy_defer(struct buddy __arena *b __arg_arena, u64 addr);
u64 __buddy_cache_get(struct buddy __arena *b __arg_arena, u32 order, u64 size);
int __buddy_cache_put(struct buddy __arena *b __arg_arena, u64 addr);
int __buddy_cache_spill(struct buddy __arena *b __arg_arena, u64 addr);
int __buddy_cache_fill(struct buddy __arena *b __arg_arena, u64 addr);
int __buddy_cache_flush(struct buddy __arena *b __arg_arena);
/* Sleepable: they map or unmap pages. */
int __buddy_add_chunk(struct buddy __arena *b __arg_arena);
int __buddy_init_one(struct buddy __arena *b __arg_arena);
int __buddy_setup_default(void);
int __buddy_release_chunk(struct buddy __arena *b __arg_arena, u32 slot);

/* The order of a block for size bytes (1 .. BUDDY_MAX_SIZE). */
static __always_inline u32 buddy_order(u64 size)
{
	return arena_fls(((size + BUDDY_MIN_SIZE - 1) >> BUDDY_MIN_SHIFT) - 1);
}

/*
 * A step that timed out on b's lock may be called again until BUDDY_LOCK_PATIENCE_NS
 * after start: under TCG, or on a busy host, the holder's vCPU may be descheduled for
 * that long, and an allocation must not fail while memory exists.
 */
static __always_inline bool buddy_wait_more(u64 start, s64 ret)
{
	return ret == -ETIMEDOUT && bpf_ktime_get_ns() - start <= BUDDY_LOCK_PATIENCE_NS;
}

/* A call gave up on b's lock (stats.lock_timeouts): its result, -ETIMEDOUT. */
static __always_inline s64 buddy_gave_up(struct buddy __arena *b)
{
	atomic_add(&b->stats.lock_timeouts, 1);
	return -ETIMEDOUT;
}

/*
 * A locked step, called again while it times out on the lock and the patience lasts:
 * its result, with -ETIMEDOUT when it gave up.
 */
#define buddy_patiently(b, step)						\
({										\
	u64 ___start = bpf_ktime_get_ns();					\
	s64 ___ret = -ETIMEDOUT;						\
	u32 ___i;								\
										\
	for (___i = zero; ___i < BUDDY_LOCK_MAX_WAITS && can_loop; ___i++) {	\
		___ret = (step);						\
		if (!buddy_wait_more(___start, ___ret))				\
			break;							\
	}									\
	if (___ret == -ETIMEDOUT || ___ret == -EDEADLK)				\
		___ret = buddy_gave_up(b);					\
	___ret;									\
})

/* Merge every pair that frees left apart, an order a call: 0 or a lock error. */
static __always_inline int buddy_coalesce(struct buddy __arena *b)
{
	u32 pass;
	int ret;

	for (pass = zero; pass < BUDDY_ORDERS && can_loop; pass++) {
		ret = __buddy_coalesce(b, pass);
		if (ret <= 0)
			return ret;
	}
	return 0;
}

/*
 * A block of the order (with carve, a run of up to 1 << carve of them for a CPU's cache:
 * see __buddy_take) from b's lists, until one comes: the deferred frees drained first,
 * the pairs left apart merged when nothing fits, with caches (a constant) the CPUs'
 * caches emptied once when still nothing, and with may_sleep (a constant: the nosleep
 * callers contain no page kfunc) a new chunk mapped, so that the arena's room bounds
 * the rounds. arena_malloc's large sizes pass no caches: their orders are never cached.
 * A round whose step timed out on the lock starts again, for as long as the patience
 * lasts. The block,
 * -ETIMEDOUT (the lock) or -ENOMEM.
 */
static __always_inline s64 buddy_take_block(struct buddy __arena *b, u32 order, u32 carve,
					    u64 size, bool may_sleep, bool caches)
{
	u64 start = bpf_ktime_get_ns();
	bool flushed = false;
	s64 addr = -ENOMEM;
	u32 round;

	/*
	 * A bound the rounds never reach, for the verifier: an unbounded counter's range
	 * grows at every round and its states at the loop head never match. Nothing else
	 * tests it: a test that made it a constant would make every round a new state.
	 */
	for (round = zero; round < BUDDY_ROUNDS && can_loop; round++) {
		addr = READ_ONCE(b->deferred) ? __buddy_drain(b) : 0;
		if (!addr)
			addr = __buddy_take(b, order, carve, size);
		if (!addr && READ_ONCE(b->lazy_mask)) {
			addr = buddy_coalesce(b);
			if (!addr)
				addr = __buddy_take(b, order, carve, size);
		}
		if (addr == -EAGAIN || buddy_wait_more(start, addr))
			continue;	/* a damaged list was dropped; the lock was busy */
		if (addr == -ETIMEDOUT || addr == -EDEADLK)
			return buddy_gave_up(b);
		if (addr)
			return addr;
		addr = -ENOMEM;
		/* Once: what the CPUs' caches hold may make the block. */
		if (caches && !flushed && __buddy_cache_flush(b)) {
			flushed = true;
			continue;
		}
		if (!may_sleep)
			break;
		addr = __buddy_add_chunk(b);
		if (buddy_wait_more(start, addr))
			continue;
		if (addr)
			return addr == -ETIMEDOUT || addr == -EDEADLK ? buddy_gave_up(b) : -ENOMEM;
	}
	return addr;
}

/*
 * Free a block of b under its lock, waiting while the patience lasts; when the lock stays
 * busy, the block waits on the deferred list (BUDDY_PUT_DEFERRED), which the next
 * allocation drains (buddy_take_block()), as do flushes, trims and maintenance. Not a
 * free: its chain stays within the stack arena_free() promises. 0, the slot + 1 of a
 * chunk left entirely free that may go back (without BUDDY_FREE_KEEP_SPARE),
 * -(BUDDY_BAD + reason), or -ETIMEDOUT.
 */
static __always_inline s64 buddy_put_block(struct buddy __arena *b, u64 addr, u32 flags)
{
	u64 start = bpf_ktime_get_ns();
	s64 ret = -ETIMEDOUT;
	u32 i;

	for (i = zero; i < BUDDY_LOCK_MAX_WAITS && can_loop; i++) {
		ret = __buddy_put(b, addr, flags);
		if (!buddy_wait_more(start, ret))
			break;
	}
	if (ret != -ETIMEDOUT && ret != -EDEADLK)
		return ret;
	buddy_gave_up(b);
	return __buddy_defer(b, addr) ? BUDDY_PUT_DEFERRED : -ETIMEDOUT;
}

#endif /* __LIBARENA_BUDDY_STEPS_H */
