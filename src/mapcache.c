/*
 * mapcache: freed mappings kept for the next huge block (mapcache.h says what and why).
 *
 * A slot's word is the mapping's page number above its size in pages, or 0 when the slot
 * is free. Every mapping os_map hands out ends below 2^OS_ADDRESS_BITS, so its page
 * number takes OS_ADDRESS_BITS - 12 bits, and the low MAPCACHE_PAGE_BITS count pages (a
 * kept mapping is at most MAPCACHE_MAX_BYTES). A word is never 0 while it names a
 * mapping: a mapping has at least one page.
 *
 * Ownership moves only by CAS on a slot: put swaps 0 for the word (the mapping passes
 * from the freeing thread to the slot), take and release swap the word for 0 (from the
 * slot to the winner). A word seen and then claimed may in between have been taken,
 * used, freed and kept again in the same slot: the CAS then claims a kept mapping all
 * the same, which is all a claim needs (an ABA that is harmless by construction). The
 * stamps beside the slots are hints: a purge that reads the stamp of the mapping kept
 * before, or of the next one, unmaps it a little early or at the next purge; the memory
 * is never touched by anyone but the slot's owner.
 */
#include "mapcache.h"

#include "common.h"
#include "os.h"
#include "park.h"

#include <stdatomic.h>

#define MAPCACHE_PAGE_BITS 28
_Static_assert(MAPCACHE_MAX_BYTES / OS_PAGE_SIZE < ((uint64_t)1 << MAPCACHE_PAGE_BITS),
               "a kept mapping's pages fit their field");
_Static_assert(OS_ADDRESS_BITS - 12 + MAPCACHE_PAGE_BITS <= 64, "a slot's word fits");

static _Atomic uint64_t slots[MAPCACHE_SLOTS];
static _Atomic uint32_t stamps[MAPCACHE_SLOTS];
/* Bytes of the kept mappings, and of the ones being put: the budget. */
static _Atomic size_t kept_bytes;

size_t mapcache_kept_bytes(void)
{
    return atomic_load_explicit(&kept_bytes, memory_order_relaxed);
}

static inline uint64_t slot_word(const void *start, size_t bytes)
{
    return (uint64_t)((uintptr_t)start / OS_PAGE_SIZE) << MAPCACHE_PAGE_BITS |
           (uint64_t)(bytes / OS_PAGE_SIZE);
}

static inline char *word_start(uint64_t word)
{
    return (char *)(uintptr_t)((word >> MAPCACHE_PAGE_BITS) * OS_PAGE_SIZE);
}

static inline size_t word_bytes(uint64_t word)
{
    return (size_t)(word & (((uint64_t)1 << MAPCACHE_PAGE_BITS) - 1)) * OS_PAGE_SIZE;
}

/* Takes the slot's mapping if the slot still holds `word`. Acquire on success, pairing
 * with put's release: the putter's last writes to the mapping (the program's, its own
 * unregistering of the page map) happen before the new owner's. Relaxed on failure: the
 * loser reads nothing. */
static bool claim(unsigned i, uint64_t word)
{
    if (!atomic_compare_exchange_strong_explicit(&slots[i], &word, 0, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    atomic_fetch_sub_explicit(&kept_bytes, word_bytes(word), memory_order_relaxed);
    LFH_PARK(MAPCACHE_CLAIMED);
    return true;
}

bool mapcache_put(void *start, size_t bytes, uint32_t now)
{
    /* The secure build unmaps a freed block at once, so that a use after free traps. */
    if (SECURE_ENABLED || bytes > MAPCACHE_MAX_BYTES)
        return false;
    /* The budget first, so that racing puts cannot pass it together. Relaxed: a count,
     * ordering nothing. */
    size_t before = atomic_fetch_add_explicit(&kept_bytes, bytes, memory_order_relaxed);
    if (before + bytes > MAPCACHE_MAX_BYTES) {
        atomic_fetch_sub_explicit(&kept_bytes, bytes, memory_order_relaxed);
        return false;
    }
    uint64_t word = slot_word(start, bytes);
    for (unsigned i = 0; i < MAPCACHE_SLOTS; i++) {
        uint64_t empty = 0;
        /* Relaxed: a glance that skips taken slots without a locked instruction. */
        if (atomic_load_explicit(&slots[i], memory_order_relaxed) != 0)
            continue;
        atomic_store_explicit(&stamps[i], now, memory_order_relaxed);
        /* Release: hands the mapping, as this thread left it, to whoever claims it. */
        if (atomic_compare_exchange_strong_explicit(&slots[i], &empty, word, memory_order_release,
                                                    memory_order_relaxed))
            return true;
    }
    atomic_fetch_sub_explicit(&kept_bytes, bytes, memory_order_relaxed);
    return false;
}

/* A kept mapping smaller than `bytes` (claimed), grown to it: in place when the addresses
 * after it are free, else its pages moved by the kernel (no copy) to a fresh mapping.
 * Only the pages past it fault in. NULL, the mapping unmapped, if neither works. */
static void *grown(char *start, size_t have, size_t bytes, size_t align)
{
    if (os_grow(start, have, bytes))
        return start;
    char *dest = os_map(bytes, align);
    if (dest && os_move(start, have, dest, bytes))
        return dest;
    if (dest)
        os_unmap(dest, bytes);
    os_unmap_resident(start, have);
    return NULL;
}

void *mapcache_take(size_t bytes, size_t align)
{
    /* Nothing kept, nothing to scan. */
    if (mapcache_kept_bytes() == 0)
        return NULL;
    for (;;) {
        /* The smallest that holds the request; else the biggest, to grow. Whatever its
         * size: with one slot (mapcache.h), a kept mapping that a request of another
         * size left waiting was resident beside that request's fresh pages, and every
         * second block of a program alternating 70 and 180 MB blocks faulted in whole
         * (1.74 s against 0.13 with four slots, at the same peak RSS of 257 MB). */
        unsigned best = MAPCACHE_SLOTS, grow = MAPCACHE_SLOTS;
        uint64_t best_word = 0, grow_word = 0;
        for (unsigned i = 0; i < MAPCACHE_SLOTS; i++) {
            /* Relaxed: the claim's CAS acquires; this only picks. */
            uint64_t word = atomic_load_explicit(&slots[i], memory_order_relaxed);
            size_t have = word_bytes(word);
            if (word == 0 || ((uintptr_t)word_start(word) & (align - 1)) != 0)
                continue;
            if (have >= bytes) {
                if (best == MAPCACHE_SLOTS || have < word_bytes(best_word)) {
                    best = i;
                    best_word = word;
                }
            } else if (grow == MAPCACHE_SLOTS || have > word_bytes(grow_word)) {
                grow = i;
                grow_word = word;
            }
        }
        if (best == MAPCACHE_SLOTS && grow == MAPCACHE_SLOTS)
            return NULL;
        uint64_t word = best != MAPCACHE_SLOTS ? best_word : grow_word;
        /* Lost to another thread: that thread made progress; look again. */
        if (!claim(best != MAPCACHE_SLOTS ? best : grow, word))
            continue;
        char *start = word_start(word);
        size_t have = word_bytes(word);
        if (have < bytes)
            return grown(start, have, bytes, align);
        if (have > bytes)
            os_unmap_resident(start + bytes, have - bytes);
        return start;
    }
}

size_t mapcache_release(uint32_t now, uint32_t delay, bool force)
{
    if (mapcache_kept_bytes() == 0)
        return 0;
    size_t released = 0;
    for (unsigned i = 0; i < MAPCACHE_SLOTS; i++) {
        /* Relaxed: as in take; the stamp is a hint (see the top of this file). */
        uint64_t word = atomic_load_explicit(&slots[i], memory_order_relaxed);
        if (word == 0)
            continue;
        uint32_t stamp = atomic_load_explicit(&stamps[i], memory_order_relaxed);
        if (!force && now - stamp < delay)
            continue;
        if (!claim(i, word))
            continue; /* taken meanwhile: its new owner has it */
        os_unmap_resident(word_start(word), word_bytes(word));
        released += word_bytes(word);
    }
    return released;
}

void *mapcache_map(size_t bytes, size_t align)
{
    void *start = os_map(bytes, align);
    if (!start && mapcache_release(0, 0, true) != 0)
        start = os_map(bytes, align);
    return start;
}
