// SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause
/*
 * The intrusive MPSC queue. include/libarena/mpsc.h states the API, the design and the
 * memory ordering.
 *
 * The consumer's lists, oldest node first: ready, then rest reversed, then later, then
 * whatever producers pushed since (q->head, newest first). later is non-empty only while
 * rest is. Lists end in 0.
 */
#include <libarena/mpsc.h>
#include <libarena/heap.h>

static __always_inline struct mpsc_node __arena *node_at(u64 addr)
{
	return (struct mpsc_node __arena *)addr;
}

__weak int mpsc_init(struct mpsc_queue __arena *q __arg_arena)
{
	arena_subprog_init();
	if (!q) {
		arena_stderr("%s: NULL queue", __func__);
		return -EINVAL;
	}
	q->ready = q->ready_last = q->rest = q->later = q->later_last = 0;
	q->pops = q->stalls = 0;
	WRITE_ONCE(q->head, 0);
	return 0;
}

__weak int mpsc_push(struct mpsc_queue __arena *q __arg_arena,
		     struct mpsc_node __arena *node __arg_arena)
{
	u64 prev;

	arena_subprog_init();
	if (!q || !node) {
		arena_stderr("%s: NULL %s", __func__, q ? "node" : "queue");
		return -EINVAL;
	}
	WRITE_ONCE(node->next, MPSC_LINKING);
	/* A full barrier: the node's contents before it can be reached. */
	prev = xchg(&q->head, (u64)node);
	/* The link replaces MPSC_LINKING: pairs with the acquire in link_of(). */
	smp_store_release(&node->next, prev);
	return 0;
}

/* A node's link once its producer wrote it; MPSC_LINKING if it has not yet. */
static __always_inline u64 link_of(struct mpsc_node __arena *n)
{
	/* The link before the node it leads to: pairs with the release in mpsc_push(). */
	u64 next = smp_load_acquire(&n->next);
	u32 i;

	for (i = zero; next == MPSC_LINKING && i < MPSC_LINK_WAIT && can_loop; i++) {
		arena_cpu_relax();
		/* Again: the producer is between its exchange and its release. */
		next = smp_load_acquire(&n->next);
	}
	return next;
}

/*
 * Reverse the stack q->rest onto the front of q->later, then move later to the end of
 * ready. 0 when all of it is ready; -EAGAIN when it stopped at a link still being written
 * (or the loop budget ran out): what it reversed so far waits in later.
 */
static __always_inline int reverse_rest(struct mpsc_queue __arena *q)
{
	u64 cur = q->rest, rev = 0, rev_last = 0, next;
	struct mpsc_node __arena *n;

	while (cur && can_loop) {
		n = node_at(cur);
		next = link_of(n);
		if (next == MPSC_LINKING)
			break;
		WRITE_ONCE(n->next, rev);
		if (!rev)
			rev_last = cur;
		rev = cur;
		cur = next;
	}
	/* The nodes visited are newer than the rest, older than later. */
	if (rev) {
		node_at(rev_last)->next = q->later;
		if (!q->later)
			q->later_last = rev_last;
		q->later = rev;
	}
	if (cur) {
		q->rest = cur;
		q->stalls++;
		return -EAGAIN;
	}
	/* Ready first, then the rest emptied: mpsc_empty elsewhere sees one of them. */
	if (q->later) {
		if (q->ready)
			node_at(q->ready_last)->next = q->later;
		else
			WRITE_ONCE(q->ready, q->later);
		q->ready_last = q->later_last;
		q->later = q->later_last = 0;
	}
	WRITE_ONCE(q->rest, 0);
	return 0;
}

__weak int mpsc_pop_addr(struct mpsc_queue __arena *q __arg_arena, u64 *node)
{
	struct mpsc_node __arena *n;
	int ret;

	arena_subprog_init();
	if (!q || !node) {
		arena_stderr("mpsc_pop: NULL %s", q ? "node" : "queue");
		return -EINVAL;
	}
	*node = 0;
	if (!q->ready) {
		if (!q->rest) {
			/* Everything pushed so far, newest first; producers start a new stack. */
			q->rest = xchg(&q->head, 0);
			if (!q->rest)
				return -ENOENT;
		}
		ret = reverse_rest(q);
		if (!q->ready)
			return ret ? ret : -ENOENT;
	}
	n = node_at(q->ready);
	q->ready = n->next;
	if (!q->ready)
		q->ready_last = 0;
	n->next = 0;
	q->pops++;
	*node = (u64)n;
	return 0;
}

__weak int mpsc_empty(struct mpsc_queue __arena *q __arg_arena)
{
	arena_subprog_init();
	if (!q) {
		arena_stderr("%s: NULL queue", __func__);
		return -EINVAL;
	}
	return !READ_ONCE(q->head) && !READ_ONCE(q->ready) && !READ_ONCE(q->rest) &&
	       !READ_ONCE(q->later);
}
