/*
 * park: named points inside lfheap's slow paths where a test can stop a thread (issue 6:
 * a thread suspended anywhere inside lfheap never blocks the others). Each point lies
 * between two atomic steps of a lock-free operation, at a moment where a lock-based
 * allocator would be holding a lock: a descriptor popped but its blocks not yet taken,
 * an anchor read but not yet swapped, a cache's list cut but not yet given back, a buddy
 * node taken but its ancestors not yet marked, and so on. docs/ARCHITECTURE.md lists the
 * points and what stopping a thread at each one proves; tests/test_parking.c stops a
 * thread at each in turn while other threads go on allocating.
 *
 * Only the test variant built with -DLFHEAP_PARKING (build/liblfheap-parking.a) has the
 * points. In every other build LFH_PARK(point) expands to nothing and this header
 * declares nothing, so the release library has no trace of them (tests/suites/park.sh
 * checks its symbols).
 */
#ifndef LFHEAP_PARK_H
#define LFHEAP_PARK_H

#include "config.h"

#if PARK_ENABLED

#include <stdatomic.h>

/* Every point: its name in the code, and the name tests print. */
#define PARK_POINTS(X)                                                                             \
    X(HEAP_STACK_POP, "heap.stack_pop")                                                            \
    X(HEAP_FILL_POPPED, "heap.fill_popped")                                                        \
    X(HEAP_TAKE_CAS, "heap.take_cas")                                                              \
    X(HEAP_GIVE_BACK_CAS, "heap.give_back_cas")                                                    \
    X(HEAP_EMPTY_UNRELEASED, "heap.empty_unreleased")                                              \
    X(HEAP_DESC_FRESH, "heap.desc_fresh")                                                          \
    X(HEAP_DESC_CHUNK, "heap.desc_chunk")                                                          \
    X(HEAP_LARGE_CLAIM, "heap.large_claim")                                                        \
    X(TCACHE_FLUSH_CUT, "tcache.flush_cut")                                                        \
    X(TCACHE_FLUSH_CLASS, "tcache.flush_class")                                                    \
    X(TCACHE_REMOTE_CUT, "tcache.remote_cut")                                                      \
    X(TCACHE_EXIT_COPIED, "tcache.exit_copied")                                                    \
    X(TCACHE_ADOPT_TAKEN, "tcache.adopt_taken")                                                    \
    X(TCACHE_STORE_CLAIMED, "tcache.store_claimed")                                                \
    X(ARENA_DIRTY_POP, "arena.dirty_pop")                                                          \
    X(ARENA_PURGE_TAKEN, "arena.purge_taken")                                                      \
    X(ARENA_LEAF_MAPPED, "arena.leaf_mapped")                                                      \
    X(ARENA_REGISTERED, "arena.registered")                                                        \
    X(ARENA_LISTED, "arena.listed")                                                                \
    X(ARENA_TICK_WON, "arena.tick_won")                                                            \
    X(ARENA_PURGER_CLAIMED, "arena.purger_claimed")                                                \
    X(ARENA_RUN_CARVE, "arena.run_carve")                                                          \
    X(ARENA_RUN_EXTEND, "arena.run_extend")                                                        \
    X(ARENA_TRIM_TAKEN, "arena.trim_taken")                                                        \
    X(ARENA_SWEEP_TAKEN, "arena.sweep_taken")                                                      \
    X(ARENA_TAIL_READ, "arena.tail_read")                                                          \
    X(ARENA_TAIL_CLAIMED, "arena.tail_claimed")                                                    \
    X(MAPCACHE_CLAIMED, "mapcache.claimed")                                                        \
    X(BUDDY_ALLOC_CLIMB, "buddy.alloc_climb")                                                      \
    X(BUDDY_FREE_CLIMB, "buddy.free_climb")                                                        \
    X(BUDDY_FREE_MARKED, "buddy.free_marked")                                                      \
    X(BUDDY_UNMARK, "buddy.unmark")                                                                \
    X(PAGEMAP_LEAF_MAPPED, "pagemap.leaf_mapped")

#define PARK_ENUM(point, name) PARK_##point,
enum park_point { PARK_POINTS(PARK_ENUM) PARK_POINT_COUNT };
#undef PARK_ENUM

extern const char *const park_point_names[PARK_POINT_COUNT];

/* Called by every thread that reaches a point; NULL (the default) does nothing. The
 * test's hook may block (the library never does): that is how a thread is parked. */
typedef void (*park_hook_fn)(enum park_point point);
extern _Atomic(park_hook_fn) park_hook;

static inline void park_reach(enum park_point point)
{
    /* Acquire pairs with the test's release store of the hook, so the hook sees the
     * state the test prepared before installing it. */
    park_hook_fn hook = atomic_load_explicit(&park_hook, memory_order_acquire);
    if (hook)
        hook(point);
}

#define LFH_PARK(point) park_reach(PARK_##point)

#else

#define LFH_PARK(point) ((void)0)

#endif

#endif
