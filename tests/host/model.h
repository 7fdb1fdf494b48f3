/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The host tests' reference model of an ordered map: an array of entries sorted by key,
 * equal keys in insertion order, which the ordered maps (the red-black tree, the B-tree)
 * are checked against after every change. Before including it, define MODEL_ENTRY, the
 * entry's type (a struct whose first fields are u64 key and value), and MODEL_MAX.
 */
#ifndef __LIBARENA_HOST_MODEL_H
#define __LIBARENA_HOST_MODEL_H

#include <string.h>

static MODEL_ENTRY model[MODEL_MAX];
static int nr;

/* The first entry whose key is at least key (strict: above key); nr when none. */
static int first_at_least(u64 key, int strict)
{
	int lo = 0, hi = nr;

	while (lo < hi) {
		int mid = (lo + hi) / 2;

		if (model[mid].key < key || (strict && model[mid].key == key))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The index of an entry with key, or -1. */
static int model_find(u64 key)
{
	int at = first_at_least(key, 0);

	return at < nr && model[at].key == key ? at : -1;
}

/* e into its place: after the entries with its key, or before them with !after_equal. */
static void model_put(MODEL_ENTRY e, int after_equal)
{
	int at = first_at_least(e.key, after_equal);

	memmove(&model[at + 1], &model[at], (nr - at) * sizeof(model[0]));
	model[at] = e;
	nr++;
}

static void model_erase(int at)
{
	memmove(&model[at], &model[at + 1], (nr - at - 1) * sizeof(model[0]));
	nr--;
}

#endif /* __LIBARENA_HOST_MODEL_H */
