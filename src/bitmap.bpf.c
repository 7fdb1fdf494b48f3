// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/* The bitmap: single-bit operations by compare-and-swap, whole-map word loops. */
#include <libarena/bitmap.h>
#include <libarena/heap.h>
#include <libarena/asan.h>

#define WORD(bmp, bit) (&(bmp)->bits[BIT_WORD(bit)])

__weak u64 bmp_alloc_addr(u64 bits)
{
	u64 addr;

	if (!bits || bits % BITS_PER_LONG || bits > BMP_MAX_BITS) {
		arena_stderr("bmp_alloc: %llu bits: need a multiple of 64 in 64 .. %u",
			     bits, BMP_MAX_BITS);
		return 0;
	}
	/* malloc and memset, not calloc: one call frame less for the caller. */
	addr = arena_malloc_addr(bits / 8);
	if (addr && arena_memset((void __arena *)addr, 0, bits / 8)) {
		arena_free_call((void __arena *)addr);
		return 0;
	}
	return addr;
}

__weak int bmp_free(struct arena_bitmap __arena *bmp __arg_arena)
{
	return arena_free_call(bmp);
}

__weak int bmp_set_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	atomic_or(WORD(bmp, bit), BIT_MASK(bit));
	return 0;
}

__weak int bmp_clear_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	atomic_and(WORD(bmp, bit), ~BIT_MASK(bit));
	return 0;
}

__weak int bmp_test_and_set_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	return !!(atomic_fetch_or(WORD(bmp, bit), BIT_MASK(bit)) & BIT_MASK(bit));
}

__weak int bmp_test_and_clear_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	return !!(atomic_fetch_and(WORD(bmp, bit), ~BIT_MASK(bit)) & BIT_MASK(bit));
}

__weak int __bmp_set_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	*WORD(bmp, bit) |= BIT_MASK(bit);
	return 0;
}

__weak int __bmp_clear_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	*WORD(bmp, bit) &= ~BIT_MASK(bit);
	return 0;
}

__weak int bmp_test_bit(u32 bit, struct arena_bitmap __arena *bmp __arg_arena)
{
	arena_subprog_init();
	if (!bmp)
		return -EINVAL;
	return !!(READ_ONCE(*WORD(bmp, bit)) & BIT_MASK(bit));
}

/* Mask of the bits of word w that a count of bits covers. */
static __always_inline u64 word_mask(u32 bits, u32 w)
{
	u32 full = bits / BITS_PER_LONG;

	if (w < full)
		return ~0ull;
	return (1ull << (bits % BITS_PER_LONG)) - 1;
}

enum bmp_op { BMP_OP_CLEAR, BMP_OP_AND, BMP_OP_OR, BMP_OP_COPY };

/* dst = op(a, b) over the counted bits; dst's bits past the count keep their value. */
static __noinline int bmp_apply(u32 bits, struct arena_bitmap __arena *dst,
				struct arena_bitmap __arena *a,
				struct arena_bitmap __arena *b, int op)
{
	u32 w, words = BITS_TO_LONGS(bits);
	u64 mask, v;

	for (w = zero; w < words && can_loop; w++) {
		mask = word_mask(bits, w);
		switch (op) {
		case BMP_OP_AND:
			v = a->bits[w] & b->bits[w];
			break;
		case BMP_OP_OR:
			v = a->bits[w] | b->bits[w];
			break;
		case BMP_OP_COPY:
			v = a->bits[w];
			break;
		default:
			v = 0;
			break;
		}
		dst->bits[w] = (dst->bits[w] & ~mask) | (v & mask);
	}
	return w == words ? 0 : -E2BIG;
}

/* The arguments of a whole-map call; if they are bad, fn logs it and fails with -EINVAL. */
static __always_inline bool args_ok(const char *fn, u32 bits, struct arena_bitmap __arena *p1,
				    struct arena_bitmap __arena *p2,
				    struct arena_bitmap __arena *p3)
{
	if (!p1 || !p2 || !p3 || !bits || bits > BMP_MAX_BITS) {
		arena_stderr("%s: bad arguments (%u bits)", fn, bits);
		return false;
	}
	return true;
}

/* A whole-map change for fn: the arguments checked (-EINVAL, logged), then applied. */
static __always_inline int apply_checked(const char *fn, u32 bits,
					 struct arena_bitmap __arena *dst,
					 struct arena_bitmap __arena *a,
					 struct arena_bitmap __arena *b, int op)
{
	if (!args_ok(fn, bits, dst, a, b))
		return -EINVAL;
	return bmp_apply(bits, dst, a, b, op);
}

__weak int bmp_clear(u32 bits, struct arena_bitmap __arena *bmp __arg_arena)
{
	return apply_checked(__func__, bits, bmp, bmp, bmp, BMP_OP_CLEAR);
}

__weak int bmp_and(u32 bits, struct arena_bitmap __arena *dst __arg_arena,
		   struct arena_bitmap __arena *a __arg_arena,
		   struct arena_bitmap __arena *b __arg_arena)
{
	return apply_checked(__func__, bits, dst, a, b, BMP_OP_AND);
}

__weak int bmp_or(u32 bits, struct arena_bitmap __arena *dst __arg_arena,
		  struct arena_bitmap __arena *a __arg_arena,
		  struct arena_bitmap __arena *b __arg_arena)
{
	return apply_checked(__func__, bits, dst, a, b, BMP_OP_OR);
}

__weak int bmp_copy(u32 bits, struct arena_bitmap __arena *dst __arg_arena,
		    struct arena_bitmap __arena *src __arg_arena)
{
	return apply_checked(__func__, bits, dst, src, src, BMP_OP_COPY);
}

enum bmp_query { BMP_Q_EMPTY, BMP_Q_INTERSECTS, BMP_Q_SUBSET };

/*
 * 1 when some counted word answers the query (for EMPTY and SUBSET: violates it). The
 * walk is bmp_apply()'s, kept apart: one writes, one stops early, and each stays a loop
 * the verifier checks once.
 */
static __noinline int bmp_find(u32 bits, struct arena_bitmap __arena *a,
			       struct arena_bitmap __arena *b, int q)
{
	u32 w, words = BITS_TO_LONGS(bits);
	u64 mask, hit;

	for (w = zero; w < words && can_loop; w++) {
		mask = word_mask(bits, w);
		switch (q) {
		case BMP_Q_INTERSECTS:
			hit = a->bits[w] & b->bits[w];
			break;
		case BMP_Q_SUBSET:
			hit = b->bits[w] & ~a->bits[w];	/* in small, not in big */
			break;
		default:
			hit = a->bits[w];
			break;
		}
		if (hit & mask)
			return 1;
	}
	return w == words ? 0 : -E2BIG;
}

/* A whole-map query for fn: the arguments checked (-EINVAL, logged), then answered. */
static __always_inline int find_checked(const char *fn, u32 bits,
					struct arena_bitmap __arena *a,
					struct arena_bitmap __arena *b, int q)
{
	if (!args_ok(fn, bits, a, b, b))
		return -EINVAL;
	return bmp_find(bits, a, b, q);
}

__weak int bmp_empty(u32 bits, struct arena_bitmap __arena *bmp __arg_arena)
{
	int ret = find_checked(__func__, bits, bmp, bmp, BMP_Q_EMPTY);

	return ret < 0 ? ret : !ret;
}

__weak int bmp_intersects(u32 bits, struct arena_bitmap __arena *a __arg_arena,
			  struct arena_bitmap __arena *b __arg_arena)
{
	return find_checked(__func__, bits, a, b, BMP_Q_INTERSECTS);
}

__weak int bmp_subset(u32 bits, struct arena_bitmap __arena *big __arg_arena,
		      struct arena_bitmap __arena *small __arg_arena)
{
	int ret = find_checked(__func__, bits, big, small, BMP_Q_SUBSET);

	return ret < 0 ? ret : !ret;
}

/*
 * Set bits as ranges, "0-3,64,70-71": built in an arena buffer, then copied into a
 * per-CPU map value (kernel memory, which bpf_snprintf's %s reads), not onto the stack:
 * a line's worth of text there would take half of a chain's 512 bytes.
 */
#define BMP_PRINT_MAX 240

char __arena_global bmp_print_buf[BMP_PRINT_MAX + 24];

struct bmp_print_text {
	char text[BMP_PRINT_MAX + 24];
};

/* A per-CPU scratch value, declared as log.h's is (the BTF map syntax wants it whole). */
#ifdef __BPF__
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct bmp_print_text);
} bmp_print_scratch __weak SEC(".maps");
#endif

static __noinline u32 put_num(u32 pos, u32 n)
{
	char digits[12];
	int i, k = 0;

	for (i = 0; i < 10; i++) {
		digits[k++] = '0' + n % 10;
		n /= 10;
		if (!n)
			break;
	}
	for (i = k - 1; i >= 0 && i < 12; i--)
		bmp_print_buf[(pos++) & 255] = digits[i];
	return pos;
}

/*
 * Not instrumented access by access: checks in its digit loops exceed the verifier's
 * budget. The words it reads are checked once, up front; the rest is the library's own.
 */
__weak __noasan int bmp_print(u32 bits, struct arena_bitmap __arena *bmp __arg_arena)
{
	u32 bit, pos, start = 0, cut = 0, key = 0, i;
	bool in_run = false, set;
	struct bmp_print_text *t;

	if (!args_ok(__func__, bits, bmp, bmp, bmp))
		return -EINVAL;
	asan_check_range((u64)bmp->bits, (bits + BITS_PER_LONG - 1) / BITS_PER_LONG * 8, 0);
	/*
	 * Opaque, like a loop counter: the verifier compares loop states by value ranges,
	 * and a position it knows exactly makes every length of text a state of its own
	 * (clang 19's code then exceeds the budget).
	 */
	pos = zero;
	for (bit = zero; bit <= bits && can_loop; bit++) {
		set = bit < bits && (bmp->bits[BIT_WORD(bit)] & BIT_MASK(bit));
		if (set && !in_run) {
			start = bit;
			in_run = true;
		} else if (!set && in_run) {
			in_run = false;
			if (pos > BMP_PRINT_MAX) {
				cut = 1;
				continue;
			}
			if (pos)
				bmp_print_buf[(pos++) & 255] = ',';
			pos = put_num(pos, start);
			if (bit - 1 != start) {
				bmp_print_buf[(pos++) & 255] = '-';
				pos = put_num(pos, bit - 1);
			}
		}
	}
	bmp_print_buf[pos & 255] = 0;
	t = bpf_map_lookup_elem(&bmp_print_scratch, &key);
	if (!t)
		return -ENOMEM;
	for (i = zero; i < sizeof(t->text) - 1 && can_loop; i++) {
		t->text[i & 255] = bmp_print_buf[i & 255];
		if (!t->text[i & 255])
			break;
	}
	t->text[sizeof(t->text) - 1] = 0;
	return arena_stdout("bitmap(%u): %s%s", bits, t->text, cut ? ",..." : "");
}
