/*
 * buddy_impl: what the three files of the buddy back-end share, behind its one interface
 * (src/buddy.h): buddy.c (creation, index[], NBALLOC and NBFREE, and the dispatch to the
 * layout chosen at buddy_create), buddy_flat.c (the 1-level tree) and buddy_packed.c (the
 * packed tree the heap uses). Here: NBBS Table 1 and Alg. 1 on the status bits, the
 * tree's invariants and the two races of the paper's release path (both layouts keep
 * and fix them), and each layout's entry points for buddy.c. The layouts' A7 tests are
 * here too, inline, because the scan (buddy.c) runs one on every node it passes.
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
 * A deviation of both layouts from the printed listings (see docs/BUDDY.md): F9 ORs the
 * coalescing bit of the child's side (the listing says MARK, the occupancy bit, which
 * would make UNMARK never coalesce).
 *
 * Two races in the paper's release path, found with tests/test_buddy_sched.c in both
 * layouts (docs/BUDDY.md tells them step by step), and what both layouts do instead:
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
 *   marked the node between the two reads. The versions are wide (59 bits in a node
 *   word, 44 in a bunch word): a narrow one wraps while an UNMARK is stopped, and the
 *   CAS succeeds on a word that only reads the same (with 24 bits: 2^24 allocations
 *   below, a second of one CPU; tests/test_parking.c, buddy.unmark_wrap).
 */
#ifndef LFHEAP_BUDDY_IMPL_H
#define LFHEAP_BUDDY_IMPL_H

#include "buddy.h"

/* A point between two steps of an algorithm where another thread may run. Nothing in
 * the library; tests/test_buddy_chaos.c compiles the buddy's files with a random yield
 * here, so that the steps of concurrent operations interleave even on one CPU. */
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

/* Slot i of a bunch word (packed layout) holds its five bits at bit 5i; a node word
 * (1-level layout) holds them in its low five bits. */
#define SLOT_BITS 5u
#define SLOT_MASK 0x1fu

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

/* ---------------------------------------------------------------------------------- */
/* The layouts' entry points for buddy.c (buddy_flat.c, buddy_packed.c). TRYALLOC (Alg. 3)
 * returns 0 on success, else the node that made it fail; FREENODE (Alg. 4) releases node
 * n, taken by this thread; check_live asserts the invariants of a live chunk. */

uint64_t buddy_flat_tryalloc(struct buddy *b, uint64_t n, unsigned level);
void buddy_flat_freenode(struct buddy *b, uint64_t n, unsigned level);
void buddy_flat_check_live(const struct buddy *b, uint64_t n, unsigned level);
uint64_t buddy_packed_tryalloc(struct buddy *b, uint64_t n, unsigned level);
void buddy_packed_freenode(struct buddy *b, uint64_t n, unsigned level);
void buddy_packed_check_live(const struct buddy *b, uint64_t n, unsigned level);

/* ---------------------------------------------------------------------------------- */
/* 1-level layout (buddy_flat.c): one 64-bit word per node: the five status bits, and
 * above them a 59-bit version that every allocation marking the node (T15) increments. */

#define NODE_STATUS   ((uint64_t)SLOT_MASK)
#define NODE_VERSION1 ((uint64_t)1 << SLOT_BITS)

static inline bool flat_is_free(const struct buddy *b, uint64_t n)
{
    /* relaxed: a hint for the scan (A7); TRYALLOC's CAS re-checks the value. */
    return !(atomic_load_explicit(&b->tree[n], memory_order_relaxed) & NODE_STATUS);
}

/* ---------------------------------------------------------------------------------- */
/* Packed layout (§3.6.2, buddy_packed.c). A node is located by its bunch word and the range of
 * slots under it: bunch level k has its roots at buddy_bunch_root_level(k) and its slots at the
 * level above the next bunch level's roots (the leaves for the last); counted from
 * base_level - bunch_gap, bunch level k covers levels 3k .. 3k + 2. */

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
    unsigned k = (level - b->base_level + b->bunch_gap) / BUDDY_BUNCH_HEIGHT;
    unsigned root_level = buddy_bunch_root_level(b, k);
    unsigned bottom =
        b->base_level - b->bunch_gap + BUDDY_BUNCH_HEIGHT * k + BUDDY_BUNCH_HEIGHT - 1;
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

static inline bool packed_is_free(const struct buddy *b, uint64_t n, unsigned level)
{
    struct position pos;
    packed_locate(b, n, level, &pos);
    /* relaxed: a hint for the scan (A7); TRYALLOC's CAS re-checks the value. */
    return (atomic_load_explicit(pos.word, memory_order_relaxed) & pos.mask) == 0;
}

#endif
