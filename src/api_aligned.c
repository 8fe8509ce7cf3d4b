/*
 * api_aligned: the aligned routines of the malloc family (posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc). Each block is a tracked one (api.c), which records its
 * alignment so that realloc keeps it; the rules on a bad alignment are glibc's.
 */
#include "lfheap.h"

#include "api_exports.h"
#include "api_internal.h"
#include "os.h"

LFH_EXPORT int lfh_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment) || alignment % sizeof(void *) != 0) {
        counted(LFH_STATS_POSIX_MEMALIGN, size, NULL);
        return EINVAL;
    }
    /* On failure errno is ENOMEM too, as glibc leaves it (its tests check that). */
    void *block = counted(LFH_STATS_POSIX_MEMALIGN, size, alloc_aligned(alignment, size, false));
    if (!block)
        return ENOMEM;
    *memptr = block;
    return 0;
}

LFH_EXPORT void *lfh_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return counted(LFH_STATS_ALIGNED_ALLOC, size, NULL);
    }
    return counted(LFH_STATS_ALIGNED_ALLOC, size, alloc_aligned(alignment, size, false));
}

LFH_EXPORT void *lfh_memalign(size_t alignment, size_t size)
{
    /* glibc: alignments that are not powers of two are rounded up to one. */
    if (alignment > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return counted(LFH_STATS_MEMALIGN, size, NULL);
    }
    size_t align = 1;
    while (align < alignment)
        align <<= 1;
    return counted(LFH_STATS_MEMALIGN, size, alloc_aligned(align, size, false));
}

LFH_EXPORT void *lfh_valloc(size_t size)
{
    return counted(LFH_STATS_VALLOC, size, alloc_aligned(OS_PAGE_SIZE, size, false));
}

LFH_EXPORT void *lfh_pvalloc(size_t size)
{
    size_t rounded = (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    if (rounded < size)
        return counted(LFH_STATS_PVALLOC, size, fail_nomem());
    return counted(LFH_STATS_PVALLOC, size,
                   alloc_aligned(OS_PAGE_SIZE, rounded ? rounded : OS_PAGE_SIZE, false));
}

/* ---- the standard names ----------------------------------------------------------- */

API_EXPORTS(API_EXPORTS_ALIGNED)
