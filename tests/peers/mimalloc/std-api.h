/* The names of mimalloc's API that its test/test-api.c calls, mapped onto the standard
   allocation functions, so that the checks of that file which need nothing else run
   against whichever malloc the process has (tests/peers/run.sh picks those checks out
   and compiles them with this header, after mimalloc's own mimalloc.h and
   mimalloc-types.h for the constants the checks use, such as MI_ALIGNMENT_MAX). */
#ifndef LFHEAP_PEERS_STD_API_H
#define LFHEAP_PEERS_STD_API_H

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Object-like where the arguments are the same, so that a check may take the address. */
#define mi_malloc                          malloc
#define mi_calloc                          calloc
#define mi_realloc                         realloc
#define mi_reallocarray                    reallocarray
#define mi_free                            free
#define mi_usable_size                     malloc_usable_size
#define mi_posix_memalign                  posix_memalign
#define mi_memalign                        memalign
#define mi_malloc_aligned(size, alignment) memalign(alignment, size)
#define mi_zalloc_aligned(size, alignment) peers_zalloc_aligned(size, alignment)

static inline void *peers_zalloc_aligned(size_t size, size_t alignment)
{
    void *block = memalign(alignment, size);
    if (block != NULL)
        memset(block, 0, size);
    return block;
}

#endif
