/*
 * tcache_store: where the thread caches keep what the fast paths rarely touch, the cold
 * parts of their classes and the save of a cache hidden from a signal handler (tcache.h
 * declares the interface). Kept out of thread-local storage, which glibc copies and clears
 * at the top of every new thread's stack: 7.9 KB of it cost every thread two pages more
 * than glibc's own, whether or not it ever allocated (bench/thread-footprint).
 *
 * Stores come in slabs that are never unmapped once published, as the statistics' blocks
 * do (stats.c). A slab's stores are taken by a CAS on its bitmap, which sets the store's
 * bit, and given back by clearing the bit with an atomic AND. A thread whose CAS fails
 * reads the bitmap again (another thread took or gave back a store of that slab) and
 * tries again, or moves on to the next slab, or maps a slab of its own and pushes it onto
 * the list with a CAS: nobody waits for anybody. The release that leaves a slab with no
 * store in use gives the slab's pages back to the kernel (purge_slab).
 */
#include "tcache.h"

#include "os.h"
#include "park.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define STORE_SLAB_STORES 32

/* The cold parts of all the slab's stores lie together, and the hidden saves after them:
 * a thread that allocates touches its cold parts (2,880 bytes), and only one whose cache
 * was hidden from a signal handler touches its save (1,448 bytes), so the cold parts of
 * successive stores share pages. */
struct store_slab {
    struct store_slab *next; /* set before the slab is published, never changed */
    _Atomic uint32_t taken;  /* bit i: store i is some cache's */
    _Alignas(64) struct tcache_cold cold[STORE_SLAB_STORES][HEAP_CLASSES];
    struct tcache_hidden hidden[STORE_SLAB_STORES];
};

/* Slabs are aligned on this power of two, so that a store finds its slab from its
 * address alone: the store holds no pointer that a stray write could bend. */
#define STORE_SLAB_ALIGN ((size_t)256 << 10)
#define STORE_SLAB_BYTES                                                                           \
    ((sizeof(struct store_slab) + OS_PAGE_SIZE - 1) / OS_PAGE_SIZE * OS_PAGE_SIZE)
_Static_assert(sizeof(struct store_slab) <= STORE_SLAB_ALIGN, "a slab fits its alignment");

static _Atomic(struct store_slab *) store_slabs;

/* Takes a store of `slab` whose bit is clear into *into, or returns false if every store
 * is taken. The CAS is acquire: the previous holder's writes to the store, published by
 * its release in tcache_store_release, happen before the new holder's. Relaxed on
 * failure: the bitmap read then is only a new guess. The store is installed at once, so
 * that a thread killed from here on gives it back from its exit. */
static bool claim_in(struct store_slab *slab, struct tcache_cold **into)
{
    uint32_t taken = atomic_load_explicit(&slab->taken, memory_order_relaxed);
    while (taken != UINT32_MAX) {
        unsigned index = (unsigned)__builtin_ctz(~taken);
        if (atomic_compare_exchange_weak_explicit(&slab->taken, &taken, taken | (1u << index),
                                                  memory_order_acquire, memory_order_relaxed)) {
            *into = slab->cold[index];
            atomic_signal_fence(memory_order_seq_cst);
            LFH_PARK(TCACHE_STORE_CLAIMED);
            return true;
        }
    }
    return false;
}

/* Takes a store of a published slab into *into; false if all of them are taken. */
static bool claim_published(struct tcache_cold **into)
{
    /* Acquire, paired with the pushing CAS's release: every slab reached is whole. */
    struct store_slab *slab = atomic_load_explicit(&store_slabs, memory_order_acquire);
    for (; slab; slab = slab->next)
        if (claim_in(slab, into))
            return true;
    return false;
}

bool tcache_store_claim(struct tcache_cold **into)
{
    if (claim_published(into))
        return true;
    struct store_slab *fresh = os_map(STORE_SLAB_BYTES, STORE_SLAB_ALIGN);
    if (!fresh)
        return false;
    /* Threads that start together all find every store taken and map a slab each; one that
     * finds a store given back or published meanwhile takes it and unmaps its slab, as
     * the statistics' registry does (stats.c). */
    if (claim_published(into)) {
        os_unmap(fresh, STORE_SLAB_BYTES);
        return true;
    }
    /* Store 0 is ours before anyone can see the slab, and installed before the push: a
     * thread killed before the push gives it back, which leaves the unpublished slab
     * empty (its address space stays reserved). */
    atomic_store_explicit(&fresh->taken, 1, memory_order_relaxed);
    *into = fresh->cold[0];
    atomic_signal_fence(memory_order_seq_cst);
    fresh->next = atomic_load_explicit(&store_slabs, memory_order_relaxed);
    /* Release: the slab's header is written before another thread reaches it through the
     * list. A failed CAS reloads the head (relaxed: the retry is the only use, and the
     * success's release is what publishes). */
    while (!atomic_compare_exchange_weak_explicit(&store_slabs, &fresh->next, fresh,
                                                  memory_order_release, memory_order_relaxed))
        ;
    return true;
}

static struct store_slab *slab_of(const struct tcache_cold *cold)
{
    return (struct store_slab *)((uintptr_t)cold & ~(uintptr_t)(STORE_SLAB_ALIGN - 1));
}

static unsigned index_of(const struct store_slab *slab, const struct tcache_cold *cold)
{
    return (unsigned)((size_t)(cold - &slab->cold[0][0]) / HEAP_CLASSES);
}

struct tcache_hidden *tcache_store_hidden(struct tcache_cold *cold)
{
    struct store_slab *slab = slab_of(cold);
    return &slab->hidden[index_of(slab, cold)];
}

/* The slab's pages after the first, which holds its header. */
#define STORE_SLAB_PURGED_BYTES (STORE_SLAB_BYTES - OS_PAGE_SIZE)

/* A slab whose last store went back gives its pages back to the kernel, as the thread
 * exit that gave the store back gives back what it empties (arena_prompt_begin): after
 * 4,000 threads alive at once had exited, their stores held 11.6 MiB resident for good
 * (bench/thread-churn-concurrent --threads=4000 --hold=1). For the length of the
 * decommit every store of the slab is taken, by a CAS from none to all (acquire: the last
 * holders' writes, released by their AND, come before the kernel drops the pages); a
 * claimer meanwhile finds the slab full and moves on, as it does past any full slab. The
 * release store of none after it orders the decommit before the next claim. A store the
 * kernel dropped reads as zeros, as the release left it. */
static void purge_slab(struct store_slab *slab)
{
    uint32_t none = 0;
    if (!atomic_compare_exchange_strong_explicit(&slab->taken, &none, UINT32_MAX,
                                                 memory_order_acquire, memory_order_relaxed))
        return; /* claimed again meanwhile: in use */
    os_decommit((char *)slab + OS_PAGE_SIZE, STORE_SLAB_PURGED_BYTES);
    atomic_store_explicit(&slab->taken, 0, memory_order_release);
}

void tcache_store_release(struct tcache_cold *cold)
{
    struct store_slab *slab = slab_of(cold);
    uint32_t bit = 1u << index_of(slab, cold);
    /* Cleared here rather than at the claim, so that a store is all zeros from the moment
     * it is claimed (a fresh or purged slab's are already) and the setup can install it
     * at once: a thread killed right after its claim then still gives it back. */
    memset(cold, 0, HEAP_CLASSES * sizeof *cold);
    /* Release: this holder's writes happen before the next claimer's acquire CAS. */
    if (atomic_fetch_and_explicit(&slab->taken, ~bit, memory_order_release) == bit)
        purge_slab(slab);
}

unsigned tcache_store_taken(void)
{
    unsigned taken = 0;
    struct store_slab *slab = atomic_load_explicit(&store_slabs, memory_order_acquire);
    for (; slab; slab = slab->next)
        taken +=
            (unsigned)__builtin_popcount(atomic_load_explicit(&slab->taken, memory_order_relaxed));
    return taken;
}

size_t tcache_store_resident_slabs(void)
{
    size_t resident = 0;
    struct store_slab *slab = atomic_load_explicit(&store_slabs, memory_order_acquire);
    for (; slab; slab = slab->next)
        resident += os_any_resident((char *)slab + OS_PAGE_SIZE, STORE_SLAB_PURGED_BYTES);
    return resident;
}
