// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The fast allocator. include/libarena/heap.h states the design; in short:
 *   - a heap (per CPU and nesting level) is used only while marked busy, so its
 *     owner-only fields need no atomics: the inlined fast paths take level 0 with
 *     preemption disabled, the slow paths claim a level by compare-and-swap and run
 *     preemptible, as global steps that call nothing of ours (verified once a program);
 *   - the fast paths are loop-free; log lines come from the public calls, not the steps;
 *   - lock-free stacks that are only ever taken whole (remote frees, revived spans,
 *     incoming reserve, released spans): pushes by compare-and-swap, one exchange to take;
 *   - page kfuncs only in the maintenance code, which non-sleepable programs never reach.
 */
#include "heap/internal.h"

/*
 * One compilation unit in parts (as the kernel's kernel/sched/build_policy.c is): the
 * steps inline the helpers of every part. They follow the layers: each part uses only
 * the parts before it.
 */

/* Free objects hold the allocator's links: its own accesses are not checked. */
ARENA_NOASAN_BEGIN

#include "heap/layout.c"
#include "heap/pool.c"
#include "heap/owner.c"
#include "heap/calls.c"
#include "heap/collect.c"
#include "heap/maintain.c"
#include "heap/programs.c"

ARENA_NOASAN_END
