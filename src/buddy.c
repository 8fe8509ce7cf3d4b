/*
 * buddy: the non-blocking buddy system of NBBS (docs/BUDDY.md), written from Algorithms 1-5.
 *
 * What it does. A region of 2^size_shift bytes is a complete binary tree: node 1 is the
 * region, node n has children 2n and 2n+1, node n at level l = floor(log2 n) is the chunk
 * of size >> l bytes at offset (n - 2^l) * (size >> l). Each node has the five status
 * bits of NBBS Table 1: OCC (this node is a live chunk), OCC_LEFT/OCC_RIGHT (something
 * below on that side is allocated), COAL_LEFT/COAL_RIGHT (a release below on that side
 * is on its way up). Allocation (Alg. 2-3) takes a free node with one CAS and climbs to
 * base_level setting its side's occupancy bit in every ancestor; it aborts and undoes
 * its marks if an ancestor is OCC. Release (Alg. 4-5) climbs first to mark its side as
 * coalescing, stopping early where the buddy stays allocated, clears the node, and
 * climbs again clearing the bits it marked, so that buddies merge without any lock.
 *
 * Two layouts, chosen per instance (BUDDY_PACKED): the 1-level tree of one word per
 * node (buddy_flat.c) and the packed bunches of §3.6.2 (buddy_packed.c), each with its
 * TRYALLOC, FREENODE and UNMARK (Alg. 3-5). This file holds what they share: creation,
 * the per-thread hints, index[], NBALLOC and NBFREE (Alg. 2 and lines F1-F4 of Alg. 4)
 * and the dispatch to the instance's layout; src/buddy_impl.h holds the status bits,
 * the tree's invariants and the two races of the release path.
 *
 * Relies on: os_map/os_unmap for the metadata (and the region when it reserves one);
 * C11 atomics with CAS on 64-bit words (lock-free on x86-64 and aarch64).
 *
 * Deviations from the printed listings (slips in the paper, see docs/BUDDY.md; F9's in
 * src/buddy_impl.h): A6 scans level `level`, nodes 2^level .. 2^(level+1)-1 (the listing
 * says level-1); after the skip at A13-A14 the loop does not add one more; index[] keeps
 * 1 + the level of the chunk (one byte) instead of the node index, from which the node is
 * recomputed in O(1).
 */
#include "buddy_impl.h"

#include <errno.h>

#include "invariant.h"
#include "lfheap_buddy.h"
#include "os.h"

static inline unsigned node_level(uint64_t n)
{
    return 63u - (unsigned)__builtin_clzll(n);
}

/* Distinguishes instances in the per-thread hint cache (never reused, so a destroyed
 * instance's hints are never taken for a new one's). */
static _Atomic uint64_t buddy_serial_counter;

/* ---------------------------------------------------------------------------------- */
/* Per-thread free-slot hints (NBBS §3.6.1): for each level, the node this thread freed
 * last, or after an allocation the node after it. A small direct-mapped cache keyed by
 * instance serial, so a thread working on a few instances keeps hints for each. Plain
 * thread-local memory: only its thread reads or writes it. */

#define HINT_WAYS 4u

struct hint_way {
    uint64_t serial;
    uint32_t node[BUDDY_MAX_DEPTH + 1];
};

static __thread struct hint_way hint_ways[HINT_WAYS];

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint32_t *hints_for(const struct buddy *b)
{
    struct hint_way *way = &hint_ways[b->serial % HINT_WAYS];
    if (LFH_UNLIKELY(way->serial != b->serial)) {
        way->serial = b->serial;
        uint64_t seed = mix64((uintptr_t)way ^ b->serial);
        for (unsigned l = 0; l <= BUDDY_MAX_DEPTH; l++) {
            way->node[l] = 0;
            if ((b->flags & BUDDY_SCATTER) && l >= b->base_level && l <= b->depth) {
                seed = mix64(seed);
                way->node[l] = (uint32_t)((1ull << l) | (seed & ((1ull << l) - 1)));
            }
        }
    }
    return way->node;
}

/* ---------------------------------------------------------------------------------- */
/* The tree's invariants of a live chunk (src/buddy_impl.h), asserted when buddy_alloc
 * hands node n out and when buddy_free takes it back: the node is taken (its status bits
 * are exactly BUSY: 1-level; every slot under it is BUSY: packed), and every ancestor up
 * to base_level has the occupancy bit of the side n lies on. Cannot fire spuriously under
 * concurrency: the calling thread holds the chunk, and while it does nobody writes n
 * (T2, T15, F12 and U11 refuse an OCC node, and an allocated ancestor inside a bunch
 * would have made our T2 fail), and nobody clears our side's occupancy bit above it (an
 * UNMARK clears a side only when the child on that side reads free after the node, and
 * the path from n up reads occupied until we release n); every read is an atomic load. A
 * double free racing with itself is undefined (buddy.h). */
static void chunk_check_live(const struct buddy *b, uint64_t n, unsigned level)
{
    if (b->flags & BUDDY_PACKED)
        buddy_packed_check_live(b, n, level);
    else
        buddy_flat_check_live(b, n, level);
}

/* ---------------------------------------------------------------------------------- */
/* NBALLOC / NBFREE (Alg. 2 and 4), common to both layouts. */

static inline bool node_is_free(const struct buddy *b, uint64_t n, unsigned level)
{
    return (b->flags & BUDDY_PACKED) ? packed_is_free(b, n, level) : flat_is_free(b, n);
}

static inline uint64_t node_tryalloc(struct buddy *b, uint64_t n, unsigned level)
{
    return (b->flags & BUDDY_PACKED) ? buddy_packed_tryalloc(b, n, level)
                                     : buddy_flat_tryalloc(b, n, level);
}

/* A6-A14 over nodes [lo, hi) of `level`: the node taken, or 0. */
static uint64_t scan_level_flat(struct buddy *b, unsigned level, uint64_t lo, uint64_t hi)
{
    uint64_t i = lo;
    while (i < hi) {
        if (flat_is_free(b, i)) { /* A7 */
            BUDDY_CHAOS();
            uint64_t failed_at = buddy_flat_tryalloc(b, i, level);
            if (!failed_at)
                return i;
            /* A13-A14: skip the subtree of the node that failed us. */
            i = (failed_at + 1) << (level - node_level(failed_at));
        } else {
            i++;
        }
    }
    return 0;
}

/* The same scan over the packed layout, a bunch word at a time: the nodes of a level that
 * share a bunch (up to four) are tested against one load of its word, each with the
 * mask of its slots, where locating and loading the word for every node made the scan a
 * fifth of the time of a program whose threads take many superblocks (docs/BENCHMARKS.md,
 * "Many threads alive at once"). A7's test is a hint that TRYALLOC's CAS checks again, so
 * a value read a few nodes earlier serves as well as one read at the node: a node freed
 * since is found by the rescan that the release's count asks for (A15), one taken since
 * fails its TRYALLOC as it would have. */
static uint64_t scan_level_packed(struct buddy *b, unsigned level, uint64_t lo, uint64_t hi)
{
    uint64_t i = lo;
    while (i < hi) {
        struct position pos;
        packed_locate(b, i, level, &pos);
        /* The first node of the next bunch at this level. */
        uint64_t bunch_end = (pos.root + 1) << (level - pos.root_level);
        uint64_t end = bunch_end < hi ? bunch_end : hi;
        /* relaxed: a hint for the scan (A7), as in packed_is_free. */
        uint64_t word = atomic_load_explicit(pos.word, memory_order_relaxed);
        uint64_t mask = pos.mask;
        unsigned step = pos.count * SLOT_BITS;
        while (i < end && (word & mask)) {
            i++;
            mask <<= step;
        }
        if (i == end)
            continue;
        BUDDY_CHAOS();
        uint64_t failed_at = buddy_packed_tryalloc(b, i, level);
        if (!failed_at)
            return i;
        /* A13-A14: skip the subtree of the node that failed us. */
        i = (failed_at + 1) << (level - node_level(failed_at));
    }
    return 0;
}

static uint64_t scan_level(struct buddy *b, unsigned level, uint64_t lo, uint64_t hi)
{
    return (b->flags & BUDDY_PACKED) ? scan_level_packed(b, level, lo, hi)
                                     : scan_level_flat(b, level, lo, hi);
}

/* Sets the shape of an instance over `size` bytes in b and lays out its metadata
 * mapping: the header, then the tree (1-level) or the bunch words (packed), then index[].
 * Returns the mapping's size, with the offsets of the tree or words (`nodes_at`) and of
 * index[], and sets the bunch levels' first words (packed). The deepest bunch ends at
 * the leaves and the top one starts at base_level with what is left (src/buddy.h), so a
 * bunch word holds four leaves, and the tree has about 2^depth / 3.5 words for any
 * max_chunk. */
static size_t buddy_lay_out(struct buddy *b, size_t size, size_t min_chunk, size_t max_chunk,
                            unsigned flags, size_t *nodes_at, size_t *index_at)
{
    b->size = size;
    b->max_chunk = max_chunk;
    b->size_shift = (unsigned)__builtin_ctzll(size);
    b->min_shift = (unsigned)__builtin_ctzll(min_chunk);
    b->depth = b->size_shift - b->min_shift;
    b->base_level = b->size_shift - (unsigned)__builtin_ctzll(max_chunk);
    b->flags = flags;
    size_t bytes = (sizeof(struct buddy) + 63) & ~(size_t)63;
    *nodes_at = bytes;
    if (flags & BUDDY_PACKED) {
        size_t words = 0;
        unsigned top = (b->depth - b->base_level) % BUDDY_BUNCH_HEIGHT + 1;
        b->bunch_gap = BUDDY_BUNCH_HEIGHT - top;
        b->bunch_levels = 0;
        for (unsigned r = b->base_level; r <= b->depth;
             r = buddy_bunch_root_level(b, b->bunch_levels)) {
            b->bunch_offset[b->bunch_levels++] = words;
            words += (size_t)1 << r;
        }
        bytes += words * sizeof(uint64_t);
    } else {
        bytes += ((size_t)2 << b->depth) * sizeof(uint64_t);
    }
    bytes = (bytes + 63) & ~(size_t)63;
    *index_at = bytes;
    bytes += (size_t)1 << b->depth; /* index[] */
    return (bytes + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
}

size_t buddy_metadata_size(size_t size, size_t min_chunk, size_t max_chunk, unsigned flags)
{
    struct buddy shape;
    size_t nodes_at, index_at;
    return buddy_lay_out(&shape, size, min_chunk, max_chunk ? max_chunk : size, flags, &nodes_at,
                         &index_at);
}

static inline bool is_pow2(size_t x)
{
    return x && !(x & (x - 1));
}

struct buddy *buddy_create(void *region, size_t size, size_t min_chunk, size_t max_chunk,
                           unsigned flags)
{
    if (!max_chunk)
        max_chunk = size;
    if (!is_pow2(size) || !is_pow2(min_chunk) || !is_pow2(max_chunk) ||
        min_chunk < BUDDY_MIN_CHUNK || min_chunk > max_chunk || max_chunk > size ||
        (flags & ~BUDDY_FLAGS) || ((uintptr_t)region & (min_chunk - 1)) ||
        size / min_chunk > ((size_t)1 << BUDDY_MAX_DEPTH)) {
        errno = EINVAL;
        return NULL;
    }
    size_t meta_size = buddy_metadata_size(size, min_chunk, max_chunk, flags);
    char *meta = os_map(meta_size, OS_PAGE_SIZE);
    if (!meta) {
        errno = ENOMEM;
        return NULL;
    }
    bool owns_region = false;
    if (!region) {
        size_t map = size < OS_PAGE_SIZE ? OS_PAGE_SIZE : size;
        region = os_map(map, size < OS_PAGE_SIZE ? OS_PAGE_SIZE : size);
        if (!region) {
            os_unmap(meta, meta_size);
            errno = ENOMEM;
            return NULL;
        }
        owns_region = true;
    }

    /* The metadata mapping is zero-filled: tree[], words[] and index[] start empty
     * (NBBS §3.2: both arrays are initialised to zero). */
    struct buddy *b = (struct buddy *)meta;
    size_t nodes_at, index_at;
    buddy_lay_out(b, size, min_chunk, max_chunk, flags, &nodes_at, &index_at);
    b->base = region;
    b->owns_region = owns_region;
    b->meta_size = meta_size;
    /* relaxed: only uniqueness matters, nothing is published through the counter. */
    b->serial = atomic_fetch_add_explicit(&buddy_serial_counter, 1, memory_order_relaxed) + 1;
    if (flags & BUDDY_PACKED)
        b->words = (_Atomic uint64_t *)(meta + nodes_at);
    else
        b->tree = (_Atomic uint64_t *)(meta + nodes_at);
    b->index = (_Atomic uint8_t *)(meta + index_at);
    /* The instance is handed to other threads by the caller, whose own synchronisation
     * (thread creation, a release store of the pointer) publishes these plain writes. */
    return b;
}

void buddy_destroy(struct buddy *b)
{
    if (!b)
        return;
    if (b->owns_region)
        os_unmap(b->base, b->size < OS_PAGE_SIZE ? OS_PAGE_SIZE : b->size);
    os_unmap(b, b->meta_size);
}

/* NBBS Alg. 2; with trust_full, A1-A17 are skipped while the level is known full. */
static void *alloc_chunk(struct buddy *b, size_t bytes, bool trust_full)
{
    if (LFH_UNLIKELY(bytes > b->max_chunk)) /* A2-A3 */
        return NULL;
    unsigned chunk_shift = bytes <= ((size_t)1 << b->min_shift)
                               ? b->min_shift
                               : 64u - (unsigned)__builtin_clzll(bytes - 1);
    unsigned level = b->size_shift - chunk_shift; /* A5 */
    uint64_t first = (uint64_t)1 << level, end = first << 1;
    uint32_t *hints = (b->flags & BUDDY_NO_HINTS) ? NULL : hints_for(b);
    uint64_t start = hints && hints[level] ? hints[level] : first;
    /* Relaxed mark, acquire count (as A4): the mark holds only while the count is still
     * the one its scan saw, and the count never goes back, so a stale mark or a release
     * since only makes them differ, and the scan runs. */
    if (trust_full && atomic_load_explicit(&b->full_at[level], memory_order_relaxed) ==
                          atomic_load_explicit(&b->release_count, memory_order_acquire) + 1)
        return NULL;
    for (;;) {
        /* A4. acquire: pairs with the release increment at F4, so that when A15 sees a
         * newer count, the released nodes are visible to the rescan. */
        uint64_t ts = atomic_load_explicit(&b->release_count, memory_order_acquire);
        /* A6-A14, starting at the thread's hint (§3.6.1; the paper allows any start)
         * and wrapping around to the beginning of the level. */
        uint64_t n = scan_level(b, level, start, end);
        if (!n && start > first)
            n = scan_level(b, level, first, start);
        if (n) {
            uint64_t offset = (n - first) << chunk_shift;
            /* The chunk: at least `bytes`, inside the region, aligned to its size. */
            LFH_INVARIANT("buddy chunk fits and is aligned to its size",
                          ((size_t)1 << chunk_shift) >= bytes && offset < b->size &&
                              (offset & (((uint64_t)1 << chunk_shift) - 1)) == 0);
            if (LFH_CHECKS)
                chunk_check_live(b, n, level);
            /* A10. release: pairs with the acquire in buddy_free / buddy_chunk_size, which
             * may run on another thread that got the pointer by its own means. */
            atomic_store_explicit(&b->index[offset >> b->min_shift], (uint8_t)(level + 1),
                                  memory_order_release);
            if (hints) /* §3.6.1: next time try the node after this one. */
                hints[level] = n + 1 < end ? (uint32_t)(n + 1) : 0;
            return b->base + offset; /* A11 */
        }
        /* A15-A16. acquire: see A4. */
        if (ts == atomic_load_explicit(&b->release_count, memory_order_acquire)) {
            /* Relaxed: a mark stored late, after a release, names a count already passed,
             * and nobody trusts it. */
            atomic_store_explicit(&b->full_at[level], ts + 1, memory_order_relaxed);
            return NULL; /* A17 */
        }
    }
}

void *buddy_alloc(struct buddy *b, size_t bytes)
{
    return alloc_chunk(b, bytes, false);
}

void *buddy_alloc_unless_full(struct buddy *b, size_t bytes)
{
    return alloc_chunk(b, bytes, true);
}

bool buddy_alloc_at(struct buddy *b, void *p, size_t bytes)
{
    uintptr_t offset = (uintptr_t)p - (uintptr_t)b->base;
    if (LFH_UNLIKELY(bytes < ((size_t)1 << b->min_shift) || bytes > b->max_chunk ||
                     (bytes & (bytes - 1)) || offset >= b->size || (offset & (bytes - 1))))
        return false;
    unsigned level = b->size_shift - (unsigned)__builtin_ctzll(bytes);
    uint64_t n = ((uint64_t)1 << level) + (offset >> (b->size_shift - level));
    /* A7 then T1-T16 on the one node; a failed TRYALLOC has undone its marks. */
    if (!node_is_free(b, n, level) || node_tryalloc(b, n, level))
        return false;
    /* A10. release: pairs with the acquire in buddy_free / buddy_chunk_size, as in
     * buddy_alloc. */
    atomic_store_explicit(&b->index[offset >> b->min_shift], (uint8_t)(level + 1),
                          memory_order_release);
    return true;
}

bool buddy_free(struct buddy *b, void *p)
{
    uintptr_t offset = (uintptr_t)p - (uintptr_t)b->base;
    if (LFH_UNLIKELY(offset >= b->size || (offset & (((uintptr_t)1 << b->min_shift) - 1))))
        return false;
    size_t leaf = offset >> b->min_shift;
    /* F2. acquire: pairs with the release store at A10. */
    unsigned tag = atomic_load_explicit(&b->index[leaf], memory_order_acquire);
    if (LFH_UNLIKELY(!tag))
        return false;
    unsigned level = tag - 1;
    /* index[] holds the level of a chunk starting at this leaf: a level chunks are cut
     * at, and one the start is aligned to. The tag is this thread's atomic load, and
     * nobody else writes it while the chunk is live (A10 and F2 are its taker's and
     * releaser's). */
    LFH_INVARIANT("buddy index holds a chunk's level",
                  level >= b->base_level && level <= b->depth &&
                      (offset & (((uintptr_t)1 << (b->size_shift - level)) - 1)) == 0);
    uint64_t n = ((uint64_t)1 << level) + (offset >> (b->size_shift - level));
    if (LFH_CHECKS)
        chunk_check_live(b, n, level);
    /* relaxed: the release RMWs and the F20 store below order this before any new
     * owner's A10 store to the same leaf (its T2/T15 acquire them). */
    atomic_store_explicit(&b->index[leaf], 0, memory_order_relaxed);
    if (b->flags & BUDDY_PACKED)
        buddy_packed_freenode(b, n, level); /* F3 */
    else
        buddy_flat_freenode(b, n, level); /* F3 */
    /* F4. release: pairs with A4/A15 so that an allocation that sees the new count also
     * sees the node released. */
    atomic_fetch_add_explicit(&b->release_count, 1, memory_order_release);
    if (!(b->flags & BUDDY_NO_HINTS))
        hints_for(b)[level] = (uint32_t)n; /* §3.6.1: remember the last freed node */
    return true;
}

size_t buddy_chunk_size(const struct buddy *b, const void *p)
{
    uintptr_t offset = (uintptr_t)p - (uintptr_t)b->base;
    if (offset >= b->size || (offset & (((uintptr_t)1 << b->min_shift) - 1)))
        return 0;
    /* acquire: pairs with the release store at A10. */
    unsigned tag = atomic_load_explicit(&b->index[offset >> b->min_shift], memory_order_acquire);
    return tag ? (size_t)1 << (b->size_shift - (tag - 1)) : 0;
}

/* ---------------------------------------------------------------------------------- */
/* The public API (include/lfheap_buddy.h): thin wrappers, exported. */

_Static_assert(LFH_BUDDY_PACKED == BUDDY_PACKED, "flag values match");
_Static_assert(LFH_BUDDY_NO_HINTS == BUDDY_NO_HINTS, "flag values match");
_Static_assert(LFH_BUDDY_SCATTER == BUDDY_SCATTER, "flag values match");

lfh_buddy *lfh_buddy_create(void *region, size_t size, size_t min_chunk, size_t max_chunk,
                            unsigned flags)
{
    return (lfh_buddy *)buddy_create(region, size, min_chunk, max_chunk, flags);
}

void lfh_buddy_destroy(lfh_buddy *b)
{
    buddy_destroy((struct buddy *)b);
}

void *lfh_buddy_alloc(lfh_buddy *b, size_t size)
{
    void *p = buddy_alloc((struct buddy *)b, size);
    if (!p)
        errno = ENOMEM;
    return p;
}

int lfh_buddy_free(lfh_buddy *b, void *p)
{
    if (buddy_free((struct buddy *)b, p))
        return 0;
    errno = EINVAL;
    return -1;
}

size_t lfh_buddy_size(const lfh_buddy *b, const void *p)
{
    return buddy_chunk_size((const struct buddy *)b, p);
}

int lfh_buddy_contains(const lfh_buddy *b, const void *p)
{
    return buddy_contains((const struct buddy *)b, p);
}

void *lfh_buddy_base(const lfh_buddy *b)
{
    return buddy_base((const struct buddy *)b);
}
