/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/* kmemtrace's shared layout: one definition for the BPF side and for user space. */
#ifndef __KMEMTRACE_H
#define __KMEMTRACE_H

#define KMT_MAX_SITES	4096	/* call sites the arena tracer lists for user space */
#define KMT_MAP_ENTRIES	8192	/* the map tracer's preallocated outstanding allocations */
#define KMT_MAP_SITES	4096
#define KMT_MAX_CPUS	64	/* a tree by age per CPU (a power of two) */

/* One outstanding allocation, in the arena; the map tracer keeps the same in its map. */
struct kmt_rec {
	u64 addr;
	u64 bytes;
	u64 site;	/* the caller of kmalloc/kmem_cache_alloc */
	u64 ts;		/* bpf_ktime_get_ns() */
	u64 seq;	/* the arena tracer's key in its CPU's tree by age (0 in the map's) */
	s32 stack_id;	/* in the stack map, or a negative errno */
	u32 cpu;
	u64 link;	/* the arena tracer's: its place in a queue for the tree by age */
	u64 site_rec;	/* the arena tracer's: its struct kmt_site __arena * */
	u32 state;	/* the arena tracer's: KMT_* below */
	u32 pad;
};

/* Where an arena record is: waiting to enter the tree by age, in it, freed before it was. */
#define KMT_QUEUED	0
#define KMT_IN_TREE	1
#define KMT_FREED	2

/* One call site: what is outstanding from it, and how many it made while traced. */
struct kmt_site {
	u64 site;
	s64 bytes;
	s64 count;
	u64 allocs;
};

/*
 * What one tracer saw. Exact accounting: seen == outstanding + freed + dropped, where
 * outstanding is the records the tracer holds. A free of an allocation made before
 * tracing started is not an event of ours (unknown_frees). An address allocated again
 * without a free we saw (its free came through a path without a tracepoint) ends its
 * old record: counted in freed and in reused.
 */
struct kmt_counts {
	u64 seen;
	u64 freed;
	u64 dropped;
	u64 drop_full;		/* the map tracer's table was full */
	u64 drop_nomem;		/* the arena tracer could not allocate a record */
	u64 drop_busy;		/* a hash map region's lock timed out */
	u64 drop_site;		/* no room for a new call site */
	u64 unknown_frees;
	u64 reused;
	u64 deferred;		/* changes to the tree by age left to the lock's next holder */
};

struct kmt_state {
	u64 live;		/* struct hmap __arena *: address -> struct kmt_rec __arena * */
	u64 sites;		/* struct hmap __arena *: call site -> struct kmt_site __arena * */
	u64 seq;		/* the next record's key in age */
	u32 nr_sites;		/* site_tab's entries in use, in order of first sight */
	u32 ready;
	u32 nr_cpus;		/* trees in age[] */
	u32 pad;
	/* Per CPU of allocation: struct btree __arena *, seq -> struct kmt_rec __arena * */
	u64 age[KMT_MAX_CPUS];
	s64 heap_before;	/* arena_heap_outstanding() before setup */
	struct kmt_counts arena;	/* the arena tracer's */
	struct kmt_counts maps;		/* the map tracer's */
	u64 site_tab[KMT_MAX_SITES];	/* struct kmt_site __arena *, for user space */
};

struct kmt_setup {
	u32 nr_cpus;		/* in: possible CPUs, at most KMT_MAX_CPUS */
	u32 pad;
	u64 state;		/* out: user address of struct kmt_state */
};

struct kmt_teardown {
	s64 freed;		/* out: records freed */
	s64 heap_after;		/* out: arena_heap_outstanding() after */
};

#endif
