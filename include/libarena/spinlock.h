/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena spin lock: a ticket lock in arena memory whose waiters may give up.
 *
 *   arena_spin_lock(lock)               take it. 0, with preemption disabled until the
 *                                       unlock; -ETIMEDOUT after ARENA_SPIN_TIMEOUT_NS,
 *                                       with nothing held and nothing left behind
 *   arena_spin_lock_timeout(lock, ns)   the same, giving up after ns
 *   arena_spin_trylock(lock)            take it only if it is free and nobody waits: 0 as
 *                                       above, or -EBUSY
 *   arena_spin_unlock(lock)             hand it to the next waiter in line
 *   arena_spin_timeouts(lock)           how many waits on lock gave up so far
 *   arena_spin_is_locked(lock)          a snapshot: held or waited for
 *   arena_spin_lock_irqsave(lock, flags), arena_spin_unlock_irqrestore(lock, flags)
 *                                       upstream's names (interrupts stay on: see below)
 *
 * The owner lock, for sections that make global calls (every bt_* and rb_* call is one),
 * which 6.12 refuses under arena_spin_lock():
 *
 *   arena_owner_lock(o)                 take it. 0; -EDEADLK at once when this CPU holds
 *                                       it (the caller interrupted or preempted its
 *                                       holder, which cannot go on until it returns);
 *                                       -ETIMEDOUT after ARENA_SPIN_TIMEOUT_NS. Both
 *                                       counted, nothing held, nothing left behind
 *   arena_owner_lock_timeout(o, ns)     the same, giving up after ns
 *   arena_owner_trylock(o)              take it only if it is free and nobody waits: 0,
 *                                       or -EBUSY
 *   arena_owner_unlock(o)               hand it to the next waiter in line
 *
 * A zeroed arena_spinlock_t (ARENA_SPINLOCK_INIT) is unlocked: locks need no set-up and
 * no teardown, and may sit anywhere in arena memory (16 bytes, 8-byte aligned).
 *
 * Fair: lockers take numbered tickets and are served in ticket order, so no CPU waits
 * behind a faster one forever, whatever the machine's atomics favour (TCG's favour the
 * CPU that last wrote). At most ARENA_SPIN_QUEUE tickets are out at once (the holder's
 * included); a locker that finds them all out waits for one with the others, unordered.
 *
 * Bounded: a waiter gives up after its timeout, or sooner when the verifier's loop budget
 * for the call runs out (ARENA_SPIN_MAX_SPINS). Giving up costs nobody anything: the
 * waiter marks its ticket in the same word as the ticket being served, in one atomic
 * add, and whoever hands the lock on skips marked tickets. If the lock reached the waiter
 * just before it marked, it takes the mark back and holds the lock after all (0). Only a
 * holder that never lets go (a bug, or user space writing over the lock) makes every
 * waiter time out; none spins longer than its timeout.
 *
 * Rules (as for the kernel's spin locks): the holder runs with preemption disabled, so it
 * is not preempted, and 6.12's verifier rejects a program that leaves it held or takes
 * a global function call while holding it: a critical section calls static or inline
 * code only. A lock is not recursive: taking it twice on one CPU times out. Interrupts
 * stay enabled (6.12 has no bpf_local_irq_save), and with tickets an interrupted waiter
 * is as bad as an interrupted holder: an interrupt-context program (a tracing program in
 * hardirq or NMI) that takes a lock its CPU's task holds or waits for queues behind
 * itself, times out, and everyone queued behind it waits that long too. Share a lock
 * with such programs only if that is an answer they can use.
 *
 * The timeout is ARENA_SPIN_TIMEOUT_NS or ARENA_SPIN_MAX_SPINS spins, whichever comes
 * first: on real hardware the spins (a few milliseconds) usually end a wait first.
 *
 * Memory ordering: taking the lock is an acquire (the holder sees everything the previous
 * holder wrote: the waiter's load of the served ticket is ordered before the section on
 * TSO, and the trylock's compare-and-swap is a full barrier); letting go is a release
 * (a compare-and-swap, a full barrier, after the section's stores).
 *
 * Everything is inline: a lock is taken with preemption disabled, and 6.12 allows no
 * global function call there. Taking and letting go cost no call frame
 * (ARENA_SPIN_FRAMES), and their loops test no flag, so the verifier's walk of them
 * stays small wherever they are inlined. The wait shares its caller's loop budget: it
 * stops after ARENA_SPIN_MAX_SPINS spins, half of that budget.
 */
#ifndef __LIBARENA_SPINLOCK_H
#define __LIBARENA_SPINLOCK_H

#include <libarena/base.h>
#include <libarena/log.h>

#define ARENA_SPIN_QUEUE	32	/* tickets out at once: one mark bit each */
#define ARENA_SPIN_TIMEOUT_NS	(250ull * 1000 * 1000)	/* as the kernel's rqspinlock */
#define ARENA_SPIN_MAX_SPINS	(1u << 22)	/* half the verifier's loop budget of a call */
#define ARENA_SPIN_CLOCK_SPINS	64	/* spins between reads of the clock */
#define ARENA_SPIN_FRAMES	0	/* call frames a lock or an unlock takes below the caller */

struct arena_spinlock {
	/*
	 * Low 32 bits: the ticket being served (its holder has the lock; the lock is free when
	 * it equals next). Bit 32 + (t % ARENA_SPIN_QUEUE): ticket t gave up waiting.
	 */
	u64 state;
	u32 next;		/* the next ticket to hand out */
	u32 timeouts;		/* waits that gave up */
};

typedef struct arena_spinlock arena_spinlock_t;

#define ARENA_SPINLOCK_INIT	{ 0 }

/*
 * The same ticket lock, fair and bounded in the same way, that leaves preemption alone:
 * a section may make any call, and the holder may be preempted (or sleep, in a sleepable
 * program) while it holds it. It keeps its holder's CPU, so that a program that finds its
 * own CPU holding it, which can only be one that interrupted or preempted the holder, is
 * refused at once rather than made to wait for a holder that cannot run until it is done.
 * A zeroed one is unlocked (ARENA_OWNER_INIT).
 */
struct arena_owner {
	arena_spinlock_t lock;
	u32 cpu;		/* the holder's CPU + 1; 0 while free */
	u32 refused;		/* takes refused with -EDEADLK */
};

#define ARENA_OWNER_INIT	{ ARENA_SPINLOCK_INIT }

/* User space sees the lock (its counter); the calls are for BPF and the host build. */
#if defined(__BPF__) || defined(__LIBARENA_HOST_SHIM_H)

#include <libarena/internal/spinlock.h>

static __always_inline __arena_spin_code int
arena_spin_lock_timeout(arena_spinlock_t __arena *lock, u64 timeout_ns)
{
	int ret;

	bpf_preempt_disable();
	if (__arena_spin_take_free(lock))
		return 0;
	ret = __arena_spin_wait(lock, timeout_ns);
	if (ret)
		bpf_preempt_enable();
	return ret;
}

static __always_inline __arena_spin_code int arena_spin_lock(arena_spinlock_t __arena *lock)
{
	return arena_spin_lock_timeout(lock, ARENA_SPIN_TIMEOUT_NS);
}

static __always_inline __arena_spin_code int arena_spin_trylock(arena_spinlock_t __arena *lock)
{
	bpf_preempt_disable();
	if (__arena_spin_take_free(lock))
		return 0;
	bpf_preempt_enable();
	return -EBUSY;
}

static __always_inline __arena_spin_code void arena_spin_unlock(arena_spinlock_t __arena *lock)
{
	__arena_spin_release(lock);
	bpf_preempt_enable();
}

/*
 * Lock a library struct's lock, then check under it that obj (with magic and
 * lock_timeouts fields) is still live: 0 with the lock held; -ETIMEDOUT, counted in
 * obj->lock_timeouts; -EINVAL, the lock let go and nothing touched, for an obj destroyed
 * while we waited (its caller broke the rule that nobody uses what is being destroyed).
 */
#define arena_spin_lock_live(lock, obj, magic_val)				\
({										\
	int ___ret = 0;								\
										\
	if (arena_spin_lock(lock)) {						\
		atomic_add(&(obj)->lock_timeouts, 1);				\
		___ret = -ETIMEDOUT;						\
	} else if ((obj)->magic != (magic_val)) {				\
		arena_spin_unlock(lock);					\
		___ret = -EINVAL;						\
	}									\
	___ret;									\
})

/*
 * Upstream's names for the same, with the flags word its callers pass. 6.12 has no kfunc
 * that disables interrupts, so they stay enabled (see the rules above) and flags is 0.
 */
#define arena_spin_lock_irqsave(lock, flags)					\
	({ (flags) = 0; arena_spin_lock(lock); })
#define arena_spin_unlock_irqrestore(lock, flags)				\
	do { (void)(flags); arena_spin_unlock(lock); } while (0)

static __always_inline __arena_spin_code u32 arena_spin_timeouts(arena_spinlock_t __arena *lock)
{
	return READ_ONCE(lock->timeouts);
}

static __always_inline __arena_spin_code bool
arena_spin_is_locked(arena_spinlock_t __arena *lock)
{
	return (u32)READ_ONCE(lock->state) != READ_ONCE(lock->next);
}

static __always_inline __arena_spin_code int
arena_owner_lock_timeout(struct arena_owner __arena *o, u64 timeout_ns)
{
	u32 me = bpf_get_smp_processor_id() + 1;

	/* Only the holder writes cpu, and a holder on this CPU is not running now. */
	if (READ_ONCE(o->cpu) == me) {
		atomic_add(&o->refused, 1);
		return -EDEADLK;
	}
	if (!__arena_spin_take_free(&o->lock) && __arena_spin_wait(&o->lock, timeout_ns))
		return -ETIMEDOUT;
	WRITE_ONCE(o->cpu, me);
	return 0;
}

static __always_inline __arena_spin_code int arena_owner_lock(struct arena_owner __arena *o)
{
	return arena_owner_lock_timeout(o, ARENA_SPIN_TIMEOUT_NS);
}

static __always_inline __arena_spin_code int arena_owner_trylock(struct arena_owner __arena *o)
{
	if (!__arena_spin_take_free(&o->lock))
		return -EBUSY;
	WRITE_ONCE(o->cpu, bpf_get_smp_processor_id() + 1);
	return 0;
}

static __always_inline __arena_spin_code void arena_owner_unlock(struct arena_owner __arena *o)
{
	WRITE_ONCE(o->cpu, 0);
	/* A full barrier: the section's stores and cpu's before the hand-over. */
	__arena_spin_release(&o->lock);
}

#endif /* __BPF__ || __LIBARENA_HOST_SHIM_H */

#endif /* __LIBARENA_SPINLOCK_H */
