/*
 * sizeclass: the class tables. They are constants, so no initialisation is needed before
 * the first malloc (which may come from the dynamic loader). tests/test_units.c checks
 * the tables against the formula in sizeclass.h.
 */
#include "sizeclass.h"

/* The tables are laid out by hand. */
/* clang-format off */
const uint32_t sizeclass_block_size[SIZECLASS_COUNT] = {
    16,    32,    48,    64,    80,    96,    112,   128,   160,   192,
    224,   256,   320,   384,   448,   512,   640,   768,   896,   1024,
    1152,  1280,  1536,  1792,  2048,  2304,  2560,  3072,  3584,  4096,
    4608,  5120,  6144,  7168,  8192,  9216,  10240, 12288, 14336, 16384,
    18432, 20480, 24576, 28672, 32768,
};

/* sizeclass_lookup[size] = class * SIZECLASS_STRIDE for size <= 1024: indexed by the
 * request itself, so malloc's fast path needs no arithmetic before the load (range
 * designators, a GNU C extension both gcc and clang accept, keep the table readable). */
const uint16_t sizeclass_lookup[SIZECLASS_LOOKUP_MAX + 1] = {
    [0 ... 16] = 0 * SIZECLASS_STRIDE,
    [17 ... 32] = 1 * SIZECLASS_STRIDE,
    [33 ... 48] = 2 * SIZECLASS_STRIDE,
    [49 ... 64] = 3 * SIZECLASS_STRIDE,
    [65 ... 80] = 4 * SIZECLASS_STRIDE,
    [81 ... 96] = 5 * SIZECLASS_STRIDE,
    [97 ... 112] = 6 * SIZECLASS_STRIDE,
    [113 ... 128] = 7 * SIZECLASS_STRIDE,
    [129 ... 160] = 8 * SIZECLASS_STRIDE,
    [161 ... 192] = 9 * SIZECLASS_STRIDE,
    [193 ... 224] = 10 * SIZECLASS_STRIDE,
    [225 ... 256] = 11 * SIZECLASS_STRIDE,
    [257 ... 320] = 12 * SIZECLASS_STRIDE,
    [321 ... 384] = 13 * SIZECLASS_STRIDE,
    [385 ... 448] = 14 * SIZECLASS_STRIDE,
    [449 ... 512] = 15 * SIZECLASS_STRIDE,
    [513 ... 640] = 16 * SIZECLASS_STRIDE,
    [641 ... 768] = 17 * SIZECLASS_STRIDE,
    [769 ... 896] = 18 * SIZECLASS_STRIDE,
    [897 ... 1024] = 19 * SIZECLASS_STRIDE,
};
/* clang-format on */

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
    /* Each doubling ends in a power-of-two class, so at most five steps find a class
     * whose size is a multiple of align (superblocks start page aligned). */
    for (unsigned cls = sizeclass_of(size); cls < SIZECLASS_COUNT; cls++)
        if (sizeclass_block_size[cls] % align == 0)
            return cls;
    return SIZECLASS_COUNT;
}
