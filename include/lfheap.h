/*
 * lfheap: a lock-free malloc. This header declares the lfh_-prefixed API, which is
 * always available, also when lfheap is linked beside another allocator. The shared
 * and static release libraries additionally define the standard names (malloc, free,
 * ...) with the same behaviour.
 */
#ifndef LFHEAP_H
#define LFHEAP_H

#include <stddef.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LFH_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define LFH_MALLOC_ATTR
#endif

/* The C and POSIX allocation API, with glibc's semantics (see README.md). */
void *lfh_malloc(size_t size) LFH_MALLOC_ATTR;
void *lfh_calloc(size_t count, size_t size) LFH_MALLOC_ATTR;
void *lfh_realloc(void *ptr, size_t size);
void *lfh_reallocarray(void *ptr, size_t count, size_t size);
void lfh_free(void *ptr);
void lfh_cfree(void *ptr);
void lfh_free_sized(void *ptr, size_t size);
void lfh_free_aligned_sized(void *ptr, size_t alignment, size_t size);
int lfh_posix_memalign(void **memptr, size_t alignment, size_t size);
void *lfh_aligned_alloc(size_t alignment, size_t size) LFH_MALLOC_ATTR;
void *lfh_memalign(size_t alignment, size_t size) LFH_MALLOC_ATTR;
void *lfh_valloc(size_t size) LFH_MALLOC_ATTR;
void *lfh_pvalloc(size_t size) LFH_MALLOC_ATTR;
size_t lfh_malloc_usable_size(void *ptr);

/* Give cached free memory back to the kernel now; returns 1 if any was released. */
int lfh_malloc_trim(size_t pad);

/*
 * llheap's extensions (README.md, "Extended API"). Sticky properties: calloc and
 * cmemalign set zero fill, the aligned routines set the alignment; realloc, reallocarray
 * and aligned_realloc keep both (bytes a zero-fill block gains read as zero; a moved block
 * keeps its alignment); resize and aligned_resize keep neither and copy nothing.
 * Array routines fail with ENOMEM when dim * elem_size overflows; the aligned ones with
 * EINVAL unless the alignment is a power of two.
 */
void *lfh_aalloc(size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *lfh_amemalign(size_t alignment, size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *lfh_cmemalign(size_t alignment, size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *lfh_resize(void *ptr, size_t size);
void *lfh_aligned_resize(void *ptr, size_t alignment, size_t size);
void *lfh_aligned_realloc(void *ptr, size_t alignment, size_t size);
/* The request size of a block from any routine but plain malloc (and realloc of such a
 * block), whose small blocks keep no record: for those, the usable size. 0 for NULL and
 * for pointers lfheap did not hand out. */
size_t lfh_malloc_size(void *ptr);
/* The alignment the block was requested with (at least 16); 0 for NULL and foreign
 * pointers. */
size_t lfh_malloc_alignment(void *ptr);
/* Whether the block has the sticky zero-fill property. */
bool lfh_malloc_zero_fill(void *ptr);

/* The release libraries also export these three without the prefix. */
size_t malloc_size(void *ptr);
size_t malloc_alignment(void *ptr);
bool malloc_zero_fill(void *ptr);

/* llheap's own names, for programs that ask for them: they are not exported by the
 * library (a preloaded library must not capture other libraries' symbols). */
#ifdef LFHEAP_LLHEAP_NAMES
static inline void *aalloc(size_t dim, size_t elem_size)
{
    return lfh_aalloc(dim, elem_size);
}
static inline void *amemalign(size_t alignment, size_t dim, size_t elem_size)
{
    return lfh_amemalign(alignment, dim, elem_size);
}
static inline void *cmemalign(size_t alignment, size_t dim, size_t elem_size)
{
    return lfh_cmemalign(alignment, dim, elem_size);
}
static inline void *resize(void *ptr, size_t size)
{
    return lfh_resize(ptr, size);
}
static inline void *aligned_resize(void *ptr, size_t alignment, size_t size)
{
    return lfh_aligned_resize(ptr, alignment, size);
}
static inline void *aligned_realloc(void *ptr, size_t alignment, size_t size)
{
    return lfh_aligned_realloc(ptr, alignment, size);
}
#endif

#ifdef __cplusplus
}
#endif

#endif
