/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/* scx_arena: what the scheduler and its loader share (see scx_arena.bpf.c). */
#ifndef __SCX_ARENA_H
#define __SCX_ARENA_H

#define SCX_ARENA_MAX_CPUS	64	/* CPUs beyond it run from the global DSQ */

/* One CPU's counters: only that CPU writes them. */
struct scx_arena_cpu_stats {
	__u64 enqueued;		/* into this CPU's ordered map */
	__u64 direct;		/* select_cpu found an idle CPU: straight to its local DSQ */
	__u64 pinned;		/* tasks of one CPU: to their own local DSQ */
	__u64 dispatched;	/* from this CPU's own deque */
	__u64 stolen;		/* from another CPU's deque */
	__u64 steal_misses;	/* steals that lost a race or found the deque empty */
	__u64 to_global;	/* fallbacks to the global DSQ: no context, no room, not here */
	__u64 stale;		/* entries of tasks that left the queue meanwhile: dropped */
	__u64 kicks;		/* idle CPUs woken to come and steal */
	__u64 moved;		/* dispatched tasks of another runqueue: via the global DSQ */
	__u64 preempted;	/* woken tasks that preempted the running one */
	__u64 kept;		/* the running task still the earliest: another slice */
	__u64 balanced;		/* busy CPUs that took another CPU's earlier task */
	__u64 pad[3];		/* a CPU's counters on cache lines of their own */
};

struct scx_arena_stats {
	__u64 ctx_allocs;	/* per-task contexts from arena_malloc (ops.init_task) */
	__u64 ctx_frees;	/* and back (ops.exit_task) */
	__u64 ctx_failures;	/* tasks left without one: they run from the global DSQ */
	__u64 insert_failures;	/* the ordered map had no room: global DSQ */
	__u32 init_nosleep;	/* tests: ops.init_task allocates as a non-sleepable op */
	__u32 pad0;
	__u64 drain_held;	/* tests: objects scx_arena_drain holds */
	__u64 pad[2];
	/* How the scheduler ended (ops.exit): kind is SCX_EXIT_*, 0 while it runs. */
	__s64 exit_kind;
	__s64 exit_code;
	char exit_reason[128];
	char exit_msg[1024];
	struct scx_arena_cpu_stats cpu[SCX_ARENA_MAX_CPUS];
};

/* SEC("syscall") scx_arena_setup: where the statistics are, in the arena. */
struct scx_arena_setup {
	__u64 stats;		/* out: address of struct scx_arena_stats */
};

/* SEC("syscall") scx_arena_outstanding: arena_heap_outstanding(), for leak checks. */
struct scx_arena_outstanding {
	__s64 objects;		/* out */
};

/* SEC("syscall") scx_arena_drain: tests only, see the program. */
struct scx_arena_drain {
	__u32 fill;		/* in: 1 take every span of this CPU, 0 give them back */
	__u32 pad;
	__u64 held;		/* out: objects held now, over every CPU */
};

#endif /* __SCX_ARENA_H */
