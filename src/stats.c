/*
 * stats: the counters' registry, see stats.h. A leaf: every layer may count, and the
 * registry maps its slabs through the platform layer's uncounted call, so counting never
 * calls back into a layer that counts. The reports are stats_report.c's.
 *
 * Registry: blocks come from slabs that are never unmapped. A
 * new slab is linked into one chain and pushed onto the registry with one CAS, so a
 * reader walking the list (acquire load of the head, links that never change once
 * published) sees whole blocks only. A thread takes a block by CAS on its in_use flag
 * (0 -> 1) and gives it back at exit with a release store of 0; the taker's acquire CAS
 * orders the previous owner's counts before its own load-and-store updates, so none is
 * lost. Nobody waits: a failed CAS means another thread took that block, and the taker
 * moves on to the next one or maps a slab of its own.
 */
#include "stats.h"

#include "platform.h"

#include <stdbool.h>
#include <string.h>

/* ---- the counters' registry ------------------------------------------------------- */

#if STATS_COUNTING
__thread struct stats_block *stats_self;
/* Set while this thread takes a block: a signal handler that counts meanwhile counts into
 * the shared block rather than take a second block the interrupted take would orphan.
 * (Taking a block counts nothing itself: its slab is mapped uncounted.) */
static __thread bool stats_taking;
/* Set once this thread's block went back at thread exit. */
static __thread bool stats_detached;

/* Counts made where no block of one's own exists, by atomic adds. */
static struct stats_block stats_shared;
static _Atomic(struct stats_block *) stats_registry;
static _Atomic unsigned stats_exit_key; /* pthread key + 1; 0 while none exists */

/* Blocks per slab: a slab is a few pages, mapped when every block is taken. */
#define STATS_SLAB_BLOCKS 16

static void stats_thread_exit(void *block)
{
    stats_self = NULL;
    stats_detached = true;
    /* Release: this thread's counts happen before the next taker's acquire CAS. */
    atomic_store_explicit(&((struct stats_block *)block)->in_use, 0, memory_order_release);
}

static struct stats_block *stats_take(void)
{
    /* Acquire pairs with the pushing CAS: the blocks reached are initialised. */
    for (struct stats_block *b = atomic_load_explicit(&stats_registry, memory_order_acquire); b;
         b = b->next_all) {
        int expected = 0;
        if (atomic_load_explicit(&b->in_use, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&b->in_use, &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed))
            return b;
    }
    size_t bytes = (sizeof(struct stats_block) * STATS_SLAB_BLOCKS + PLATFORM_PAGE_SIZE - 1) &
                   ~(PLATFORM_PAGE_SIZE - 1);
    struct stats_block *slab = platform_map(NULL, bytes);
    if (!slab)
        return NULL;
    /* Zeroed by the kernel; only the links and our claim need writing before the push. */
    for (unsigned i = 0; i + 1 < STATS_SLAB_BLOCKS; i++)
        slab[i].next_all = &slab[i + 1];
    atomic_store_explicit(&slab[0].in_use, 1, memory_order_relaxed);
    struct stats_block *last = &slab[STATS_SLAB_BLOCKS - 1];
    struct stats_block *head = atomic_load_explicit(&stats_registry, memory_order_relaxed);
    do {
        last->next_all = head;
        /* Release publishes the slab; a failure means another push succeeded. */
    } while (!atomic_compare_exchange_weak_explicit(&stats_registry, &head, slab,
                                                    memory_order_release, memory_order_relaxed));
    return &slab[0];
}

void stats_add_slow(unsigned counter, uint64_t n)
{
    if (!stats_taking && !stats_detached) {
        stats_taking = true;
        struct stats_block *b = stats_take();
        if (b) {
            stats_self = b;
            /* May allocate: stats_self is set, so that counts. Without a key the block
             * stays with the thread when it exits: its counts still count. */
            platform_at_thread_exit(&stats_exit_key, stats_thread_exit, b);
        }
        stats_taking = false;
        if (b) {
            stats_add(counter, n);
            return;
        }
    }
    /* Relaxed: a sum, ordered for readers like every other counter. */
    atomic_fetch_add_explicit(&stats_shared.count[counter], n, memory_order_relaxed);
}

/* Adds one block's counters to `total`: whole, or since malloc_stats_clear. */
void stats_block_sum(uint64_t total[STATS_COUNTERS], struct stats_block *b, bool since_clear)
{
    for (unsigned i = 0; i < STATS_COUNTERS; i++) {
        /* Acquire pairs with stats_clear's release store: the count it read happened
         * before, so the count read next is at least that (counts only grow). */
        uint64_t base =
            since_clear ? atomic_load_explicit(&b->cleared[i], memory_order_acquire) : 0;
        total[i] += atomic_load_explicit(&b->count[i], memory_order_relaxed) - base;
    }
}

void stats_sum_all(uint64_t total[STATS_COUNTERS], bool since_clear)
{
    memset(total, 0, STATS_COUNTERS * sizeof total[0]);
    stats_block_sum(total, &stats_shared, since_clear);
    for (struct stats_block *b = atomic_load_explicit(&stats_registry, memory_order_acquire); b;
         b = b->next_all)
        stats_block_sum(total, b, since_clear);
}

void stats_sum(uint64_t total[STATS_COUNTERS])
{
    stats_sum_all(total, false);
}

struct stats_block *stats_attach(void)
{
    if (!stats_self)
        stats_add_slow(STATS_MMAP_CALLS, 0); /* takes the block a first count would */
    return stats_self;
}

static void block_clear(struct stats_block *b)
{
    /* Relaxed load: only its value matters. Release store: a reader that loads this value
     * with acquire (block_add) then reads a count at least as large. */
    for (unsigned i = 0; i < STATS_COUNTERS; i++)
        atomic_store_explicit(&b->cleared[i],
                              atomic_load_explicit(&b->count[i], memory_order_relaxed),
                              memory_order_release);
}

void stats_clear(void)
{
    block_clear(&stats_shared);
    for (struct stats_block *b = atomic_load_explicit(&stats_registry, memory_order_acquire); b;
         b = b->next_all)
        block_clear(b);
}
#endif
