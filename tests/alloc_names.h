/*
 * Lets one test source exercise either lfheap's prefixed API (linked with the prefix
 * library, also under sanitizers) or the standard names (TEST_PLAIN: the program is run
 * with lfheap preloaded).
 */
#ifndef LFHEAP_ALLOC_NAMES_H
#define LFHEAP_ALLOC_NAMES_H

#include <malloc.h>
#include <stdlib.h>

#ifdef TEST_PLAIN
#define T_MALLOC             malloc
#define T_CALLOC             calloc
#define T_REALLOC            realloc
#define T_REALLOCARRAY       reallocarray
#define T_FREE               free
#define T_POSIX_MEMALIGN     posix_memalign
#define T_ALIGNED_ALLOC      aligned_alloc
#define T_MEMALIGN           memalign
#define T_VALLOC             valloc
#define T_PVALLOC            pvalloc
#define T_MALLOC_USABLE_SIZE malloc_usable_size
#define T_MALLOC_TRIM        malloc_trim
#else
#include "lfheap.h"
#define T_MALLOC             lfh_malloc
#define T_CALLOC             lfh_calloc
#define T_REALLOC            lfh_realloc
#define T_REALLOCARRAY       lfh_reallocarray
#define T_FREE               lfh_free
#define T_POSIX_MEMALIGN     lfh_posix_memalign
#define T_ALIGNED_ALLOC      lfh_aligned_alloc
#define T_MEMALIGN           lfh_memalign
#define T_VALLOC             lfh_valloc
#define T_PVALLOC            lfh_pvalloc
#define T_MALLOC_USABLE_SIZE lfh_malloc_usable_size
#define T_MALLOC_TRIM        lfh_malloc_trim
#endif

#endif
