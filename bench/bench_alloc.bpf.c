// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Allocator benchmark programs, driven by bench/bench.c. Four ways to get memory in a
 * BPF program, side by side:
 *   ALLOC_HEAP    arena_malloc / arena_free (the fast per-CPU allocator)
 *   ALLOC_BUDDY   buddy_alloc / buddy_free on one shared buddy allocator
 *   ALLOC_OBJ     bpf_obj_new / bpf_obj_drop (the kernel's BPF object allocator); a
 *                 batch holds its objects as kptrs in a map, as a program must
 *   ALLOC_HASH    a BPF hash map (preallocated) insert / delete of a value of the size
 * Workloads: malloc+free pairs, and batches of BATCH allocations then their frees. Plus
 * the mixed workload whose memory overhead bench.c reports.
 */
#include <libarena/common.h>
#include <libarena/buddy.h>
#include <libarena/rbtree.h>
#include <bpf/bpf_core_read.h>

char _license[] SEC("license") = "Dual BSD/GPL";

enum { ALLOC_HEAP, ALLOC_BUDDY, ALLOC_OBJ, ALLOC_HASH };

struct bench_args {
	u32 alloc;		/* in: ALLOC_* */
	u32 batch;		/* in: 0 pairs, 1 batches */
	u32 size;		/* in: 16, 64, 256, 1024 or 4096 */
	u32 ops;		/* in: allocations to do (a multiple of BATCH) */
	u32 thread;		/* in: 0 .. MAX_THREADS - 1 */
	u32 done;		/* out: allocations done */
	u32 failed;		/* out: allocations that failed */
	u32 pad;
	u64 live_bytes;		/* mixed: bytes asked for and still allocated */
	u64 block_bytes;	/* mixed: bytes of the objects that hold them */
	u64 pages_held;		/* mixed: pages the allocator has mapped */
	u64 pages_reserve;	/* mixed: of those, spare (reserves, empty chunks) */
};

#define BATCH		256
#define MAX_THREADS	8

struct buddy __arena_global bench_b;
u64 __arena_global batch[MAX_THREADS][BATCH];

/* bpf_obj_new needs a type per size. */
struct o16 { u8 d[16]; };
struct o64 { u8 d[64]; };
struct o256 { u8 d[256]; };
struct o1024 { u8 d[1024]; };
struct o4096 { u8 d[4096]; };

void *bpf_obj_new_impl(__u64 local_type_id__k, void *meta__ign) __ksym;
void bpf_obj_drop_impl(void *kptr, void *meta__ign) __ksym;
#define obj_new(type) ((type *)bpf_obj_new_impl(bpf_core_type_id_local(type), NULL))
#define obj_drop(p) bpf_obj_drop_impl(p, NULL)

struct kslot {
	struct o16 __kptr *p16;
	struct o64 __kptr *p64;
	struct o256 __kptr *p256;
	struct o1024 __kptr *p1024;
	struct o4096 __kptr *p4096;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_THREADS * BATCH);
	__type(key, u32);
	__type(value, struct kslot);
} kslots SEC(".maps");

#define HASH_MAP(name, bytes)						\
	struct v##bytes { u8 d[bytes]; };				\
	struct {							\
		__uint(type, BPF_MAP_TYPE_HASH);			\
		__uint(max_entries, MAX_THREADS * BATCH);		\
		__type(key, u32);					\
		__type(value, struct v##bytes);				\
	} name SEC(".maps")

HASH_MAP(h16, 16);
HASH_MAP(h64, 64);
HASH_MAP(h256, 256);
HASH_MAP(h1024, 1024);
HASH_MAP(h4096, 4096);

static __always_inline void *hash_of(u32 size)
{
	switch (size) {
	case 16: return &h16;
	case 64: return &h64;
	case 256: return &h256;
	case 1024: return &h1024;
	default: return &h4096;
	}
}

/* A zeroed value to insert: the largest, in a per-CPU array. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct v4096);
} zero_value SEC(".maps");

SEC("syscall")
int bench_reset(struct bench_args *a)
{
	if (bench_b.magic == BUDDY_MAGIC)
		buddy_destroy(&bench_b);
	return buddy_init(&bench_b);
}

/* One bpf_obj_new of the size into slot k, or a drop of what is there. */
#define OBJ_CASE(bytes)								\
	case bytes: {								\
		struct o##bytes *p = NULL, *old;				\
		if (put) {							\
			p = obj_new(struct o##bytes);				\
			if (!p)							\
				return -ENOMEM;					\
		}								\
		old = bpf_kptr_xchg(&s->p##bytes, p);				\
		if (old)							\
			obj_drop(old);						\
		return 0;							\
	}

static __noinline int obj_slot(u32 size, u32 k, bool put)
{
	struct kslot *s = bpf_map_lookup_elem(&kslots, &k);

	if (!s)
		return -ENOENT;
	switch (size) {
	OBJ_CASE(16)
	OBJ_CASE(64)
	OBJ_CASE(256)
	OBJ_CASE(1024)
	OBJ_CASE(4096)
	}
	return -EINVAL;
}

/* A pair: one allocation and its free. */
#define OBJ_PAIR(bytes)								\
	case bytes: {								\
		struct o##bytes *p = obj_new(struct o##bytes);			\
		if (!p)								\
			return -ENOMEM;						\
		obj_drop(p);							\
		return 0;							\
	}

static __noinline int obj_pair(u32 size)
{
	switch (size) {
	OBJ_PAIR(16)
	OBJ_PAIR(64)
	OBJ_PAIR(256)
	OBJ_PAIR(1024)
	OBJ_PAIR(4096)
	}
	return -EINVAL;
}

/* Get (put) or give back (!put) the object of slot k of this thread. 0 or -errno. */
static __noinline int one(struct bench_args *a, u32 k, bool put)
{
	u32 key = (a->thread % MAX_THREADS) * BATCH + k % BATCH, zk = 0;
	u64 __arena *slot = &batch[a->thread % MAX_THREADS][k % BATCH];
	void *v;

	switch (a->alloc) {
	case ALLOC_HEAP:
		if (put) {
			*slot = (u64)arena_malloc(a->size);
			return *slot ? 0 : -ENOMEM;
		}
		return arena_free((void __arena *)*slot);
	case ALLOC_BUDDY:
		if (put) {
			*slot = (u64)buddy_alloc(&bench_b, a->size);
			return *slot ? 0 : -ENOMEM;
		}
		return buddy_free(&bench_b, (void __arena *)*slot);
	case ALLOC_OBJ:
		return obj_slot(a->size, key, put);
	default:
		if (!put)
			return bpf_map_delete_elem(hash_of(a->size), &key);
		v = bpf_map_lookup_elem(&zero_value, &zk);
		if (!v)
			return -ENOENT;
		return bpf_map_update_elem(hash_of(a->size), &key, v, BPF_NOEXIST);
	}
}

/*
 * Pairs: each allocator's own calls straight in the loop, as a program would make them
 * (one() and its switch would add the same cost to every allocator and hide ratios).
 */
static __noinline u32 pairs(struct bench_args *a, u32 *failed)
{
	u32 i, size = a->size, bad = zero;
	void __arena *p;

	switch (a->alloc) {
	case ALLOC_HEAP:
		for (i = zero; i < a->ops && can_loop; i++) {
			p = arena_malloc(size);
			if (!p) {
				bad++;
				continue;
			}
			arena_free(p);
		}
		break;
	case ALLOC_BUDDY:
		for (i = zero; i < a->ops && can_loop; i++) {
			p = buddy_alloc(&bench_b, size);
			if (!p) {
				bad++;
				continue;
			}
			buddy_free(&bench_b, p);
		}
		break;
	case ALLOC_OBJ:
		for (i = zero; i < a->ops && can_loop; i++)
			bad += obj_pair(size) != 0;
		break;
	default:
		for (i = zero; i < a->ops && can_loop; i++) {
			if (one(a, 0, true)) {
				bad++;
				continue;
			}
			one(a, 0, false);
		}
	}
	*failed = bad;
	return i;
}

/* Batches of the heap and the buddy allocator, their calls straight in the loops too. */
static __noinline u32 batches(struct bench_args *a, u32 *failed)
{
	u64 __arena *slots = batch[a->thread % MAX_THREADS];
	u32 i, k, size = a->size, bad = zero, done = zero;
	bool heap = a->alloc == ALLOC_HEAP;
	void __arena *p;

	for (i = zero; i < a->ops / BATCH && can_loop; i++) {
		for (k = zero; k < BATCH && can_loop; k++) {
			p = heap ? arena_malloc(size) : buddy_alloc(&bench_b, size);
			bad += !p;
			slots[k & (BATCH - 1)] = (u64)p;
		}
		for (k = zero; k < BATCH && can_loop; k++) {
			p = (void __arena *)slots[k & (BATCH - 1)];
			if (heap)
				arena_free(p);
			else
				buddy_free(&bench_b, p);
		}
		done += BATCH;
	}
	*failed = bad;
	return done;
}

SEC("syscall")
int bench_run(struct bench_args *a)
{
	u32 i, k, done = zero, failed = zero;

	if (!a->batch) {
		done = pairs(a, &failed);
		a->done = done;
		a->failed = failed;
		return 0;
	}
	if (a->alloc == ALLOC_HEAP || a->alloc == ALLOC_BUDDY) {
		done = batches(a, &failed);
		a->done = done;
		a->failed = failed;
		return 0;
	}
	for (i = zero; i < a->ops / BATCH && can_loop; i++) {
		for (k = zero; k < BATCH && can_loop; k++)
			failed += one(a, k, true) != 0;
		for (k = zero; k < BATCH && can_loop; k++)
			one(a, k, false);
		done += BATCH;
	}
	a->done = done;
	a->failed = failed;
	return 0;
}

/*
 * The platform's limit, for the ratios: what the cheapest per-CPU free list costs on
 * this kernel. REF_LOOP is an empty can_loop iteration, REF_LIST pops a 64-byte node off
 * an arena free list and pushes it back, REF_PREEMPT does the same with each half inside
 * bpf_preempt_disable/enable, as a per-CPU allocator that is safe against preemption
 * must (its malloc and its free are two calls).
 */
enum { REF_LOOP, REF_LIST, REF_PREEMPT, NR_REFS };

struct ref_node {
	struct ref_node __arena *next;
	u64 pad[7];
};

struct ref_node __arena_global ref_nodes[MAX_THREADS][BATCH];
struct ref_node __arena *__arena_global ref_head[MAX_THREADS];

static __always_inline __noasan struct ref_node __arena *ref_pop(u32 t)
{
	struct ref_node __arena *n = ref_head[t];

	if (n)
		ref_head[t] = n->next;
	return n;
}

static __always_inline __noasan void ref_push(u32 t, struct ref_node __arena *n)
{
	n->next = ref_head[t];
	ref_head[t] = n;
}

/* Uninstrumented in the sanitizer build: it measures the platform, not the sanitizer. */
SEC("syscall")
__noasan int bench_ref(struct bench_args *a)
{
	u32 t = a->thread % MAX_THREADS, i, k, failed = zero;
	struct ref_node __arena *n;

	ref_head[t] = NULL;
	for (k = zero; k < BATCH && can_loop; k++)
		ref_push(t, &ref_nodes[t][k]);
	switch (a->alloc) {
	case REF_LOOP:
		for (i = zero; i < a->ops && can_loop; i++)
			barrier_var(i);
		break;
	case REF_LIST:
		for (i = zero; i < a->ops && can_loop; i++) {
			n = ref_pop(t);
			if (!n) {
				failed++;
				continue;
			}
			ref_push(t, n);
		}
		break;
	default:
		for (i = zero; i < a->ops && can_loop; i++) {
			bpf_preempt_disable();
			n = ref_pop(t);
			bpf_preempt_enable();
			if (!n) {
				failed++;
				continue;
			}
			bpf_preempt_disable();
			ref_push(t, n);
			bpf_preempt_enable();
		}
	}
	a->done = i;
	a->failed = failed;
	return 0;
}

/* Mixed sizes, a third freed again in between: what stays is live_bytes. */
#define MIX 4096
u64 __arena_global mix_ptr[MIX];
u32 __arena_global mix_size[MIX];

static __always_inline u64 mix_size_of(u64 x)
{
	/* Mostly small objects, some medium, a few large: 16 B .. 64 KiB. */
	switch (x % 8) {
	case 0: case 1: case 2: return 16 + x % 48;
	case 3: case 4: return 64 + x % 192;
	case 5: return 256 + x % 768;
	case 6: return 1024 + x % 3072;
	default: return 4096 + x % 61440;
	}
}

static __noinline u64 mix_alloc(u32 alloc, u64 size)
{
	u64 p;

	if (alloc == ALLOC_BUDDY)
		return (u64)buddy_alloc(&bench_b, size);
	p = (u64)arena_malloc(size);
	if (!p && !arena_heap_maintain())	/* a sleepable program may refill */
		p = (u64)arena_malloc(size);
	return p;
}

SEC("syscall")
int bench_mixed(struct bench_args *a)
{
	struct arena_heap_global __arena *g = (void __arena *)arena_heap_global_addr();
	u64 x, size, live, blocks, held, spare = 0;
	u32 i, cls, alloc = a->alloc, n;

	/* Opaque starts: the verifier must not follow the generator's constant values. */
	x = zero + 0x9e3779b97f4a7c15ull;
	live = blocks = zero;
	for (i = zero; i < MIX && can_loop; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size = mix_size_of(x);
		mix_ptr[i & (MIX - 1)] = mix_alloc(alloc, size);
		mix_size[i & (MIX - 1)] = size;
		if (!mix_ptr[i & (MIX - 1)])
			return -ENOMEM;
		live += size;
		/* Free every third allocation right away: holes as in real use. */
		if (i % 3 == 2) {
			if (alloc == ALLOC_BUDDY)
				buddy_free(&bench_b, (void __arena *)mix_ptr[i & (MIX - 1)]);
			else
				arena_free((void __arena *)mix_ptr[i & (MIX - 1)]);
			mix_ptr[i & (MIX - 1)] = 0;
			live -= size;
		}
	}
	n = i;
	/*
	 * The background maintenance (5 ms) would do this by itself: trim the new medium
	 * spans' unused pages, so the figure is the steady state rather than a race with it.
	 */
	if (alloc != ALLOC_BUDDY && arena_heap_maintain())
		return -ENOMEM;
	if (alloc == ALLOC_BUDDY) {
		for (i = zero; i < BUDDY_ORDERS && can_loop; i++)
			blocks += bench_b.stats.blocks_in_use[i & 15] << (i + BUDDY_MIN_SHIFT);
		/* Blocks in the CPUs' caches count as in use there: not live, taken out. */
		for (i = zero; i < BUDDY_CACHE_CPUS * BUDDY_CACHE_ORDERS && can_loop; i++)
			blocks -= (u64)bench_b.cache[(i / BUDDY_CACHE_ORDERS) &
						     (BUDDY_CACHE_CPUS - 1)]
					  .nr[i % BUDDY_CACHE_ORDERS]
				  << (i % BUDDY_CACHE_ORDERS + BUDDY_MIN_SHIFT);
		held = bench_b.stats.chunks_held * (BUDDY_CHUNK_PAGES + BUDDY_META_PAGES);
		spare = bench_b.stats.chunks_spare * (BUDDY_CHUNK_PAGES + BUDDY_META_PAGES);
	} else {
		for (i = zero; i < MIX && can_loop; i++) {
			if (!mix_ptr[i & (MIX - 1)])
				continue;
			cls = arena_heap_class(mix_size[i & (MIX - 1)]);
			blocks += cls < HEAP_NR_CLASSES ? arena_heap_class_size(cls) :
							  mix_size[i & (MIX - 1)];
		}
		held = g->pages_mapped;
	}
	/* Stores through the context pointer itself: 6.12 refuses a moved one. */
	barrier_var(a);
	a->live_bytes = live;
	barrier_var(a);
	a->done = n;
	barrier_var(a);
	a->block_bytes = blocks;
	barrier_var(a);
	a->pages_held = held;
	barrier_var(a);
	a->pages_reserve = spare;
	return 0;
}

/* Free what bench_mixed left. */
SEC("syscall")
int bench_mixed_free(struct bench_args *a)
{
	u32 i;

	for (i = zero; i < MIX && can_loop; i++) {
		if (!mix_ptr[i & (MIX - 1)])
			continue;
		if (a->alloc == ALLOC_BUDDY)
			buddy_free(&bench_b, (void __arena *)mix_ptr[i & (MIX - 1)]);
		else
			arena_free((void __arena *)mix_ptr[i & (MIX - 1)]);
		mix_ptr[i & (MIX - 1)] = 0;
	}
	return 0;
}

/*
 * The allocator's slow side: maintenance passes timed one by one, after n allocations of
 * size bytes (0: idle), with the pages they mapped and unmapped (heap and buddy).
 */
#define MAINT_PASSES	16

struct maint_args {
	u32 passes;		/* in: passes to time */
	u32 n;			/* in: objects to allocate (and free) before them */
	u32 size;		/* in */
	u32 pad;
	u64 ns_min, ns_max, ns_total;	/* out */
	u64 map_pages, unmap_pages;	/* out: during the timed passes */
	u64 ns[MAINT_PASSES];		/* out: each pass */
};

#define MAINT_OBJS	4096
u64 __arena_global maint_ptr[MAINT_OBJS];
u64 __arena_global maint_ns[MAINT_PASSES];

static __always_inline u64 maps_now(struct arena_heap_global __arena *g, bool unmaps)
{
	struct buddy __arena *b = (struct buddy __arena *)arena_buddy_addr();

	if (unmaps)
		return g->unmap_pages + b->stats.pages_returned;
	return g->map_pages + b->stats.map_pages;
}

static __noinline int maint_fill(u32 n, u32 size)
{
	u64 p;
	u32 i;

	for (i = zero; i < n && i < MAINT_OBJS && can_loop; i++) {
		p = (u64)arena_malloc(size);
		if (!p && !arena_heap_maintain())	/* untimed: a refill on the way */
			p = (u64)arena_malloc(size);
		if (!p)
			return -ENOMEM;
		maint_ptr[i] = p;
	}
	return 0;
}

static __noinline void maint_free(u32 n)
{
	u32 i;

	for (i = zero; i < n && i < MAINT_OBJS && can_loop; i++) {
		arena_free((void __arena *)maint_ptr[i]);
		maint_ptr[i] = 0;
	}
}

SEC("syscall")
int bench_maintain(struct maint_args *a)
{
	struct arena_heap_global __arena *g = (void __arena *)arena_heap_global_addr();
	u64 t0, t1, dt, lo = ~0ull, hi = 0, total = 0, m0, u0;
	u32 i, n = a->n, size = a->size, passes = a->passes;
	int err;

	err = maint_fill(n, size);
	if (err)
		return err;
	m0 = maps_now(g, false);
	u0 = maps_now(g, true);
	for (i = zero; i < passes && i < MAINT_PASSES && can_loop; i++) {
		t0 = bpf_ktime_get_ns();
		err = arena_heap_maintain();
		t1 = bpf_ktime_get_ns();
		if (err)
			return err;
		dt = t1 - t0;
		maint_ns[i & (MAINT_PASSES - 1)] = dt;
		total += dt;
		if (dt < lo)
			lo = dt;
		if (dt > hi)
			hi = dt;
	}
	m0 = maps_now(g, false) - m0;
	u0 = maps_now(g, true) - u0;
	maint_free(n);
	barrier_var(a);
	a->ns_min = lo;
	barrier_var(a);
	a->ns_max = hi;
	barrier_var(a);
	a->ns_total = total;
	barrier_var(a);
	a->map_pages = m0;
	barrier_var(a);
	a->unmap_pages = u0;
	/* Constant offsets: 6.12 refuses a context pointer moved by a variable. */
#pragma unroll
	for (i = 0; i < MAINT_PASSES; i++) {
		barrier_var(a);
		a->ns[i] = maint_ns[i];
	}
	return 0;
}

/*
 * A 64K-key red-black tree built in one sleepable program, ns for the whole build:
 *   RB_RESERVE   one arena_heap_reserve() ahead, timed with the build
 *   RB_RITUAL    arena_heap_maintain() every 256 inserts (the old advice)
 *   RB_PREFILLED the reservation made before the clock starts
 */
enum { RB_RESERVE, RB_RITUAL, RB_PREFILLED };

struct rb_args {
	u32 mode;		/* in */
	u32 keys;		/* in: at most 1 << 20 */
	u64 ns;			/* out */
	u64 map_pages;		/* out: pages mapped during the timed part */
};

static __noinline int rb_build(struct rbtree __arena *t, u32 keys, bool ritual)
{
	u32 i;

	for (i = zero; i < keys && i < (1u << 20) && can_loop; i++) {
		if (ritual && !(i % 256) && arena_heap_maintain())
			return -ENOMEM;
		if (rb_insert(t, (u64)i * 2654435761u % 1000003 * (1u << 20) + i, i))
			return -ENOMEM;
	}
	return 0;
}

SEC("syscall")
int bench_rb_build(struct rb_args *a)
{
	struct arena_heap_global __arena *g = (void __arena *)arena_heap_global_addr();
	u32 mode = a->mode, keys = a->keys;
	struct rbtree __arena *t;
	u64 t0, m0;
	int err = 0;

	t = rb_create(RB_ALLOC, RB_DEFAULT);
	if (!t)
		return -ENOMEM;
	if (mode == RB_PREFILLED)
		err = arena_heap_reserve(sizeof(struct rbnode), keys);
	m0 = maps_now(g, false);
	t0 = bpf_ktime_get_ns();
	if (!err && mode == RB_RESERVE)
		err = arena_heap_reserve(sizeof(struct rbnode), keys);
	if (!err)
		err = rb_build(t, keys, mode == RB_RITUAL);
	t0 = bpf_ktime_get_ns() - t0;
	m0 = maps_now(g, false) - m0;
	if (!err && t->nr_nodes != keys)
		err = -EUCLEAN;
	rb_destroy(t);
	barrier_var(a);
	a->ns = t0;
	barrier_var(a);
	a->map_pages = m0;
	return err;
}

/*
 * Where the buddy allocator's time goes: pairs of 64 bytes, which the CPU's cache serves
 * without the lock, and of 8 KiB, above the cached sizes, which take the lock and the
 * lists (with the chunk otherwise empty, a free leaves the pair apart: no split and no
 * merge).
 */
struct split_args {
	u32 pairs;		/* in */
	u32 pad;
	u64 ns_cached, ns_locked;	/* out: per pair */
};

static __noinline int buddy_pairs(u32 n, u64 size)
{
	void __arena *p;
	u32 i;

	for (i = zero; i < n && can_loop; i++) {
		p = buddy_alloc(&bench_b, size);
		if (!p)
			return -ENOMEM;
		buddy_free(&bench_b, p);
	}
	return 0;
}

SEC("syscall")
int bench_buddy_split(struct split_args *a)
{
	u32 n = a->pairs ? a->pairs : 1;
	u64 t0, cached, locked;
	int err;

	t0 = bpf_ktime_get_ns();
	err = buddy_pairs(n, 64);
	cached = bpf_ktime_get_ns() - t0;
	if (err)
		return err;
	t0 = bpf_ktime_get_ns();
	err = buddy_pairs(n, 8192);
	locked = bpf_ktime_get_ns() - t0;
	barrier_var(a);
	a->ns_cached = cached / n;
	barrier_var(a);
	a->ns_locked = locked / n;
	return err;
}
