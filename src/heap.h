/*
 * heap: the lock-free heap of superblocks under the thread caches (LRMalloc §3.2,
 * thesis ch. 5). Superblocks and large blocks are chunks of the arenas (arena.h). A superblock is a run of pages cut into blocks of one size class and is
 * tracked by a descriptor; descriptors are recycled, never unmapped, so a stale pointer
 * to one can always be read. Large blocks get a descriptor too, so that free and
 * malloc_usable_size find every block through the page map.
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
#include "sizeclass.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The class_index of a large block. */
#define HEAP_CLASS_LARGE SIZECLASS_COUNT

/* Owner of blocks no thread cache may keep: large blocks, and the page map's sentinel for
 * foreign pointers. Zero, so that zero-filled memory (a fresh descriptor, the sentinel
 * in .bss) belongs to nobody; thread ids are never zero. */
#define HEAP_OWNER_NONE 0

struct descriptor {
    /* Read by every free; written while the superblock is set up, and `owner` when a
     * thread takes the superblock's free blocks into its cache. */
    _Atomic uint64_t owner;  /* id of the thread cache that may reuse freed blocks */
    char *start;             /* first byte of the superblock or large mapping */
    size_t size;             /* bytes of the superblock or large mapping */
    uint32_t block_size;     /* bytes per block (small only) */
    uint32_t max_count;      /* blocks in the superblock (small only) */
    uint32_t self;           /* this descriptor's index, for the lock-free stacks */
    uint8_t class_index;     /* size class, or HEAP_CLASS_LARGE */
    bool os_backed;          /* a large block mapped from the OS, not an arena chunk */

    /* Written by any thread that frees into the superblock or moves the descriptor
     * between stacks: kept off the line the fast path reads. */
    alignas(LFH_CACHE_LINE) _Atomic uint64_t anchor;
    _Atomic uint32_t next; /* link in a partial stack or the free-descriptor stack */
};

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
 * first NULL), and, if `bump` is not NULL, the uncarved tail starting at `bump`. */
void heap_give_back(struct descriptor *desc, void *first, void *last, uint32_t count,
                    char *bump);

/* Large blocks: an arena chunk, or their own mapping above ARENA_MAX_CHUNK; `align` a
 * power of two (at least 16). *zeroed says whether the block is known to read as zeros. */
void *heap_large_alloc(size_t size, size_t align, bool *zeroed);
void heap_large_free(struct descriptor *desc);
/* Resizes a large block whose user pointer is desc->start, keeping its contents: in
 * place when it still fits its chunk without wasting half of it, or, for blocks mapped
 * from the OS, by moving its pages. NULL (and the block untouched) otherwise. */
void *heap_large_resize(struct descriptor *desc, size_t size);

#ifdef LFHEAP_FAULT_INJECTION
/* Test view of the fault-injection build, for a quiescent heap: descriptors that are
 * neither free nor EMPTY on a partial stack, i.e. those of live superblocks and large
 * blocks (0 once every block is freed and every cache flushed). */
size_t heap_descriptors_in_use(void);
#endif

#endif
