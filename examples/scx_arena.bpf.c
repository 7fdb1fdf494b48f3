// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * scx_arena: a sched_ext scheduler whose state lives in the arena, built from libarena's
 * parts only. Weighted virtual time, per-CPU queues, work stealing:
 *
 * - Each task has a context from arena_malloc, made in ops.init_task (sleepable on 6.12,
 *   so a fork storm that empties the CPU's reserve refills it instead of failing) and
 *   freed in ops.exit_task. A task without one (the allocator failed) still runs: from
 *   the global DSQ, with one log line.
 * - Each CPU has an ordered map (a B-tree) of the tasks enqueued on it, keyed by virtual
 *   time (FIFO among equal times), and a work-stealing deque (spmc) of the next few. The
 *   CPU moves its SCX_ARENA_BATCH earliest tasks from the map to its deque and dispatches
 *   from it; an idle CPU steals from the deque that holds the most. Only the CPU itself
 *   touches its map (every op runs under its runqueue lock, interrupts off), the deque
 *   takes any thief: no lock anywhere.
 * - The idle CPUs are an arena bitmap (ops.update_idle). A task that goes into a map
 *   wakes one of them to come and steal.
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
	struct btree __arena *wait;	/* waiting tasks by key: only this CPU touches it */
	struct spmc __arena *ready;	/* the next few: this CPU pops, others steal */
	u64 last_key;			/* the highest key given out: FIFO among equals */
};

struct scx_arena_stats __arena_global scx_stats;
struct cpu_queue __arena_global queues[SCX_ARENA_MAX_CPUS];
u64 __arena_global idle_map;		/* struct arena_bitmap: the idle CPUs */

static u64 vtime_now;
static u32 nr_cpus;
UEI_DEFINE(uei);

/*
 * Keys are virtual times in ns, all 64 bits (no wrap in centuries even at nice 19). Equal
 * times queue in arrival order: a time at most KEY_FIFO_NS below the highest key given
 * out takes the key after it, so a fork storm's children, which all start at the same
 * time, line up one nanosecond apart instead of colliding.
 */
#define KEY_FIFO_NS	1024

/* An entry of a map or deque: the task's pid and its context's generation then. */
static __always_inline u64 entry_of(struct task_struct *p, struct task_ctx __arena *c)
{
	return (u64)c->gen << 32 | (u32)p->pid;
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

static __always_inline struct arena_bitmap __arena *idle_cpus(void)
{
	return (struct arena_bitmap __arena *)idle_map;
}

static __always_inline bool vtime_before(u64 a, u64 b)
{
	return (s64)(a - b) < 0;
}

/*
 * Whether p can go straight to cpu's local DSQ. Only when it is on cpu's runqueue: ops.dispatch
 * holds that runqueue's lock, so p cannot move or be requeued before the dispatch is done. A
 * task on another runqueue can be requeued there between our checks and the dispatch (a
 * migration-disabled preemption, an affinity change), and 6.12 ends the scheduler when such a
 * move is asked for; it goes to the global DSQ instead, which the kernel consumes right after
 * ops.dispatch, checking migration and affinity under both runqueue locks.
 */
static __always_inline bool runs_on(struct task_struct *p, s32 cpu)
{
	return scx_bpf_task_cpu(p) == cpu;
}

s32 BPF_STRUCT_OPS(arena_select_cpu, struct task_struct *p, s32 prev_cpu, u64 wake_flags)
{
	bool is_idle = false;
	s32 cpu;

	cpu = scx_bpf_select_cpu_dfl(p, prev_cpu, wake_flags, &is_idle);
	if (is_idle) {
		cpu_stats(bpf_get_smp_processor_id())->direct++;
		scx_bpf_dispatch(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, 0);
	}
	return cpu;
}

/* Move the earliest tasks of this CPU's map onto its deque, latest first (LIFO pops). */
static __noinline int refill(u32 cpu)
{
	struct cpu_queue __arena *q = &queues[cpu & (SCX_ARENA_MAX_CPUS - 1)];
	u64 key, e0 = 0, e1 = 0, e2 = 0, e3 = 0;
	int n = 0;

	if (!q->wait || !q->ready || spmc_count(q->ready))
		return 0;
	/* Unrolled: a loop filling an array would cost the verifier more than it saves. */
	if (bt_pop_first(q->wait, &key, &e0) == 0)
		n = 1;
	if (n == 1 && bt_pop_first(q->wait, &key, &e1) == 0)
		n = 2;
	if (n == 2 && bt_pop_first(q->wait, &key, &e2) == 0)
		n = 3;
	if (n == 3 && bt_pop_first(q->wait, &key, &e3) == 0)
		n = 4;
	/* The deque was empty and only thieves took from it since: 4 of its 128 slots. */
	if (n == 4)
		spmc_owned_add(q->ready, e3);
	if (n >= 3)
		spmc_owned_add(q->ready, e2);
	if (n >= 2)
		spmc_owned_add(q->ready, e1);
	if (n >= 1)
		spmc_owned_add(q->ready, e0);
	return n;
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
		cpu_stats(self)->kicks++;
		return;
	}
}

void BPF_STRUCT_OPS(arena_enqueue, struct task_struct *p, u64 enq_flags)
{
	u32 cpu = bpf_get_smp_processor_id();
	struct scx_arena_cpu_stats __arena *st = cpu_stats(cpu);
	struct task_ctx __arena *c;
	struct cpu_queue __arena *q;
	u64 vtime, key;
	int err = -ENOENT, i;

	/* Per-CPU kernel threads and the like: their own CPU's local DSQ. */
	if (p->nr_cpus_allowed == 1) {
		st->pinned++;
		scx_bpf_dispatch(p, SCX_DSQ_LOCAL, SCX_SLICE_DFL, enq_flags);
		return;
	}
	c = ctx_of(p);
	q = &queues[cpu & (SCX_ARENA_MAX_CPUS - 1)];
	if (c && cpu < SCX_ARENA_MAX_CPUS && q->wait) {
		/* A sleeper earns at most one slice of credit. */
		vtime = c->vtime;
		if (vtime_now > SCX_SLICE_DFL && vtime_before(vtime, vtime_now - SCX_SLICE_DFL))
			vtime = vtime_now - SCX_SLICE_DFL;
		c->vtime = vtime;
		c->gen++;
		key = vtime;
		if (key <= q->last_key && q->last_key - key <= KEY_FIFO_NS)
			key = q->last_key + 1;
		/* A key taken by a task of lower time given out earlier: the next ones. */
		for (i = zero; i < 4 && err && can_loop; i++)
			err = bt_insert(q->wait, key + i, entry_of(p, c), false);
		if (!err) {
			key += i - 1;
			if (key > q->last_key)
				q->last_key = key;
			st->enqueued++;
			refill(cpu);
			kick_idle(cpu);
			return;
		}
		atomic_add(&scx_stats.insert_failures, 1);
	}
	st->to_global++;
	scx_bpf_dispatch(p, SCX_DSQ_GLOBAL, SCX_SLICE_DFL, enq_flags);
}

void BPF_STRUCT_OPS(arena_dequeue, struct task_struct *p, u64 deq_flags)
{
	struct task_ctx __arena *c = ctx_of(p);

	if (c)
		c->gen++;
}

/*
 * Dispatch the task of entry e to this CPU, through the global DSQ when it is on another
 * runqueue (see runs_on). 1 when a task went, 0 for a stale entry (the task left the queue
 * or is gone).
 */
static __noinline int dispatch_entry(u64 e, u32 cpu)
{
	struct task_struct *p = bpf_task_from_pid((u32)e);
	struct task_ctx __arena *c;
	int ret = 0;

	if (!p)
		return 0;
	c = ctx_of(p);
	if (c && c->gen == e >> 32) {
		if (runs_on(p, cpu)) {
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

/* The CPU whose deque holds the most, not this one: -1 when all are empty. */
static __noinline int busiest(u32 self)
{
	int best = -1, most = 0, n;
	u32 cpu;

	for (cpu = zero; cpu < nr_cpus && cpu < SCX_ARENA_MAX_CPUS && can_loop; cpu++) {
		if (cpu == self || !queues[cpu].ready)
			continue;
		n = spmc_count(queues[cpu].ready);
		if (n > most) {
			most = n;
			best = cpu;
		}
	}
	return best;
}

void BPF_STRUCT_OPS(arena_dispatch, s32 cpu, struct task_struct *prev)
{
	struct scx_arena_cpu_stats __arena *st = cpu_stats(cpu);
	struct cpu_queue __arena *q = &queues[cpu & (SCX_ARENA_MAX_CPUS - 1)];
	int i, victim;
	u64 e;

	/*
	 * Our own deque first (refilled from our map), until a task goes or both are empty:
	 * stale entries must not leave live ones behind. Only on our own CPU: core
	 * scheduling balances a sibling from here, and CPUs past the last queue have none.
	 */
	if (cpu == bpf_get_smp_processor_id() && cpu < SCX_ARENA_MAX_CPUS && q->ready) {
		while (can_loop) {
			if (spmc_owned_remove(q->ready, &e)) {
				if (!refill(cpu))
					break;
				continue;
			}
			if (dispatch_entry(e, cpu)) {
				st->dispatched++;
				return;
			}
			st->stale++;
		}
	}
	for (i = zero; i < 8 && can_loop; i++) {
		victim = busiest(cpu);
		if (victim < 0)
			return;
		if (spmc_steal(queues[victim & (SCX_ARENA_MAX_CPUS - 1)].ready, &e)) {
			st->steal_misses++;
			continue;
		}
		if (dispatch_entry(e, cpu)) {
			st->stolen++;
			return;
		}
		st->stale++;
	}
}

/* Each tick: a CPU busy with one task shows its waiting ones to the idle CPUs. */
void BPF_STRUCT_OPS(arena_tick, struct task_struct *p)
{
	u32 cpu = bpf_get_smp_processor_id();

	if (cpu < SCX_ARENA_MAX_CPUS && refill(cpu))
		kick_idle(cpu);
}

void BPF_STRUCT_OPS(arena_running, struct task_struct *p)
{
	struct task_ctx __arena *c = ctx_of(p);

	/* Racy across CPUs, and fine: it only ever moves forward a little late. */
	if (c && vtime_before(vtime_now, c->vtime))
		vtime_now = c->vtime;
}

void BPF_STRUCT_OPS(arena_stopping, struct task_struct *p, bool runnable)
{
	struct task_ctx __arena *c = ctx_of(p);
	u64 used = SCX_SLICE_DFL - p->scx.slice;

	if (!c)
		return;
	if (used > SCX_SLICE_DFL)
		used = SCX_SLICE_DFL;
	/* Time used, weighted by the inverse of the task's weight (100 at nice 0). */
	c->vtime += used * 100 / (p->scx.weight ? p->scx.weight : 1);
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
	c->vtime = vtime_now;
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
