/*
 * arena: arenas of NBBS instances and the stacks of dirty chunks waiting to be purged.
 *
 * Dirty stacks: one per chunk size (4 KiB .. 64 MiB). A chunk is named by a 32-bit id
 * (arena index and page index, 0 = none); its link and the time it was freed live in its
 * arena's side arrays, never in the chunk, so a thread that reads a link is never
 * reading memory somebody else is using. The head packs the top id with a 32-bit version
 * bumped by every operation, which makes the pop's CAS fail after any interleaved pop
 * and push of the same chunk (ABA). The purger takes a whole stack with one CAS,
 * releases what is old enough, and pushes the rest back as one chain.
 */
#include "arena.h"

#include "buddy.h"
#include "os.h"
#include "park.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define ARENA_MAX    4096 /* 256 GiB of arenas */
#define ARENA_PAGES  (ARENA_SIZE / ARENA_MIN_CHUNK)
#define ARENA_ORDERS 15 /* log2(ARENA_MAX_CHUNK / ARENA_MIN_CHUNK) + 1 */
#define CHUNK_NONE   0u

/* How long a freed chunk stays dirty (reusable without a system call) before its pages
 * go back to the kernel; LFHEAP_PURGE_MS overrides it. */
#define ARENA_PURGE_DELAY_MS 250

struct arena {
    struct buddy *buddy;
    char *base;
    _Atomic uint32_t next[ARENA_PAGES];     /* dirty-stack link of the chunk at a page */
    _Atomic uint32_t freed_ms[ARENA_PAGES]; /* when that chunk was freed */
};

static _Atomic(struct arena *) arenas[ARENA_MAX];
static _Atomic unsigned arena_count; /* slots below this may be filled */
static _Atomic uint64_t dirty_stacks[ARENA_ORDERS];
static _Atomic uint32_t last_purge_ms;
static _Atomic int purge_delay_ms = -1;
static __thread unsigned arena_hint; /* the arena this thread last allocated from */

static uint32_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

static uint32_t purge_delay(void)
{
    /* Relaxed: every thread computes the same value from the environment. */
    int delay = atomic_load_explicit(&purge_delay_ms, memory_order_relaxed);
    if (delay < 0) {
        const char *env = getenv("LFHEAP_PURGE_MS");
        long value = env ? strtol(env, NULL, 10) : ARENA_PURGE_DELAY_MS;
        delay = value < 0 ? 0 : value > 60000 ? 60000 : (int)value;
        atomic_store_explicit(&purge_delay_ms, delay, memory_order_relaxed);
    }
    return (uint32_t)delay;
}

size_t arena_chunk_size(size_t size)
{
    size_t chunk = ARENA_MIN_CHUNK;
    while (chunk < size)
        chunk <<= 1;
    return chunk;
}

static unsigned chunk_order(size_t chunk)
{
    return (unsigned)__builtin_ctzl(chunk) - (unsigned)__builtin_ctzl(ARENA_MIN_CHUNK);
}

static struct arena *arena_at(unsigned index)
{
    /* Acquire pairs with the release CAS that installed the arena. */
    return atomic_load_explicit(&arenas[index], memory_order_acquire);
}

/* ---- chunk ids -------------------------------------------------------------------- */

static uint32_t chunk_id(unsigned index, const struct arena *a, const void *chunk)
{
    size_t page = (size_t)((const char *)chunk - a->base) / ARENA_MIN_CHUNK;
    return (uint32_t)(index * ARENA_PAGES + page + 1);
}

static struct arena *id_arena(uint32_t id)
{
    return arena_at((unsigned)((id - 1) / ARENA_PAGES));
}

static size_t id_page(uint32_t id)
{
    return (id - 1) % ARENA_PAGES;
}

static void *id_chunk(uint32_t id)
{
    return id_arena(id)->base + id_page(id) * ARENA_MIN_CHUNK;
}

static unsigned arena_index_of(const void *chunk)
{
    unsigned count = atomic_load_explicit(&arena_count, memory_order_acquire);
    for (unsigned i = 0; i < count; i++) {
        struct arena *a = arena_at(i);
        if (a && (uintptr_t)chunk - (uintptr_t)a->base < ARENA_SIZE)
            return i;
    }
    return ARENA_MAX;
}

/* ---- dirty stacks ----------------------------------------------------------------- */

static inline uint64_t dirty_head(uint32_t id, uint64_t old)
{
    return (uint64_t)id | ((old >> 32) + 1) << 32;
}

/* Pushes the chain first..last (linked through the side arrays) onto a stack. */
static void dirty_push_chain(unsigned order, uint32_t first, uint32_t last)
{
    _Atomic uint64_t *head = &dirty_stacks[order];
    struct arena *a = id_arena(last);
    uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
    do {
        /* Relaxed: published by the release CAS below. */
        atomic_store_explicit(&a->next[id_page(last)], (uint32_t)old, memory_order_relaxed);
        /* A failed CAS means another push or pop succeeded: lock-free. */
    } while (!atomic_compare_exchange_weak_explicit(head, &old, dirty_head(first, old),
                                                    memory_order_release, memory_order_relaxed));
}

static uint32_t dirty_pop(unsigned order)
{
    _Atomic uint64_t *head = &dirty_stacks[order];
    /* Acquire pairs with the pushing CAS: the link and stamp are the pusher's. */
    uint64_t old = atomic_load_explicit(head, memory_order_acquire);
    while ((uint32_t)old != CHUNK_NONE) {
        uint32_t id = (uint32_t)old;
        uint32_t next =
            atomic_load_explicit(&id_arena(id)->next[id_page(id)], memory_order_relaxed);
        LFH_PARK(ARENA_DIRTY_POP);
        /* If the chunk was popped (and maybe pushed back) meanwhile, the version moved
         * and this fails; a failure always means another operation succeeded. */
        if (atomic_compare_exchange_weak_explicit(head, &old, dirty_head(next, old),
                                                  memory_order_acquire, memory_order_acquire))
            return id;
    }
    return CHUNK_NONE;
}

static uint32_t dirty_take_all(unsigned order)
{
    _Atomic uint64_t *head = &dirty_stacks[order];
    uint64_t old = atomic_load_explicit(head, memory_order_acquire);
    /* Acquire: we will read the links and stamps of the whole chain. */
    while ((uint32_t)old != CHUNK_NONE &&
           !atomic_compare_exchange_weak_explicit(head, &old, dirty_head(CHUNK_NONE, old),
                                                  memory_order_acquire, memory_order_acquire))
        ;
    return (uint32_t)old;
}

/* ---- purging ---------------------------------------------------------------------- */

/* Chunks purge_order releases with one madvise per run of adjacent ones. */
#define PURGE_BATCH 64

/* Sorts a batch by address: an insertion sort, as the batch is small and libc's qsort
 * may allocate (DESIGN.md, property 6: lfheap never allocates through libc). */
static void sort_addresses(uintptr_t *addr, unsigned count)
{
    for (unsigned i = 1; i < count; i++) {
        uintptr_t x = addr[i];
        unsigned j = i;
        for (; j > 0 && addr[j - 1] > x; j--)
            addr[j] = addr[j - 1];
        addr[j] = x;
    }
}

/* Decommits `count` chunks of `chunk` bytes (their ids in `ids`), sorted by address so
 * that adjacent ones go in one system call, and releases them to their buddies; a chunk
 * whose decommit the kernel refused stays dirty: it is put back on its stack. Returns how
 * many were released. */
static size_t purge_batch(unsigned order, uint32_t *ids, unsigned count, size_t chunk)
{
    uintptr_t addr[PURGE_BATCH];
    for (unsigned i = 0; i < count; i++)
        addr[i] = (uintptr_t)id_chunk(ids[i]);
    sort_addresses(addr, count);
    size_t released = 0;
    for (unsigned first = 0, end; first < count; first = end) {
        for (end = first + 1; end < count && addr[end] == addr[end - 1] + chunk; end++)
            ;
        bool clean = os_decommit((void *)addr[first], (end - first) * chunk);
        for (unsigned i = first; i < end; i++) {
            unsigned index = arena_index_of((void *)addr[i]);
            struct arena *a = arena_at(index);
            if (clean) {
                buddy_free(a->buddy, (void *)addr[i]);
                released++;
            } else {
                uint32_t id = chunk_id(index, a, (void *)addr[i]);
                dirty_push_chain(order, id, id);
            }
        }
    }
    return released;
}

/* Releases the chunks of one stack that waited at least `delay` ms (all if force). */
static size_t purge_order(unsigned order, uint32_t now, uint32_t delay, bool force)
{
    size_t chunk = ARENA_MIN_CHUNK << order;
    size_t released = 0;
    uint32_t keep_first = CHUNK_NONE, keep_last = CHUNK_NONE;
    uint32_t batch[PURGE_BATCH];
    unsigned batched = 0;
    uint32_t id = dirty_take_all(order);
    while (id != CHUNK_NONE) {
        LFH_PARK(ARENA_PURGE_TAKEN);
        struct arena *a = id_arena(id);
        size_t page = id_page(id);
        /* Relaxed: the chain is ours since the acquire CAS that took it. */
        uint32_t next = atomic_load_explicit(&a->next[page], memory_order_relaxed);
        uint32_t freed = atomic_load_explicit(&a->freed_ms[page], memory_order_relaxed);
        if (force || now - freed >= delay) {
            batch[batched++] = id;
            if (batched == PURGE_BATCH) {
                released += purge_batch(order, batch, batched, chunk);
                batched = 0;
            }
        } else {
            atomic_store_explicit(&a->next[page], keep_first, memory_order_relaxed);
            if (keep_first == CHUNK_NONE)
                keep_last = id;
            keep_first = id;
        }
        id = next;
    }
    released += purge_batch(order, batch, batched, chunk);
    if (keep_first != CHUNK_NONE)
        dirty_push_chain(order, keep_first, keep_last);
    return released;
}

size_t arena_purge_all(void)
{
    size_t released = 0;
    for (unsigned order = 0; order < ARENA_ORDERS; order++)
        released += purge_order(order, 0, 0, true);
    os_retry();
    return released;
}

void arena_tick(void)
{
    uint32_t now = now_ms();
    uint32_t delay = purge_delay();
    uint32_t last = atomic_load_explicit(&last_purge_ms, memory_order_relaxed);
    if (now - last < delay / 2 + 1)
        return;
    /* One thread per half-delay wins the right to purge; the others go on, nobody
     * waits. Relaxed: the stacks carry their own ordering. */
    if (!atomic_compare_exchange_strong_explicit(&last_purge_ms, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return;
    LFH_PARK(ARENA_TICK_WON);
    for (unsigned order = 0; order < ARENA_ORDERS; order++)
        if ((uint32_t)atomic_load_explicit(&dirty_stacks[order], memory_order_relaxed) !=
            CHUNK_NONE)
            purge_order(order, now, delay, false);
    os_retry();
}

/* ---- arenas ----------------------------------------------------------------------- */

static void *alloc_from_arenas(size_t chunk)
{
    unsigned count = atomic_load_explicit(&arena_count, memory_order_acquire);
    unsigned start = arena_hint;
    for (unsigned i = 0; i < count; i++) {
        unsigned index = (start + i) % count;
        struct arena *a = arena_at(index);
        if (!a)
            continue;
        void *p = buddy_alloc(a->buddy, chunk);
        if (p) {
            arena_hint = index;
            return p;
        }
    }
    return NULL;
}

/* Raises the count of arenas to cover slot `index`, before anybody allocates from the
 * arena there: arena_free looks only below the count, and would drop the chunks of an
 * arena above it. Every thread that uses a new slot does this, not only the one that
 * filled it, which may be stopped right after its CAS. Release pairs with the acquire
 * loads of the count; a failed CAS means another thread raised it: lock-free. */
static void arena_count_cover(unsigned index)
{
    unsigned count = atomic_load_explicit(&arena_count, memory_order_relaxed);
    while (count <= index &&
           !atomic_compare_exchange_weak_explicit(&arena_count, &count, index + 1,
                                                  memory_order_release, memory_order_relaxed))
        ;
}

static struct arena *arena_map(void)
{
    struct arena *a = os_map(sizeof(struct arena), OS_PAGE_SIZE);
    if (!a)
        return NULL;
    a->buddy = buddy_create(NULL, ARENA_SIZE, ARENA_MIN_CHUNK, ARENA_MAX_CHUNK, BUDDY_PACKED);
    if (!a->buddy) {
        os_unmap(a, sizeof(struct arena));
        return NULL;
    }
    a->base = buddy_base(a->buddy);
    return a;
}

static void arena_unmap(struct arena *a)
{
    buddy_destroy(a->buddy);
    os_unmap(a, sizeof(struct arena));
}

/* Maps one more arena into the first free slot of the table and allocates from it. A
 * slot found filled (its arena is new: some thread just won it) is tried first, and a
 * thread goes on to the next slot when an arena cannot serve it, also when it is the one
 * it just installed (other threads took that arena's memory meanwhile: progress), so a
 * stopped thread costs others at most the arena it installed, never a failure. */
static void *alloc_from_new_arena(size_t chunk)
{
    struct arena *fresh = NULL;
    void *p = NULL;
    for (unsigned index = atomic_load_explicit(&arena_count, memory_order_acquire);
         !p && index < ARENA_MAX; index++) {
        struct arena *a = arena_at(index);
        if (!a) {
            if (!fresh && !(fresh = arena_map()))
                return NULL;
            struct arena *expected = NULL;
            /* Release publishes the arena's fields with it; acquire reads the winner's. */
            if (atomic_compare_exchange_strong_explicit(
                    &arenas[index], &expected, fresh, memory_order_release, memory_order_acquire)) {
                a = fresh;
                fresh = NULL;
                LFH_PARK(ARENA_SLOT_WON);
            } else {
                a = expected;
            }
        }
        arena_count_cover(index);
        p = buddy_alloc(a->buddy, chunk);
        if (p)
            arena_hint = index;
    }
    if (fresh)
        arena_unmap(fresh);
    return p;
}

/* A chunk of *chunk_size bytes or, with take_double, maybe a freed one of twice that
 * (then *chunk_size says so). */
static void *arena_alloc_chunk(size_t *chunk_size, bool *zeroed, bool take_double)
{
    arena_tick();
    size_t chunk = *chunk_size;
    uint32_t id = dirty_pop(chunk_order(chunk));
    if (id == CHUNK_NONE && take_double) {
        id = dirty_pop(chunk_order(chunk) + 1);
        if (id != CHUNK_NONE)
            *chunk_size = 2 * chunk;
    }
    if (id != CHUNK_NONE) {
        *zeroed = false;
        return id_chunk(id);
    }
    /* Everything free inside a buddy was decommitted first, so it reads as zeros. */
    *zeroed = true;
    void *p = alloc_from_arenas(chunk);
    if (!p && arena_purge_all() > 0)
        p = alloc_from_arenas(chunk); /* dirty chunks coalesced: try again */
    if (!p)
        p = alloc_from_new_arena(chunk);
    return p;
}

void *arena_alloc(size_t size, bool *zeroed)
{
    size_t chunk = arena_chunk_size(size);
    return arena_alloc_chunk(&chunk, zeroed, false);
}

void *arena_alloc_large(size_t size, bool *zeroed, size_t *chunk_size)
{
    *chunk_size = arena_chunk_size(size);
    bool take_double = *chunk_size >= ARENA_LARGE_REUSE_MIN && *chunk_size < ARENA_MAX_CHUNK;
    return arena_alloc_chunk(chunk_size, zeroed, take_double);
}

void arena_free(void *chunk, size_t size)
{
    unsigned index = arena_index_of(chunk);
    if (index == ARENA_MAX)
        return;
    struct arena *a = arena_at(index);
    uint32_t id = chunk_id(index, a, chunk);
    /* Relaxed: the push's release CAS publishes the stamp. */
    atomic_store_explicit(&a->freed_ms[id_page(id)], now_ms(), memory_order_relaxed);
    dirty_push_chain(chunk_order(arena_chunk_size(size)), id, id);
    arena_tick();
}

#ifdef LFHEAP_PARKING
unsigned arena_busy_count(void)
{
    unsigned busy = 0;
    for (unsigned index = 0; index < ARENA_MAX; index++) {
        struct arena *a = arena_at(index);
        if (!a)
            continue;
        /* A whole-arena chunk is free only if every chunk of the arena was released and
         * coalesced (buddy.h); give it straight back. */
        void *whole = buddy_alloc(a->buddy, ARENA_SIZE);
        if (whole)
            buddy_free(a->buddy, whole);
        else
            busy++;
    }
    return busy;
}
#endif

unsigned arena_mapped(void)
{
    unsigned count = atomic_load_explicit(&arena_count, memory_order_acquire);
    unsigned mapped = 0;
    for (unsigned i = 0; i < count; i++)
        mapped += arena_at(i) != NULL;
    return mapped;
}
