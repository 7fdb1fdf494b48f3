// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The sanitizer runtime (include/libarena/asan.h has the model). Only the sanitizer
 * build (LIBARENA_ASAN) has it; the plain library compiles this file to nothing.
 *
 * The compiler inlines the shadow check of every __arena access and calls
 * __asan_report_{load,store}N_noabort(addr) when the shadow byte is not 0. The runtime
 * is not instrumented itself, and neither are the allocators, which legitimately touch
 * poisoned memory (free-list links live inside free blocks).
 *
 * Where: 6.12 has no BPF stack dump. Each entry point is a global function, so the x86-64
 * JIT calls it with a native call and keeps the BPF frame pointer in rbp: the return
 * address into the instrumented code sits 8 bytes above the entry's frame pointer.
 * bpf_probe_read_kernel() reads it; user space maps it to the program, function and
 * source line through the program's jited line info.
 */
#include <libarena/common.h>
#include <libarena/asan.h>

#ifdef LIBARENA_ASAN
#pragma clang attribute push(__attribute__((no_sanitize("kernel-address"))), \
			     apply_to = function)

/*
 * The compiler adds this to addr >> 3 and keeps the low 32 bits as the arena offset of
 * the shadow byte: with user addresses at a 4 GiB boundary, that is START + offset / 8.
 */
u64 __asan_shadow_memory_dynamic_address = ASAN_SHADOW_START;

struct asan_state __arena_global asan_state = {
	.magic = ASAN_STATE_MAGIC,
	.quarantine_len = ASAN_QUARANTINE_DEFAULT,
};

u64 __arena_global asan_quarantine[ASAN_QUARANTINE_MAX];

/* Shadow pages mapped: one bit per page of the 512 MiB shadow window. */
#define SHADOW_PAGES	((1u << 29) / 4096)
u64 __arena_global asan_shadow_mapped[SHADOW_PAGES / 64];

static __always_inline u64 base(void)
{
	return (u64)&asan_state & ~0xffffffffull;
}

static __always_inline s8 __arena *shadow_ptr(u64 addr)
{
	return (s8 __arena *)(base() + ASAN_SHADOW_START + ((u32)addr >> ASAN_SHADOW_SHIFT));
}

__weak u64 asan_state_addr(void)
{
	return (u64)&asan_state;
}

/* Write n shadow bytes from sp: bytes to an 8-byte boundary, then words, then bytes. */
static __always_inline void shadow_fill(u64 sp, u64 n, s8 val)
{
	u64 word = (u8)val, end = sp + n, i;

	word |= word << 8;
	word |= word << 16;
	word |= word << 32;
	for (i = zero; sp < end && (sp & 7) && i < 8 && can_loop; i++, sp++)
		*(s8 __arena *)sp = val;
	for (i = zero; sp + 8 <= end && can_loop; i++, sp += 8)
		*(u64 __arena *)sp = word;
	for (i = zero; sp < end && i < 8 && can_loop; i++, sp++)
		*(s8 __arena *)sp = val;
}

__weak int asan_poison(void __arena *addr __arg_arena, s8 val, u64 size)
{
	u64 a = (u64)addr;

	if (!addr || (a & (ASAN_GRANULE - 1)))
		return -EINVAL;
	shadow_fill((u64)shadow_ptr(a), (size + ASAN_GRANULE - 1) >> ASAN_SHADOW_SHIFT, val);
	return 0;
}

__weak int asan_unpoison(void __arena *addr __arg_arena, u64 size)
{
	u64 a = (u64)addr;

	if (!addr || (a & (ASAN_GRANULE - 1)))
		return -EINVAL;
	shadow_fill((u64)shadow_ptr(a), size >> ASAN_SHADOW_SHIFT, 0);
	if (size & (ASAN_GRANULE - 1))
		*shadow_ptr(a + (size & ~(u64)(ASAN_GRANULE - 1))) = size & (ASAN_GRANULE - 1);
	return 0;
}

__weak bool asan_shadow_set(void __arena *addr __arg_arena)
{
	return *shadow_ptr((u64)addr) != 0;
}

/*
 * Map the shadow of [addr, addr + size): sleepable. A page's bit is claimed before it is
 * mapped, so two maintainers never both map it; a page the kernel refuses (someone else's
 * mapping there) is left alone. A fresh shadow page is filled with fill: ASAN_UNALLOCATED
 * inside an allocator's own window, 0 (valid) where other memory may share the page.
 */
__weak int asan_shadow_map(u64 addr, u64 size, s8 fill)
{
	struct asan_state __arena *st = &asan_state;
	u32 first, last, pg, i;
	void __arena *p;

	if (!size)
		return 0;
	first = ((u32)addr >> ASAN_SHADOW_SHIFT) / 4096;
	last = (((u32)addr + size - 1) >> ASAN_SHADOW_SHIFT) / 4096;
	for (i = zero; first + i <= last && i < SHADOW_PAGES && can_loop; i++) {
		pg = (first + i) & (SHADOW_PAGES - 1);
		if (READ_ONCE(asan_shadow_mapped[pg / 64]) & (1ull << (pg % 64)))
			continue;
		if (atomic_fetch_or(&asan_shadow_mapped[pg / 64], 1ull << (pg % 64)) &
		    (1ull << (pg % 64)))
			continue;
		p = bpf_arena_alloc_pages(&arena, (void __arena *)(base() + ASAN_SHADOW_START +
					  (u64)pg * 4096), 1, NUMA_NO_NODE, 0);
		if (!p)
			continue;
		atomic_add(&st->shadow_pages, 1);
		if (fill)
			shadow_fill((u64)p, 4096, fill);
	}
	return 0;
}

/* The first byte of [addr, addr + size) the shadow forbids, or 0. */
static __always_inline u64 first_bad(u64 addr, u64 size)
{
	u64 g = addr & ~(u64)(ASAN_GRANULE - 1), end = addr + size, bad;
	s8 s;

	for (; g < end && can_loop; g += ASAN_GRANULE) {
		s = *shadow_ptr(g);
		if (!s)
			continue;
		bad = s < 0 ? g : g + s;
		if (bad < addr)
			bad = addr;
		if (bad < g + ASAN_GRANULE && bad < end)
			return bad;
	}
	return 0;
}

/* Requested size of the block at start: its valid bytes, up to slot. */
static __always_inline u32 valid_bytes(u64 start, u32 slot)
{
	u32 n;
	s8 s;

	for (n = zero; n < slot && can_loop; n += ASAN_GRANULE) {
		s = *shadow_ptr(start + n);
		if (s < 0)
			break;
		if (s > 0)
			return n + s;
	}
	return n;
}

/* The block (slot start and size) an address falls in, from the allocators. */
static __always_inline bool block_of(u64 addr, u64 *start, u32 *slot)
{
	u64 b = arena_heap_block_of(addr);

	if (!b)
		b = buddy_block_of(addr);
	if (!b)
		return false;
	*start = base() + (u32)b;
	*slot = b >> 32;
	return true;
}

#define FREED_SIZE_OFF	16	/* a freed block keeps its requested size here */

/* Fill in what the report says about the address and its block. */
static __always_inline void describe(struct asan_report __arena *r, u64 addr)
{
	u64 next = (addr | (ASAN_GRANULE - 1)) + 1, start;
	s8 s = *shadow_ptr(addr), sn = *shadow_ptr(next);
	u32 slot;

	r->shadow = s;
	if (!r->kind) {
		if (s > 0 || s == ASAN_REDZONE)
			r->kind = ASAN_OUT_OF_BOUNDS;
		else if (s == ASAN_FREED)
			r->kind = ASAN_USE_AFTER_FREE;
		else
			r->kind = ASAN_WILD_ACCESS;
	}
	/* A poisoned granule right before valid memory: just before that block's start. */
	if (r->kind <= ASAN_WILD_ACCESS && s < 0 && sn >= 0 && block_of(next, &start, &slot) &&
	    start == next) {
		r->kind = ASAN_OUT_OF_BOUNDS;
		r->flags |= ASAN_F_BEFORE | ASAN_F_BLOCK;
		r->block = start;
		r->slot_size = slot;
		r->block_size = valid_bytes(start, slot);
		return;
	}
	if (!block_of(addr, &start, &slot))
		return;
	r->flags |= ASAN_F_BLOCK;
	r->block = start;
	r->slot_size = slot;
	if (*shadow_ptr(start) == ASAN_FREED) {
		r->flags |= ASAN_F_FREED;
		if (slot > FREED_SIZE_OFF + 4)
			r->block_size = *(u32 __arena *)(start + FREED_SIZE_OFF);
	} else {
		r->block_size = valid_bytes(start, slot);
	}
	if (r->kind == ASAN_USE_AFTER_FREE && !(r->flags & ASAN_F_FREED))
		r->kind = ASAN_WILD_ACCESS;
}

/* Record a report. how: ASAN_F_* | kind << 8 (0: from the shadow); ip: where. */
static __always_inline int record(u64 addr, u64 access, u32 size, u32 how, u64 ip)
{
	struct asan_state __arena *st = &asan_state;
	struct asan_report __arena *r;
	u64 n;

	asan_violated = addr;
	if (st->report_first && READ_ONCE(st->nr_reports))
		return 1;
	n = atomic_fetch_add(&st->nr_reports, 1);
	r = &st->reports[n % ASAN_MAX_REPORTS];
	WRITE_ONCE(r->seq, 0);
	r->addr = addr;
	r->access = access;
	r->ip = ip;
	r->size = size;
	r->flags = how & ASAN_F_WRITE;
	r->kind = how >> 8;
	r->block = 0;
	r->block_size = r->slot_size = 0;
	r->cpu = bpf_get_smp_processor_id();
	describe(r, addr);
	smp_store_release(&r->seq, n + 1);
	return 1;
}

/*
 * The return address of the calling frame, depth frames up (1: whoever called the
 * function this is inlined into). x86-64 JIT: rbp is BPF's r10, [rbp] the caller's rbp,
 * [rbp + 8] the return address.
 */
static __always_inline u64 return_ip(int depth)
{
	u64 fp, ip = 0;

	asm volatile("%0 = r10" : "=r"(fp));
	if (depth > 1 && bpf_probe_read_kernel(&fp, sizeof(fp), (void *)fp))
		return 0;
	if (depth > 2 && bpf_probe_read_kernel(&fp, sizeof(fp), (void *)fp))
		return 0;
	if (bpf_probe_read_kernel(&ip, sizeof(ip), (void *)(fp + 8)))
		return 0;
	return ip;
}

#define ASAN_F_TOLD	0x80	/* the compiler's inline check failed */

/*
 * A checked access: reports when some byte of it is poisoned. One global function that
 * every entry point calls, so the verifier checks the report code once per program, and
 * the call chain stays short (8 frames at most on 6.12).
 */
__weak int asan_report_access(u64 addr, u64 size, u32 flags, u64 ip)
{
	struct asan_state __arena *st = &asan_state;
	u64 bad;

	bad = first_bad(addr, size);
	if (!bad) {
		/* The compiler's check is per granule; an unaligned access can be fine. */
		if (flags & ASAN_F_TOLD)
			atomic_add(&st->false_alarms, 1);
		return 0;
	}
	return record(bad, addr, size, flags & ASAN_F_WRITE, ip);
}

#define asan_access(addr, size, flags, ip, told)				\
	asan_report_access(addr, size, (flags) | ((told) ? ASAN_F_TOLD : 0), ip)

/* Free reports: kind ASAN_DOUBLE_FREE or ASAN_INVALID_FREE; depth as in return_ip. */
__weak int asan_free_report(u64 addr, int kind, int depth)
{
	u64 ip = 0;

	if (depth == 2)
		ip = return_ip(2);
	else if (depth == 3)
		ip = return_ip(3);
	return record(addr, addr, 0, kind << 8, ip);
}

/* Calls the library makes on behalf of a caller (arena_memset): 2 frames up. */
__weak int asan_check_range(u64 addr, u64 size, int write)
{
	if (!size)
		return 0;
	return asan_access(addr, size, write ? ASAN_F_WRITE : 0, return_ip(2), false);
}

/* A block of slot bytes at addr handed out for size bytes: valid, the rest redzone. */
__weak int asan_alloc_hook(u64 addr, u64 size, u64 slot)
{
	u64 used = (size + ASAN_GRANULE - 1) & ~(u64)(ASAN_GRANULE - 1);

	if (!addr || (addr & (ASAN_GRANULE - 1)))
		return -EINVAL;
	asan_unpoison((void __arena *)addr, size);
	if (slot > used)
		asan_poison((void __arena *)(addr + used), ASAN_REDZONE, slot - used);
	return 0;
}

/* A block of slot bytes at addr is freed: keep its size for reports, poison it. */
__weak int asan_free_hook(u64 addr, u64 slot)
{
	u32 size;

	if (!addr || (addr & (ASAN_GRANULE - 1)))
		return -EINVAL;
	if (*shadow_ptr(addr) == ASAN_FREED)
		return 0;
	size = valid_bytes(addr, slot);
	if (slot >= FREED_SIZE_OFF + 8)
		*(u32 __arena *)(addr + FREED_SIZE_OFF) = size;
	return asan_poison((void __arena *)addr, ASAN_FREED, slot);
}

/*
 * Park a freed block of size bytes; returns the block that leaves the quarantine (to be
 * freed now), or 0. Large blocks have a few slots of their own at the end, so that the
 * chunks non-sleepable callers depend on do not all sit in the quarantine.
 */
__weak u64 asan_quarantine_push(u64 addr, u64 size)
{
	struct asan_state __arena *st = &asan_state;
	u32 len = READ_ONCE(st->quarantine_len), i;

	if (!len || len > ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_LARGE)
		return addr;
	if (size > HEAP_MEDIUM_MAX)
		i = ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_LARGE +
		    atomic_fetch_add(&st->quarantine_large_head, 1) % ASAN_QUARANTINE_LARGE;
	else
		i = atomic_fetch_add(&st->quarantine_head, 1) % len;
	return xchg(&asan_quarantine[i & (ASAN_QUARANTINE_MAX - 1)], addr);
}

/* Free every quarantined block now: how many. Any program. */
__weak int asan_quarantine_flush(void)
{
	u64 addr;
	int n = 0;
	u32 i;

	for (i = zero; i < ASAN_QUARANTINE_MAX && can_loop; i++) {
		if (!READ_ONCE(asan_quarantine[i]))
			continue;
		addr = xchg(&asan_quarantine[i], 0);
		if (addr && !arena_free_now((void __arena *)addr))
			n++;
	}
	return n;
}

/*
 * The entry points the compiler emits. Global functions returning int: the 6.12 verifier
 * takes no global function returning void, and checks each of these once.
 */
#define ASAN_ENTRY(size)								\
__weak int __asan_report_load##size##_noabort(u64 addr)					\
{											\
	return asan_access(addr, size, 0, return_ip(1), true);				\
}											\
__weak int __asan_report_store##size##_noabort(u64 addr)				\
{											\
	return asan_access(addr, size, ASAN_F_WRITE, return_ip(1), true);			\
}											\
__weak int __asan_load##size##_noabort(u64 addr)					\
{											\
	return asan_access(addr, size, 0, return_ip(1), false);				\
}											\
__weak int __asan_store##size##_noabort(u64 addr)					\
{											\
	return asan_access(addr, size, ASAN_F_WRITE, return_ip(1), false);			\
}											\
__weak int __asan_load##size(u64 addr)							\
{											\
	return asan_access(addr, size, 0, return_ip(1), false);				\
}											\
__weak int __asan_store##size(u64 addr)							\
{											\
	return asan_access(addr, size, ASAN_F_WRITE, return_ip(1), false);			\
}

ASAN_ENTRY(1)
ASAN_ENTRY(2)
ASAN_ENTRY(4)
ASAN_ENTRY(8)
ASAN_ENTRY(16)

__weak int __asan_report_load_n_noabort(u64 addr, u64 size)
{
	return asan_access(addr, size, 0, return_ip(1), true);
}

__weak int __asan_report_store_n_noabort(u64 addr, u64 size)
{
	return asan_access(addr, size, ASAN_F_WRITE, return_ip(1), true);
}

__weak int __asan_loadN_noabort(u64 addr, u64 size)
{
	return asan_access(addr, size, 0, return_ip(1), false);
}

__weak int __asan_storeN_noabort(u64 addr, u64 size)
{
	return asan_access(addr, size, ASAN_F_WRITE, return_ip(1), false);
}

__weak int __asan_loadN(u64 addr, u64 size)
{
	return asan_access(addr, size, 0, return_ip(1), false);
}

__weak int __asan_storeN(u64 addr, u64 size)
{
	return asan_access(addr, size, ASAN_F_WRITE, return_ip(1), false);
}

/*
 * memset, memcpy and memmove on arena memory (the compiler's __asan_ prefix): checked as
 * one access each, then done. Addresses are user addresses of the arena.
 */
__weak u64 __asan_memset(u64 dst, int c, u64 n)
{
	u8 __arena *d = (u8 __arena *)dst;
	u64 i;

	asan_access(dst, n, ASAN_F_WRITE, return_ip(1), false);
	for (i = zero; i < n && can_loop; i++)
		d[i] = c;
	return dst;
}

__weak u64 __asan_memmove(u64 dst, u64 src, u64 n)
{
	u8 __arena *d = (u8 __arena *)dst;
	u8 __arena *s = (u8 __arena *)src;
	u64 i;

	asan_access(src, n, 0, return_ip(1), false);
	asan_access(dst, n, ASAN_F_WRITE, return_ip(1), false);
	if (dst <= src) {
		for (i = zero; i < n && can_loop; i++)
			d[i] = s[i];
	} else {
		for (i = zero; i < n && can_loop; i++)
			d[n - 1 - i] = s[n - 1 - i];
	}
	return dst;
}

__weak u64 __asan_memcpy(u64 dst, u64 src, u64 n)
{
	return __asan_memmove(dst, src, n);
}

/* Options, and where the state lives. User space runs it once (libarena_asan_init). */
SEC("syscall")
__weak int asan_init(struct asan_init_args *args)
{
	struct asan_state __arena *st = &asan_state;

	if (!args)
		return -EINVAL;
	st->magic = ASAN_STATE_MAGIC;
	st->report_first = !!args->report_first;
	if (args->quarantine == ~0u)
		st->quarantine_len = 0;
	else if (args->quarantine)
		st->quarantine_len = args->quarantine <
				     ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_LARGE ? args->quarantine :
				     ASAN_QUARANTINE_MAX - ASAN_QUARANTINE_LARGE;
	args->state = (u64)st;
	return 0;
}

#pragma clang attribute pop
#endif /* LIBARENA_ASAN */
