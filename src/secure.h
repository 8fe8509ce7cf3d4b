/*
 * secure: the checks of the hardened build (-DLFHEAP_SECURE, build/liblfheap-secure),
 * which stops a program that misuses the heap instead of letting the misuse corrupt it.
 * Compiled in that build only: elsewhere every hook below is constant or empty, and the
 * release build's code is what it would be without them.
 *
 * What it adds to the release build, which already refuses every pointer that is not a
 * live block (heap_block_live):
 *  - a refused pointer is reported and the program aborted: double and invalid frees,
 *    and realloc or malloc_usable_size of such pointers;
 *  - free-list links are stored encoded with a per-process key and the block's own
 *    address, and a link that decodes to an address no block can have stops the program
 *    when the block is handed out again (a write after free that forges a link);
 *  - a freed small block is filled (SECURE_FILL_POISON, or zeros with
 *    LFHEAP_SECURE_FILL=zero) from its third word on, and the fill's first
 *    SECURE_CHECK_BYTES are checked, with the free mark, when the block is handed out
 *    again (a write after free);
 *  - every small block ends in a tail canary, a word keyed by the block's address,
 *    checked by free (a write past the block's end: malloc_usable_size stops before it);
 *  - a guard page (no access) ends every large block, so that a run of writes past it
 *    faults. (Superblocks have none: two system calls for every superblock set up and
 *    released cost the allocation-heavy workloads over half their time, and the tail
 *    canaries cover their blocks.)
 */
#ifndef LFHEAP_SECURE_H
#define LFHEAP_SECURE_H

#include "common.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef LFHEAP_SECURE
#define SECURE_ENABLED 1
#else
#define SECURE_ENABLED 0
#endif

/* Bytes a small block gives up at its end for the tail canary. */
#define SECURE_TAIL_BYTES (SECURE_ENABLED ? sizeof(uint64_t) : 0)
/* Bytes of guard page at the end of every large block. */
#define SECURE_GUARD_BYTES (SECURE_ENABLED ? (size_t)4096 : 0)
/* The fill of freed blocks, and how much of it is checked when a block comes back. */
#define SECURE_FILL_POISON 0xFD
#define SECURE_CHECK_BYTES 64

/* The keys, derived from the free mark's random seed at the first superblock
 * (secure_init), before any block exists. Relaxed loads: set once, then read only. */
struct secure_keys {
    _Atomic uint64_t link;   /* xor-ed into every stored free-list link */
    _Atomic uint64_t canary; /* xor-ed with the block's address into its tail canary */
    _Atomic int fill;        /* the byte freed blocks are filled with; -1: no fill */
};
extern struct secure_keys secure_keys __attribute__((visibility("hidden")));

void secure_init(uint64_t seed);

/* Reports the misuse `kind` (e.g. "double free") found at `ptr` by `routine`, then
 * aborts. Writes with write(2): safe in any state of the heap. */
void secure_fail(const char *kind, const char *routine, const void *ptr)
    __attribute__((noreturn, cold));

/* A free-list link as stored in `block`: next, encoded. */
LFH_INLINE void *secure_link_encode(const void *block, void *next)
{
    if (!SECURE_ENABLED)
        return next;
    uint64_t key = atomic_load_explicit(&secure_keys.link, memory_order_relaxed);
    return (void *)((uintptr_t)next ^ key ^ ((uintptr_t)block >> 4));
}

LFH_INLINE void *secure_link_decode(const void *block, void *stored)
{
    return secure_link_encode(block, stored); /* xor is its own inverse */
}

LFH_INLINE uint64_t secure_canary(const void *block)
{
    return atomic_load_explicit(&secure_keys.canary, memory_order_relaxed) ^ (uintptr_t)block;
}

/* A small block of `block_size` bytes is handed out: its tail canary is written (after
 * the free mark was cleared: in a 16-byte block they share the second word). */
LFH_INLINE void secure_hand_out(void *block, size_t block_size)
{
    if (!SECURE_ENABLED)
        return;
    uint64_t canary = secure_canary(block);
    memcpy((char *)block + block_size - sizeof canary, &canary, sizeof canary);
}

/* A block handed out again from a free list: its fill must be as free left it. */
void secure_check_reuse(void *block, size_t block_size, uint64_t mark, void *next);

/* A live small block is freed: its tail canary must be intact; then it is filled. */
void secure_check_free(void *block, size_t block_size);

#endif
