// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The arena lists: every call and walk, damage refused and walks stopped at it, a ring
 * that misses the head (the walk ends with the loop budget); then threads on every CPU
 * adding and deleting on one list under an arena spin lock, the count exact at the end.
 */
#include <libarena/common.h>
#include <libarena/list.h>
#include <libarena/spinlock.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

struct item {
	u64 id;
	struct arena_list_head link;
	u32 in;
	u32 pad;
};

struct arena_list_head __arena_global thead;
struct item __arena_global titems[8];

/* The ids along the list, as decimal digits (12340 for 1, 2, 3, 4, 0); -1 if cut short. */
static __noinline s64 ids(void)
{
	struct item __arena *pos;
	s64 v = 0;

	arena_list_for_each_entry(pos, &thead, link)
		v = v * 10 + pos->id;
	return arena_list_entry_is_head(pos, &thead, link) ? v : -1;
}

static __noinline void setup(int n)
{
	int i;

	arena_list_init(&thead);
	for (i = zero; i < 8 && can_loop; i++) {
		titems[i].id = i;
		if (i < n)
			arena_list_add_tail(&titems[i].link, &thead);
	}
}

SEC("syscall")
int test_list_calls(struct arena_test_ctx *ctx)
{
	struct item __arena *pos, *n;
	int count = zero;

	setup(0);
	ARENA_ASSERT(arena_list_empty(&thead));
	ARENA_ASSERT(!arena_list_first_entry_or_null(&thead, struct item, link));
	ARENA_ASSERT_EQ(arena_list_count(&thead), 0);
	ARENA_ASSERT_EQ(arena_list_add(&titems[1].link, &thead), 0);
	ARENA_ASSERT(arena_list_is_singular(&thead));
	ARENA_ASSERT_EQ(arena_list_add_tail(&titems[2].link, &thead), 0);
	ARENA_ASSERT_EQ(arena_list_add(&titems[3].link, &titems[1].link), 0);	/* after 1 */
	ARENA_ASSERT_EQ(arena_list_add(&titems[4].link, &thead), 0);
	ARENA_ASSERT_EQ(ids(), 4132);
	ARENA_ASSERT_EQ(arena_list_count(&thead), 4);
	ARENA_ASSERT_EQ(arena_list_first_entry(&thead, struct item, link)->id, 4);
	ARENA_ASSERT_EQ(arena_list_last_entry(&thead, struct item, link)->id, 2);
	ARENA_ASSERT_EQ(arena_list_move_tail(&titems[4].link, &thead), 0);
	ARENA_ASSERT_EQ(arena_list_move(&titems[2].link, &thead), 0);
	ARENA_ASSERT_EQ(ids(), 2134);
	ARENA_ASSERT_EQ(arena_list_del(&titems[1].link), 0);
	ARENA_ASSERT(!titems[1].link.next && !titems[1].link.prev);
	ARENA_ASSERT_EQ(arena_list_del_init(&titems[3].link), 0);
	ARENA_ASSERT(arena_list_empty(&titems[3].link));
	ARENA_ASSERT_EQ(ids(), 24);
	/* Deleting while walking. */
	arena_list_for_each_entry_safe(pos, n, &thead, link) {
		ARENA_ASSERT_EQ(arena_list_del(&pos->link), 0);
		count++;
	}
	ARENA_ASSERT_EQ(count, 2);
	ARENA_ASSERT(arena_list_empty(&thead));
	ARENA_ASSERT_EQ(ids(), 0);
	return 0;
}

SEC("syscall")
int test_list_damage(struct arena_test_ctx *ctx)
{
	struct arena_list_head __arena *saved;

	setup(5);					/* 0 1 2 3 4 */
	ARENA_ASSERT_EQ(ids(), 1234);			/* 01234: the leading 0 */
	/* 2's next no longer points back at it: walks stop at 2, calls refuse. */
	saved = titems[2].link.next;
	titems[2].link.next = &titems[4].link;
	ARENA_ASSERT_EQ(arena_list_count(&thead), -EUCLEAN);
	ARENA_ASSERT_EQ(ids(), -1);
	ARENA_ASSERT_EQ(arena_list_del(&titems[2].link), -EUCLEAN);
	ARENA_ASSERT_EQ(arena_list_del(&titems[3].link), -EUCLEAN);
	ARENA_ASSERT_EQ(arena_list_add(&titems[7].link, &titems[2].link), -EUCLEAN);
	ARENA_ASSERT_EQ(arena_list_move(&titems[3].link, &thead), -EUCLEAN);
	ARENA_ASSERT_EQ(arena_list_move_tail(&titems[2].link, &thead), -EUCLEAN);
	ARENA_ASSERT(titems[2].link.next == &titems[4].link);
	ARENA_ASSERT(titems[3].link.prev == &titems[2].link);
	titems[2].link.next = saved;
	ARENA_ASSERT_EQ(arena_list_count(&thead), 5);

	/*
	 * A ring of 0 .. 4 that misses the head, every link pointing back: the walk from
	 * the head's first entry never meets a broken link and ends by the loop budget;
	 * count sees that the first entry does not point back at the head.
	 */
	titems[4].link.next = &titems[0].link;
	titems[0].link.prev = &titems[4].link;
	ARENA_ASSERT_EQ(ids(), -1);
	ARENA_ASSERT_EQ(arena_list_count(&thead), -EUCLEAN);
	titems[4].link.next = &thead;
	titems[0].link.prev = &thead;
	ARENA_ASSERT_EQ(arena_list_count(&thead), 5);
	ARENA_ASSERT_EQ(arena_list_add(&titems[1].link, &titems[1].link), -EUCLEAN);
	ARENA_ASSERT_EQ(arena_list_add(NULL, &thead), -EUCLEAN);
	ARENA_ASSERT_EQ(arena_list_del(NULL), -EUCLEAN);
	return 0;
}

/*
 * Threads add and delete their own items, at random, on one shared list under an arena
 * spin lock, and walk it now and then; __fini checks that the list holds exactly the
 * items marked in, and that no call failed.
 */
#define RACE_THREADS	4
#define RACE_ITEMS	64
#define RACE_ROUNDS	5000

struct arena_list_head __arena_global race_list;
arena_spinlock_t __arena_global race_lock;
struct item __arena_global race_items[RACE_THREADS][RACE_ITEMS];
u64 __arena_global race_errors, race_walks, race_walked, race_timeouts;

SEC("syscall")
int parallel_test_list_race__init(struct arena_test_ctx *ctx)
{
	int t, i;

	arena_list_init(&race_list);
	arena_memset(&race_lock, 0, sizeof(race_lock));
	race_errors = race_walks = race_walked = race_timeouts = 0;
	for (t = zero; t < RACE_THREADS && can_loop; t++)
		for (i = zero; i < RACE_ITEMS && can_loop; i++) {
			race_items[t & 3][i & 63].id = t * RACE_ITEMS + i;
			race_items[t & 3][i & 63].in = 0;
		}
	return 0;
}

/*
 * One round of thread t. A function of its own: a wait for the lock spends this call's
 * loop budget, never the thread's rounds (a vCPU stalled behind the holder could
 * otherwise end the thread's loop early). __noasan: no global call (the sanitizer's
 * checks are) while the lock is held.
 */
static __noinline __noasan int race_round(u32 t, u64 seed)
{
	struct item __arena *it, *pos;
	int ret, n;

	it = &race_items[t % RACE_THREADS][seed % RACE_ITEMS];
	if (arena_spin_lock(&race_lock)) {
		atomic_add(&race_timeouts, 1);	/* nothing done: on to the next round */
		return 0;
	}
	if (seed % 16 == 0) {
		n = 0;
		arena_list_for_each_entry(pos, &race_list, link)
			n++;
		if (!arena_list_entry_is_head(pos, &race_list, link))
			atomic_add(&race_errors, 1);
		race_walks++;
		race_walked += n;
	}
	ret = it->in ? arena_list_del(&it->link) : arena_list_add(&it->link, &race_list);
	if (!ret)
		it->in = !it->in;
	arena_spin_unlock(&race_lock);
	if (ret)
		atomic_add(&race_errors, 1);
	return 0;
}

static __noinline __noasan int race_thread(struct arena_test_ctx *ctx, u32 t)
{
	u64 seed = ctx->seed | (u64)t << 32 | 1;
	u32 r;

	if (t >= RACE_THREADS)
		return -EINVAL;
	for (r = zero; r < RACE_ROUNDS && can_loop; r++)
		race_round(t, arena_test_rand(&seed));
	return r == RACE_ROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_list_race__0(struct arena_test_ctx *ctx) { return race_thread(ctx, 0); }
SEC("syscall")
int parallel_test_list_race__1(struct arena_test_ctx *ctx) { return race_thread(ctx, 1); }
SEC("syscall")
int parallel_test_list_race__2(struct arena_test_ctx *ctx) { return race_thread(ctx, 2); }
SEC("syscall")
int parallel_test_list_race__3(struct arena_test_ctx *ctx) { return race_thread(ctx, 3); }

u64 __arena_global race_in;

SEC("syscall")
int parallel_test_list_race__fini(struct arena_test_ctx *ctx)
{
	int t, i, count = arena_list_count(&race_list);

	race_in = 0;
	for (t = zero; t < RACE_THREADS && can_loop; t++)
		for (i = zero; i < RACE_ITEMS && can_loop; i++)
			race_in += race_items[t & 3][i & 63].in;
	arena_stdout(
		     "list race: %u threads, %d items on the list, %llu walks over %llu entries, %llu lock timeouts",
		     RACE_THREADS, count, race_walks, race_walked, race_timeouts);
	ARENA_ASSERT_EQ(race_errors, 0);
	ARENA_ASSERT_EQ(count, race_in);
	return 0;
}
