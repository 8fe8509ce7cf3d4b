/*
 * sizeclass: the class tables. They are constants, so no initialisation is needed before
 * the first malloc (which may come from the dynamic loader). tests/test_sizeclass.c
 * checks the tables against the formula in sizeclass.h.
 */
#include "sizeclass.h"

const uint32_t sizeclass_block_size[SIZECLASS_COUNT] = {
    16,    32,    48,    64,    80,    96,    112,   128,   160,   192,
    224,   256,   320,   384,   448,   512,   640,   768,   896,   1024,
    1280,  1536,  1792,  2048,  2560,  3072,  3584,  4096,  5120,  6144,
    7168,  8192,  10240, 12288, 14336, 16384, 20480, 24576, 28672, 32768,
};

/* sizeclass_lookup[(size + 15) / 16] for size <= 1024. */
const uint8_t sizeclass_lookup[SIZECLASS_LOOKUP_MAX / 16 + 1] = {
    0,  0,  1,  2,  3,  4,  5,  6,  7,  8,  8,  9,  9,  10, 10, 11, 11,
    12, 12, 12, 12, 13, 13, 13, 13, 14, 14, 14, 14, 15, 15, 15, 15, 16,
    16, 16, 16, 16, 16, 16, 16, 17, 17, 17, 17, 17, 17, 17, 17, 18, 18,
    18, 18, 18, 18, 18, 18, 19, 19, 19, 19, 19, 19, 19, 19,
};

size_t sizeclass_superblock_size(unsigned cls)
{
    size_t want = (size_t)sizeclass_block_size[cls] * SIZECLASS_MIN_BLOCKS;
    size_t size = SIZECLASS_MIN_SUPERBLOCK;
    while (size < want)
        size <<= 1;
    return size;
}

unsigned sizeclass_for_aligned(size_t size, size_t align)
{
    if (size < align)
        size = align;
    /* Superblocks are only known to start on a page boundary. */
    if (size > SIZECLASS_MAX_SIZE || align > SIZECLASS_PAGE_ALIGN)
        return SIZECLASS_COUNT;
    /* Each doubling ends in a power-of-two class, so at most four steps find a class
     * whose size is a multiple of align (superblocks start page aligned). */
    for (unsigned cls = sizeclass_of(size); cls < SIZECLASS_COUNT; cls++)
        if (sizeclass_block_size[cls] % align == 0)
            return cls;
    return SIZECLASS_COUNT;
}
