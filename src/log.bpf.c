// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The log ring: lines reserved by compare-and-swap on head, filled, then committed slot
 * by slot with a release store of seq. The reader (user space) consumes a line once every
 * slot of it carries its own position + 1 in seq, then advances tail.
 */
#include <libarena/base.h>
#include <libarena/log.h>

/* The ring lives in the arena's globals, which have no shadow: nothing to check. */
ARENA_NOASAN_BEGIN

/* Initialised data: libbpf copies it into the arena when it loads the object. */
struct arena_log __arena_global arena_log_ring = {
	.magic = ARENA_LOG_MAGIC,
	.nr_slots = ARENA_LOG_SLOTS,
};

__weak u64 arena_log_addr(void)
{
	return (u64)&arena_log_ring;
}

#define LINE_WORDS		(ARENA_LOG_LINE_MAX / 8)
#define SLOT_WORDS		(ARENA_LOG_SLOT_TEXT / 8)

/*
 * Reserve nslots consecutive positions; the first goes to *pos. Fails when the ring is
 * full (or, never seen, when the whole loop budget went to lost races). Positions are
 * any u64: user space may have written anything.
 */
static __always_inline int log_reserve(struct arena_log __arena *log, u32 nslots, u64 *pos)
{
	u64 head, tail;

	/* A lost race is retried while the loop budget lasts: no line dropped for it. */
	while (can_loop) {
		/* tail first: read after head, a stale head could look behind tail. */
		tail = smp_load_acquire(&log->tail);
		head = READ_ONCE(log->head);
		/* Also catches a tail that user space moved past head (head - tail wraps). */
		if (head - tail > ARENA_LOG_SLOTS - nslots)
			return -ENOSPC;
		if (cmpxchg(&log->head, head, head + nslots) == head) {
			*pos = head;
			return 0;
		}
	}
	return -EBUSY;
}

__weak int arena_log_commit(int stream, struct arena_log_line *line, long n)
{
	struct arena_log __arena *log = &arena_log_ring;
	struct arena_log_slot __arena *slot;
	u32 len, nslots, i, k;
	u64 *src, pos = 0;

	if (!line)
		return -EINVAL;
	src = (u64 *)line->text;
	if (stream != ARENA_LOG_STDOUT && stream != ARENA_LOG_STDERR)
		return -EINVAL;
	if (n <= 0)
		return n < 0 ? (int)n : -EINVAL;

	/* bpf_snprintf() counts the NUL; a larger n means the line was cut. */
	len = n - 1;
	if (n > ARENA_LOG_LINE_MAX) {
		len = ARENA_LOG_LINE_MAX - 1;
		atomic_add(&log->truncated, 1);
	}
	nslots = len / ARENA_LOG_SLOT_TEXT + 1;

	if (log_reserve(log, nslots, &pos)) {
		atomic_add(&log->dropped, 1);
		return -ENOSPC;
	}

	/* Copy whole words; the reader trusts len, not the bytes past it. */
	for (i = zero; i <= len / 8 && can_loop; i++) {
		/* Keep clang from turning src[i] into a pointer the verifier cannot bound. */
		barrier_var(i);
		if (i >= LINE_WORDS)
			break;
		k = i / SLOT_WORDS;
		slot = &log->slots[(pos + k) & (ARENA_LOG_SLOTS - 1)];
		((u64 __arena *)slot->text)[i % SLOT_WORDS] = src[i];
	}

	slot = &log->slots[pos & (ARENA_LOG_SLOTS - 1)];
	slot->len = len;
	slot->nslots = nslots;
	slot->stream = stream;
	slot->cpu = bpf_get_smp_processor_id();

	for (k = zero; k < nslots && can_loop; k++) {
		slot = &log->slots[(pos + k) & (ARENA_LOG_SLOTS - 1)];
		/* The text and header before the commit: pairs with the reader's acquire. */
		smp_store_release(&slot->seq, pos + k + 1);
	}
	atomic_add(&log->written, 1);
	return 0;
}

ARENA_NOASAN_END
