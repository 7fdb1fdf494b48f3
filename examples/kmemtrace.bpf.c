// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * kmemtrace: the kernel's outstanding allocations, from the kmalloc, kfree,
 * kmem_cache_alloc and kmem_cache_free tracepoints, as a leak tracer keeps them. Two
 * tracers of the same events in one object, so that user space can run either on the
 * same workload:
 *
 *   arena  a record per allocation from arena_malloc, found by address through the
 *          library's hash map, a record per call site, and a B-tree of the records by
 *          age per CPU; user space reads all of it in place through the arena's mapping
 *   maps   what a tracing user writes today: a preallocated BPF hash map of records by
 *          address and one of call sites, read with batch lookups
 *
 * Tracepoints fire in any context, interrupts included, on every CPU at once. The hash
 * maps need no lock of ours. A record goes into the tree of the CPU that allocated it,
 * so that CPUs share a tree only for frees of each other's allocations; each tree is
 * serialised by an owner lock, which refuses at once a program that interrupted its
 * holder (and gives up on a long wait): the record then waits in a queue (the library's
 * MPSC queue) for the lock's next holder to insert or remove it, so no event is lost
 * to the lock.
 */
#include <libarena/common.h>
#include <libarena/hashmap.h>
#include <libarena/btree.h>
#include <libarena/mpsc.h>
#include "kmemtrace.h"

char _license[] SEC("license") = "GPL";	/* tracing helpers and the arena kfuncs */

struct kmt_state __arena_global kmt;
/* A CPU's tree by age: its lock, and what waits for the lock's next holder. */
struct kmt_part {
	struct arena_owner lock;
	struct mpsc_queue inserts;	/* records to put into the tree */
	struct mpsc_queue removals;	/* freed records to take out of it */
};

struct kmt_part __arena_global kmt_part[KMT_MAX_CPUS];

static __always_inline struct kmt_part __arena *part_of(u32 cpu)
{
	return &kmt_part[cpu & (KMT_MAX_CPUS - 1)];
}

static __always_inline struct btree __arena *tree_of(u32 cpu)
{
	return (struct btree __arena *)kmt.age[cpu & (KMT_MAX_CPUS - 1)];
}

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 4096);
	__uint(key_size, sizeof(u32));
	__uint(value_size, 16 * sizeof(u64));
} kmt_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KMT_MAP_ENTRIES);
	__type(key, u64);
	__type(value, struct kmt_rec);
} kmt_map_live SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KMT_MAP_SITES);
	__type(key, u64);
	__type(value, struct kmt_site);
} kmt_map_sites SEC(".maps");

/*
 * Raw tracepoints: the kmem events' pointers are const void *, which a BTF-typed
 * program may not read as numbers on 6.12. A cache's object size, read from the kernel.
 */
static __always_inline u64 cache_size(struct kmem_cache *s)
{
	unsigned int size = 0;

	bpf_probe_read_kernel(&size, sizeof(size), &s->size);
	return size;
}

/* The state keeps the arena tracer's structures as addresses (user space reads them). */
#define HMAP(x)		((struct hmap __arena *)(x))

/* ---- the arena tracer ---- */

SEC("syscall")
int kmt_setup(struct kmt_setup *args)
{
	struct hmap __arena *live, *sites;
	struct btree __arena *t;
	u32 c, n = args->nr_cpus;

	if (kmt.live)
		return -EBUSY;
	if (!n || n > KMT_MAX_CPUS)
		return -EINVAL;
	kmt.heap_before = arena_heap_outstanding();
	/* Small, then grown here (sleepable): no insert in a tracepoint pays for growth. */
	live = hmap_create(64);
	sites = hmap_create(64);
	if (!live || !sites || hmap_reserve(live, 4 * KMT_MAP_ENTRIES) ||
	    hmap_reserve(sites, KMT_MAP_SITES)) {
		if (live)
			hmap_destroy(live);
		if (sites)
			hmap_destroy(sites);
		return -ENOMEM;
	}
	kmt.live = (u64)live;
	kmt.sites = (u64)sites;
	for (c = zero; c < n && can_loop; c++) {
		t = bt_create();
		if (!t)
			return -ENOMEM;		/* kmt_teardown frees what was made */
		kmt.age[c & (KMT_MAX_CPUS - 1)] = (u64)t;
		kmt.nr_cpus = c + 1;
	}
	kmt.seq = 1;
	WRITE_ONCE(kmt.ready, 1);
	args->state = (u64)&kmt;
	return 0;
}

static __always_inline void count_drop(u64 __arena *why)
{
	atomic_add(why, 1);
	atomic_add(&kmt.arena.dropped, 1);
}

static __always_inline struct kmt_rec __arena *rec_of(struct mpsc_node __arena *n)
{
	return (struct kmt_rec __arena *)((u64)n - offsetof(struct kmt_rec, link));
}

static __always_inline void queue(struct mpsc_queue __arena *q, struct kmt_rec __arena *r)
{
	atomic_add(&kmt.arena.deferred, 1);
	mpsc_push(q, (struct mpsc_node __arena *)&r->link);
}

/*
 * Holding the age lock: what other programs left while it was held. Inserts first, so
 * that a record queued for removal (only ever one in the tree) is there to remove. A
 * record freed while it waited to go in is freed here; one the tree has no room for
 * stays out of it (outstanding all the same: the hash map holds it).
 */
static __always_inline void drain_queues(struct kmt_part __arena *p, struct btree __arena *age)
{
	struct mpsc_node __arena *n;
	struct kmt_rec __arena *r;
	u32 i;

	for (i = zero; i < 256 && can_loop; i++) {
		if (mpsc_pop(&p->inserts, &n))
			break;
		r = rec_of(n);
		if (cmpxchg(&r->state, KMT_QUEUED, KMT_IN_TREE) == KMT_QUEUED)
			bt_insert(age, r->seq, (u64)r, false);
		else
			arena_free(r);
	}
	for (i = zero; i < 256 && can_loop; i++) {
		if (mpsc_pop(&p->removals, &n))
			break;
		r = rec_of(n);
		bt_remove(age, r->seq);
		arena_free(r);
	}
}

/*
 * The hash map's writers wait for a region's lock a bounded time; a vCPU that stalls
 * (TCG does) can outlast it. Try again, a few times, before a change is given up.
 */
#define LIVE_TRIES	4

static __always_inline int live_insert(u64 ptr, struct kmt_rec __arena *r)
{
	int err = -ETIMEDOUT;
	u32 i;

	for (i = zero; i < LIVE_TRIES && err == -ETIMEDOUT && can_loop; i++)
		err = hmap_insert(HMAP(kmt.live), ptr, (u64)r);
	return err;
}

static __always_inline int live_delete(u64 ptr, u64 *v)
{
	int err = -ETIMEDOUT;
	u32 i;

	for (i = zero; i < LIVE_TRIES && err == -ETIMEDOUT && can_loop; i++)
		err = hmap_delete(HMAP(kmt.live), ptr, v);
	return err;
}

/* The call site's record, made on its first allocation; NULL when there is no room. */
static __always_inline struct kmt_site __arena *site_of(u64 site)
{
	struct kmt_site __arena *s;
	u64 v;
	u32 i;

	if (!hmap_lookup(HMAP(kmt.sites), site, &v))
		return (struct kmt_site __arena *)v;
	s = arena_malloc(sizeof(*s));
	if (!s)
		return NULL;
	s->site = site;
	s->bytes = 0;
	s->count = 0;
	s->allocs = 0;
	if (hmap_insert(HMAP(kmt.sites), site, (u64)s)) {
		/* Another CPU made it first (or the map failed): take what is there. */
		arena_free(s);
		return hmap_lookup(HMAP(kmt.sites), site, &v) ? NULL :
		       (struct kmt_site __arena *)v;
	}
	i = atomic_fetch_add(&kmt.nr_sites, 1);
	if (i < KMT_MAX_SITES)
		WRITE_ONCE(kmt.site_tab[i], (u64)s);
	return s;
}

/* A record that leaves the tracer: its site's figures and the tree by age. */
static __always_inline void rec_end(struct kmt_rec __arena *r)
{
	struct btree __arena *age;
	struct kmt_site __arena *s;
	struct kmt_part __arena *p;

	s = (struct kmt_site __arena *)r->site_rec;
	atomic_add(&s->bytes, -(s64)r->bytes);
	atomic_add(&s->count, -1);
	atomic_add(&kmt.arena.freed, 1);
	p = part_of(r->cpu);
	age = tree_of(r->cpu);
	if (arena_owner_lock(&p->lock)) {
		/* Not in the tree yet: the insert's drain frees it. Else the lock's holder. */
		if (cmpxchg(&r->state, KMT_QUEUED, KMT_FREED) != KMT_QUEUED)
			queue(&p->removals, r);
		return;
	}
	drain_queues(p, age);
	bt_remove(age, r->seq);
	arena_owner_unlock(&p->lock);
	arena_free(r);
}

static __always_inline void arena_alloc_event(void *ctx, u64 site, u64 ptr, u64 bytes)
{
	struct btree __arena *age;
	struct kmt_rec __arena *r;
	struct kmt_site __arena *s;
	struct kmt_part __arena *p;
	u64 v;
	int err;

	if (!READ_ONCE(kmt.ready) || ptr <= 16)	/* NULL and ZERO_SIZE_PTR */
		return;
	atomic_add(&kmt.arena.seen, 1);
	s = site_of(site);
	if (!s) {
		count_drop(&kmt.arena.drop_site);
		return;
	}
	r = arena_malloc(sizeof(*r));
	if (!r) {
		count_drop(&kmt.arena.drop_nomem);
		return;
	}
	r->addr = ptr;
	r->bytes = bytes;
	r->site = site;
	r->site_rec = (u64)s;
	r->ts = bpf_ktime_get_ns();
	r->seq = atomic_fetch_add(&kmt.seq, 1);
	r->stack_id = bpf_get_stackid(ctx, &kmt_stacks, 0);
	r->cpu = bpf_get_smp_processor_id();
	r->link = 0;
	if (r->cpu >= kmt.nr_cpus) {	/* setup was told fewer CPUs than there are */
		arena_free(r);
		count_drop(&kmt.arena.drop_nomem);
		return;
	}
	r->state = KMT_QUEUED;
	/*
	 * Nobody can free ptr before its allocation returns, so the record is ours until
	 * it is in the hash map. An address already there was freed on a path we did not see.
	 */
	err = live_insert(ptr, r);
	if (err == -EEXIST && !live_delete(ptr, &v)) {
		atomic_add(&kmt.arena.reused, 1);
		rec_end((struct kmt_rec __arena *)v);
		err = live_insert(ptr, r);
	}
	if (err) {
		arena_free(r);
		count_drop(err == -ETIMEDOUT ? &kmt.arena.drop_busy : &kmt.arena.drop_nomem);
		return;
	}
	atomic_add(&s->bytes, bytes);
	atomic_add(&s->count, 1);
	atomic_add(&s->allocs, 1);
	p = part_of(r->cpu);
	if (arena_owner_lock(&p->lock)) {
		queue(&p->inserts, r);
		return;
	}
	age = tree_of(r->cpu);
	drain_queues(p, age);
	r->state = KMT_IN_TREE;
	bt_insert(age, r->seq, (u64)r, false);
	arena_owner_unlock(&p->lock);
}

static __always_inline void arena_free_event(u64 ptr)
{
	u64 v;

	if (!READ_ONCE(kmt.ready) || ptr <= 16)
		return;
	if (live_delete(ptr, &v)) {
		/* Not ours, or given up: its record stays outstanding until ptr comes back. */
		atomic_add(&kmt.arena.unknown_frees, 1);
		return;
	}
	rec_end((struct kmt_rec __arena *)v);
}

/*
 * A tracer's four programs, named PREFIX##kmalloc and so on, feeding its alloc and free
 * events (the loader attaches one tracer's at a time).
 */
#define KMT_TRACER(prefix, alloc_event, free_event)					\
SEC("raw_tp/kmalloc")									\
int BPF_PROG(prefix##kmalloc, unsigned long site, const void *ptr, size_t req,		\
	     size_t alloc)								\
{											\
	alloc_event(ctx, site, (u64)ptr, alloc);					\
	return 0;									\
}											\
SEC("raw_tp/kmem_cache_alloc")								\
int BPF_PROG(prefix##cache_alloc, unsigned long site, const void *ptr,			\
	     struct kmem_cache *s)							\
{											\
	alloc_event(ctx, site, (u64)ptr, cache_size(s));				\
	return 0;									\
}											\
SEC("raw_tp/kfree")									\
int BPF_PROG(prefix##kfree, unsigned long site, const void *ptr)			\
{											\
	free_event((u64)ptr);								\
	return 0;									\
}											\
SEC("raw_tp/kmem_cache_free")								\
int BPF_PROG(prefix##cache_free, unsigned long site, const void *ptr)			\
{											\
	free_event((u64)ptr);								\
	return 0;									\
}

KMT_TRACER(kmt_, arena_alloc_event, arena_free_event)

/* What arena_heap_outstanding() says now: arena-top's figure is checked against it. */
SEC("syscall")
int kmt_outstanding(struct kmt_teardown *args)
{
	args->heap_after = arena_heap_outstanding();
	return 0;
}

/* Detached: what waits in the queues goes into (or out of) the tree, for user space. */
SEC("syscall")
int kmt_flush(void *args)
{
	struct kmt_part __arena *p;
	u32 c;

	if (!kmt.live)
		return -EINVAL;
	for (c = zero; c < kmt.nr_cpus && can_loop; c++) {
		p = part_of(c);
		if (arena_owner_lock(&p->lock))
			return -EBUSY;
		drain_queues(p, tree_of(c));
		arena_owner_unlock(&p->lock);
	}
	return 0;
}

/*
 * Detached: free every record, every site and the three structures, so the allocator
 * is back where it started. Records go by age (the tree's first), each out of the hash
 * map by its address; a call that ran out of the verifier's loop budget says -EAGAIN
 * (call again).
 */
SEC("syscall")
__noasan int kmt_teardown(struct kmt_teardown *args)
{
	struct hmap_cursor cur;
	struct btree __arena *age;
	struct kmt_part __arena *p;
	u64 key, v;
	u32 c, i;

	/*
	 * Not instrumented: the sanitizer build turns this zeroing into a call to its
	 * memset, whose one store 6.12 then refuses for both stack and arena pointers.
	 */
	cur.hash = 0;
	cur.done = 0;
	if (!kmt.live)
		return -EINVAL;
	WRITE_ONCE(kmt.ready, 0);
	for (c = zero; c < kmt.nr_cpus && can_loop; c++) {
		p = part_of(c);
		age = tree_of(c);
		if (arena_owner_lock(&p->lock))
			return -EBUSY;
		drain_queues(p, age);
		for (i = zero; i < 1000000 && can_loop; i++) {
			if (bt_pop_first(age, &key, &v))
				break;
			hmap_delete(HMAP(kmt.live), ((struct kmt_rec __arena *)v)->addr, NULL);
			arena_free((void __arena *)v);
			args->freed++;
		}
		arena_owner_unlock(&p->lock);
		if (bt_count(age) > 0)
			return -EAGAIN;
	}
	for (i = zero; i < KMT_MAX_SITES && can_loop; i++)
		kmt.site_tab[i] = 0;
	for (i = zero; i < 1000000 && can_loop; i++) {
		if (hmap_iter(HMAP(kmt.sites), &cur, &key, &v))
			break;
		arena_free((void __arena *)v);
	}
	hmap_destroy(HMAP(kmt.live));
	hmap_destroy(HMAP(kmt.sites));
	for (c = zero; c < kmt.nr_cpus && can_loop; c++) {
		age = tree_of(c);
		while (bt_destroy(age) == -EAGAIN && can_loop)
			;
		kmt.age[c & (KMT_MAX_CPUS - 1)] = 0;
	}
	kmt.live = kmt.sites = 0;
	args->heap_after = arena_heap_outstanding();
	return 0;
}

/* ---- the map tracer ---- */

static __always_inline void map_site_add(u64 site, s64 bytes, s64 count, u64 allocs)
{
	struct kmt_site *s, fresh = { .site = site };

	s = bpf_map_lookup_elem(&kmt_map_sites, &site);
	if (!s) {
		if (count < 0)
			return;
		bpf_map_update_elem(&kmt_map_sites, &site, &fresh, BPF_NOEXIST);
		s = bpf_map_lookup_elem(&kmt_map_sites, &site);
		if (!s)
			return;
	}
	__sync_fetch_and_add(&s->bytes, bytes);
	__sync_fetch_and_add(&s->count, count);
	__sync_fetch_and_add(&s->allocs, allocs);
}

static __always_inline void map_alloc_event(void *ctx, u64 site, u64 ptr, u64 bytes)
{
	struct kmt_rec r = {}, *old;
	long err;

	if (ptr <= 16)
		return;
	atomic_add(&kmt.maps.seen, 1);
	if (!bpf_map_lookup_elem(&kmt_map_sites, &site)) {
		struct kmt_site fresh = { .site = site };

		err = bpf_map_update_elem(&kmt_map_sites, &site, &fresh, BPF_NOEXIST);
		if (err == -E2BIG) {
			atomic_add(&kmt.maps.drop_site, 1);
			atomic_add(&kmt.maps.dropped, 1);
			return;
		}
	}
	old = bpf_map_lookup_elem(&kmt_map_live, &ptr);
	if (old) {
		map_site_add(old->site, -(s64)old->bytes, -1, 0);
		bpf_map_delete_elem(&kmt_map_live, &ptr);
		atomic_add(&kmt.maps.reused, 1);
		atomic_add(&kmt.maps.freed, 1);
	}
	r.addr = ptr;
	r.bytes = bytes;
	r.site = site;
	r.ts = bpf_ktime_get_ns();
	r.stack_id = bpf_get_stackid(ctx, &kmt_stacks, 0);
	r.cpu = bpf_get_smp_processor_id();
	if (bpf_map_update_elem(&kmt_map_live, &ptr, &r, BPF_NOEXIST)) {
		atomic_add(&kmt.maps.drop_full, 1);
		atomic_add(&kmt.maps.dropped, 1);
		return;
	}
	map_site_add(site, bytes, 1, 1);
}

static __always_inline void map_free_event(u64 ptr)
{
	struct kmt_rec *r;
	u64 site, bytes;

	if (ptr <= 16)
		return;
	r = bpf_map_lookup_elem(&kmt_map_live, &ptr);
	if (!r) {
		atomic_add(&kmt.maps.unknown_frees, 1);
		return;
	}
	site = r->site;
	bytes = r->bytes;
	/* Two frees of one address race here only if the kernel freed it twice. */
	if (bpf_map_delete_elem(&kmt_map_live, &ptr)) {
		atomic_add(&kmt.maps.unknown_frees, 1);
		return;
	}
	map_site_add(site, -(s64)bytes, -1, 0);
	atomic_add(&kmt.maps.freed, 1);
}

KMT_TRACER(kmt_map_, map_alloc_event, map_free_event)
