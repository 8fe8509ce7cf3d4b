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
 *    faults. Superblocks have none: it would take two system calls for every superblock
 *    set up and released, and the tail canaries already cover their blocks.
 */
#ifndef LFHEAP_SECURE_H
#define LFHEAP_SECURE_H

#include "common.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Bytes a small block gives up at its end for the tail canary. */
#define SECURE_TAIL_BYTES (SECURE_ENABLED ? sizeof(uint64_t) : 0)
/* Bytes of guard page at the end of every large block. */
#define SECURE_GUARD_BYTES (SECURE_ENABLED ? (size_t)4096 : 0)
/* The fill of freed blocks. By default it covers what is checked when a block comes
 * back: SECURE_CHECK_BYTES after the link and the mark, where writes after free usually
 * land (a structure's first fields); LFHEAP_SECURE_FILL=full fills whole blocks, and
 * LFHEAP_SECURE_FILL=zero fills whole blocks with zeros. */
#define SECURE_FILL_POISON 0xFD
#define SECURE_CHECK_BYTES 64

/* The keys, drawn from the process's randomness (os_random) at the first superblock
 * (secure_init), before any block exists. Relaxed loads: set once, then read only. */
struct secure_keys {
    _Atomic uint64_t link;      /* xor-ed into every stored free-list link */
    _Atomic uint64_t canary;    /* xor-ed with the block's address into its tail canary */
    _Atomic uint64_t fill_word; /* eight bytes of the fill */
    _Atomic bool fill_whole;    /* fill whole blocks, not only the checked bytes */
};
extern struct secure_keys secure_keys __attribute__((visibility("hidden")));

void secure_init(void);

/* Guard pages: each one splits the mapping its block lies in, so it costs the process up
 * to two of the memory mappings the kernel allows it (vm.max_map_count, 65,530 by
 * default), and a mapping refused for want of them fails whatever asked for it: lfheap's
 * own arenas, the program's mmap and thread stacks. So at most a quarter of that limit
 * (read once) of large blocks carry a guard page at a time, and the blocks beyond get
 * none. secure_guard_take claims a place (false when none is left); secure_guard_put
 * gives one back, when a guard page is removed or could not be placed. */
bool secure_guard_take(void);
void secure_guard_put(void);

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

/* Bytes from the third word of a block of `block_size` bytes that are checked. */
LFH_INLINE size_t secure_checked_end(size_t block_size)
{
    return block_size < 16 + SECURE_CHECK_BYTES ? block_size : 16 + SECURE_CHECK_BYTES;
}

/* A block handed out again from a free list, whose decoded link is `next`: its mark
 * (`mark`, the one for its address: heap_block_mark), link and fill must be as free left
 * them. Word by word, with no early exit. Callers
 * test SECURE_ENABLED first: the mark they pass is an atomic load, which the compiler
 * keeps even where this function does nothing. */
LFH_INLINE void secure_check_reuse(void *block, size_t block_size, uint64_t mark, void *next)
{
    if (!SECURE_ENABLED)
        return;
    uint64_t fill = atomic_load_explicit(&secure_keys.fill_word, memory_order_relaxed);
    uint64_t word, changed = (uintptr_t)next & 15; /* blocks are 16-aligned */
    memcpy(&word, (char *)block + sizeof word, sizeof word);
    changed |= word ^ mark;
    for (size_t i = 16; i < secure_checked_end(block_size); i += sizeof word) {
        memcpy(&word, (char *)block + i, sizeof word);
        changed |= word ^ fill;
    }
    if (LFH_UNLIKELY(changed != 0))
        secure_fail("write after free", "malloc", block);
}

/* The tail canary of a live small block of `block_size` bytes must be intact when
 * `routine` lets go of it: free, or a resize before it moves or keeps the block, so that
 * the report names the call the program made. */
LFH_INLINE void secure_check_canary(const void *block, size_t block_size, const char *routine)
{
    if (!SECURE_ENABLED)
        return;
    uint64_t canary;
    memcpy(&canary, (const char *)block + block_size - sizeof canary, sizeof canary);
    if (LFH_UNLIKELY(canary != secure_canary(block)))
        secure_fail("heap overflow", routine, block);
}

/* A live small block is freed: its tail canary must be intact; then it is filled. */
LFH_INLINE void secure_check_free(void *block, size_t block_size)
{
    if (!SECURE_ENABLED)
        return;
    secure_check_canary(block, block_size, "free");
    uint64_t fill = atomic_load_explicit(&secure_keys.fill_word, memory_order_relaxed);
    if (LFH_UNLIKELY(atomic_load_explicit(&secure_keys.fill_whole, memory_order_relaxed))) {
        memset((char *)block + 16, (unsigned char)fill, block_size - 16);
        return;
    }
    /* At most SECURE_CHECK_BYTES / 8 stores: no call. */
    for (size_t i = 16; i < secure_checked_end(block_size); i += sizeof fill)
        memcpy((char *)block + i, &fill, sizeof fill);
}

#endif
