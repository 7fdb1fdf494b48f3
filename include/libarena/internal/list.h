/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * Not API: the checked link changes and the walk's step that the inline calls of
 * include/libarena/list.h share. Programs use list.h, which includes this after struct
 * arena_list_head.
 */
#ifndef __LIBARENA_INTERNAL_LIST_H
#define __LIBARENA_INTERNAL_LIST_H

#include <libarena/base.h>

/* Whether prev and next are neighbours: the links between them point both ways. */
static __always_inline bool __arena_list_linked(struct arena_list_head __arena *prev,
						struct arena_list_head __arena *next)
{
	return prev && next && prev->next == next && next->prev == prev;
}

static __always_inline int __arena_list_insert(struct arena_list_head __arena *new,
					       struct arena_list_head __arena *prev,
					       struct arena_list_head __arena *next)
{
	arena_subprog_init();
	if (!new || !__arena_list_linked(prev, next) || new == prev || new == next)
		return -EUCLEAN;
	next->prev = new;
	new->next = next;
	new->prev = prev;
	WRITE_ONCE(prev->next, new);
	return 0;
}

/* Unlink entry from its neighbours, if they point at it; its own links stay. */
static __always_inline int __arena_list_unlink(struct arena_list_head __arena *entry)
{
	struct arena_list_head __arena *prev, *next;

	arena_subprog_init();
	if (!entry)
		return -EUCLEAN;
	prev = entry->prev;
	next = entry->next;
	if (!prev || !next || prev->next != entry || next->prev != entry)
		return -EUCLEAN;
	next->prev = prev;
	WRITE_ONCE(prev->next, next);
	return 0;
}

/* The walk goes on from node while its next link points back at it. */
static __always_inline bool __arena_list_step_ok(struct arena_list_head __arena *node)
{
	struct arena_list_head __arena *next;

	arena_subprog_init();
	next = node->next;
	return next && next->prev == node;
}

/* The entry holding ptr, of pos's type (typeof(*pos) carries __arena already). */
#define __arena_list_container(ptr, pos, member)				\
	((typeof(pos))((char __arena *)(ptr) - __builtin_offsetof(typeof(*(pos)), member)))

#endif /* __LIBARENA_INTERNAL_LIST_H */
