// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * heap.bpf.c, part 7 of 7: the background refill (a bpf_timer and a bpf_wq) and the
 * SEC("syscall") programs.
 */
#include "internal.h"

#ifdef __BPF__
/* Maintenance in the background: a timer polls for requests, a workqueue serves them. */
struct heap_timer {
	struct bpf_timer timer;
};

struct heap_wq {
	struct bpf_wq wq;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, int);
	__type(value, struct heap_timer);
} arena_heap_timer SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, int);
	__type(value, struct heap_wq);
} arena_heap_wq SEC(".maps");

int bpf_wq_init(struct bpf_wq *wq, void *p__map, unsigned int flags) __ksym __weak;
int bpf_wq_start(struct bpf_wq *wq, unsigned int flags) __ksym __weak;
int bpf_wq_set_callback_impl(struct bpf_wq *wq,
			     int (callback_fn)(void *map, int *key, void *value),
			     unsigned int flags, void *aux__ign) __ksym __weak;
#endif

#ifdef __BPF__
static int heap_wq_cb(void *map, int *key, void *value)
{
	atomic_add(&arena_heap_global.wq_runs, 1);
	arena_heap_maintain();
	return 0;
}

static int heap_timer_cb(void *map, int *key, struct heap_timer *t)
{
	u32 due = READ_ONCE(arena_heap_global.purge_due);
	struct heap_wq *w;
	int k = 0;

	if (READ_ONCE(arena_heap_global.want) || (due && (s32)(now_ms() - due) >= 0)) {
		w = bpf_map_lookup_elem(&arena_heap_wq, &k);
		if (w)
			bpf_wq_start(&w->wq, 0);
	}
	bpf_timer_start(&t->timer, HEAP_POLL_NS, 0);
	return 0;
}

/* Arm the background refill: idempotent. */
static __always_inline int heap_arm(void)
{
	struct heap_timer *t;
	struct heap_wq *w;
	int k = 0, err;

	w = bpf_map_lookup_elem(&arena_heap_wq, &k);
	t = bpf_map_lookup_elem(&arena_heap_timer, &k);
	if (!w || !t)
		return -ENOENT;
	/*
	 * The timer first: when the kernel refused the object's BTF (an object linked by
	 * an unpatched 6.12 bpftool in the wrong order), its maps have no BTF, and the
	 * verifier then refuses bpf_timer_init() with a message, where 6.12's check of the
	 * bpf_wq kfuncs dereferences the map's missing record and crashes the kernel.
	 */
	err = bpf_timer_init(&t->timer, &arena_heap_timer, CLOCK_MONOTONIC);
	if (err && err != -EBUSY)
		return err;
	err = bpf_wq_init(&w->wq, &arena_heap_wq, 0);
	if (err && err != -EBUSY)
		return err;
	err = bpf_wq_set_callback_impl(&w->wq, heap_wq_cb, 0, NULL);
	if (err)
		return err;
	err = bpf_timer_set_callback(&t->timer, heap_timer_cb);
	if (err)
		return err;
	return bpf_timer_start(&t->timer, HEAP_POLL_NS, 0);
}

/*
 * Create the heaps, fill the reserves, arm the background refill. User space runs it once
 * before programs allocate (libarena_heap_refill()), and whenever it likes after that.
 */
SEC("syscall")
__weak int arena_heap_refill(struct arena_heap_refill_args *args)
{
	struct arena_heap_global __arena *g = &arena_heap_global;
	u32 n = args->nr_cpus;
	int err;

	if (arena_misplaced(__func__, (u64)g))
		return -EINVAL;
	err = global_setup();
	if (err)
		return err;
	if (n > HEAP_MAX_CPUS) {
		arena_stderr("%s: %u CPUs, at most %u", __func__, n, HEAP_MAX_CPUS);
		return -E2BIG;
	}
	if (n > g->nr_cpus)
		g->nr_cpus = n;
	if (args->reserve_small)
		g->reserve[0] = args->reserve_small;
	if (args->reserve_medium)
		g->reserve[1] = args->reserve_medium;
	if (args->high_water)
		g->high_water = args->high_water;
	if (args->reserve_large)
		g->reserve_large = args->reserve_large;
	if (args->purge_delay_ms)
		g->purge_delay = args->purge_delay_ms;
	if (args->reserve_rest)
		g->reserve_rest = args->reserve_rest;
	/* A refill asks for the targets: no heap counts as quiet from here. */
	g->woken = now_ms() | 1;
	if (asan_hook_map_low(args->globals_pages))
		arena_stderr("%s: %u pages of globals: more than the sanitizer can shadow",
			     __func__, args->globals_pages);
	err = arena_heap_maintain();
	args->spans_mapped = g->spans_mapped;
	args->pages_mapped = g->pages_mapped;
	if (err)
		return err;
	err = heap_arm();
	if (err)
		arena_stderr("%s: no background refill: %d", __func__, err);
	return err;
}

/* The program's body for user space: see arena_heap_collect_cpu(). */
SEC("syscall")
__weak int arena_heap_collect(void *ctx)
{
	return arena_heap_collect_cpu();
}
#endif
