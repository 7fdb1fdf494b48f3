// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The Chase-Lev deque raced: one owner and up to three thieves, each on a CPU of its
 * own, and every value must come out exactly once. Three races: a steady one, one with
 * bursts big enough to grow the array from its first size while the thieves steal, and
 * bursts of one or two values that make the owner and the thieves fight over the last.
 *
 * Thread 0 owns the deque: it creates it, pushes RACE_VALUES values (tagged with their
 * index) in bursts, pops some back, drains what is left, waits for the thieves and
 * destroys the deque. Threads 1 .. 3 steal until the owner is done and the deque is
 * empty. Whoever takes a value counts it in race_seen[], and __fini checks that each
 * count is 1, that every thief saw its values in increasing order (steals are FIFO) and
 * the owner its pops after a burst in decreasing order (LIFO).
 *
 * Only threads with a CPU of their own take part: the guest kernel does not preempt
 * (PREEMPT_NONE), so two spinning threads pinned to one CPU would run one after the
 * other, never against each other. With 2 vCPUs that is one thief; `vm/run -c 4` (as
 * tests/suite.sh does for this object) gives three. This object is separate from
 * test_spmc.bpf.o so that the 4-vCPU run loads only these programs.
 */
#include <libarena/common.h>
#include <libarena/spmc.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#define RACE_THREADS	4
#define RACE_VALUES	(1u << 16)
#define RACE_TAG	(0x5eedull << 32)
#define SPINS		(1u << 20)	/* per call: every call has a loop budget of its own */
#define WAIT_NS		(30ull * 1000000000)	/* vCPUs of a TCG guest can stall for long */
/*
 * Any thread's whole run, its waits included, however much moves: the guest's kernel does
 * not preempt a program, and its soft-lockup watchdog (watchdog_thresh=30, vm/run) panics
 * a CPU held for 60 s. Each thread sets its deadline (race_end) when it starts.
 */
#define RUN_MAX_NS	(50ull * 1000000000)

enum race_mode { RACE_STEADY, RACE_RESIZE, RACE_LAST_VALUE };

u64 __arena_global race_q;
u64 __arena_global race_seen[RACE_VALUES];
u64 __arena_global race_started, race_ready, race_done, race_finished, race_bad;
u64 __arena_global race_taken[RACE_THREADS];	/* values taken by each thread */
u64 __arena_global race_lost[RACE_THREADS];	/* -EAGAIN: races lost */
u64 __arena_global race_empty[RACE_THREADS];	/* -ENOENT while the owner worked */
u64 __arena_global race_last[RACE_THREADS];	/* each thief's last value */
u64 __arena_global race_cpu[RACE_THREADS];
u64 __arena_global race_end[RACE_THREADS];	/* each thread's deadline: RUN_MAX_NS */
u64 __arena_global race_stolen;			/* values the thieves took */
u64 __arena_global race_grows;			/* times the array doubled */
u64 __arena_global race_grows_racing;		/* grows a steal followed within the burst */
u64 __arena_global race_full;			/* pushes that found it full */
u64 __arena_global race_slow;			/* thieves pause after each steal */
u64 __arena_global race_big_bursts;		/* big bursts the resize race took */
u64 __arena_global race_left;			/* spmc_count before destroy */
u64 __arena_global race_total_values, race_rounds;

/* Spin until *p >= want: 1 when it is, 0 when this call's spins ran out. */
static __noinline int spin_round(u64 __arena *p, u64 want)
{
	u32 k;

	for (k = zero; k < SPINS && can_loop; k++)
		if (READ_ONCE(*p) >= want)
			return 1;
	return 0;
}

/*
 * Wait for another thread, without a loop budget running out first: up to WAIT_NS, and
 * never past the caller's end.
 */
static __noinline int wait_for(u64 __arena *p, u64 want, u64 end)
{
	u64 start = bpf_ktime_get_ns(), now;
	u32 r;

	for (r = zero; r < 100000 && can_loop; r++) {
		if (spin_round(p, want))
			return 0;
		now = bpf_ktime_get_ns();
		if (now - start > WAIT_NS || now > end)
			break;
	}
	return -ETIMEDOUT;
}

/* Threads with a CPU of their own: the owner and up to 3 thieves. */
static __always_inline u32 racers(u32 nr_cpus)
{
	return nr_cpus < RACE_THREADS ? nr_cpus : RACE_THREADS;
}

static __noinline void take(u64 v, u32 t)
{
	u64 idx = v & 0xffffffffull;

	if ((v & ~0xffffffffull) != RACE_TAG || idx >= RACE_VALUES ||
	    atomic_fetch_add(&race_seen[idx & (RACE_VALUES - 1)], 1) != 0) {
		if (!atomic_fetch_add(&race_bad, 1))
			arena_stderr("thread %u: value %llx unknown or taken twice", t, v);
		return;
	}
	race_taken[t & (RACE_THREADS - 1)]++;
	if (t)
		atomic_add(&race_stolen, 1);
}

static __noinline int race_init(void)
{
	u32 i;

	for (i = zero; i < RACE_VALUES && can_loop; i++)
		race_seen[i & (RACE_VALUES - 1)] = 0;
	for (i = zero; i < RACE_THREADS && can_loop; i++) {
		race_taken[i & 3] = 0;
		race_lost[i & 3] = 0;
		race_empty[i & 3] = 0;
		race_cpu[i & 3] = ~0ull;
		race_last[i & 3] = 0;
	}
	race_q = 0;
	race_started = 0;
	race_ready = 0;
	race_done = 0;
	race_finished = 0;
	race_bad = 0;
	race_stolen = 0;
	race_grows = 0;
	race_grows_racing = 0;
	race_full = 0;
	race_slow = 0;
	race_big_bursts = 0;
	race_left = ~0ull;
	return 0;
}

/* Pop one value as the owner; -EAGAIN (a thief won the last one) counts and retries. */
static __noinline int owner_pop(struct spmc __arena *q, u64 *v)
{
	int ret = -EAGAIN, i;

	for (i = zero; i < 16 && ret == -EAGAIN && can_loop; i++) {
		ret = spmc_owned_remove(q, v);
		if (ret == -EAGAIN)
			race_lost[0]++;
	}
	return ret;
}

/*
 * Push every value in bursts of the mode's sizes, popping some back after each. The
 * first burst waits until a thief has stolen, so every race really is one; in the resize
 * race the second burst is big enough to outgrow the first array while thieves steal.
 */
/* Not instrumented in the sanitizer build: its frame leaves the deque's calls no room. */
static __noinline __noasan int owner_work(struct spmc __arena *q, u32 mode, u64 seed)
{
	u64 x = seed | 1, next = zero, burst, pops, k, v = 0, prev, grows;
	/* Flags, not a round count: the verifier keeps few states for them. */
	bool waited = false, big_now, resized_racing = false;
	int ret;

	while (next < RACE_VALUES && can_loop) {
		arena_test_rand(&x);
		if (mode == RACE_LAST_VALUE)
			burst = 1 + x % 2;
		else if (mode == RACE_RESIZE)
			burst = 1 + x % ((x >> 32) % 4 ? 64 : 16384);
		else
			burst = 1 + x % ((x >> 32) % 8 ? 64 : 2048);
		/* Resize race: small bursts until a thief stole, then big ones. */
		if (mode == RACE_RESIZE && !waited)
			burst = 1 + x % 64;
		/*
		 * A thief as fast as the owner keeps the deque below its first size for a
		 * whole burst: slow the thieves down for the big one, and take another big
		 * one until a grow raced with steals.
		 */
		big_now = mode == RACE_RESIZE && waited && !resized_racing;
		if (big_now) {
			burst = 16384;
			race_big_bursts++;
			WRITE_ONCE(race_slow, 1);
		}
		pops = (x >> 40) % (mode == RACE_LAST_VALUE ? 3 : burst / 4 + 1);
		grows = q->grows;
		for (k = zero; k < burst && next < RACE_VALUES && can_loop; k++) {
			ret = spmc_owned_add(q, RACE_TAG | next);
			if (ret == -E2BIG) {
				/* The thieves are behind: take one back, then retry. */
				race_full++;
				if (owner_pop(q, &v) == 0)
					take(v, 0);
				continue;
			}
			if (ret)
				return ret;
			next++;
			/*
			 * Once it grew, go on only after a thief took the value just pushed:
			 * it is in the new array only, so that steal followed the grow. Not
			 * "one steal more than now": a vCPU of the owner that stalled for a
			 * while may find that the thieves already took every value.
			 */
			if (big_now && !resized_racing && q->grows != grows) {
				if (wait_for(&q->top, q->bottom, race_end[0])) {
					arena_stderr(
						"owner: no thief took the value pushed after the grow in %llu s",
						WAIT_NS / 1000000000);
					return -ETIMEDOUT;
				}
				resized_racing = true;
				race_grows_racing++;
			}
		}
		WRITE_ONCE(race_slow, 0);	/* unconditional: a flag less to keep */
		if (!waited) {
			if (wait_for(&race_stolen, 1, race_end[0])) {
				arena_stderr("owner: no thief stole anything in %llu s",
					     WAIT_NS / 1000000000);
				return -ETIMEDOUT;
			}
			waited = true;
		}
		prev = RACE_TAG | next;
		for (k = zero; k < pops && can_loop; k++) {
			ret = owner_pop(q, &v);
			if (ret == -ENOENT || ret == -EAGAIN)
				break;
			if (ret)
				return ret;
			if (v >= prev) {
				arena_stderr("owner: popped %llx after %llx: not LIFO", v, prev);
				race_bad++;
			}
			prev = v;
			take(v, 0);
		}
	}
	if (next != RACE_VALUES) {
		arena_stderr("owner: pushed only %llu values: loop budget", next);
		return -E2BIG;
	}
	return 0;
}

static __noinline int owner_run(u32 mode, u64 seed, u32 nr_cpus)
{
	struct spmc __arena *q;
	u64 v = 0;
	int ret;

	race_end[0] = bpf_ktime_get_ns() + RUN_MAX_NS;
	q = spmc_create();
	race_cpu[0] = bpf_get_smp_processor_id();
	race_q = (u64)q;
	if (!q)
		race_done = 1;
	/* race_q (and race_done without a deque) before the start the thieves wait for. */
	smp_store_release(&race_started, 1);
	if (!q)
		return -ENOMEM;
	/* Start when the thieves do, so the first pushes already race. */
	wait_for(&race_ready, racers(nr_cpus) - 1, race_end[0]);
	ret = owner_work(q, mode, seed);
	/* Every push before done: a thief that acquires done sees them all. */
	smp_store_release(&race_done, 1);
	/* Whatever the thieves leave is the owner's. */
	while (can_loop) {
		if (owner_pop(q, &v) == -ENOENT)
			break;
		take(v, 0);
	}
	if (wait_for(&race_finished, racers(nr_cpus) - 1, race_end[0])) {
		arena_stderr("owner: thieves still running: the deque is not destroyed");
		return -EBUSY;
	}
	race_left = spmc_count(q);
	race_grows = q->grows;
	if (spmc_destroy(q))
		return -EINVAL;
	return ret;
}

/* Let about ns nanoseconds pass: a slowed thief's pause between steals. */
static __noinline void pause_ns(u64 ns)
{
	u64 start = bpf_ktime_get_ns();
	u32 k;

	for (k = zero; k < 100000 && can_loop; k++)
		if (bpf_ktime_get_ns() - start >= ns)
			break;
}

/* Up to SPINS steal attempts: 1 when the owner is done and the deque empty, else 0. */
static __noinline int steal_batch(struct spmc __arena *q, u32 t)
{
	u64 v = 0, lost = zero, empty = zero;
	int ret = 0;
	u32 k;

	t &= RACE_THREADS - 1;
	for (k = zero; k < SPINS && can_loop; k++) {
		ret = spmc_steal(q, &v);
		if (ret == 0) {
			if (race_last[t] && v <= race_last[t]) {
				arena_stderr("thief %u: stole %llx after %llx: not FIFO", t, v,
					     race_last[t]);
				race_bad++;
			}
			race_last[t] = v;
			take(v, t);
			if (READ_ONCE(race_slow))
				pause_ns(2000);
			continue;
		}
		if (ret == -EAGAIN) {
			lost++;
			continue;
		}
		if (ret != -ENOENT)
			break;
		/* Empty: finished once the owner is done; until then it may refill. */
		if (smp_load_acquire(&race_done)) {
			ret = 1;
			break;
		}
		empty++;
	}
	race_lost[t] += lost;
	race_empty[t] += empty;
	return ret == 1 ? 1 : ret < 0 && ret != -ENOENT ? ret : 0;
}

/* Threads ready and values taken so far by anyone: what moves while the race is alive. */
static __always_inline u64 race_moved(void)
{
	return READ_ONCE(race_ready) + READ_ONCE(race_stolen) + READ_ONCE(race_taken[0]);
}

/*
 * Steal until the owner is done and the deque empty. A thief gives up when nothing
 * moved for WAIT_NS, not after WAIT_NS in all: on a busy host the whole race may take
 * longer, and a thief that left early would leave the owner waiting for a steal.
 */
static __noinline int steal_all(struct spmc __arena *q, u32 t)
{
	u64 begin = bpf_ktime_get_ns(), start = begin, seen = race_moved(), now = begin;
	u32 r;
	int ret;

	for (r = zero; r < 100000 && can_loop; r++) {
		ret = steal_batch(q, t);
		if (ret)
			return ret < 0 ? ret : 0;
		now = bpf_ktime_get_ns();
		if (race_moved() != seen) {
			seen = race_moved();
			start = now;
		} else if (now - start > WAIT_NS) {
			break;
		}
		if (now > race_end[t & (RACE_THREADS - 1)])
			break;
	}
	arena_stderr("thief %u: gave up after %llu ms, the last %llu ms with nothing taken", t,
		     (now - begin) / 1000000, (now - start) / 1000000);
	return -ETIMEDOUT;
}

static __noinline int thief_run(u32 t, u32 nr_cpus)
{
	struct spmc __arena *q = NULL;
	int ret = 0;

	if (t >= racers(nr_cpus))
		return 0;	/* it would share a CPU: sit this one out */
	t &= RACE_THREADS - 1;
	race_end[t] = bpf_ktime_get_ns() + RUN_MAX_NS;
	race_cpu[t] = bpf_get_smp_processor_id();
	if (!wait_for(&race_started, 1, race_end[t]))
		/* Set before race_started was released; the deque's set-up before its use. */
		q = (struct spmc __arena *)smp_load_acquire(&race_q);
	atomic_add(&race_ready, 1);
	if (q)
		ret = steal_all(q, t);
	else
		arena_stderr("thief %u: no deque", t);
	/* The owner destroys the deque only after every thief said so. */
	atomic_add(&race_finished, 1);
	return q ? ret : -ENOENT;
}

static __noinline int race_fini(const char *name, u32 mode, u32 nr_cpus)
{
	u64 i, once = zero, stolen, cpus, c0, c1, c2, c3;

	for (i = zero; i < RACE_VALUES && can_loop; i++)
		once += race_seen[i & (RACE_VALUES - 1)] == 1;
	stolen = race_taken[1] + race_taken[2] + race_taken[3];
	/* Distinct CPUs the threads ran on (the runner pins thread k to CPU k % n). */
	c0 = race_cpu[0];
	c1 = race_cpu[1];
	c2 = race_cpu[2];
	c3 = race_cpu[3];
	cpus = 1 + (c1 != ~0ull && c1 != c0) + (c2 != ~0ull && c2 != c0 && c2 != c1) +
	       (c3 != ~0ull && c3 != c0 && c3 != c1 && c3 != c2);
	arena_stdout("%s: %u values, %llu exactly once; stolen %llu (%llu %llu %llu), owner %llu",
		     name, RACE_VALUES, once, stolen, race_taken[1], race_taken[2],
		     race_taken[3], race_taken[0]);
	arena_stdout(
		     "%s: %llu CPUs; races lost %llu (owner %llu); grows %llu, grows a steal followed %llu (in %llu big bursts); full %llu",
		     name, cpus,
		     race_lost[0] + race_lost[1] + race_lost[2] + race_lost[3], race_lost[0],
		     race_grows, race_grows_racing, race_big_bursts, race_full);
	race_total_values += RACE_VALUES;
	race_rounds++;
	ARENA_ASSERT_EQ(race_bad, 0);
	ARENA_ASSERT_EQ(once, RACE_VALUES);
	ARENA_ASSERT_EQ(stolen + race_taken[0], RACE_VALUES);
	ARENA_ASSERT_EQ(race_left, 0);
	ARENA_ASSERT(stolen > 0);
	ARENA_ASSERT_EQ(cpus, racers(nr_cpus));
	if (mode == RACE_RESIZE)
		ARENA_ASSERT(race_grows_racing >= 1);
	return 0;
}

#define RACE_TEST(name, mode)							\
SEC("syscall")									\
int parallel_test_##name##__enabled(struct arena_test_ctx *ctx)		\
{										\
	if (ctx->nr_cpus >= 2)							\
		return 0;							\
	arena_stdout(#name ": needs 2 CPUs, the guest has %u", ctx->nr_cpus);	\
	return -EOPNOTSUPP;							\
}										\
SEC("syscall")									\
int parallel_test_##name##__init(struct arena_test_ctx *ctx)			\
{										\
	return race_init();							\
}										\
SEC("syscall")									\
int parallel_test_##name##__0(struct arena_test_ctx *ctx)			\
{										\
	return owner_run(mode, ctx->seed, ctx->nr_cpus);			\
}										\
SEC("syscall")									\
int parallel_test_##name##__1(struct arena_test_ctx *ctx)			\
{										\
	return thief_run(1, ctx->nr_cpus);					\
}										\
SEC("syscall")									\
int parallel_test_##name##__2(struct arena_test_ctx *ctx)			\
{										\
	return thief_run(2, ctx->nr_cpus);					\
}										\
SEC("syscall")									\
int parallel_test_##name##__3(struct arena_test_ctx *ctx)			\
{										\
	return thief_run(3, ctx->nr_cpus);					\
}										\
SEC("syscall")									\
int parallel_test_##name##__fini(struct arena_test_ctx *ctx)			\
{										\
	return race_fini(#name, mode, ctx->nr_cpus);				\
}

RACE_TEST(spmc_steal_race, RACE_STEADY)
RACE_TEST(spmc_resize_race, RACE_RESIZE)
RACE_TEST(spmc_last_value_race, RACE_LAST_VALUE)
