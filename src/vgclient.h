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

#include <stdbool.h>
#include <stddef.h>

#if VGCLIENT_ENABLED
#include <valgrind/memcheck.h>
#endif

#if VGCLIENT_ENABLED
/* True under valgrind's memcheck: it answers a request to mark memory defined (here a
 * byte that is) with -1; natively and under other tools the answer is the default, 0. */
LFH_INLINE bool vgclient_memcheck(void)
{
    char probe = 0;
    return VALGRIND_MAKE_MEM_DEFINED(&probe, sizeof probe) != 0;
}

/* True under any valgrind tool (memcheck, callgrind, ...). */
LFH_INLINE bool vgclient_running(void)
{
    return RUNNING_ON_VALGRIND != 0;
}

/* `size` bytes at `block` now belong to the program (the whole block: what
 * malloc_usable_size reports), undefined: malloc promises no contents, so a decision on
 * them is reported even where the pages read as zeros (a fresh chunk or mapping). */
LFH_INLINE void vgclient_alloc(void *block, size_t size)
{
    VALGRIND_MALLOCLIKE_BLOCK(block, size, 0, 0);
}

/* `size` bytes at `block` read as zeros without a store (fresh or decommitted pages that a
 * zero-filled block skipped its memset for): defined from now on. */
LFH_INLINE void vgclient_zeros(void *block, size_t size)
{
    VALGRIND_MAKE_MEM_DEFINED(block, size);
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

/* realloc copied a block's bytes into `block`, defined or not (a large block's unwritten
 * bytes are not): its second word, where free compares the free mark (heap.h), is made
 * defined, keeping its value, so that memcheck does not report lfheap's compare. The
 * price: a program that reads those 8 bytes without having written them is not told. */
LFH_INLINE void vgclient_copied_mark(void *block)
{
    VALGRIND_MAKE_MEM_DEFINED((char *)block + sizeof(void *), sizeof(void *));
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
LFH_INLINE bool vgclient_running(void)
{
    return false;
}
LFH_INLINE void vgclient_alloc(void *block, size_t size)
{
    (void)block;
    (void)size;
}
LFH_INLINE void vgclient_zeros(void *block, size_t size)
{
    (void)block;
    (void)size;
}
LFH_INLINE void vgclient_free(void *block)
{
    (void)block;
}
LFH_INLINE void vgclient_link(void *block)
{
    (void)block;
}
LFH_INLINE void vgclient_copied_mark(void *block)
{
    (void)block;
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
