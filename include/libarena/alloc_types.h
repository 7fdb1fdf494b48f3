/* SPDX-License-Identifier: LGPL-2.1 OR BSD-2-Clause */
/*
 * The allocators' types, in one place: their structs (span descriptors, heaps, the
 * heap's global state, struct buddy, its registry and page-run headers), the encodings
 * of their metadata, and the state machines and counter invariants that their code
 * keeps. Definitions only: the code lives in the allocators' sources. Where things are
 * in the arena, which the sanitizer shares, is arena_map.h's.
 */
#ifndef __LIBARENA_ALLOC_TYPES_H
#define __LIBARENA_ALLOC_TYPES_H

#include <libarena/base.h>
#include <libarena/arena_map.h>
#include <libarena/spinlock.h>

/* ---- the heap's span descriptors ---- */

#define HEAP_MAGIC		0x48656170u
#define HEAP_SPAN_MAGIC		0x5370616eu
#define HEAP_GLOBAL_MAGIC	0x476c6f62u

/* Span states. */
#define HEAP_SPAN_RESERVE	1	/* mapped, in a reserve (or on the way) */
#define HEAP_SPAN_ACTIVE	2	/* holds objects of one class for its owner */
#define HEAP_SPAN_RELEASE	3	/* in the pool: reused, or given back once due */

/* Trimming a medium span's unused pages (arena_heap_span.trim). */
#define HEAP_TRIM_NONE		0	/* every page of the kind mapped, not queued */
#define HEAP_TRIM_PENDING	1	/* in use, queued for maintenance to trim */
#define HEAP_TRIM_CANCELLED	2	/* still queued, but emptied before its trim */
#define HEAP_TRIM_BUSY		3	/* maintenance is freeing the unused pages */
#define HEAP_TRIM_DONE		4	/* only the pages its objects use are mapped */

/*
 * The heap's list words, each one u64 changed by compare-and-swap or taken whole by
 * exchange: the first item in the low 32 bits (span index + 1 for the lock-free stacks
 * of spans: revived, incoming reserve, pool, trim; an object's arena offset for a
 * span's remote list), the number of items in bits 32..62, and for the remote list
 * HEAP_REMOTE_FULL in bit 63 while the span is parked full (then the word is just that).
 */
#define HEAP_REMOTE_FULL	(1ull << 63)
#define HEAP_REMOTE_COUNT	0x7fffffffull
#define HEAP_WORD(first, count)	((u64)(u32)(first) | (u64)(count) << 32)
#define HEAP_WORD_FIRST(word)	((u32)(word))
#define HEAP_WORD_COUNT(word)	(((word) >> 32) & HEAP_REMOTE_COUNT)

/* One per span slot, in the descriptor window (64 bytes). */
struct arena_heap_span {
	u64 remote;		/* frees from other heaps, see above */
	u32 local;		/* owner's free list: arena offset of the first object */
	u32 used;		/* objects out, as the owner counts them */
	u32 bump;		/* objects carved so far; in the pool: since when (ms clock) */
	u32 capacity;		/* objects the span holds */
	u32 size;		/* object size */
	u8 cls;
	u8 kind;
	u8 state;
	u8 listed;		/* on the owner's partial list */
	u32 owner;		/* heap id + 1 while HEAP_SPAN_ACTIVE, else 0 */
	u32 next, prev;		/* owner's lists (span index + 1) */
	u32 link;		/* lock-free stacks: revived, the pool */
	u32 magic;		/* HEAP_SPAN_MAGIC while mapped */
	u32 trim;		/* HEAP_TRIM_* */
	u32 trim_link;		/* the trim stack */
	u32 recip;		/* span_recip(size): object index without a division */
};

_Static_assert(sizeof(struct arena_heap_span) == 64, "64 descriptors per page");
_Static_assert(HEAP_DESC_END - HEAP_DESC_START == HEAP_NR_SPANS * sizeof(struct arena_heap_span),
	       "one descriptor per span slot");

/*
 * State machines and counter invariants of the heap (src/heap.bpf.c). Actors: "owner"
 * holds the span's heap (h->busy): arena_malloc/arena_free with preemption disabled,
 * or arena_heap_collect_cpu (busy taken by cmpxchg, preemptible); "maint" is sleepable
 * (arena_heap_maintain, arena_heap_fill, arena_heap_reserve), on any CPU; "any" is any
 * program on any CPU.
 *
 * Span states (arena_heap_span.state; the slot is bit s of g->claimed):
 *   FREE     bit clear, magic 0, state 0 (a never-mapped descriptor page reads 0)
 *   RESERVE  on h->reserve[kind] or h->reserve_in[kind], or in transit in a walk
 *   ACTIVE   owner = heap id + 1 and exactly one of: h->current[cls]; h->partial[cls]
 *            (listed 1); parked full (remote == HEAP_REMOTE_FULL); h->revived
 *   RELEASE  on the pool (g->release); bump: ms clock, due purge_delay after it;
 *            capacity 0
 * magic == HEAP_SPAN_MAGIC from span_new to arena_heap_span_unmap; owner and listed
 * are 0 outside ACTIVE. Edges:
 *   FREE -> RESERVE     span_new (maint, from reserve_map): claim the bit (cmpxchg), map
 *                       the descriptor page once (desc_mapped, never unmapped) and
 *                       kind_pages; reset the descriptor (trim NONE), kind, state, then
 *                       magic; reserve_map pushes it onto h->reserve_in. No page: the
 *                       slot stays claimed for good. Magic unreadable: unmap, bit clear.
 *   RESERVE -> ACTIVE   take_reserve (owner, alloc_slow) via reserve_pop: checks magic,
 *                       state, kind (else drops the own list); sets cls, size, recip,
 *                       capacity, bump = local = used = remote = 0, owner, listed = 0,
 *                       then state. alloc_slow makes it current.
 *   RELEASE -> ACTIVE   pool_pop (owner, take_reserve, both reserve lists empty): the
 *                       first span of the kind with trim NONE or CANCELLED; RESERVE,
 *                       then as above.
 *   RELEASE -> RESERVE  pool_take (maint: arena_heap_fill below target,
 *                       arena_heap_reserve): same filter, onto h->reserve_in.
 *   ACTIVE -> RESERVE   span_retire (owner) once used == 0: free_local on a listed span
 *                       (never the inlined free), arena_heap_tidy_span. Unlinks
 *                       (listed = 0), clears current, owner = 0, PENDING -> CANCELLED;
 *                       if reserve_count < target x high_water and trim is not BUSY or
 *                       DONE: reserve_nr++, list_push onto h->reserve.
 *   ACTIVE -> RELEASE   span_retire otherwise, or when that push fails (reserve_nr--):
 *                       pool_add, bump = now.
 *   RESERVE -> RELEASE  reserve_shed (maint, arena_heap_fill: reserve_count > target,
 *                       the heap took no span and saw no arena_heap_refill for
 *                       purge_delay; target lowered to reserve_rest if set): both lists
 *                       taken whole, target of them back onto reserve_in, the rest
 *                       pooled with bump = now - purge_delay (due at once).
 *   RELEASE -> FREE     pool_purge (maint, end of arena_heap_maintain): trim DONE in any
 *                       pass (class_pages unmapped), or trim NONE, due, and the pass
 *                       mapped nothing (kind_pages); CANCELLED and BUSY wait.
 *                       arena_heap_span_unmap: magic = state = 0, unmap, bit clear.
 * Within ACTIVE (owner unless said): partial -> current, alloc_slow; current -> parked,
 * alloc_slow on a used-up span: cmpxchg(remote, 0, FULL), current = 0; parked ->
 * partial, free_local: cmpxchg(remote, FULL, 0), link_partial; parked -> revived,
 * remote_push (any) whose cmpxchg replaced FULL; revived -> partial, take_revived
 * (alloc_slow with partial[cls] empty, arena_heap_tidy). An emptied current span stays
 * current until arena_heap_tidy_span. A span whose stack push fails, or on a damaged
 * list, stays in its state on no list (lost_spans): leaked, never handed out twice.
 *
 * Trim states (arena_heap_span.trim; only medium spans of a class with class_pages < 32
 * leave NONE):
 *   NONE -> PENDING       trim_request (owner, take_reserve): store, push onto g->trim;
 *                         push fails: store NONE.
 *   CANCELLED -> PENDING  trim_request: cmpxchg; still queued, not pushed again.
 *   PENDING -> CANCELLED  span_retire (owner): cmpxchg.
 *   PENDING -> BUSY       trim_spans (maint; g->trim taken whole by xchg): cmpxchg, then
 *                         frees pages class_pages .. 31.
 *   BUSY -> DONE          trim_span: smp_store_release once they are freed.
 *   CANCELLED -> NONE     trim_spans: cmpxchg; off the stack from then on.
 *   DONE -> NONE          span_new: store, when the unmapped slot is mapped again.
 * Races. PENDING: span_retire vs trim_spans, the first cmpxchg wins. Owner first: the
 * span is whole and may go to a reserve. trim_spans first: span_retire reads BUSY and
 * pools it; pool_take and pool_pop skip it; pool_purge unmaps it once DONE. CANCELLED:
 * trim_request vs trim_spans. trim_spans first: the owner's cmpxchg fails and it pushes
 * anew. Owner first: trim_spans then finds PENDING and trims; an owner move between
 * trim_spans' two cmpxchgs makes it try both again, so a span it took off the stack
 * always ends NONE or DONE. Hence PENDING => ACTIVE; BUSY, DONE => ACTIVE or RELEASE;
 * CANCELLED => queued on g->trim or in a trim_spans walk; NONE => not queued.
 *
 * Counter invariants (at rest, lists undamaged):
 *   - capacity = HEAP_KIND_SPAN(kind) / size; 0 <= bump <= capacity; bump only rises
 *     (__heap_pop carves index bump) until take_reserve zeroes it. __heap_obj_start
 *     refuses index >= bump.
 *   - a carved object is in exactly one place: with a user (O), on local (L), on the
 *     remote chain (R, its count field) or on a heap's parked list (P). Lists link
 *     through word 0; free objects carry the tag in u32 2, __heap_pop clears it.
 *   - used + L == bump: __heap_pop used+1 with L-1 or bump+1, __heap_push used-1 L+1,
 *     collect moves R to L and used -= R. Hence used == O + R + P; used == 0 iff every
 *     carved object is on local, the only retire test (free_local,
 *     arena_heap_tidy_span). Tests check used - R == O + P (span_count).
 *   - listed => used > 0 (free_local retires at 0): the inlined arena_free sends the
 *     last free of a listed span, a free with used == 0 or FULL set, to the library.
 *   - remote: count == chain length (remote_push +1; collect's xchg takes it whole).
 *     FULL only as the whole word (cmpxchg from 0; the next remote_push drops it);
 *     when parked, L == R == 0 and used == bump == capacity.
 *   - damage leaks, never double-allocates: collect clamps used at 0, alloc_fast drops
 *     a local list that leaves the span, take_reserve zeroes a bad reserve.
 *   - reserve_count = reserve_nr[k] + count(reserve_in[k]) >= spans on both lists,
 *     equal at rest: reserve_nr rises before a push (span_retire; reserve_pop adds
 *     cnt - 1 before installing the incoming chain) and falls after a pop
 *     (reserve_pop) or by reserve_shed (spans taken from the own list).
 *   - parked_nr == length of h->parked (free_remote +1, drain_parked -1 per push that
 *     got through). A parked object is tagged, in the freeing heap's remote_frees and
 *     in its span's used: that span cannot retire.
 *   - arena_heap_outstanding() = large_allocs - large_frees + sum over heaps of allocs
 *     (__heap_pop) - frees (__heap_push) - remote_frees (free_remote with a heap, parked
 *     ones too) - orphan_frees (remote frees with no heap free on the CPU: every
 *     level busy, or none made yet; no heap counts them) - quarantined
 *     = large out + sum over ACTIVE spans of used - R - P.
 *     Exact only while no other CPU allocates or frees.
 *   - lost_frees (no heap to park on and the push failed, or a damaged parked list)
 *     and lost_spans (above) count leaks only; the tests assert both stay 0.
 *   - spans_mapped == slots with magic (span_new +1, arena_heap_span_unmap -1), at most
 *     the claimed bits; the counts in g->release and g->trim equal the chain lengths.
 */

/* ---- the heaps and the heap allocator's global state ---- */

/* A free object's third 32-bit word: HEAP_FREE_TAG ^ its arena offset (double frees). */
#define HEAP_FREE_TAG		0xf7eeb10cu

/*
 * What arena_heap_refill (heap.h) takes, from a program or from user space
 * (libarena_heap_refill()): here, so that user space needs no BPF header.
 */
struct arena_heap_refill_args {
	u32 nr_cpus;		/* in: CPUs to create heaps for; 0: as before (at least 1) */
	u32 reserve_small;	/* in: spans per heap, 0 for the default */
	u32 reserve_medium;
	u32 high_water;		/* in: x the target, 0 for the default */
	u32 reserve_large;	/* in: spare 512 KiB chunks for large sizes, 0: default 1 */
	u32 purge_delay_ms;	/* in: see HEAP_PURGE_DELAY_MS, 0 for the default */
	u32 reserve_rest;	/* in: see HEAP_RESERVE_REST, 0 keeps the default */
	/*
	 * in: pages of the program's arena globals, whose shadow the sanitizer build maps
	 * (a checked access through an unmapped shadow page costs a page fault); 0:
	 * ASAN_LOW_PAGES. libarena_heap_refill() counts them.
	 */
	u32 globals_pages;
	u64 spans_mapped;	/* out: spans the allocator holds */
	u64 pages_mapped;	/* out */
};

/* Counters of one heap, written only by the heap's user (sum them for the totals). */
struct arena_heap_stats {
	u64 allocs;
	u64 frees;		/* frees of objects of this heap's spans, by this heap */
	u64 remote_frees;	/* frees by this heap into other heaps' spans */
	u64 shortfalls;		/* NULL for want of a span: the reserve was empty */
	u64 spans_taken;	/* from the reserve */
	u64 spans_emptied;	/* back to the reserve */
	u64 spans_released;	/* beyond the high-water mark, for the kernel */
	u64 revived;		/* full spans a remote free made usable again */
	u64 nested;		/* calls that found a lower level busy */
	u64 parked;		/* remote frees parked (then retried) instead of given up */
};

/* One per CPU and nesting level, in the heaps window. */
struct arena_heap {
	u32 magic;
	u32 busy;		/* in use on this CPU right now */
	u32 id;			/* cpu * HEAP_LEVELS + level */
	u32 want;		/* the reserve ran low: maintenance should refill it */
	u32 used;		/* ever used: nesting levels get a reserve from then on */
	u32 parked;		/* remote frees that could not get through yet (object list) */
	/*
	 * The owner's spare spans (span index + 1), linked through next. Only the owner
	 * pushes and pops (compare-and-swap); maintenance may only take a list whole, so a
	 * pop cannot meet ABA. reserve_nr is raised before a push and lowered by whoever
	 * took a span: never below the true count.
	 */
	u32 reserve[HEAP_KINDS];
	u32 reserve_nr[HEAP_KINDS];
	u64 reserve_in[HEAP_KINDS];	/* from maintenance: span + 1 | count << 32 */
	u64 revived;			/* from remote freers: span + 1 */
	u32 parked_nr;		/* objects on it */
	u32 pool_held;		/* level 0 only: pool walks under way on this CPU */
	/*
	 * Maintenance only: the heap has taken no span from its reserves since quiet_since
	 * (ms clock; quiet_taken is stats.spans_taken then). Spares beyond the target leave
	 * a reserve that stayed quiet for the purge delay.
	 */
	u32 quiet_since;
	u32 quiet_taken;
	u32 current[HEAP_NR_CLASSES];
	u32 partial[HEAP_NR_CLASSES];	/* spans with free objects, besides current */
	struct arena_heap_stats stats;
};

/* Allocator-wide state (user address via arena_get_info: .heap). */
struct arena_heap_global {
	u32 magic;
	u32 nr_cpus;			/* heaps exist for CPUs 0 .. nr_cpus - 1 */
	u32 reserve[HEAP_KINDS];	/* targets per level-0 heap */
	u32 high_water;
	u32 want;			/* some heap asked for a refill */
	u32 reserve_large;		/* spare buddy chunks for sizes beyond 64 KiB */
	u32 fail_remote;		/* tests only: remote pushes fail, frees park */
	/*
	 * The pool: whole spare spans that left a reserve (span + 1 | count << 32, linked
	 * through link), each due purge_delay after its bump (ms clock). A heap short of
	 * spans takes from it before maintenance maps new ones; maintenance gives back the
	 * due ones, never in a pass that mapped. Only taken whole, so no ABA.
	 */
	u64 release;
	u64 trim;			/* spans to trim: span + 1 | count << 32 */
	u64 claimed[HEAP_NR_SPANS / 64];	/* span slots in use */
	u64 desc_mapped[HEAP_NR_SPANS / 64 / 64 + 1];	/* descriptor pages mapped */
	u64 spans_mapped;		/* now: in reserves, in use, or on the way back */
	u64 spans_returned;		/* given back to the kernel */
	u64 pages_mapped;		/* spans, descriptors and heaps, now */
	u64 refills;			/* maintenance passes that mapped spans */
	u64 wq_runs;			/* of those, from the workqueue */
	u64 map_failures;		/* the kernel had no page for a span */
	u64 no_heap;			/* malloc on a CPU (level) without a heap yet */
	u64 bad_frees;			/* -EINVAL frees */
	u64 lost_frees;			/* frees given up: no heap to park on; tests assert 0 */
	u64 lost_spans;			/* span pushes given up after the whole loop budget */
	u64 large_allocs, large_frees;	/* served by the buddy allocator */
	u64 pages_trimmed;		/* unused pages of spans in use, given back */
	u32 purge_delay;		/* ms, HEAP_PURGE_DELAY_MS unless set */
	u32 purge_due;			/* ms clock of the next spare due, 0: none (a hint) */
	u32 large_since;		/* ms clock since the large sizes' spares exceed theirs */
	u32 large_allocs_seen;		/* the buddy's allocs then (low bits) */
	u64 pool_reused;		/* spans taken from the pool instead of mapped */
	u64 spares_shed;		/* spans moved from quiet reserves to the pool */
	u64 map_calls, map_pages;	/* bpf_arena_alloc_pages calls and pages, ever */
	u64 unmap_calls, unmap_pages;	/* bpf_arena_free_pages calls and pages, ever */
	u64 maintain_passes;		/* arena_heap_maintain calls */
	u64 maintain_ns;		/* and the time they took */
	u32 reserve_rest;		/* HEAP_RESERVE_REST unless set */
	u32 woken;			/* ms clock of the last arena_heap_refill: no heap quiet */
	/*
	 * Walks under way that hold spans out of sight (the pool taken whole, a reserve
	 * being shed): an owner that finds nothing meanwhile waits for them to end, up to
	 * HEAP_POOL_WAIT_NS, rather than fail while spans are in transit (not for one on
	 * its own CPU: that one is under it and cannot end first).
	 */
	u32 pool_holders;
	u32 pool_waits;			/* owners that waited for such a walk */
	u32 maintaining;		/* CPU + 1 of the pass under way: the next one waits */
	u32 maintain_overlaps;		/* passes that waited HEAP_MAINTAIN_WAIT_NS in vain */
	u64 orphan_frees;		/* remote frees with no heap free on the CPU */
};

/* ---- the buddy allocator's metadata: one byte per 16-byte block start ---- */

/*
 * The byte of a block's first 16 bytes says FREE (on a free list, or a pair left apart),
 * USED, or CACHED (freed into a CPU's cache, see struct buddy_cpu_cache), and its order;
 * the bytes of the rest of a block are 0. CARVED marks, for the moment between the lock
 * and the cache, a used block that is the first of a refill's BUDDY_CACHE_BATCH.
 */
#define BUDDY_META_FREE		0x80
#define BUDDY_META_USED		0x40
#define BUDDY_META_CACHED	0x20
#define BUDDY_META_CARVED	0x10
#define BUDDY_META_ORDER	0x0f

/*
 * A lazy[] entry names the block of its order's pair left apart: the block's user
 * address (16-byte aligned, so its low bits are free) | its order; 0 for none.
 */
#define BUDDY_LAZY(block, order)	((u64)(block) | (order))
#define BUDDY_LAZY_BLOCK(entry)		((entry) & ~(u64)BUDDY_META_ORDER)
#define BUDDY_LAZY_ORDER(entry)		((entry) & BUDDY_META_ORDER)

/*
 * Where a free block keeps the allocator's links (upstream's names): the user addresses
 * of its list neighbours, in its first 16 bytes. Nothing else of a free block is used.
 */
struct buddy_header {
	u64 next;
	u64 prev;
};
#define BUDDY_HEADER_OFF	0
_Static_assert(BUDDY_HEADER_OFF + sizeof(struct buddy_header) <= BUDDY_MIN_SIZE,
	       "the links fit in the smallest block");

/* Upstream's names for the geometry above. */
#define BUDDY_MIN_ALLOC_SHIFT	BUDDY_MIN_SHIFT
#define BUDDY_MIN_ALLOC_BYTES	BUDDY_MIN_SIZE
#define BUDDY_CHUNK_NUM_ORDERS	BUDDY_ORDERS
#define BUDDY_CHUNK_BYTES	BUDDY_CHUNK_SIZE
#define BUDDY_CHUNK_ITEMS	(BUDDY_CHUNK_SIZE >> BUDDY_MIN_SHIFT)	/* blocks a chunk tracks */
#define BUDDY_CHUNK_OFFSET_MASK	(BUDDY_CHUNK_SIZE - 1)
#define BUDDY_VADDR_OFFSET	BUDDY_CHUNK_SIZE	/* chunks are aligned to their size */
#define BUDDY_VADDR_SIZE	(BUDDY_NR_SLOTS * BUDDY_CHUNK_SIZE)	/* the chunk window */

#define BUDDY_MAGIC		0x42756464u
#define BUDDY_RUN_MAGIC		0x52756e50u
#define BUDDY_INITING		0x496e6974u	/* magic while buddy_init works on it */

/*
 * The buddy allocator's invariants (src/buddy.bpf.c relies on them):
 *   - block metadata is one byte per 16-byte unit of a chunk: 0 for a unit that does not
 *     start a block, BUDDY_META_FREE | order, BUDDY_META_USED | order or
 *     BUDDY_META_CACHED | order for one that does;
 *   - a free block is on exactly one list, free_head[order], linked through its first 16
 *     bytes; a used block is on none;
 *   - two free buddies of one order are merged, except at most one pair per order: a
 *     free whose order's list holds nothing but its buddy leaves the two apart (lazy[]),
 *     so that allocating and freeing one size on an otherwise empty chunk costs a pop
 *     and a push instead of a split and a merge across every order. Such pairs are
 *     merged before the allocator maps a chunk for want of a larger block, and before a
 *     spare chunk is taken out (coalesce());
 *   - in_use[slot] of the registry counts the blocks in use in a chunk, cached ones
 *     included: a chunk is a spare exactly when it is 0, merged or not;
 *   - a chunk is owned by one allocator (owner[] in the registry) from the moment its
 *     pages are allocated until they are freed;
 *   - every change of lists, metadata and statistics happens under b->lock, with
 *     preemption disabled; page kfuncs are called only outside it. The exceptions are
 *     a CPU's cache, under its busy word, and the metadata byte of a block moving between
 *     USED and CACHED (or being cut out of a refill's block, which nobody else can
 *     reach): a free changes USED to anything by compare-and-swap of the byte's word,
 *     so that two frees of one block cannot both succeed.
 */

/* What user space can read through the mmap (libarena_buddy_stats_print()). */
struct buddy_stats {
	u64 blocks_in_use[BUDDY_ORDERS];	/* bytes: blocks << (order + 4) */
	u64 bytes_requested;			/* through the lock: caches count theirs */
	u64 chunks_held;			/* chunks mapped now, spares included */
	u64 chunks_spare;			/* of those, entirely free */
	u64 chunks_peak;			/* most chunks in use, this period or the last */
	u64 chunks_returned;			/* chunks given back to the kernel */
	u64 runs_in_use;			/* page runs (allocations > 512 KiB) */
	u64 run_pages_in_use;
	u64 pages_returned;			/* pages given back, chunks and runs */
	u64 allocs, frees;
	u64 failed_allocs;			/* NULL returned for a valid size */
	u64 bad_calls;				/* -EINVAL frees, bad sizes */
	u64 lock_timeouts;			/* calls that gave up on the lock */
	u64 corruptions;			/* free lists found damaged, and dropped */
	u64 deferred_frees;			/* frees that met a lock timeout: deferred */
	u64 map_calls, map_pages;		/* page kfunc maps (chunks, runs), ever */
	u64 unmap_calls;			/* and unmaps (their pages: pages_returned) */
	u64 lazy_frees;				/* frees that left a pair of buddies apart */
	u64 coalesces;				/* passes that merged such pairs */
	u64 cache_refills;			/* batches taken from the lists for a CPU */
	u64 cache_spills;			/* batches a CPU's cache gave back */
};

/*
 * Per-CPU caches of small blocks (orders below BUDDY_CACHE_ORDERS: 16 B .. 4 KiB), so
 * that CPUs allocating and freeing those do not meet on the allocator's lock. A CPU's
 * cache is taken by compare-and-swap of busy for the few instructions of a push or a
 * pop; whoever finds it busy (a program that interrupted or preempted its user, another
 * CPU flushing it) takes the lock instead, so nothing waits for it. An empty cache is
 * refilled with one block of BUDDY_CACHE_BATCH blocks' size, cut up; a full one
 * (BUDDY_CACHE_CAP(order) blocks: BUDDY_CACHE_BYTES of them, or BUDDY_CACHE_MAX when
 * that is more) gives BUDDY_CACHE_BATCH of them back through the deferred list, which
 * the next allocation frees. So a CPU holds at most 640 KiB in its cache, and a
 * program that keeps a few hundred small blocks out at a time cycles them through its
 * cache without the lock. Cached blocks count as in use in
 * the statistics and in their chunks (they are the allocator's, not free on a list);
 * buddy_flush_caches(), buddy_trim() and buddy_shrink() give them back. A CPU numbered
 * BUDDY_CACHE_CPUS or above has no cache and always takes the lock.
 */
#define BUDDY_CACHE_ORDERS	9
#define BUDDY_CACHE_CPUS	128
#define BUDDY_CACHE_BATCH_SHIFT	4
#define BUDDY_CACHE_BATCH	(1u << BUDDY_CACHE_BATCH_SHIFT)
#define BUDDY_CACHE_MAX		(2 * BUDDY_CACHE_BATCH)
#define BUDDY_CACHE_BYTES	(64u << 10)
#define BUDDY_CACHE_FIT(order)	(BUDDY_CACHE_BYTES >> ((order) + BUDDY_MIN_SHIFT))
#define BUDDY_CACHE_CAP(order)	(BUDDY_CACHE_FIT(order) > BUDDY_CACHE_MAX ? \
				 BUDDY_CACHE_FIT(order) : BUDDY_CACHE_MAX)

struct buddy_cpu_cache {
	u32 busy;				/* 1 while someone pushes, pops or flushes */
	u16 nr[BUDDY_CACHE_ORDERS];		/* blocks in each order's list */
	u16 pad;
	u64 head[BUDDY_CACHE_ORDERS];		/* blocks linked through their first word */
	u64 tail[BUDDY_CACHE_ORDERS];		/* the last of each list: a flush needs no walk */
	u64 bytes_requested;			/* by the allocations it served */
	u64 pad2[2];				/* cache lines of its own */
};
_Static_assert(sizeof(struct buddy_cpu_cache) == 192, "one CPU's cache, 192 bytes");
_Static_assert(BUDDY_CACHE_ORDERS - 1 + BUDDY_CACHE_BATCH_SHIFT <= 15,
	       "a refill's block fits in a chunk");

struct buddy {
	arena_spinlock_t lock;
	u32 magic;				/* BUDDY_MAGIC while initialised */
	u32 max_chunks;				/* 0: no limit; set after buddy_init */
	u64 free_head[BUDDY_ORDERS];		/* user address of the first free block */
	u64 runs;				/* user address of the first run header */
	u64 period_peak;			/* most chunks in use in this period */
	/*
	 * Blocks whose free timed out on the lock (a holder's vCPU descheduled for 250 ms):
	 * a lock-free stack linked through the blocks' first words, freed by the next
	 * allocation (or flush, trim, maintenance). So a free never loses its block.
	 */
	u64 deferred;
	u64 lazy[BUDDY_ORDERS];			/* a block of each order's pair apart | order */
	u32 lazy_mask;				/* orders whose lazy[] is set */
	u32 holder;				/* the lock holder's CPU + 1, 0: none */
	struct buddy_stats stats;
	struct buddy_cpu_cache cache[BUDDY_CACHE_CPUS];
};

/*
 * Which chunk slots are taken, and by which allocator: one for every struct buddy of the
 * arena (buddy_registry). Here so that user space and the host tests can check a chunk.
 */
struct buddy_registry {
	u64 claimed[BUDDY_NR_SLOTS / 64];
	u64 owner[BUDDY_NR_SLOTS];		/* user address of the owning struct buddy */
	u32 in_use[BUDDY_NR_SLOTS];		/* blocks in use, under the owner's lock */
};

/* Header page in front of each page run. */
struct buddy_run {
	u32 magic;				/* BUDDY_RUN_MAGIC while in use */
	u32 pages;				/* pages of the run, this header included */
	u64 owner;				/* user address of its struct buddy */
	u64 next, prev;				/* the owner's list of runs */
};

#endif /* __LIBARENA_ALLOC_TYPES_H */
