// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The B-tree. include/libarena/btree.h states the API and its limits.
 *
 * The rules every call leaves true (bt_integrity_check checks each):
 *   1. a node's keys ascend strictly, and the slots from keys[nr] on hold BT_SENTINEL;
 *   2. below an inner node, children[i] holds only keys k with keys[i - 1] <= k < keys[i]
 *      (no bound where i - 1 or i is past the ends);
 *   3. every leaf is at level 0 and a node's children are one level below it, so every
 *      leaf is height - 1 steps below the root;
 *   4. every node but the root holds BT_MIN_KEYS to BT_MAX_KEYS keys, the root at least
 *      one (an inner root: at least two children); an empty tree has no root;
 *   5. the leaves' next and prev links chain them in key order, NULL at both ends;
 *   6. count and nr_nodes are exact.
 *
 * The search in a node is a fixed run of halvings over BT_SLOTS keys (rule 1 keeps the
 * slots past nr out of it), so it has no loop and no bound checks. Writes shift, copy and
 * trim pairs: keys[i] together with the u64 slot that follows it, values[i] in a leaf and
 * children[i + 1] in an inner node, so the same few moves serve both kinds.
 *
 * A full leaf first passes pairs to a neighbour with room (so sequential keys fill
 * leaves nearly full, not half), and only splits when both neighbours are full. Every
 * node a split cascade needs is allocated before anything moves: -ENOMEM changes nothing.
 * A remove that leaves a node below BT_MIN_KEYS borrows from a neighbour, or merges with
 * it and goes on at the parent; a root left with one child gives way to it.
 *
 * BPF has no recursion: calls keep their path from the root in bt->path (callers
 * serialise, so one path per tree is enough), and whole-tree walks run a depth-first
 * state machine over it. Every loop is bounded by the height, BT_SLOTS or the node count.
 */
#include "btree/internal.h"

/*
 * The sanitizer build checks the tree node by node instead of access by access: its
 * checks on every key and slot multiply the verifier's work past its budget. Every node
 * a call touches is checked whole (BT_ASAN_CHECK) when the call reaches it: from the
 * root, along the leaf links, or as a neighbour through its parent; and the tree when a
 * call starts. A node in use is one arena_malloc block of BT_NODE_SIZE bytes, so a use
 * after free or a pointer into something else is caught just the same.
 */
ARENA_NOASAN_BEGIN

/* One compilation unit in parts, like the allocators'. */
#include "btree/search.c"
#include "btree/insert.c"
#include "btree/remove.c"
#include "btree/cursors.c"
#include "btree/walk.c"

ARENA_NOASAN_END
