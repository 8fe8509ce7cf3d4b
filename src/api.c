/*
 * api: the malloc family. Each routine is thin: find the size class (sizeclass), take a
 * block from the calling thread's cache (tcache), which falls back to the lock-free heap
 * (heap), which gets pages from the OS (os); free finds the block's descriptor through
 * the page map (pagemap). Read top-down, this file follows a malloc to the kernel.
 *
 * Semantics are glibc's: requests above PTRDIFF_MAX fail with ENOMEM, malloc(0) returns a
 * unique block, realloc(p, 0) frees p and returns NULL, posix_memalign leaves *memptr
 * alone on failure. Pointers lfheap never returned are ignored by free and realloc
 * (realloc returns NULL with EINVAL) and have usable size 0.
 *
 * Every routine is defined once as lfh_<name>; the release build also exports the
 * standard names (and glibc's __libc_* entry points) as aliases of the same code.
 */
#include "lfheap.h"

#include "api.h"
#include "arena.h"
#include "heap.h"
#include "os.h"
#include "pagemap.h"
#include "sizeclass.h"
#include "tcache.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* The smallest alignment every block has. */
#define API_MIN_ALIGN 16

static void *fail_nomem(void)
{
    errno = ENOMEM;
    return NULL;
}

/* ---- allocation ------------------------------------------------------------------- */

static LFH_NOINLINE void *alloc_large(size_t size, size_t align)
{
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    bool zeroed;
    void *block = heap_large_alloc(size, align, &zeroed);
    return block ? block : fail_nomem();
}

static LFH_NOINLINE void *malloc_medium_or_large(size_t size)
{
    if (size <= SIZECLASS_MAX_SIZE)
        return tcache_alloc(sizeclass_of(size));
    return alloc_large(size, API_MIN_ALIGN);
}

LFH_EXPORT void *lfh_malloc(size_t size)
{
    if (LFH_LIKELY(size <= SIZECLASS_LOOKUP_MAX))
        return tcache_alloc_small(size);
    return malloc_medium_or_large(size);
}

LFH_EXPORT void *lfh_calloc(size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes))
        return fail_nomem();
    if (bytes > SIZECLASS_MAX_SIZE) {
        if (bytes > PTRDIFF_MAX)
            return fail_nomem();
        /* Pages fresh from the kernel or decommitted read as zeros already. */
        bool zeroed;
        void *block = heap_large_alloc(bytes, API_MIN_ALIGN, &zeroed);
        if (!block)
            return fail_nomem();
        if (!zeroed)
            memset(block, 0, bytes);
        return block;
    }
    void *block = tcache_alloc(sizeclass_of(bytes));
    if (block)
        memset(block, 0, bytes);
    return block;
}

static void *alloc_aligned(size_t align, size_t size)
{
    if (align <= API_MIN_ALIGN)
        return lfh_malloc(size);
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    unsigned cls = sizeclass_for_aligned(size, align);
    if (cls < SIZECLASS_COUNT)
        return tcache_alloc(cls);
    return alloc_large(size, align < OS_PAGE_SIZE ? OS_PAGE_SIZE : align);
}

static inline int is_power_of_two(size_t x)
{
    return x != 0 && (x & (x - 1)) == 0;
}

LFH_EXPORT int lfh_posix_memalign(void **memptr, size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment) || alignment % sizeof(void *) != 0)
        return EINVAL;
    int saved = errno;
    void *block = alloc_aligned(alignment, size);
    if (!block) {
        errno = saved;
        return ENOMEM;
    }
    *memptr = block;
    return 0;
}

LFH_EXPORT void *lfh_aligned_alloc(size_t alignment, size_t size)
{
    if (!is_power_of_two(alignment)) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_aligned(alignment, size);
}

LFH_EXPORT void *lfh_memalign(size_t alignment, size_t size)
{
    /* glibc: alignments that are not powers of two are rounded up to one. */
    if (alignment > SIZE_MAX / 2 + 1) {
        errno = EINVAL;
        return NULL;
    }
    size_t align = 1;
    while (align < alignment)
        align <<= 1;
    return alloc_aligned(align, size);
}

LFH_EXPORT void *lfh_valloc(size_t size)
{
    return alloc_aligned(OS_PAGE_SIZE, size);
}

LFH_EXPORT void *lfh_pvalloc(size_t size)
{
    size_t rounded = (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
    if (rounded < size)
        return fail_nomem();
    return alloc_aligned(OS_PAGE_SIZE, rounded ? rounded : OS_PAGE_SIZE);
}

/* ---- release ---------------------------------------------------------------------- */

static LFH_NOINLINE void free_slow(void *ptr)
{
    struct descriptor *desc = pagemap_lookup(ptr);
    if (!desc)
        return; /* NULL, or not lfheap's: ignored */
    if (desc->class_index == HEAP_CLASS_LARGE) {
        if (ptr == desc->start)
            heap_large_free(desc);
        return;
    }
    tcache_free_slow(ptr, desc);
}

LFH_EXPORT void lfh_free(void *ptr)
{
    /* Unknown pointers (NULL too) get a descriptor no thread owns: slow path. */
    if (LFH_LIKELY(tcache_free(ptr, pagemap_find(ptr))))
        return;
    free_slow(ptr);
}

LFH_EXPORT void lfh_cfree(void *ptr)
{
    lfh_free(ptr);
}

LFH_EXPORT void lfh_free_sized(void *ptr, size_t size)
{
    (void)size;
    lfh_free(ptr);
}

LFH_EXPORT void lfh_free_aligned_sized(void *ptr, size_t alignment, size_t size)
{
    (void)alignment;
    (void)size;
    lfh_free(ptr);
}

/* ---- queries and resizing --------------------------------------------------------- */

/* Bytes usable at ptr inside the block desc describes. */
static size_t usable_size(const struct descriptor *desc, const void *ptr)
{
    size_t offset = (size_t)((const char *)ptr - desc->start);
    if (desc->class_index == HEAP_CLASS_LARGE)
        return desc->size - offset;
    return desc->block_size - offset % desc->block_size;
}

LFH_EXPORT size_t lfh_malloc_usable_size(void *ptr)
{
    struct descriptor *desc = pagemap_lookup(ptr);
    return desc ? usable_size(desc, ptr) : 0;
}

LFH_EXPORT void *lfh_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return lfh_malloc(size);
    if (size == 0) {
        lfh_free(ptr);
        return NULL;
    }
    struct descriptor *desc = pagemap_lookup(ptr);
    if (!desc) {
        errno = EINVAL;
        return NULL;
    }
    size_t usable = usable_size(desc, ptr);
    if (desc->class_index != HEAP_CLASS_LARGE) {
        /* In place while the request still fits and would not waste over half the block. */
        if (size <= usable && (size > usable / 2 || sizeclass_of(size) == desc->class_index))
            return ptr;
    } else if (ptr == desc->start && size > SIZECLASS_MAX_SIZE) {
        if (size > PTRDIFF_MAX)
            return fail_nomem();
        void *moved = heap_large_resize(desc, size);
        if (moved)
            return moved;
    }
    void *fresh = lfh_malloc(size);
    if (!fresh)
        return NULL;
    memcpy(fresh, ptr, size < usable ? size : usable);
    lfh_free(ptr);
    return fresh;
}

LFH_EXPORT void *lfh_reallocarray(void *ptr, size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes))
        return fail_nomem();
    return lfh_realloc(ptr, bytes);
}

LFH_EXPORT int lfh_malloc_trim(size_t pad)
{
    (void)pad;
    unsigned cached = tcache_flush_all();
    return (cached != 0) | (arena_purge_all() != 0);
}

/* ---- the standard names ----------------------------------------------------------- */

#ifndef LFHEAP_PREFIX_ONLY
/* The aliases share the target's code; GCC would have each one restate its attributes. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
#define LFH_ALIAS(name, target)                                                            \
    extern __typeof(target) name __attribute__((alias(#target), visibility("default")))

LFH_ALIAS(malloc, lfh_malloc);
LFH_ALIAS(calloc, lfh_calloc);
LFH_ALIAS(realloc, lfh_realloc);
LFH_ALIAS(reallocarray, lfh_reallocarray);
LFH_ALIAS(free, lfh_free);
LFH_ALIAS(cfree, lfh_cfree);
LFH_ALIAS(free_sized, lfh_free_sized);
LFH_ALIAS(free_aligned_sized, lfh_free_aligned_sized);
LFH_ALIAS(posix_memalign, lfh_posix_memalign);
LFH_ALIAS(aligned_alloc, lfh_aligned_alloc);
LFH_ALIAS(memalign, lfh_memalign);
LFH_ALIAS(valloc, lfh_valloc);
LFH_ALIAS(pvalloc, lfh_pvalloc);
LFH_ALIAS(malloc_usable_size, lfh_malloc_usable_size);
LFH_ALIAS(malloc_trim, lfh_malloc_trim);

/* glibc's own entry points, which parts of glibc and some programs call directly: with
 * these, no allocation escapes to glibc's heap. */
LFH_ALIAS(__libc_malloc, lfh_malloc);
LFH_ALIAS(__libc_calloc, lfh_calloc);
LFH_ALIAS(__libc_realloc, lfh_realloc);
LFH_ALIAS(__libc_free, lfh_free);
LFH_ALIAS(__libc_cfree, lfh_cfree);
LFH_ALIAS(__libc_memalign, lfh_memalign);
LFH_ALIAS(__libc_valloc, lfh_valloc);
LFH_ALIAS(__libc_pvalloc, lfh_pvalloc);
LFH_ALIAS(__posix_memalign, lfh_posix_memalign);

/* The names api.h declares: bound inside the library, so api_cxx.c calls them directly. */
#define LFH_INTERNAL_ALIAS(name, target)                                                   \
    extern __typeof(target) name __attribute__((alias(#target), visibility("hidden")))

LFH_INTERNAL_ALIAS(api_malloc, lfh_malloc);
LFH_INTERNAL_ALIAS(api_aligned_alloc, lfh_aligned_alloc);
LFH_INTERNAL_ALIAS(api_free, lfh_free);
LFH_INTERNAL_ALIAS(api_free_sized, lfh_free_sized);
LFH_INTERNAL_ALIAS(api_free_aligned_sized, lfh_free_aligned_sized);
#endif
