/*
 * lfheap: a lock-free malloc. This header declares the lfh_-prefixed API, which is
 * always available, also when lfheap is linked beside another allocator. The shared
 * and static release libraries additionally define the standard names (malloc, free,
 * ...) with the same behaviour.
 */
#ifndef LFHEAP_H
#define LFHEAP_H

#include <malloc.h> /* struct mallinfo, struct mallinfo2 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
/* The routines that answer yes or no return bool: C99's and C++'s, and in a C89 program
 * the same type, _Bool, taken as a GNU extension so that -pedantic does not object. */
#if defined(__cplusplus)
#define LFH_BOOL bool
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L
#include <stdbool.h>
#define LFH_BOOL bool
#else
#define LFH_BOOL __extension__ _Bool
#endif

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LFH_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define LFH_MALLOC_ATTR
#endif

/* The C and POSIX allocation API, with glibc's semantics (docs/API.md). */
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
 * llheap's extensions (docs/API.md, "The routines"). Sticky properties: calloc and
 * cmemalign set zero fill, the aligned routines set the alignment; realloc, reallocarray
 * and aligned_realloc keep both (bytes a zero-fill block gains read as zero; a moved block
 * keeps its alignment); resize and aligned_resize keep neither and copy nothing.
 * Array routines fail with ENOMEM when dim * elem_size overflows; the aligned ones with
 * EINVAL unless the alignment is a power of two, checked first: `aligned_realloc(p, 3,
 * 0)` fails and p stays live. realloc and resize of a pointer that is no live block
 * return NULL with EINVAL, also with a size of 0, and free nothing.
 */
void *lfh_aalloc(size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *lfh_amemalign(size_t alignment, size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *lfh_cmemalign(size_t alignment, size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *lfh_resize(void *ptr, size_t size);
void *lfh_aligned_resize(void *ptr, size_t alignment, size_t size);
void *lfh_aligned_realloc(void *ptr, size_t alignment, size_t size);
/* The same for dim * elem_size bytes. */
void *lfh_resizearray(void *ptr, size_t dim, size_t elem_size);
void *lfh_aligned_resizearray(void *ptr, size_t alignment, size_t dim, size_t elem_size);
void *lfh_aligned_reallocarray(void *ptr, size_t alignment, size_t dim, size_t elem_size);
/* realloc and aligned_realloc (and their array forms) that leave the result in *ptrp and
 * return 0, or on failure return the error number (ENOMEM, EINVAL) and leave *ptrp
 * unchanged: `posix_realloc(&p, n)` cannot lose p. errno is never changed. A size of 0
 * frees *ptrp and leaves NULL there, unless the alignment is no power of two or *ptrp
 * is no live block: EINVAL then, and nothing is freed. A *ptrp of NULL gets a new block,
 * as realloc(NULL, n) does, for n = 0 too (malloc(0)'s unique block). EINVAL if ptrp is
 * NULL. */
int lfh_posix_realloc(void **ptrp, size_t size);
int lfh_posix_reallocarray(void **ptrp, size_t dim, size_t elem_size);
int lfh_posix_aligned_realloc(void **ptrp, size_t alignment, size_t size);
int lfh_posix_aligned_reallocarray(void **ptrp, size_t alignment, size_t dim, size_t elem_size);
/* The request size of a block from any routine but plain malloc (and realloc of such a
 * block), whose small blocks keep no record: for those, the usable size. 0 for NULL and
 * for pointers lfheap did not hand out (the debug and secure builds report those, as
 * for free, and so for the three queries below). */
size_t lfh_malloc_size(void *ptr);
/* The alignment the block was requested with (at least 16); 0 for NULL and foreign
 * pointers. */
size_t lfh_malloc_alignment(void *ptr);
/* Whether the block has the sticky zero-fill property. */
LFH_BOOL lfh_malloc_zero_fill(void *ptr);
/* Whether the block belongs to another thread's heap: a small block whose superblock the
 * calling thread's cache does not own, so that freeing it here sends it back rather
 * than into this thread's cache. False for large blocks, NULL and foreign pointers. */
LFH_BOOL lfh_malloc_remote(void *ptr);
/* Requests above this many bytes get a mapping of their own instead of arena pages
 * (llheap's crossover to mmap). */
size_t lfh_malloc_mmap_start(void);
/* The bytes by which lfheap grows its address space at a time (an arena). */
size_t lfh_malloc_extend(void);

/* The installed libraries also export these three without the prefix, as weak symbols
 * (below). */
size_t malloc_size(void *ptr);
size_t malloc_alignment(void *ptr);
LFH_BOOL malloc_zero_fill(void *ptr);

/*
 * Statistics (docs/STATISTICS.md). Every build has these routines; the -stats
 * libraries (liblfheap-stats.so, ...) count, the others report only what is known
 * without counters (the arenas) and say so. Counters are per thread, kept without atomic
 * read-modify-write, and summed when asked: totals include threads that are still
 * running.
 */
enum lfh_stats_routine {
    LFH_STATS_MALLOC,
    LFH_STATS_AALLOC,
    LFH_STATS_CALLOC,
    LFH_STATS_MEMALIGN,
    LFH_STATS_ALIGNED_ALLOC,
    LFH_STATS_POSIX_MEMALIGN,
    LFH_STATS_VALLOC,
    LFH_STATS_PVALLOC,
    LFH_STATS_AMEMALIGN,
    LFH_STATS_CMEMALIGN,
    LFH_STATS_RESIZE,
    LFH_STATS_ALIGNED_RESIZE,
    LFH_STATS_REALLOC, /* realloc and reallocarray */
    LFH_STATS_ALIGNED_REALLOC,
    LFH_STATS_ROUTINES
};

/* One allocating routine. A call that fails (NULL, or an error from posix_memalign)
 * counts in calls and failures only. For the resizing routines, alloc_bytes is the size
 * of the block they return, moved or not. */
struct lfh_stats_calls {
    uint64_t calls;         /* every call */
    uint64_t zero_calls;    /* calls that asked for 0 bytes */
    uint64_t failures;      /* calls that returned no block */
    uint64_t request_bytes; /* bytes asked for */
    uint64_t alloc_bytes;   /* bytes of the blocks returned (size class or chunk) */
};

struct lfh_stats_os {
    uint64_t calls;
    uint64_t bytes;
};

struct lfh_stats {
    int counters; /* 1 if this library counts (a -stats build); else only "always" fields */
    int debug;    /* 1 in the debug builds: request_in_use and free.request_bytes count */
    struct lfh_stats_calls routine[LFH_STATS_ROUTINES];
    struct {
        uint64_t calls;         /* free, cfree, free_sized, free_aligned_sized; not NULL */
        uint64_t null_calls;    /* of NULL */
        uint64_t invalid_calls; /* of a pointer that is no live block (ignored) */
        uint64_t request_bytes; /* debug builds: bytes the freed blocks were asked for */
        uint64_t alloc_bytes;   /* bytes of the freed blocks */
    } free;
    uint64_t remote_frees; /* blocks freed by a thread that does not own their superblock */
    uint64_t remote_bytes;
    struct lfh_stats_os mmap, munmap, madvise, mremap; /* calls to the kernel */
    uint64_t threads_started; /* thread caches set up: caches_new + caches_adopted */
    uint64_t threads_exited;  /* caches handed back: caches_orphaned + caches_flushed */
    uint64_t caches_new, caches_adopted, caches_orphaned, caches_flushed;
    uint64_t superblocks_created, superblocks_released, superblocks_live;
    uint64_t large_allocated, large_freed, large_live, large_live_bytes; /* arena chunks */
    uint64_t huge_allocated, huge_freed, huge_live, huge_live_bytes;     /* own mappings */
    uint64_t arenas, arena_bytes; /* always: arenas mapped and their size */
    uint64_t bytes_in_use;        /* bytes of live blocks (class or chunk size) */
    uint64_t request_in_use;      /* debug builds: bytes the live blocks were asked for */
};

/* Fills *out with the current totals. Returns 1 if the library counts, 0 if only the
 * fields marked "always" are filled (the rest are 0), -1 with EINVAL if out is NULL. */
int lfh_stats_get(struct lfh_stats *out);
/* Prints the totals, llheap-style, on the statistics file descriptor (stderr unless
 * changed), with write(2) only. */
void lfh_malloc_stats(void);
/* Sets the statistics file descriptor; returns the previous one. */
int lfh_malloc_stats_fd(int fd);
/* llheap's statistics control: malloc_stats_clear makes every count so far zero for the
 * reports that follow (lfh_stats_get, malloc_stats, malloc_info, heap_stats; the live
 * figures, differences of counts, are not changed); heap_stats prints the calls counted
 * by the calling thread's heap (its counters, which also hold those of earlier threads
 * that used them). */
void lfh_malloc_stats_clear(void);
void lfh_heap_stats(void);
/* Writes the totals as XML to fp's file descriptor, after fflush(fp), or through stdio to
 * a stream without one (an in-memory stream). 0 on success; EINVAL, returned as the
 * value with errno untouched (as glibc), if options is not 0 or fp is NULL. */
int lfh_malloc_info(int options, FILE *fp);
/* glibc's summaries from the same numbers, fields as glibc's (docs/API.md): uordblks
 * counts the live blocks in the arenas; hblkhd the blocks in mappings of their own. */
struct mallinfo lfh_mallinfo(void);
struct mallinfo2 lfh_mallinfo2(void);
/* Ignores every parameter and returns what glibc 2.36 returns: 0 for M_MXFAST outside 0
 * to 160, else 1, also for a parameter glibc does not know. */
int lfh_mallopt(int param, int value);

/* Every installed library also exports malloc_stats_fd without the prefix, and the others
 * above under glibc's names: malloc_stats, malloc_info, mallinfo, mallinfo2, mallopt. */
int malloc_stats_fd(int fd);

/* Debug builds (docs/DEBUGGING.md): a program may define this (llheap's hook) to
 * say how many requested bytes it leaves allocated on purpose; they are not reported as
 * unfreed at exit. A program that preloads the library must export it (-rdynamic).
 * Every library exports llheap's default, which returns 0, as a weak malloc_unfreed
 * (lfh_malloc_unfreed), so that a program that calls it without defining it links. */
size_t malloc_unfreed(void);
size_t lfh_malloc_unfreed(void);

/* llheap's own names. Every release library exports them as weak symbols, so that a
 * program's own function of the same name takes precedence (and links with the static
 * library); declared here only for programs that define LFHEAP_LLHEAP_NAMES, as a
 * program with such a function of its own may use lfheap.h too. */
#ifdef LFHEAP_LLHEAP_NAMES
void *aalloc(size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *amemalign(size_t alignment, size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *cmemalign(size_t alignment, size_t dim, size_t elem_size) LFH_MALLOC_ATTR;
void *resize(void *ptr, size_t size);
void *resizearray(void *ptr, size_t dim, size_t elem_size);
void *aligned_resize(void *ptr, size_t alignment, size_t size);
void *aligned_resizearray(void *ptr, size_t alignment, size_t dim, size_t elem_size);
void *aligned_realloc(void *ptr, size_t alignment, size_t size);
void *aligned_reallocarray(void *ptr, size_t alignment, size_t dim, size_t elem_size);
int posix_realloc(void **ptrp, size_t size);
int posix_reallocarray(void **ptrp, size_t dim, size_t elem_size);
int posix_aligned_realloc(void **ptrp, size_t alignment, size_t size);
int posix_aligned_reallocarray(void **ptrp, size_t alignment, size_t dim, size_t elem_size);
LFH_BOOL malloc_remote(void *ptr);
size_t malloc_mmap_start(void);
size_t malloc_extend(void);
void malloc_stats_clear(void);
void heap_stats(void);
#endif

#ifdef __cplusplus
}
#endif

#endif
