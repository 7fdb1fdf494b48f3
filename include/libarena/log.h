/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena logging: printf-style lines from BPF into an arena-resident ring that user
 * space drains. Works on 6.12, which has no BPF streams.
 *
 *   arena_stdout(fmt, ...)   one line to the "stdout" stream; returns 0 or -errno
 *   arena_stderr(fmt, ...)   one line to the "stderr" stream
 *
 * fmt and its arguments follow bpf_snprintf(): at most 12 arguments, %d %u %x %ld %lu
 * %lld %llu %llx %p %s %c ... A line longer than ARENA_LOG_LINE_MAX - 1 bytes is cut
 * there and counted in arena_log.truncated. The text of all %s arguments of one line
 * together is cut near 500 bytes (bpf_snprintf's own buffer); the format is not.
 *
 * Writers never block: a line takes a run of slots reserved with one compare-and-swap;
 * when the ring is full the line is dropped and arena_log.dropped counts it (user space
 * reports the count). Writers on many CPUs at once are safe; nested programs on one CPU
 * use separate per-CPU scratch lines. User space (libarena_log_drain()) is the only
 * reader. Every loop is bounded, whatever user space writes into the ring.
 */
#ifndef __LIBARENA_LOG_H
#define __LIBARENA_LOG_H
#include <libarena/base.h>

enum arena_log_stream {
	ARENA_LOG_STDOUT = 1,
	ARENA_LOG_STDERR = 2,
};

#define ARENA_LOG_MAGIC		0x4c6f6741u	/* "AgoL" */
#define ARENA_LOG_SLOTS		512		/* power of two */
#define ARENA_LOG_SLOT_TEXT	112
#define ARENA_LOG_LINE_MAX	1024		/* longest line kept, with its NUL */
#define ARENA_LOG_MAX_SLOTS	((ARENA_LOG_LINE_MAX + ARENA_LOG_SLOT_TEXT - 1) / \
				 ARENA_LOG_SLOT_TEXT)
#define ARENA_LOG_NEST		4		/* nested writers per CPU */

/* One 128-byte slot. A line spans nslots consecutive slots (modulo the ring). */
struct arena_log_slot {
	u64 seq;		/* position + 1 once the slot is written: the commit */
	u16 len;		/* first slot of a line: text length without the NUL */
	u8 nslots;		/* first slot of a line: slots the line spans */
	u8 stream;		/* enum arena_log_stream */
	u32 cpu;		/* CPU that wrote the line */
	char text[ARENA_LOG_SLOT_TEXT];
};

struct arena_log {
	u32 magic;		/* ARENA_LOG_MAGIC */
	u32 nr_slots;		/* ARENA_LOG_SLOTS */
	u64 head;		/* next position to reserve (writers) */
	u64 tail;		/* next position to read (the user-space reader) */
	u64 written;		/* lines committed */
	u64 dropped;		/* lines lost because the ring was full or contended */
	u64 truncated;		/* lines cut at ARENA_LOG_LINE_MAX - 1 */
	u64 dropped_seen;	/* the reader's copy of dropped at its last report */
	u64 pad;
	struct arena_log_slot slots[ARENA_LOG_SLOTS];
};

/* A formatted line on its way into the ring (per-CPU scratch, not arena memory). */
struct arena_log_line {
	char text[ARENA_LOG_LINE_MAX];
};

/*
 * The ring, an arena global of the library (src/log.bpf.c), reached through a call: the
 * 6.12 linker leaves extern arena variables at offset 0 of their section's BTF, and 6.12
 * global functions may return only scalars, hence the address as a u64.
 */
u64 arena_log_addr(void);

static __always_inline struct arena_log __arena *arena_log_get(void)
{
	return (struct arena_log __arena *)arena_log_addr();
}

/* Copy a formatted line of n bytes (bpf_snprintf's return) into the ring. */
int arena_log_commit(int stream, struct arena_log_line *line, long n);

#ifdef __BPF__

struct arena_log_scratch {
	u32 busy;		/* bit d set: line[d] is being formatted */
	u32 pad;
	struct arena_log_line line[ARENA_LOG_NEST];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct arena_log_scratch);
} arena_log_scratch __weak SEC(".maps");

#include <libarena/internal/log.h>

#define arena_stdout(fmt, args...) __arena_log(ARENA_LOG_STDOUT, fmt, ##args)
#define arena_stderr(fmt, args...) __arena_log(ARENA_LOG_STDERR, fmt, ##args)

#else /* host build: straight to stdio */

#include <stdio.h>
/* A host test may send the library's complaints elsewhere (-DARENA_HOST_STDERR=...). */
#ifndef ARENA_HOST_STDERR
#define ARENA_HOST_STDERR stderr
#endif
#define arena_stdout(fmt, args...) (printf(fmt "\n", ##args) < 0 ? -EIO : 0)
#define arena_stderr(fmt, args...) \
	(fprintf(ARENA_HOST_STDERR, fmt "\n", ##args) < 0 ? -EIO : 0)

#endif /* __BPF__ */

/*
 * Whether obj, a library struct, is live: not NULL, and its magic field (read with
 * acquire: pairs with the release that made it live) says magic. If not, fn logs that
 * obj is not a live what, the same line for every structure's calls.
 */
#define arena_live(fn, obj, magic_val, what)					\
({										\
	bool ___live;								\
										\
	arena_subprog_init();							\
	/* Acquire: pairs with the release that made obj live. */		\
	___live = (obj) && smp_load_acquire(&(obj)->magic) == (magic_val);	\
	if (!___live)								\
		arena_stderr("%s: %llx is not a live %s", fn, (u64)(obj), what);	\
	___live;								\
})

/* Whether the caller passed the pointer p; if not, fn logs that there is no what. */
#define arena_given(fn, p, what)						\
({										\
	bool ___given = (p) != NULL;						\
										\
	if (!___given)								\
		arena_stderr("%s: no %s", fn, what);				\
	___given;								\
})

#endif /* __LIBARENA_LOG_H */
