/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Not API: how arena_stdout() and arena_stderr() (include/libarena/log.h) claim a
 * scratch line and format into it. Programs use log.h.
 */
#ifndef __LIBARENA_INTERNAL_LOG_H
#define __LIBARENA_INTERNAL_LOG_H

#include <libarena/base.h>

/*
 * Claim a scratch line of this CPU: its index, or -1 when all are taken. By
 * compare-and-swap, not a depth counter: a preemptible program (syscall, sleepable) can
 * be interrupted by another writer on the same CPU at any point, and both must end up
 * with lines of their own. The lowest free line is found by arithmetic, not by trying
 * each in turn: the verifier then walks one path through the formatting, not one per
 * line. A writer that preempted us between the read and the swap changes the word only
 * while it runs, so a second try is all it takes.
 */
static __always_inline int __arena_log_claim(struct arena_log_scratch *s)
{
	u32 old, bit, i;
	int d;

#pragma unroll
	for (i = 0; i < 2; i++) {
		old = READ_ONCE(s->busy);
		bit = ~old & (old + 1);
		d = arena_fls(bit) - 1;
		if (d < 0 || d >= ARENA_LOG_NEST)
			return -1;
		if (__sync_val_compare_and_swap(&s->busy, old, old | bit) == old)
			return d;
	}
	return -1;
}

#define __arena_log(stream, fmt, args...)					\
({										\
	struct arena_log_scratch *___s;						\
	long ___ret = -EBUSY;							\
	u32 ___key = 0;								\
	int ___d;								\
										\
	___s = bpf_map_lookup_elem(&arena_log_scratch, &___key);		\
	if (___s) {								\
		___d = __arena_log_claim(___s);					\
		if (___d >= 0 && ___d < ARENA_LOG_NEST) {			\
			___ret = BPF_SNPRINTF(___s->line[___d].text,		\
					      ARENA_LOG_LINE_MAX, fmt, ##args);	\
			___ret = arena_log_commit(stream, &___s->line[___d],	\
						  ___ret);			\
			__sync_fetch_and_and(&___s->busy, ~(1u << ___d));	\
		}								\
	}									\
	(int)___ret;								\
})

#endif /* __LIBARENA_INTERNAL_LOG_H */
