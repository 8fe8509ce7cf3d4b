/*
 * spinbuddy: a sequential buddy on NBBS's 1-level tree, behind one spin lock (see
 * spinbuddy.h). Allocation scans the target level from the thread's hint, takes the
 * first node that is free and has no allocated ancestor, and marks its side in every
 * ancestor up to the max-chunk level; release clears the node and climbs clearing its
 * side while the buddy side is empty (coalescing). The same work as NBBS minus the
 * coalescing bits and the atomics, so the benchmark compares the synchronisation.
 */
#include "spinbuddy.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#define OCC_RIGHT 0x01u
#define OCC_LEFT  0x02u
#define OCC       0x10u
#define BUSY      (OCC | OCC_LEFT | OCC_RIGHT)
#define MAX_DEPTH 30

struct spinbuddy {
    _Alignas(64) atomic_bool lock;
    _Alignas(64) char *base;
    size_t size, meta_size;
    unsigned size_shift, min_shift, depth, base_level;
    uint64_t serial;
    uint8_t *tree;  /* node n at tree[n] */
    uint8_t *index; /* per leaf: 1 + level of the chunk starting there */
};

static _Atomic uint64_t spin_serial;

/* Per-thread hints as in lfheap's buddy: last freed node per level, or the one after
 * the last allocated. One instance at a time in the benchmark: one way. */
static __thread struct {
    uint64_t serial;
    uint32_t node[MAX_DEPTH + 1];
} hints;

static void lock(struct spinbuddy *b)
{
    for (;;) {
        /* acquire: the critical section sees the previous holder's writes. */
        if (!atomic_exchange_explicit(&b->lock, true, memory_order_acquire))
            return;
        while (atomic_load_explicit(&b->lock, memory_order_relaxed))
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#else
            ;
#endif
    }
}

static void unlock(struct spinbuddy *b)
{
    atomic_store_explicit(&b->lock, false, memory_order_release);
}

static unsigned level_of(uint64_t n)
{
    return 63u - (unsigned)__builtin_clzll(n);
}

struct spinbuddy *spinbuddy_create(size_t size, size_t min_chunk, size_t max_chunk)
{
    if (!max_chunk)
        max_chunk = size;
    unsigned size_shift = (unsigned)__builtin_ctzll(size);
    unsigned min_shift = (unsigned)__builtin_ctzll(min_chunk);
    unsigned depth = size_shift - min_shift;
    if (depth > MAX_DEPTH)
        return NULL;
    size_t meta = 4096 + ((size_t)2 << depth) + ((size_t)1 << depth);
    meta = (meta + 4095) & ~(size_t)4095;
    char *m = mmap(NULL, meta, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    char *raw = mmap(NULL, 2 * size, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) {
        munmap(m, meta);
        return NULL;
    }
    char *base = (char *)(((uintptr_t)raw + size - 1) & ~(uintptr_t)(size - 1));
    if (base > raw)
        munmap(raw, (size_t)(base - raw));
    munmap(base + size, size - (size_t)(base - raw));
    struct spinbuddy *b = (struct spinbuddy *)m;
    b->base = base;
    b->size = size;
    b->meta_size = meta;
    b->size_shift = size_shift;
    b->min_shift = min_shift;
    b->depth = depth;
    b->base_level = size_shift - (unsigned)__builtin_ctzll(max_chunk);
    b->serial = atomic_fetch_add(&spin_serial, 1) + 1;
    b->tree = (uint8_t *)m + 4096;
    b->index = b->tree + ((size_t)2 << depth);
    return b;
}

void spinbuddy_destroy(struct spinbuddy *b)
{
    munmap(b->base, b->size);
    munmap(b, b->meta_size);
}

/* Takes node n if it and its ancestors allow it: 0 on success, else the node in the way. */
static uint64_t take(struct spinbuddy *b, uint64_t n)
{
    if (b->tree[n])
        return n;
    for (uint64_t a = n >> 1; a && level_of(a) >= b->base_level; a >>= 1)
        if (b->tree[a] & OCC)
            return a;
    b->tree[n] = BUSY;
    for (uint64_t c = n; level_of(c) > b->base_level; c >>= 1)
        b->tree[c >> 1] |= (uint8_t)(OCC_LEFT >> (c & 1));
    return 0;
}

static uint64_t scan(struct spinbuddy *b, unsigned level, uint64_t lo, uint64_t hi)
{
    for (uint64_t i = lo; i < hi;) {
        uint64_t in_the_way = take(b, i);
        if (!in_the_way)
            return i;
        i = (in_the_way + 1) << (level - level_of(in_the_way));
    }
    return 0;
}

void *spinbuddy_alloc(struct spinbuddy *b, size_t bytes)
{
    if (bytes > (b->size >> b->base_level))
        return NULL;
    unsigned shift = bytes <= ((size_t)1 << b->min_shift)
                         ? b->min_shift
                         : 64u - (unsigned)__builtin_clzll(bytes - 1);
    unsigned level = b->size_shift - shift;
    uint64_t first = (uint64_t)1 << level, end = first << 1;
    if (hints.serial != b->serial) {
        hints.serial = b->serial;
        for (unsigned l = 0; l <= MAX_DEPTH; l++)
            hints.node[l] = 0;
    }
    uint64_t start = hints.node[level] ? hints.node[level] : first;
    lock(b);
    uint64_t n = scan(b, level, start, end);
    if (!n && start > first)
        n = scan(b, level, first, start);
    if (n)
        b->index[((n - first) << shift) >> b->min_shift] = (uint8_t)(level + 1);
    unlock(b);
    if (!n)
        return NULL;
    hints.node[level] = n + 1 < end ? (uint32_t)(n + 1) : 0;
    return b->base + ((n - first) << shift);
}

void spinbuddy_free(struct spinbuddy *b, void *p)
{
    size_t offset = (size_t)((char *)p - b->base);
    lock(b);
    size_t leaf = offset >> b->min_shift;
    unsigned level = b->index[leaf] - 1u;
    b->index[leaf] = 0;
    uint64_t n = ((uint64_t)1 << level) + (offset >> (b->size_shift - level));
    b->tree[n] = 0;
    for (uint64_t c = n; level_of(c) > b->base_level; c >>= 1) {
        uint8_t *parent = &b->tree[c >> 1];
        *parent &= (uint8_t) ~(OCC_LEFT >> (c & 1));
        if (*parent & (OCC_RIGHT << (c & 1)))
            break; /* the buddy is in use: no merge above */
    }
    unlock(b);
    hints.node[level] = (uint32_t)n;
}
