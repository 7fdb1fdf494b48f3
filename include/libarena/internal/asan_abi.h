/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Not API: what the sanitizer build's compiler calls (src/asan.bpf.c has them), which
 * base.h includes in that build because every instrumented object needs it. The 6.12
 * linker wants BTF for every symbol an object takes from another, and the calls the
 * compiler adds carry none: declare them here and name them in a function every object
 * has (weak: one copy survives linking; never called).
 */
#ifndef __LIBARENA_INTERNAL_ASAN_ABI_H
#define __LIBARENA_INTERNAL_ASAN_ABI_H

extern u64 __asan_shadow_memory_dynamic_address;
#define __ASAN_DECLARE(size)							\
	int __asan_report_load##size##_noabort(u64 addr);			\
	int __asan_report_store##size##_noabort(u64 addr)
__ASAN_DECLARE(1);
__ASAN_DECLARE(2);
__ASAN_DECLARE(4);
__ASAN_DECLARE(8);
__ASAN_DECLARE(16);
int __asan_report_load_n_noabort(u64 addr, u64 size);
int __asan_report_store_n_noabort(u64 addr, u64 size);
#define __asan_hidden __attribute__((visibility("hidden")))
__asan_hidden int __asan_memset(void *dst, int c, u64 n);
__asan_hidden int __asan_memcpy(void *dst, const void *src, u64 n);
__asan_hidden int __asan_memmove(void *dst, const void *src, u64 n);

__weak __noasan int __asan_btf_anchor(void)
{
#define __ASAN_NAME(size)							\
	(__asan_report_load##size##_noabort(0) + __asan_report_store##size##_noabort(0))
	return __ASAN_NAME(1) + __ASAN_NAME(2) + __ASAN_NAME(4) + __ASAN_NAME(8) +
	       __ASAN_NAME(16) + __asan_report_load_n_noabort(0, 0) +
	       __asan_report_store_n_noabort(0, 0) + __asan_memset(0, 0, 0) +
	       __asan_memcpy(0, 0, 0) + __asan_memmove(0, 0, 0) +
	       (int)__asan_shadow_memory_dynamic_address;
#undef __ASAN_NAME
}

#endif /* __LIBARENA_INTERNAL_ASAN_ABI_H */
