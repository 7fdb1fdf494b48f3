// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The arena lists compiled natively: a fuzzer against a model (an array in list order)
 * with every call, walks checked against the model after each; damage (a link that does
 * not point back) refused by every call and stopping every walk; then threads adding and
 * deleting under an arena spin lock, under AddressSanitizer and ThreadSanitizer.
 *
 * HOST_FUZZ_OPS=N sets the fuzzer's operations, HOST_FUZZ_SEED the seed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/common.h>
#include <libarena/list.h>
#include <libarena/spinlock.h>
#include "check.h"

char libarena_host_arena;

#ifdef __SANITIZE_THREAD__
#define DEFAULT_OPS	100000
#else
#define DEFAULT_OPS	500000
#endif

struct item {
	u64 id;
	struct arena_list_head link;
	bool in;
};

#define ITEMS	64

static struct item items[ITEMS];
static int model[ITEMS], model_n;

static int model_find(int id)
{
	for (int i = 0; i < model_n; i++)
		if (model[i] == id)
			return i;
	return -1;
}

static void model_insert(int at, int id)
{
	memmove(&model[at + 1], &model[at], (model_n - at) * sizeof(int));
	model[at] = id;
	model_n++;
}

static void model_remove(int at)
{
	memmove(&model[at], &model[at + 1], (model_n - at - 1) * sizeof(int));
	model_n--;
}

static int check_walks(struct arena_list_head *head, long op)
{
	struct item *pos, *n;
	int i = 0;

	CHECK(arena_list_count(head) == model_n, "op %ld: count %d, want %d", op,
	      arena_list_count(head), model_n);
	arena_list_for_each_entry(pos, head, link) {
		CHECK(i < model_n && pos->id == (u64)model[i], "op %ld: entry %d", op, i);
		i++;
	}
	CHECK(i == model_n && arena_list_entry_is_head(pos, head, link), "op %ld", op);
	i = 0;
	arena_list_for_each_entry_safe(pos, n, head, link)
		i++;
	CHECK(i == model_n, "op %ld", op);
	CHECK(arena_list_empty(head) == (model_n == 0), "op %ld", op);
	CHECK(arena_list_is_singular(head) == (model_n == 1), "op %ld", op);
	if (model_n) {
		CHECK(arena_list_first_entry(head, struct item, link)->id == (u64)model[0], "");
		CHECK(arena_list_last_entry(head, struct item, link)->id ==
		      (u64)model[model_n - 1], "");
	} else {
		CHECK(!arena_list_first_entry_or_null(head, struct item, link), "");
	}
	return 0;
}

static int test_fuzz(void)
{
	const char *s = getenv("HOST_FUZZ_OPS"), *sd = getenv("HOST_FUZZ_SEED");
	long ops = s ? atol(s) : DEFAULT_OPS, op;
	u64 seed = sd ? strtoull(sd, NULL, 0) : 0x11ull;
	struct arena_list_head head = ARENA_LIST_HEAD_INIT(head);
	int i, id, at;

	for (i = 0; i < ITEMS; i++)
		items[i].id = i;
	for (op = 0; op < ops; op++) {
		u64 r = host_rnd(&seed) % 6;

		id = host_rnd(&seed) % ITEMS;
		at = model_find(id);
		if (r <= 2 && at < 0) {
			/* Add at the front, the back, or after another entry. */
			int after = model_n ? model[host_rnd(&seed) % model_n] : -1;

			if (r == 0) {
				CHECK(arena_list_add(&items[id].link, &head) == 0, "");
				model_insert(0, id);
			} else if (r == 1 || after < 0) {
				CHECK(arena_list_add_tail(&items[id].link, &head) == 0, "");
				model_insert(model_n, id);
			} else {
				CHECK(arena_list_add(&items[id].link, &items[after].link) == 0, "");
				model_insert(model_find(after) + 1, id);
			}
		} else if (r == 3 && at >= 0) {
			if (host_rnd(&seed) % 2) {
				CHECK(arena_list_del(&items[id].link) == 0, "");
				CHECK(!items[id].link.next && !items[id].link.prev, "");
			} else {
				CHECK(arena_list_del_init(&items[id].link) == 0, "");
				CHECK(arena_list_empty(&items[id].link), "");
			}
			model_remove(at);
		} else if (r == 4 && at >= 0) {
			CHECK(arena_list_move(&items[id].link, &head) == 0, "");
			model_remove(at);
			model_insert(0, id);
		} else if (r == 5 && at >= 0) {
			CHECK(arena_list_move_tail(&items[id].link, &head) == 0, "");
			model_remove(at);
			model_insert(model_n, id);
		}
		if (check_walks(&head, op))
			return -1;
	}
	return 0;
}

static int test_damage(void)
{
	struct arena_list_head head = ARENA_LIST_HEAD_INIT(head), *saved;
	struct item *pos, x = { .id = 99 };
	int i, n;

	for (i = 0; i < 5; i++) {
		items[i].id = i;
		CHECK(arena_list_add_tail(&items[i].link, &head) == 0, "");
	}
	/* Entry 2's next no longer points back at it. */
	saved = items[2].link.next;
	items[2].link.next = &items[4].link;
	CHECK(arena_list_count(&head) == -EUCLEAN, "");
	n = 0;
	arena_list_for_each_entry(pos, &head, link)
		n++;
	CHECK(n == 2 && pos == &items[2], "walk went %d", n);
	CHECK(!arena_list_entry_is_head(pos, &head, link), "");
	/* Calls that would rewrite the broken links refuse and change nothing. */
	CHECK(arena_list_del(&items[2].link) == -EUCLEAN, "");
	CHECK(arena_list_del(&items[3].link) == -EUCLEAN, "");
	CHECK(arena_list_add(&x.link, &items[2].link) == -EUCLEAN, "");
	CHECK(arena_list_move(&items[3].link, &head) == -EUCLEAN, "");
	CHECK(items[2].link.next == &items[4].link && items[3].link.prev == &items[2].link, "");
	items[2].link.next = saved;
	CHECK(arena_list_count(&head) == 5, "");

	/* (A ring that misses the head ends a walk only by the loop budget: the VM tests it.) */
	/* An entry added twice next to itself is refused. */
	CHECK(arena_list_add(&items[1].link, &items[1].link) == -EUCLEAN, "");
	return 0;
}

/* Threads add and delete their own items on one list under an arena spin lock. */
#define THREADS		4
#define PER_THREAD	256
#define ROUNDS		20000

static struct arena_list_head shared = ARENA_LIST_HEAD_INIT(shared);
static arena_spinlock_t shared_lock;
static struct item race_items[THREADS][PER_THREAD];
static long race_errors;

static void *race_thread(void *arg)
{
	long t = (long)arg;
	u64 seed = 77 + t;
	int i;

	for (i = 0; i < ROUNDS; i++) {
		struct item *it = &race_items[t][host_rnd(&seed) % PER_THREAD];
		int ret;

		while (arena_spin_lock(&shared_lock))
			;
		ret = it->in ? arena_list_del(&it->link) : arena_list_add(&it->link, &shared);
		if (!ret)
			it->in = !it->in;
		arena_spin_unlock(&shared_lock);
		if (ret)
			__atomic_fetch_add(&race_errors, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static int test_race(void)
{
	pthread_t th[THREADS];
	long t, want = 0;
	int i;

	for (t = 0; t < THREADS; t++)
		CHECK(!pthread_create(&th[t], NULL, race_thread, (void *)t), "");
	for (t = 0; t < THREADS; t++)
		pthread_join(th[t], NULL);
	for (t = 0; t < THREADS; t++)
		for (i = 0; i < PER_THREAD; i++)
			want += race_items[t][i].in;
	CHECK(race_errors == 0, "%ld calls failed", race_errors);
	CHECK(arena_list_count(&shared) == want, "count %d, want %ld",
	      arena_list_count(&shared), want);
	return 0;
}

int main(void)
{
	host_begin(true);
	host_run("list", "fuzz", test_fuzz);
	host_run("list", "damage", test_damage);
	host_run("list", "race", test_race);
	return host_summary();
}
