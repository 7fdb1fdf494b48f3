/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * libarena concurrent hash map: u64 keys to u64 values, lookups without a lock, writers
 * on per-region locks, a table that doubles while it is used.
 *
 *   hmap_create(capacity)        a new empty map sized for capacity entries (the table
 *                                grows past it), or NULL and a log line
 *   hmap_insert(m, key, val)     add key. 0; -EEXIST when it is there (nothing changed)
 *   hmap_update(m, key, val)     replace key's value. 0; -ENOENT when it is not there
 *   hmap_upsert(m, key, val)     either: 0 when key was added, 1 when its value replaced
 *   hmap_delete(m, key, &val)    take key out (its value into val unless NULL). 0; -ENOENT
 *   hmap_lookup(m, key, &val)    key's value. 0; -ENOENT. Takes no lock, writes nothing
 *   hmap_iter(m, &cursor, &key, &val)
 *                                the next entry of a walk over the map (a cursor starts
 *                                zeroed, HMAP_CURSOR_INIT). 0; -ENOENT at the end
 *   hmap_count(m)                entries in it (a snapshot while others work on it)
 *   hmap_buckets(m)              buckets of its table now
 *   hmap_grow(m)                 double the table now. 0; -EBUSY while another call
 *                                doubles it; -ENOMEM; -E2BIG at 2^HMAP_MAX_BITS buckets
 *   hmap_reserve(m, capacity)    grow the table now for capacity entries and make room
 *                                on this CPU for the entries to come; sleepable programs
 *                                only (it maps memory), so that a bulk build from one
 *                                needs nothing more and no later insert pays for growth
 *   hmap_destroy(m)              free it and everything in it. Nobody may use m any more
 *
 * Bad calls (a NULL or destroyed map, a NULL cursor): -EINVAL and a log line. A writer
 * that cannot get its region's lock within ARENA_SPIN_TIMEOUT_NS: -ETIMEDOUT, nothing
 * changed. A map user space wrote over: -EFAULT and a log line, never an endless loop.
 *
 * How. Every entry sits in one list sorted by the key's hash, a bijection of u64 (so equal
 * hashes mean equal keys and the map stores no key, only the hash: 32 bytes an entry).
 * Each of the 2^bits buckets starts at a sentinel node in that list, bucket b's at hash
 * b << (64 - bits). Doubling the table only links a sentinel between every two (split
 * ordering, as Shalev and Shavit): no entry moves, lookups go on through it. The
 * sentinels of each doubling lie in arrays of their own, so a bucket's sentinel is found
 * by arithmetic (the lowest set bit of its number says which doubling made it), with no
 * table of pointers to read.
 * The hash's top HMAP_STRIPE_BITS bits pick one of HMAP_STRIPES regions; a region's lock
 * (arena_spinlock_t) serialises the writers whose keys fall in it, and it alone changes
 * the links of its part of the list.
 *
 * Lookups and iteration take no lock. Deleted entries are not freed but kept in their
 * region's free list for the map's next inserts (type-stable memory, as the kernel's
 * SLAB_TYPESAFE_BY_RCU caches, whose readers are BPF's own hash maps): a reader that is
 * on an entry as it is deleted and reused reads memory that is still an entry. Each
 * entry's gen is odd while it is free: a reader reads an entry between two loads of gen
 * and starts again from the bucket when they differ, and it trusts a "not there" only
 * once the node before still pointed to the node after. Memory goes back to the
 * allocator at hmap_destroy() (a limit: a map that shrank keeps its peak).
 *
 * Iteration walks the list in hash order: the cursor holds the next hash, so a walk
 * returns every entry that is in the map from its start to its end exactly once, and one
 * inserted or deleted during it at most once, whatever the writers and the table do.
 *
 * Growth. When a region holds more than HMAP_LOAD entries per bucket, the insert that
 * saw it doubles the table after letting go of its lock (one grower at a time; others
 * go on), up to 2^HMAP_MAX_BITS buckets. It allocates the new table's memory first and
 * then links the new sentinels region by region, each under that region's lock, so a
 * doubling costs in proportion to the entries (about one step each) and holds no lock
 * for longer than one region's share. A program that cannot allocate that memory (the
 * allocator's reserves are empty) leaves the table as it is, says so, and the next insert
 * past HMAP_GROW_RETRY_NS tries again: chains grow longer, nothing fails. Create the map
 * with the capacity you expect, or call hmap_reserve() from a sleepable program, to keep
 * growth off hot paths.
 *
 * Memory ordering: a writer fills a new entry while its gen is odd, links it with a
 * release store and only then makes its gen even, so a reader that reaches it sees it
 * whole, and one that meets it still odd starts over instead of returning a key whose
 * insert has not happened; an updated value is one 8-byte store, so a lookup returns the
 * old or the new value, never a mix. A lookup that returns a value returns one that the
 * key held during the call.
 *
 * Rules: writers run with preemption disabled while they hold a lock, so the map may be
 * used from any program; the locks' rules apply (spinlock.h: do not share a map between
 * a task's program and an interrupt-context program that may interrupt it mid-write).
 */
#ifndef __LIBARENA_HASHMAP_H
#define __LIBARENA_HASHMAP_H

#include <libarena/base.h>
#include <libarena/log.h>
#include <libarena/spinlock.h>

#define HMAP_STRIPE_BITS	6		/* regions: the hash's top 6 bits */
#define HMAP_STRIPES		(1u << HMAP_STRIPE_BITS)
#define HMAP_MIN_BITS		HMAP_STRIPE_BITS	/* every region starts at a bucket */
#define HMAP_MAX_BITS		20		/* 1M buckets */
#define HMAP_LOAD		1		/* entries per bucket before the table doubles */
#define HMAP_BLOCK_BITS		10		/* sentinels per block: 32 KiB, a heap size */
#define HMAP_MAX_BLOCKS		1032		/* blocks over a map's life: at most 1,028 */
#define HMAP_BLOCK_BYTES	(32u << HMAP_BLOCK_BITS)
#define HMAP_GROW_RETRY_NS	(10ull * 1000 * 1000)
#define HMAP_MAGIC		0x484d4150u	/* "PAMH": a live map */

/*
 * Call depth: every hmap_* call keeps to ARENA_CALL_FRAMES and ARENA_CALL_STACK
 * (base.h), the allocator's frames included.
 */

enum hmap_node_kind {
	HMAP_SENTINEL,		/* starts a bucket: ordered before an entry of equal hash */
	HMAP_ENTRY,
};

struct hmap_node {
	struct hmap_node __arena *next;	/* the node with the next (hash, kind) */
	u64 hash;			/* the key, mixed by hmap_hash() */
	u64 val;
	u32 gen;			/* odd while the entry is free (deleted) */
	u32 kind;			/* enum hmap_node_kind */
};

typedef struct hmap_node __arena *hmap_node_ptr;

struct hmap_stripe {
	arena_spinlock_t lock;		/* its writers' lock */
	u64 count;			/* entries in the region */
	struct hmap_node __arena *free;	/* deleted entries for reuse, linked by next */
	u64 nr_free;
	u64 pad[3];			/* a cache line each */
};

struct hmap {
	u32 bits;			/* 2^bits buckets; readers load it with acquire */
	u32 magic;
	u32 base_bits;			/* the buckets the map was made with: level 0 */
	u32 growing;			/* 1 while a call doubles the table */
	u32 pending;			/* a doubling whose linking was cut short: its level */
	u32 nr_blocks;
	u64 grow_after_ns;		/* a failed doubling: no new try before */
	u64 grows;			/* doublings done */
	u64 grow_failures;		/* doublings that found no memory */
	u64 lock_timeouts;		/* writers that gave up on a region's lock */
	u64 pad0;
	/*
	 * Level 0 holds the sentinels of the first 2^base_bits buckets; level L > 0 those of
	 * the buckets the L-th doubling added (the odd ones of its table), in blocks from
	 * blocks[level_block[L]] on.
	 */
	u32 level_block[HMAP_MAX_BITS + 1];
	u32 pad1[11];
	struct hmap_node __arena *blocks[HMAP_MAX_BLOCKS];	/* the sentinels' memory */
	struct hmap_stripe stripes[HMAP_STRIPES];
};

struct hmap_cursor {
	u64 hash;			/* the next hash to return an entry from */
	u64 done;			/* the walk passed the last hash */
};

#define HMAP_CURSOR_INIT	{ 0, 0 }

/*
 * The mix of a key: murmur3's 64-bit finaliser, a bijection (xor-shifts and odd
 * multipliers undo), so the map keeps hashes instead of keys.
 */
static __always_inline u64 hmap_hash(u64 key)
{
	key ^= key >> 33;
	key *= 0xff51afd7ed558ccdull;
	key ^= key >> 33;
	key *= 0xc4ceb9fe1a85ec53ull;
	key ^= key >> 33;
	return key;
}

/* The key of a hash: the steps of hmap_hash() undone, last first. */
static __always_inline u64 hmap_unhash(u64 hash)
{
	hash ^= hash >> 33;
	hash *= 0x9cb4b2f8129337dbull;	/* the inverse of 0xc4ceb9fe1a85ec53 mod 2^64 */
	hash ^= hash >> 33;
	hash *= 0x4f74430c22a54005ull;	/* the inverse of 0xff51afd7ed558ccd mod 2^64 */
	hash ^= hash >> 33;
	return hash;
}

u64 hmap_create_addr(u32 capacity);
int hmap_destroy(struct hmap __arena *m __arg_arena);
int hmap_insert(struct hmap __arena *m __arg_arena, u64 key, u64 val);
int hmap_update(struct hmap __arena *m __arg_arena, u64 key, u64 val);
int hmap_upsert(struct hmap __arena *m __arg_arena, u64 key, u64 val);
int hmap_delete(struct hmap __arena *m __arg_arena, u64 key, u64 *val);
int hmap_lookup(struct hmap __arena *m __arg_arena, u64 key, u64 *val);
int hmap_iter(struct hmap __arena *m __arg_arena, struct hmap_cursor *cursor, u64 *key,
	      u64 *val);
s64 hmap_count(struct hmap __arena *m __arg_arena);
s64 hmap_buckets(struct hmap __arena *m __arg_arena);
int hmap_reserve(struct hmap __arena *m __arg_arena, u32 capacity);
int hmap_grow(struct hmap __arena *m __arg_arena);

static __always_inline struct hmap __arena *hmap_create(u32 capacity)
{
	return (struct hmap __arena *)hmap_create_addr(capacity);
}

#endif /* __LIBARENA_HASHMAP_H */
