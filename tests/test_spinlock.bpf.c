// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The arena spin lock: every call on one CPU, a holder that never lets go (the waiter
 * times out and leaves a mark the holder's unlock skips), a full queue, tickets wrapping
 * at 2^32, a lock user space wrote over; then threads on every CPU counting under it,
 * some giving up after a few microseconds, with exact totals. And the owner lock, which
 * lets a section make global calls (its parallel test: parallel_test_btree_shared).
 */
#include <libarena/spinlock.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#define SHORT_NS	(2ull * 1000 * 1000)	/* a timeout the tests can wait for */

arena_spinlock_t __arena_global tl;

/*
 * A lock as ARENA_SPINLOCK_INIT / ARENA_OWNER_INIT make it, field by field: clang 19
 * copies a struct literal into arena memory through a pointer the verifier refuses.
 */
static __always_inline void lock_zero(arena_spinlock_t __arena *l)
{
	l->state = 0;
	l->next = 0;
	l->timeouts = 0;
}

static __always_inline void owner_zero(struct arena_owner __arena *o)
{
	lock_zero(&o->lock);
	o->cpu = 0;
	o->refused = 0;
}

static __always_inline u64 marks(arena_spinlock_t __arena *l)
{
	return l->state >> 32;
}

static __always_inline u32 served(arena_spinlock_t __arena *l)
{
	return (u32)l->state;
}

/* A call expected to fail: if it took the lock after all, it lets go before failing. */
#define ASSERT_NOT_TAKEN(l, call, want)						\
	do {									\
		int ___ret = (call);						\
		if (!___ret)							\
			arena_spin_unlock(l);					\
		ARENA_ASSERT_EQ(___ret, want);					\
	} while (0)

/* What a holder sees; the tests assert after the unlock (a program may not return holding). */
struct seen {
	bool locked;
	u32 next;
	u32 served;
	int again;
};

static __always_inline void look(arena_spinlock_t __arena *l, struct seen *s)
{
	s->locked = arena_spin_is_locked(l);
	s->next = l->next;
	s->served = served(l);
}

SEC("syscall")
int test_spin_lock_unlock(struct arena_test_ctx *ctx)
{
	arena_spinlock_t __arena *l = &tl;
	unsigned long flags;
	struct seen s = {};
	int ret;

	lock_zero(l);
	ARENA_ASSERT(!arena_spin_is_locked(l));
	ret = arena_spin_lock(l);
	ARENA_ASSERT_EQ(ret, 0);
	look(l, &s);
	arena_spin_unlock(l);
	ARENA_ASSERT(s.locked);
	ARENA_ASSERT_EQ(s.next, 1);
	ARENA_ASSERT_EQ(s.served, 0);
	ARENA_ASSERT(!arena_spin_is_locked(l));
	ARENA_ASSERT_EQ(served(l), 1);

	/* trylock: free, then held (by us: not recursive), then free again. */
	ret = arena_spin_trylock(l);
	ARENA_ASSERT_EQ(ret, 0);
	s.again = arena_spin_trylock(l);
	if (!s.again)
		arena_spin_unlock(l);
	look(l, &s);
	arena_spin_unlock(l);
	ARENA_ASSERT_EQ(s.again, -EBUSY);
	ARENA_ASSERT_EQ(s.next, 2);
	ret = arena_spin_trylock(l);
	ARENA_ASSERT_EQ(ret, 0);
	arena_spin_unlock(l);
	/* Upstream's irqsave names take and give it the same way. */
	flags = 1;
	ret = arena_spin_lock_irqsave(l, flags);
	ARENA_ASSERT_EQ(ret, 0);
	s.locked = arena_spin_is_locked(l);
	arena_spin_unlock_irqrestore(l, flags);
	ARENA_ASSERT(s.locked);
	ARENA_ASSERT_EQ(flags, 0);
	ARENA_ASSERT_EQ(arena_spin_timeouts(l), 0);
	ARENA_ASSERT_EQ(marks(l), 0);
	ARENA_ASSERT_EQ(served(l), l->next);
	return 0;
}

/*
 * Someone holds ticket 0 and does not let go (a vCPU the host descheduled, say): the
 * waiter gives up after its timeout, marks ticket 1, and the holder's unlock skips it.
 */
SEC("syscall")
int test_spin_lock_timeout(struct arena_test_ctx *ctx)
{
	arena_spinlock_t __arena *l = &tl;
	u64 start, waited;
	int ret;

	lock_zero(l);
	l->next = 1;					/* ticket 0 is held */
	start = bpf_ktime_get_ns();
	ret = arena_spin_lock_timeout(l, SHORT_NS);
	waited = bpf_ktime_get_ns() - start;
	if (!ret)
		arena_spin_unlock(l);
	ARENA_ASSERT_EQ(ret, -ETIMEDOUT);
	ARENA_ASSERT(waited >= SHORT_NS);
	ARENA_ASSERT_EQ(arena_spin_timeouts(l), 1);
	ARENA_ASSERT_EQ(l->next, 2);			/* it took ticket 1 ... */
	ARENA_ASSERT_EQ(marks(l), 1ull << 1);		/* ... and marked it */
	ASSERT_NOT_TAKEN(l, arena_spin_trylock(l), -EBUSY);

	/* A second waiter gives up too: ticket 2, marked. */
	ASSERT_NOT_TAKEN(l, arena_spin_lock_timeout(l, 0), -ETIMEDOUT);
	ARENA_ASSERT_EQ(marks(l), (1ull << 1) | (1ull << 2));
	ARENA_ASSERT_EQ(arena_spin_timeouts(l), 2);

	/* The holder lets go: both marks are skipped, and the lock is free. */
	__arena_spin_release(l);
	ARENA_ASSERT_EQ(served(l), 3);
	ARENA_ASSERT_EQ(marks(l), 0);
	ARENA_ASSERT(!arena_spin_is_locked(l));
	ret = arena_spin_lock(l);
	ARENA_ASSERT_EQ(ret, 0);
	arena_spin_unlock(l);
	ARENA_ASSERT_EQ(served(l), 4);
	ARENA_ASSERT_EQ(arena_spin_timeouts(l), 2);
	return 0;
}

/* The owner lock: what arena_spin_lock's sections may not make, a global call. */
struct arena_owner __arena_global towner;
u64 __arena_global owner_calls;

__weak int owner_section_call(u64 __arena *calls __arg_arena)
{
	if (!calls)
		return -EINVAL;
	*calls += 1;
	return 0;
}

/*
 * Taken, a global call made holding it, this CPU's second take refused at once
 * (-EDEADLK, counted) and a trylock refused; then a holder on another CPU that never lets
 * go: the waiter times out and marks its ticket, which the holder's unlock skips.
 */
SEC("syscall")
int test_owner_lock(struct arena_test_ctx *ctx)
{
	struct arena_owner __arena *o = &towner;
	u32 me = bpf_get_smp_processor_id() + 1;
	int ret, again, busy, call;
	u32 held_by;

	owner_zero(o);
	owner_calls = 0;
	ret = arena_owner_lock(o);
	ARENA_ASSERT_EQ(ret, 0);
	held_by = o->cpu;
	call = owner_section_call(&owner_calls);
	again = arena_owner_lock(o);
	busy = arena_owner_trylock(o);
	arena_owner_unlock(o);
	ARENA_ASSERT_EQ(held_by, me);
	ARENA_ASSERT_EQ(call, 0);
	ARENA_ASSERT_EQ(owner_calls, 1);
	ARENA_ASSERT_EQ(again, -EDEADLK);
	ARENA_ASSERT_EQ(busy, -EBUSY);
	ARENA_ASSERT_EQ(o->refused, 1);
	ARENA_ASSERT_EQ(o->cpu, 0);
	ARENA_ASSERT(!arena_spin_is_locked(&o->lock));

	ret = arena_owner_trylock(o);
	ARENA_ASSERT_EQ(ret, 0);
	held_by = o->cpu;
	arena_owner_unlock(o);
	ARENA_ASSERT_EQ(held_by, me);
	ARENA_ASSERT(!arena_spin_is_locked(&o->lock));

	/* Ticket 0 held on another CPU, never let go. */
	owner_zero(o);
	o->lock.next = 1;
	o->cpu = me + 1;
	ret = arena_owner_lock_timeout(o, SHORT_NS);
	if (!ret)
		arena_owner_unlock(o);
	ARENA_ASSERT_EQ(ret, -ETIMEDOUT);
	ARENA_ASSERT_EQ(arena_spin_timeouts(&o->lock), 1);
	ARENA_ASSERT_EQ(o->refused, 0);
	ARENA_ASSERT_EQ(marks(&o->lock), 1ull << 1);
	arena_owner_unlock(o);				/* the holder lets go */
	ARENA_ASSERT(!arena_spin_is_locked(&o->lock));
	ARENA_ASSERT_EQ(marks(&o->lock), 0);
	ret = arena_owner_lock(o);
	ARENA_ASSERT_EQ(ret, 0);
	arena_owner_unlock(o);
	ARENA_ASSERT_EQ(served(&o->lock), 3);
	return 0;
}

/* Only the marked tickets are skipped: a waiter between two of them is served. */
SEC("syscall")
int test_spin_lock_skips_only_marked(struct arena_test_ctx *ctx)
{
	arena_spinlock_t __arena *l = &tl;

	lock_zero(l);
	/* Ticket 5 held, 6 gave up, 7 waits, 8 gave up. */
	l->state = 5 | ((1ull << 6) | (1ull << 8)) << 32;
	l->next = 9;
	__arena_spin_release(l);
	ARENA_ASSERT_EQ(served(l), 7);
	ARENA_ASSERT_EQ(marks(l), 1ull << 8);
	__arena_spin_release(l);			/* 7 is done: 8 skipped */
	ARENA_ASSERT_EQ(served(l), 9);
	ARENA_ASSERT_EQ(marks(l), 0);
	ARENA_ASSERT(!arena_spin_is_locked(l));
	return 0;
}

/* ARENA_SPIN_QUEUE tickets out: a locker takes none and leaves nothing behind. */
SEC("syscall")
int test_spin_lock_queue_full(struct arena_test_ctx *ctx)
{
	arena_spinlock_t __arena *l = &tl;

	lock_zero(l);
	l->next = ARENA_SPIN_QUEUE;
	ASSERT_NOT_TAKEN(l, arena_spin_lock_timeout(l, 0), -ETIMEDOUT);
	ARENA_ASSERT_EQ(l->next, ARENA_SPIN_QUEUE);
	ARENA_ASSERT_EQ(marks(l), 0);
	ARENA_ASSERT_EQ(arena_spin_timeouts(l), 1);
	/* One fewer out: it queues, and gives up with a mark. */
	l->next = ARENA_SPIN_QUEUE - 1;
	ASSERT_NOT_TAKEN(l, arena_spin_lock_timeout(l, 0), -ETIMEDOUT);
	ARENA_ASSERT_EQ(l->next, ARENA_SPIN_QUEUE);
	ARENA_ASSERT_EQ(marks(l), 1ull << (ARENA_SPIN_QUEUE - 1));
	return 0;
}

/* Tickets are u32 and wrap: served and next cross 2^32 with a mark on the way. */
SEC("syscall")
int test_spin_lock_wraps(struct arena_test_ctx *ctx)
{
	arena_spinlock_t __arena *l = &tl;
	int i, ret;

	lock_zero(l);
	l->state = 0xfffffffeu;
	l->next = 0xfffffffeu;
	for (i = zero; i < 4 && can_loop; i++) {
		ret = arena_spin_lock(l);
		ARENA_ASSERT_EQ(ret, 0);
		arena_spin_unlock(l);
	}
	ARENA_ASSERT_EQ(served(l), 2);
	ARENA_ASSERT_EQ(l->next, 2);
	ARENA_ASSERT_EQ(marks(l), 0);

	/* Held by 0xffffffff; ticket 0 gives up; the unlock passes 0 and lands on 1. */
	l->state = 0xffffffffu;
	l->next = 0;
	ASSERT_NOT_TAKEN(l, arena_spin_lock_timeout(l, 0), -ETIMEDOUT);
	ARENA_ASSERT_EQ(l->next, 1);
	ARENA_ASSERT_EQ(marks(l), 1);
	__arena_spin_release(l);
	ARENA_ASSERT_EQ(served(l), 1);
	ARENA_ASSERT_EQ(marks(l), 0);
	ret = arena_spin_trylock(l);
	ARENA_ASSERT_EQ(ret, 0);
	arena_spin_unlock(l);
	return 0;
}

/* A lock user space wrote over: every call still returns, within its timeout. */
SEC("syscall")
int test_spin_lock_damaged(struct arena_test_ctx *ctx)
{
	arena_spinlock_t __arena *l = &tl;

	lock_zero(l);
	/* next behind served: the queue looks 2^32 - 1 long. */
	l->state = 100;
	l->next = 99;
	ASSERT_NOT_TAKEN(l, arena_spin_lock_timeout(l, SHORT_NS), -ETIMEDOUT);
	ASSERT_NOT_TAKEN(l, arena_spin_trylock(l), -EBUSY);
	ARENA_ASSERT_EQ(l->next, 99);
	/* Every mark set: a release skips at most a queue's worth. */
	l->state = 7 | 0xffffffff00000000ull;
	l->next = 7 + 2 * ARENA_SPIN_QUEUE;
	__arena_spin_release(l);
	ARENA_ASSERT_EQ(served(l), 8 + ARENA_SPIN_QUEUE);
	ARENA_ASSERT_EQ(marks(l), 0);
	return 0;
}

/*
 * Threads on every CPU count under the lock: a plain read-modify-write of two words that
 * only mutual exclusion keeps equal. Threads 2 and 3 give up after a few microseconds
 * now and then (and then try again), so marks are set and skipped while the others
 * queue. Each thread counts its own increments; __fini checks the sum, and that every
 * thread was served (fair: nobody waits behind the others for good).
 */
#define CNT_THREADS	4
#define CNT_ROUNDS	20000
#define CNT_WAIT_NS	(30ull * 1000000000)	/* TCG vCPUs can stall: no round in this long */

arena_spinlock_t __arena_global cnt_lock;
u64 __arena_global cnt_a, cnt_b, cnt_inside, cnt_overlaps;
u64 __arena_global cnt_done[CNT_THREADS], cnt_timeouts[CNT_THREADS], cnt_cpu[CNT_THREADS];

SEC("syscall")
int parallel_test_spin_counter__init(struct arena_test_ctx *ctx)
{
	int i;

	lock_zero(&cnt_lock);
	cnt_a = cnt_b = cnt_inside = cnt_overlaps = 0;
	for (i = zero; i < CNT_THREADS && can_loop; i++)
		cnt_done[i] = cnt_timeouts[i] = 0;
	return 0;
}

/* __noasan: a critical section makes no global call (the sanitizer's checks are). */
static __noinline __noasan int cnt_thread(struct arena_test_ctx *ctx, u32 thread)
{
	/* A seed the verifier does not know, or it follows every round's constants. */
	u64 start = bpf_ktime_get_ns(), seed = ctx->seed | (u64)thread << 32 | 1, a;
	u64 begin = start;
	u64 timeout, seen = READ_ONCE(cnt_b);
	u32 i, r;
	int ret;

	if (thread >= CNT_THREADS)
		return -EINVAL;
	cnt_cpu[thread] = bpf_get_smp_processor_id();
	for (i = zero; i < 4 * CNT_ROUNDS && cnt_done[thread] < CNT_ROUNDS && can_loop; i++) {
		arena_test_rand(&seed);
		timeout = ARENA_SPIN_TIMEOUT_NS;
		if (thread >= 2 && seed % 8 == 0)
			timeout = 1000 + seed % 8000;
		ret = arena_spin_lock_timeout(&cnt_lock, timeout);
		if (ret) {
			cnt_timeouts[thread]++;
			/*
			 * Give up when no thread finished a round for CNT_WAIT_NS, or after
			 * 50 s in all: the guest's soft-lockup watchdog panics at 60.
			 */
			if (READ_ONCE(cnt_b) != seen) {
				seen = READ_ONCE(cnt_b);
				start = bpf_ktime_get_ns();
			} else if (bpf_ktime_get_ns() - start > CNT_WAIT_NS) {
				break;
			}
			if (bpf_ktime_get_ns() - begin > 50ull * 1000000000)
				break;
			continue;
		}
		if (xchg(&cnt_inside, 1))
			cnt_overlaps++;
		a = cnt_a;
		for (r = zero; r < 32 && can_loop; r++)
			barrier_var(a);
		cnt_a = a + 1;
		cnt_b++;
		WRITE_ONCE(cnt_inside, 0);
		arena_spin_unlock(&cnt_lock);
		cnt_done[thread]++;
	}
	if (cnt_done[thread] != CNT_ROUNDS) {
		arena_stderr("thread %u: %llu of %u rounds, %llu timeouts", thread,
			     cnt_done[thread], CNT_ROUNDS, cnt_timeouts[thread]);
		return -E2BIG;
	}
	return 0;
}

SEC("syscall")
int parallel_test_spin_counter__0(struct arena_test_ctx *ctx) { return cnt_thread(ctx, 0); }
SEC("syscall")
int parallel_test_spin_counter__1(struct arena_test_ctx *ctx) { return cnt_thread(ctx, 1); }
SEC("syscall")
int parallel_test_spin_counter__2(struct arena_test_ctx *ctx) { return cnt_thread(ctx, 2); }
SEC("syscall")
int parallel_test_spin_counter__3(struct arena_test_ctx *ctx) { return cnt_thread(ctx, 3); }

SEC("syscall")
int parallel_test_spin_counter__fini(struct arena_test_ctx *ctx)
{
	u64 sum = 0, gave_up = 0;
	int i;

	for (i = zero; i < CNT_THREADS && can_loop; i++) {
		ARENA_ASSERT_EQ(cnt_done[i], CNT_ROUNDS);
		sum += cnt_done[i];
		gave_up += cnt_timeouts[i];
	}
	arena_stdout("spin counter: %u threads, %llu increments, %llu waits given up (lock: %u)",
		     CNT_THREADS, sum, gave_up, arena_spin_timeouts(&cnt_lock));
	ARENA_ASSERT_EQ(cnt_overlaps, 0);
	ARENA_ASSERT_EQ(cnt_a, sum);
	ARENA_ASSERT_EQ(cnt_b, sum);
	ARENA_ASSERT_EQ(arena_spin_timeouts(&cnt_lock), gave_up);
	ARENA_ASSERT(!arena_spin_is_locked(&cnt_lock));
	ARENA_ASSERT_EQ(cnt_lock.state >> 32, 0);
	return 0;
}
