/*
 * api_exports: the export table. Every standard, glibc and llheap name the library
 * exports, with the lfh_ routine it is (C++'s operators are api_cxx.c's, the signal
 * routines sigwrap.c's), and the hidden names of api.h. Each name is an alias: a second
 * symbol for the routine's own code, so a call of malloc costs what a call of lfh_malloc
 * does. An alias can only name code of its own object, so the table has one list per file
 * that defines routines, and each of those files ends with API_EXPORTS(its list). The
 * prefix-only build (LFHEAP_PREFIX_ONLY, config.h) exports the lfh_ names alone: there
 * API_EXPORTS is empty.
 *
 * Each row is (binding, name, routine):
 *   STRONG  the standard and glibc names: they replace the C library's.
 *   WEAK    llheap's names: weak, so that a program with a function of the same name
 *           links with the static library (and keeps its own: it also interposes the
 *           shared one).
 *   HIDDEN  the names api.h declares: bound inside the library, so api_cxx.c calls them
 *           directly rather than through the PLT.
 */
#ifndef LFHEAP_API_EXPORTS_H
#define LFHEAP_API_EXPORTS_H

#include "config.h"

/* api.c: the standard routines, and glibc's own entry points (__libc_*), which parts of
 * glibc and some programs call directly: with these, no allocation escapes to glibc's
 * heap. */
#define API_EXPORTS_STANDARD(X)                                                                    \
    X(STRONG, malloc, lfh_malloc)                                                                  \
    X(STRONG, calloc, lfh_calloc)                                                                  \
    X(STRONG, realloc, lfh_realloc)                                                                \
    X(STRONG, reallocarray, lfh_reallocarray)                                                      \
    X(STRONG, free, lfh_free)                                                                      \
    X(STRONG, cfree, lfh_cfree)                                                                    \
    X(STRONG, free_sized, lfh_free_sized)                                                          \
    X(STRONG, free_aligned_sized, lfh_free_aligned_sized)                                          \
    X(STRONG, malloc_usable_size, lfh_malloc_usable_size)                                          \
    X(STRONG, malloc_trim, lfh_malloc_trim)                                                        \
    X(STRONG, mallopt, lfh_mallopt)                                                                \
    X(STRONG, __libc_malloc, lfh_malloc)                                                           \
    X(STRONG, __libc_calloc, lfh_calloc)                                                           \
    X(STRONG, __libc_realloc, lfh_realloc)                                                         \
    X(STRONG, __libc_free, lfh_free)                                                               \
    X(STRONG, __libc_cfree, lfh_cfree)                                                             \
    X(HIDDEN, api_malloc, lfh_malloc)                                                              \
    X(HIDDEN, api_free, lfh_free)

/* api_aligned.c */
#define API_EXPORTS_ALIGNED(X)                                                                     \
    X(STRONG, posix_memalign, lfh_posix_memalign)                                                  \
    X(STRONG, aligned_alloc, lfh_aligned_alloc)                                                    \
    X(STRONG, memalign, lfh_memalign)                                                              \
    X(STRONG, valloc, lfh_valloc)                                                                  \
    X(STRONG, pvalloc, lfh_pvalloc)                                                                \
    X(STRONG, __libc_memalign, lfh_memalign)                                                       \
    X(STRONG, __libc_valloc, lfh_valloc)                                                           \
    X(STRONG, __libc_pvalloc, lfh_pvalloc)                                                         \
    X(STRONG, __posix_memalign, lfh_posix_memalign)                                                \
    X(HIDDEN, api_aligned_alloc, lfh_aligned_alloc)

/* api_llheap.c */
#define API_EXPORTS_LLHEAP(X)                                                                      \
    X(WEAK, aalloc, lfh_aalloc)                                                                    \
    X(WEAK, amemalign, lfh_amemalign)                                                              \
    X(WEAK, cmemalign, lfh_cmemalign)                                                              \
    X(WEAK, resize, lfh_resize)                                                                    \
    X(WEAK, resizearray, lfh_resizearray)                                                          \
    X(WEAK, aligned_resize, lfh_aligned_resize)                                                    \
    X(WEAK, aligned_resizearray, lfh_aligned_resizearray)                                          \
    X(WEAK, aligned_realloc, lfh_aligned_realloc)                                                  \
    X(WEAK, aligned_reallocarray, lfh_aligned_reallocarray)                                        \
    X(WEAK, posix_realloc, lfh_posix_realloc)                                                      \
    X(WEAK, posix_reallocarray, lfh_posix_reallocarray)                                            \
    X(WEAK, posix_aligned_realloc, lfh_posix_aligned_realloc)                                      \
    X(WEAK, posix_aligned_reallocarray, lfh_posix_aligned_reallocarray)                            \
    X(WEAK, malloc_size, lfh_malloc_size)                                                          \
    X(WEAK, malloc_alignment, lfh_malloc_alignment)                                                \
    X(WEAK, malloc_zero_fill, lfh_malloc_zero_fill)                                                \
    X(WEAK, malloc_remote, lfh_malloc_remote)                                                      \
    X(WEAK, malloc_mmap_start, lfh_malloc_mmap_start)                                              \
    X(WEAK, malloc_extend, lfh_malloc_extend)                                                      \
    X(WEAK, malloc_unfreed, lfh_malloc_unfreed)

/* stats_report.c: glibc's reports, and llheap's. */
#define API_EXPORTS_STATS_REPORT(X)                                                                \
    X(STRONG, malloc_stats, lfh_malloc_stats)                                                      \
    X(STRONG, malloc_info, lfh_malloc_info)                                                        \
    X(STRONG, mallinfo, lfh_mallinfo)                                                              \
    X(STRONG, mallinfo2, lfh_mallinfo2)                                                            \
    X(WEAK, malloc_stats_fd, lfh_malloc_stats_fd)                                                  \
    X(WEAK, malloc_stats_clear, lfh_malloc_stats_clear)                                            \
    X(WEAK, heap_stats, lfh_heap_stats)

#if API_STANDARD_NAMES
/* The aliases share the target's code; GCC would have each one restate its attributes. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
#define API_BINDING_STRONG(target) alias(#target), visibility("default")
#define API_BINDING_WEAK(target)   weak, alias(#target), visibility("default")
#define API_BINDING_HIDDEN(target) alias(#target), visibility("hidden")
#define API_ALIAS(binding, name, target)                                                           \
    extern __typeof(target) name __attribute__((API_BINDING_##binding(target)));
#define API_EXPORTS(list) list(API_ALIAS)
#else
#define API_EXPORTS(list)
#endif

#endif
