/*
 * vgclient: what lfheap tells valgrind's memcheck about its blocks, through the client
 * requests of <valgrind/memcheck.h> (header-only; Debian's valgrind package). Each
 * request is a few instructions that do nothing outside valgrind, and they are made only
 * on slow paths: under memcheck every thread runs uncached (tcache.c), so every malloc
 * and free reaches a slow path that reports it. Other valgrind tools (callgrind, which
 * `make fastpath` uses; none) leave memcheck's requests unanswered, so lfheap keeps its
 * caches under them. Without the header, or with -DLFHEAP_NO_VALGRIND, the requests
 * compile to nothing and lfheap never notices valgrind.
 */
#ifndef LFHEAP_VGCLIENT_H
#define LFHEAP_VGCLIENT_H

#include "common.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if !defined(LFHEAP_NO_VALGRIND) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define VGCLIENT_ENABLED 1
#endif
#endif

#ifdef VGCLIENT_ENABLED
/* True under valgrind's memcheck: it answers a request to mark memory defined (here a
 * byte that is) with -1; natively and under other tools the answer is the default, 0. */
LFH_INLINE bool vgclient_memcheck(void)
{
    char probe = 0;
    return VALGRIND_MAKE_MEM_DEFINED(&probe, sizeof probe) != 0;
}

/* `size` bytes at `block` now belong to the program (the whole block: what
 * malloc_usable_size reports), undefined unless `zeroed`. */
LFH_INLINE void vgclient_alloc(void *block, size_t size, bool zeroed)
{
    VALGRIND_MALLOCLIKE_BLOCK(block, size, 0, zeroed);
}

/* The program gave the block back: memcheck reports any later access by the program. */
LFH_INLINE void vgclient_free(void *block)
{
    VALGRIND_FREELIKE_BLOCK(block, 0);
}

/* A free small block's first two words, the link to the next block of its chain and
 * the free mark (heap.h): addressable for lfheap, undefined until lfheap writes them, so
 * that a double free can read the mark without memcheck reporting lfheap. */
LFH_INLINE void vgclient_link(void *block)
{
    VALGRIND_MAKE_MEM_UNDEFINED(block, 2 * sizeof(void *));
}

/* The free mark of a block just handed out, which lfheap cleared: undefined again, as the
 * rest of a fresh block is to the program. */
LFH_INLINE void vgclient_unmarked(void *block)
{
    VALGRIND_MAKE_MEM_UNDEFINED((char *)block + sizeof(void *), sizeof(void *));
}

/* vgclient_memcheck's answer, asked once per process (vgclient.c): 0 not asked yet, 1
 * natively or under another tool, 2 under memcheck. Relaxed: every thread computes the
 * same answer. */
extern _Atomic int vgclient_state __attribute__((visibility("hidden")));
int vgclient_state_ask(void) LFH_NOINLINE;

/* The word at `addr` as lfheap's checks read it: a live block's free-mark word is the
 * program's and may be uninitialised, which memcheck would report when the check compares
 * it; under memcheck the read is made on defined bits, and the word's own bits are put
 * back. Natively it is one load and a test of the cached answer (the client requests
 * would cost a remote free some 40 instructions). */
LFH_INLINE uint64_t vgclient_peek(const void *addr)
{
    uint64_t vbits = 0, word;
    int state = atomic_load_explicit(&vgclient_state, memory_order_relaxed);
    if (LFH_UNLIKELY(state != 1) && (state == 2 || vgclient_state_ask() == 2)) {
        unsigned saved = VALGRIND_GET_VBITS(addr, &vbits, sizeof word);
        VALGRIND_MAKE_MEM_DEFINED(addr, sizeof word);
        memcpy(&word, addr, sizeof word);
        if (saved == 1)
            VALGRIND_SET_VBITS(addr, &vbits, sizeof word);
        return word;
    }
    memcpy(&word, addr, sizeof word);
    return word;
}

/* Memory that is lfheap's and nobody's block yet (a fresh superblock). */
LFH_INLINE void vgclient_unused(void *start, size_t size)
{
    VALGRIND_MAKE_MEM_NOACCESS(start, size);
}

/* Memory lfheap keeps its own data in, beside the blocks (a tracked superblock's
 * records): addressable, undefined until lfheap writes it. */
LFH_INLINE void vgclient_metadata(void *start, size_t size)
{
    VALGRIND_MAKE_MEM_UNDEFINED(start, size);
}
#else
LFH_INLINE bool vgclient_memcheck(void)
{
    return false;
}
LFH_INLINE void vgclient_alloc(void *block, size_t size, bool zeroed)
{
    (void)block;
    (void)size;
    (void)zeroed;
}
LFH_INLINE void vgclient_free(void *block)
{
    (void)block;
}
LFH_INLINE void vgclient_link(void *block)
{
    (void)block;
}
LFH_INLINE void vgclient_unmarked(void *block)
{
    (void)block;
}
LFH_INLINE uint64_t vgclient_peek(const void *addr)
{
    uint64_t word;
    memcpy(&word, addr, sizeof word);
    return word;
}
LFH_INLINE void vgclient_unused(void *start, size_t size)
{
    (void)start;
    (void)size;
}
LFH_INLINE void vgclient_metadata(void *start, size_t size)
{
    (void)start;
    (void)size;
}
#endif

#endif
