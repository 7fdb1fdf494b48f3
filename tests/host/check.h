/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/* A minimal harness for the host tests: each test returns 0 or fails a CHECK. */
#ifndef __LIBARENA_HOST_CHECK_H
#define __LIBARENA_HOST_CHECK_H

#include <stdio.h>

static int host_passed, host_failed;

FILE *host_log_file;

#define CHECK(cond, fmt, ...)							\
	do {									\
		if (!(cond)) {							\
			printf("    %s:%d: %s: " fmt "\n", __FILE__, __LINE__,	\
			       #cond, ##__VA_ARGS__);				\
			return -1;						\
		}								\
	} while (0)

static inline void host_run(const char *suite, const char *name, int (*fn)(void))
{
	int ret = fn();

	printf("  %s %s:%s\n", ret ? "FAIL" : "ok  ", suite, name);
	if (ret)
		host_failed++;
	else
		host_passed++;
	fflush(stdout);
}

static inline int host_summary(void)
{
	printf("%d passed, %d failed\n", host_passed, host_failed);
	return host_failed ? 1 : 0;
}

#endif
