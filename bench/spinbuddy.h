/*
 * spinbuddy: the baseline of the backend benchmark - a classic sequential buddy system
 * over the same tree as lfheap's 1-level NBBS (one byte per node, node n with children
 * 2n and 2n+1, the same OCC/OCC_LEFT/OCC_RIGHT bits, the same index array and the same
 * per-thread free-slot hints), with every call serialised by one test-and-test-and-set
 * spin lock. It lives in bench/ only: lfheap itself never takes a lock.
 */
#ifndef LFHEAP_BENCH_SPINBUDDY_H
#define LFHEAP_BENCH_SPINBUDDY_H

#include <stddef.h>

struct spinbuddy;

/* A buddy over a fresh region of `size` bytes (mmap, aligned to size); chunks from
 * min_chunk to max_chunk (0: size). NULL on failure. */
struct spinbuddy *spinbuddy_create(size_t size, size_t min_chunk, size_t max_chunk);
void spinbuddy_destroy(struct spinbuddy *b);
void *spinbuddy_alloc(struct spinbuddy *b, size_t bytes);
void spinbuddy_free(struct spinbuddy *b, void *p);

#endif
