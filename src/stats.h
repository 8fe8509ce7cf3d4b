/*
 * stats: llheap's contention-free statistics ("Statistics and Debugging"), compiled in by
 * -DLFHEAP_STATS (the -stats libraries); the debug build (-DLFHEAP_DEBUG) uses the same
 * counters for the bytes it must report unfreed at exit.
 *
 * Every thread counts into a block of its own, so counting needs no atomic
 * read-modify-write: the owner updates a counter with a relaxed load and a relaxed store
 * (plain moves on x86-64), and readers sum every block with relaxed loads. A block is
 * taken on the thread's first count and handed back when the thread exits; the next
 * thread takes it over *with its counts*: blocks are never freed and never reset, every
 * counter only grows, and the totals are the sums over all blocks ever made, so they are
 * exact while threads run and after they exit, with nothing to fold at exit. Blocks are
 * found by readers through a registry, a list that only grows by CAS pushes.
 *
 * The few counts made where a thread has no block (a signal handler's while the thread
 * takes one, none could be mapped, or its block went back at exit) go to one shared
 * block with atomic adds.
 *
 * The counters are a leaf under every layer: their memory comes from the platform
 * layer's uncounted mapping, so no count calls back into a layer that counts. The
 * reports over them are stats_report.c's, at the top beside the API.
 *
 * The release build compiles none of the counting: STATS_ADD expands to nothing, and the
 * api layer leaves its instrumented paths out (api.c, API_INSTRUMENTED).
 */
#ifndef LFHEAP_STATS_H
#define LFHEAP_STATS_H

#include "common.h"
#include "lfheap.h"

#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Per routine (enum lfh_stats_routine), five counters from STATS_ROUTINE(r). */
enum {
    STATS_CALLS,
    STATS_ZERO_CALLS,
    STATS_FAILURES,
    STATS_REQUEST_BYTES,
    STATS_ALLOC_BYTES,
    STATS_PER_ROUTINE
};
#define STATS_ROUTINE(r, field) ((unsigned)(r)*STATS_PER_ROUTINE + (field))

/* Every counter is monotonic; what is live is the difference of two of them. */
enum stats_counter {
    STATS_FREE_CALLS = LFH_STATS_ROUTINES * STATS_PER_ROUTINE,
    STATS_FREE_NULL,
    STATS_FREE_INVALID,
    STATS_FREE_REQUEST_BYTES,
    STATS_FREE_ALLOC_BYTES,
    STATS_REMOTE_FREES,
    STATS_REMOTE_BYTES,
    STATS_MMAP_CALLS,
    STATS_MMAP_BYTES,
    STATS_MUNMAP_CALLS,
    STATS_MUNMAP_BYTES,
    STATS_MADVISE_CALLS,
    STATS_MADVISE_BYTES,
    STATS_MREMAP_CALLS,
    STATS_MREMAP_BYTES,
    STATS_CACHES_NEW,
    STATS_CACHES_ADOPTED,
    STATS_CACHES_ORPHANED,
    STATS_CACHES_FLUSHED,
    STATS_SUPERBLOCKS_CREATED,
    STATS_SUPERBLOCKS_RELEASED,
    STATS_LARGE_ALLOCATED,
    STATS_LARGE_FREED,
    STATS_LARGE_BYTES_IN,  /* bytes of arena chunks given to large blocks... */
    STATS_LARGE_BYTES_OUT, /* ...and taken back */
    STATS_HUGE_ALLOCATED,
    STATS_HUGE_FREED,
    STATS_HUGE_BYTES_IN,
    STATS_HUGE_BYTES_OUT,
    STATS_RESIZED_OUT, /* bytes of the blocks resizing routines took (moved or not) */
    STATS_REQUEST_IN,  /* debug builds: bytes the program asked for... */
    STATS_REQUEST_OUT, /* ...and gave back */
    STATS_COUNTERS
};

#if STATS_COUNTING

/* A thread's counters; a multiple of the cache line, so that threads never share one. */
struct stats_block {
    alignas(LFH_CACHE_LINE) _Atomic uint64_t count[STATS_COUNTERS];
    /* count[] as malloc_stats_clear last read it: reports show count - cleared, except
     * the live figures, which are differences of whole counts. Written by any thread. */
    _Atomic uint64_t cleared[STATS_COUNTERS];
    _Atomic int in_use; /* a thread counts into this block */
};

extern __thread struct stats_block *stats_self __attribute__((visibility("hidden")));

/* Counts where the calling thread has no block yet (or any more). */
void stats_add_slow(unsigned counter, uint64_t n) LFH_NOINLINE;

/* Adds n to a counter of `b`, the calling thread's block (stats_self, read once by the
 * caller for several counts), or of nobody's if b is NULL. */
LFH_INLINE void stats_add_to(struct stats_block *b, unsigned counter, uint64_t n)
{
    if (LFH_UNLIKELY(b == NULL)) {
        stats_add_slow(counter, n);
        return;
    }
    /* Only this thread writes this block: a relaxed load and store (no read-modify-write)
     * cannot lose an update, and readers' relaxed loads see whole values. */
    uint64_t now = atomic_load_explicit(&b->count[counter], memory_order_relaxed);
    atomic_store_explicit(&b->count[counter], now + n, memory_order_relaxed);
}

LFH_INLINE struct stats_block *stats_mine(void)
{
    return stats_self;
}

/* The calling thread's block, taken now if it has none; NULL when out of memory. */
struct stats_block *stats_attach(void);

/* True if the statistics' exit key is late (platform_thread_key_late): a thread then
 * takes its block only from stats_exit_reverify, which the thread cache calls at the end
 * of its slow paths (tcache_exit_verify), never from a count, which may be made inside
 * glibc's allocation of the key table its registration would need. */
bool stats_exit_late(void);

/* With a late key: takes this thread's block if it has none, or registers it for the
 * thread's exit again if an outer pthread_setspecific replaced its registration. */
void stats_exit_reverify(void);

/* Adds one block's counters to `total`: whole, or since malloc_stats_clear. */
void stats_block_sum(uint64_t total[STATS_COUNTERS], struct stats_block *b, bool since_clear);

/* Sums every block's counters (and the shared block's) into `total`, as above. */
void stats_sum_all(uint64_t total[STATS_COUNTERS], bool since_clear);

/* llheap's malloc_stats_clear: every block's counts so far become its new zero. Counts
 * made meanwhile land on either side; two clears at once leave each counter as one of
 * them read it. */
void stats_clear(void);
#else
struct stats_block;
LFH_INLINE void stats_add_to(struct stats_block *b, unsigned counter, uint64_t n)
{
    (void)b, (void)counter, (void)n;
}
LFH_INLINE struct stats_block *stats_mine(void)
{
    return NULL;
}
LFH_INLINE bool stats_exit_late(void)
{
    return false;
}
LFH_INLINE void stats_exit_reverify(void) {}
#endif

LFH_INLINE void stats_add(unsigned counter, uint64_t n)
{
    stats_add_to(stats_mine(), counter, n);
}

/* Counts in the -stats builds only; elsewhere nothing is evaluated. */
#define STATS_ADD(counter, n)                                                                      \
    do {                                                                                           \
        if (STATS_ENABLED)                                                                         \
            stats_add((counter), (n));                                                             \
    } while (0)

/* An allocating routine returned a block of `usable` bytes for `request` (usable 0:
 * it failed). The bytes of the blocks handed out are the sum of every routine's
 * alloc_bytes. */
LFH_INLINE void stats_count_alloc(unsigned routine, size_t request, size_t usable)
{
    if (!STATS_ENABLED)
        return;
    struct stats_block *b = stats_mine();
    stats_add_to(b, STATS_ROUTINE(routine, STATS_CALLS), 1);
    if (request == 0)
        stats_add_to(b, STATS_ROUTINE(routine, STATS_ZERO_CALLS), 1);
    if (usable == 0) {
        stats_add_to(b, STATS_ROUTINE(routine, STATS_FAILURES), 1);
        return;
    }
    stats_add_to(b, STATS_ROUTINE(routine, STATS_REQUEST_BYTES), request);
    stats_add_to(b, STATS_ROUTINE(routine, STATS_ALLOC_BYTES), usable);
}

/* A resizing routine took a block of `old_usable` bytes and returned one of
 * `new_usable` for `request` (new_usable 0 with request > 0: it failed, and the old block
 * is still there; request 0: the old block was freed). */
LFH_INLINE void stats_count_resize(unsigned routine, size_t request, size_t old_usable,
                                   size_t new_usable)
{
    if (!STATS_ENABLED)
        return;
    if (request > 0 && new_usable == 0) {
        stats_count_alloc(routine, request, 0);
        return;
    }
    stats_add(STATS_RESIZED_OUT, old_usable);
    if (request == 0) {
        stats_add(STATS_ROUTINE(routine, STATS_CALLS), 1);
        stats_add(STATS_ROUTINE(routine, STATS_ZERO_CALLS), 1);
        return;
    }
    stats_count_alloc(routine, request, new_usable);
}

/* free of a live block of `usable` bytes asked for as `request` (known in the debug
 * build only). */
LFH_INLINE void stats_count_free(size_t usable, size_t request)
{
    if (!STATS_ENABLED)
        return;
    struct stats_block *b = stats_mine();
    stats_add_to(b, STATS_FREE_CALLS, 1);
    stats_add_to(b, STATS_FREE_ALLOC_BYTES, usable);
#if DEBUG_ENABLED
    stats_add_to(b, STATS_FREE_REQUEST_BYTES, request);
#else
    (void)request;
#endif
}

/* Sums every thread's counters (and the shared block's) into `total`: the whole counts,
 * malloc_stats_clear notwithstanding. */
void stats_sum(uint64_t total[STATS_COUNTERS]);

#endif
