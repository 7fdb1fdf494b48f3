/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * What the upstream libarena's common.h gives a program: the primitives (base.h), the
 * log (arena_stdout, arena_stderr; log.h) and the allocator (arena_malloc, arena_calloc,
 * arena_free, arena_memset; heap.h). A program that uses another component includes
 * its header too (buddy.h, bitmap.h, asan.h, rbtree.h, ...).
 *
 * The library's own files never include this header: each includes base.h and the
 * headers of what it uses, so the layers stay one-way (README.md, "Layers").
 */
#ifndef __LIBARENA_COMMON_H
#define __LIBARENA_COMMON_H

#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/spinlock.h>
#include <libarena/heap.h>

#endif /* __LIBARENA_COMMON_H */
