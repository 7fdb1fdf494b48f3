// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The log ring compiled natively (src/log.bpf.c and userspace/log_reader.c): many
 * writers and a concurrent reader under the sanitizers, and a reader and writers that
 * stay bounded and safe however the ring is scribbled over.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <libarena/userspace.h>
#include "check.h"

/*
 * What the BPF macro does: format "t=T i=I w=W" padded with spaces to W characters,
 * then commit with bpf_snprintf's count (the would-be length, NUL included).
 */
static int host_log(int stream, u32 t, u32 i, u32 width)
{
	static __thread struct arena_log_line line;
	size_t max = sizeof(line.text) - 1;
	int n;

	n = snprintf(line.text, sizeof(line.text), "t=%u i=%u w=%u", t, i, width);
	if (width > (u32)n) {
		memset(line.text + n, ' ', (width < max ? width : max) - n);
		line.text[width < max ? width : max] = 0;
		n = width;
	}
	return arena_log_commit(stream, &line, n + 1);
}

struct collect {
	int n, bad, gaps;
	u32 next[64];
};

static int check_line(const struct libarena_log_line *l, void *p)
{
	struct collect *c = p;
	unsigned int t, i, w;

	c->n++;
	/* Lines read "t=T i=I w=W" padded with spaces to W characters. */
	if (sscanf(l->text, "t=%u i=%u w=%u", &t, &i, &w) != 3 || t >= 64 ||
	    l->len != (w < ARENA_LOG_LINE_MAX ? w : ARENA_LOG_LINE_MAX - 1) ||
	    strlen(l->text) != l->len || i < c->next[t]) {
		c->bad++;
		return 0;
	}
	c->gaps += i != c->next[t];
	c->next[t] = i + 1;
	return 0;
}

#define WRITERS 4
#define LINES 20000

struct writer {
	pthread_t tid;
	u32 t, written, dropped;
};

static int writers_done;

static void *writer_fn(void *p)
{
	struct writer *w = p;

	for (u32 i = 0; i < LINES; i++) {
		u32 width = 20 + (i * 37 + w->t * 11) % 1100;	/* some lines get cut */
		int ret = host_log(ARENA_LOG_STDOUT, w->t, i, width);

		if (!ret)
			w->written++;
		else if (ret == -ENOSPC)
			w->dropped++;
	}
	__atomic_add_fetch(&writers_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int test_concurrent(void)
{
	struct arena_log *log = arena_log_get();
	struct writer w[WRITERS];
	struct collect c = {};
	unsigned long long dropped = 0, d;
	u64 written = 0, refused = 0;
	int n;

	for (int i = 0; i < WRITERS; i++) {
		w[i] = (struct writer){ .t = i };
		CHECK(!pthread_create(&w[i].tid, NULL, writer_fn, &w[i]), "");
	}
	while (__atomic_load_n(&writers_done, __ATOMIC_ACQUIRE) < WRITERS) {
		CHECK(libarena_log_drain(log, check_line, &c, &d) >= 0, "");
		dropped += d;
	}
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(w[i].tid, NULL);
		written += w[i].written;
		refused += w[i].dropped;
	}
	do {
		n = libarena_log_drain(log, check_line, &c, &d);
		dropped += d;
	} while (n > 0);
	printf("    %d lines read, %llu dropped, %d gaps\n", c.n, dropped, c.gaps);
	CHECK(n == 0, "");
	CHECK(c.bad == 0, "%d bad lines", c.bad);
	CHECK((u64)c.n == written, "read %d, written %llu", c.n, (unsigned long long)written);
	CHECK(dropped == refused, "");
	CHECK(written + refused == (u64)WRITERS * LINES, "");
	return 0;
}

static int noop(const struct libarena_log_line *l, void *p)
{
	return 0;
}

/* Scribble over the ring at random; reader and writers must stay bounded and in range. */
static int test_scribbled_ring(void)
{
	struct arena_log *log = arena_log_get();
	unsigned char *bytes = (unsigned char *)log;
	int rounds = 20000;

	srandom(7);
	for (int r = 0; r < rounds; r++) {
		int k = random() % 8;

		for (int j = 0; j < k; j++) {
			size_t off = random() % sizeof(*log);

			/* The head and tail words get hit more often: they steer everything. */
			if (random() % 2)
				off = random() % 32;
			bytes[off] = random();
		}
		host_log(ARENA_LOG_STDERR, 1, r, 40);
		CHECK(libarena_log_drain(log, noop, NULL, NULL) >= -EUCLEAN, "");
	}
	/* Once the reader catches up, the ring works again. */
	log->tail = log->head;
	{
		int ret = host_log(ARENA_LOG_STDOUT, 2, 0, 30);

		CHECK(ret == 0, "ret %d head %llu tail %llu", ret, (unsigned long long)log->head,
		      (unsigned long long)log->tail);
	}
	{
		struct collect c = {};

		CHECK(libarena_log_drain(log, check_line, &c, NULL) == 1 && c.bad == 0, "");
	}
	return 0;
}

static int test_bad_args(void)
{
	struct arena_log_line line = { .text = "x" };

	CHECK(arena_log_commit(0, &line, 2) == -EINVAL, "");
	CHECK(arena_log_commit(ARENA_LOG_STDOUT, NULL, 2) == -EINVAL, "");
	CHECK(arena_log_commit(ARENA_LOG_STDOUT, &line, 0) == -EINVAL, "");
	CHECK(arena_log_commit(ARENA_LOG_STDOUT, &line, -E2BIG) == -E2BIG, "");
	CHECK(libarena_log_drain(NULL, noop, NULL, NULL) == -EINVAL, "");
	return 0;
}

int main(void)
{
	host_begin(false);
	host_run("host", "log_bad_args", test_bad_args);
	host_run("host", "log_concurrent", test_concurrent);
	host_run("host", "log_scribbled_ring", test_scribbled_ring);
	return host_summary();
}
