// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* The log ring's reader: plain C, no libbpf, so the host tests can use it too. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <libarena/userspace.h>

/*
 * Everything in the ring is read once into locals and checked: BPF writers may be active,
 * and a buggy program may have scribbled over the ring.
 */
int libarena_log_drain(struct arena_log *log, libarena_log_fn fn, void *ctx,
		       unsigned long long *dropped)
{
	char text[ARENA_LOG_LINE_MAX];
	int consumed = 0, ret = 0;
	unsigned long long n;
	u64 tail, head;

	if (!log)
		return -EINVAL;
	n = __atomic_load_n(&log->dropped, __ATOMIC_RELAXED);
	if (dropped)
		*dropped = n - log->dropped_seen;
	log->dropped_seen = n;

	tail = log->tail;
	head = __atomic_load_n(&log->head, __ATOMIC_ACQUIRE);
	if (head - tail > ARENA_LOG_SLOTS) {
		/* Scribbled over: writers would refuse every line. Start again at head. */
		__atomic_store_n(&log->tail, head, __ATOMIC_RELEASE);
		return -EUCLEAN;
	}
	/* At most one ring's worth per call: bounded whatever the ring holds. */
	/* Positions may wrap around 2^64: compare distances, never positions. */
	for (int iter = 0; tail != head && iter < ARENA_LOG_SLOTS; iter++) {
		struct arena_log_slot *first = &log->slots[tail % ARENA_LOG_SLOTS];
		struct libarena_log_line line;
		unsigned int len, nslots, k;

		if (__atomic_load_n(&first->seq, __ATOMIC_ACQUIRE) != tail + 1)
			break;	/* not written yet */
		len = first->len;
		nslots = first->nslots;
		if (!nslots || nslots > ARENA_LOG_MAX_SLOTS || len >= ARENA_LOG_LINE_MAX ||
		    len / ARENA_LOG_SLOT_TEXT + 1 != nslots || nslots > head - tail) {
			ret = -EUCLEAN;
			tail = head;
			break;
		}
		for (k = 1; k < nslots; k++) {
			struct arena_log_slot *s = &log->slots[(tail + k) % ARENA_LOG_SLOTS];

			if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) != tail + k + 1)
				break;
		}
		if (k < nslots)
			break;	/* the line's last slots are still being written */
		for (k = 0; k < nslots; k++) {
			struct arena_log_slot *s = &log->slots[(tail + k) % ARENA_LOG_SLOTS];
			unsigned int off = k * ARENA_LOG_SLOT_TEXT;
			unsigned int chunk = len - off < ARENA_LOG_SLOT_TEXT ?
					     len - off : ARENA_LOG_SLOT_TEXT;

			memcpy(text + off, s->text, chunk);
		}
		text[len] = '\0';
		line.text = text;
		line.len = len;
		line.stream = first->stream;
		line.cpu = first->cpu;
		tail += nslots;
		consumed++;
		/* Release the slots before calling out: writers may reuse them now. */
		__atomic_store_n(&log->tail, tail, __ATOMIC_RELEASE);
		if (fn && fn(&line, ctx))
			break;
	}
	__atomic_store_n(&log->tail, tail, __ATOMIC_RELEASE);
	return ret ? ret : consumed;
}

struct print_ctx {
	FILE *out, *err;
};

static int print_line(const struct libarena_log_line *line, void *ctx)
{
	struct print_ctx *p = ctx;

	fprintf(line->stream == ARENA_LOG_STDERR ? p->err : p->out, "%s\n", line->text);
	return 0;
}

int libarena_log_print(struct arena_log *log, FILE *out, FILE *err)
{
	struct print_ctx p = { out, err };
	unsigned long long dropped = 0;
	int ret, total = 0;

	/* Drain until empty, a bounded number of rounds: writers may still be adding. */
	for (int round = 0; round < 64; round++) {
		ret = libarena_log_drain(log, print_line, &p, round ? NULL : &dropped);
		if (ret <= 0)
			break;
		total += ret;
	}
	if (dropped)
		fprintf(err, "libarena: %llu log lines dropped (log ring full)\n", dropped);
	if (ret == -EUCLEAN)
		fprintf(err, "libarena: log ring corrupted; skipped to the newest line\n");
	return ret < 0 ? ret : total;
}
