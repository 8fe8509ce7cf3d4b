/*
 * stats: the counters' registry, see stats.h. A leaf: every layer may count, and the
 * registry maps its slabs through the platform layer's uncounted call, so counting never
 * calls back into a layer that counts. The reports are stats_report.c's.
 *
 * Registry: blocks come from slabs that are never unmapped once published. A new slab
 * is pushed onto the registry's list with one CAS, so a reader walking the list (acquire
 * load of the head, links that never change once published) sees whole slabs only. A thread takes a
 * block by CAS on its in_use flag (0 -> 1) and gives it back at exit with a release store of 0; the
 * taker's acquire CAS orders the previous owner's counts before its own load-and-store updates, so
 * none is lost. Nobody waits: a failed CAS means another thread took that block, and the taker
 * moves on to the next one or maps a slab of its own.
 */
#include "stats.h"

#include "platform.h"

#include <errno.h>
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

/* Blocks are mapped in slabs, never unmapped once published. A slab's blocks beyond the
 * first are untouched until a thread claims one, so a slab mapped by a thread that lost
 * a race costs one resident page. */
#define STATS_SLAB_BLOCKS 16
struct stats_slab {
    struct stats_slab *next; /* set before the slab is published, never changed */
    struct stats_block blocks[STATS_SLAB_BLOCKS];
};
static _Atomic(struct stats_slab *) stats_registry;
static _Atomic unsigned stats_exit_key; /* pthread key + 1; 0 while none exists */

#define FOR_EACH_BLOCK(b)                                                                          \
    for (struct stats_slab *slab_ = atomic_load_explicit(&stats_registry, memory_order_acquire);   \
         slab_; slab_ = slab_->next)                                                               \
        for (struct stats_block *b = slab_->blocks; b < slab_->blocks + STATS_SLAB_BLOCKS; b++)

static void stats_thread_exit(void *block)
{
    stats_self = NULL;
    stats_detached = true;
    /* Release: this thread's counts happen before the next taker's acquire CAS. */
    atomic_store_explicit(&((struct stats_block *)block)->in_use, 0, memory_order_release);
}

/* Made when the library is loaded, as the thread cache's key and for the same reason
 * (tcache.c, tcache_exit_key_early). */
__attribute__((constructor)) static void stats_exit_key_early(void)
{
    platform_thread_key(&stats_exit_key, stats_thread_exit);
}

/* Claims a free block of the registry, or returns NULL when every block is taken. The
 * acquire load of the registry (in FOR_EACH_BLOCK) pairs with the pushing CAS: the slabs
 * reached are whole. */
static struct stats_block *stats_claim(void)
{
    FOR_EACH_BLOCK(b)
    {
        int expected = 0;
        if (atomic_load_explicit(&b->in_use, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&b->in_use, &expected, 1, memory_order_acquire,
                                                    memory_order_relaxed))
            return b;
    }
    return NULL;
}

static struct stats_block *stats_take(void)
{
    struct stats_block *claimed = stats_claim();
    if (claimed)
        return claimed;
    size_t bytes = (sizeof(struct stats_slab) + PLATFORM_PAGE_SIZE - 1) & ~(PLATFORM_PAGE_SIZE - 1);
    /* A refused mapping's errno is not the allocation's, which is served all the same
     * (its counts go to the shared block): an outside tester saw every malloc of a thread
     * under `ulimit -v` succeed and set errno to ENOMEM in the statistics builds. */
    int saved_errno = errno;
    struct stats_slab *slab = platform_map(NULL, bytes);
    if (!slab) {
        errno = saved_errno;
        return NULL;
    }
    /* Threads that start together all find the registry full and map a slab each (400
     * threads leaving a barrier mapped 260-370 slabs for 400 blocks). One that finds a
     * block a racer published meanwhile takes it and gives its slab back. */
    claimed = stats_claim();
    if (claimed) {
        platform_unmap(slab, bytes);
        return claimed;
    }
    /* Zeroed by the kernel; only the link and our claim need writing before the push. */
    atomic_store_explicit(&slab->blocks[0].in_use, 1, memory_order_relaxed);
    struct stats_slab *head = atomic_load_explicit(&stats_registry, memory_order_relaxed);
    do {
        slab->next = head;
        /* Release publishes the slab; a failure means another push succeeded. */
    } while (!atomic_compare_exchange_weak_explicit(&stats_registry, &head, slab,
                                                    memory_order_release, memory_order_relaxed));
    return &slab->blocks[0];
}

/* Takes a block for this thread and registers it for the thread's exit; false if none
 * could be taken, or (`late`) its registration was refused: then the block goes back,
 * with whatever was counted into it meanwhile. */
static bool stats_take_mine(bool late)
{
    if (stats_taking || stats_detached)
        return false;
    stats_taking = true;
    struct stats_block *b = stats_take();
    if (b) {
        stats_self = b;
        /* May allocate: stats_self is set, so that counts. Without a key the block stays
         * with the thread when it exits: its counts still count. A late key's registration
         * is refused when nested in the cache's (platform_at_thread_exit). */
        if (!platform_at_thread_exit(&stats_exit_key, stats_thread_exit, b) && late) {
            stats_self = NULL;
            /* Release: as at thread exit (stats_thread_exit). */
            atomic_store_explicit(&b->in_use, 0, memory_order_release);
            b = NULL;
        }
    }
    stats_taking = false;
    return b != NULL;
}

bool stats_exit_late(void)
{
    return API_STANDARD_NAMES && platform_thread_key_late(&stats_exit_key, stats_thread_exit);
}

void stats_add_slow(unsigned counter, uint64_t n)
{
    /* A caller that read stats_self once for several counts (stats_count_alloc) comes
     * back here for each of them after the first took the block: they go to that block,
     * where they took a block each (the earlier ones never went back). */
    struct stats_block *mine = stats_self;
    if (mine) {
        stats_add_to(mine, counter, n);
        return;
    }
    /* A late key's registration allocates the thread's key table for its range, and this
     * count may be made inside glibc's allocation of that very table for a key of the
     * program's: the outer call would install its table over ours, and the block would
     * never go back. So with a late key a block is taken only where the thread cache
     * checks its own registration, at the end of a slow path (stats_exit_reverify), and
     * the counts before go to the shared block. */
    if (!stats_exit_late() && stats_take_mine(false)) {
        stats_add(counter, n);
        return;
    }
    /* Relaxed: a sum, ordered for readers like every other counter. */
    atomic_fetch_add_explicit(&stats_shared.count[counter], n, memory_order_relaxed);
}

void stats_exit_reverify(void)
{
    struct stats_block *mine = stats_self;
    if (!mine)
        stats_take_mine(true);
    else
        platform_thread_exit_rearm(&stats_exit_key, stats_thread_exit, mine);
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
    FOR_EACH_BLOCK(b)
    stats_block_sum(total, b, since_clear);
}

void stats_sum(uint64_t total[STATS_COUNTERS])
{
    stats_sum_all(total, false);
}

struct stats_block *stats_attach(void)
{
    /* Called by the program, so never from inside glibc's allocation of a key table. */
    if (!stats_self)
        stats_take_mine(stats_exit_late());
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
    FOR_EACH_BLOCK(b)
    block_clear(b);
}
#endif
