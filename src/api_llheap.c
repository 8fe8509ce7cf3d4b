/*
 * api_llheap: llheap's extensions of the malloc family: the array forms (aalloc,
 * amemalign, cmemalign), resize and its forms, aligned_realloc, the POSIX-style forms
 * (posix_realloc, ...), the queries of a block's sticky properties (malloc_size,
 * malloc_alignment, malloc_zero_fill) and of the heap (malloc_remote, malloc_mmap_start,
 * malloc_extend). They go through api.c's paths (api_internal.h), so a block of any
 * family answers to all of them.
 */
#include "lfheap.h"

#include "api_exports.h"
#include "api_internal.h"
#include "arena.h"
#include "tcache.h"

LFH_EXPORT void *lfh_aalloc(size_t dim, size_t elem_size)
{
    size_t bytes = array_bytes(dim, elem_size);
    if (bytes == SIZE_MAX)
        return counted(LFH_STATS_AALLOC, SIZE_MAX, fail_nomem());
    struct heap_props props = props_for(bytes, API_MIN_ALIGN, false);
    return counted(LFH_STATS_AALLOC, bytes, api_alloc_tracked(&props, false));
}

static void *alloc_aligned_array(enum lfh_stats_routine routine, size_t align, size_t dim,
                                 size_t elem_size, bool zero_fill)
{
    size_t bytes = array_bytes(dim, elem_size);
    if (!is_power_of_two(align)) {
        errno = EINVAL;
        return counted(routine, bytes, NULL);
    }
    if (bytes == SIZE_MAX)
        return counted(routine, bytes, fail_nomem());
    return counted(routine, bytes, alloc_aligned(align, bytes, zero_fill));
}

LFH_EXPORT void *lfh_amemalign(size_t alignment, size_t dim, size_t elem_size)
{
    return alloc_aligned_array(LFH_STATS_AMEMALIGN, alignment, dim, elem_size, false);
}

LFH_EXPORT void *lfh_cmemalign(size_t alignment, size_t dim, size_t elem_size)
{
    return alloc_aligned_array(LFH_STATS_CMEMALIGN, alignment, dim, elem_size, true);
}

/* The descriptor of the block at ptr for a query named `routine`, or NULL if ptr is no
 * live block. The debug build, which keeps no free marks, asks its block states, and
 * reports a freed or foreign pointer as malloc_usable_size does. */
static struct descriptor *queried_block(void *ptr, const char *routine)
{
    struct descriptor *desc = api_block_descriptor(ptr, routine);
    size_t request;
    if (DEBUG_ENABLED && ptr && !debug_check(routine, ptr, desc, false, &request))
        return NULL;
    return desc;
}

LFH_EXPORT size_t lfh_malloc_size(void *ptr)
{
    struct descriptor *desc = queried_block(ptr, "malloc_size");
    return desc ? api_block_props(desc, ptr).request : 0;
}

LFH_EXPORT size_t lfh_malloc_alignment(void *ptr)
{
    struct descriptor *desc = queried_block(ptr, "malloc_alignment");
    return desc ? api_block_props(desc, ptr).align : 0;
}

LFH_EXPORT bool lfh_malloc_zero_fill(void *ptr)
{
    struct descriptor *desc = queried_block(ptr, "malloc_zero_fill");
    return desc ? api_block_props(desc, ptr).zero_fill : false;
}

LFH_EXPORT void *lfh_aligned_realloc(void *ptr, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return counted(LFH_STATS_ALIGNED_REALLOC, size, NULL);
    }
    size_t align = alignment < API_MIN_ALIGN ? API_MIN_ALIGN : alignment;
    return api_realloc_call(LFH_STATS_ALIGNED_REALLOC, "aligned_realloc", ptr, size, align);
}

/* llheap's resize: a block of `size` bytes aligned to `align`, with no sticky property
 * and no promise about its contents: the old block's if it fits, else a new one (the
 * old block is freed only once the new one exists, so failure leaves it intact; a
 * shrink that finds no new block keeps the old one, api_stays_in_place). */
static void *resize_call(enum lfh_stats_routine routine, const char *name, void *ptr, size_t size,
                         size_t align, bool aligned_routine)
{
    struct heap_props props = props_for(size, align, false);
    props.tracked = aligned_routine;
    if (!ptr)
        return counted(routine, size,
                       aligned_routine ? api_alloc_tracked(&props, false) : api_malloc_block(size));
    struct descriptor *desc = api_resize_begin(routine, name, ptr, size);
    if (!desc)
        return NULL;
    size_t old_usable = usable_size(desc);
    if (size > PTRDIFF_MAX)
        return counted_resize(routine, size, old_usable, fail_nomem());
    bool recorded = desc->class_index == HEAP_CLASS_LARGE || desc->records != NULL;
    bool may_stay = recorded || !aligned_routine;
    void *kept = may_stay ? api_resize_in_place(ptr, desc, size, props.align) : NULL;
    if (!kept) {
        int saved_errno = errno;
        void *fresh = aligned_routine ? api_alloc_tracked(&props, false) : api_malloc_block(size);
        if (fresh) {
            api_free_known_block(ptr, desc);
            return counted_resize(routine, size, old_usable, fresh);
        }
        if (!may_stay || !api_stays_in_place(desc, ptr, size, props.align))
            return counted_resize(routine, size, old_usable, NULL);
        errno = saved_errno;
        kept = ptr;
    }
    debug_resized(desc, kept, size);
    if (recorded)
        heap_props_set(desc, kept, &props);
    return counted_resize(routine, size, old_usable, kept);
}

LFH_EXPORT void *lfh_resize(void *ptr, size_t size)
{
    return resize_call(LFH_STATS_RESIZE, "resize", ptr, size, API_MIN_ALIGN, false);
}

LFH_EXPORT void *lfh_aligned_resize(void *ptr, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return counted(LFH_STATS_ALIGNED_RESIZE, size, NULL);
    }
    return resize_call(LFH_STATS_ALIGNED_RESIZE, "aligned_resize", ptr, size, alignment, true);
}

LFH_EXPORT void *lfh_resizearray(void *ptr, size_t dim, size_t elem_size)
{
    return lfh_resize(ptr, array_bytes(dim, elem_size));
}

LFH_EXPORT void *lfh_aligned_resizearray(void *ptr, size_t alignment, size_t dim, size_t elem_size)
{
    return lfh_aligned_resize(ptr, alignment, array_bytes(dim, elem_size));
}

LFH_EXPORT void *lfh_aligned_reallocarray(void *ptr, size_t alignment, size_t dim, size_t elem_size)
{
    return lfh_aligned_realloc(ptr, alignment, array_bytes(dim, elem_size));
}

/* llheap's POSIX-style forms: the result goes to *ptrp and the error number is the
 * return value, so that `posix_realloc(&p, n)` cannot lose p when it fails. On failure
 * *ptrp keeps its value; errno always does. `aligned`: aligned_realloc, else realloc.
 * A bad alignment is refused before a size of 0 could free the block, and a size of 0
 * asks api_resize_to_zero whether the block was freed: realloc's NULL cannot tell. */
static int posix_realloc_call(void **ptrp, bool aligned, size_t alignment, size_t size)
{
    if (!ptrp)
        return EINVAL;
    enum lfh_stats_routine routine = aligned ? LFH_STATS_ALIGNED_REALLOC : LFH_STATS_REALLOC;
    if (aligned && !is_power_of_two(alignment)) {
        counted(routine, size, NULL);
        return EINVAL;
    }
    int saved_errno = errno;
    int error = 0;
    if (size == 0 && *ptrp) {
        error = api_resize_to_zero(routine, aligned ? "aligned_realloc" : "realloc", *ptrp);
        if (!error)
            *ptrp = NULL;
    } else {
        void *fresh = aligned ? lfh_aligned_realloc(*ptrp, alignment, size)
                              : api_realloc_call(routine, "realloc", *ptrp, size, 0);
        if (fresh)
            *ptrp = fresh;
        else
            error = errno;
    }
    errno = saved_errno;
    return error;
}

LFH_EXPORT int lfh_posix_realloc(void **ptrp, size_t size)
{
    return posix_realloc_call(ptrp, false, 0, size);
}

LFH_EXPORT int lfh_posix_reallocarray(void **ptrp, size_t dim, size_t elem_size)
{
    return posix_realloc_call(ptrp, false, 0, array_bytes(dim, elem_size));
}

LFH_EXPORT int lfh_posix_aligned_realloc(void **ptrp, size_t alignment, size_t size)
{
    return posix_realloc_call(ptrp, true, alignment, size);
}

LFH_EXPORT int lfh_posix_aligned_reallocarray(void **ptrp, size_t alignment, size_t dim,
                                              size_t elem_size)
{
    return posix_realloc_call(ptrp, true, alignment, array_bytes(dim, elem_size));
}

LFH_EXPORT bool lfh_malloc_remote(void *ptr)
{
    struct descriptor *desc = queried_block(ptr, "malloc_remote");
    return desc && desc->class_index != HEAP_CLASS_LARGE && !tcache_owns(desc);
}

LFH_EXPORT size_t lfh_malloc_mmap_start(void)
{
    return ARENA_MAX_CHUNK;
}

LFH_EXPORT size_t lfh_malloc_extend(void)
{
    return ARENA_SIZE;
}

/* llheap's hook: a program defines malloc_unfreed to say how many requested bytes it
 * leaves allocated on purpose, which the debug builds' report at exit leaves out
 * (debug.c). This is llheap's default, none, exported as a weak malloc_unfreed that the
 * program's definition replaces, so that a program that only calls it links too. */
LFH_EXPORT size_t lfh_malloc_unfreed(void)
{
    return 0;
}

/* ---- llheap's names --------------------------------------------------------------- */

API_EXPORTS(API_EXPORTS_LLHEAP)
