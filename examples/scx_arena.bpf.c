// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * scx_arena: a sched_ext scheduler whose state lives in the arena, built from libarena's
 * parts only. Weighted virtual time, per-CPU queues, work stealing:
 *
 * - Each task has a context from arena_malloc, made in ops.init_task (sleepable on 6.12,
 *   so a fork storm that empties the CPU's reserve refills it instead of failing) and
 *   freed in ops.exit_task. A task without one (the allocator failed) still runs: from
 *   the global DSQ, with one log line.
 * - A task's virtual time grows by the CPU time it uses (p->se.sum_exec_runtime) over its
 *   weight (p->scx.weight, 100 at nice 0), so CPU shares follow nice.
 * - Each CPU has an ordered map (a B-tree) of the tasks waiting on its runqueue, keyed by
 *   virtual time (FIFO among equal times), and a work-stealing deque (spmc) that offers
 *   the earliest of them to other CPUs. A map is only touched under its runqueue's lock
 *   (ops.enqueue, ops.dispatch, ops.tick, ops.running all hold it), the deque takes any
 *   thief: no lock of ours anywhere.
 * - Dispatch runs the earliest of: the task that was running (kept while it is still the
 *   earliest, so nice holds on a CPU of its own), this CPU's earliest waiting task, and
 *   another CPU's offer when that one is a slice earlier (so equal tasks get equal shares
 *   across CPUs). An idle CPU steals the earliest offer there is.
 * - A waking task that is owed time preempts the running one at once (once that one has
 *   run 1 ms; otherwise at the next tick), and each tick stops the running task when a
 *   waiting one is 1 ms of virtual time earlier.
 * - The idle CPUs are an arena bitmap (ops.update_idle). A task offered to thieves wakes
 *   one of them to come and steal.
 * - A task that leaves the queue by another way (ops.dequeue) is not searched for: its
 *   context's generation moves on, and the entry, once reached, is dropped as stale.
 *
 * Statistics are per-CPU counters in the arena, read in place by the loader; errors are
 * log lines (arena_stderr) the loader prints.
 */
#include <scx/common.bpf.h>
#include <libarena/common.h>
#include <libarena/heap.h>
#include <libarena/btree.h>
#include <libarena/spmc.h>
#include <libarena/bitmap.h>
#include "scx_arena.h"

char _license[] SEC("license") = "Dual BSD/GPL";

/* A task's context. */
struct task_ctx {
	u64 vtime;		/* weighted virtual time */
	u64 exec_start;		/* p->se.sum_exec_runtime when it last started running */
	u32 gen;		/* moves on at each enqueue and dequeue: older entries are stale */
	u32 pad;
};

/* The task's context, by task: its arena address. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, u64);
} task_ctxs SEC(".maps");

struct cpu_queue {
	struct btree __arena *wait;	/* waiting tasks by key, under the runqueue's lock */
	struct spmc __arena *ready;	/* at most one: the earliest waiting, for any taker */
	u64 last_key;			/* the highest key given out: FIFO among equals */
	u64 offer_key;			/* the key of the entry in ready, while it is there */
	u32 offer_open;			/* that entry may run anywhere: thieves may take it */
	u32 running;			/* a task of ours runs here (ops.running..stopping) */
	u64 curr_vtime;			/* the running task's virtual time when it started */
	u64 curr_start;			/* and the time then (ns) */
	u64 curr_weight;		/* and its weight */
};

struct scx_arena_stats __arena_global scx_stats;
struct cpu_queue __arena_global queues[SCX_ARENA_MAX_CPUS];
u64 __arena_global idle_map;		/* struct arena_bitmap: the idle CPUs */

static u64 vtime_now;		/* the latest virtual time a task started at, any CPU */
static u32 nr_cpus;
UEI_DEFINE(uei);

/*
 * Keys are virtual times in ns, all 64 bits (no wrap in centuries even at nice 19). Equal
 * times queue in arrival order: a time at most KEY_FIFO_NS below the highest key given
 * out takes the key after it, so a fork storm's children, which all start at the same
 * time, line up one nanosecond apart instead of colliding.
 */
#define KEY_FIFO_NS	1024
/* How much earlier another CPU's offer must be for a busy CPU to take it. */
#define BALANCE_NS	SCX_SLICE_DFL
/* A sleeper comes back at most this far behind the task it meets: a slice of credit. */
#define SLEEP_CREDIT_NS	SCX_SLICE_DFL
/* How much earlier than the running task a woken one must be to preempt it. */
#define WAKE_GRAN_NS	(1000 * 1000)
/* And how long that task must have run: the tick preempts it later (see arena_tick). */
#define WAKE_MIN_RUN_NS	(1000 * 1000)

/*
 * An entry of a map or deque: the task's context's generation then, whether the task may
 * run on every CPU, and its pid (below 2^22, PID_MAX_LIMIT).
 */
#define ENTRY_OPEN	(1u << 31)
#define ENTRY_PID	(ENTRY_OPEN - 1)

static __always_inline u64 entry_of(struct task_struct *p, struct task_ctx __arena *c)
{
	u32 open = p->nr_cpus_allowed >= nr_cpus ? ENTRY_OPEN : 0;

	return (u64)c->gen << 32 | open | ((u32)p->pid & ENTRY_PID);
}

static __always_inline struct task_ctx __arena *ctx_of(struct task_struct *p)
{
	u64 *v = bpf_task_storage_get(&task_ctxs, p, 0, 0);

	arena_subprog_init();	/* a program that touches the arena must name its map */
	return v ? (struct task_ctx __arena *)*v : NULL;
}

static __always_inline struct scx_arena_cpu_stats __arena *cpu_stats(u32 cpu)
{
	arena_subprog_init();
	return &scx_stats.cpu[cpu & (SCX_ARENA_MAX_CPUS - 1)];
}

static __always_inline struct cpu_queue __arena *queue_of(u32 cpu)
{
	return &queues[cpu & (SCX_ARENA_MAX_CPUS - 1)];
}

static __always_inline struct arena_bitmap __arena *idle_cpus(void)
{
	return (struct arena_bitmap __arena *)idle_map;
}

/* Time run, in virtual time: weighted by the inverse of the weight (100 at nice 0). */
static __always_inline u64 weighted(u64 ran, u64 weight)
{
	return ran * 100 / (weight ? weight : 1);
}

/* The task's virtual time now: what it has been charged plus what it ran since. */
static __always_inline u64 vtime_of(struct task_struct *p, struct task_ctx __arena *c)
{
	return c->vtime + weighted(p->se.sum_exec_runtime - c->exec_start, p->scx.weight);
}

/*
 * A task that slept comes back at most a slice behind floor: it was charged nothing while it
 * slept, and a long sleep must not buy a long run. Runnable tasks keep what they are owed.
 */
static __always_inline void wake_credit(struct task_ctx __arena *c, u64 floor)
{
	if (c && floor > SLEEP_CREDIT_NS && c->vtime < floor - SLEEP_CREDIT_NS)
		c->vtime = floor - SLEEP_CREDIT_NS;
}

/* The virtual time of the task running on q now, estimated from when it started. */
static __always_inline u64 curr_vtime_now(struct cpu_queue __arena *q)
{
	return q->curr_vtime + weighted(bpf_ktime_get_ns() - q->curr_start, q->curr_weight);
}

s32 BPF_STRUCT_OPS(arena_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle) {
		wake_credit(ctx_of(p), vtime_now);
		cpu_stats(bpf_get_smp_processor_id())->direct++;
		scx_bpf_dispatch(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	}
	return cpu;
}

/* Put an entry into cpu's map at key or, when that is taken, one of the next three. */
static __noinline int queue_insert(u32 cpu, u64 key, u64 e)
{
	struct cpu_queue __arena *q = queue_of(cpu);
	int err = -ENOENT, i;

	if (!q->wait)
		return -ENOENT;
	for (i = zero; i < 4 && err && can_loop; i++)
		err = bt_insert(q->wait, key + i, e, false);
	if (err)
		return err;
	key += i - 1;
	if (key > q->last_key)
		q->last_key = key;
	return 0;
}

/* Offer cpu's earliest waiting task on its deque, unless one is there already. */
static __noinline int offer(u32 cpu)
{
	struct cpu_queue __arena *q = queue_of(cpu);
	u64 key, e;

	if (!q->wait || !q->ready)
		return 0;
	if (spmc_count(q->ready))
		return 1;
	if (bt_pop_first(q->wait, &key, &e))
		return 0;
	q->offer_key = key;
	q->offer_open = !!(e & ENTRY_OPEN);
	/* The deque was empty: its owner adds one entry. */
	spmc_owned_add(q->ready, e);
	return 1;
}

/* Wake an idle CPU other than this one to come and steal. */
static __noinline void kick_idle(u32 self)
{
	struct arena_bitmap __arena *idle = idle_cpus();
	u32 cpu, n = nr_cpus;

	if (!idle)
		return;
	for (cpu = zero; cpu < n && cpu < SCX_ARENA_MAX_CPUS && can_loop; cpu++) {
		if (cpu == self || !bmp_test_bit(cpu, idle))
			continue;
		scx_bpf_kick_cpu(cpu, SCX_KICK_IDLE);
		cpu_stats(bpf_get_smp_processor_id())->kicks++;
		return;
	}
}

void BPF_STRUCT_OPS(arena_enqueue, struct task_struct *p, u64 enq_flags)
{
	struct scx_arena_cpu_stats __arena *st = cpu_stats(bpf_get_smp_processor_id());
	u32 cpu = scx_bpf_task_cpu(p);	/* the runqueue whose lock we hold */
	struct cpu_queue __arena *q = queue_of(cpu);
	struct task_ctx __arena *c = ctx_of(p);
	u64 key, old, curr;

	if (!c || cpu >= SCX_ARENA_MAX_CPUS || !q->wait) {
		/* No context or no queue: the kernel's DSQs, where it can run. */
		if (p->nr_cpus_allowed == 1) {
			st->pinned++;
			scx_bpf_dispatch(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, enq_flags);
		} else {
			st->to_global++;
			scx_bpf_dispatch(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
		}
		return;
	}
	/*
	 * A woken task is owed up to a slice against the task it would preempt, and runs at
	 * once when it is more than WAKE_GRAN_NS earlier than that task and every waiting
	 * one: to the front of the local DSQ, the running task told to stop.
	 */
	if (enq_flags & SCX_ENQ_WAKEUP) {
		curr = q->running ? curr_vtime_now(q) : vtime_now;
		wake_credit(c, curr);
		if (q->running && c->vtime + WAKE_GRAN_NS < curr &&
		    (!spmc_count(q->ready) || c->vtime < q->offer_key) &&
		    bpf_ktime_get_ns() - q->curr_start >= WAKE_MIN_RUN_NS) {
			c->gen++;
			st->preempted++;
			scx_bpf_dispatch(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL,
					 enq_flags | SCX_ENQ_PREEMPT);
			return;
		}
	}
	c->gen++;
	key = c->vtime;
	if (key <= q->last_key && q->last_key - key <= KEY_FIFO_NS)
		key = q->last_key + 1;
	if (queue_insert(cpu, key, entry_of(p, c))) {
		atomic_add(&scx_stats.insert_failures, 1);
		st->to_global++;
		scx_bpf_dispatch(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
		return;
	}
	st->enqueued++;
	/*
	 * Earlier than the offer: the offer goes back to the map and the earliest is offered
	 * (unless a thief took it meanwhile). No room in the map: it stays offered.
	 */
	if (spmc_count(q->ready) && key < q->offer_key && !spmc_owned_remove(q->ready, &old) &&
	    queue_insert(cpu, q->offer_key, old))
		spmc_owned_add(q->ready, old);
	if (offer(cpu) && q->offer_open)
		kick_idle(cpu);
}

void BPF_STRUCT_OPS(arena_dequeue, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx __arena *c = ctx_of(p);

	if (c)
		c->gen++;
}

/*
 * Dispatch the task of entry e to this CPU, through the global DSQ when it is on another
 * runqueue. 1 when a task went, 0 for a stale entry (the task left the queue
 * or is gone).
 */
static __noinline int dispatch_entry(u64 e, u32 cpu)
{
	struct task_struct *p = bpf_task_from_pid((u32)e & ENTRY_PID);
	struct task_ctx __arena *c;
	int ret = 0;

	if (!p)
		return 0;
	c = ctx_of(p);
	if (c && c->gen == e >> 32) {
		/*
		 * Only a task on this runqueue goes straight to its local DSQ: we hold its lock,
		 * so it cannot move before the dispatch is done. A task on another runqueue can be
		 * requeued there meanwhile (a migration-disabled preemption, an affinity change),
		 * and 6.12 ends the scheduler when such a move is asked for; it goes to the global
		 * DSQ instead, which the kernel consumes right after ops.dispatch, checking
		 * migration and affinity under both runqueue locks.
		 */
		if (scx_bpf_task_cpu(p) == cpu) {
			scx_bpf_dispatch(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
		} else {
			scx_bpf_dispatch(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, 0);
			cpu_stats(cpu)->moved++;
		}
		ret = 1;
	}
	bpf_task_release(p);
	return ret;
}

/* The CPU other than self with the earliest open offer, -1 when there is none. */
static __noinline int earliest_offer(u32 self, u64 *key)
{
	struct cpu_queue __arena *q;
	int best = -1;
	u32 cpu;

	for (cpu = zero; cpu < nr_cpus && cpu < SCX_ARENA_MAX_CPUS && can_loop; cpu++) {
		q = &queues[cpu];
		if (cpu == self)
			continue;
		if (!q->offer_open || !spmc_count(q->ready))
			continue;
		if (best < 0 || q->offer_key < *key) {
			best = cpu;
			*key = q->offer_key;
		}
	}
	return best;
}

/* Take another CPU's offer when it is earlier than limit; 1 when a task went. */
static __noinline int steal(u32 cpu, u64 limit, bool busy)
{
	struct scx_arena_cpu_stats __arena *st = cpu_stats(cpu);
	int i, victim;
	u64 key = 0, e;

	for (i = zero; i < 4 && can_loop; i++) {
		victim = earliest_offer(cpu, &key);
		if (victim < 0 || (busy && key + BALANCE_NS >= limit))
			return 0;
		if (spmc_steal(queue_of(victim)->ready, &e)) {
			st->steal_misses++;
			continue;
		}
		if (dispatch_entry(e, cpu)) {
			st->stolen++;
			if (busy)
				st->balanced++;
			return 1;
		}
		st->stale++;
	}
	return 0;
}

void BPF_STRUCT_OPS(arena_dispatch, s32 cpu, struct task_struct *prev)
{
	struct scx_arena_cpu_stats __arena *st = cpu_stats(cpu);
	struct cpu_queue __arena *q = queue_of(cpu);
	struct task_struct *cur = NULL;
	struct task_ctx __arena *c = NULL;
	u64 mine = ~0ull, e;
	bool have = false;

	if (cpu >= SCX_ARENA_MAX_CPUS || !q->ready) {
		steal(cpu, 0, false);
		return;
	}
	/*
	 * The task that was running here, when it is ours and still runnable: ops.dispatch's
	 * prev, which 6.12's verifier takes for never NULL though it can be; the current task
	 * is the same one on this CPU.
	 */
	if (q->running && cpu == bpf_get_smp_processor_id()) {
		cur = bpf_get_current_task_btf();
		if (cur->scx.flags & SCX_TASK_QUEUED)
			c = ctx_of(cur);
		if (c)
			mine = vtime_of(cur, c);
	}
	have = offer(cpu);
	/* Another CPU's offer a slice earlier than the best here; any offer when idle. */
	if (steal(cpu, have && q->offer_key < mine ? q->offer_key : mine, c || have))
		return;
	while (have && can_loop) {
		/* The running task is still the earliest: it goes on for another slice. */
		if (c && mine <= q->offer_key)
			break;
		if (spmc_owned_remove(q->ready, &e)) {
			have = offer(cpu);
			continue;
		}
		if (dispatch_entry(e, cpu)) {
			st->dispatched++;
			return;
		}
		st->stale++;
		have = offer(cpu);
	}
	if (c) {
		st->kept++;
		cur->scx.slice = SCX_SLICE_DFL;
	}
}

/*
 * Each tick: the running task stops when a waiting one is WAKE_GRAN_NS earlier (a woken
 * task that came too soon to preempt); the earliest waiting task stays offered to the idle
 * CPUs.
 */
void BPF_STRUCT_OPS(arena_tick, struct task_struct *p)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct cpu_queue __arena *q = queue_of(cpu);
	struct task_ctx __arena *c;

	if (cpu >= SCX_ARENA_MAX_CPUS || !offer(cpu))
		return;
	c = ctx_of(p);
	if (c && q->offer_key + WAKE_GRAN_NS < vtime_of(p, c))
		p->scx.slice = 0;
	if (q->offer_open)
		kick_idle(cpu);
}

void BPF_STRUCT_OPS(arena_running, struct task_struct *p)
{
	u32 cpu = scx_bpf_task_cpu(p);
	struct cpu_queue __arena *q = queue_of(cpu);
	struct task_ctx __arena *c = ctx_of(p);

	if (cpu >= SCX_ARENA_MAX_CPUS)
		return;
	if (!c) {
		q->running = 0;
		return;
	}
	/* Racy across CPUs, and fine: it only ever moves forward a little late. */
	if (c->vtime > vtime_now)
		vtime_now = c->vtime;
	c->exec_start = p->se.sum_exec_runtime;
	q->curr_vtime = c->vtime;
	q->curr_start = bpf_ktime_get_ns();
	q->curr_weight = p->scx.weight;
	q->running = 1;
}

void BPF_STRUCT_OPS(arena_stopping, struct task_struct *p, bool runnable)
{
	u32 cpu = scx_bpf_task_cpu(p);
	struct task_ctx __arena *c = ctx_of(p);

	if (cpu < SCX_ARENA_MAX_CPUS)
		queue_of(cpu)->running = 0;
	if (!c)
		return;
	/* CPU time used, weighted by the inverse of the task's weight (100 at nice 0). */
	c->vtime = vtime_of(p, c);
	c->exec_start = p->se.sum_exec_runtime;
}

void BPF_STRUCT_OPS(arena_enable, struct task_struct *p)
{
	struct task_ctx __arena *c = ctx_of(p);

	if (c)
		c->vtime = vtime_now;
}

void BPF_STRUCT_OPS(arena_update_idle, s32 cpu, bool idle)
{
	struct arena_bitmap __arena *map = idle_cpus();

	if (!map || cpu < 0 || cpu >= SCX_ARENA_MAX_CPUS)
		return;
	if (idle)
		bmp_set_bit(cpu, map);
	else
		bmp_clear_bit(cpu, map);
}

/* The context, from the allocator; a task without one runs from the global DSQ. */
s32 BPF_STRUCT_OPS_SLEEPABLE(arena_init_task, struct task_struct *p,
			     struct scx_init_task_args *args)
{
	struct task_ctx __arena *c;
	u64 *v;

	v = bpf_task_storage_get(&task_ctxs, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!v) {
		atomic_add(&scx_stats.ctx_failures, 1);
		arena_stderr("scx_arena: no task storage for pid %d", p->pid);
		return 0;
	}
	if (READ_ONCE(scx_stats.init_nosleep))
		c = arena_malloc(sizeof(*c));
	else
		c = arena_malloc_sleepable(sizeof(*c));
	if (!c) {
		/* One line per failure would flood the log in a fork storm: the first only. */
		if (atomic_fetch_add(&scx_stats.ctx_failures, 1) == 0)
			arena_stderr(
				     "scx_arena: no context for pid %d (%s): it runs from the global DSQ; failures are counted",
				     p->pid, p->comm);
		*v = 0;
		return 0;
	}
	c->vtime = 0;
	c->exec_start = 0;
	c->gen = 0;
	c->pad = 0;
	*v = (u64)c;
	atomic_add(&scx_stats.ctx_allocs, 1);
	return 0;
}

void BPF_STRUCT_OPS(arena_exit_task, struct task_struct *p, struct scx_exit_task_args *args)
{
	struct task_ctx __arena *c = ctx_of(p);

	bpf_task_storage_delete(&task_ctxs, p);
	if (!c)
		return;
	if (arena_free(c))
		arena_stderr("scx_arena: the context of pid %d did not go back", p->pid);
	else
		atomic_add(&scx_stats.ctx_frees, 1);
}

/* Every CPU's map and deque, and the idle bitmap; arena_exit takes them down. */
s32 BPF_STRUCT_OPS_SLEEPABLE(arena_init)
{
	struct cpu_queue __arena *q;
	u32 cpu;

	nr_cpus = scx_bpf_nr_cpu_ids();
	if (nr_cpus > SCX_ARENA_MAX_CPUS)
		arena_stderr("scx_arena: %u CPUs, queues for %u: the rest use the global DSQ",
			     nr_cpus, SCX_ARENA_MAX_CPUS);
	idle_map = (u64)bmp_alloc(SCX_ARENA_MAX_CPUS);
	if (!idle_map)
		return -ENOMEM;
	for (cpu = zero; cpu < nr_cpus && cpu < SCX_ARENA_MAX_CPUS && can_loop; cpu++) {
		q = &queues[cpu];
		q->wait = bt_create();
		q->ready = spmc_create();
		q->last_key = 0;
		q->offer_key = 0;
		q->offer_open = 0;
		q->running = 0;
		q->curr_vtime = 0;
		if (!q->wait || !q->ready)
			return -ENOMEM;
	}
	arena_stdout("scx_arena: %u CPUs, a B-tree and a deque each", nr_cpus);
	return 0;
}

void BPF_STRUCT_OPS_SLEEPABLE(arena_exit, struct scx_exit_info *ei)
{
	struct cpu_queue __arena *q;
	u32 cpu, i;

	UEI_RECORD(uei, ei);
	/* And where the loader reads everything else: the arena. */
	for (i = zero; i < sizeof(uei.reason) && can_loop; i++)
		scx_stats.exit_reason[i] = uei.reason[i];
	for (i = zero; i < sizeof(uei.msg) && can_loop; i++)
		scx_stats.exit_msg[i] = uei.msg[i];
	scx_stats.exit_code = uei.exit_code;
	WRITE_ONCE(scx_stats.exit_kind, uei.kind);
	for (cpu = zero; cpu < SCX_ARENA_MAX_CPUS && can_loop; cpu++) {
		q = &queues[cpu];
		if (q->wait && bt_destroy(q->wait))
			arena_stderr("scx_arena: CPU %u's map did not go in one call", cpu);
		if (q->ready)
			spmc_destroy(q->ready);
		q->wait = NULL;
		q->ready = NULL;
	}
	if (idle_map)
		bmp_free(idle_cpus());
	idle_map = 0;
}

SCX_OPS_DEFINE(scx_arena_ops,
	       .select_cpu	= (void *)arena_select_cpu,
	       .enqueue		= (void *)arena_enqueue,
	       .dequeue		= (void *)arena_dequeue,
	       .dispatch	= (void *)arena_dispatch,
	       .tick		= (void *)arena_tick,
	       .running		= (void *)arena_running,
	       .stopping	= (void *)arena_stopping,
	       .enable		= (void *)arena_enable,
	       .update_idle	= (void *)arena_update_idle,
	       .init_task	= (void *)arena_init_task,
	       .exit_task	= (void *)arena_exit_task,
	       .init		= (void *)arena_init,
	       .exit		= (void *)arena_exit,
	       .flags		= SCX_OPS_KEEP_BUILTIN_IDLE,
	       .name		= "arena");

/* Where the statistics are: the loader reads them in place. */
SEC("syscall")
int scx_arena_setup(struct scx_arena_setup *args)
{
	args->stats = (u64)&scx_stats;
	return 0;
}

SEC("syscall")
int scx_arena_outstanding(struct scx_arena_outstanding *args)
{
	args->objects = arena_heap_outstanding();
	return 0;
}

/*
 * Tests only: take every object of a task context's size this CPU's heap can hand out
 * without maintenance (fill = 1), so that ops.init_task meets an empty reserve; or give
 * them all back (fill = 0). The objects hold the list themselves.
 */
u64 __arena_global drained;

SEC("syscall")
int scx_arena_drain(struct scx_arena_drain *args)
{
	u64 __arena *obj;
	u64 next;
	u32 i;

	if (args->fill) {
		for (i = zero; i < (1u << 22) && can_loop; i++) {
			obj = arena_malloc(sizeof(struct task_ctx));
			if (!obj)
				break;
			*obj = drained;
			drained = (u64)obj;
			scx_stats.drain_held++;
		}
	} else {
		for (i = zero; drained && i < (1u << 22) && can_loop; i++) {
			obj = (u64 __arena *)drained;
			next = *obj;
			if (arena_free(obj))
				return -EINVAL;
			drained = next;
			scx_stats.drain_held--;
		}
	}
	args->held = scx_stats.drain_held;
	return 0;
}
