/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Not API: the ticket lock's inline internals, which arena_spin_lock() and
 * arena_spin_unlock() (include/libarena/spinlock.h) inline into the caller. Programs use
 * spinlock.h.
 */
#ifndef __LIBARENA_INTERNAL_SPINLOCK_H
#define __LIBARENA_INTERNAL_SPINLOCK_H

#include <libarena/base.h>

/*
 * The sanitizer's checks are global functions, which 6.12 does not allow with preemption
 * disabled: the lock's own accesses are not instrumented, and a critical section in a
 * sanitizer build must not be either (mark its function __noasan).
 */
#ifdef __BPF__
#define __arena_spin_code __attribute__((no_sanitize("kernel-address")))
#else
#define __arena_spin_code
#endif

static __always_inline __arena_spin_code u64 __arena_spin_mark(u32 ticket)
{
	return 1ull << (32 + ticket % ARENA_SPIN_QUEUE);
}

/*
 * The state once the served ticket is done: the next ticket not marked, the marks of
 * those skipped cleared. Loop-free: the marks rotated so that bit 0 is the next ticket's,
 * the run of set bits from there is the tickets that gave up in a row.
 */
static __always_inline __arena_spin_code u64 __arena_spin_passed(u64 state)
{
	u32 served = (u32)state + 1, s = served % ARENA_SPIN_QUEUE;
	u64 marks = state >> 32, rot, run;

	rot = ((marks >> s) | (marks << (ARENA_SPIN_QUEUE - s))) & 0xffffffffull;
	/* The lowest clear bit of rot, as a mask below it: the marked run. */
	run = (~rot & (rot + 1)) - 1;
	served += arena_fls(run);
	marks &= ~((run << s) | (run >> (ARENA_SPIN_QUEUE - s)));
	return (marks & 0xffffffffull) << 32 | served;
}

/*
 * Hand the lock on when the first attempt met a waiter's mark. Each failed swap is one more
 * waiter marking its ticket, and at most ARENA_SPIN_QUEUE are out: the loop budget is far
 * more than it needs.
 */
static __always_inline __arena_spin_code void
__arena_spin_pass_marked(arena_spinlock_t __arena *lock, u64 state)
{
	u64 old;

	while (can_loop) {
		old = cmpxchg(&lock->state, state, __arena_spin_passed(state));
		if (old == state)
			break;
		state = old;
	}
}

/* Let go without touching preemption: arena_spin_unlock, and tests that play a holder. */
static __always_inline __arena_spin_code void
__arena_spin_release(arena_spinlock_t __arena *lock)
{
	u64 state = READ_ONCE(lock->state), old;

	arena_subprog_init();
	if (!(state >> 32)) {
		old = cmpxchg(&lock->state, state, (u32)(state + 1));
		if (old == state)
			return;
		state = old;
	}
	__arena_spin_pass_marked(lock, state);
}

/* Spin i of a wait: past the deadline? The clock is read every ARENA_SPIN_CLOCK_SPINS. */
static __always_inline __arena_spin_code bool __arena_spin_late(u32 i, u64 deadline)
{
	return i % ARENA_SPIN_CLOCK_SPINS == ARENA_SPIN_CLOCK_SPINS - 1 &&
	       bpf_ktime_get_ns() > deadline;
}

/*
 * Wait for a ticket, then for our turn, until timeout_ns or the spins run out. 0 with the
 * lock held; -ETIMEDOUT with no ticket or with ours marked. Preemption is disabled.
 * Inline, and two loops that test no flag: what the verifier walks of it stays small in
 * every function that takes a lock.
 */
static __always_inline __arena_spin_code int
__arena_spin_wait(arena_spinlock_t __arena *lock, u64 timeout_ns)
{
	u64 deadline = bpf_ktime_get_ns() + timeout_ns, old;
	u32 ticket, i;

	arena_subprog_init();
	/* A ticket, while fewer than ARENA_SPIN_QUEUE are out. */
	for (i = zero; i < ARENA_SPIN_MAX_SPINS && can_loop; i++) {
		ticket = READ_ONCE(lock->next);
		if (ticket - (u32)READ_ONCE(lock->state) < ARENA_SPIN_QUEUE &&
		    cmpxchg(&lock->next, ticket, ticket + 1) == ticket)
			goto queued;
		if (__arena_spin_late(i, deadline))
			break;
		arena_cpu_relax();
	}
	atomic_add(&lock->timeouts, 1);
	return -ETIMEDOUT;
queued:
	/* Our turn. */
	for (; i < ARENA_SPIN_MAX_SPINS && can_loop; i++) {
		/* x86-64 keeps this load before the section's accesses: an acquire. */
		if ((u32)smp_load_acquire(&lock->state) == ticket)
			return 0;
		if (__arena_spin_late(i, deadline))
			break;
		arena_cpu_relax();
	}
	/* The slot is ours alone: no ticket ARENA_SPIN_QUEUE apart is out with ours. */
	old = atomic_fetch_add(&lock->state, __arena_spin_mark(ticket));
	if ((u32)old == ticket) {
		/* Served before the mark went in: the lock is ours. */
		atomic_add(&lock->state, -__arena_spin_mark(ticket));
		return 0;
	}
	atomic_add(&lock->timeouts, 1);
	return -ETIMEDOUT;
}

/* Take the lock if it is free and nobody waits, without disabling preemption. */
static __always_inline __arena_spin_code bool
__arena_spin_take_free(arena_spinlock_t __arena *lock)
{
	u32 ticket = READ_ONCE(lock->next);

	/*
	 * Served == next: free. The swap then makes ticket ours, and it is being served. The
	 * acquire pairs with the last holder's hand-over.
	 */
	return (u32)smp_load_acquire(&lock->state) == ticket &&
	       cmpxchg(&lock->next, ticket, ticket + 1) == ticket;
}

#endif /* __LIBARENA_INTERNAL_SPINLOCK_H */
