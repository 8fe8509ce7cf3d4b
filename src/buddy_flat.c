/*
 * buddy_flat: the 1-level layout of the buddy tree (src/buddy.h; buddy_create without
 * BUDDY_PACKED): one 64-bit word per node, the five status bits and a version, on which
 * it implements NBBS Alg. 3 (TRYALLOC, lines T1-T16), Alg. 4 (FREENODE, F5-F22) and
 * Alg. 5 (UNMARK, U1-U13) line by line, with the fixes of the two races of the release
 * path (src/buddy_impl.h), and asserts the invariants of a live chunk. buddy.c scans
 * (Alg. 2) and calls these.
 */
#include "buddy_impl.h"

#include "invariant.h"

/* TRYALLOC (Alg. 3): 0 on success, else the node that made it fail. */
uint64_t buddy_flat_tryalloc(struct buddy *b, uint64_t n, unsigned level)
{
    /* T2 as a CAS loop that keeps the version. relaxed load: the CAS validates it. */
    uint64_t val = atomic_load_explicit(&b->tree[n], memory_order_relaxed);
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
        uint64_t new_val;
        do {
            if (val & OCC) { /* T10-T12: an ancestor is taken; undo our marks. */
                buddy_flat_freenode(b, n, level); /* T11 without upper bound: see FREENODE */
                return current;
            }
            /* T13-T14, and a new version: see UNMARK. */
            new_val = ((val & ~(uint64_t)side_coal(child)) | side_occ(child)) + NODE_VERSION1;
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
 * (see src/buddy_impl.h for why the child is read and the version kept). */
static void flat_unmark(struct buddy *b, uint64_t n, unsigned level)
{
    uint64_t current = n, child;
    uint64_t new_val;
    do {
        level--;         /* current's level after the step */
        child = current; /* U4-U5 */
        current >>= 1;
        BUDDY_CHAOS();
        /* U7. acquire: if T15 of an allocation below wrote this value (or a value after
         * it), that allocation's mark of the child is visible to the read of the child
         * below. The CAS validates the value. */
        uint64_t val = atomic_load_explicit(&b->tree[current], memory_order_acquire);
        for (;;) {
            if (!(val & side_coal(child))) /* U8-U9: an allocation took this side */
                return;
            BUDDY_CHAOS();
            /* U8 for the child: read after this node, so an allocation that has entered
             * the child either shows here or marks this node later, which changes its
             * version and fails the CAS. acquire: see U7. */
            if (atomic_load_explicit(&b->tree[child], memory_order_acquire) & NODE_STATUS)
                return;
            new_val = val & ~(uint64_t)(side_occ(child) | side_coal(child)); /* U10 */
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
 * (see src/buddy_impl.h). F9-F14 set our side's coalescing bit only where the side is
 * still occupied and the node is not allocated, and stop the climb otherwise: so a
 * coalescing bit always sits next to its side's occupancy bit (never in a free node or
 * an allocated one), and an undo never climbs past the taken node that failed it. */
void buddy_flat_freenode(struct buddy *b, uint64_t n, unsigned level)
{
    uint64_t current = n >> 1, child = n;              /* F6-F7 */
    for (unsigned l = level; l > b->base_level; l--) { /* F8: l is child's level */
        BUDDY_CHAOS();
        /* F11. relaxed: the CAS validates it; if we stop on it, we write nothing. */
        uint64_t val = atomic_load_explicit(&b->tree[current], memory_order_relaxed);
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
    uint64_t taken = atomic_load_explicit(&b->tree[n], memory_order_relaxed);
    /* A node released (by NBFREE or by an undone TRYALLOC) is one this thread took, and
     * it read the node atomically, with nobody else writing it (above). */
    LFH_INVARIANT("buddy released node was taken", (taken & NODE_STATUS) == BUSY);
    uint64_t version = taken & ~NODE_STATUS;
    atomic_store_explicit(&b->tree[n], version, memory_order_release);
    if (level != b->base_level) { /* F21-F22 */
        BUDDY_CHAOS();
        flat_unmark(b, n, level);
    }
}

/* The invariants of live chunk n (src/buddy_impl.h; buddy.c asserts them): n is BUSY,
 * and every ancestor up to base_level is occupied on n's side. */
void buddy_flat_check_live(const struct buddy *b, uint64_t n, unsigned level)
{
    uint64_t val = atomic_load_explicit(&b->tree[n], memory_order_relaxed);
    LFH_INVARIANT("buddy live chunk's node is taken", (val & NODE_STATUS) == BUSY);
    for (uint64_t child = n; level > b->base_level; level--, child >>= 1) {
        val = atomic_load_explicit(&b->tree[child >> 1], memory_order_relaxed);
        LFH_INVARIANT("buddy ancestor occupied on the chunk's side", val & side_occ(child));
    }
}
