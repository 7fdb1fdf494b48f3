// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * buddy.bpf.c, part 2 of 9: b's lock, which knows its holder's CPU.
 */
#include "internal.h"

/*
 * A holder on this CPU is a context that this one interrupted (a tracing program in the
 * middle of a free), which no wait can help. Host threads stand for CPUs but may be
 * preempted while they hold the lock, so on the host nobody is taken for that.
 */
static __always_inline bool held_by_this_cpu(struct buddy __arena *b)
{
#ifdef __BPF__
	return READ_ONCE(b->holder) == bpf_get_smp_processor_id() + 1;
#else
	return false;
#endif
}

/*
 * Take b's lock for a step (libarena/spinlock.h: fair, and a waiter that gives up loses
 * nothing), recording its holder: 0; -EDEADLK when the holder is a context this CPU
 * interrupted, which no wait can help; -ETIMEDOUT when one wait ran out (250 ms, or the
 * spins of the step's loop budget). The entry point then calls the step again for as
 * long as BUDDY_LOCK_PATIENCE_NS lasts (buddy_wait_more()), each call with a loop
 * budget of its own.
 */
static __always_inline int buddy_lock(struct buddy __arena *b)
{
	if (arena_spin_trylock(&b->lock)) {
		if (held_by_this_cpu(b))
			return -EDEADLK;
		if (arena_spin_lock(&b->lock))
			return -ETIMEDOUT;
	}
	b->holder = bpf_get_smp_processor_id() + 1;
	return 0;
}

static __always_inline void buddy_unlock(struct buddy __arena *b)
{
	/* Before the release: the next holder's CPU is written after this. */
	b->holder = 0;
	arena_spin_unlock(&b->lock);
}
