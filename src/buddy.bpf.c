// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The buddy allocator. include/libarena/buddy.h states the API, alloc_types.h the layout
 * and the invariants.
 * The entry points (the public calls) do their work through steps, each a global
 * function that calls nothing else of ours (buddy/steps.h): the verifier checks each
 * once per program, and an entry point takes two frames. A step that touches the lists
 * takes b->lock itself: everything under it runs with preemption disabled and is inline
 * (6.12 forbids global calls there); page kfuncs and log lines come after unlock.
 */
#include <libarena/buddy.h>
#include "alloc_internal.h"
#include "buddy/internal.h"

/* Free blocks hold the allocator's links: its own accesses are not checked. */
ARENA_NOASAN_BEGIN
/*
 * One compilation unit in parts, like the heap's: each part uses only the parts before
 * it, and includes buddy/internal.h, which declares what they share.
 */
#include "buddy/meta.c"
#include "buddy/lock.c"
#include "buddy/lists.c"
#include "buddy/caches.c"
#include "buddy/chunks.c"
#include "buddy/runs.c"
#include "buddy/steps.c"
#include "buddy/calls.c"
#include "buddy/default.c"

ARENA_NOASAN_END
