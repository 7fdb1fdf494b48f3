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
#include <libarena/asan.h>
#include <libarena/log.h>
#include "alloc_internal.h"

#ifdef LIBARENA_ASAN
ARENA_NOASAN_BEGIN

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

/* The latest frees: size << 32 | arena offset of the block, the newest at head - 1. */
u64 __arena_global asan_freed[ASAN_FREED_SIZES];
u64 __arena_global asan_freed_head;

/* Shadow pages mapped: one bit per page of the 512 MiB shadow window. */
#define SHADOW_PAGES	((1u << 29) / 4096)
u64 __arena_global asan_shadow_mapped[SHADOW_PAGES / 64];

__weak u64 asan_state_addr(void)
{
	return (u64)&asan_state;
}

__weak int asan_poison(void __arena *addr __arg_arena, s8 val, u64 size)
{
	return asan__poison((u64)addr, size, val);
}

__weak int asan_unpoison(void __arena *addr __arg_arena, u64 size)
{
	return asan__unpoison((u64)addr, size);
}

__weak bool asan_shadow_set(void __arena *addr __arg_arena)
{
	return *asan__shadow((u64)addr) != 0;
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
		p = bpf_arena_alloc_pages(&arena, (void __arena *)(ARENA_USER_BASE +
					  ASAN_SHADOW_START + (u64)pg * 4096), 1, NUMA_NO_NODE, 0);
		if (!p)
			continue;
		atomic_add(&st->shadow_pages, 1);
		if (fill)
			asan__fill((u64)p, 4096, fill);
	}
	return 0;
}

/* Sleepable: the shadow of the arena's first pages (see ASAN_LOW_PAGES), once. */
__weak int asan_map_low(u64 pages)
{
	struct asan_state __arena *st = &asan_state;
	u64 old;
	u32 i;

	if (pages < ASAN_LOW_PAGES)
		pages = ASAN_LOW_PAGES;
	/* Below the heap window: its shadow says never allocated until spans are mapped. */
	if (pages > HEAP_WINDOW_START / 4096)
		return -E2BIG;
	if (READ_ONCE(st->low_pages) >= pages)
		return 0;
	asan_shadow_map(ARENA_USER_BASE, pages * 4096, 0);
	for (i = zero; i < 64 && can_loop; i++) {
		old = READ_ONCE(st->low_pages);
		if (old >= pages || cmpxchg(&st->low_pages, old, pages) == old)
			break;
	}
	return 0;
}

/* The first byte of [addr, addr + size) the shadow forbids, or 0. */
static __always_inline u64 first_bad(u64 addr, u64 size)
{
	u64 g = addr & ~(u64)ASAN_GRANULE_MASK, end = addr + size, bad;
	s8 s;

	for (; g < end && can_loop; g += ASAN_SHADOW_SCALE) {
		s = *asan__shadow(g);
		if (!s)
			continue;
		bad = s < 0 ? g : g + s;
		if (bad < addr)
			bad = addr;
		if (bad < g + ASAN_SHADOW_SCALE && bad < end)
			return bad;
	}
	return 0;
}

/*
 * The requested size of the freed block at start: the size word the allocation hook left
 * in its slot (freeing poisons the shadow, not the block), else from the latest frees of
 * blocks without one; 0: unknown.
 */
static __always_inline u32 freed_size(u64 start, u32 slot)
{
	u64 head = READ_ONCE(asan_freed_head), e, t, used;
	u32 k, n;

	if (slot >= 3 * ASAN_SHADOW_SCALE) {
		t = *(u64 __arena *)(start + slot - ASAN_SHADOW_SCALE);
		n = t;
		used = ((u64)n + ASAN_SHADOW_SCALE - 1) & ~(u64)ASAN_GRANULE_MASK;
		if (n && t == asan__size_word(start, n) && used + ASAN_SHADOW_SCALE <= slot)
			return n;
	}

	for (k = zero; k < ASAN_FREED_SIZES && k < head && can_loop; k++) {
		e = READ_ONCE(asan_freed[(head - 1 - k) & (ASAN_FREED_SIZES - 1)]);
		if ((u32)e == (u32)start)
			return e >> 32;
	}
	return 0;
}

/* The block (slot start and size) an address falls in: alloc_internal.h reads it. */
static __always_inline bool block_of(u64 addr, u64 *start, u32 *slot)
{
	u64 b = arena_block_lookup(addr);

	if (!b)
		return false;
	*start = ARENA_USER_BASE + (u32)b;
	*slot = (b & ~ARENA_BLOCK_FREE) >> 32;
	return true;
}

static __always_inline void describe(struct asan_report __arena *r, u64 addr)
{
	u64 next = (addr | ASAN_GRANULE_MASK) + 1, start;
	s8 s = *asan__shadow(addr), sn = *asan__shadow(next);
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
		r->block_size = asan__block_size(start, slot);
		return;
	}
	/*
	 * A poisoned granule (not a freed block's) right after a live block that ends
	 * where it starts: one past that block's end. A power-of-two buddy block has no
	 * slack, so its first byte past is often a block never handed out.
	 */
	if (r->kind == ASAN_WILD_ACCESS && s != ASAN_FREED && !(addr & ASAN_GRANULE_MASK) &&
	    *asan__shadow(addr - 1) == 0 && block_of(addr - 1, &start, &slot) &&
	    *asan__shadow(start) != ASAN_FREED &&
	    start + asan__block_size(start, slot) == addr) {
		r->kind = ASAN_OUT_OF_BOUNDS;
		r->flags |= ASAN_F_BLOCK;
		r->block = start;
		r->slot_size = slot;
		r->block_size = addr - start;
		return;
	}
	if (!block_of(addr, &start, &slot))
		return;
	r->flags |= ASAN_F_BLOCK;
	r->block = start;
	r->slot_size = slot;
	if (*asan__shadow(start) == ASAN_FREED) {
		r->flags |= ASAN_F_FREED;
		r->block_size = freed_size(start, slot);
	} else {
		r->block_size = asan__block_size(start, slot);
	}
	if (r->kind == ASAN_DOUBLE_FREE || r->kind == ASAN_INVALID_FREE)
		return;
	/*
	 * The block decides, not the poison code: a live block's slack keeps whatever
	 * poison its memory had (never allocated, or freed with a former, larger block). A
	 * block with no valid byte was never handed out: the code stands.
	 */
	if (r->flags & ASAN_F_FREED)
		r->kind = ASAN_USE_AFTER_FREE;
	else if (r->block_size && addr >= start + r->block_size)
		r->kind = ASAN_OUT_OF_BOUNDS;
	else if (r->kind == ASAN_USE_AFTER_FREE)
		r->kind = ASAN_WILD_ACCESS;
}

/*
 * The task a report names: its thread id, real uid and comm, as the kernel's reports
 * do. The runtime is linked into programs of every type, and 6.12 gives
 * bpf_get_current_uid_gid() and bpf_get_current_comm() only to some (tracing, cgroup,
 * a few networking types): a call to either makes the verifier reject a struct_ops or
 * tc program. bpf_get_current_pid_tgid() is in bpf_base_func_proto for every type, and
 * bpf_get_current_task() with bpf_probe_read_kernel() in its CAP_PERFMON part, which
 * return_ip() needs already. One u64 on the stack: the runtime runs deep in the
 * caller's frames. A read that fails leaves uid 0 and comm empty, without ASAN_F_TASK.
 */
static __always_inline void record_task(struct asan_report __arena *r)
{
	struct task_struct *t;
	u64 w;

	r->pid = (u32)bpf_get_current_pid_tgid();
	r->uid = 0;
	*(u64 __arena *)&r->comm[0] = 0;
	*(u64 __arena *)&r->comm[8] = 0;
	t = (struct task_struct *)bpf_get_current_task();
	if (!t || bpf_probe_read_kernel(&w, sizeof(w), &t->cred))
		return;
	w = (u64)&((const struct cred *)w)->uid.val;
	if (bpf_probe_read_kernel(&w, sizeof(u32), (void *)w))
		return;
	r->uid = (u32)w;	/* the half the read wrote (little-endian) */
	if (bpf_probe_read_kernel(&w, sizeof(w), &t->comm[0]))
		return;
	*(u64 __arena *)&r->comm[0] = w;
	if (bpf_probe_read_kernel(&w, sizeof(w), &t->comm[8]))
		return;
	*(u64 __arena *)&r->comm[8] = w;
	r->flags |= ASAN_F_TASK;
}

/* Record a report. how: ASAN_F_* | kind << 8 (0: from the shadow); ip: where. */
static __always_inline int record(u64 addr, u64 access, u32 size, u32 how, u64 ip)
{
	struct asan_state __arena *st = &asan_state;
	struct asan_report __arena *r;
	u64 n;

	asan_violated = addr;
	__sync_fetch_and_add(&asan_reported, 1);
	/* report_first: asan_init's option; asan_report_once: upstream's name for it. */
	if ((st->report_first || READ_ONCE(asan_report_once)) && READ_ONCE(st->nr_reports))
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
	record_task(r);
	describe(r, addr);
	/* The report before its seq: pairs with the acquire of seq in userspace/asan.c. */
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

/* A checked access: reports when some byte of it is poisoned. */
static __always_inline int report_access(u64 addr, u64 size, u32 flags, u64 ip)
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
	report_access(addr, size, (flags) | ((told) ? ASAN_F_TOLD : 0), ip)

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

/* Blocks in the quarantine now. */
__weak int asan_quarantine_count(void)
{
	int n = 0;
	u32 i;

	for (i = zero; i < ASAN_QUARANTINE_MAX && can_loop; i++)
		n += !!READ_ONCE(asan_quarantine[i]);
	return n;
}

/*
 * Take quarantine slot i: its block (freed, poisoned) or 0. The heap's
 * arena_quarantine_flush() frees what it takes: the sanitizer calls no allocator.
 */
__weak u64 asan_hook_quarantine_take(u32 i)
{
	if (!READ_ONCE(asan_quarantine[i & (ASAN_QUARANTINE_MAX - 1)]))
		return 0;
	return xchg(&asan_quarantine[i & (ASAN_QUARANTINE_MAX - 1)], 0);
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

/*
 * The compiler turns every memset, memcpy and memmove of an instrumented function into
 * these calls, whatever memory they touch: the stack, a map value, the arena. A global
 * function takes scalars only, so these are hidden: libbpf makes them static, and the
 * verifier checks each call with the caller's pointers. The cost: they cannot tell arena
 * memory from the rest, so they do not check the shadow (arena_memset does).
 */
__asan_hidden int __asan_memset(void *dst, int c, u64 n)
{
	u8 *d = dst;
	u64 i;

	for (i = zero; i < n && can_loop; i++)
		d[i] = c;
	return 0;
}

__asan_hidden int __asan_memmove(void *dst, const void *src, u64 n)
{
	const u8 *s = src;
	u8 *d = dst;
	u64 i;

	if (d <= s) {
		for (i = zero; i < n && can_loop; i++)
			d[i] = s[i];
	} else {
		for (i = zero; i < n && can_loop; i++)
			d[n - 1 - i] = s[n - 1 - i];
	}
	return 0;
}

__asan_hidden int __asan_memcpy(void *dst, const void *src, u64 n)
{
	const u8 *s = src;
	u8 *d = dst;
	u64 i;

	for (i = zero; i < n && can_loop; i++)
		d[i] = s[i];
	return 0;
}

/* Options, and where the state lives. User space runs it once (libarena_asan_start). */
SEC("syscall")
__weak int asan_init(struct asan_init_args *args)
{
	struct asan_state __arena *st = &asan_state;
	int err;

	if (!args)
		return -EINVAL;
	if (arena_misplaced(__func__, (u64)st))
		return -EFAULT;
	st->magic = ASAN_STATE_MAGIC;
	st->report_first = !!args->report_first;
	if (args->quarantine == ~0u)
		st->quarantine_len = 0;
	else if (args->quarantine)
		st->quarantine_len = args->quarantine < ASAN_QUARANTINE_SMALL_MAX ?
				     args->quarantine : ASAN_QUARANTINE_SMALL_MAX;
	args->state = (u64)st;
	asan_report_once = st->report_first;
	err = asan_map_low(args->arena_globals_pages);
	asan_inited = !err;
	return err;
}

ARENA_NOASAN_END
#endif /* LIBARENA_ASAN */
