/*
 * tcache: the slow paths of the thread caches — carving, filling from the heap, flushing
 * back to it, remote-free batching, and handing the whole cache back at thread exit.
 * Nothing here takes a lock: the cache is thread-local, and the heap is lock-free.
 */
#include "tcache.h"

#include "pagemap.h"
#include "stats.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

/* Starts as TCACHE_ID_UNSET in every new thread (a TLS initialiser), so an uninitialised
 * cache matches no owner, not even HEAP_OWNER_NONE. */
__thread struct tcache tcache_self = {.id = TCACHE_ID_UNSET};


/* A thread buffers this many frees of blocks it does not own before it returns them; the
 * batch is large enough that returning costs about one CAS per superblock run. */
#define TCACHE_REMOTE_BATCH 64

/* Bytes a bin may cache at first and at most; the block limits follow from the class. */
#define TCACHE_BYTES_INITIAL 32768
#define TCACHE_BYTES_MAX     131072

enum { TCACHE_EVENT_NONE, TCACHE_EVENT_FILL, TCACHE_EVENT_FLUSH };

static _Atomic uint64_t tcache_last_id;

/* Caches of exited threads, waiting for a new thread to adopt them whole (Streamflow's
 * adoption of orphaned page blocks; LRMalloc's future work of recycling thread caches):
 * the new thread takes over the lists, the bump ranges and the id, so it also owns the
 * superblocks the old thread owned, and thread churn costs neither a flush nor a fill.
 * A slot is filled by one CAS and emptied by one exchange: no ABA, no waiting. */
#define TCACHE_ORPHAN_SLOTS 64
static _Atomic(struct tcache *) tcache_orphans[TCACHE_ORPHAN_SLOTS];
static _Atomic unsigned tcache_exit_key; /* pthread key + 1; 0 while none exists */

static uint32_t clamp_blocks(size_t bytes, unsigned cls, uint32_t lo, uint32_t hi)
{
    size_t blocks = bytes / sizeclass_block_size[heap_size_class(cls)];
    return blocks < lo ? lo : blocks > hi ? hi : (uint32_t)blocks;
}

static void tcache_thread_exit(void *unused);

static void tcache_register_exit(struct tcache *tc)
{
    /* Relaxed load, acq_rel CAS: only the key's value is shared, and pthread orders its
     * own key table. Losers of the race delete their own key: nobody waits. */
    unsigned key_plus_one = atomic_load_explicit(&tcache_exit_key, memory_order_acquire);
    if (key_plus_one == 0) {
        pthread_key_t key;
        if (pthread_key_create(&key, tcache_thread_exit) != 0)
            return; /* the cache then stays with the thread when it exits: bounded */
        unsigned expected = 0;
        if (atomic_compare_exchange_strong_explicit(&tcache_exit_key, &expected,
                                                    (unsigned)key + 1, memory_order_acq_rel,
                                                    memory_order_acquire)) {
            key_plus_one = (unsigned)key + 1;
        } else {
            pthread_key_delete(key);
            key_plus_one = expected;
        }
    }
    pthread_setspecific((pthread_key_t)(key_plus_one - 1), tc);
}

/* Frees a block from inside the cache layer, as lfh_free would. */
static void release_block(void *block)
{
    struct descriptor *desc = pagemap_lookup(block);
    if (!tcache_free(block, desc))
        tcache_free_slow(block, desc);
}

static struct tcache *orphan_take(void)
{
    for (unsigned i = 0; i < TCACHE_ORPHAN_SLOTS; i++) {
        /* Relaxed peek first, so that an empty table costs loads, not writes. */
        if (!atomic_load_explicit(&tcache_orphans[i], memory_order_relaxed))
            continue;
        /* Acquire pairs with the publishing CAS: the copy's contents are complete. */
        struct tcache *orphan = atomic_exchange_explicit(&tcache_orphans[i], NULL,
                                                         memory_order_acquire);
        if (orphan)
            return orphan;
    }
    return NULL;
}

static void tcache_setup(struct tcache *tc)
{
    struct tcache *orphan = orphan_take();
    if (orphan) {
        *tc = *orphan;
        tcache_register_exit(tc);
        release_block(orphan); /* the copy lived in a block the orphan owned: now ours */
        STATS_ADD(STATS_CACHES_ADOPTED, 1);
        return;
    }
    /* Relaxed: ids only need to be distinct. */
    tc->id = atomic_fetch_add_explicit(&tcache_last_id, 1, memory_order_relaxed) + 1;
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        tc->cold[cls].limit = clamp_blocks(TCACHE_BYTES_INITIAL, cls, 2, 2048);
        tc->bins[cls].credit = (int32_t)tc->cold[cls].limit;
        tc->bins[cls].block_size = sizeclass_block_size[heap_size_class(cls)];
    }
    tcache_register_exit(tc);
    STATS_ADD(STATS_CACHES_NEW, 1);
}

/* Returns a list of blocks to their superblocks, one CAS per run of blocks that share a
 * superblock (LRMalloc CacheFlush). */
static void give_back_list(void *list)
{
    while (list) {
        struct descriptor *d = pagemap_lookup(list);
        void *first = list, *last = list;
        uint32_t count = 1;
        list = *(void **)list;
        while (list && (size_t)((char *)list - d->start) < d->size) {
            last = list;
            list = *(void **)list;
            count++;
        }
        heap_give_back(d, first, last, count, NULL);
    }
}

static void flush_remote(struct tcache *tc)
{
    void *list = tc->remote_head;
    tc->remote_head = NULL;
    tc->remote_count = 0;
    give_back_list(list);
}

/* A thread whose cache was handed back at exit (a later destructor still allocating)
 * takes one block straight from the heap and returns the rest. */
static void *alloc_uncached(unsigned cls)
{
    struct heap_fill fill;
    if (!heap_fill(cls, HEAP_OWNER_NONE, &fill)) {
        errno = ENOMEM;
        return NULL;
    }
    void *block;
    void *rest = NULL, *rest_last = NULL;
    uint32_t rest_count = 0;
    if (fill.chain) {
        block = fill.chain;
        rest = *(void **)block;
        for (void *b = rest; b; b = *(void **)b) {
            rest_last = b;
            rest_count++;
        }
    } else {
        block = fill.bump;
        fill.bump += fill.desc->block_size;
    }
    heap_give_back(fill.desc, rest, rest_last, rest_count, fill.bump);
    return block;
}

void *tcache_alloc_slow(unsigned cls)
{
    struct tcache *tc = &tcache_self;
    if (LFH_UNLIKELY(tc->id == TCACHE_ID_UNSET)) {
        tcache_setup(tc);
        void *adopted = tcache_bin_take(tcache_base() + cls * SIZECLASS_STRIDE); /* an exited thread's cache */
        if (adopted)
            return adopted;
    }
    if (LFH_UNLIKELY(tc->id == TCACHE_ID_EXITED))
        return alloc_uncached(cls);
    struct tcache_bin *bin = &tc->bins[cls];
    struct tcache_cold *cold = &tc->cold[cls];
    struct heap_fill fill;
    if (!heap_fill(cls, tc->id, &fill)) {
        errno = ENOMEM;
        return NULL;
    }
    /* Emptied soon after overflowing: the working set is larger than the limit. */
    if (cold->last_event == TCACHE_EVENT_FLUSH) {
        uint32_t max = clamp_blocks(TCACHE_BYTES_MAX, cls, 4, 4096);
        cold->limit = cold->limit * 2 > max ? max : cold->limit * 2;
    }
    cold->last_event = TCACHE_EVENT_FILL;
    bin->bump = fill.bump;
    bin->bump_end = fill.bump_end;
    cold->bump_desc = fill.desc;
    if (fill.chain) {
        /* A chain longer than the limit is cut back at the next free. */
        int32_t room = (int32_t)cold->limit - (int32_t)fill.chain_count + 1;
        bin->head = *(void **)fill.chain;
        bin->credit = room > 0 ? room : 1;
        return fill.chain;
    }
    bin->credit = (int32_t)cold->limit;
    void *block = bin->bump;
    bin->bump += bin->block_size;
    return block;
}

void *tcache_alloc_slow_size(size_t size)
{
    return tcache_alloc_slow(sizeclass_of(size));
}

void tcache_flush(void *block)
{
    struct tcache *tc = &tcache_self;
    unsigned cls = pagemap_lookup(block)->class_index;
    struct tcache_bin *bin = &tc->bins[cls];
    struct tcache_cold *cold = &tc->cold[cls];
    /* Keep the hot half (the list is LIFO), give back the rest. */
    uint32_t keep = cold->limit / 2;
    void *rest;
    if (keep == 0) {
        rest = bin->head;
        bin->head = NULL;
    } else {
        void *last = bin->head;
        for (uint32_t i = 1; i < keep && last; i++)
            last = *(void **)last;
        rest = last ? *(void **)last : NULL;
        if (last)
            *(void **)last = NULL;
    }
    bin->credit = (int32_t)(cold->limit - keep);
    cold->last_event = TCACHE_EVENT_FLUSH;
    give_back_list(rest);
}

void tcache_free_slow(void *block, struct descriptor *desc)
{
    struct tcache *tc = &tcache_self;
    if (LFH_UNLIKELY(tc->id == TCACHE_ID_UNSET))
        tcache_setup(tc);
    if (LFH_UNLIKELY(tc->id == TCACHE_ID_EXITED)) {
        heap_give_back(desc, block, block, 1, NULL);
        return;
    }
    *(void **)block = tc->remote_head;
    tc->remote_head = block;
    if (++tc->remote_count >= TCACHE_REMOTE_BATCH)
        flush_remote(tc);
}

static unsigned flush_cache(struct tcache *tc)
{
    unsigned cached = tc->remote_count;
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        struct tcache_bin *bin = &tc->bins[cls];
        struct tcache_cold *cold = &tc->cold[cls];
        void *list = bin->head;
        for (void *b = list; b; b = *(void **)b)
            cached++;
        bin->head = NULL;
        bin->credit = (int32_t)cold->limit;
        give_back_list(list);
        if (bin->bump != bin->bump_end)
            heap_give_back(cold->bump_desc, NULL, NULL, 0, bin->bump);
        bin->bump = bin->bump_end = NULL;
        cold->bump_desc = NULL;
    }
    flush_remote(tc);
    return cached;
}

unsigned tcache_flush_all(void)
{
    unsigned cached = flush_cache(&tcache_self);
    struct tcache *orphan;
    while ((orphan = orphan_take()) != NULL) {
        cached += flush_cache(orphan);
        release_block(orphan);
    }
    return cached;
}

/* Leaves the calling thread's cache in an orphan slot; false if no slot or no memory. */
static bool tcache_orphan(struct tcache *tc)
{
    struct tcache *copy = tcache_alloc(sizeclass_of(sizeof(struct tcache)));
    if (!copy)
        return false;
    *copy = *tc;
    for (unsigned i = 0; i < TCACHE_ORPHAN_SLOTS; i++) {
        struct tcache *expected = NULL;
        /* Release publishes the copy to the adopting thread's acquire exchange. */
        if (atomic_compare_exchange_strong_explicit(&tcache_orphans[i], &expected, copy,
                                                    memory_order_release,
                                                    memory_order_relaxed)) {
            for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
                tc->bins[cls].head = NULL;
                tc->bins[cls].bump = tc->bins[cls].bump_end = NULL;
            }
            tc->remote_head = NULL;
            tc->remote_count = 0;
            return true;
        }
    }
    release_block(copy);
    return false;
}

static void tcache_thread_exit(void *unused)
{
    (void)unused;
    if (tcache_orphan(&tcache_self)) {
        STATS_ADD(STATS_CACHES_ORPHANED, 1);
    } else {
        flush_cache(&tcache_self);
        STATS_ADD(STATS_CACHES_FLUSHED, 1);
    }
    tcache_self.id = TCACHE_ID_EXITED;
}
