// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * Logging: formats, bad arguments, truncation and accounting under concurrent writers.
 * tests/user_test.c drives log_lines to check order, content and overflow from user space.
 */
#include <libarena/log.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

/* 80 characters, and the first 63 of them. */
#define TEXT80 "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefgh"
#define TEXT63 "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0"
#define PAD_MAX 880

static const char pad_text[PAD_MAX + 1] = TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80
	TEXT80 TEXT80 TEXT80 TEXT80;

/* Driven by user space (tests/user_test.c); not a test itself. */
struct log_lines_args {
	u32 thread;
	u32 count;
	u32 width;		/* pad each line to this many characters (<= 895) */
	u32 stream;
	u32 written;		/* out: lines accepted */
	u32 rejected;		/* out: lines refused (-ENOSPC) */
};

SEC("syscall")
int log_lines(struct log_lines_args *args)
{
	u32 i, pad, written = 0, rejected = 0;
	int ret = 0;

	pad = args->width < 15 ? 0 : args->width - 15;
	if (pad > PAD_MAX)
		pad = PAD_MAX;
	/*
	 * Counted in registers, stored once: clang 19 keeps &args->written in a register
	 * across the loop, and the verifier rejects a ctx pointer with an offset.
	 */
	for (i = zero; i < args->count && can_loop; i++) {
		/* "t=%03u i=%06u " is 15 characters; the rest of the width is padding. */
		if (args->stream == ARENA_LOG_STDERR)
			ret = arena_stderr("t=%03u i=%06u %s", args->thread, i,
					   &pad_text[PAD_MAX - pad]);
		else
			ret = arena_stdout("t=%03u i=%06u %s", args->thread, i,
					   &pad_text[PAD_MAX - pad]);
		if (!ret)
			written++;
		else if (ret == -ENOSPC)
			rejected++;
		else
			break;
	}
	args->written = written;
	args->rejected = rejected;
	return ret == -ENOSPC ? 0 : ret;
}

SEC("syscall")
int test_log_formats(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT_EQ(arena_stdout("plain line"), 0);
	ARENA_ASSERT_EQ(arena_stdout("int %d uint %u hex %x", -5, 7, 0xbeef), 0);
	ARENA_ASSERT_EQ(arena_stdout("u64 %llu s64 %lld str %s char %c", ~0ull, -1ll,
				     "str", 'c'), 0);
	ARENA_ASSERT_EQ(arena_stderr("to stderr %d", 2), 0);
	/* An empty line is a line. */
	ARENA_ASSERT_EQ(arena_stdout(""), 0);
	return 0;
}

SEC("syscall")
int test_log_bad_args(struct arena_test_ctx *ctx)
{
	struct arena_log_scratch *s;
	u32 key = 0;

	s = bpf_map_lookup_elem(&arena_log_scratch, &key);
	ARENA_ASSERT(s);
	s->line[0].text[0] = 'x';
	s->line[0].text[1] = 0;
	ARENA_ASSERT_EQ(arena_log_commit(0, &s->line[0], 2), -EINVAL);
	ARENA_ASSERT_EQ(arena_log_commit(3, &s->line[0], 2), -EINVAL);
	ARENA_ASSERT_EQ(arena_log_commit(ARENA_LOG_STDOUT, &s->line[0], 0), -EINVAL);
	/* bpf_snprintf's own errors pass through. */
	ARENA_ASSERT_EQ(arena_log_commit(ARENA_LOG_STDOUT, &s->line[0], -E2BIG), -E2BIG);
	ARENA_ASSERT_EQ(arena_log_commit(ARENA_LOG_STDOUT, &s->line[0], 2), 0);
	return 0;
}

SEC("syscall")
int test_log_truncates_long_lines(struct arena_test_ctx *ctx)
{
	struct arena_log __arena *ring = arena_log_get();
	u64 before = ring->truncated;

	/* 1040 characters: cut at ARENA_LOG_LINE_MAX - 1 and counted. */
	ARENA_ASSERT_EQ(arena_stdout(TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80
				     TEXT80 TEXT80 TEXT80 TEXT80), 0);
	ARENA_ASSERT_EQ(ring->truncated, before + 1);
	/* 1023 characters fit exactly. */
	ARENA_ASSERT_EQ(arena_stdout(TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80 TEXT80
				     TEXT80 TEXT80 TEXT80 TEXT63), 0);
	ARENA_ASSERT_EQ(ring->truncated, before + 1);
	return 0;
}

/* Writers on every CPU at once: each line is either written or counted as dropped. */
#define WRITER_LINES	300

u64 __arena_global writers_written;
u64 __arena_global writers_dropped;
u64 __arena_global writers_failed;

SEC("syscall")
int parallel_test_log_writers__init(struct arena_test_ctx *ctx)
{
	struct arena_log __arena *ring = arena_log_get();

	writers_written = ring->written;
	writers_dropped = ring->dropped;
	writers_failed = 0;
	return 0;
}

static __noinline int write_lines(u32 thread)
{
	int i, ret;

	for (i = zero; i < WRITER_LINES && can_loop; i++) {
		ret = arena_stdout(
				   "writer %u line %d of %d: some text to fill two slots of the ring, which hold 112 characters each; this line is about 150 characters long",
				   thread, i, WRITER_LINES);
		if (ret && ret != -ENOSPC)
			atomic_add(&writers_failed, 1);
	}
	return i == WRITER_LINES ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_log_writers__0(struct arena_test_ctx *ctx) { return write_lines(0); }
SEC("syscall")
int parallel_test_log_writers__1(struct arena_test_ctx *ctx) { return write_lines(1); }
SEC("syscall")
int parallel_test_log_writers__2(struct arena_test_ctx *ctx) { return write_lines(2); }
SEC("syscall")
int parallel_test_log_writers__3(struct arena_test_ctx *ctx) { return write_lines(3); }

SEC("syscall")
int parallel_test_log_writers__fini(struct arena_test_ctx *ctx)
{
	struct arena_log __arena *ring = arena_log_get();
	u64 written = ring->written - writers_written;
	u64 dropped = ring->dropped - writers_dropped;

	ARENA_ASSERT_EQ(writers_failed, 0);
	ARENA_ASSERT_EQ(written + dropped, 4 * WRITER_LINES);
	/* Two slots a line, 512 slots: the ring cannot hold all 1200 lines. */
	ARENA_ASSERT(dropped > 0);
	ARENA_ASSERT_EQ(written, ARENA_LOG_SLOTS / 2);
	return 0;
}
