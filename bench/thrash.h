/*
 * The inner loop shared by cache-thrash and cache-scratch (Hoard, ASPLOS 2000; llheap
 * §Cache Thrash/Scratch): `rw` single-byte read-modify-writes cycling over one small
 * object, through a volatile pointer so that every one really goes to memory. If the
 * allocator put objects of different threads on one cache line, the line ping-pongs
 * between cores and the loop slows down (false sharing).
 *
 * Validation: every byte starts from a known value and must end at that value plus the
 * number of increments it received; a block handed to two threads at once (or written
 * by the allocator while live) ends with the wrong count.
 */
#ifndef LFHEAP_BENCH_THRASH_H
#define LFHEAP_BENCH_THRASH_H

#include "common.h"

static inline unsigned char thrash_start_value(uint64_t owner, size_t k)
{
    return (unsigned char)(bench_tag(owner, k) >> 8);
}

/* Fills the object, hammers it, and checks the result. */
static inline void thrash_object(void *block, size_t size, long rw, uint64_t owner)
{
    volatile unsigned char *b = block;
    for (size_t k = 0; k < size; k++)
        b[k] = thrash_start_value(owner, k);
    size_t k = 0;
    for (long j = 0; j < rw; j++) {
        b[k] = (unsigned char)(b[k] + 1);
        if (++k == size)
            k = 0;
    }
    long full = rw / (long)size, rest = rw % (long)size;
    for (k = 0; k < size; k++) {
        unsigned char want =
            (unsigned char)(thrash_start_value(owner, k) + full + ((long)k < rest));
        if (b[k] != want)
            bench_fail("object %p byte %zu is %u, expected %u: another thread or the "
                       "allocator wrote into this live object",
                       block, k, b[k], want);
    }
}

#endif
