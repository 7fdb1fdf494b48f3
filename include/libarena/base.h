/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena base layer: the primitives every other part of the library builds on. It
 * includes no component header; each library file includes this and the headers of the
 * components it uses. Programs may include <libarena/common.h> instead, which adds the
 * log and the allocator as the upstream libarena's common.h does.
 *
 *   __arena                 address space of arena memory (1 in BPF, plain C on the host)
 *   arena                   the weak 4 GiB arena map every component shares
 *   zero                    opaque zero: start can_loop counters from it
 *   can_loop                true while the verifier's may_goto budget lasts
 *   barrier(), barrier_var(x)            compiler barriers
 *   READ_ONCE(x), WRITE_ONCE(x, v)       single, untorn accesses
 *   smp_mb(), smp_rmb(), smp_wmb()       CPU memory barriers
 *   smp_load_acquire(p), smp_store_release(p, v)
 *   cmpxchg(p, old, new), xchg(p, v)     atomics on arena (and any) memory;
 *                                        they return the old value and are full barriers
 *   atomic_add(p, v), atomic_fetch_add(p, v)
 *   arena_subprog_init()    tie a subprogram to the arena map (see below)
 *   arena_fls(word)         1-based index of the highest set bit, 0 for 0
 *   __noasan                a function the sanitizer build does not instrument
 *
 * The same header compiles as ordinary C (no __BPF__): data-structure sources can then
 * be built natively on the host and tested under valgrind, sanitizers and fuzzers.
 *
 * Arena pointers in BPF hold user-space addresses: (u64)ptr is the address user space
 * sees. Casting one to a plain pointer ((void *)ptr) gives its 32-bit arena offset.
 *
 * User space talks to the library through SEC("syscall") programs:
 *   arena_get_info(struct arena_get_info_args *)   where the arena and its log live
 */
#ifndef __LIBARENA_BASE_H
#define __LIBARENA_BASE_H

/*
 * What a call of the library takes of the verifier's budget of a call chain, 8 frames
 * and 512 bytes of stack (README, "The verifier's budget"), counted one way everywhere:
 * the frames below the caller (the call's own global function included; inline code
 * takes none) and the stack of those frames, each rounded up to 16 bytes. A caller at
 * frame d of its program (the program's own function is frame 1), whose chain holds s
 * bytes so far, may make a call of f frames and b bytes when d + f <= 8 and
 * s + b <= 512. Every public call takes at most ARENA_CALL_FRAMES and ARENA_CALL_STACK
 * (so any of them can be made from the fifth frame); arena_malloc() and arena_free()
 * at most ARENA_ALLOC_FRAMES and ARENA_ALLOC_STACK (heap.h). The sanitizer build's calls
 * that map pages reach its shadow's mapping, a frame more, and its frames are bigger.
 * scripts/frame-budget checks the figures on the built objects; tests/test_frames.bpf.c
 * makes the calls at those depths in the VM.
 */
#define ARENA_CALL_FRAMES_PLAIN		3
#define ARENA_CALL_STACK_PLAIN		256
#define ARENA_CALL_FRAMES_SANITIZER	4
#define ARENA_CALL_STACK_SANITIZER	288
#if defined(LIBARENA_ASAN) || defined(BPF_ARENA_ASAN)
#define ARENA_CALL_FRAMES	ARENA_CALL_FRAMES_SANITIZER
#define ARENA_CALL_STACK	ARENA_CALL_STACK_SANITIZER
#else
#define ARENA_CALL_FRAMES	ARENA_CALL_FRAMES_PLAIN
#define ARENA_CALL_STACK	ARENA_CALL_STACK_PLAIN
#endif

/* The sanitizer build: ours is selected by LIBARENA_ASAN, upstream's by BPF_ARENA_ASAN. */
#if defined(BPF_ARENA_ASAN) && !defined(LIBARENA_ASAN)
#define LIBARENA_ASAN
#endif
#if defined(LIBARENA_ASAN) && !defined(BPF_ARENA_ASAN)
#define BPF_ARENA_ASAN
#endif

/* Number of 4 KiB pages of the arena: 4 GiB, the most one arena can map. */
#define ARENA_PAGES	(1u << 20)

/*
 * Fixed user-space address of the arena, so a pointer means the same in BPF and in
 * user space. libbpf maps the arena there when it loads the object.
 */
#ifdef ARENA_USER_BASE
/* Set by the build: the host tests move it out of the sanitizers' shadow memory. */
#elif defined(__TARGET_ARCH_arm64) || defined(__aarch64__)
#define ARENA_USER_BASE	(1ull << 32)
#else
#define ARENA_USER_BASE	(1ull << 44)
#endif

#ifdef __BPF__

/*
 * A distribution kernel's vmlinux.h (Debian's 6.12, with zbud and z3fold) declares
 * `enum buddy`, which takes the tag of the allocator's `struct buddy` (the upstream
 * API's name). The kernel's, which no BPF program needs, is renamed on the way in. So
 * include this header before, or instead of, vmlinux.h.
 */
#define buddy __vmlinux_buddy
#include <vmlinux.h>
#undef buddy
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#ifndef __BPF_FEATURE_ADDR_SPACE_CAST
#error "libarena needs clang 19 or newer (__BPF_FEATURE_ADDR_SPACE_CAST)"
#endif

/* vmlinux.h has no errno values; the library returns them as the kernel does. */
#ifndef EINVAL
#define EPERM		1
#define ENOENT		2
#define EINTR		4
#define EIO		5
#define E2BIG		7
#define EBADF		9
#define EAGAIN		11
#define ENOMEM		12
#define EFAULT		14
#define EBUSY		16
#define EEXIST		17
#define EINVAL		22
#define ENOSPC		28
#define ERANGE		34
#define EDEADLK		35
#define ENOSYS		38
#define EOVERFLOW	75
#define EOPNOTSUPP	95
#define ETIMEDOUT	110
#define EALREADY	114
#define EUCLEAN		117
#endif

#define __arena __attribute__((address_space(1)))
#define __arena_global __attribute__((address_space(1)))

struct {
	__uint(type, BPF_MAP_TYPE_ARENA);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ARENA_PAGES);
	__ulong(map_extra, ARENA_USER_BASE);
} arena __weak SEC(".maps");

/*
 * Opaque zero: the verifier cannot know its value, so a loop counter started from it
 * stays imprecise and does not make the verifier walk every iteration. Not const on
 * purpose: a const volatile lives in .rodata, which the verifier reads as a constant.
 */
volatile u32 zero __weak;

/*
 * can_loop: true until the loop budget the verifier grants (may_goto) is spent, then
 * false, so a loop that tests it ends however its other bound fares. An inline function
 * around the one instruction: inlined, each loop gets a may_goto of its own.
 */
#ifdef __BPF_FEATURE_MAY_GOTO
static __always_inline bool arena_may_go_on(void)
{
	asm volatile goto("may_goto %l[spent]" :::: spent);
	return true;
spent:
	return false;
}
#define can_loop	arena_may_go_on()
#else
#error "libarena needs a compiler with may_goto (__BPF_FEATURE_MAY_GOTO)"
#endif

/*
 * A subprogram that touches only arena pointers must name the arena map somewhere, or the
 * verifier does not know which arena its pointers belong to.
 */
#define arena_subprog_init() asm volatile("" :: "r"(&arena))

/* Upstream's names. clang casts arena pointers itself: the casts are no-ops. */
#define cast_kern(ptr) ((void)(ptr))
#define cast_user(ptr) ((void)(ptr))
/* The arena's user-space base, read from the map: arena_base(&arena). */
#define arena_base(map)	((void __arena *)((struct bpf_arena *)(map))->user_vm_start)
/* A global in a data section (and so a map) of its own. */
#define private(name)	SEC(".data." #name) __hidden __attribute__((aligned(8)))

/* Arena kfuncs available since 6.9; declared here so vmlinux.h need not carry them. */
void __arena *bpf_arena_alloc_pages(void *map, void __arena *addr, u32 page_cnt,
				    int node_id, u64 flags) __ksym __weak;
void bpf_arena_free_pages(void *map, void __arena *ptr, u32 page_cnt) __ksym __weak;
void bpf_preempt_disable(void) __ksym __weak;
void bpf_preempt_enable(void) __ksym __weak;

#ifndef __arg_arena
#define __arg_arena __attribute((btf_decl_tag("arg:arena")))
#endif

#else /* !__BPF__: the host build */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef unsigned long long u64;	/* as in vmlinux.h: one printf format for both */
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef long long s64;

#define __arena
#define __arena_global
#define cast_kern(ptr) ((void)(ptr))
#define cast_user(ptr) ((void)(ptr))
#define __arg_arena
#ifndef __weak
#define __weak __attribute__((weak))
#endif
#define can_loop true
#define arena_subprog_init() do { } while (0)
volatile u32 zero __weak;

#endif /* __BPF__ */

#ifndef NUMA_NO_NODE
#define NUMA_NO_NODE (-1)
#endif

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif
#ifndef __noinline
#define __noinline __attribute__((noinline))
#endif
#ifndef __maybe_unused
#define __maybe_unused __attribute__((__unused__))
#endif
#ifndef likely
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#endif
#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

#define barrier() asm volatile("" ::: "memory")

/*
 * Called in spin loops. Nothing to do in BPF, where lock holders run with preemption
 * disabled; a host build, whose lock holders can be descheduled, defines it to yield.
 */
#ifndef arena_cpu_relax
#define arena_cpu_relax() barrier()
#endif
/* Make the compiler forget what it knows about var (and stop strength-reducing it). */
#define barrier_var(var) asm volatile("" : "+r"(var))

#ifdef __BPF__
/*
 * Ours wins over an earlier definition (sched_ext's scx/common.bpf.h copies through a
 * union of plain memory, which arena pointers cannot take): the same access, either way.
 */
#undef READ_ONCE
#undef WRITE_ONCE
#define READ_ONCE(x) (*(const volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, val) ((*(volatile __typeof__(x) *)&(x)) = (val))
#else
/* The host build states the C11 semantics, so ThreadSanitizer can check them. */
#define READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define WRITE_ONCE(x, val) __atomic_store_n(&(x), (val), __ATOMIC_RELAXED)
#endif

/*
 * Memory ordering. The BPF instruction set of 6.12 has no fence and no load-acquire or
 * store-release instruction, but every atomic read-modify-write is JIT-ed as a locked
 * instruction on x86-64, a full barrier. x86-64 is TSO: loads are not reordered with
 * loads nor stores with stores, so acquire and release need only stop the compiler.
 * Other architectures get a full barrier for each.
 */
#ifdef __BPF__
/* The result is used so that clang keeps the fetch (ordered) form of the atomic. */
#define smp_mb()						\
	({ volatile u64 __mb_dummy = 0;				\
	u64 __mb_old = __sync_fetch_and_add(&__mb_dummy, 0);	\
	barrier_var(__mb_old); })
#else
/* Host: a sequentially consistent fence, every access before it before every one after. */
#define smp_mb() __sync_synchronize()
#endif

#ifndef __BPF__
/* Earlier loads before later loads (C11 acquire fence: and later stores). */
#define smp_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
/* Earlier stores before later stores (C11 release fence: and earlier loads). */
#define smp_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)
/* The load before every later access; pairs with a smp_store_release() of *p. */
#define smp_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
/* Every earlier access before the store; pairs with a smp_load_acquire() of *p. */
#define smp_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#elif defined(__TARGET_ARCH_x86)
/* TSO keeps loads in order with loads: only the compiler must not reorder them. */
#define smp_rmb() barrier()
/* TSO keeps stores in order with stores: only the compiler must not reorder them. */
#define smp_wmb() barrier()
/* TSO never moves later accesses above a load: keep the compiler from doing it. */
#define smp_load_acquire(p)					\
	({ __auto_type ___v = READ_ONCE(*(p)); barrier(); ___v; })
/* TSO never moves a store above earlier accesses: keep the compiler from doing it. */
#define smp_store_release(p, v)					\
	do { barrier(); WRITE_ONCE(*(p), (v)); } while (0)
#else
/* No lighter fence in 6.12's instruction set: a full one orders the loads. */
#define smp_rmb() smp_mb()
/* No lighter fence in 6.12's instruction set: a full one orders the stores. */
#define smp_wmb() smp_mb()
/* The load, then a full barrier before every later access; pairs with smp_store_release(). */
#define smp_load_acquire(p) ({ __auto_type ___v = READ_ONCE(*(p)); smp_mb(); ___v; })
/* A full barrier after every earlier access, then the store; pairs with smp_load_acquire(). */
#define smp_store_release(p, v) do { smp_mb(); WRITE_ONCE(*(p), (v)); } while (0)
#endif

/*
 * Atomics: full barriers; the fetch forms return the old value. Sizes 4 and 8 only in
 * BPF. The 6.12 x86-64 JIT cannot do fetch-and/or/xor on arena memory ("BPF_ATOMIC
 * stores into R1 arena is not allowed"): those are compare-and-swap loops, bounded by
 * can_loop (and like every may_goto loop, they give up only if the budget runs out).
 */
#define cmpxchg(p, old, new) __sync_val_compare_and_swap((p), (old), (new))
#ifdef __BPF__
#define xchg(p, v) __sync_lock_test_and_set((p), (v))
#else
/* gcc's __sync_lock_test_and_set is only an acquire: state the full barrier BPF has. */
#define xchg(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#endif
#define atomic_fetch_add(p, v) __sync_fetch_and_add((p), (v))
#define atomic_add(p, v) ((void)__sync_fetch_and_add((p), (v)))

#ifdef __BPF__
#define arena_fetch_op(p, v, op)						\
({										\
	__auto_type ___old = READ_ONCE(*(p));					\
	__auto_type ___cur = ___old;						\
	__auto_type ___val = (v);						\
										\
	while (can_loop) {							\
		___cur = cmpxchg((p), ___old, ___old op ___val);		\
		if (___cur == ___old)						\
			break;							\
		___old = ___cur;						\
	}									\
	___old;									\
})
#define atomic_fetch_or(p, v) arena_fetch_op(p, v, |)
#define atomic_fetch_and(p, v) arena_fetch_op(p, v, &)
#define atomic_fetch_xor(p, v) arena_fetch_op(p, v, ^)
/* clang emits the fetch forms even when the result is unused. */
#define atomic_or(p, v) ((void)atomic_fetch_or(p, v))
#define atomic_and(p, v) ((void)atomic_fetch_and(p, v))
#define atomic_xor(p, v) ((void)atomic_fetch_xor(p, v))
#else
#define atomic_or(p, v) ((void)__sync_fetch_and_or((p), (v)))
#define atomic_and(p, v) ((void)__sync_fetch_and_and((p), (v)))
#define atomic_xor(p, v) ((void)__sync_fetch_and_xor((p), (v)))
#define atomic_fetch_or(p, v) __sync_fetch_and_or((p), (v))
#define atomic_fetch_and(p, v) __sync_fetch_and_and((p), (v))
#define atomic_fetch_xor(p, v) __sync_fetch_and_xor((p), (v))
#endif

/*
 * The arena's user address, from the user address of anything in it: an arena sits on a
 * 4 GiB boundary (map_extra), so a pointer's low 32 bits are its offset in the arena.
 */
static __always_inline u64 arena_base_of(u64 addr)
{
	return addr & ~0xffffffffull;
}

/*
 * 1-based index of the most significant set bit; 0 when word is 0. Loop-free and
 * branch-free: each step halves the width with arithmetic, so the verifier walks one
 * path, not one per outcome of six tests. (x + 2^k - 1) >> k is 1 when 0 < x < 2^k.
 */
static __always_inline int arena_fls(u64 word)
{
	u64 n = 0, t;

#define __ARENA_FLS_STEP(k)						\
	do {								\
		t = (((word >> (k)) + ((1ull << (k)) - 1)) >> (k)) * (k);	\
		barrier_var(t);						\
		word >>= t;						\
		n += t;							\
	} while (0)
	__ARENA_FLS_STEP(32);
	__ARENA_FLS_STEP(16);
	__ARENA_FLS_STEP(8);
	__ARENA_FLS_STEP(4);
	__ARENA_FLS_STEP(2);
	__ARENA_FLS_STEP(1);
#undef __ARENA_FLS_STEP
	/* 0 .. 64: the mask tells the compiler so (a signed % of it then needs no sign). */
	return (n + word) & 127;
}

/*
 * arena_get_info: a SEC("syscall") program user space runs (bpf_prog_test_run) to learn
 * where things are. Addresses are user-space addresses of the mmap-ed arena.
 */
struct arena_get_info_args {
	u64 arena_base;		/* out: user address of arena page 0 */
	u64 arena_pages;	/* out: size of the arena in pages */
	u64 log;		/* out: user address of the log buffer (struct arena_log) */
	u64 version;		/* out: LIBARENA_VERSION */
	u64 buddy;		/* out: user address of the default allocator (struct buddy) */
	u64 heap;		/* out: user address of struct arena_heap_global */
};

#define LIBARENA_VERSION 1

/*
 * Functions the sanitizer build must not instrument: allocator code that reads and
 * writes free blocks, and code that runs with preemption disabled, where 6.12 refuses
 * the global calls that the compiler's checks make.
 */
#if defined(__BPF__) && defined(LIBARENA_ASAN)
#define __noasan __attribute__((no_sanitize("kernel-address")))
/* Every function from here to ARENA_NOASAN_END: code that owns free blocks' bytes. */
#define __ARENA_PRAGMA(x)	_Pragma(#x)
#define ARENA_NOASAN_BEGIN						\
	__ARENA_PRAGMA(clang attribute push(__attribute__((no_sanitize("kernel-address"))), \
					    apply_to = function))
#define ARENA_NOASAN_END	_Pragma("clang attribute pop")

/* What the sanitizer build's compiler calls: every instrumented object needs it. */
#include <libarena/internal/asan_abi.h>
#else
#define __noasan
#define ARENA_NOASAN_BEGIN
#define ARENA_NOASAN_END
#endif

#endif /* __LIBARENA_BASE_H */
