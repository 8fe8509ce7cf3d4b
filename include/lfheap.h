/*
 * lfheap: a lock-free malloc. This header declares the lfh_-prefixed API, which is
 * always available, also when lfheap is linked beside another allocator. The shared
 * and static release libraries additionally define the standard names (malloc, free,
 * ...) with the same behaviour.
 */
#ifndef LFHEAP_H
#define LFHEAP_H

#include <stddef.h>

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

#ifdef __cplusplus
}
#endif

#endif
