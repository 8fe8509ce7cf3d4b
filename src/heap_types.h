/*
 * heap_types: the structures the heap, the page map and the thread caches share: the
 * heap classes, the descriptor of a superblock or large block, its anchor word, and the
 * layout of a superblock (its blocks, and a tracked class's records after them). Their
 * invariants are written beside them; the code that keeps them is heap.c's.
 */
#ifndef LFHEAP_HEAP_TYPES_H
#define LFHEAP_HEAP_TYPES_H

#include "common.h"
#include "sizeclass.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Heap classes: every size class twice. Class c < SIZECLASS_COUNT holds plain blocks,
 * which carry nothing but their contents (malloc's fast path). Class
 * c + SIZECLASS_COUNT, a "tracked" class, holds blocks of the same size whose superblock
 * keeps a record per block, beside the blocks, of the request size and the sticky
 * properties (zero fill, alignment) that calloc, the aligned routines and llheap's
 * extensions give them (llheap's header fields, without a header). The two never share
 * a superblock, so a plain malloc never pays for the records. */
#define HEAP_CLASSES (2 * SIZECLASS_COUNT)

/* The class_index of a large block. */
#define HEAP_CLASS_LARGE HEAP_CLASSES

LFH_INLINE unsigned heap_tracked_class(unsigned size_class)
{
    return size_class + SIZECLASS_COUNT;
}

/* The size class whose blocks a heap class (not HEAP_CLASS_LARGE) holds. */
LFH_INLINE unsigned heap_size_class(unsigned heap_class)
{
    return heap_class < SIZECLASS_COUNT ? heap_class : heap_class - SIZECLASS_COUNT;
}

/* Owner of blocks no thread cache may keep: large blocks, and the page map's sentinel for
 * foreign pointers. Zero, so that zero-filled memory (a fresh descriptor, the sentinel
 * in .bss) belongs to nobody; thread ids are never zero. */
#define HEAP_OWNER_NONE 0

struct descriptor {
    /* Read by every free; written while the superblock is set up, and `owner` when a
     * thread takes the superblock's free blocks into its cache. */
    _Atomic uint64_t owner; /* id of the thread cache that may reuse freed blocks */
    char *start;            /* first byte of the superblock or large mapping */
    size_t size;            /* bytes of the superblock or large mapping */
    /* An address's block key (heap_block_key) is its offset times this: 1 for a large
     * block, 0 for the sentinel of foreign memory. */
    uint64_t block_magic;
    uint32_t *records;     /* a tracked class's per-block records; NULL otherwise */
    uint32_t block_size;   /* bytes per block (small only) */
    uint32_t max_count;    /* blocks in the superblock (small only) */
    uint32_t self;         /* this descriptor's index, for the lock-free stacks */
    uint8_t class_index;   /* heap class, or HEAP_CLASS_LARGE */
    bool os_backed;        /* a large block mapped from the OS, not an arena chunk */
    uint16_t class_scaled; /* class_index * SIZECLASS_STRIDE: free's index into its cache */
    /* The key of its blocks' free marks (heap.h), new at each set-up of a superblock, so
     * that a mark left by an earlier tenant of the pages is no mark in this one. */
    uint64_t free_key;

    /* Written by any thread that frees into the superblock or moves the descriptor
     * between stacks: kept off the line the fast path reads. */
    alignas(LFH_CACHE_LINE) _Atomic uint64_t anchor;
    _Atomic uint32_t next; /* link in a partial stack or the free-descriptor stack */

    /* A large block's record (request size and sticky properties), written by the thread
     * that allocates or resizes it, read by whoever holds it. */
    uint32_t large_flags;
    /* The secure build: the block's last page is a guard page (secure_guard_take). */
    bool large_guarded;
    size_t large_request;

    /* The carve frontier, as the key of its address (heap_block_key): every block below
     * it has been handed out at least once, none at or above it ever was (Streamflow's
     * bump allocation carves in address order). So one compare of a block key with it
     * tells a block start that was handed out (heap_is_carved_block). Written only by
     * whoever holds the superblock's uncarved tail — the cache bumping through it
     * (tcache_bin_take), or heap_give_back when the tail goes back to the anchor — and
     * read by every free. 1 for a large block (its start only), 0 for the sentinel
     * (nothing). On this line rather than the first: it changes with every carved block,
     * and the first line is read by the frees of other threads. */
    _Atomic uint64_t carved_limit;
    /* The key of the superblock's end: every block start's key is below it (1 for a large
     * block, 0 for the sentinel), carved or not. */
    uint64_t block_limit;
};

/* The block key of `ptr`, an address inside the superblock `desc` describes: with d the
 * block size, c = floor(2^64 / d) + 1 and e = c * d - 2^64 (0 < e <= d), an offset
 * x = q * d + r below 2^32 gives x * c mod 2^64 = q * e + r * c: that is q * e (< 2^32)
 * when r = 0 and at least c (> 2^48) otherwise. So one compare of the key with k * e
 * accepts exactly the block starts of the first k blocks (Lemire, Kaser and Kurz's
 * divisibility test, extended with a bound): k = max_count is heap_is_block_start, k = the
 * blocks carved so far heap_is_carved_block, which free uses to refuse an interior
 * pointer, a pointer into the unused tail and a block never handed out in one test. */
LFH_INLINE uint64_t heap_block_key(const struct descriptor *desc, const void *ptr)
{
    return (uint64_t)((const char *)ptr - desc->start) * desc->block_magic;
}

/* True if `ptr` is the start of one of the superblock's blocks, handed out or not: free
 * must not take an interior pointer into a list, or the block would later be handed out
 * twice. */
LFH_INLINE bool heap_is_block_start(const struct descriptor *desc, const void *ptr)
{
    return heap_block_key(desc, ptr) < desc->block_limit;
}

/* True if `ptr` is the start of a block below the carve frontier: handed out at least
 * once. Relaxed: a free of a block that was handed out follows, through the program's own
 * hand-off of the pointer, the carve that handed it out, so it reads that frontier or a
 * later one; only a block never handed out can be judged uncarved. */
LFH_INLINE bool heap_is_carved_block(const struct descriptor *desc, const void *ptr)
{
    return heap_block_key(desc, ptr) <
           atomic_load_explicit(&desc->carved_limit, memory_order_relaxed);
}

/* Moves the carve frontier of `desc` to `frontier`, a block boundary (the superblock's
 * end included). Relaxed: only whoever holds the uncarved tail writes it (see
 * carved_limit); the program's hand-off of a carved block orders this store before any
 * free of it, and the anchor's CAS carries it to the tail's next holder. */
LFH_INLINE void heap_set_carve_frontier(struct descriptor *desc, const char *frontier)
{
    atomic_store_explicit(&desc->carved_limit, heap_block_key(desc, frontier),
                          memory_order_relaxed);
}

_Static_assert(offsetof(struct descriptor, anchor) == LFH_CACHE_LINE,
               "what every free reads fits one cache line");

/* ---- the anchor ------------------------------------------------------------------ */

/*
 * The anchor, one 64-bit word updated only by CAS, says how many blocks of a superblock
 * are free and where they are: a chain of freed blocks (linked through their first word)
 * plus the never-touched tail [tail, max_count) that has not been carved yet. Blocks move
 * between the anchor and the thread caches only in batches: a cache takes every free
 * block at once (so the anchor needs no ABA tag: blocks only ever get added to it between
 * a reader's load and its CAS), and gives blocks back as chains, one CAS per chain.
 *
 * Invariant: `count` = blocks on the chain + (max_count - `tail`); the chain is
 * NULL-terminated and linked through the blocks' first word (heap_link_get).
 *
 * States: FULL   — no free block in the anchor, not on a partial list;
 *         PARTIAL — some free blocks; on exactly one partial list, or just popped from it
 *                  by a thread that is about to take them;
 *         EMPTY  — every block free; terminal. The superblock's pages go back at once; its
 *                  descriptor is recycled by whoever next finds it (the thread that made it
 *                  EMPTY if it was FULL, the thread that pops it if it was PARTIAL).
 */
enum anchor_state { ANCHOR_FULL = 0, ANCHOR_PARTIAL = 1, ANCHOR_EMPTY = 2 };

/* Layout: state 2 bits | avail 20 bits | count 21 bits | tail 21 bits. `avail` is the
 * byte offset of the first chained block divided by 16 (all blocks are 16-aligned), so
 * superblocks may be up to 16 MiB; `count` includes the uncarved tail. */
#define ANCHOR_AVAIL_NONE ((uint64_t)0xFFFFF)
#define ANCHOR_FIELD_MAX  ((uint64_t)0x1FFFFF)

LFH_INLINE unsigned anchor_state(uint64_t a)
{
    return (unsigned)(a & 3);
}
LFH_INLINE uint64_t anchor_avail(uint64_t a)
{
    return (a >> 2) & ANCHOR_AVAIL_NONE;
}
LFH_INLINE uint32_t anchor_count(uint64_t a)
{
    return (uint32_t)((a >> 22) & ANCHOR_FIELD_MAX);
}
LFH_INLINE uint32_t anchor_tail(uint64_t a)
{
    return (uint32_t)(a >> 43);
}

LFH_INLINE uint64_t anchor_make(unsigned state, uint64_t avail, uint32_t count, uint32_t tail)
{
    return (uint64_t)state | avail << 2 | (uint64_t)count << 22 | (uint64_t)tail << 43;
}

LFH_INLINE void *anchor_chain(const struct descriptor *d, uint64_t a)
{
    uint64_t avail = anchor_avail(a);
    return avail == ANCHOR_AVAIL_NONE ? NULL : d->start + (avail << 4);
}

/* ---- the superblock layout --------------------------------------------------------- */

/* A superblock of a plain class is max_count blocks of block_size bytes from `start`; a
 * tracked class's superblock holds size / (block_size + 4) blocks, then their records,
 * one 4-byte word per block (`records`). */
/* A record: the request size in the low 16 bits (small blocks are at most 32 KiB; a large
 * block keeps its request in large_request), log2 of the alignment in the next 6 bits
 * (a large block's alignment may be any power of two below 2^64: five bits wrapped 2^32
 * to 1, and a block aligned to 4 GiB or more lost its alignment when it moved), then the
 * zero-fill bit. */
#define HEAP_RECORD_REQUEST_MASK 0xFFFFu
#define HEAP_RECORD_ALIGN_SHIFT  16
#define HEAP_RECORD_ALIGN_MASK   0x3Fu
#define HEAP_RECORD_ZERO_FILL    (1u << 22)
#define HEAP_RECORD_TRACKED      (1u << 23) /* large blocks only: see heap_props.tracked */
/* Two bits the debug build keeps in every record (and in large_flags): the block's state,
 * never handed out, live or freed (debug.h). heap_props_set leaves them alone there. */
#define HEAP_RECORD_STATE_SHIFT 24
#define HEAP_RECORD_STATE_MASK  (3u << HEAP_RECORD_STATE_SHIFT)
/* The record of a calloc block, but for its request size: 16-byte aligned, zero fill. */
#define HEAP_RECORD_CALLOC (4u << HEAP_RECORD_ALIGN_SHIFT | HEAP_RECORD_ZERO_FILL)
/* The same for a malloc block (the debug build records them all). */
#define HEAP_RECORD_MALLOC (4u << HEAP_RECORD_ALIGN_SHIFT)

/* The record of `block`, a block of a superblock of a tracked class. Records are plain
 * memory: a block's record is written and read only by whoever holds the block, and the
 * program's own hand-off of the pointer orders those accesses. The block's index, offset
 * x / block size d, comes from heap_is_block_start's c = floor(2^64 / d) + 1 = 2^64 / d +
 * t (0 < t <= 1): x * c / 2^64 = x / d + x * t / 2^64, where x / d is at most q + (d - 1)
 * / d for x = q * d + r, and x * t / 2^64 < 1 / d as x < 2^64 / d (superblocks are far
 * smaller), so the high half of the product is q exactly. */
LFH_INLINE uint32_t *heap_record_at(const struct descriptor *desc, const void *block)
{
    uint64_t offset = (uint64_t)((const char *)block - desc->start);
    return &desc->records[(uint32_t)(((unsigned __int128)offset * desc->block_magic) >> 64)];
}

#endif
