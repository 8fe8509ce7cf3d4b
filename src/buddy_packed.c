/*
 * buddy_packed: the packed layout of the buddy tree (NBBS §3.6.2; src/buddy.h, buddy_create
 * with BUDDY_PACKED: the layout the heap uses). Levels are grouped three at a time into
 * "bunches"; a bunch (a node and its descendants two levels down) is one 64-bit word
 * holding only the five bits of each of its four bottom nodes ("slots"), and a version
 * in its top 44 bits. The state of an inner node of a bunch is derived from its slots:
 * occupied-on-a-side = any occupancy bit in that side's slots, coalescing = any
 * coalescing bit there, and a node is allocated by setting all its slots to BUSY. One RMW
 * then updates three levels; the climbs step from a bunch root to the slot above it, a
 * bottom node of the next bunch up. The paper packs four levels (eight slots), which
 * leaves 24 bits of version: too few (src/buddy_impl.h, the second race). On these words
 * it implements NBBS Alg. 3 (TRYALLOC, lines T1-T16), Alg. 4 (FREENODE, F5-F22) and
 * Alg. 5 (UNMARK, U1-U13), with the fixes of the two races of the release path
 * (src/buddy_impl.h), and asserts the invariants of a live chunk. buddy.c scans (Alg. 2)
 * and calls these.
 */
#include "buddy_impl.h"

#include "invariant.h"
#include "park.h"

/* The slots of a bunch word, and SLOT_REP with bit 5i set for each slot i, so that
 * (v * SLOT_REP) repeats a 5-bit value in every slot. */
#define BUNCH_SLOTS (1u << (BUDDY_BUNCH_HEIGHT - 1))
#define SLOT_REP    ((uint64_t)0x8421)
#define BUSY_REP    ((uint64_t)BUSY * SLOT_REP)
#define OCC_REP     ((uint64_t)OCC * SLOT_REP)
#define COAL_REP    ((uint64_t)COAL_BOTH * SLOT_REP)
/* Bits 20-63 of a bunch word: its version, incremented by every allocation that marks
 * one of its slots from below (T15); see UNMARK. */
#define WORD_VERSION1 ((uint64_t)1 << (BUNCH_SLOTS * SLOT_BITS))
_Static_assert(SLOT_REP == ((uint64_t)1 << (BUNCH_SLOTS * SLOT_BITS)) / SLOT_MASK,
               "SLOT_REP has one bit per slot");

/* The slot above bunch root `child` (at child_level > base_level): the parent of child,
 * a bottom node of the bunch level above (BUDDY_BUNCH_HEIGHT levels, fewer for the top
 * one), whose slots are always all at its level. */
static inline void packed_locate_parent(const struct buddy *b, uint64_t child, unsigned child_level,
                                        struct position *up)
{
    unsigned k = (child_level - b->base_level + b->bunch_gap) / BUDDY_BUNCH_HEIGHT;
    unsigned root_level = buddy_bunch_root_level(b, k - 1);
    unsigned height = child_level - root_level;
    uint64_t root = child >> height;
    up->word = &b->words[b->bunch_offset[k - 1] + (root - ((uint64_t)1 << root_level))];
    up->shift = (unsigned)((child >> 1) & ((1u << (height - 1)) - 1)) * SLOT_BITS;
    up->count = 1;
    up->mask = (uint64_t)SLOT_MASK << up->shift;
    up->root_level = root_level;
    up->root = root;
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
void buddy_packed_freenode(struct buddy *b, uint64_t n, unsigned level)
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
uint64_t buddy_packed_tryalloc(struct buddy *b, uint64_t n, unsigned level)
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
                buddy_packed_freenode(b, n, level); /* T11 without upper bound */
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

/* The invariants of live chunk n (src/buddy_impl.h; buddy.c asserts them): every slot
 * under n is BUSY, and every ancestor up to base_level is occupied on n's side. */
void buddy_packed_check_live(const struct buddy *b, uint64_t n, unsigned level)
{
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
