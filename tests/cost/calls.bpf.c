// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * What each public call costs a program: one SEC("syscall") program per call, each
 * making only that call with arguments the verifier cannot know (they come from the
 * context), so that what it verifies is the call and nothing of ours. build/verifier-cost
 * loads the object in the VM and prints each program's verified instructions and peak
 * states; scripts/verifier-budget adds the frames and stack below the caller and holds
 * the figures against the committed table (docs/verifier-budget.md).
 *
 * A program is named cost__<call> (with a suffix where a call has variants), so the
 * table reads by call. These programs never run: they only load.
 */
#include <libarena/common.h>
#include <libarena/buddy.h>
#include <libarena/bitmap.h>
#include <libarena/rbtree.h>
#include <libarena/btree.h>
#include <libarena/spmc.h>
#include <libarena/spinlock.h>
#include <libarena/mpmcq.h>
#include <libarena/mpsc.h>
#include <libarena/minheap.h>
#include <libarena/hashmap.h>
#include <libarena/list.h>

char _license[] SEC("license") = "GPL";

/* The arguments, unknown to the verifier. */
struct cost_args {
	u64 a, b, c, d;
};

#define PTR(x)		((void __arena *)(u64)(x))

/* One program: its body is the call, r the return value it passes on. */
#define COST(name, ...)						\
SEC("syscall") int cost__##name(struct cost_args *args)		\
{									\
	u64 a = args->a, b = args->b, c = args->c, d = args->d;	\
	long r = 0;							\
									\
	(void)a; (void)b; (void)c; (void)d;				\
	__VA_ARGS__;							\
	return r;							\
}

/* ---- the allocator ---- */
COST(arena_malloc, r = (long)arena_malloc(a))
COST(arena_free, r = arena_free(PTR(a)))
COST(arena_malloc_free, { void __arena *p = arena_malloc(a); r = arena_free(p); })
COST(arena_calloc, r = (long)arena_calloc(a, b))
COST(arena_memset, r = arena_memset(PTR(a), b, c))
COST(arena_malloc_sleepable, r = (long)arena_malloc_sleepable(a))
COST(arena_quarantine_flush, r = arena_quarantine_flush())
COST(arena_heap_maintain, r = arena_heap_maintain())
COST(arena_heap_reserve, r = arena_heap_reserve(a, b))
COST(arena_heap_collect_cpu, r = arena_heap_collect_cpu())
COST(arena_heap_outstanding, r = arena_heap_outstanding())
COST(arena_heap_class, r = arena_heap_class(a))
COST(arena_heap_class_size, r = arena_heap_class_size(a))

/* ---- the buddy allocator ---- */
COST(buddy_init, r = buddy_init(PTR(a)))
COST(buddy_destroy, r = buddy_destroy(PTR(a)))
COST(buddy_alloc, r = (long)buddy_alloc(PTR(a), b))
COST(buddy_free, r = buddy_free(PTR(a), PTR(b)))
COST(buddy_alloc_nosleep, r = (long)buddy_alloc_nosleep(PTR(a), b))
COST(buddy_free_nosleep, r = buddy_free_nosleep(PTR(a), PTR(b)))
COST(buddy_trim, r = buddy_trim(PTR(a)))
COST(buddy_trim_keep, r = buddy_trim_keep(PTR(a), b))
COST(buddy_shrink, r = buddy_shrink(PTR(a)))
COST(buddy_reserve, r = buddy_reserve(PTR(a), b))
COST(buddy_flush_caches, r = buddy_flush_caches(PTR(a)))
COST(arena_buddy_setup, r = arena_buddy_setup())
COST(arena_buddy_is_ready, r = arena_buddy_is_ready())

/* ---- the log ---- */
COST(arena_stdout, r = arena_stdout("cost %llu %llu", a, b))

/* ---- the bitmap ---- */
COST(bmp_alloc, r = (long)bmp_alloc(a))
COST(bmp_free, r = bmp_free(PTR(a)))
COST(bmp_set_bit, r = bmp_set_bit(a, PTR(b)))
COST(bmp_clear_bit, r = bmp_clear_bit(a, PTR(b)))
COST(bmp_test_and_set_bit, r = bmp_test_and_set_bit(a, PTR(b)))
COST(bmp_test_and_clear_bit, r = bmp_test_and_clear_bit(a, PTR(b)))
COST(__bmp_set_bit, r = __bmp_set_bit(a, PTR(b)))
COST(__bmp_clear_bit, r = __bmp_clear_bit(a, PTR(b)))
COST(bmp_test_bit, r = bmp_test_bit(a, PTR(b)))
COST(bmp_clear, r = bmp_clear(a, PTR(b)))
COST(bmp_and, r = bmp_and(a, PTR(b), PTR(c), PTR(d)))
COST(bmp_or, r = bmp_or(a, PTR(b), PTR(c), PTR(d)))
COST(bmp_copy, r = bmp_copy(a, PTR(b), PTR(c)))
COST(bmp_empty, r = bmp_empty(a, PTR(b)))
COST(bmp_intersects, r = bmp_intersects(a, PTR(b), PTR(c)))
COST(bmp_subset, r = bmp_subset(a, PTR(b), PTR(c)))
COST(bmp_print, r = bmp_print(a, PTR(b)))

/* ---- the red-black tree ---- */
COST(rb_create, r = (long)rb_create(a, b))
COST(rb_destroy, r = rb_destroy(PTR(a)))
COST(rb_insert, r = rb_insert(PTR(a), b, c))
COST(rb_remove, r = rb_remove(PTR(a), b))
COST(rb_pop, { u64 k, v; r = rb_pop(PTR(a), &k, &v); })
COST(rb_insert_node, r = rb_insert_node(PTR(a), PTR(b)))
COST(rb_remove_node, r = rb_remove_node(PTR(a), PTR(b)))
COST(rb_node_alloc, r = (long)rb_node_alloc(a, b))
COST(rb_node_free, r = rb_node_free(PTR(a)))
COST(rb_find, { u64 v; r = rb_find(PTR(a), b, &v); })
COST(rb_least, { u64 k, v; r = rb_least(PTR(a), &k, &v); })
COST(rb_print, r = rb_print(PTR(a)))
COST(rb_integrity_check, r = rb_integrity_check(PTR(a)))
COST(rb_first, r = (long)rb_first(PTR(a)))
COST(rb_last, r = (long)rb_last(PTR(a)))
COST(rb_next, r = (long)rb_next(PTR(a)))
COST(rb_prev, r = (long)rb_prev(PTR(a)))
COST(rb_find_node, r = (long)rb_find_node(PTR(a), b))
COST(rb_lower_bound, r = (long)rb_lower_bound(PTR(a), b))
COST(rb_upper_bound, r = (long)rb_upper_bound(PTR(a), b))
COST(rb_range, r = rb_range(PTR(a), b, c, PTR(d), 64))

/* ---- the B-tree ---- */
COST(bt_create, r = (long)bt_create())
COST(bt_destroy, r = bt_destroy(PTR(a)))
COST(bt_insert, r = bt_insert(PTR(a), b, c, d))
COST(bt_remove, r = bt_remove(PTR(a), b))
COST(bt_find, { u64 v; r = bt_find(PTR(a), b, &v); })
COST(bt_print, r = bt_print(PTR(a)))
COST(bt_count, r = bt_count(PTR(a)))
COST(bt_pop_first, { u64 k, v; r = bt_pop_first(PTR(a), &k, &v); })
COST(bt_pop_last, { u64 k, v; r = bt_pop_last(PTR(a), &k, &v); })
COST(bt_range, r = bt_range(PTR(a), b, c, PTR(d), 64))
COST(bt_integrity_check, r = bt_integrity_check(PTR(a)))
COST(bt_first, { struct bt_cursor cur; r = bt_first(PTR(a), &cur); })
COST(bt_last, { struct bt_cursor cur; r = bt_last(PTR(a), &cur); })
COST(bt_lower_bound, { struct bt_cursor cur; r = bt_lower_bound(PTR(a), b, &cur); })
COST(bt_upper_bound, { struct bt_cursor cur; r = bt_upper_bound(PTR(a), b, &cur); })
COST(bt_next, { struct bt_cursor cur; r = bt_first(PTR(a), &cur) ?: bt_next(&cur); })
COST(bt_prev, { struct bt_cursor cur; r = bt_last(PTR(a), &cur) ?: bt_prev(&cur); })

/* ---- the work-stealing deque ---- */
COST(spmc_create, r = (long)spmc_create())
COST(spmc_destroy, r = spmc_destroy(PTR(a)))
COST(spmc_owned_add, r = spmc_owned_add(PTR(a), b))
COST(spmc_owned_remove, { u64 v; r = spmc_owned_remove(PTR(a), &v); })
COST(spmc_steal, { u64 v; r = spmc_steal(PTR(a), &v); })
COST(spmc_count, r = spmc_count(PTR(a)))

/*
 * ---- the spin lock (inline) ----
 * A critical section is not instrumented in the sanitizer build: its checks are global
 * calls, which 6.12 refuses with preemption disabled (spinlock.h).
 */
SEC("syscall") __noasan int cost__arena_spin_lock(struct cost_args *args)
{
	int r = arena_spin_lock(PTR(args->a));

	if (!r)
		arena_spin_unlock(PTR(args->a));
	return r;
}

SEC("syscall") __noasan int cost__arena_spin_trylock(struct cost_args *args)
{
	int r = arena_spin_trylock(PTR(args->a));

	if (!r)
		arena_spin_unlock(PTR(args->a));
	return r;
}

/* ---- the MPMC queue ---- */
COST(mpmcq_create, r = (long)mpmcq_create(a))
COST(mpmcq_destroy, r = mpmcq_destroy(PTR(a)))
COST(mpmcq_push, r = mpmcq_push(PTR(a), b))
COST(mpmcq_pop, { u64 v; r = mpmcq_pop(PTR(a), &v); })
COST(mpmcq_count, r = mpmcq_count(PTR(a)))
COST(mpmcq_capacity, r = mpmcq_capacity(PTR(a)))

/* ---- the MPSC queue ---- */
COST(mpsc_init, r = mpsc_init(PTR(a)))
COST(mpsc_push, r = mpsc_push(PTR(a), PTR(b)))
COST(mpsc_pop, { struct mpsc_node __arena *n; r = mpsc_pop(PTR(a), &n); })
COST(mpsc_empty, r = mpsc_empty(PTR(a)))

/* ---- the min-heap ---- */
COST(minheap_create, r = (long)minheap_create(a))
COST(minheap_destroy, r = minheap_destroy(PTR(a)))
COST(minheap_insert, r = minheap_insert(PTR(a), b, c))
COST(minheap_peek, { u64 k, v; r = minheap_peek(PTR(a), &k, &v); })
COST(minheap_pop, { u64 k, v; r = minheap_pop(PTR(a), &k, &v); })
COST(minheap_remove, { u64 k, v; r = minheap_remove(PTR(a), b, &k, &v); })
COST(minheap_update, r = minheap_update(PTR(a), b, c))
COST(minheap_count, r = minheap_count(PTR(a)))

/* ---- the hash map ---- */
COST(hmap_create, r = (long)hmap_create(a))
COST(hmap_destroy, r = hmap_destroy(PTR(a)))
COST(hmap_insert, r = hmap_insert(PTR(a), b, c))
COST(hmap_update, r = hmap_update(PTR(a), b, c))
COST(hmap_upsert, r = hmap_upsert(PTR(a), b, c))
COST(hmap_delete, { u64 v; r = hmap_delete(PTR(a), b, &v); })
COST(hmap_lookup, { u64 v; r = hmap_lookup(PTR(a), b, &v); })
COST(hmap_iter, {
	struct hmap_cursor cur = HMAP_CURSOR_INIT;
	u64 k, v;

	r = hmap_iter(PTR(a), &cur, &k, &v);
})
COST(hmap_count, r = hmap_count(PTR(a)))
COST(hmap_buckets, r = hmap_buckets(PTR(a)))
COST(hmap_reserve, r = hmap_reserve(PTR(a), b))
COST(hmap_grow, r = hmap_grow(PTR(a)))

/* ---- the lists (inline) ---- */
COST(arena_list_add, r = arena_list_add(PTR(a), PTR(b)))
COST(arena_list_del, r = arena_list_del(PTR(a)))
COST(arena_list_move_tail, r = arena_list_move_tail(PTR(a), PTR(b)))
COST(arena_list_count, r = arena_list_count(PTR(a)))

/*
 * A program that uses the allocator and six structures together, as a tracer would:
 * allocate an event, count it in a hash map, index it in a B-tree, walk a range, queue
 * it in a min-heap, an MPMC queue and a deque, mark a bitmap, free it.
 */
struct cost_event {
	u64 key, time;
};

SEC("syscall") int cost__seven_structures(struct cost_args *args)
{
	struct cost_event __arena *ev = arena_malloc(sizeof(*ev));
	struct bt_pair __arena *out = PTR(args->d);
	u64 v;
	int n;

	if (!ev)
		return -ENOMEM;
	ev->key = args->b;
	ev->time = args->c;
	if (hmap_lookup(PTR(args->a), ev->key, &v))
		v = 0;
	hmap_upsert(PTR(args->a), ev->key, v + 1);
	bt_insert(PTR(args->b), ev->time, ev->key, true);
	n = bt_range(PTR(args->b), ev->time - 1000, ev->time, out, 16);
	minheap_insert(PTR(args->c), ev->time, ev->key);
	mpmcq_push(PTR(args->c + 4096), (u64)ev);
	spmc_owned_add(PTR(args->c + 8192), (u64)ev);
	bmp_set_bit(ev->key, PTR(args->d + 4096));
	arena_free(ev);
	return n;
}

/* The same as a tc program: a tracer's or a network program's own context. */
SEC("tc") int cost__seven_structures_tc(struct __sk_buff *skb)
{
	struct cost_event __arena *ev = arena_malloc(skb->len);
	u64 v, key = skb->hash, time = skb->tstamp;
	int n;

	if (!ev)
		return 0;
	ev->key = key;
	ev->time = time;
	if (hmap_lookup(PTR(skb->mark), key, &v))
		v = 0;
	hmap_upsert(PTR(skb->mark), key, v + 1);
	bt_insert(PTR(skb->priority), time, key, true);
	n = bt_range(PTR(skb->priority), time - 1000, time, PTR(skb->cb[0]), 16);
	minheap_insert(PTR(skb->cb[1]), time, key);
	mpmcq_push(PTR(skb->cb[2]), (u64)ev);
	spmc_owned_add(PTR(skb->cb[3]), (u64)ev);
	bmp_set_bit(key, PTR(skb->cb[4]));
	arena_free(ev);
	return n;
}
