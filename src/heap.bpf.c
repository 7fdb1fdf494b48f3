// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The fast allocator. include/libarena/heap.h states the design; in short:
 *   - a heap (per CPU and nesting level) is used only with preemption disabled and while
 *     marked busy, so its owner-only fields need no atomics;
 *   - everything a heap's user does under preemption is static (6.12 forbids global
 *     calls there) and loop-free on the fast paths; log lines come after;
 *   - lock-free stacks that are only ever taken whole (remote frees, revived spans,
 *     incoming reserve, released spans): pushes by compare-and-swap, one exchange to take;
 *   - page kfuncs only in the maintenance code, which non-sleepable programs never reach.
 */
#include <libarena/heap.h>
#include <libarena/buddy.h>
#include "alloc_internal.h"
#include "buddy/internal.h"

/*
 * One compilation unit in parts (as the kernel's kernel/sched/build_policy.c is): the
 * owner's paths inline the helpers of every part, and 6.12 allows no global call with
 * preemption disabled, so the parts cannot be separate objects. They follow the layers:
 * each part uses only the parts before it.
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
