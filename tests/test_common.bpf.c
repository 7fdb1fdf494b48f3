// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* The common layer: accessors, barriers, atomics on arena memory, arena_fls, info. */
#include <libarena/log.h>
#include <libarena/test.h>

char _license[] SEC("license") = "Dual BSD/GPL";

u64 __arena_global once64;
u32 __arena_global once32;
u64 __arena_global atom64;
u32 __arena_global atom32;

SEC("syscall")
int test_read_write_once(struct arena_test_ctx *ctx)
{
	WRITE_ONCE(once64, 0x1122334455667788ull);
	WRITE_ONCE(once32, 0xdeadbeef);
	ARENA_ASSERT_EQ(READ_ONCE(once64), 0x1122334455667788ull);
	ARENA_ASSERT_EQ(READ_ONCE(once32), 0xdeadbeef);
	WRITE_ONCE(once64, 0);
	ARENA_ASSERT_EQ(READ_ONCE(once64), 0);
	return 0;
}

SEC("syscall")
int test_barriers(struct arena_test_ctx *ctx)
{
	u64 v;

	/*
	 * Each macro once on one CPU: the verifier takes it and values come through.
	 * Release: stores before it before the store of 41.
	 */
	smp_store_release(&once64, 41);
	/* Full: the store of 41 before every access below. */
	smp_mb();
	/* Stores before it before stores after it. */
	smp_wmb();
	/* Loads before it before loads after it. */
	smp_rmb();
	barrier();
	/* Acquire: the load of 41 before the loads after it. */
	v = smp_load_acquire(&once64);
	barrier_var(v);
	ARENA_ASSERT_EQ(v, 41);
	/* The 32-bit forms: release 7, then acquire it back. */
	smp_store_release(&once32, 7);
	/* Pairs with the release just above. */
	ARENA_ASSERT_EQ(smp_load_acquire(&once32), 7);
	return 0;
}

SEC("syscall")
int test_cmpxchg(struct arena_test_ctx *ctx)
{
	atom64 = 5;
	ARENA_ASSERT_EQ(cmpxchg(&atom64, 5, 1ull << 40), 5);
	ARENA_ASSERT_EQ(atom64, 1ull << 40);
	/* A failing compare-and-swap returns the current value and writes nothing. */
	ARENA_ASSERT_EQ(cmpxchg(&atom64, 5, 9), 1ull << 40);
	ARENA_ASSERT_EQ(atom64, 1ull << 40);

	atom32 = 0xffffffff;
	ARENA_ASSERT_EQ(cmpxchg(&atom32, 0xffffffff, 3), 0xffffffff);
	ARENA_ASSERT_EQ(atom32, 3);
	ARENA_ASSERT_EQ(cmpxchg(&atom32, 4, 8), 3);
	ARENA_ASSERT_EQ(atom32, 3);
	return 0;
}

SEC("syscall")
int test_xchg(struct arena_test_ctx *ctx)
{
	atom64 = 17;
	ARENA_ASSERT_EQ(xchg(&atom64, ~0ull), 17);
	ARENA_ASSERT_EQ(atom64, ~0ull);
	atom32 = 1;
	ARENA_ASSERT_EQ(xchg(&atom32, 2), 1);
	ARENA_ASSERT_EQ(atom32, 2);
	return 0;
}

SEC("syscall")
int test_atomic_ops(struct arena_test_ctx *ctx)
{
	atom64 = 10;
	atomic_add(&atom64, 5);
	ARENA_ASSERT_EQ(atom64, 15);
	ARENA_ASSERT_EQ(atomic_fetch_add(&atom64, 1ull << 33), 15);
	ARENA_ASSERT_EQ(atom64, 15 + (1ull << 33));
	ARENA_ASSERT_EQ(atomic_fetch_or(&atom64, 0xf0), 15 + (1ull << 33));
	ARENA_ASSERT_EQ(atom64, 0xff + (1ull << 33));
	ARENA_ASSERT_EQ(atomic_fetch_and(&atom64, 0x3c), 0xff + (1ull << 33));
	ARENA_ASSERT_EQ(atom64, 0x3c);
	ARENA_ASSERT_EQ(atomic_fetch_xor(&atom64, 0xff), 0x3c);
	ARENA_ASSERT_EQ(atom64, 0xc3);
	atomic_or(&atom64, 0x100);
	ARENA_ASSERT_EQ(atom64, 0x1c3);
	atomic_and(&atom64, 0x1f0);
	ARENA_ASSERT_EQ(atom64, 0x1c0);
	atomic_xor(&atom64, 0x1c1);
	ARENA_ASSERT_EQ(atom64, 1);
	atom32 = 1;
	ARENA_ASSERT_EQ(atomic_fetch_add(&atom32, -2), 1);
	ARENA_ASSERT_EQ(atom32, 0xffffffff);
	ARENA_ASSERT_EQ(atomic_fetch_and(&atom32, 0xf0f0), 0xffffffff);
	ARENA_ASSERT_EQ(atomic_fetch_or(&atom32, 0x0f0f), 0xf0f0);
	ARENA_ASSERT_EQ(atom32, 0xffff);
	return 0;
}

SEC("syscall")
int test_arena_fls(struct arena_test_ctx *ctx)
{
	int i;

	ARENA_ASSERT_EQ(arena_fls(0), 0);
	ARENA_ASSERT_EQ(arena_fls(1), 1);
	ARENA_ASSERT_EQ(arena_fls(~0ull), 64);
	ARENA_ASSERT_EQ(arena_fls(1ull << 63), 64);
	ARENA_ASSERT_EQ(arena_fls(0x8000000000000001ull), 64);
	ARENA_ASSERT_EQ(arena_fls(0xffffffffull), 32);
	ARENA_ASSERT_EQ(arena_fls(0x100000000ull), 33);
	for (i = zero; i < 64 && can_loop; i++) {
		u64 bit = 1ull << i;

		if (arena_fls(bit) != i + 1 || arena_fls(bit | (bit - 1)) != i + 1 ||
		    arena_fls(bit | 1) != i + 1) {
			arena_stderr("arena_fls wrong for bit %d", i);
			return 100 + i;
		}
	}
	ARENA_ASSERT_EQ(i, 64);
	return 0;
}

SEC("syscall")
int test_arena_get_info_layout(struct arena_test_ctx *ctx)
{
	u64 log = (u64)arena_log_get(), var = (u64)&once64;

	/* An arena pointer's value is the user-space address inside the arena. */
	ARENA_ASSERT_EQ(log & ~0xffffffffull, ARENA_USER_BASE);
	ARENA_ASSERT_EQ(var & ~0xffffffffull, ARENA_USER_BASE);
	/* As a plain pointer it is the offset in the arena. */
	ARENA_ASSERT_EQ((u64)(void *)&once64, var & 0xffffffffull);
	ARENA_ASSERT_EQ(log, arena_log_addr());
	return 0;
}

SEC("syscall")
int test_smp_sees_cpus(struct arena_test_ctx *ctx)
{
	/* The VM runs 2 to 4 vCPUs: a guest seeing one means parallel tests prove nothing. */
	if (ctx->nr_cpus < 2)
		arena_stderr("only %u CPU online: is ACPI missing from the kernel?", ctx->nr_cpus);
	ARENA_ASSERT(ctx->nr_cpus >= 2);
	return 0;
}

/*
 * Every thread increments one shared counter with atomic_add and another with a
 * cmpxchg loop; no increment may be lost. Each thread records the CPU it ran on.
 */
#define COUNTER_THREADS	4
#define COUNTER_ROUNDS	200000

u64 __arena_global counter_add;
u64 __arena_global counter_cas;
u64 __arena_global counter_cas_retries;
u32 __arena_global counter_cpu[COUNTER_THREADS];

SEC("syscall")
int parallel_test_counter__init(struct arena_test_ctx *ctx)
{
	int i;

	counter_add = counter_cas = counter_cas_retries = 0;
	for (i = zero; i < COUNTER_THREADS && can_loop; i++)
		counter_cpu[i] = ~0u;
	return 0;
}

/*
 * Increment counter_cas with compare-and-swap; 0 on success. TCG's atomics are not fair:
 * a vCPU may lose thousands of rounds in a row, so the only bound is the verifier's loop
 * budget of this call (BPF_MAX_LOOPS rounds), which no real run comes near.
 */
static __noinline int cas_increment(void)
{
	u64 old;

	while (can_loop) {
		old = READ_ONCE(counter_cas);
		if (cmpxchg(&counter_cas, old, old + 1) == old)
			return 0;
		atomic_add(&counter_cas_retries, 1);
	}
	return -EBUSY;
}

static __noinline int counter_thread(u32 thread)
{
	int i;

	if (thread >= COUNTER_THREADS)
		return -EINVAL;
	counter_cpu[thread] = bpf_get_smp_processor_id();
	for (i = zero; i < COUNTER_ROUNDS && can_loop; i++) {
		atomic_add(&counter_add, 1);
		if (cas_increment()) {
			arena_stderr("thread %u: the loop budget ran out at round %d", thread, i);
			return -EBUSY;
		}
	}
	/* A loop the may_goto budget cut short would prove nothing. */
	if (i != COUNTER_ROUNDS) {
		arena_stderr("thread %u ran %d of %d rounds", thread, i, COUNTER_ROUNDS);
		return -E2BIG;
	}
	return 0;
}

SEC("syscall")
int parallel_test_counter__0(struct arena_test_ctx *ctx) { return counter_thread(0); }
SEC("syscall")
int parallel_test_counter__1(struct arena_test_ctx *ctx) { return counter_thread(1); }
SEC("syscall")
int parallel_test_counter__2(struct arena_test_ctx *ctx) { return counter_thread(2); }
SEC("syscall")
int parallel_test_counter__3(struct arena_test_ctx *ctx) { return counter_thread(3); }

SEC("syscall")
int parallel_test_counter__fini(struct arena_test_ctx *ctx)
{
	u32 cpus = 0, want;
	int i, j;

	ARENA_ASSERT_EQ(counter_add, COUNTER_THREADS * COUNTER_ROUNDS);
	ARENA_ASSERT_EQ(counter_cas, COUNTER_THREADS * COUNTER_ROUNDS);
	for (i = zero; i < COUNTER_THREADS && can_loop; i++) {
		for (j = 0; j < i && can_loop; j++)
			if (counter_cpu[j] == counter_cpu[i])
				break;
		if (j == i)
			cpus++;
	}
	want = ctx->nr_cpus < COUNTER_THREADS ? ctx->nr_cpus : COUNTER_THREADS;
	arena_stdout("counter: %u threads on %u CPUs, %llu cmpxchg retries",
		     COUNTER_THREADS, cpus, counter_cas_retries);
	ARENA_ASSERT_EQ(cpus, want);
	return 0;
}

/*
 * Message passing: the writer stores data, then releases flag; readers acquire flag,
 * then read data, which must be at least as new as flag.
 */
#define MP_ROUNDS	200000

u64 __arena_global mp_data;
u64 __arena_global mp_flag;

SEC("syscall")
int parallel_test_message_passing__init(struct arena_test_ctx *ctx)
{
	mp_data = mp_flag = 0;
	return 0;
}

SEC("syscall")
int parallel_test_message_passing__0(struct arena_test_ctx *ctx)
{
	u64 i;

	for (i = zero + 1; i <= MP_ROUNDS && can_loop; i++) {
		WRITE_ONCE(mp_data, i);
		/* The data before the flag: pairs with mp_reader()'s acquire. */
		smp_store_release(&mp_flag, i);
	}
	ARENA_ASSERT_EQ(i, MP_ROUNDS + 1);
	return 0;
}

static __noinline int mp_reader(void)
{
	u64 f, d, last = 0;
	int i;

	for (i = zero; i < MP_ROUNDS && can_loop; i++) {
		/* The flag before the data: pairs with the writer's release. */
		f = smp_load_acquire(&mp_flag);
		d = READ_ONCE(mp_data);
		if (d < f) {
			arena_stderr("read data %llu after flag %llu", d, f);
			return -EINVAL;
		}
		if (f < last) {
			arena_stderr("flag went back from %llu to %llu", last, f);
			return -EINVAL;
		}
		last = f;
	}
	return i == MP_ROUNDS ? 0 : -E2BIG;
}

SEC("syscall")
int parallel_test_message_passing__1(struct arena_test_ctx *ctx) { return mp_reader(); }
SEC("syscall")
int parallel_test_message_passing__2(struct arena_test_ctx *ctx) { return mp_reader(); }

SEC("syscall")
int parallel_test_message_passing__fini(struct arena_test_ctx *ctx)
{
	ARENA_ASSERT_EQ(mp_data, MP_ROUNDS);
	ARENA_ASSERT_EQ(mp_flag, MP_ROUNDS);
	return 0;
}
