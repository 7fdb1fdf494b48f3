/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena MPSC queue: intrusive, unbounded, any number of producers on any CPUs and one
 * consumer. The use it is made for: "send this work to CPU N", where N's queue is
 * consumed by N alone.
 *
 *   struct mpsc_node              embed it in your struct (container_of gets you back)
 *   mpsc_init(q)                  an empty queue; a zeroed struct mpsc_queue is one too
 *   mpsc_push(q, node)            any CPU: add node. 0; wait-free (one exchange, one store)
 *   mpsc_pop(q, &node)            the consumer: the oldest node. 0; -ENOENT when empty;
 *                                 -EAGAIN when a push under way (a producer between its
 *                                 exchange and its store, whichever node it pushes) hides
 *                                 the older nodes: try later, nothing is lost
 *   mpsc_empty(q)                 1 when nothing is queued, else 0. Exact on the
 *                                 consumer's CPU; elsewhere a hint, which can say empty
 *                                 while the consumer is between taking the stack and
 *                                 listing it: a producer that must wake the consumer
 *                                 wakes it after every push, not when this says so
 *
 * Nodes come out in the order of their pushes' exchanges, each exactly once. The queue
 * holds no memory of its own: nodes belong to the caller, who must not push a node that
 * is still queued nor free one before it came out. A NULL queue or node: -EINVAL and a
 * log line.
 *
 * How: producers push onto a stack by exchanging its top (q->head) with the new node,
 * then writing the old top into the node's next (until then it reads MPSC_LINKING). The
 * consumer takes the whole stack with one exchange and reverses it into a FIFO list it
 * alone touches. A link still MPSC_LINKING stops the reversal (after a short wait) and
 * the walk resumes there on the next call; so does the verifier's loop budget running
 * out in a long walk. Either way the order is kept: nodes beyond the stop are older than
 * every node already reversed.
 *
 * Memory ordering: a producer's stores to its node (payload, MPSC_LINKING) come before
 * its exchange, a full barrier; the link is a release store, which the consumer's
 * acquire load of it pairs with; the consumer's exchange of the head is a full barrier.
 * So the consumer sees a node's payload as it was when it was pushed.
 */
#ifndef __LIBARENA_MPSC_H
#define __LIBARENA_MPSC_H

#include <libarena/base.h>
#include <libarena/log.h>

#define MPSC_LINKING	1ull		/* a node's next until its producer links it */
#define MPSC_LINK_WAIT	256		/* reads of a pending link before the consumer stops */

struct mpsc_node {
	u64 next;		/* arena address of the next node (older on the stack) */
};

struct mpsc_queue {
	u64 head;		/* producers: the newest node pushed, by exchange */
	u64 pad0[7];		/* producers' line apart from the consumer's */
	/* The consumer's alone: */
	u64 ready;		/* FIFO list, oldest first: what mpsc_pop hands out */
	u64 ready_last;		/* its last node */
	u64 rest;		/* a stack whose reversal stopped: newest first, older than ... */
	u64 later;		/* ... this FIFO list of the nodes reversed before the stop */
	u64 later_last;
	u64 pops;		/* nodes handed out */
	u64 stalls;		/* walks stopped at a link still being written */
	u64 pad1;
};

int mpsc_init(struct mpsc_queue __arena *q __arg_arena);
int mpsc_push(struct mpsc_queue __arena *q __arg_arena, struct mpsc_node __arena *node __arg_arena);
int mpsc_pop_addr(struct mpsc_queue __arena *q __arg_arena, u64 *node);
int mpsc_empty(struct mpsc_queue __arena *q __arg_arena);

static __always_inline int mpsc_pop(struct mpsc_queue __arena *q,
				    struct mpsc_node __arena **node)
{
	u64 addr = 0;
	int ret = mpsc_pop_addr(q, &addr);

	*node = (struct mpsc_node __arena *)addr;
	return ret;
}

#endif /* __LIBARENA_MPSC_H */
