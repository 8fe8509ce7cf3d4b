/*
 * heap: the lock-free heap of superblocks under the thread caches (LRMalloc §3.2,
 * thesis ch. 5). Superblocks and large blocks are chunks of the arenas (arena.h). A superblock is a
 * run of pages cut into blocks of one size class and is tracked by a descriptor; descriptors are
 * recycled, never unmapped, so a stale pointer to one can always be read. Large blocks get a
 * descriptor too, so that free and malloc_usable_size find every block through the page map.
 *
 * The anchor, one 64-bit word updated only by CAS, says how many blocks of a superblock
 * are free and where they are: a chain of freed blocks (linked through their first word)
 * plus the never-touched tail [tail, max_count) that has not been carved yet. Blocks move
 * between the anchor and the thread caches only in batches: a cache takes every free
 * block at once (so the anchor needs no ABA tag: blocks only ever get added to it between
 * a reader's load and its CAS), and gives blocks back as chains, one CAS per chain.
 *
 * States: FULL   — no free block in the anchor, not on a partial list;
 *         PARTIAL — some free blocks; on exactly one partial list, or just popped from it
 *                  by a thread that is about to take them;
 *         EMPTY  — every block free; terminal. The superblock's pages go back at once; its
 *                  descriptor is recycled by whoever next finds it (the thread that made it
 *                  EMPTY if it was FULL, the thread that pops it if it was PARTIAL).
 */
#ifndef LFHEAP_HEAP_H
#define LFHEAP_HEAP_H

#include "common.h"
#include "invariant.h"
#include "secure.h"
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

/* What a tracked block (or a large block) remembers about its allocation. */
struct heap_props {
    size_t request; /* bytes asked for: what malloc_size reports */
    size_t align;   /* alignment asked for, at least 16 */
    bool zero_fill; /* calloc-like: bytes added by realloc read as zero */
    bool tracked;   /* allocated by a routine that records properties, so that a block
                       realloc moves it to is tracked too (always so for small blocks
                       with a record; a large block from plain malloc is not) */
};

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
    /* Whether an address is the start of one of the superblock's blocks, in one multiply
     * and one compare (heap_is_block_start); for a large block 1 and 1 (its start only); 0 and 0
     * for the sentinel of foreign memory (nothing). */
    uint64_t block_magic;
    uint64_t block_limit;
    uint32_t *records;     /* a tracked class's per-block records; NULL otherwise */
    uint32_t block_size;   /* bytes per block (small only) */
    uint32_t max_count;    /* blocks in the superblock (small only) */
    uint32_t self;         /* this descriptor's index, for the lock-free stacks */
    uint8_t class_index;   /* heap class, or HEAP_CLASS_LARGE */
    bool os_backed;        /* a large block mapped from the OS, not an arena chunk */
    uint16_t class_scaled; /* class_index * SIZECLASS_STRIDE: free's index into its cache */

    /* Written by any thread that frees into the superblock or moves the descriptor
     * between stacks: kept off the line the fast path reads. */
    alignas(LFH_CACHE_LINE) _Atomic uint64_t anchor;
    _Atomic uint32_t next; /* link in a partial stack or the free-descriptor stack */

    /* A large block's record (request size and sticky properties), written by the thread
     * that allocates or resizes it, read by whoever holds it. */
    uint32_t large_flags;
    size_t large_request;

    /* The carve frontier: every block below it has been handed out at least once, none at
     * or above it ever was (Streamflow's bump allocation carves in address order). Written
     * only by whoever holds the superblock's uncarved tail — the cache bumping through it
     * (tcache_bin_take), or heap_give_back when the tail goes back to the anchor — and
     * read by every free, which refuses a block start at or above it. For a large block,
     * its end. On this line rather than the first: it changes with every carved block,
     * and the first line is read by the frees of other threads. */
    _Atomic(char *) carve;
};

/* True if `ptr`, an address inside the superblock `desc` describes, is the start of one
 * of its blocks: free must not take an interior pointer (or one into the superblock's
 * unused tail) into a list, or the block would later be handed out twice.
 *
 * With d the block size, c = floor(2^64 / d) + 1 and e = c * d - 2^64 (0 < e <= d), an
 * offset x = q * d + r below 2^32 gives x * c mod 2^64 = q * e + r * c: that is q * e
 * (< 2^32) when r = 0 and at least c (> 2^48) otherwise. So one compare with
 * max_count * e accepts exactly the block starts with q < max_count (Lemire, Kaser and
 * Kurz's divisibility test, extended with the bound). */
LFH_INLINE bool heap_is_block_start(const struct descriptor *desc, const void *ptr)
{
    return (uint64_t)((const char *)ptr - desc->start) * desc->block_magic < desc->block_limit;
}

/* The page map's contract as free sees it, asserted of a pointer that heap_is_block_start
 * accepted for the descriptor the page map gave for it (never the sentinel of foreign
 * memory, which accepts nothing): the descriptor covers the pointer, and the block's index
 * is in range and gives back the pointer (for a large block, its start). Cannot fire
 * spuriously under concurrency: it reads only fields that free reads already (start,
 * block_magic) and their companions (size, block_size, max_count), all written when the
 * superblock or large block is set up, before its pages are registered, and not again
 * while one of its blocks is live; a free of a block the program holds is ordered after
 * that setup by the program's own hand-off of the pointer. (A free of a pointer the
 * program no longer holds, racing with the reuse of its pages, is undefined already.) */
LFH_INLINE void heap_check_block(const struct descriptor *desc, const void *ptr)
{
    uint64_t offset = (uint64_t)((const char *)ptr - desc->start);
    LFH_INVARIANT("page map covers the block", offset < desc->size);
    uint64_t index = (uint64_t)(((unsigned __int128)offset * desc->block_magic) >> 64);
    LFH_INVARIANT("block index in range",
                  desc->class_index == HEAP_CLASS_LARGE
                      ? offset == 0
                      : index < desc->max_count && index * desc->block_size == offset);
}

_Static_assert(offsetof(struct descriptor, anchor) == LFH_CACHE_LINE,
               "what every free reads fits one cache line");

/* True if no block at or past `block`, a block start of `desc`, was ever handed out.
 * Relaxed: a free of a block that was handed out follows, through the program's own
 * hand-off of the pointer, the carve that handed it out, so it reads that frontier or a
 * later one; only a block never handed out can be judged uncarved. */
LFH_INLINE bool heap_block_uncarved(const struct descriptor *desc, const void *block)
{
    return (const char *)block >= atomic_load_explicit(&desc->carve, memory_order_relaxed);
}

/* The free mark: a freed small block's second word holds heap_free_mark, a per-process
 * random value, from the moment it is freed until it is handed out again (every way out
 * of the heap clears it). A free that finds the mark refuses the block: it is already on
 * a free list, and taking it again would hand it out twice. A live block carries the mark
 * only if the program wrote this secret there, which it can learn only by reading freed
 * memory; a program that writes into a freed block's second word defeats the check (a
 * use after free before the double free). The debug build knows every block's state from
 * its records and fills freed blocks itself, so it leaves the mark out. */
#ifdef LFHEAP_DEBUG
#define HEAP_FREE_MARKS 0
#else
#define HEAP_FREE_MARKS 1
#endif
extern _Atomic uint64_t heap_free_mark __attribute__((visibility("hidden")));

/* The mark, read once per free (the fast path compares and stores the same value).
 * Relaxed: it changes once, at the first superblock (heap_mark_init), before any block
 * exists to carry it, and a thread that frees a block got it, through the program, from
 * one that saw the mark set. The block's words themselves are plain memory: they belong
 * to whoever holds the block, ordered by the program's hand-off as its contents are. */
LFH_INLINE uint64_t heap_mark(void)
{
    return atomic_load_explicit(&heap_free_mark, memory_order_relaxed);
}

LFH_INLINE bool heap_block_marked_free(const void *block, uint64_t mark)
{
    return HEAP_FREE_MARKS && ((const uint64_t *)block)[1] == mark;
}

LFH_INLINE void heap_block_mark_free(void *block, uint64_t mark)
{
    if (HEAP_FREE_MARKS)
        ((uint64_t *)block)[1] = mark;
}

LFH_INLINE void heap_block_unmark(void *block)
{
    if (HEAP_FREE_MARKS)
        ((uint64_t *)block)[1] = 0;
}

/* A block leaves the heap for the program: its free mark is cleared (a carved block may
 * hold a stale one from an earlier tenant of its pages), then, in the secure build, its
 * tail canary is written (in a 16-byte block the two share the second word). */
LFH_INLINE void heap_block_hand_out(void *block, size_t block_size)
{
    heap_block_unmark(block);
    secure_hand_out(block, block_size);
}

/* The link from a free block to the next one of its list or chain, in its first word
 * (encoded in the secure build: secure.h). */
LFH_INLINE void *heap_link_get(const void *block)
{
    return secure_link_decode(block, *(void *const *)block);
}

LFH_INLINE void heap_link_set(void *block, void *next)
{
    *(void **)block = secure_link_encode(block, next);
}

/* True if `ptr` is a block lfheap handed out and the program has not freed: a block start
 * of `desc` (its descriptor from the page map), below the carve frontier, and for a small
 * block without the free mark. free, realloc and the queries take nothing else. */
LFH_INLINE bool heap_block_live(const struct descriptor *desc, const void *ptr)
{
    if (!heap_is_block_start(desc, ptr))
        return false;
    heap_check_block(desc, ptr);
    if (heap_block_uncarved(desc, ptr))
        return false;
    return desc->class_index == HEAP_CLASS_LARGE || !heap_block_marked_free(ptr, heap_mark());
}

/* What a thread cache receives when it takes a superblock's free blocks. */
struct heap_fill {
    struct descriptor *desc;
    void *chain;          /* NULL-terminated list of freed blocks */
    uint32_t chain_count; /* blocks on `chain` */
    char *bump;           /* never-touched blocks [bump, bump_end), carved in order */
    char *bump_end;
};

/* Takes every free block of one superblock of class `cls` for the cache of thread `tid`:
 * a partial superblock (its owner's shard first) or a fresh one. False when out of
 * memory. */
bool heap_fill(unsigned cls, uint64_t tid, struct heap_fill *out);

/* Gives back `count` blocks of `desc` linked from `first` to `last` (count may be 0 with
 * first NULL), and, if `bump` is not NULL, the uncarved tail starting at `bump`, which
 * becomes the carve frontier. The blocks must carry the free mark already. */
void heap_give_back(struct descriptor *desc, void *first, void *last, uint32_t count, char *bump);

/* A record: the request size in the low 16 bits (small blocks are at most 32 KiB; a large
 * block keeps its request in large_request), log2 of the alignment in the next 5 bits,
 * then the zero-fill bit. */
#define HEAP_RECORD_REQUEST_MASK 0xFFFFu
#define HEAP_RECORD_ALIGN_SHIFT  16
#define HEAP_RECORD_ALIGN_MASK   0x1Fu
#define HEAP_RECORD_ZERO_FILL    (1u << 21)
#define HEAP_RECORD_TRACKED      (1u << 22) /* large blocks only: see heap_props.tracked */
/* Two bits the debug build keeps in every record (and in large_flags): the block's state,
 * never handed out, live or freed (debug.h). heap_props_set leaves them alone there. */
#define HEAP_RECORD_STATE_SHIFT 23
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

/* The record of the block at `block`, which the caller holds: its request size and
 * sticky properties. False for a plain small block, which has none. */
bool heap_props_get(const struct descriptor *desc, const void *block, struct heap_props *out);
/* Writes the record of a tracked or large block the caller holds. */
void heap_props_set(struct descriptor *desc, const void *block, const struct heap_props *props);

/* Large blocks: an arena chunk, or their own mapping above ARENA_MAX_CHUNK; `align` a
 * power of two (at least 16). *zeroed says whether the block is known to read as zeros. */
void *heap_large_alloc(size_t size, size_t align, bool *zeroed);
void heap_large_free(struct descriptor *desc);
/* Resizes a large block whose user pointer is desc->start, keeping its contents: in
 * place when it still fits its chunk without wasting half of it, or, for blocks mapped
 * from the OS, by moving its pages to a new mapping aligned to `align`. NULL (and the
 * block untouched) otherwise. The record (heap_props) is the caller's to update. */
void *heap_large_resize(struct descriptor *desc, size_t size, size_t align);

#ifdef LFHEAP_FAULT_INJECTION
/* Test view of the fault-injection build, for a quiescent heap: descriptors that are
 * neither free nor EMPTY on a partial stack, i.e. those of live superblocks and large
 * blocks (0 once every block is freed and every cache flushed). */
size_t heap_descriptors_in_use(void);
#endif

#endif
