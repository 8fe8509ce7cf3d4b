/*
 * heap: the lock-free heap of superblocks under the thread caches (LRMalloc §3.2,
 * thesis ch. 5). Superblocks and large blocks are chunks of the arenas (arena.h). A superblock is a
 * run of pages cut into blocks of one size class and is tracked by a descriptor; descriptors are
 * recycled, never unmapped, so a stale pointer to one can always be read. Large blocks get a
 * descriptor too, so that free and malloc_usable_size find every block through the page map.
 *
 * The shared structures (descriptor, anchor, superblock layout) and their invariants are
 * in heap_types.h.
 */
#ifndef LFHEAP_HEAP_H
#define LFHEAP_HEAP_H

#include "common.h"
#include "heap_types.h"
#include "invariant.h"
#include "secure.h"
#include "sizeclass.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a tracked block (or a large block) remembers about its allocation. */
struct heap_props {
    size_t request; /* bytes asked for: what malloc_size reports */
    size_t align;   /* alignment asked for, at least 16 */
    bool zero_fill; /* calloc-like: bytes added by realloc read as zero */
    bool tracked;   /* allocated by a routine that records properties, so that a block
                       realloc moves it to is tracked too (always so for small blocks
                       with a record; a large block from plain malloc is not) */
};

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

/* The free mark: a freed small block's second word holds its superblock's free key
 * (desc->free_key) combined with the block's own address (heap_block_mark), from the
 * moment it is freed until it is handed out again (every way out of the heap clears it).
 * A free that finds the mark refuses the block: it is already on a free list, and taking
 * it again would hand it out twice. Bytes move, so a mark must be valid only where and
 * when it was made: a large block set up in a chunk that small blocks used before holds
 * their leftovers, marks included, where the program has not written, and realloc (or
 * the program) copies every byte of a block to a new place, maybe back to the address
 * of the block that left the mark, once a new superblock is set up there. The address
 * in the mark makes a copy elsewhere no mark; the key, new for each set-up of a
 * superblock (heap_new_free_key, from a per-process secret), makes a copy from an
 * earlier tenant of the pages no mark. So a live block carries its mark only if the
 * program computed it and wrote it there, which takes the key, learnt only by reading
 * freed memory; a program that writes into a freed block's second word defeats the check
 * (a use after free before the double free). The debug build knows every block's state
 * from its records and fills freed blocks itself, so it leaves the mark out.
 *
 * The key of a small block's mark is its descriptor's, read once per free (the fast path
 * compares and stores the same value). A plain field: it is written when the superblock
 * is set up, before its first block is handed out, and a thread that frees a block got
 * it, through the program, from one that saw the superblock set up, as it sees its other
 * fields. The block's words themselves are plain memory: they belong to whoever holds
 * the block, ordered by the program's hand-off as its contents are. */
LFH_INLINE uint64_t heap_mark_key(const struct descriptor *desc)
{
    return desc->free_key;
}

/* The mark a freed block at `block` carries, from its superblock's key. Every key's top
 * bit is set (heap_new_free_key) and no block address has it, so no mark is 0: fresh,
 * zeroed memory never looks freed. */
LFH_INLINE uint64_t heap_block_mark(const void *block, uint64_t key)
{
    return key ^ (uint64_t)(uintptr_t)block;
}

LFH_INLINE bool heap_block_marked_free(const void *block, uint64_t key)
{
    return HEAP_FREE_MARKS && ((const uint64_t *)block)[1] == heap_block_mark(block, key);
}

LFH_INLINE void heap_block_mark_free(void *block, uint64_t key)
{
    if (HEAP_FREE_MARKS)
        ((uint64_t *)block)[1] = heap_block_mark(block, key);
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
    if (!heap_is_carved_block(desc, ptr))
        return false;
    heap_check_block(desc, ptr);
    return desc->class_index == HEAP_CLASS_LARGE ||
           !heap_block_marked_free(ptr, heap_mark_key(desc));
}

/* What a thread cache receives when it takes a superblock's free blocks. */
struct heap_fill {
    struct descriptor *desc;
    void *chain;          /* NULL-terminated list of freed blocks */
    uint32_t chain_count; /* blocks on `chain` */
    char *bump;           /* never-touched blocks [bump, bump_end), carved in order */
    char *bump_end;
};

/* Takes every free block of one partial superblock of class `cls` for the cache of
 * thread `tid` (its owner's shard first). False if there is none. */
bool heap_fill_partial(unsigned cls, uint64_t tid, struct heap_fill *out);

/* A new superblock of class `cls` for the cache of thread `tid`. False when out of
 * memory; the program's errno stays as it was either way (the caller reports). */
bool heap_fill_new(unsigned cls, uint64_t tid, struct heap_fill *out);

/* A partial superblock's free blocks, else a new superblock's. False when out of memory. */
static inline bool heap_fill(unsigned cls, uint64_t tid, struct heap_fill *out)
{
    return heap_fill_partial(cls, tid, out) || heap_fill_new(cls, tid, out);
}

/* Gives back `count` blocks of `desc` linked from `first` to `last` (count may be 0 with
 * first NULL), and, if `bump` is not NULL, the uncarved tail starting at `bump`, which
 * becomes the carve frontier. The blocks must carry the free mark already. */
void heap_give_back(struct descriptor *desc, void *first, void *last, uint32_t count, char *bump);

/* True if every block of `desc` carved before `bump` (the caller's range) is back in the
 * superblock, so that giving the range back empties it. A hint: other threads' frees may
 * make it true a moment later, never false again while the caller holds the range. */
bool heap_only_range_held(const struct descriptor *desc, const char *bump);

/* The record of the block at `block`, which the caller holds: its request size and
 * sticky properties. False for a plain small block, which has none. */
bool heap_props_get(const struct descriptor *desc, const void *block, struct heap_props *out);
/* Writes the record of a tracked or large block the caller holds. */
void heap_props_set(struct descriptor *desc, const void *block, const struct heap_props *props);

/* Large blocks: an arena chunk, or their own mapping above ARENA_MAX_CHUNK; `align` a
 * power of two (at least 16). *zeroed says whether the block is known to read as zeros. */
void *heap_large_alloc(size_t size, size_t align, bool *zeroed);
/* False, changing nothing, if another free of the block claimed it first: two frees of
 * one block from two threads at the same moment (a double free) both found it live. */
bool heap_large_free(struct descriptor *desc);
/* Resizes a large block whose user pointer is desc->start, keeping its contents: in
 * place when it still fits its run (heap_large_stays), or, for blocks mapped from the
 * OS, by moving its pages to a new mapping aligned to `align`. NULL (and the block
 * untouched) otherwise. The record (heap_props) is the caller's to update. */
void *heap_large_resize(struct descriptor *desc, size_t size, size_t align);
/* A large block of the arenas that must move to grow to `size` bytes, moved out to a
 * mapping of its own by the kernel (mremap: its page tables move, nothing is copied or
 * faulted in again), which then grows as a mapped block does: the first `kept` bytes
 * are the old block's, the pages after them zeros. The old block, which then reads as
 * zeros, is the caller's to free, and the new one's record (heap_props) to set. NULL,
 * and the old block as it was, where a copy is the way: blocks under 2 MiB, the debug
 * and secure builds, memcheck, an alignment past a page, or a refusal by the kernel. */
void *heap_large_move_out(struct descriptor *desc, size_t size, size_t align, size_t kept);
/* True if a large block stays where it is for `size` bytes: a mapped one if they take its
 * pages as they are; one of the arenas if they fit its
 * bytes, which either hold at most a quarter more or the block grows or shrinks by at
 * most a fifth (see heap_large_resize); or they fit the bigger freed run it took part of,
 * and its bytes grow into it (arena_large_regrow). */
bool heap_large_stays(struct descriptor *desc, size_t size);
/* Zeros all the usable bytes of a large block the caller holds, `request` of them asked
 * for: by a memset, or when the block is big and most of its pages are not resident, by
 * giving all of them back to the kernel (they then read as zeros). */
void heap_large_zero(struct descriptor *desc, size_t request);
/* Zeros the usable bytes of a large block the caller holds from offset `from` on; the
 * whole pages after `from`'s page, when there are enough of them, by giving them back to
 * the kernel (they read as zeros then, and leave the resident set). */
void heap_large_zero_tail(struct descriptor *desc, size_t from);

/* What the heap holds for the program, read from its descriptors (mallinfo2 in builds
 * without counters). */
struct heap_usage {
    size_t arena_in_use;  /* blocks of live superblocks that are not free in them (also
                             those in thread caches) and large blocks in the arenas */
    size_t mapped_blocks; /* blocks in mappings of their own */
    size_t mapped_bytes;  /* and their bytes */
};
/* A walk over every descriptor, O(superblocks and large blocks), reading while other
 * threads allocate and free: a snapshot that may mix moments, never a stop. */
void heap_usage_get(struct heap_usage *out);

#if OS_FAULT_INJECTION
/* Test view of the fault-injection build, for a quiescent heap: descriptors that are
 * neither free nor EMPTY on a partial stack, i.e. those of live superblocks and large
 * blocks (0 once every block is freed and every cache flushed). */
size_t heap_descriptors_in_use(void);
#endif

#endif
