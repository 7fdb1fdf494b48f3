/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The header upstream's selftests include for their test tags (__stderr and friends):
 * here it is <libarena/test.h>, so that the tests/test_upstream_*.bpf.c programs,
 * written as upstream's are, build unchanged.
 */
#ifndef __LIBARENA_TEST_PROGS_COMPAT_H
#define __LIBARENA_TEST_PROGS_COMPAT_H

#include <libarena/test.h>

/* The tags, should test.h not have them: BTF decl tags the runner reads. */
#ifndef __stderr
#define __compat_str(s)		#s
#define __compat_xstr(s)	__compat_str(s)
#define __test_tag(tag)	__attribute__((btf_decl_tag("comment:" __compat_xstr(__COUNTER__) ":" tag)))
#define __stderr(msg)		__test_tag("test_expect_stderr=" msg)
#define __stderr_unpriv(msg)	__test_tag("test_expect_stderr_unpriv=" msg)
#endif

#endif /* __LIBARENA_TEST_PROGS_COMPAT_H */
