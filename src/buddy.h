/*
 * buddy: the page back-end of lfheap, a non-blocking buddy system after NBBS (Marotta,
 * Ianni, Pellegrini, Quaglia, IEEE TC; docs/DESIGN.md). One instance manages one region of
 * 2^k bytes as a complete binary tree of chunks from the region (the root) down to the
 * minimum chunk (the leaves). Allocation and release run NBBS Alg. 2-5 with CAS and
 * fetch-and-or/and only: no locks, no waiting; splitting and coalescing happen inside
 * alloc and free. The tree is either one 64-bit word per node (1-level, buddy_flat.c)
 * or the packing of §3.6.2 with 3-level "bunches" (the 7 nodes of a bunch in one 64-bit
 * word, buddy_packed.c); per-thread free-slot hints (§3.6.1) make the common search O(1).
 *
 * Relies on: os (os_map/os_unmap) for the region, when the instance reserves it, and for
 * its own metadata (tree, index array), which never comes from malloc.
 *
 * Invariants the heap can rely on:
 * - a chunk is a power of two between min_chunk and max_chunk bytes, and its offset from
 *   the region base is a multiple of its size (so chunks are naturally aligned when the
 *   region is aligned to its size, which buddy_create guarantees when it reserves it);
 * - no two live chunks overlap; each live chunk lies inside [base, base + size);
 * - after every chunk has been freed, and the last free has returned, the whole region
 *   is allocatable again as chunks of max_chunk bytes (coalescing is complete);
 * - buddy_alloc may return NULL while memory is free if concurrent operations hid it
 *   (NBBS retries only when a release completed during its scan, Alg. 2 line A15); a
 *   caller that must not fail tries another instance or asks again.
 * The chunk's memory is never read or written by this layer.
 */
#ifndef LFHEAP_BUDDY_H
#define LFHEAP_BUDDY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Creation flags. */
#define BUDDY_PACKED   1u /* 3-level packing (§3.6.2) instead of one word per node */
#define BUDDY_NO_HINTS 2u /* no per-thread free-slot hints (for measurements) */
#define BUDDY_SCATTER  4u /* seed each thread's hints at random nodes (§3.6.1, last note) */
#define BUDDY_FLAGS    (BUDDY_PACKED | BUDDY_NO_HINTS | BUDDY_SCATTER)

/* The deepest tree: node indices must fit in 32 bits (hints keep them as uint32_t), so
 * at most 2^30 leaves, e.g. 4 TiB of region with 4 KiB chunks. */
#define BUDDY_MAX_DEPTH 30

/* The smallest chunk: the index array keeps one byte per leaf, and a chunk smaller than
 * a cache line is of no use to the heap. Tests use 64-byte chunks for dense trees. */
#define BUDDY_MIN_CHUNK ((size_t)64)

/* Levels per bunch of the packed tree: four bottom slots of five bits in a 64-bit word
 * leave 44 bits for the word's version (src/buddy_packed.c). The paper's four levels
 * (eight slots) leave 24, which a stopped UNMARK can see wrap in a second
 * (docs/BUDDY.md). The bunches are aligned to the leaves: the deepest ends at the leaf
 * level, and the top one, rooted at base_level, has the levels left over (1 to 3), so
 * that the deepest level, which has most nodes, always fills whole words. */
#define BUDDY_BUNCH_HEIGHT     3u
#define BUDDY_MAX_BUNCH_LEVELS (BUDDY_MAX_DEPTH / BUDDY_BUNCH_HEIGHT + 1)

struct buddy {
    /* Bumped by every completed release (NBBS Alg. 4 line F4) and read by every
     * allocation: alone on its cache line so that it does not slow the fields below. */
    _Alignas(64) _Atomic uint64_t release_count;
    /* Per level: 1 + the release_count at which an allocation's scan found the level
     * without a free node and saw no release during it (A15-A17), 0 if none did yet
     * (buddy_alloc_unless_full). */
    _Atomic uint64_t full_at[BUDDY_MAX_DEPTH + 1];

    /* Read-only after buddy_create. */
    _Alignas(64) char *base; /* first byte of the region */
    size_t size;             /* bytes in the region: 1 << size_shift */
    size_t max_chunk;        /* largest chunk: 1 << (size_shift - base_level) */
    unsigned size_shift;     /* log2(size) */
    unsigned min_shift;      /* log2(min_chunk) */
    unsigned depth;          /* level of the leaves; the root is level 0 */
    unsigned base_level;     /* level of max_chunk nodes; the climbs stop there */
    unsigned flags;          /* BUDDY_* */
    bool owns_region;        /* reserved by buddy_create: unmapped by destroy */
    uint64_t serial;         /* unique per instance: tags the per-thread hints */
    _Atomic uint64_t *tree;  /* 1-level: node n at tree[n], n = 1 .. 2^(depth+1)-1 */
    _Atomic uint64_t *words; /* packed: one word per bunch */
    _Atomic uint8_t *index;  /* per leaf: 1 + level of the chunk starting there */
    size_t meta_size;        /* bytes of the metadata mapping (this struct first) */
    unsigned bunch_levels;   /* packed: number of bunch levels */
    unsigned bunch_gap;      /* packed: levels the top bunch lacks (0-2), see below */
    size_t bunch_offset[BUDDY_MAX_BUNCH_LEVELS]; /* packed: first word of each */
};

/* The level of the roots of the packed tree's bunch level k: base_level, then every
 * BUDDY_BUNCH_HEIGHT levels counted as if the top bunch had all of its levels. */
static inline unsigned buddy_bunch_root_level(const struct buddy *b, unsigned k)
{
    return k ? b->base_level - b->bunch_gap + BUDDY_BUNCH_HEIGHT * k : b->base_level;
}

/* Metadata bytes an instance with these arguments (as for buddy_create, max_chunk 0 for
 * `size`) needs besides its region (for sizing arenas). */
size_t buddy_metadata_size(size_t size, size_t min_chunk, size_t max_chunk, unsigned flags);

/* Creates an instance over `region` (aligned to at least min_chunk and OS_PAGE_SIZE), or
 * over a fresh region aligned to `size` that it reserves with os_map when region is
 * NULL. size and min_chunk are powers of two, min_chunk >= BUDDY_MIN_CHUNK and
 * size / min_chunk <= 2^BUDDY_MAX_DEPTH; max_chunk is a power of two between them, or
 * 0 for `size`. Returns NULL (errno EINVAL or ENOMEM) on bad arguments or no memory. */
struct buddy *buddy_create(void *region, size_t size, size_t min_chunk, size_t max_chunk,
                           unsigned flags);

/* Unmaps the metadata, and the region if buddy_create reserved it. No operation on the
 * instance may be running or follow. */
void buddy_destroy(struct buddy *b);

/* A chunk of at least `bytes` (rounded up to a power of two, at least min_chunk), or
 * NULL if bytes > max_chunk or no free chunk was found. Lock-free (NBBS Alg. 2). */
void *buddy_alloc(struct buddy *b, size_t bytes);

/* buddy_alloc, but NULL at once, without a scan, when an allocation of the same level
 * found it full and nothing was released in the instance since. A scan can also miss a
 * node that another thread's allocation had marked and then, its CAS lost, unmarked (no
 * release); buddy_alloc's NULL says so only for its own call, this one keeps saying it
 * until the next release, so a caller with nowhere else to go calls buddy_alloc. */
void *buddy_alloc_unless_full(struct buddy *b, size_t bytes);

/* Takes the chunk of `bytes` (a power of two between min_chunk and max_chunk) that
 * starts at p, a multiple of `bytes` inside the region, if it is free: NBBS's TRYALLOC
 * (Alg. 3) on that one node instead of on each node of a scan. False, changing nothing,
 * if any part of it is taken (or being taken or released). Lock-free, as TRYALLOC. */
bool buddy_alloc_at(struct buddy *b, void *p, size_t bytes);

/* Releases the chunk that starts at p. Returns false, changing nothing, if p is not the
 * start of a live chunk of this instance (a double free racing with itself is not
 * detected). Lock-free (NBBS Alg. 4). */
bool buddy_free(struct buddy *b, void *p);

/* The size of the live chunk that starts at p, or 0 if there is none. */
size_t buddy_chunk_size(const struct buddy *b, const void *p);

/* Whether p lies in the region of the instance. */
static inline bool buddy_contains(const struct buddy *b, const void *p)
{
    return (uintptr_t)p - (uintptr_t)b->base < b->size;
}

static inline void *buddy_base(const struct buddy *b)
{
    return b->base;
}
static inline size_t buddy_size(const struct buddy *b)
{
    return b->size;
}
static inline size_t buddy_min_chunk(const struct buddy *b)
{
    return (size_t)1 << b->min_shift;
}
static inline size_t buddy_max_chunk(const struct buddy *b)
{
    return b->max_chunk;
}

#endif
