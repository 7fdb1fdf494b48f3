// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The sanitizer: seeded bugs of every kind, each checked twice, by the test itself (the
 * report it reads back from the arena has the right kind, address and access) and by the
 * runner (the report text it prints has what the test's "asan-expect:" lines say). Each
 * test logs "asan-seeded: caught N of M". In the plain build these tests are skipped.
 */
#include <libarena/common.h>
#include <libarena/asan.h>
#include <libarena/buddy.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

#ifdef LIBARENA_ASAN

#define MAX_SIZE	1024
#define NR_LATER	64

u64 __arena_global later[NR_LATER];

static __always_inline struct asan_state __arena *state(void)
{
	return (struct asan_state __arena *)asan_state_addr();
}

static __always_inline u64 reports(void)
{
	return READ_ONCE(state()->nr_reports);
}

/*
 * One access of width bytes at addr, instrumented like any user code. Global: the report
 * names this function, and the line below is what the source location must say.
 */
__weak int touch(u64 addr, u32 width, u32 write)
{
	u64 v = 0;

	if (write) {
		switch (width) {
		case 1:
			WRITE_ONCE(*(u8 __arena *)addr, 0x5a);
			break;
		case 2:
			WRITE_ONCE(*(u16 __arena *)addr, 0x5a5a);
			break;
		case 4:
			WRITE_ONCE(*(u32 __arena *)addr, 0x5a5a5a5a);
			break;
		default:
			WRITE_ONCE(*(u64 __arena *)addr, 0x5a5a5a5a5a5a5a5aull);
			break;
		}
		return 0;
	}
	switch (width) {
	case 1:
		v = READ_ONCE(*(u8 __arena *)addr);
		break;
	case 2:
		v = READ_ONCE(*(u16 __arena *)addr);
		break;
	case 4:
		v = READ_ONCE(*(u32 __arena *)addr);
		break;
	default:
		v = READ_ONCE(*(u64 __arena *)addr);
		break;
	}
	return v == 0x1234567890abcdefull;
}

/* The line number of touch()'s one-byte write, for the source location check. */
#define TOUCH_WRITE1_LINE	43

/*
 * Did the last access make exactly one report, of this kind, at bad, of this direction?
 * 1 if so. Reads the report back from the arena.
 */
__weak int caught(u64 before, u64 bad, u32 kind, u32 write)
{
	struct asan_state __arena *st = state();
	struct asan_report __arena *r;
	u64 n = READ_ONCE(st->nr_reports);

	if (n != before + 1) {
		arena_stderr("%s: %llu reports, expected 1 (kind %u at %llx)", __func__,
			     n - before, kind, bad);
		return 0;
	}
	r = &st->reports[(n - 1) % ASAN_MAX_REPORTS];
	if (r->kind != kind || r->addr != bad || !!(r->flags & ASAN_F_WRITE) != !!write) {
		arena_stderr("%s: kind %u at %llx write %u, expected kind %u at %llx write %u",
			     __func__, r->kind, r->addr, r->flags & ASAN_F_WRITE, kind, bad, write);
		return 0;
	}
	return 1;
}

/* Out of bounds around one allocation of size: after the end (read, write), before. */
__weak int oob_one(u32 size)
{
	u64 p = (u64)arena_malloc(size), n;
	int hits = 0;

	if (!p)
		return -ENOMEM;
	n = reports();
	touch(p + size, 1, 0);
	hits += caught(n, p + size, ASAN_OUT_OF_BOUNDS, 0);
	n = reports();
	touch(p + size, 1, 1);
	hits += caught(n, p + size, ASAN_OUT_OF_BOUNDS, 1);
	n = reports();
	touch(p - 1, 1, 0);
	hits += caught(n, p - 1, ASAN_OUT_OF_BOUNDS, 0);
	/* The last in-bounds byte is fine. */
	n = reports();
	touch(p + size - 1, 1, 1);
	if (reports() != n)
		hits = -100;
	arena_free((void __arena *)p);
	return hits;
}

SEC("syscall")
int asan_test_oob_every_size(struct arena_test_ctx *ctx)
{
	int caught_n = 0, seeded = 0, r;
	u32 size;

	for (size = zero + 1; size <= MAX_SIZE && can_loop; size++) {
		r = oob_one(size);
		ARENA_ASSERT(r >= 0);
		caught_n += r;
		seeded += 3;
	}
	ARENA_ASSERT_EQ(size, MAX_SIZE + 1);
	arena_stdout("asan-seeded: caught %d of %d", caught_n, seeded);
	arena_stdout("asan-expect: out-of-bounds write of 1 byte at");
	arena_stdout("asan-expect: out of bounds by 1 byte past the end of the 1024-byte block");
	arena_stdout("asan-expect: out of bounds by 1 byte before the 1024-byte block");
	ARENA_ASSERT_EQ(caught_n, seeded);
	return 0;
}

/* Odd sizes, through the heap's classes and into the buddy allocator's blocks. */
static const u32 odd_sizes[16] = { 7, 17, 31, 99, 317, 1000, 1023, 4097, 12345, 33333,
				   65521, 65536, 100000, 200001, 262139, 524272 };

SEC("syscall")
int asan_test_oob_odd_sizes(struct arena_test_ctx *ctx)
{
	int caught_n = 0, seeded = 0, r;
	u32 i;

	for (i = zero; i < ARRAY_SIZE(odd_sizes) && can_loop; i++) {
		barrier_var(i);
		r = oob_one(odd_sizes[i & 15]);
		ARENA_ASSERT(r >= 0);
		caught_n += r;
		seeded += 3;
	}
	arena_stdout("asan-seeded: caught %d of %d", caught_n, seeded);
	/* The runner sees the last ASAN_MAX_REPORTS reports: the largest sizes. */
	arena_stdout("asan-expect: out of bounds by 1 byte past the end of the 200001-byte block");
	arena_stdout("asan-expect: out of bounds by 1 byte past the end of the 524272-byte block");
	arena_stdout("asan-expect: out of bounds by 1 byte before the 524272-byte block");
	ARENA_ASSERT_EQ(caught_n, seeded);
	return 0;
}

/* Wider accesses that straddle the end: the report names the first bad byte. */
SEC("syscall")
int asan_test_oob_straddle(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(13), n;
	int hits = 0;

	ARENA_ASSERT(p);
	n = reports();
	touch(p + 8, 8, 0);		/* bytes 8..15 of 13: 13 is the first bad one */
	hits += caught(n, p + 13, ASAN_OUT_OF_BOUNDS, 0);
	n = reports();
	touch(p + 12, 4, 1);		/* unaligned, straddles the end */
	hits += caught(n, p + 13, ASAN_OUT_OF_BOUNDS, 1);
	n = reports();
	touch(p + 16, 2, 1);
	hits += caught(n, p + 16, ASAN_OUT_OF_BOUNDS, 1);
	arena_free((void __arena *)p);
	arena_stdout("asan-seeded: caught %d of 3", hits);
	arena_stdout(
		     "asan-expect: out-of-bounds read of 8 bytes at 0x%llx: out of bounds by 1 byte past the end of the 13-byte block at 0x%llx",
		     p + 8, p);
	arena_stdout(
		     "asan-expect: out-of-bounds write of 2 bytes at 0x%llx: out of bounds by 4 bytes past the end",
		     p + 16);
	ARENA_ASSERT_EQ(hits, 3);
	return 0;
}

/* A freed block, read and written, at once and after other allocations of its size. */
__weak int uaf_one(u32 size)
{
	u64 p = (u64)arena_malloc(size), n;
	int hits = 0, i;

	if (!p)
		return -ENOMEM;
	touch(p, 1, 1);
	if (arena_free((void __arena *)p))
		return -EINVAL;
	n = reports();
	touch(p, 1, 0);
	hits += caught(n, p, ASAN_USE_AFTER_FREE, 0);
	n = reports();
	touch(p + size - 1, 1, 1);
	hits += caught(n, p + size - 1, ASAN_USE_AFTER_FREE, 1);
	/* Allocations of the same size come from elsewhere while p is quarantined. */
	for (i = zero; i < (size > HEAP_MEDIUM_MAX ? 1 : size > 8192 ? 4 : NR_LATER) && can_loop;
	     i++)
		later[i] = (u64)arena_malloc(size);
	n = reports();
	touch(p + (size & ~7u) / 2, size >= 8 ? 8 : 1, 0);
	hits += caught(n, p + (size & ~7u) / 2, ASAN_USE_AFTER_FREE, 0);
	for (i = zero; i < (size > HEAP_MEDIUM_MAX ? 1 : size > 8192 ? 4 : NR_LATER) && can_loop;
	     i++) {
		if (later[i] == p)
			hits = -100;
		arena_free((void __arena *)later[i]);
	}
	return hits;
}

static const u32 uaf_sizes[16] = { 1, 8, 16, 24, 33, 100, 128, 255, 512, 1000, 4096, 8000,
				 20000, 65536, 70000, 300000 };

SEC("syscall")
int asan_test_use_after_free(struct arena_test_ctx *ctx)
{
	int caught_n = 0, seeded = 0, r;
	u32 i;

	for (i = zero; i < ARRAY_SIZE(uaf_sizes) && can_loop; i++) {
		barrier_var(i);
		r = uaf_one(uaf_sizes[i & 15]);
		ARENA_ASSERT(r >= 0);
		caught_n += r;
		seeded += 3;
	}
	arena_stdout("asan-seeded: caught %d of %d", caught_n, seeded);
	arena_stdout("asan-expect: use-after-free read of 1 byte at");
	arena_stdout("asan-expect: bytes into the freed 300000-byte block");
	arena_stdout("asan-expect: use-after-free write of 1 byte at");
	ARENA_ASSERT_EQ(caught_n, seeded);
	return 0;
}

/* Where: the program, the function and the source line of the bad access. */
SEC("syscall")
int asan_test_source_line(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(40), n;
	int hit;

	ARENA_ASSERT(p);
	n = reports();
	touch(p + 40, 1, 1);
	hit = caught(n, p + 40, ASAN_OUT_OF_BOUNDS, 1);
	ARENA_ASSERT(state()->reports[(reports() - 1) % ASAN_MAX_REPORTS].ip);
	arena_free((void __arena *)p);
	arena_stdout("asan-seeded: caught %d of 1", hit);
	arena_stdout("asan-expect: by %s:touch+0x", __func__);
	arena_stdout("asan-expect: (test_asan.bpf.c:%d)", TOUCH_WRITE1_LINE);
	ARENA_ASSERT_EQ(hit, 1);
	return 0;
}

__weak int double_free_one(u32 size)
{
	u64 p = (u64)arena_malloc(size), n;
	int hits;

	if (!p)
		return -ENOMEM;
	if (arena_free((void __arena *)p))
		return -EINVAL;
	n = reports();
	if (arena_free((void __arena *)p) != -EINVAL)
		return -EINVAL;
	hits = caught(n, p, ASAN_DOUBLE_FREE, 0);
	return hits;
}

SEC("syscall")
int asan_test_double_free(struct arena_test_ctx *ctx)
{
	int hits = 0, r;
	u32 i;

	for (i = zero; i < ARRAY_SIZE(uaf_sizes) && can_loop; i++) {
		barrier_var(i);
		r = double_free_one(uaf_sizes[i & 15]);
		ARENA_ASSERT(r >= 0);
		hits += r;
	}
	arena_stdout("asan-seeded: caught %d of %d", hits, (int)ARRAY_SIZE(uaf_sizes));
	arena_stdout("asan-expect: double free of 0x");
	arena_stdout("asan-expect: the freed 300000-byte block at");
	ARENA_ASSERT_EQ(hits, ARRAY_SIZE(uaf_sizes));
	return 0;
}

/* Frees of what no allocation handed out: the inside of a block, the arena's globals. */
SEC("syscall")
int asan_test_invalid_free(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(100), big = (u64)arena_malloc(200000), n;
	int hits = 0;

	ARENA_ASSERT(p && big);
	n = reports();
	ARENA_ASSERT_EQ(arena_free((void __arena *)(p + 16)), -EINVAL);
	hits += caught(n, p + 16, ASAN_INVALID_FREE, 0);
	n = reports();
	ARENA_ASSERT_EQ(arena_free((void __arena *)(big + 4096)), -EINVAL);
	hits += caught(n, big + 4096, ASAN_INVALID_FREE, 0);
	n = reports();
	ARENA_ASSERT_EQ(arena_free((void __arena *)&later[3]), -EINVAL);
	hits += caught(n, (u64)&later[3], ASAN_INVALID_FREE, 0);
	ARENA_ASSERT_EQ(arena_free((void __arena *)p), 0);
	ARENA_ASSERT_EQ(arena_free((void __arena *)big), 0);
	arena_stdout("asan-seeded: caught %d of 3", hits);
	arena_stdout("asan-expect: invalid free of 0x%llx: 16 bytes into the 100-byte block",
		     p + 16);
	arena_stdout("asan-expect: invalid free of 0x%llx: 4096 bytes into the 200000-byte block",
		     big + 4096);
	arena_stdout("asan-expect: no block starts there");
	ARENA_ASSERT_EQ(hits, 3);
	return 0;
}

/* arena_memset past the end is a write of the whole range, reported at its first bad byte. */
SEC("syscall")
int asan_test_memset(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(50), n;
	int hit;

	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_memset((void __arena *)p, 0, 50), 0);
	n = reports();
	arena_memset((void __arena *)p, 0, 51);
	hit = caught(n, p + 50, ASAN_OUT_OF_BOUNDS, 1);
	arena_free((void __arena *)p);
	arena_stdout("asan-seeded: caught %d of 1", hit);
	arena_stdout("asan-expect: out-of-bounds write of 51 bytes at 0x%llx", p);
	arena_stdout("asan-expect: by %s:%s+0x", __func__, __func__);
	ARENA_ASSERT_EQ(hit, 1);
	return 0;
}

/* Every byte of many live allocations, read and written: no report at all. */
__weak int fill_check(u32 size, u32 seed)
{
	u8 __arena *p = arena_malloc_sleepable(size);
	u32 i;
	int bad = 0;

	if (!p)
		return -ENOMEM;
	for (i = zero; i < size && can_loop; i++)
		p[i] = (u8)(seed + i);
	for (i = zero; i < size && can_loop; i++)
		if (p[i] != (u8)(seed + i))
			bad = 1;
	arena_free(p);
	return bad;
}

SEC("syscall")
int asan_test_no_false_positives(struct arena_test_ctx *ctx)
{
	u64 n = reports();
	u32 size;

	for (size = zero + 1; size <= 600 && can_loop; size++)
		ARENA_ASSERT_EQ(fill_check(size, size), 0);
	for (size = zero + 1; size <= 16 && can_loop; size++)
		ARENA_ASSERT_EQ(fill_check(size * 4093, size), 0);
	ARENA_ASSERT_EQ(fill_check(HEAP_MEDIUM_MAX, 3), 0);
	ARENA_ASSERT_EQ(fill_check(BUDDY_MAX_SIZE, 5), 0);
	ARENA_ASSERT_EQ(reports(), n);
	arena_stdout("asan-expect: none");
	return 0;
}

/* Wild: memory the heap holds but never handed out, and asan_violated. */
SEC("syscall")
int asan_test_wild_and_flag(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(16), n, q;
	int hits = 0;

	ARENA_ASSERT(p);
	/* Far into the span, beyond what was ever carved: never allocated. */
	q = (p & ~(u64)(HEAP_SPAN_SIZE - 1)) + HEAP_SMALL_SPAN - 64;
	asan_violated = 0;
	n = reports();
	touch(q, 8, 0);
	hits += caught(n, q, ASAN_WILD_ACCESS, 0);
	ARENA_ASSERT_EQ(asan_violated, q);
	/* Report only the first: later bad accesses set the flag, and make no report. */
	state()->report_first = 1;
	n = reports();
	touch(p + 16, 1, 0);
	ARENA_ASSERT_EQ(reports(), n);
	ARENA_ASSERT_EQ(asan_violated, p + 16);
	state()->report_first = 0;
	arena_free((void __arena *)p);
	arena_stdout("asan-seeded: caught %d of 1", hits);
	arena_stdout(
		     "asan-expect: wild access read of 8 bytes at 0x%llx: memory no block holds (never allocated)",
		     q);
	ARENA_ASSERT_EQ(hits, 1);
	return 0;
}

/* The buddy allocator's own calls: double and invalid frees are reported too. */
struct buddy __arena_global asan_tb;

SEC("syscall")
int asan_test_buddy_frees(struct arena_test_ctx *ctx)
{
	u64 p, n;
	int hits = 0;

	if (asan_tb.magic)
		buddy_destroy(&asan_tb);
	ARENA_ASSERT_EQ(buddy_init(&asan_tb), 0);
	p = (u64)buddy_alloc(&asan_tb, 100);
	ARENA_ASSERT(p);
	n = reports();
	touch(p + 100, 1, 1);
	hits += caught(n, p + 100, ASAN_OUT_OF_BOUNDS, 1);
	ARENA_ASSERT_EQ(buddy_free(&asan_tb, (void __arena *)p), 0);
	n = reports();
	touch(p + 8, 8, 0);
	hits += caught(n, p + 8, ASAN_USE_AFTER_FREE, 0);
	n = reports();
	ARENA_ASSERT_EQ(buddy_free(&asan_tb, (void __arena *)p), -EINVAL);
	hits += caught(n, p, ASAN_DOUBLE_FREE, 0);
	ARENA_ASSERT_EQ(buddy_destroy(&asan_tb), 0);
	arena_stdout("asan-seeded: caught %d of 3", hits);
	arena_stdout("asan-expect: double free of 0x%llx", p);
	arena_stdout("asan-expect: out of bounds by 1 byte past the end of the 100-byte block");
	ARENA_ASSERT_EQ(hits, 3);
	return 0;
}

/* The latest report's block size and flags, or ~0 when there is none. */
static __always_inline u64 last_block_size(void)
{
	struct asan_state __arena *st = state();
	u64 n = READ_ONCE(st->nr_reports);

	if (!n)
		return ~0ull;
	return st->reports[(n - 1) % ASAN_MAX_REPORTS].block_size;
}

/*
 * A use after free that writes over the freed block's first bytes (where a runtime
 * that keeps the size in the block would keep it): later reports still give the size
 * the block had.
 */
SEC("syscall")
int asan_test_freed_size_kept(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(40), n;
	int hits = 0;

	ARENA_ASSERT(p);
	ARENA_ASSERT_EQ(arena_free((void __arena *)p), 0);
	n = reports();
	touch(p, 8, 1);
	hits += caught(n, p, ASAN_USE_AFTER_FREE, 1);
	n = reports();
	touch(p + 16, 8, 1);
	hits += caught(n, p + 16, ASAN_USE_AFTER_FREE, 1);
	n = reports();
	touch(p + 24, 8, 0);
	hits += caught(n, p + 24, ASAN_USE_AFTER_FREE, 0);
	ARENA_ASSERT_EQ(last_block_size(), 40);
	ARENA_ASSERT(state()->reports[(reports() - 1) % ASAN_MAX_REPORTS].flags & ASAN_F_FREED);
	arena_stdout("asan-seeded: caught %d of 3", hits);
	arena_stdout("asan-expect: 24 bytes into the freed 40-byte block at 0x%llx", p);
	ARENA_ASSERT_EQ(hits, 3);
	return 0;
}

/*
 * One byte past a power-of-two buddy block: no slack, and the next block was never
 * handed out. Reported as out of bounds of the block it overran, not as a wild access.
 */
SEC("syscall")
int asan_test_one_past_exact_block(struct arena_test_ctx *ctx)
{
	u64 p, n;
	int hits = 0;

	if (asan_tb.magic)
		buddy_destroy(&asan_tb);
	ARENA_ASSERT_EQ(buddy_init(&asan_tb), 0);
	p = (u64)buddy_alloc(&asan_tb, 64);
	ARENA_ASSERT(p);
	n = reports();
	touch(p + 64, 1, 1);
	hits += caught(n, p + 64, ASAN_OUT_OF_BOUNDS, 1);
	ARENA_ASSERT_EQ(last_block_size(), 64);
	n = reports();
	touch(p + 64, 4, 0);
	hits += caught(n, p + 64, ASAN_OUT_OF_BOUNDS, 0);
	ARENA_ASSERT_EQ(buddy_free(&asan_tb, (void __arena *)p), 0);
	ARENA_ASSERT_EQ(buddy_destroy(&asan_tb), 0);
	arena_stdout("asan-seeded: caught %d of 2", hits);
	arena_stdout("asan-expect: out of bounds by 1 byte past the end of the 64-byte block");
	ARENA_ASSERT_EQ(hits, 2);
	return 0;
}

/*
 * Free reads the block's size back from the last word of its slack. An overflow that
 * overwrote that word must not make the freed block's size wrong in later reports.
 */
SEC("syscall")
int asan_test_size_word_overwritten(struct arena_test_ctx *ctx)
{
	struct asan_report __arena *r;
	u64 p = (u64)arena_malloc(100), p1, n;
	u32 slot;
	int hits = 0;

	ARENA_ASSERT(p);
	n = reports();
	touch(p + 100, 1, 1);
	hits += caught(n, p + 100, ASAN_OUT_OF_BOUNDS, 1);
	r = &state()->reports[n % ASAN_MAX_REPORTS];
	slot = r->slot_size;
	ARENA_ASSERT(slot >= 100 + ASAN_REDZONE_SIZE && slot <= 4096);
	ARENA_ASSERT_EQ(r->block_size, 100);
	n = reports();
	touch(p + slot - 8, 8, 1);	/* the size word */
	hits += caught(n, p + slot - 8, ASAN_OUT_OF_BOUNDS, 1);
	ARENA_ASSERT_EQ(arena_free((void __arena *)p), 0);
	n = reports();
	touch(p + 96, 4, 0);
	hits += caught(n, p + 96, ASAN_USE_AFTER_FREE, 0);
	r = &state()->reports[n % ASAN_MAX_REPORTS];
	ARENA_ASSERT_EQ(r->block_size, 100);
	ARENA_ASSERT(r->flags & ASAN_F_FREED);

	/* A well-formed word with a wrong size: the shadow disagrees, the size stays right. */
	p1 = p;
	p = (u64)arena_malloc(100);
	ARENA_ASSERT(p);
	n = reports();
	*(u64 __arena *)(p + slot - 8) = asan__size_word(p, 50);
	hits += caught(n, p + slot - 8, ASAN_OUT_OF_BOUNDS, 1);
	ARENA_ASSERT_EQ(arena_free((void __arena *)p), 0);
	n = reports();
	touch(p + 99, 1, 0);
	hits += caught(n, p + 99, ASAN_USE_AFTER_FREE, 0);
	r = &state()->reports[n % ASAN_MAX_REPORTS];
	ARENA_ASSERT_EQ(r->block_size, 100);
	arena_stdout("asan-seeded: caught %d of 5", hits);
	arena_stdout(
		     "asan-expect: use-after-free read of 4 bytes at 0x%llx: 96 bytes into the freed 100-byte block at 0x%llx",
		     p1 + 96, p1);
	arena_stdout(
		     "asan-expect: use-after-free read of 1 byte at 0x%llx: 99 bytes into the freed 100-byte block at 0x%llx",
		     p + 99, p);
	ARENA_ASSERT_EQ(hits, 5);
	return 0;
}

/*
 * The arena's first pages (the globals) get a shadow that says valid: asan_init maps it,
 * and asan_map_low() extends it. A store to a shadow page that is not mapped is dropped
 * on 6.12, which tells mapped from not.
 */
SEC("syscall")
int asan_test_first_pages(struct arena_test_ctx *ctx)
{
	struct asan_state __arena *st = state();
	u64 base = (u64)&later[0] & ~0xffffffffull, low = st->low_pages, inside, beyond;

	ARENA_ASSERT(low >= ASAN_LOW_PAGES);
	ARENA_ASSERT(!asan_shadow_set(&later[0]));
	ARENA_ASSERT_EQ(asan_map_low(ARENA_PAGES), -E2BIG);
	ARENA_ASSERT_EQ(asan_map_low(low), 0);
	ARENA_ASSERT_EQ(st->low_pages, low);
	inside = base + (low + 63) * 4096;
	beyond = base + (low + 64 + 8) * 4096;
	ARENA_ASSERT_EQ(asan_poison((void __arena *)inside, ASAN_REDZONE, 8), 0);
	ARENA_ASSERT(!asan_shadow_set((void __arena *)inside));	/* not mapped yet */
	ARENA_ASSERT_EQ(asan_map_low(low + 64), 0);
	ARENA_ASSERT_EQ(st->low_pages, low + 64);
	ARENA_ASSERT(!asan_shadow_set((void __arena *)inside));	/* mapped, valid */
	ARENA_ASSERT_EQ(asan_poison((void __arena *)inside, ASAN_REDZONE, 8), 0);
	ARENA_ASSERT(asan_shadow_set((void __arena *)inside));
	ARENA_ASSERT_EQ(asan_unpoison((void __arena *)inside, 8), 0);
	ARENA_ASSERT(!asan_shadow_set((void __arena *)inside));
	ARENA_ASSERT_EQ(asan_poison((void __arena *)beyond, ASAN_REDZONE, 8), 0);
	ARENA_ASSERT(!asan_shadow_set((void __arena *)beyond));
	arena_stdout("asan-expect: none");
	return 0;
}

/* p[-1] of the heap window's very first object: the granule before it is poisoned too. */
SEC("syscall")
int asan_test_heap_window_edge(struct arena_test_ctx *ctx)
{
	u64 base = (u64)&later[0] & ~0xffffffffull, first = base + HEAP_WINDOW_START, n;
	struct arena_heap_span __arena *sp0;
	void __arena *p = arena_malloc_sleepable(16);	/* the heap has spans */
	u32 kind;
	int hits;

	ARENA_ASSERT(p);
	sp0 = (struct arena_heap_span __arena *)(base + HEAP_DESC_START);
	ARENA_ASSERT_EQ(sp0->magic, HEAP_SPAN_MAGIC);	/* span 0 is the first one mapped */
	/* Its first object allocated: out of bounds, before it; if not: never allocated. */
	kind = asan_shadow_of(first) >= 0 ? ASAN_OUT_OF_BOUNDS : ASAN_WILD_ACCESS;
	n = reports();
	touch(first - 1, 1, 0);
	hits = caught(n, first - 1, kind, 0);
	arena_free(p);
	arena_stdout("asan-seeded: caught %d of 1", hits);
	arena_stdout("asan-expect: read of 1 byte at 0x%llx", first - 1);
	ARENA_ASSERT_EQ(hits, 1);
	return 0;
}

/* touch()'s frame in the call trace: program:function+offset (file:line). */
#define UPSTREAM_TRACE_LINE \
	"{{[ \t]+}}asan_test_upstream_report_lines:touch+0x{{[0-9a-f]+}} (test_asan.bpf.c:{{[0-9]+}})"

/*
 * The report's lines in the upstream sanitizer's format, checked by the runner through
 * __stderr tags as upstream's tests check them (no asan-expect lines): the access, the
 * task (the runner's comm, root), and a call trace naming the function that wrote.
 */
SEC("syscall")
__stderr("Memory violation for address 0x{{[0-9a-f]+}} for write of size 1")
__stderr("CPU: {{[0-9]+}} UID: 0 PID: {{[1-9][0-9]*}} Comm: runner")
__stderr("Call trace:\n" UPSTREAM_TRACE_LINE)
int asan_test_upstream_report_lines(struct arena_test_ctx *ctx)
{
	u64 p = (u64)arena_malloc(48), n;
	int hits;

	ARENA_ASSERT(p);
	n = reports();
	touch(p + 48, 1, 1);
	hits = caught(n, p + 48, ASAN_OUT_OF_BOUNDS, 1);
	arena_free((void __arena *)p);
	arena_stdout("asan-seeded: caught %d of 1", hits);
	ARENA_ASSERT_EQ(hits, 1);
	return 0;
}

#else /* !LIBARENA_ASAN: the runner skips these in the plain build */

SEC("syscall")
int asan_test_needs_the_sanitizer_build(struct arena_test_ctx *ctx)
{
	return 0;
}

#endif
