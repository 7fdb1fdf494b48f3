// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The call depth that base.h and heap.h state (ARENA_CALL_FRAMES, ARENA_ALLOC_FRAMES and
 * their stack), shown to the verifier: each program makes calls from the deepest frame
 * those figures leave, with the stack of its chain filled to what they leave but for a
 * margin for the compiler's own spills. If the library grows deeper or bigger than it
 * says, this object no longer loads. scripts/frame-budget checks the same figures
 * against the objects.
 */
#include <libarena/common.h>
#include <libarena/buddy.h>
#include <libarena/btree.h>
#include <libarena/hashmap.h>
#include <libarena/rbtree.h>
#include <libarena/spmc.h>
#include <libarena/minheap.h>
#include <libarena/mpmcq.h>
#include <libarena/bitmap.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

struct buddy __arena_global frames_buddy;

#define CAT_(a, b)	a##b
#define CAT(a, b)	CAT_(a, b)

/* Levels of the chain (the caller of the allocator included) that leave f frames. */
#define LEVELS_OF_2	5
#define LEVELS_OF_3	4
#define LEVELS_OF_4	3
#define LEVELS_OF_5	2
#define LEVELS_OF_6	1
#define LEVELS_OF(f)	CAT(LEVELS_OF_, f)

/* Stack for each function of the chain and the program: what the budget leaves. */
#define SPILL_MARGIN	96
#define PAD_OF(levels, stack) \
	(((512 - (stack) - SPILL_MARGIN) / ((levels) + 1)) & ~15)

/*
 * pad bytes of stack in this frame: an array whose address escapes into an empty asm,
 * so the compiler keeps all of it, and whose lowest word is written, so the verifier
 * counts all of it (it counts the stack a program touches).
 */
#define STACK_PAD(pad)							\
	u64 __pad[(pad) / 8];						\
	__pad[0] = 0;							\
	asm volatile("" : : "r"(__pad) : "memory")

/*
 * Level n of a chain: pad bytes of its own, then level n - 1. Each chain has levels
 * 2 .. 6 above p##1, the caller of the allocator; a program enters at the level that
 * leaves the frames the budget states, so the levels above it go unused.
 */
#define LEVEL(p, n, below, pad)						\
static __noinline __maybe_unused int p##n(void)				\
{									\
	STACK_PAD(pad);							\
	return below();							\
}

/* arena_malloc and arena_free, small and large (through the buddy allocator). */
#define ALLOC_LEVELS	LEVELS_OF(ARENA_ALLOC_FRAMES)
#define ALLOC_PAD	PAD_OF(ALLOC_LEVELS, ARENA_ALLOC_STACK)

static __noinline int alloc1(void)
{
	void __arena *small, *large;
	int err = 0;

	STACK_PAD(ALLOC_PAD);
	small = arena_malloc(64);
	large = arena_malloc(100000);
	if (!small || !large)
		err = -ENOMEM;
	if (arena_free(small) || arena_free(large))
		err = err ?: -EINVAL;
	return err;
}
LEVEL(alloc, 2, alloc1, ALLOC_PAD)
LEVEL(alloc, 3, alloc2, ALLOC_PAD)
LEVEL(alloc, 4, alloc3, ALLOC_PAD)
LEVEL(alloc, 5, alloc4, ALLOC_PAD)
LEVEL(alloc, 6, alloc5, ALLOC_PAD)

SEC("syscall")
int test_frames_arena_malloc(struct arena_test_ctx *ctx)
{
	STACK_PAD(ALLOC_PAD);

	ARENA_ASSERT_EQ(CAT(alloc, ALLOC_LEVELS)(), 0);
	return 0;
}

/* arena_calloc and every other call: ARENA_CALL_FRAMES. */
#define CALLOC_LEVELS	LEVELS_OF(ARENA_CALL_FRAMES)
#define CALLOC_PAD	PAD_OF(CALLOC_LEVELS, ARENA_CALL_STACK)

static __noinline int calloc1(void)
{
	u64 __arena *p;
	int err;

	STACK_PAD(CALLOC_PAD);
	p = arena_calloc(16, 8);
	err = p && !p[0] && !p[15] ? 0 : -ENOMEM;
	if (arena_free(p))
		err = err ?: -EINVAL;
	return err;
}
LEVEL(calloc, 2, calloc1, CALLOC_PAD)
LEVEL(calloc, 3, calloc2, CALLOC_PAD)
LEVEL(calloc, 4, calloc3, CALLOC_PAD)
LEVEL(calloc, 5, calloc4, CALLOC_PAD)
LEVEL(calloc, 6, calloc5, CALLOC_PAD)

SEC("syscall")
int test_frames_arena_calloc(struct arena_test_ctx *ctx)
{
	STACK_PAD(CALLOC_PAD);

	ARENA_ASSERT_EQ(CAT(calloc, CALLOC_LEVELS)(), 0);
	return 0;
}

/* The buddy allocator's calls, sleepable and not, on a private allocator. */
#define BUDDY_LEVELS	LEVELS_OF(ARENA_CALL_FRAMES)
#define BUDDY_PAD	PAD_OF(BUDDY_LEVELS, ARENA_CALL_STACK)

static __noinline int buddy1(void)
{
	void __arena *p, *q;
	int err = 0;

	STACK_PAD(BUDDY_PAD);
	p = buddy_alloc(&frames_buddy, 64);
	q = buddy_alloc_nosleep(&frames_buddy, 4096);
	if (!p || !q)
		err = -ENOMEM;
	if (buddy_free(&frames_buddy, p) || buddy_free_nosleep(&frames_buddy, q))
		err = err ?: -EINVAL;
	return err;
}
LEVEL(buddy, 2, buddy1, BUDDY_PAD)
LEVEL(buddy, 3, buddy2, BUDDY_PAD)
LEVEL(buddy, 4, buddy3, BUDDY_PAD)
LEVEL(buddy, 5, buddy4, BUDDY_PAD)
LEVEL(buddy, 6, buddy5, BUDDY_PAD)

SEC("syscall")
int test_frames_buddy(struct arena_test_ctx *ctx)
{
	STACK_PAD(BUDDY_PAD);

	if (frames_buddy.magic != BUDDY_MAGIC)
		ARENA_ASSERT_EQ(buddy_init(&frames_buddy), 0);
	ARENA_ASSERT_EQ(CAT(buddy, BUDDY_LEVELS)(), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&frames_buddy), 0);
	return 0;
}

/* The B-tree: splits down to the allocator, merges and frees on the way back. */
#define BT_LEVELS	LEVELS_OF(ARENA_CALL_FRAMES)
#define BT_PAD		PAD_OF(BT_LEVELS, ARENA_CALL_STACK)

static __noinline int bt1(void)
{
	struct btree __arena *bt;
	u64 k, v = 0;
	int err = 0;

	STACK_PAD(BT_PAD);
	bt = bt_create();
	if (!bt)
		return -ENOMEM;
	for (k = zero; k < 200 && !err && can_loop; k++)
		err = bt_insert(bt, k * 7 % 211, k, false);
	if (!err && (bt_find(bt, 7, &v) || v != 1))
		err = -ENOENT;
	for (k = zero; k < 100 && !err && can_loop; k++)
		err = bt_remove(bt, k * 7 % 211);
	if (!err)
		err = bt_pop_first(bt, &k, &v) ?: bt_pop_last(bt, &k, &v);
	return bt_destroy(bt) ?: err;
}
LEVEL(bt, 2, bt1, BT_PAD)
LEVEL(bt, 3, bt2, BT_PAD)
LEVEL(bt, 4, bt3, BT_PAD)
LEVEL(bt, 5, bt4, BT_PAD)
LEVEL(bt, 6, bt5, BT_PAD)

SEC("syscall")
int test_frames_btree(struct arena_test_ctx *ctx)
{
	STACK_PAD(BT_PAD);

	ARENA_ASSERT_EQ(CAT(bt, BT_LEVELS)(), 0);
	return 0;
}

/*
 * The other structures' calls, at ARENA_CALL_FRAMES, and the sleepable allocations; the
 * callers hold more locals than the margin allows for, hence 16 bytes a level less.
 */
#define ST_LEVELS	LEVELS_OF(ARENA_CALL_FRAMES)
#define ST_PAD		(PAD_OF(ST_LEVELS, ARENA_CALL_STACK) - 16)

static __noinline int hmap1(void)
{
	struct hmap_cursor cur = HMAP_CURSOR_INIT;
	struct hmap __arena *m;
	u64 k, v = 0;
	int err = 0;

	STACK_PAD(ST_PAD);
	m = hmap_create(16);
	if (!m)
		return -ENOMEM;
	/* Enough keys for the table to double under the inserts. */
	for (k = zero; k < 300 && !err && can_loop; k++)
		err = hmap_insert(m, k, k + 1);
	if (!err)
		err = hmap_upsert(m, 7, 70) == 1 ? 0 : -EINVAL;
	if (!err && (hmap_lookup(m, 7, &v) || v != 70))
		err = -ENOENT;
	if (!err)
		err = hmap_update(m, 8, 80) ?: hmap_delete(m, 9, &v);
	if (!err)
		err = hmap_iter(m, &cur, &k, &v);
	if (!err && hmap_grow(m) && hmap_buckets(m) < 32)
		err = -E2BIG;
	if (!err)
		err = hmap_reserve(m, 2000);
	return hmap_destroy(m) ?: err;
}
LEVEL(hmap, 2, hmap1, ST_PAD)
LEVEL(hmap, 3, hmap2, ST_PAD)
LEVEL(hmap, 4, hmap3, ST_PAD)
LEVEL(hmap, 5, hmap4, ST_PAD)
LEVEL(hmap, 6, hmap5, ST_PAD)

SEC("syscall")
int test_frames_hashmap(struct arena_test_ctx *ctx)
{
	STACK_PAD(ST_PAD);

	ARENA_ASSERT_EQ(CAT(hmap, ST_LEVELS)(), 0);
	return 0;
}

static __noinline int others1(void)
{
	struct rbtree __arena *t = rb_create(RB_ALLOC, RB_DEFAULT);
	struct minheap __arena *h = minheap_create(8);
	struct mpmcq __arena *q = mpmcq_create(8);
	struct spmc __arena *d = spmc_create();
	struct arena_bitmap __arena *bm = bmp_alloc(128);
	void __arena *p;
	u64 k, v = 0;
	s64 handle;
	int err = 0;

	STACK_PAD(ST_PAD);
	if (!t || !h || !q || !d || !bm)
		err = -ENOMEM;
	for (k = zero; k < 64 && !err && can_loop; k++)
		err = rb_insert(t, k, k) ?: spmc_owned_add(d, k);
	if (!err)
		err = rb_find(t, 5, &v) ?: rb_remove(t, 5) ?: rb_pop(t, &k, &v);
	handle = err ? -1 : minheap_insert(h, 3, 30);
	if (handle < 0)
		err = err ?: -EINVAL;
	if (!err)
		err = minheap_update(h, handle, 1) ?: minheap_pop(h, &k, &v);
	if (!err)
		err = mpmcq_push(q, 1) ?: mpmcq_pop(q, &v);
	if (!err)
		err = spmc_steal(d, &v) ?: spmc_owned_remove(d, &v);
	if (!err)
		err = bmp_set_bit(3, bm) ?: bmp_print(128, bm) < 0;
	if (!err) {
		p = arena_malloc_sleepable(100000);
		err = !p || arena_free(p) || arena_heap_reserve(64, 100);
	}
	rb_destroy(t);
	minheap_destroy(h);
	mpmcq_destroy(q);
	spmc_destroy(d);
	bmp_free(bm);
	return err;
}
LEVEL(others, 2, others1, ST_PAD)
LEVEL(others, 3, others2, ST_PAD)
LEVEL(others, 4, others3, ST_PAD)
LEVEL(others, 5, others4, ST_PAD)
LEVEL(others, 6, others5, ST_PAD)

SEC("syscall")
int test_frames_structures(struct arena_test_ctx *ctx)
{
	STACK_PAD(ST_PAD);

	ARENA_ASSERT_EQ(CAT(others, ST_LEVELS)(), 0);
	return 0;
}
