/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena doubly linked lists: the kernel's list_head for arena structs. A circular list
 * through a struct arena_list_head embedded in each entry, and one more as the list's
 * head; the names are the kernel's with an arena_ prefix (vmlinux.h has struct
 * list_head already).
 *
 *   ARENA_LIST_HEAD_INIT(name), arena_list_init(head)   an empty list
 *   arena_list_add(new, pos)          insert new after pos (pos: the head or an entry)
 *   arena_list_add_tail(new, head)    insert new before head: at the end
 *   arena_list_del(entry)             unlink entry (its links then read NULL)
 *   arena_list_del_init(entry)        unlink entry and make it an empty list of its own
 *   arena_list_move(entry, head), arena_list_move_tail(entry, head)
 *   arena_list_empty(head), arena_list_is_singular(head)
 *   arena_list_entry(ptr, type, member)             container_of for arena pointers
 *   arena_list_first_entry(head, type, member), arena_list_last_entry(...)
 *   arena_list_first_entry_or_null(head, type, member)
 *   arena_list_for_each_entry(pos, head, member)
 *   arena_list_for_each_entry_safe(pos, n, head, member)   pos may be deleted
 *   arena_list_entry_is_head(pos, head, member)     after a walk: 1 when it went round
 *   arena_list_count(head)            entries, or -EUCLEAN for a broken list
 *
 * Damage (user space writes the arena, a bug elsewhere) is checked where it would do
 * harm, like the kernel's CONFIG_DEBUG_LIST: add, add_tail, del, del_init, move and
 * move_tail check the links they rewrite (their neighbours must point back) and change
 * nothing, returning -EUCLEAN, when they do not. A walk stops at the first entry whose
 * next link does not point back (without visiting it), and after the verifier's loop
 * budget (which a ring that misses the head takes whole: the head's own first link is
 * not checked, arena_list_count() checks it): arena_list_entry_is_head(pos,
 * head, member) after the loop says whether it went all the way round (as in the kernel,
 * pos is then the head's container, not an entry). arena_list_count() gives -EUCLEAN for
 * a list that does not close.
 *
 * No locking: a list shared by CPUs needs a lock around every call and walk (an arena spin
 * lock, libarena/spinlock.h). Everything here is inline so that it may run with
 * preemption disabled, as 6.12 requires there.
 */
#ifndef __LIBARENA_LIST_H
#define __LIBARENA_LIST_H

#include <libarena/base.h>
#include <libarena/log.h>

struct arena_list_head {
	struct arena_list_head __arena *next, *prev;
};

#define ARENA_LIST_HEAD_INIT(name) { &(name), &(name) }

#include <libarena/internal/list.h>

/* container_of for arena pointers: offsetof keeps it in the arena's address space. */
#define arena_list_entry(ptr, type, member)					\
	((type __arena *)((char __arena *)(ptr) - __builtin_offsetof(type, member)))

static __always_inline void arena_list_init(struct arena_list_head __arena *head)
{
	arena_subprog_init();
	WRITE_ONCE(head->next, head);
	head->prev = head;
}

static __always_inline int arena_list_add(struct arena_list_head __arena *new,
					  struct arena_list_head __arena *pos)
{
	return pos ? __arena_list_insert(new, pos, pos->next) : -EUCLEAN;
}

static __always_inline int arena_list_add_tail(struct arena_list_head __arena *new,
					       struct arena_list_head __arena *head)
{
	return head ? __arena_list_insert(new, head->prev, head) : -EUCLEAN;
}

static __always_inline int arena_list_del(struct arena_list_head __arena *entry)
{
	int ret = __arena_list_unlink(entry);

	if (!ret) {
		entry->next = NULL;
		entry->prev = NULL;
	}
	return ret;
}

static __always_inline int arena_list_del_init(struct arena_list_head __arena *entry)
{
	int ret = __arena_list_unlink(entry);

	if (!ret)
		arena_list_init(entry);
	return ret;
}

static __always_inline int arena_list_move(struct arena_list_head __arena *entry,
					   struct arena_list_head __arena *head)
{
	/* Check the destination first: a failed move leaves the entry where it was. */
	arena_subprog_init();
	if (!head || !__arena_list_linked(head, head->next) || entry == head)
		return -EUCLEAN;
	return __arena_list_unlink(entry) ?: __arena_list_insert(entry, head, head->next);
}

static __always_inline int arena_list_move_tail(struct arena_list_head __arena *entry,
						struct arena_list_head __arena *head)
{
	arena_subprog_init();
	if (!head || !__arena_list_linked(head->prev, head) || entry == head)
		return -EUCLEAN;
	return __arena_list_unlink(entry) ?: __arena_list_insert(entry, head->prev, head);
}

static __always_inline bool arena_list_empty(struct arena_list_head __arena *head)
{
	arena_subprog_init();
	return READ_ONCE(head->next) == head;
}

static __always_inline bool arena_list_is_singular(struct arena_list_head __arena *head)
{
	return !arena_list_empty(head) && head->next == head->prev;
}

#define arena_list_first_entry(head, type, member)				\
	arena_list_entry((head)->next, type, member)

#define arena_list_last_entry(head, type, member)				\
	arena_list_entry((head)->prev, type, member)

#define arena_list_first_entry_or_null(head, type, member)			\
	(arena_list_empty(head) ? NULL : arena_list_first_entry(head, type, member))

#define arena_list_entry_is_head(pos, head, member)				\
	(&(pos)->member == (head))

#define arena_list_next_entry(pos, member)					\
	__arena_list_container((pos)->member.next, pos, member)

/*
 * Stops at the head, at a link that does not point back (pos is then the last entry
 * reached; see arena_list_entry_is_head), or when the loop budget runs out.
 */
#define arena_list_for_each_entry(pos, head, member)				\
	for (pos = __arena_list_container((head)->next, pos, member);		\
	     !arena_list_entry_is_head(pos, head, member) &&			\
	     __arena_list_step_ok(&(pos)->member) && can_loop;			\
	     pos = arena_list_next_entry(pos, member))

#define arena_list_for_each_entry_safe(pos, n, head, member)			\
	for (pos = __arena_list_container((head)->next, pos, member),		\
	     n = arena_list_next_entry(pos, member);				\
	     !arena_list_entry_is_head(pos, head, member) &&			\
	     __arena_list_step_ok(&(pos)->member) && can_loop;			\
	     pos = n, n = arena_list_next_entry(n, member))

/* Entries of the list at head, or -EUCLEAN if it does not close (a broken link). */
static __always_inline int arena_list_count(struct arena_list_head __arena *head)
{
	struct arena_list_head __arena *node = head;
	int n = zero;	/* not 0: a count the verifier knows keeps it from merging states */

	if (!head || !__arena_list_step_ok(head))
		return -EUCLEAN;
	while (can_loop) {
		node = node->next;
		if (node == head)
			return n;
		if (!__arena_list_step_ok(node))
			return -EUCLEAN;
		n++;
	}
	return -EUCLEAN;
}

#endif /* __LIBARENA_LIST_H */
