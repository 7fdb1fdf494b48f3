/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena address sanitizer: catches out-of-bounds accesses, uses after free, double and
 * invalid frees of arena memory in the sanitizer build (libarena_asan.bpf.o, programs
 * compiled with `make print-asan-cflags`, clang 22 or newer).
 *
 * The compiler checks every access to address space 1 (__arena) against a shadow byte
 * per 8-byte granule, kept in the arena itself at ASAN_SHADOW_START:
 *
 *   0                  all 8 bytes valid
 *   1 .. 7             the first n bytes valid (the end of a block)
 *   ASAN_REDZONE       slack after a block's requested size (out of bounds)
 *   ASAN_FREED         a freed block (use after free), waiting in the quarantine or free
 *   ASAN_UNALLOCATED   memory an allocator manages but never handed out (wild access)
 *   ASAN_RELEASED      memory an allocator gave back to the kernel (wild access)
 *
 * Shadow exists only for memory the allocators manage (heap spans, buddy chunks and page
 * runs), mapped when they map it, and for the arena's first pages (the arena globals),
 * mapped valid at start. Elsewhere (pages a program maps itself) the shadow is not
 * mapped: a load of it reads 0, valid, after a page fault, and nothing is checked.
 *
 * The allocators cooperate: fresh memory is ASAN_UNALLOCATED; arena_malloc(n) and
 * buddy_alloc(b, n) make exactly n bytes valid, the rest of the block poisoned;
 * arena_malloc asks for n + ASAN_REDZONE_SIZE bytes, so its p[n] is caught for every n up
 * to the largest buddy block less the redzone;
 * arena_free() poisons the block and parks it in the quarantine (below) before it is
 * really freed, so a late use is still caught; a double free and a
 * free of a pointer no allocator handed out are reported as such.
 *
 *   asan_init                SEC("syscall"), struct asan_init_args: options; user space
 *                            runs it once (libarena_asan_start())
 *   asan_poison(p, code, n)  mark n bytes from p (8-byte aligned) with a poison code
 *   asan_unpoison(p, n)      make n bytes from p (8-byte aligned) valid, the rest of the
 *                            last granule poisoned
 *   asan_shadow_set(p)       true when the granule of p is poisoned (wholly or partly)
 *   asan_shadow_map(p, n, fill)  sleepable: map the shadow of n bytes from p; fresh
 *                            shadow pages are filled with fill
 *   asan_map_low(pages)      sleepable: map the (valid) shadow of the arena's first pages,
 *                            at least ASAN_LOW_PAGES: asan_init and arena_heap_refill do
 *   arena_quarantine_flush() (heap.h) frees every block in the quarantine now
 *   asan_violated            nonzero once a report was made: the last bad address
 *
 * A report never stops the program: the access goes ahead. Reports are written into the
 * arena (struct asan_state) and printed by user space (libarena_asan_print()) with the
 * kind, the access, the block, the program and the source line.
 */
#ifndef __LIBARENA_ASAN_H
#define __LIBARENA_ASAN_H

#include <libarena/base.h>
#include <libarena/arena_map.h>
#include <libarena/log.h>

#define ASAN_REDZONE		((s8)0xfb)
#define ASAN_FREED		((s8)0xfd)
#define ASAN_UNALLOCATED	((s8)0xfa)
#define ASAN_RELEASED		((s8)0xfe)

/* Slack an allocation keeps after its requested size in the sanitizer build. */
#define ASAN_REDZONE_SIZE	16

/*
 * The quarantine: a ring per size, so that the memory it holds back stays bounded (a
 * byte budget, as the kernel's KASAN and user-space ASan have) and the allocators'
 * working set with it. Blocks of up to ASAN_QUARANTINE_SMALL_SLOT bytes wait in a ring
 * of quarantine_len slots (default ASAN_QUARANTINE_DEFAULT: 64 KiB at most); larger ones
 * up to HEAP_MEDIUM_MAX in one of ASAN_QUARANTINE_MEDIUM (or quarantine_len, if fewer),
 * of which blocks over ASAN_QUARANTINE_MEDIUM_SLOT use the first ASAN_QUARANTINE_BIG:
 * 64 + 512 KiB at most; larger still in one of ASAN_QUARANTINE_LARGE.
 */
#define ASAN_QUARANTINE_MAX	1024	/* slots of all three rings */
#define ASAN_QUARANTINE_DEFAULT	256
#define ASAN_QUARANTINE_SMALL_SLOT	256
#define ASAN_QUARANTINE_MEDIUM	32
#define ASAN_QUARANTINE_MEDIUM_SLOT	2048
#define ASAN_QUARANTINE_BIG	8
#define ASAN_QUARANTINE_LARGE	2
/* The small ring's largest length: the medium and large rings' slots follow it. */
#define ASAN_QUARANTINE_SMALL_MAX	\
	(ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_MEDIUM - ASAN_QUARANTINE_LARGE)
/*
 * The sizes of the latest frees, for reports on freed blocks. Kept by the runtime, not
 * in the block, where a use after free could overwrite it; a block freed longer ago
 * than this many frees is reported without its size.
 */
#define ASAN_FREED_SIZES	1024
/*
 * The arena's first pages hold the arena globals (libbpf puts them at offset 0) and the
 * pages bpf_arena_alloc_pages(NULL) picks first. Their shadow is mapped (valid) when the
 * sanitizer starts: a checked access whose shadow page is not mapped still passes on
 * 6.12, but only after a page fault, some microseconds each.
 */
#define ASAN_LOW_PAGES		64
#define ASAN_MAX_REPORTS	32	/* the latest reports kept for user space */
#define ASAN_STATE_MAGIC	0x4173616eu

/* Report kinds. */
enum asan_kind {
	ASAN_OUT_OF_BOUNDS = 1,
	ASAN_USE_AFTER_FREE,
	ASAN_DOUBLE_FREE,
	ASAN_INVALID_FREE,
	ASAN_WILD_ACCESS,
};

#define ASAN_F_WRITE		1	/* the access wrote */
#define ASAN_F_BEFORE		2	/* the address lies before the block's start */
#define ASAN_F_FREED		4	/* the block is free */
#define ASAN_F_BLOCK		8	/* block, block_size, slot_size are known */
#define ASAN_F_TASK		16	/* uid and comm are known */

struct asan_report {
	u64 seq;		/* 1 + its number since asan_init; 0 while being written */
	u64 addr;		/* first bad byte (or the pointer freed) */
	u64 ip;			/* JIT-ed return address into the code that did it, or 0 */
	u64 block;		/* start of the block the address belongs to */
	u32 block_size;		/* its requested size (freed blocks: the size it had) */
	u32 slot_size;		/* the memory the allocator holds for it */
	u32 size;		/* bytes accessed */
	u32 cpu;
	u8 kind;		/* enum asan_kind */
	u8 flags;		/* ASAN_F_* */
	s8 shadow;		/* shadow byte of addr */
	u8 pad[5];
	u64 access;		/* the access's first byte (addr may be past it) */
	/*
	 * The task the program ran in (whatever was interrupted, for a program run from
	 * an interrupt), as the kernel's reports name it: thread id, real uid, comm.
	 */
	u32 pid;
	u32 uid;
	char comm[16];
};

struct asan_state {
	u32 magic;
	u32 report_first;	/* only the first report is made */
	u64 nr_reports;		/* made since asan_init */
	u64 printed;		/* user space: reports printed so far */
	u64 false_alarms;	/* compiler checks the exact check cleared (unaligned) */
	u32 quarantine_len;	/* the small ring's slots, <= ASAN_QUARANTINE_SMALL_MAX */
	/* Each ring's next slot (small, medium, large). */
	u32 quarantine_head;
	u32 quarantine_medium_head;
	u32 quarantine_large_head;
	u64 shadow_pages;	/* shadow pages mapped */
	u64 low_pages;		/* arena pages from 0 whose shadow is mapped */
	struct asan_report reports[ASAN_MAX_REPORTS];	/* report n at n % MAX */
};

struct asan_init_args {
	u64 arena_all_pages;	/* in: ignored (the upstream API's; shadow is mapped lazily) */
	/*
	 * in: pages of arena globals (libarena_asan_start fills it in); at least
	 * ASAN_LOW_PAGES are covered
	 */
	u64 arena_globals_pages;
	u32 report_first;	/* in: make only the first report */
	u32 quarantine;		/* in: the small ring's slots; 0: default; ~0u: none */
	u64 state;		/* out: user address of struct asan_state */
};

#ifdef __BPF__
/*
 * The runtime's state under upstream's names: the last bad address (set on every
 * report; 0: none yet), reports made since asan_init, whether asan_init ran, whether
 * only the first report is made.
 */
volatile u64 asan_violated __weak;
volatile u32 asan_reported __weak;
volatile bool asan_inited __weak;
volatile bool asan_report_once __weak;

#ifdef LIBARENA_ASAN
int asan_poison(void __arena *addr __arg_arena, s8 val, u64 size);
int asan_unpoison(void __arena *addr __arg_arena, u64 size);
bool asan_shadow_set(void __arena *addr __arg_arena);
int asan_shadow_map(u64 addr, u64 size, s8 fill);
int asan_map_low(u64 pages);
int asan_quarantine_count(void);
u64 asan_state_addr(void);

/* An access of size bytes at addr that the compiler did not check (a copy, a fill). */
int asan_check_range(u64 addr, u64 size, int write);

static __always_inline s8 __arena *asan__shadow(u64 addr)
{
	return (s8 __arena *)(ARENA_USER_BASE + ASAN_SHADOW_START +
			      ((u32)addr >> ASAN_SHADOW_SHIFT));
}

/* The same byte eight times, for a shadow word. */
static __always_inline u64 asan__word(s8 val)
{
	u64 word = (u8)val;

	word |= word << 8;
	word |= word << 16;
	return word | word << 32;
}

/* Eight shadow words from w on. */
static __always_inline void asan__fill_8(u64 __arena *w, u64 word)
{
	w[0] = word;
	w[1] = word;
	w[2] = word;
	w[3] = word;
	w[4] = word;
	w[5] = word;
	w[6] = word;
	w[7] = word;
}

/*
 * Write words 8-byte words from sp, with few loop rounds, as a round costs more than its
 * stores (a 4 KiB block's shadow is 64 words): under eight, a 4-, a 2- and a 1-word run
 * as the count's bits say; from eight on, sixteen to a round, then eight, then the last
 * eight (overlapping words written, with the same value).
 */
static __always_inline void asan__fill_words(u64 sp, u64 words, u64 word)
{
	u64 __arena *w = (u64 __arena *)sp;
	u64 i;

	if (words < 8) {
		if (words & 4) {
			w[0] = word;
			w[1] = word;
			w[2] = word;
			w[3] = word;
			w += 4;
		}
		if (words & 2) {
			w[0] = word;
			w[1] = word;
			w += 2;
		}
		if (words & 1)
			w[0] = word;
		return;
	}
	for (i = zero; i + 16 <= words && can_loop; i += 16) {
		barrier_var(i);		/* as in asan__valid_bytes() */
		asan__fill_8(w + i, word);
		asan__fill_8(w + i + 8, word);
	}
	if (i + 8 <= words)
		asan__fill_8(w + i, word);
	if (i + 8 != words)
		asan__fill_8(w + words - 8, word);
}

/*
 * Write n shadow bytes from sp, with no loop below eight words: under a word, a 4-, a 2-
 * and a 1-byte store as n's bits say; from a word on, a store at each end (unaligned, and
 * overlapping the others with the same value) and aligned words between them.
 */
static __always_inline void asan__fill(u64 sp, u64 n, s8 val)
{
	u64 word = asan__word(val), end = sp + n;

	if (n < 8) {
		if (n & 4) {
			*(u32 __arena *)sp = (u32)word;
			sp += 4;
		}
		if (n & 2) {
			*(u16 __arena *)sp = (u16)word;
			sp += 2;
		}
		if (n & 1)
			*(u8 __arena *)sp = (u8)word;
		return;
	}
	*(u64 __arena *)sp = word;
	*(u64 __arena *)(end - 8) = word;
	sp = (sp + 7) & ~7ull;
	asan__fill_words(sp, (end - sp) / 8, word);
}

static __always_inline int asan__poison(u64 a, u64 size, s8 val)
{
	if (!a || (a & ASAN_GRANULE_MASK))
		return -EINVAL;
	asan__fill((u64)asan__shadow(a), (size + ASAN_SHADOW_SCALE - 1) >> ASAN_SHADOW_SHIFT, val);
	return 0;
}

static __always_inline int asan__unpoison(u64 a, u64 size)
{
	if (!a || (a & ASAN_GRANULE_MASK))
		return -EINVAL;
	asan__fill((u64)asan__shadow(a), size >> ASAN_SHADOW_SHIFT, 0);
	if (size & ASAN_GRANULE_MASK)
		*asan__shadow(a + (size & ~(u64)ASAN_GRANULE_MASK)) = size & ASAN_GRANULE_MASK;
	return 0;
}

/*
 * Requested size of the block at start: its valid bytes, up to slot. A shadow word at
 * a time while all eight granules are valid (a 4 KiB buddy block has no room for its
 * size word: 64 rounds instead of 512), then granule by granule.
 */
static __always_inline u32 asan__valid_bytes(u64 start, u32 slot)
{
	u32 n;
	s8 s;

	for (n = zero; n + 8 * ASAN_SHADOW_SCALE <= slot && can_loop;
	     n += 8 * ASAN_SHADOW_SCALE) {
		/* One variable: a constant-step twin is new to the verifier each round. */
		barrier_var(n);
		if (*(u64 __arena *)asan__shadow(start + n))
			break;
	}
	for (; n < slot && can_loop; n += ASAN_SHADOW_SCALE) {
		s = *asan__shadow(start + n);
		if (s < 0)
			break;
		if (s > 0)
			return n + s;
	}
	return n;
}

/*
 * Requested size of the live block at start, in O(1): the allocation hook keeps it in the
 * slot's last word (inside the redzone) when there is room. An overflow may have
 * overwritten it, and a block too big for one keeps a stale one, so it counts only when
 * the shadow agrees: valid up to it, a redzone right after. Otherwise scan the shadow.
 */
#define ASAN_SIZE_TAG		0x5a5e0000u

static __always_inline u64 asan__size_word(u64 start, u64 size)
{
	return (u64)((u32)size ^ ASAN_SIZE_TAG ^ (u32)start) << 32 | (u32)size;
}

static __always_inline u32 asan__block_size(u64 start, u32 slot)
{
	u64 t, used;
	u32 n;
	s8 last;

	if (slot >= 3 * ASAN_SHADOW_SCALE) {
		t = *(u64 __arena *)(start + slot - ASAN_SHADOW_SCALE);
		n = t;
		used = ((u64)n + ASAN_SHADOW_SCALE - 1) & ~(u64)ASAN_GRANULE_MASK;
		if (t == asan__size_word(start, n) && n && used + ASAN_SHADOW_SCALE <= slot) {
			last = *asan__shadow(start + used - ASAN_SHADOW_SCALE);
			if (last == (s8)(n & ASAN_GRANULE_MASK) &&
			    *asan__shadow(start + used) < 0)
				return n;
		}
	}
	return asan__valid_bytes(start, slot);
}

/*
 * The allocation hook, inline so that it adds no call frame (6.12 allows 8): a block of
 * slot bytes at addr, all of it poisoned (memory the allocator never handed out, or a
 * freed block), handed out for size bytes: those made valid. The rest keeps its poison,
 * whichever code it has: the block, not the code, tells a report it is out of bounds
 * (half the shadow writes of poisoning the slack again).
 */
static __always_inline int asan__alloc_hook(u64 addr, u64 size, u64 slot)
{
	u64 used = (size + ASAN_SHADOW_SCALE - 1) & ~(u64)ASAN_GRANULE_MASK;

	if (asan__unpoison(addr, size))
		return -EINVAL;
	if (slot >= used + ASAN_SHADOW_SCALE)
		*(u64 __arena *)(addr + slot - ASAN_SHADOW_SCALE) = asan__size_word(addr, size);
	return 0;
}

/* The shadow byte of an address, read without a check. */
static __always_inline s8 asan_shadow_of(u64 addr)
{
	return *asan__shadow(addr);
}

/* Upstream's names: where the shadow byte of addr is; whether asan_init has run. */
static __always_inline s8 __arena *mem_to_shadow(void __arena *addr)
{
	return asan__shadow((u64)addr);
}

static __always_inline bool asan_ready(void)
{
	return asan_inited;
}
#endif /* LIBARENA_ASAN */
#endif /* __BPF__ */

#if !defined(__BPF__) || !defined(LIBARENA_ASAN)
/* Plain and host builds: a data structure's explicit check compiles to nothing. */
static __always_inline int asan_check_range(u64 addr, u64 size, int write)
{
	(void)addr;
	(void)size;
	(void)write;
	return 0;
}

/* And so do the runtime's calls (as upstream's plain build has them). */
static __always_inline int asan_poison(void __arena *addr, s8 val, u64 size)
{
	(void)addr;
	(void)val;
	(void)size;
	return 0;
}

static __always_inline int asan_unpoison(void __arena *addr, u64 size)
{
	(void)addr;
	(void)size;
	return 0;
}

static __always_inline bool asan_shadow_set(void __arena *addr)
{
	(void)addr;
	return false;
}

static __always_inline bool asan_ready(void)
{
	return true;
}
#endif

#endif /* __LIBARENA_ASAN_H */
