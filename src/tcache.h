/*
 * tcache: the per-thread caches (LRMalloc §3.1, Streamflow's thread-local heaps). For each
 * size class a thread keeps a LIFO list of free blocks and a bump range on a superblock
 * it took from the heap. The fast paths below touch only this thread's cache: no atomic
 * read-modify-write, no fence, no call (docs/DESIGN.md, property 3).
 *
 * Ownership: a thread that takes a superblock's free blocks becomes its owner
 * (descriptor->owner). A block freed by its superblock's owner goes on the owner's list;
 * a block freed by any other thread is never reused by that thread (that is what causes
 * LRMalloc's passive false sharing): it is buffered and returned to its superblock,
 * batched per superblock, where the owner's next fill finds it.
 *
 * A list holds about `limit` blocks: the bin's `credit` counts down the frees left until
 * the list is cut back to its hottest limit/2 blocks; the rest becomes the bin's spare
 * magazine, and the spare it replaces goes back to the heap (struct tcache_cold). The
 * limit grows when a bin keeps emptying soon after it overflowed, and halves when the
 * thread's limits add up to more than its share of a process-wide budget (the more
 * threads, the smaller the share). At thread exit the whole cache goes back.
 */
#ifndef LFHEAP_TCACHE_H
#define LFHEAP_TCACHE_H

#include "arena.h"
#include "common.h"
#include "heap.h"
#include "pagemap.h"
#include "platform.h"
#include "sizeclass.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The fast-path part of a size class's cache (32 bytes). */
struct tcache_bin {
    void *head;          /* free blocks, linked through their first word */
    int32_t credit;      /* frees this list takes before it is cut back to half its limit */
    uint32_t block_size; /* the class's block size: the bump step */
    char *bump;          /* next never-touched block of the bump range... */
    char *bump_end;      /* ...which ends here (bump == bump_end: none) */
};

/* What a bin's slow path did last; NONE: nothing yet, and the class is not counted in the
 * cache's limit_bytes. */
enum { TCACHE_EVENT_NONE, TCACHE_EVENT_FILL, TCACHE_EVENT_FLUSH };

/* The slow-path part. The cached blocks of a class form two magazines (Bonwick's
 * loaded and previous magazines): the bin's list, which malloc and free use, holds up to
 * limit/2 blocks; when a free would overflow it, all of it but that block becomes the
 * spare, and an empty list takes the spare back. Only a spare that is still there when
 * the list overflows again goes back to the heap, so no block is walked unless it leaves
 * the cache. */
struct tcache_cold {
    struct descriptor *bump_desc; /* the superblock of the bump range */
    void *spare;                  /* a full magazine set aside, or NULL */
    uint32_t spare_count;
    uint32_t list_base;  /* the list holds list_base - credit blocks */
    uint32_t limit;      /* blocks the class may cache: list and spare */
    uint16_t last_event; /* TCACHE_EVENT_*: what the bin's slow path did last */
    uint16_t tick_mark;  /* the list as the last purge tick saw it (list_mark) */
};

/* What all threads' cache limits may add up to above their floors, shared out evenly
 * among the live caches, and the share no thread goes below (LRMalloc's future work of
 * adaptive caches). A thread's limits grow only within its share: a class that must grow
 * and finds no room halves every other class's limit first (tcache.c, make_room); while
 * the limits exceed the share (more threads started), each overflow halves its class's
 * limit. A class keeps at least TCACHE_LIMIT_FLOOR blocks, and one whose first limit does
 * not fit starts there. A class's limit stops at 1 MiB of blocks (TCACHE_BYTES_MAX), so a
 * thread reaches its share only with several classes at their largest. */
#define TCACHE_BUDGET_TOTAL ((uint64_t)16 << 20)
#define TCACHE_BUDGET_MIN   ((uint64_t)256 << 10)
#define TCACHE_LIMIT_FLOOR  2u

/* Ids of real caches count up from 1; these two never own a superblock. A cache whose
 * id is TCACHE_ID_EXITED has empty bins and sends every call to the slow paths, which
 * serve it block by block from the heap: after thread exit, while it is hidden from a
 * signal handler (tcache_hide), and for every thread under valgrind. */
#define TCACHE_ID_UNSET  UINT64_MAX
#define TCACHE_ID_EXITED (UINT64_MAX - 1)

struct tcache {
    struct tcache_bin bins[HEAP_CLASSES];
    uint64_t id; /* TCACHE_ID_UNSET until set up; TCACHE_ID_EXITED once handed back */
    /* Counts the frees that stayed in the cache down, wrapping: every 65,536th takes the
     * arenas' purge tick (tcache_tick), so that freed memory goes back after the purge
     * delay also in a program whose calls no longer leave the fast paths. Next to `id`,
     * which the same frees read. */
    uint16_t free_ticks;
    void *remote_head; /* blocks of superblocks other threads own, to return in batches */
    uint32_t remote_count;
    uint32_t new_bytes;   /* of superblocks taken new since the last sweep of idle classes */
    uint64_t limit_bytes; /* sum of (limit - floor) x block size over the classes filled */
    /* The classes' cold parts (HEAP_CLASSES of them), in the cache's store
     * (tcache_store.c), not in thread-local storage: glibc copies and clears a thread's
     * static thread-local storage at the top of every new thread's stack, where this part
     * would cost a thread that never allocates a page more. NULL while the cache is not
     * set up or was handed back; then every bin is empty. */
    struct tcache_cold *cold;
};

extern __thread struct tcache tcache_self __attribute__((visibility("hidden")));

/* True while the calling thread's calls bypass its cache: before it is set up, once it
 * was handed back or while it is hidden, and in every thread under valgrind's memcheck
 * (tcache_setup). */
LFH_INLINE bool tcache_uncached(void)
{
    return tcache_self.id >= TCACHE_ID_EXITED;
}

/* The calling thread's share of the caches' budget, in bytes (see TCACHE_BUDGET_TOTAL). */
uint64_t tcache_budget_share(void);

/* Sets up the calling thread's cache if it has none yet, for the large-block paths, which
 * do not use it: a thread that only ever takes large blocks must still give back, at its
 * exit, what it freed (the exit purge runs from the cache's exit; a thread that took
 * 100 MiB in 1 MiB blocks, freed them and exited left them all resident). */
void tcache_setup_slow(void) LFH_NOINLINE;
LFH_INLINE void tcache_setup_for_large(void)
{
    if (LFH_UNLIKELY(tcache_self.id == TCACHE_ID_UNSET))
        tcache_setup_slow();
}

void *tcache_alloc_slow(unsigned cls) LFH_NOINLINE;
/* The same for a small request of `size` bytes (malloc's fast path keeps the size in its
 * argument register, so handing it over costs nothing). */
void *tcache_alloc_slow_size(size_t size) LFH_NOINLINE;
/* Cuts back the list that `block`, just freed, heads (the block names its class, so the
 * fast path hands over a register it already holds). */
void tcache_flush(void *block) LFH_NOINLINE;
/* The purge tick of the arenas (arena_tick), taken from free's fast path every 65,536
 * frees (struct tcache, free_ticks). */
void tcache_tick(void) LFH_NOINLINE;
/* Frees of small blocks the fast path could not take: another owner, or this thread's
 * cache not set up or already handed back. */
void tcache_free_slow(void *block, struct descriptor *desc) LFH_NOINLINE;
/* Returns everything the calling thread caches to the heap (malloc_trim, thread exit);
 * the result is the number of blocks it had cached. */
unsigned tcache_flush_all(void);

/* The orphan slots a process with `cpus` CPUs uses (0: unknown): two per CPU, at least 4,
 * at most all 16. Caches of threads that exit while all of them are full go back to the
 * heap. */
unsigned tcache_orphan_slots(unsigned cpus);

/* The fast paths reach the calling thread's cache relative to the thread pointer
 * (platform.h: %fs-relative on x86-64, which spares reading the thread pointer and
 * adding it). Slow paths use &tcache_self; no function mixes both kinds of access. */
#define TCACHE_SEG PLATFORM_TLS_SEG
LFH_INLINE uintptr_t tcache_base(void)
{
    return platform_tls_offset(tcache_self);
}

/* free and malloc index the bins with class * SIZECLASS_STRIDE, without scaling; the
 * bump path reaches its class's cold part at the same distance from the cold parts'
 * start as the bin lies from the cache's. */
_Static_assert(sizeof(struct tcache_bin) == SIZECLASS_STRIDE, "bins are SIZECLASS_STRIDE apart");
_Static_assert(sizeof(struct tcache_cold) == SIZECLASS_STRIDE, "so are the cold parts");
_Static_assert(offsetof(struct tcache, bins) == 0, "the bins start the cache");

/* The free mark a block taken off a free list must still carry (the secure build's check
 * of reuse): its superblock's key, looked up in the page map, since a list does not say
 * whose blocks it holds. */
LFH_INLINE uint64_t tcache_reused_mark(void *block)
{
    return heap_block_mark(block, heap_mark_key(pagemap_desc_of_own(block)));
}

/* Pops the list of the bin at `bin_base` (tcache_base() + class * SIZECLASS_STRIDE), or
 * else carves the next block of the bump range, moving the superblock's carve frontier
 * past it; NULL if both are empty. Either way the block loses the free mark (a carved
 * block may hold a stale one from an earlier tenant of its pages); blocks are otherwise
 * not written before they are handed out (Streamflow). */
LFH_INLINE void *tcache_bin_take(uintptr_t bin_base)
{
    struct tcache_bin TCACHE_SEG *bin = (TCACHE_SEG struct tcache_bin *)bin_base;
    void *block = bin->head;
    if (LFH_LIKELY(block != NULL)) {
        void *next = heap_link_get(block);
        if (SECURE_ENABLED)
            secure_check_reuse(block, bin->block_size, tcache_reused_mark(block), next);
        bin->head = next;
        bin->credit++;
        heap_block_hand_out(block, bin->block_size);
        return block;
    }
    char *fresh = bin->bump;
    if (LFH_LIKELY(fresh != bin->bump_end)) {
        char *next = fresh + bin->block_size;
        bin->bump = next;
        /* A bump range exists only in a set-up cache, whose cold parts exist. */
        struct tcache_cold *cold =
            (struct tcache_cold *)((char *)((TCACHE_SEG struct tcache *)tcache_base())->cold +
                                   (bin_base - tcache_base()));
        /* This cache alone carves the range (heap_set_carve_frontier). */
        heap_set_carve_frontier(cold->bump_desc, next);
        heap_block_hand_out(fresh, bin->block_size);
        return fresh;
    }
    return NULL;
}

/* malloc's fast path for size <= SIZECLASS_LOOKUP_MAX: the table gives the bin's offset
 * directly. */
LFH_INLINE void *tcache_alloc_small(size_t size)
{
    void *block = tcache_bin_take(tcache_base() + sizeclass_lookup[size]);
    return LFH_LIKELY(block != NULL) ? block : tcache_alloc_slow_size(size);
}

LFH_INLINE void *tcache_alloc(unsigned cls)
{
    void *block = tcache_bin_take(tcache_base() + cls * SIZECLASS_STRIDE);
    return LFH_LIKELY(block != NULL) ? block : tcache_alloc_slow(cls);
}

/* What tcache_free did with a block. */
enum tcache_free_result {
    /* Not a live small block by the fast checks: an interior pointer, a block never handed
     * out or already freed, foreign memory, or a large block carrying an earlier tenant's
     * mark (large blocks have none); the caller checks it the slow way. */
    TCACHE_FREE_REFUSED,
    TCACHE_FREE_CACHED, /* in this thread's cache */
    /* A block start below the carve frontier, but another thread owns its superblock, or
     * it is a large block, which no thread owns. The free mark is not read yet: a large
     * block has none (its second word may be any byte the program never wrote, which
     * memcheck would report a compare of), so the caller tests it for a small block. */
    TCACHE_FREE_NOT_OWNED,
};

LFH_INLINE enum tcache_free_result tcache_free(void *block, struct descriptor *desc)
{
    uintptr_t base = tcache_base();
    /* An interior pointer, a block never handed out or one already freed goes the slow
     * way, which ignores it (heap_block_live). The sentinel descriptor of foreign memory
     * has no block start. */
    if (LFH_UNLIKELY(!heap_is_carved_block(desc, block)))
        return TCACHE_FREE_REFUSED;
    heap_check_block(desc, block);
    /* Relaxed: the owner is a hint for locality (see tcache.c); a stale value only sends
     * the block the slower, equally correct way. */
    if (LFH_UNLIKELY(atomic_load_explicit(&desc->owner, memory_order_relaxed) !=
                     ((TCACHE_SEG struct tcache *)base)->id))
        return TCACHE_FREE_NOT_OWNED;
    uint64_t key = heap_mark_key(desc);
    if (LFH_UNLIKELY(heap_block_marked_free(block, key)))
        return TCACHE_FREE_REFUSED;
    struct tcache_bin TCACHE_SEG *bin = (TCACHE_SEG struct tcache_bin *)(base + desc->class_scaled);
    secure_check_free(block, desc->block_size);
    /* Marked before it joins the list: a free that interrupts this one (a signal handler's)
     * already finds it freed. */
    heap_block_mark_free(block, key);
    heap_link_set(block, bin->head);
    bin->head = block;
    if (LFH_UNLIKELY(--bin->credit == 0))
        tcache_flush(block);
    else if (LFH_UNLIKELY(--((TCACHE_SEG struct tcache *)base)->free_ticks == 0))
        tcache_tick();
    return TCACHE_FREE_CACHED;
}

/* True if `desc`'s superblock is owned by the calling thread's cache: a free of one of
 * its blocks by this thread stays in this thread's cache (malloc_remote's answer is the
 * opposite). Relaxed, as in tcache_free: ownership is a locality hint. */
LFH_INLINE bool tcache_owns(struct descriptor *desc)
{
    return atomic_load_explicit(&desc->owner, memory_order_relaxed) == tcache_self.id;
}

/* ---- hiding the cache from signal handlers (tcache_hide.c, called by sigwrap.c) ----- */

/* Non-zero while a slow path of this layer runs, also inside the libc calls it makes
 * (mmap, clock_gettime, ...), which lie outside lfheap's code: a signal handler that
 * interrupts it finds the cache in the middle of an update. */
extern __thread unsigned tcache_busy __attribute__((visibility("hidden")));

/* How many handlers that the signal wrapper (sigwrap.c) called run on this thread,
 * whatever they interrupted: lfheap then starts no thread (tcache_purger_poll). Always 0
 * in the prefix-only variants, which have no wrapper. A handler that leaves by
 * siglongjmp leaves its count raised; tcache_handler_running finds that out. Kept here,
 * below the wrapper that writes them, so that the cache need not know the wrapper. */
extern __thread unsigned tcache_in_handler __attribute__((visibility("hidden")));

/* The wrapper's frame address for each of the first TCACHE_HANDLER_FRAMES handlers
 * running (index: the count below it), written after the count is raised. */
#define TCACHE_HANDLER_FRAMES 8
extern __thread uintptr_t tcache_handler_frames[TCACHE_HANDLER_FRAMES]
    __attribute__((visibility("hidden")));

/* True if a handler the count says runs still does: the caller's frame lies below its
 * wrapper's frame, as every call made inside it does. A frame above it means the handler
 * was left by a jump to an older frame, and the count is lowered past it. (Wrong only
 * for a handler that moves to another stack placed higher, e.g. a coroutine switched to
 * inside a handler.) */
bool tcache_handler_running(void) LFH_NOINLINE;

/* Set while this thread's cache is registered for its exit under a late key (tcache.c,
 * tcache_setup): the registration may be replaced by a pthread_setspecific it is nested in,
 * so the end of every slow path checks it. */
extern __thread bool tcache_exit_verify __attribute__((visibility("hidden")));
/* Registers the cache's exit again if its registration was replaced. */
void tcache_exit_reverify(void) LFH_NOINLINE;

/* Starts the background purger if arena_tick asked this thread to (arena.h), at the end
 * of a slow path: pthread_create allocates, and its calls must find this thread's cache
 * whole, so never while a slow path of this layer runs (tcache_busy: the end of a nested
 * one leaves the request for the outermost), and never inside a signal handler
 * (tcache_in_handler: pthread_create is not async-signal-safe). The check of a late exit
 * registration (tcache_exit_verify), which calls pthread_setspecific, runs under the same
 * conditions. `freeing`: the end of a free, which starts the purger only in a process
 * that never had another thread (arena_purger_start says why). Two thread-local loads
 * when there is nothing to do. */
LFH_INLINE void tcache_purger_poll(bool freeing)
{
    if (LFH_UNLIKELY(arena_purger_wanted | tcache_exit_verify) && tcache_busy == 0 &&
        (tcache_in_handler == 0 || !tcache_handler_running())) {
        if (tcache_exit_verify)
            tcache_exit_reverify();
        if (arena_purger_wanted)
            arena_purger_start(freeing);
    }
}

/* What tcache_hide takes out of the bins. */
struct tcache_hidden {
    uint64_t id;
    void *head[HEAP_CLASSES];
    char *bump_end[HEAP_CLASSES];
};

/* ---- the caches' store (tcache_store.c) --------------------------------------------- */

/* A cache's cold parts (HEAP_CLASSES of them) in a store of its own, taken at its setup
 * (written into *into right after the claim; false when no memory could be mapped) and
 * given back when the cache is handed back (or passed to its adopter with the orphan).
 * A claimed store's cold parts are all zeros (the release clears them). The store also
 * holds the save of the cache's outermost hiding (tcache_store_hidden). The release that
 * leaves a slab without a store in use gives the slab's pages back. */
bool tcache_store_claim(struct tcache_cold **into);
void tcache_store_release(struct tcache_cold *cold);
struct tcache_hidden *tcache_store_hidden(struct tcache_cold *cold);
/* The slabs of stores with any page resident beyond their first, which holds the slab's
 * header: a slab whose stores all went back gives its pages back (for tests). */
size_t tcache_store_resident_slabs(void);
/* The stores taken, over all published slabs (for tests). */
unsigned tcache_store_taken(void);

/* Hides the calling thread's cache from a signal handler that interrupted lfheap: saves
 * the bins' lists, bump ends and the id, then makes every bin look empty and the id own
 * nothing, so that the handler's mallocs and frees all go to the slow paths, which serve
 * them from the heap one block at a time. The outermost hiding of a thread saves into the
 * cache's store (thread exit finds it there if the handler never returns), or only the id
 * when the cache has no store (its bins are empty), and takes `nested` NULL; nested ones
 * save into `nested`, on the caller's stack, so that only they take that stack. Each call
 * restores exactly what it saw, so a signal that interrupts a hide or an unhide is
 * harmless. No call out of lfheap. */
void tcache_hide(struct tcache_hidden *nested);
void tcache_unhide(const struct tcache_hidden *nested);

/* True if no hiding is in progress on this thread: the next one is the outermost. A
 * signal between this call and tcache_hide either completes a hiding of its own, leaving
 * the depth as it found it, or never comes back to this call. */
bool tcache_hide_outermost(void);

/* Caches that thread exit found hidden (their handler never returned: pthread_exit or
 * siglongjmp out of it). `reclaimed` ones had been interrupted outside every slow path,
 * so they were whole and went back to the heap; `abandoned` ones may have been half
 * updated and were left where they were, with the blocks and bytes they held. */
struct tcache_lost {
    uint64_t reclaimed;
    uint64_t abandoned;
    uint64_t abandoned_blocks;
    uint64_t abandoned_bytes;
};
void tcache_lost_get(struct tcache_lost *out);

/* Thread exit (tcache.c): if the calling thread's cache `tc` is hidden (its handler never
 * returned), returns it to the heap if it is whole or leaves it out of use, accounts for
 * it once (tcache_lost), and returns true; false if it is not hidden. */
bool tcache_exit_hidden(struct tcache *tc);

/* Returns every block `tc` caches (lists, spares, bump ranges, remote buffer) to the heap
 * and resets its bins; the number of blocks. The caller has raised tcache_busy. */
unsigned tcache_flush_cache(struct tcache *tc);

#endif
