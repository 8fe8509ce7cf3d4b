/*
 * sizeclass: the small size classes (LRMalloc §3.1, jemalloc's series). Sizes up to 128
 * bytes step by 16; above that each doubling is split into four classes, so a block is
 * at most 25% larger than the request above 64 bytes. Above 1 KiB each doubling has one
 * more class first, 9/8 of the power of two: programs often ask for a power of two plus
 * a small header (sqlite3's 4,104-byte page buffers), which the next class of four, 5/4,
 * would leave a fifth empty. Every class size is a multiple of 16, and superblocks start
 * on page boundaries, so every small block is 16-byte aligned.
 * Requests above SIZECLASS_MAX_SIZE are large blocks and have no class.
 */
#ifndef LFHEAP_SIZECLASS_H
#define LFHEAP_SIZECLASS_H

#include "common.h"

#include <stddef.h>
#include <stdint.h>

#define SIZECLASS_COUNT 45
/* 32 KiB: above it, a power-of-two page chunk wastes no more than a class would. */
#define SIZECLASS_MAX_SIZE ((size_t)32768)
/* Requests up to this size find their class with one table load... */
#define SIZECLASS_LOOKUP_MAX 1024
/* ...among this many classes (16 B to 1 KiB); above it, each doubling has five. */
#define SIZECLASS_TABLE_CLASSES 20
#define SIZECLASS_PER_DOUBLING  5

/* Superblocks are at least this big, so that small classes amortise the cost of getting
 * one over many blocks... */
#define SIZECLASS_MIN_SUPERBLOCK ((size_t)65536)
/* ...and hold at least this many blocks of the larger classes. */
#define SIZECLASS_MIN_BLOCKS 8

/* Per-class arrays of the layers above (the thread cache's bins) have entries of this
 * many bytes, and the lookup table and descriptors hold class * SIZECLASS_STRIDE, so
 * that malloc and free reach a class's entry without scaling the index. */
#define SIZECLASS_STRIDE 32

extern const uint32_t sizeclass_block_size[SIZECLASS_COUNT];
extern const uint16_t sizeclass_lookup[SIZECLASS_LOOKUP_MAX + 1];

/* Class of a request of `size` bytes, for size <= SIZECLASS_MAX_SIZE. */
LFH_INLINE unsigned sizeclass_of(size_t size)
{
    if (LFH_LIKELY(size <= SIZECLASS_LOOKUP_MAX))
        return sizeclass_lookup[size] / SIZECLASS_STRIDE;
    /* Above 1024 (2^10): with x = size - 1 in [2^g, 2^(g+1)), the five classes of that
     * doubling are 2^g * 9/8, then 2^g + k * 2^(g-2) for k = 1..4. */
    size_t x = size - 1;
    unsigned g = 63u - (unsigned)__builtin_clzl(x);
    unsigned k = (unsigned)((x >> (g - 2u)) & 3u);
    unsigned past_ninth = k != 0 || ((x >> (g - 3u)) & 1u);
    return SIZECLASS_TABLE_CLASSES + (g - 10u) * SIZECLASS_PER_DOUBLING + k + past_ninth;
}

/* Bytes of a new superblock of `cls` (a power of two); one set up in a bigger freed run
 * holds the whole run (arena_alloc). */
size_t sizeclass_superblock_size(unsigned cls);

/* Small blocks are aligned to their class size's largest power-of-two factor, up to
 * this: superblocks start on a page boundary, not more. */
#define SIZECLASS_PAGE_ALIGN ((size_t)4096)

/* The smallest class whose blocks hold `size` bytes at an `align`-byte boundary (align a
 * power of two), or SIZECLASS_COUNT if no small class can (then it is a large block). */
unsigned sizeclass_for_aligned(size_t size, size_t align);

#endif
