/*
 * tcache_hide: hiding the calling thread's cache from a signal handler that interrupted
 * lfheap (tcache.h declares the interface, sigwrap.c calls it), and accounting for a
 * cache whose handler never returned when its thread exits. None of the cache's own
 * paths run it (only the signal wrapper and thread exit do): it saves, empties and
 * restores the bins, and at exit returns a whole cache to the heap or leaves a torn one
 * out of use.
 */
#include "tcache.h"

#include "arena.h"
#include "heap.h"
#include "pagemap.h"
#include "sizeclass.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Hidings in progress on this thread: more than one when signals nest, and it stays above
 * zero when a handler never returns (pthread_exit or siglongjmp out of it). */
static __thread unsigned hide_depth;
/* The outermost hiding's save, in the cache's store, where thread exit finds it; NULL
 * when the cache had no store, whose bins are empty, and then only its id was saved, in
 * hidden_outer_id. Not a save in thread-local storage: 1,448 bytes there cost every
 * thread a page (tcache_store.c). */
static __thread struct tcache_hidden *hidden_outer;
static __thread uint64_t hidden_outer_id;
/* tcache_busy when the outermost hiding began: zero means that the interrupted code was
 * outside every slow path, where the cache is whole between any two instructions (the
 * fast paths update only a bin's list, credit and bump pointer, each store leaving a
 * usable bin; an interrupted call at worst loses the one block it had in hand). */
static __thread unsigned hidden_busy;
/* True while hidden_outer holds a complete save. */
static __thread bool hidden_complete;

/* Thread exit has counted the hidden cache. A handler that kills the thread during that
 * exit makes glibc run it again (tcache_thread_exit), which must not count it twice. Set
 * before the counter it guards, so a kill between the two loses one count rather than
 * doubling one. */
static __thread bool hidden_exit_counted;

/* Relaxed counters: statistics, read by tcache_lost_get. */
static _Atomic uint64_t lost_reclaimed, lost_abandoned, lost_blocks, lost_bytes;

/* The fences below are signal fences: everything here races only with signal handlers on
 * the same thread, which see memory as of the instruction they interrupted. */
bool tcache_hide_outermost(void)
{
    return hide_depth == 0;
}

void tcache_hide(struct tcache_hidden *nested)
{
    struct tcache *tc = &tcache_self;
    unsigned depth = hide_depth;
    LFH_INVARIANT("only a nested hiding saves into a frame", (depth == 0) == (nested == NULL));
    if (!nested) {
        /* Before the depth goes up: an exit run from a nested handler (which never returns)
         * must find this hiding's save, not one an earlier hiding left, whose store the
         * cache may have given back since. A signal that lands here hides and unhides
         * the same cache and sets the same two. */
        hidden_outer = tc->cold ? tcache_store_hidden(tc->cold) : NULL;
        hidden_outer_id = tc->id;
        atomic_signal_fence(memory_order_seq_cst);
    }
    hide_depth = depth + 1;
    /* From here on, a signal that interrupts this hiding nests and saves in its own frame
     * whatever it finds; before, it completes a whole outermost hiding of its own. */
    atomic_signal_fence(memory_order_seq_cst);
    struct tcache_hidden *save = nested ? nested : hidden_outer;
    if (save) {
        save->id = tc->id;
        for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
            save->head[cls] = tc->bins[cls].head;
            save->bump_end[cls] = tc->bins[cls].bump_end;
        }
    }
    if (!nested) {
        hidden_busy = tcache_busy;
        atomic_signal_fence(memory_order_seq_cst);
        hidden_complete = true;
    }
    atomic_signal_fence(memory_order_seq_cst);
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        tc->bins[cls].head = NULL;
        tc->bins[cls].bump_end = tc->bins[cls].bump;
    }
    tc->id = TCACHE_ID_EXITED;
    atomic_signal_fence(memory_order_seq_cst);
}

/* Puts back the bins' lists and bump ends and the id that `save` holds; NULL: the
 * outermost hiding of a cache without a store, whose bins it found empty and left so. */
static void restore_bins(struct tcache *tc, const struct tcache_hidden *save)
{
    if (!save) {
        tc->id = hidden_outer_id;
        return;
    }
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        tc->bins[cls].head = save->head[cls];
        tc->bins[cls].bump_end = save->bump_end[cls];
    }
    tc->id = save->id;
}

void tcache_unhide(const struct tcache_hidden *nested)
{
    struct tcache *tc = &tcache_self;
    if (!nested) {
        hidden_complete = false;
        atomic_signal_fence(memory_order_seq_cst);
    }
    restore_bins(tc, nested ? nested : hidden_outer);
    atomic_signal_fence(memory_order_seq_cst);
    hide_depth--;
}

/* Blocks on a list of a cache that may be torn, and their bytes. Every link is checked
 * against the page map before it is followed: a block inside a live small superblock lies
 * in arena memory, which stays mapped, so even a stale link is safe to read. */
#define TCACHE_COUNT_MAX 65536
static uint64_t count_held(void *block, uint64_t *bytes)
{
    uint64_t count = 0;
    while (block && count < TCACHE_COUNT_MAX) {
        struct descriptor *d = pagemap_desc_or_null(block);
        if (!d || d->class_index == HEAP_CLASS_LARGE ||
            (size_t)((char *)block - d->start) >= d->size)
            break;
        count++;
        *bytes += d->block_size;
        block = heap_link_get(block);
    }
    return count;
}

bool tcache_exit_hidden(struct tcache *tc)
{
    if (LFH_LIKELY(hide_depth == 0))
        return false;
    if (hidden_exit_counted)
        return true;
    if (hidden_complete && hidden_busy == 0) {
        /* Whole: put it back and return it to the heap (which also resets the credits,
         * one of which an interrupted free may have left at zero). From here on the save
         * is no cache to put back: a run after a kill in the middle of this one finds it
         * incomplete and only counts it, as abandoned, giving nothing back twice. */
        hidden_complete = false;
        atomic_signal_fence(memory_order_seq_cst);
        restore_bins(tc, hidden_outer);
        tcache_flush_cache(tc);
        hidden_exit_counted = true;
        atomic_signal_fence(memory_order_seq_cst);
        atomic_fetch_add_explicit(&lost_reclaimed, 1, memory_order_relaxed);
        return true;
    }
    /* Possibly half updated (a list being cut, a bump range being replaced): nothing of it
     * may go back. What it held stays out of use: at most the cache's limits, and the
     * superblocks of its bump ranges. A cache without a store held no blocks in its bins
     * (hidden_outer NULL); the store, if any, is the one the save lies in. */
    uint64_t blocks = 0, bytes = 0;
    for (unsigned cls = 0; hidden_outer && tc->cold && cls < HEAP_CLASSES; cls++) {
        struct tcache_bin *bin = &tc->bins[cls];
        blocks += count_held(hidden_outer->head[cls], &bytes);
        blocks += count_held(tc->cold[cls].spare, &bytes);
        tc->cold[cls].spare = NULL;
        char *end = hidden_outer->bump_end[cls];
        if (bin->bump && end > bin->bump &&
            (size_t)(end - bin->bump) <=
                ARENA_SUPERBLOCK_REUSE_MAX * sizeclass_superblock_size(heap_size_class(cls))) {
            blocks += (uint64_t)(end - bin->bump) / bin->block_size;
            bytes += (uint64_t)(end - bin->bump);
        }
        bin->head = NULL;
        bin->bump_end = bin->bump;
    }
    blocks += count_held(tc->remote_head, &bytes);
    tc->remote_head = NULL;
    tc->remote_count = 0;
    hidden_exit_counted = true;
    atomic_signal_fence(memory_order_seq_cst);
    atomic_fetch_add_explicit(&lost_abandoned, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&lost_blocks, blocks, memory_order_relaxed);
    atomic_fetch_add_explicit(&lost_bytes, bytes, memory_order_relaxed);
    return true;
}

void tcache_lost_get(struct tcache_lost *out)
{
    out->reclaimed = atomic_load_explicit(&lost_reclaimed, memory_order_relaxed);
    out->abandoned = atomic_load_explicit(&lost_abandoned, memory_order_relaxed);
    out->abandoned_blocks = atomic_load_explicit(&lost_blocks, memory_order_relaxed);
    out->abandoned_bytes = atomic_load_explicit(&lost_bytes, memory_order_relaxed);
}
