/*
 * api_internal: what the files of the malloc family share. api.c holds the standard
 * routines (malloc, calloc, realloc, free and its sized forms, malloc_usable_size,
 * malloc_trim, mallopt) and the paths every family goes through (tracked blocks, the
 * descriptor of a live block, freeing a known block, resizing); api_aligned.c the aligned
 * routines (posix_memalign, aligned_alloc, memalign, valloc, pvalloc); api_llheap.c
 * llheap's extensions (array, resize and POSIX-style forms, sticky-property queries).
 * The functions declared here are defined in api.c and hidden (the build's default
 * visibility); the small ones are inline here, so each family compiles them in place.
 * api_exports.h maps the standard names to these files' lfh_ routines.
 */
#ifndef LFHEAP_API_INTERNAL_H
#define LFHEAP_API_INTERNAL_H

#include "common.h"
#include "debug.h"
#include "heap.h"
#include "pagemap.h"
#include "secure.h"
#include "stats.h"
#include "tcache.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The smallest alignment every block has. */
#define API_MIN_ALIGN 16

static inline void *fail_nomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* Bytes of a small block of the superblock desc describes; in the secure build, less its
 * tail canary. */
static inline size_t small_usable_size(const struct descriptor *desc)
{
    return desc->block_size - SECURE_TAIL_BYTES;
}

/* Bytes of the block desc describes (ptr is its start: see api_block_descriptor); in the
 * secure build, less its tail canary or guard page. */
static inline size_t usable_size(const struct descriptor *desc)
{
    return desc->class_index == HEAP_CLASS_LARGE ? desc->size - SECURE_GUARD_BYTES
                                                 : small_usable_size(desc);
}

/* Bytes a block needs for a request (at most PTRDIFF_MAX): the debug build's canary after
 * the request, or the secure build's tail canary at the block's end, included. */
static inline size_t block_room(size_t request)
{
    return debug_room(request) + SECURE_TAIL_BYTES;
}

/* The same for a large block, which ends in the secure build's guard page instead of a
 * tail canary: with the canary's 8 bytes counted, a realloc to a size within the last 8
 * bytes of the usable size asked for one more page and moved the block. */
static inline size_t large_room(size_t request)
{
    return debug_room(request);
}

/* The statistics build counts a call of an allocating routine that returned `block`
 * (NULL: it failed); the result is the block. */
LFH_INLINE void *counted(enum lfh_stats_routine routine, size_t request, void *block)
{
    if (STATS_ENABLED)
        stats_count_alloc(routine, request, block ? usable_size(pagemap_desc_of_own(block)) : 0);
    return block;
}

/* The same for a resizing routine that took a block of `old_usable` bytes (stats.h). */
LFH_INLINE void *counted_resize(enum lfh_stats_routine routine, size_t request, size_t old_usable,
                                void *block)
{
    if (STATS_ENABLED)
        stats_count_resize(routine, request, old_usable,
                           block ? usable_size(pagemap_desc_of_own(block)) : 0);
    return block;
}

/* A block that remembers its request size and sticky properties (llheap): a block of a
 * tracked class (heap.h) or a large block, with its record written. `props->align` is a
 * power of two of at least API_MIN_ALIGN. The first `props->request` bytes are zeroed
 * if `clear`. NULL with errno ENOMEM on failure. */
void *api_alloc_tracked(const struct heap_props *props, bool clear);

/* malloc, uncounted. */
void *api_malloc_block(size_t size);

/* The descriptor of the live block that starts at `ptr`, or NULL if `ptr` is no block
 * lfheap handed out and the program still holds (the secure build stops the program). */
struct descriptor *api_block_descriptor(const void *ptr, const char *routine);

/* Frees the block at ptr, whose descriptor is desc, uncounted. */
void api_free_known_block(void *ptr, struct descriptor *desc);

/* The record of a block, or what a plain block's would be (its whole block requested). */
struct heap_props api_block_props(struct descriptor *desc, const void *ptr);

/* Tries to give the block at ptr (desc) `size` bytes where it is, aligned to `align`;
 * returns the (possibly moved, for a large block) address, or NULL to say it must move.
 * On success the block's record, if it has one, still needs updating. */
void *api_resize_in_place(void *ptr, struct descriptor *desc, size_t size, size_t align);

/* True if the block at ptr (desc) holds `size` bytes aligned to `align` where it is,
 * whatever api_resize_in_place decided (which moves a block that would waste much): a
 * shrink whose move finds no memory then stays, as glibc's shrinks never fail. A block
 * mapped on its own then gives back the pages past `size`. */
bool api_stays_in_place(struct descriptor *desc, void *ptr, size_t size, size_t align);

/* realloc(ptr, 0) and its forms (ptr not NULL), counted as `routine`: frees the block and
 * returns 0, or returns EINVAL and frees nothing if ptr is no live block; errno is not
 * the answer (freeing may change it). */
int api_resize_to_zero(enum lfh_stats_routine routine, const char *name, void *ptr);

/* What realloc and resize do first with ptr (not NULL), counted as `routine`: NULL if
 * that ends the call (ptr is no live block: ignored, errno EINVAL; or size is 0 and the
 * block freed), else its descriptor. */
struct descriptor *api_resize_begin(enum lfh_stats_routine routine, const char *name, void *ptr,
                                    size_t size);

/* realloc, reallocarray and aligned_realloc (`align` not 0: a power of two, at least
 * API_MIN_ALIGN), counted as `routine`. */
void *api_realloc_call(enum lfh_stats_routine routine, const char *name, void *ptr, size_t size,
                       size_t align);

/* The properties of a new block: alignments below the minimum are the minimum. */
static inline struct heap_props props_for(size_t size, size_t align, bool zero_fill)
{
    return (struct heap_props){.request = size,
                               .align = align < API_MIN_ALIGN ? API_MIN_ALIGN : align,
                               .zero_fill = zero_fill,
                               .tracked = true};
}

static inline int is_power_of_two(size_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

/* The tracked bins start after the plain ones. */
#define API_TRACKED_BINS (SIZECLASS_COUNT * SIZECLASS_STRIDE)

/* The fast path of a small tracked block of the minimum alignment (calloc's, and the
 * aligned routines' for an alignment every block has): a block of the tracked twin of
 * malloc's class for `bytes`, its record written (`record`: HEAP_RECORD_CALLOC or
 * HEAP_RECORD_MALLOC, the request added). Up to SIZECLASS_LOOKUP_MAX the class comes from
 * malloc's table and NULL says the bin is empty; above, through the cache's slow path,
 * NULL says out of memory. NULL too for a large request and in the debug build, whose
 * records carry block states: the general path (api_alloc_tracked) takes over. */
LFH_INLINE void *tracked_small_take(size_t bytes, uint32_t record, size_t *usable)
{
    if (DEBUG_ENABLED)
        return NULL;
    void *block;
    if (LFH_LIKELY(bytes <= SIZECLASS_LOOKUP_MAX - SECURE_TAIL_BYTES))
        block = tcache_bin_take(tcache_base() + API_TRACKED_BINS +
                                sizeclass_lookup[bytes + SECURE_TAIL_BYTES]);
    else if (bytes <= SIZECLASS_MAX_SIZE - SECURE_TAIL_BYTES)
        block = tcache_alloc(heap_tracked_class(sizeclass_of(bytes + SECURE_TAIL_BYTES)));
    else
        return NULL;
    if (LFH_LIKELY(block != NULL)) {
        struct descriptor *desc = pagemap_desc_of_own(block);
        *heap_record_at(desc, block) = (uint32_t)bytes | record;
        *usable = small_usable_size(desc);
    }
    return block;
}

/* The aligned routines: `align` is a power of two. One that every block has takes the
 * fast path: memalign(8 or 16) is common (rptest: two thirds of its blocks). */
static inline void *alloc_aligned(size_t align, size_t size, bool zero_fill)
{
    if (align <= API_MIN_ALIGN) {
        size_t usable;
        void *block =
            tracked_small_take(size, zero_fill ? HEAP_RECORD_CALLOC : HEAP_RECORD_MALLOC, &usable);
        if (LFH_LIKELY(block != NULL))
            return zero_fill ? memset(block, 0, usable) : block;
    }
    struct heap_props props = props_for(size, align, zero_fill);
    return api_alloc_tracked(&props, zero_fill);
}

/* llheap's array routines and array forms: dim * elem_size bytes; a product that
 * overflows is SIZE_MAX, which fails like any request above PTRDIFF_MAX (ENOMEM, an old
 * block untouched). */
static inline size_t array_bytes(size_t dim, size_t elem_size)
{
    size_t bytes;
    return __builtin_mul_overflow(dim, elem_size, &bytes) ? SIZE_MAX : bytes;
}

#endif
