/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/* A minimal harness for the host tests: each test returns 0 or fails a CHECK. */
#ifndef __LIBARENA_HOST_CHECK_H
#define __LIBARENA_HOST_CHECK_H

#include <stdbool.h>
#include <stdio.h>

static int host_passed, host_failed;

FILE *host_log_file;
/* The CPU a thread stands for in bpf_get_smp_processor_id() (host_shim.h); -1: its own. */
__thread int host_cpu = -1;

#define CHECK(cond, fmt, ...)							\
	do {									\
		if (!(cond)) {							\
			printf("    %s:%d: %s: " fmt "\n", __FILE__, __LINE__,	\
			       #cond, ##__VA_ARGS__);				\
			return -1;						\
		}								\
	} while (0)

/* A test binary's first call: lines out as they come; the library's log muted or not. */
static inline void host_begin(bool mute_log)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (mute_log)
		host_log_file = fopen("/dev/null", "w");
}

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

/* The host tests' random source: xorshift64 on *state (never 0). */
static inline unsigned long long host_rnd(unsigned long long *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

static inline int host_summary(void)
{
	printf("%d passed, %d failed\n", host_passed, host_failed);
	return host_failed ? 1 : 0;
}

#endif
