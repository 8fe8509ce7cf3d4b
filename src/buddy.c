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
 * Two layouts, chosen per instance. 1-level: one 32-bit word per node, the five status
 * bits and a version (below), the algorithms line by line. Packed (§3.6.2): levels are
 * grouped four at a time into "bunches"; a bunch (a node and its descendants three
 * levels down) is one 64-bit word holding only the five bits of each of its eight
 * bottom nodes ("slots"), and a version in its top 24 bits. The state of an inner node
 * of a bunch is derived from its slots: occupied-on-a-side = any occupancy bit in that
 * side's slots, coalescing = any coalescing bit there, and a node is allocated by setting
 * all its slots to BUSY. One RMW then updates four levels; the climbs step from a bunch
 * root to the slot above it, a bottom node of the next bunch up.
 *
 * Relies on: os_map/os_unmap for the metadata (and the region when it reserves one);
 * C11 atomics with CAS on 32- and 64-bit words (lock-free on x86-64 and aarch64).
 *
 * Invariants.
 * - A node is a live chunk iff its OCC bit is set and index[] holds its level at its
 *   first leaf; every ancestor up to base_level then has the occupancy bit of its side.
 * - A coalescing bit is only ever set on a side whose occupancy bit is set (F12 checks
 *   it in the same CAS), never on a node still taken by an allocation, with one window
 *   in the packed layout: a release marks its own slots coalescing (F9) before F20
 *   clears them, and an UNMARK from a bunch below that began before the node was taken
 *   may clear a side bit of such a slot in between; its OCC bit is never touched, and
 *   F20 clears the slot right after. So a node's status bits read 0 iff no allocation or
 *   release involves its subtree, and IS_FREE(v) is "status bits 0".
 * - The version of a node (of a bunch word) changes with every allocation that marks it
 *   from below (T15), and only counts up.
 * - Every retry loop retries only after a CAS failed, that is after another thread
 *   changed the same word: lock-free (NBBS §4.1). The outer retry of an allocation
 *   (A15) happens only after a release completed.
 * - Memory order: every RMW that takes or gives back a node is acq_rel, and the release
 *   write of a node (F20) is a release store, so the previous owner's accesses to a chunk
 *   happen before the next owner's (NBBS §3.5 asks for barriers at A10 and F20,
 *   which on weakly ordered machines must be release/acquire).
 *   Plain loads of nodes are relaxed where a CAS re-validates the value they return;
 *   UNMARK's loads are acquire (the child must be read after the node).
 *
 * Deviations from the printed listings (slips in the paper, see docs/BUDDY.md):
 * A6 scans level `level`, nodes 2^level .. 2^(level+1)-1 (the listing says level-1);
 * after the skip at A13-A14 the loop does not add one more; F9 ORs the coalescing bit
 * of the child's side (the listing says MARK, the occupancy bit, which would make UNMARK
 * never coalesce); index[] keeps 1 + the level of the chunk (one byte) instead of the
 * node index, from which the node is recomputed in O(1).
 *
 * Two races in the paper's release path, found with tests/test_buddy_sched.c in both
 * layouts (docs/BUDDY.md tells them step by step), and what this file does instead:
 * - A failed TRYALLOC undoes its marks with FREENODE bounded by the last node it marked
 *   (T11). A buddy's release may have stopped its first climb at F15 because of those
 *   very marks (buddy occupied, not coalescing), counting on the buddy's release to
 *   carry the coalescing up to base_level; the bounded undo stops short, and bits stay
 *   set above for good. Here the undo climbs like a release, to base_level, and F9-F14
 *   mark a node only if it is not taken and our side is still occupied, stopping the
 *   climb otherwise: the undo stops below the taken node that failed it.
 * - An UNMARK that stalls between two levels resumes with a stale view of the child it
 *   cleared: an allocation may have entered the child since and marked this node (T13
 *   clears the coalescing bit), and a release from the child may have set the bit
 *   again (ABA). The UNMARK then clears the side (U11): if the allocation is still
 *   live, the side reads free and its memory can be handed out a second time; if it is
 *   being released, that release finds its bit gone and stops at U9, leaving the bits
 *   it marked above. Here UNMARK reads the child after the node and stops if it is
 *   occupied, and T15 gives the node a new version, so the CAS fails if an allocation
 *   marked the node between the two reads.
 */
#include "buddy.h"

#include <errno.h>

#include "invariant.h"
#include "lfheap_buddy.h"
#include "os.h"
#include "park.h"

/* A point between two steps of an algorithm where another thread may run. Nothing in
 * the library; tests/test_buddy_chaos.c compiles this file with a random yield here, so
 * that the steps of concurrent operations interleave even on one CPU. */
#ifndef BUDDY_CHAOS
#define BUDDY_CHAOS() ((void)0)
#endif

/* NBBS Table 1. */
#define OCC_RIGHT  0x01u
#define OCC_LEFT   0x02u
#define COAL_RIGHT 0x04u
#define COAL_LEFT  0x08u
#define OCC        0x10u
#define BUSY       (OCC | OCC_LEFT | OCC_RIGHT)
#define COAL_BOTH  (COAL_LEFT | COAL_RIGHT)

/* Packed layout: slot i of a bunch word holds its five bits at bit 5i. SLOT_REP has bit
 * 5i set for the eight slots, so (v * SLOT_REP) repeats a 5-bit value in every slot. */
#define SLOT_BITS 5u
#define SLOT_MASK 0x1fu
#define SLOT_REP  ((uint64_t)0x0842108421)
#define BUSY_REP  ((uint64_t)BUSY * SLOT_REP)
#define OCC_REP   ((uint64_t)OCC * SLOT_REP)
#define COAL_REP  ((uint64_t)COAL_BOTH * SLOT_REP)
/* Bits 40-63 of a bunch word: its version, incremented by every allocation that marks
 * one of its slots from below (T15); see UNMARK. */
#define WORD_VERSION1 ((uint64_t)1 << (8 * SLOT_BITS))

/* Alg. 1, on the 5-bit value of a node (or slot) and the index of the child we come from:
 * the left child is even, the right child odd, and "LEFT >> 1" is the matching RIGHT. */
static inline unsigned side_occ(uint64_t child)
{
    return OCC_LEFT >> (child & 1);
}
static inline unsigned side_coal(uint64_t child)
{
    return COAL_LEFT >> (child & 1);
}
static inline bool is_occ_buddy(unsigned val, uint64_t child)
{
    return val & (OCC_RIGHT << (child & 1));
}
static inline bool is_coal_buddy(unsigned val, uint64_t child)
{
    return val & (COAL_RIGHT << (child & 1));
}

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
/* 1-level layout: NBBS Alg. 3-5 on one 32-bit word per node: the five status bits, and
 * above them a version that every allocation marking the node (T15) increments. */

#define NODE_STATUS   SLOT_MASK
#define NODE_VERSION1 (1u << SLOT_BITS)

static void flat_freenode(struct buddy *b, uint64_t n, unsigned level);

static inline bool flat_is_free(const struct buddy *b, uint64_t n)
{
    /* relaxed: a hint for the scan (A7); TRYALLOC's CAS re-checks the value. */
    return !(atomic_load_explicit(&b->tree[n], memory_order_relaxed) & NODE_STATUS);
}

/* TRYALLOC (Alg. 3): 0 on success, else the node that made it fail. */
static uint64_t flat_tryalloc(struct buddy *b, uint64_t n, unsigned level)
{
    /* T2 as a CAS loop that keeps the version. relaxed load: the CAS validates it. */
    uint32_t val = atomic_load_explicit(&b->tree[n], memory_order_relaxed);
    do {
        if (val & NODE_STATUS)
            return n;
        /* acq_rel: acquire pairs with the previous owner's release of this node (F20) or
         * of an ancestor (U11), so its accesses to the chunk happen before ours; release
         * publishes the occupancy to the allocations that will test it. A failure means
         * another thread changed the node: retry with its value (lock-free). */
    } while (!atomic_compare_exchange_weak_explicit(&b->tree[n], &val, val | BUSY,
                                                    memory_order_acq_rel, memory_order_relaxed));
    uint64_t current = n;
    for (unsigned l = level; l > b->base_level; l--) { /* T5: l is the level of child */
        uint64_t child = current;
        current >>= 1;
        BUDDY_CHAOS();
        /* T9. relaxed: the CAS below validates it. */
        val = atomic_load_explicit(&b->tree[current], memory_order_relaxed);
        uint32_t new_val;
        do {
            if (val & OCC) {                /* T10-T12: an ancestor is taken; undo our marks. */
                flat_freenode(b, n, level); /* T11 without upper bound: see FREENODE */
                return current;
            }
            /* T13-T14, and a new version: see UNMARK. */
            new_val = ((val & ~side_coal(child)) | side_occ(child)) + NODE_VERSION1;
            BUDDY_CHAOS();
            /* T15. acq_rel: acquire orders us after the release that last cleared this
             * ancestor (U11) when we end up taking memory it merged; release publishes
             * our side's occupancy (and our mark of the child below, which UNMARK reads
             * after this node). A failure means another thread changed this node:
             * retry with its value (lock-free). */
        } while (!atomic_compare_exchange_weak_explicit(
            &b->tree[current], &val, new_val, memory_order_acq_rel, memory_order_relaxed));
    }
    return 0; /* T16 */
}

/* UNMARK (Alg. 5): from parent(n) up, clears our side's occupancy and coalescing bits
 * while the buddy side is empty. Returns where an allocation has taken the side since:
 * the side is no longer coalescing (U8-U9), or the child we come from is occupied again
 * (see the top of the file for why the child is read and the version kept). */
static void flat_unmark(struct buddy *b, uint64_t n, unsigned level)
{
    uint64_t current = n, child;
    uint32_t new_val;
    do {
        level--;         /* current's level after the step */
        child = current; /* U4-U5 */
        current >>= 1;
        BUDDY_CHAOS();
        /* U7. acquire: if T15 of an allocation below wrote this value (or a value after
         * it), that allocation's mark of the child is visible to the read of the child
         * below. The CAS validates the value. */
        uint32_t val = atomic_load_explicit(&b->tree[current], memory_order_acquire);
        for (;;) {
            if (!(val & side_coal(child))) /* U8-U9: an allocation took this side */
                return;
            BUDDY_CHAOS();
            /* U8 for the child: read after this node, so an allocation that has entered
             * the child either shows here or marks this node later, which changes its
             * version and fails the CAS. acquire: see U7. */
            if (atomic_load_explicit(&b->tree[child], memory_order_acquire) & NODE_STATUS)
                return;
            new_val = val & ~(side_occ(child) | side_coal(child)); /* U10 */
            BUDDY_CHAOS();
            /* U11. acq_rel: release makes the chunks merged here (and their previous
             * owners' accesses, acquired through F20 and lower U11s) visible to the
             * allocation that takes this node; failure means another thread changed the
             * node: retry (lock-free) with the value it returns, read with acquire as
             * at U7 since the child is read again after it. */
            if (atomic_compare_exchange_weak_explicit(&b->tree[current], &val, new_val,
                                                      memory_order_acq_rel, memory_order_acquire))
                break;
        }
    } while (level > b->base_level && !is_occ_buddy(new_val, child)); /* U12-U13 */
}

/* FREENODE (Alg. 4): releases node n, from NBFREE or from a failed TRYALLOC. Both climb
 * to base_level: the undo of a failed allocation is the release its buddies count on
 * (see the top of the file). F9-F14 set our side's coalescing bit only where the side is
 * still occupied and the node is not allocated, and stop the climb otherwise: so a
 * coalescing bit always sits next to its side's occupancy bit (never in a free node or
 * an allocated one), and an undo never climbs past the taken node that failed it. */
static void flat_freenode(struct buddy *b, uint64_t n, unsigned level)
{
    uint64_t current = n >> 1, child = n;              /* F6-F7 */
    for (unsigned l = level; l > b->base_level; l--) { /* F8: l is child's level */
        BUDDY_CHAOS();
        /* F11. relaxed: the CAS validates it; if we stop on it, we write nothing. */
        uint32_t val = atomic_load_explicit(&b->tree[current], memory_order_relaxed);
        bool marked;
        do {
            marked = !(val & OCC) && (val & side_occ(child));
            if (!marked)
                break;
            /* F12-F14. acq_rel: acquire sees the buddy's bits as of now for F15; release
             * orders our accesses to the chunk before the coalescing mark that lets the
             * buddy's release climb past this node and free the parent. A failure means
             * another thread changed the node: retry with its value (lock-free). */
        } while (
            !atomic_compare_exchange_weak_explicit(&b->tree[current], &val, val | side_coal(child),
                                                   memory_order_acq_rel, memory_order_relaxed));
        if (!marked || (is_occ_buddy(val, child) && !is_coal_buddy(val, child))) /* F15-F17 */
            break;
        child = current; /* F18-F19 */
        current >>= 1;
    }
    BUDDY_CHAOS();
    /* F20, keeping the version. While n is taken nobody else writes it (T2, T15, F12 and
     * U11 all refuse an OCC node), so a load and a store suffice. The store is a release:
     * it pairs with the acquire of the next T2 on n, so our accesses to the chunk happen
     * before the next owner's; the load is relaxed (our own node). */
    uint32_t taken = atomic_load_explicit(&b->tree[n], memory_order_relaxed);
    /* A node released (by NBFREE or by an undone TRYALLOC) is one this thread took, and
     * it read the node atomically, with nobody else writing it (above). */
    LFH_INVARIANT("buddy released node was taken", (taken & NODE_STATUS) == BUSY);
    uint32_t version = taken & ~NODE_STATUS;
    atomic_store_explicit(&b->tree[n], version, memory_order_release);
    if (level != b->base_level) { /* F21-F22 */
        BUDDY_CHAOS();
        flat_unmark(b, n, level);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Packed layout (§3.6.2). A node is located by its bunch word and the range of slots
 * under it: bunch k has its root at level base_level + 4k and its slots at level
 * min(root + 3, depth). */

struct position {
    _Atomic uint64_t *word;
    uint64_t mask;       /* the bits of the node's slots in the word */
    unsigned shift;      /* bit of its first slot */
    unsigned count;      /* number of its slots */
    unsigned root_level; /* level of the bunch root */
    uint64_t root;       /* the bunch root (node index) */
};

static inline void packed_locate(const struct buddy *b, uint64_t n, unsigned level,
                                 struct position *pos)
{
    unsigned k = (level - b->base_level) >> 2;
    unsigned root_level = b->base_level + 4 * k;
    unsigned bottom = root_level + 3 < b->depth ? root_level + 3 : b->depth;
    uint64_t root = n >> (level - root_level);
    uint64_t first = (n << (bottom - level)) - (root << (bottom - root_level));
    unsigned count = 1u << (bottom - level);
    pos->word = &b->words[b->bunch_offset[k] + (root - ((uint64_t)1 << root_level))];
    pos->shift = (unsigned)first * SLOT_BITS;
    pos->count = count;
    pos->mask = (((uint64_t)1 << (count * SLOT_BITS)) - 1) << pos->shift;
    pos->root_level = root_level;
    pos->root = root;
}

/* The slot above bunch root `child` (at child_level > base_level): the parent of child,
 * a bottom node of the bunch four levels up, whose slots are always all at its level. */
static inline void packed_locate_parent(const struct buddy *b, uint64_t child, unsigned child_level,
                                        struct position *up)
{
    unsigned k = (child_level - b->base_level) >> 2;
    uint64_t root = child >> 4;
    up->word = &b->words[b->bunch_offset[k - 1] + (root - ((uint64_t)1 << (child_level - 4)))];
    up->shift = (unsigned)((child >> 1) & 7) * SLOT_BITS;
    up->count = 1;
    up->mask = (uint64_t)SLOT_MASK << up->shift;
    up->root_level = child_level - 4;
    up->root = root;
}

static inline bool packed_is_free(const struct buddy *b, uint64_t n, unsigned level)
{
    struct position pos;
    packed_locate(b, n, level, &pos);
    /* relaxed: a hint for the scan (A7); TRYALLOC's CAS re-checks the value. */
    return (atomic_load_explicit(pos.word, memory_order_relaxed) & pos.mask) == 0;
}

/* The derived F15 test for the inner levels of a bunch: walking from node m (at `level`,
 * its slots at pos) up to the bunch root, is some buddy on the way allocated and not
 * coalescing? Then a release below m cannot merge past the root (its climb stops early).
 * The buddy's slots are the run of the same length just after (m left) or before (m
 * right) m's own; the parent's slots are both runs. */
static bool packed_buddy_blocks(uint64_t word, uint64_t m, unsigned level,
                                const struct position *pos)
{
    uint64_t mask = pos->mask;
    unsigned width = pos->count * SLOT_BITS;
    for (; level > pos->root_level; m >>= 1, level--, width *= 2) {
        uint64_t buddy = (m & 1) ? mask >> width : mask << width;
        uint64_t bits = word & buddy;
        if ((bits & BUSY_REP) && !(bits & COAL_REP))
            return true;
        mask |= buddy;
    }
    return false;
}

static void packed_unmark(struct buddy *b, uint64_t child, unsigned child_level,
                          _Atomic uint64_t *child_word);

/* FREENODE (Alg. 4) on the packed tree: n at `level`, from NBFREE or from a failed
 * TRYALLOC; both climb to base_level, with the same guarded F9-F14 as the 1-level tree. */
static void packed_freenode(struct buddy *b, uint64_t n, unsigned level)
{
    struct position pos;
    packed_locate(b, n, level, &pos);
    if (pos.root_level > b->base_level) {
        /* F9-F13 for the inner levels: mark our own slots coalescing, so that the derived
         * parent of n reads "coalescing on n's side" to a release of its buddy.
         * acq_rel: acquire sees the other slots' bits for the test below; release orders
         * our accesses to the chunk before the mark. */
        uint64_t coal = COAL_REP & pos.mask;
        BUDDY_CHAOS();
        uint64_t word = atomic_fetch_or_explicit(pos.word, coal, memory_order_acq_rel) | coal;
        if (!packed_buddy_blocks(word, n, level, &pos)) { /* F15 inside */
            uint64_t child = pos.root;
            unsigned child_level = pos.root_level;
            while (child_level > b->base_level) { /* F8 */
                struct position up;
                packed_locate_parent(b, child, child_level, &up);
                uint64_t bit = (uint64_t)side_coal(child) << up.shift;
                uint64_t taken = (uint64_t)OCC << up.shift;
                uint64_t side = (uint64_t)side_occ(child) << up.shift;
                BUDDY_CHAOS();
                LFH_PARK(BUDDY_FREE_CLIMB);
                /* F11. relaxed: the CAS validates it; if we stop on it, we write nothing. */
                uint64_t old = atomic_load_explicit(up.word, memory_order_relaxed);
                bool marked;
                do {
                    marked = !(old & taken) && (old & side);
                    if (!marked)
                        break;
                    /* F12-F14: acq_rel and lock-free as in the 1-level tree. */
                } while (!atomic_compare_exchange_weak_explicit(
                    up.word, &old, old | bit, memory_order_acq_rel, memory_order_relaxed));
                if (!marked)
                    break;
                unsigned val = (unsigned)(old >> up.shift) & SLOT_MASK;
                if (is_occ_buddy(val, child) && !is_coal_buddy(val, child)) /* F15-F17 */
                    break;
                if (packed_buddy_blocks(old | bit, child >> 1, child_level - 1, &up))
                    break;
                child = up.root; /* F18-F19 */
                child_level = up.root_level;
            }
        }
    }
    BUDDY_CHAOS();
    LFH_PARK(BUDDY_FREE_MARKED);
    /* F20 as a fetch-and: the word is shared with the other nodes of the bunch.
     * acq_rel: release pairs with the acquire of the next T2 on these slots (our accesses
     * to the chunk happen before the next owner's); acquire lets the release whose
     * fetch-and empties the bunch carry every earlier release's marks to UNMARK. */
    uint64_t word = atomic_fetch_and_explicit(pos.word, ~pos.mask, memory_order_acq_rel);
    /* Our slots, which we took, still read OCC in the word this fetch-and returned. Only
     * OCC: once F9 above has marked them coalescing, an UNMARK from a bunch below that
     * started before we took them may clear the side bits of one (its U8 sees the
     * coalescing bit and a free child bunch), never OCC. */
    LFH_INVARIANT("buddy released node was taken",
                  (word & pos.mask & OCC_REP) == (OCC_REP & pos.mask));
    word &= ~pos.mask;
    /* F21-F22, with U12-U13 for the inner levels: climb out of the bunch only if it has
     * become entirely free. */
    if (pos.root_level > b->base_level && !(word & BUSY_REP)) {
        BUDDY_CHAOS();
        packed_unmark(b, pos.root, pos.root_level, pos.word);
    }
}

/* UNMARK (Alg. 5) on the packed tree, from the slot above bunch root `child`, whose
 * bunch word is `child_word`; U8-U9 as in the 1-level tree (the child read is its whole
 * bunch, and the version is the parent word's). */
static void packed_unmark(struct buddy *b, uint64_t child, unsigned child_level,
                          _Atomic uint64_t *child_word)
{
    for (;;) {
        struct position up;
        packed_locate_parent(b, child, child_level, &up);
        uint64_t coal = (uint64_t)side_coal(child) << up.shift;
        uint64_t side = (uint64_t)side_occ(child) << up.shift;
        BUDDY_CHAOS();
        /* U7. acquire, as in the 1-level tree: for the read of the child's bunch. */
        uint64_t word = atomic_load_explicit(up.word, memory_order_acquire);
        uint64_t new_word;
        for (;;) {
            if (!(word & coal)) /* U8-U9 */
                return;
            BUDDY_CHAOS();
            /* U8 for the child's bunch, read after the parent word: as in the 1-level
             * tree. acquire: see U7. */
            if (atomic_load_explicit(child_word, memory_order_acquire) & BUSY_REP)
                return;
            new_word = word & ~(coal | side); /* U10 */
            BUDDY_CHAOS();
            LFH_PARK(BUDDY_UNMARK);
            /* U11. acq_rel, as in the 1-level tree: release hands the merged memory to
             * the allocation that takes it; a failure means another thread changed the
             * bunch: retry (lock-free), with acquire as in the 1-level tree. */
            if (atomic_compare_exchange_weak_explicit(up.word, &word, new_word,
                                                      memory_order_acq_rel, memory_order_acquire))
                break;
        }
        child = up.root;
        child_level = up.root_level;
        child_word = up.word;
        if (child_level <= b->base_level || (new_word & BUSY_REP)) /* U12-U13 for the bunch */
            return;
    }
}

/* TRYALLOC (Alg. 3) on the packed tree: 0 on success, else the node that made it fail. */
static uint64_t packed_tryalloc(struct buddy *b, uint64_t n, unsigned level)
{
    struct position pos;
    packed_locate(b, n, level, &pos);
    /* T2 on all the slots under n (an allocated ancestor inside the bunch has set them
     * BUSY, so this also rejects those). relaxed load: the CAS validates it. */
    uint64_t word = atomic_load_explicit(pos.word, memory_order_relaxed);
    do {
        if (word & pos.mask)
            return n;
        BUDDY_CHAOS();
        /* acq_rel: as T2 in the 1-level tree. A failure here means another node of the
         * bunch changed: retry (lock-free). */
    } while (!atomic_compare_exchange_weak_explicit(pos.word, &word, word | (BUSY_REP & pos.mask),
                                                    memory_order_acq_rel, memory_order_relaxed));
    uint64_t child = pos.root;
    unsigned child_level = pos.root_level;
    while (child_level > b->base_level) { /* T5 */
        struct position up;
        uint64_t current = child >> 1;
        packed_locate_parent(b, child, child_level, &up);
        uint64_t occ = (uint64_t)OCC << up.shift;
        uint64_t coal = (uint64_t)side_coal(child) << up.shift;
        uint64_t mark = (uint64_t)side_occ(child) << up.shift;
        BUDDY_CHAOS();
        LFH_PARK(BUDDY_ALLOC_CLIMB);
        /* T9. relaxed: the CAS validates it. */
        word = atomic_load_explicit(up.word, memory_order_relaxed);
        do {
            if (word & occ) { /* T10-T12; an allocated ancestor in the bunch sets it too */
                packed_freenode(b, n, level); /* T11 without upper bound */
                return current;
            }
            BUDDY_CHAOS();
            /* T13-T15 with a new version of the word. acq_rel and lock-free as in the
             * 1-level tree. */
        } while (!atomic_compare_exchange_weak_explicit(
            up.word, &word, ((word & ~coal) | mark) + WORD_VERSION1, memory_order_acq_rel,
            memory_order_relaxed));
        child = up.root;
        child_level = up.root_level;
    }
    return 0; /* T16 */
}

/* ---------------------------------------------------------------------------------- */
/* The tree's invariants of a live chunk (the top of the file), asserted when buddy_alloc
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
    if (!(b->flags & BUDDY_PACKED)) {
        uint32_t val = atomic_load_explicit(&b->tree[n], memory_order_relaxed);
        LFH_INVARIANT("buddy live chunk's node is taken", (val & NODE_STATUS) == BUSY);
        for (uint64_t child = n; level > b->base_level; level--, child >>= 1) {
            val = atomic_load_explicit(&b->tree[child >> 1], memory_order_relaxed);
            LFH_INVARIANT("buddy ancestor occupied on the chunk's side", val & side_occ(child));
        }
        return;
    }
    struct position pos;
    packed_locate(b, n, level, &pos);
    uint64_t word = atomic_load_explicit(pos.word, memory_order_relaxed);
    LFH_INVARIANT("buddy live chunk's node is taken", (word & pos.mask) == (BUSY_REP & pos.mask));
    for (uint64_t child = pos.root; pos.root_level > b->base_level; child = pos.root) {
        packed_locate_parent(b, child, pos.root_level, &pos);
        word = atomic_load_explicit(pos.word, memory_order_relaxed);
        LFH_INVARIANT("buddy ancestor occupied on the chunk's side",
                      word & ((uint64_t)side_occ(child) << pos.shift));
    }
}

/* ---------------------------------------------------------------------------------- */
/* NBALLOC / NBFREE (Alg. 2 and 4), common to both layouts. */

static inline bool node_is_free(const struct buddy *b, uint64_t n, unsigned level)
{
    return (b->flags & BUDDY_PACKED) ? packed_is_free(b, n, level) : flat_is_free(b, n);
}

static inline uint64_t node_tryalloc(struct buddy *b, uint64_t n, unsigned level)
{
    return (b->flags & BUDDY_PACKED) ? packed_tryalloc(b, n, level) : flat_tryalloc(b, n, level);
}

/* A6-A14 over nodes [lo, hi) of `level`: the node taken, or 0. */
static uint64_t scan_level(struct buddy *b, unsigned level, uint64_t lo, uint64_t hi)
{
    uint64_t i = lo;
    while (i < hi) {
        if (node_is_free(b, i, level)) { /* A7 */
            BUDDY_CHAOS();
            uint64_t failed_at = node_tryalloc(b, i, level);
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

/* Sets the shape of an instance over `size` bytes in b and lays out its metadata
 * mapping: the header, then the tree (1-level) or the bunch words (packed), then index[].
 * Returns the mapping's size, with the offsets of the tree or words (`nodes_at`) and of
 * index[], and sets the bunch levels' first words (packed). The bunch roots sit at
 * base_level, base_level + 4, ...: their count depends on max_chunk, not only on the
 * depth, since the last bunch level is the deepest one congruent to base_level mod 4, so
 * a smaller max_chunk can need up to eight times the words of max_chunk = size (depth
 * 10: 1092 words with base_level 2, 273 with base_level 0). */
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
        b->bunch_levels = 0;
        for (unsigned r = b->base_level; r <= b->depth; r += 4) {
            b->bunch_offset[b->bunch_levels++] = words;
            words += (size_t)1 << r;
        }
        bytes += words * sizeof(uint64_t);
    } else {
        bytes += ((size_t)2 << b->depth) * sizeof(uint32_t);
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
        b->tree = (_Atomic uint32_t *)(meta + nodes_at);
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

void *buddy_alloc(struct buddy *b, size_t bytes)
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
        if (ts == atomic_load_explicit(&b->release_count, memory_order_acquire))
            return NULL; /* A17 */
    }
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
        packed_freenode(b, n, level); /* F3 */
    else
        flat_freenode(b, n, level); /* F3 */
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
