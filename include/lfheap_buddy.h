/*
 * lfheap_buddy: lfheap's page back-end on its own - a lock-free (non-blocking) buddy
 * allocator after NBBS (Marotta et al., IEEE TC). An instance manages one region of 2^k
 * bytes and hands out power-of-two chunks of it, from min_chunk to max_chunk bytes, each
 * aligned to its size relative to the region start; freeing a chunk merges it with its
 * free buddies at once. No call ever waits for another thread. The allocator never reads
 * or writes the chunks' memory; its own metadata is mapped with mmap.
 */
#ifndef LFHEAP_BUDDY_PUBLIC_H
#define LFHEAP_BUDDY_PUBLIC_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LFH_BUDDY_API __attribute__((visibility("default")))
#else
#define LFH_BUDDY_API
#endif

typedef struct lfh_buddy lfh_buddy;

/* Flags for lfh_buddy_create. */
#define LFH_BUDDY_PACKED   1u /* packed tree: 3 levels per word (fewer atomic operations) */
#define LFH_BUDDY_NO_HINTS 2u /* no per-thread free-slot hints */
#define LFH_BUDDY_SCATTER  4u /* start each thread's searches at random places */

/* Creates an instance over `region` (aligned to min_chunk and to the page size), or over
 * a region of `size` bytes aligned to `size` that it maps itself when region is NULL.
 * size, min_chunk (>= 64) and max_chunk (between them; 0 means size) are powers of two,
 * and size / min_chunk <= 2^30. NULL with errno EINVAL or ENOMEM on failure. */
LFH_BUDDY_API lfh_buddy *lfh_buddy_create(void *region, size_t size, size_t min_chunk,
                                          size_t max_chunk, unsigned flags);

/* Releases the instance's metadata, and its region if it mapped it. No call on the
 * instance may be running or follow. */
LFH_BUDDY_API void lfh_buddy_destroy(lfh_buddy *b);

/* A chunk of at least `size` bytes (the next power of two, at least min_chunk), or NULL
 * with errno ENOMEM when size > max_chunk or no free chunk was found. Under concurrent
 * use a call may fail while memory is being released or contended; a retry may succeed. */
LFH_BUDDY_API void *lfh_buddy_alloc(lfh_buddy *b, size_t size);

/* Frees the chunk that starts at p: 0, or -1 with errno EINVAL if p is not the start of
 * a live chunk of this instance. */
LFH_BUDDY_API int lfh_buddy_free(lfh_buddy *b, void *p);

/* The size of the live chunk that starts at p, or 0. */
LFH_BUDDY_API size_t lfh_buddy_size(const lfh_buddy *b, const void *p);

/* 1 if p lies in the instance's region, else 0. */
LFH_BUDDY_API int lfh_buddy_contains(const lfh_buddy *b, const void *p);

/* The first byte of the instance's region. */
LFH_BUDDY_API void *lfh_buddy_base(const lfh_buddy *b);

#ifdef __cplusplus
}
#endif

#endif
