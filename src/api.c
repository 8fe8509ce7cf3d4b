/*
 * api: the standard malloc family, and the paths every family of the API goes through.
 * Each routine is thin: find the size class (sizeclass), take a block from the calling
 * thread's cache (tcache), which falls back to the lock-free heap (heap), which gets
 * pages from the OS (os); free finds the block's descriptor through the page map
 * (pagemap). Read top-down, this file follows a malloc to the kernel. The aligned
 * routines are api_aligned.c's, llheap's extensions api_llheap.c's; what they share with
 * this file is in api_internal.h.
 *
 * Semantics are glibc's: requests above PTRDIFF_MAX fail with ENOMEM, malloc(0) returns a
 * unique block, realloc(p, 0) frees p and returns NULL, posix_memalign leaves *memptr
 * alone on failure. Pointers lfheap never returned are ignored by free and realloc
 * (realloc returns NULL with EINVAL, also for a size of 0) and have usable size 0.
 *
 * Every routine is defined once as lfh_<name>; the release build also exports the
 * standard names (and glibc's __libc_* entry points) as aliases of the same code, listed
 * in the export table (api_exports.h).
 *
 * The statistics and debug builds (stats.h, debug.h) count each call and check the
 * pointers the program passes. Their code is compiled only there: API_INSTRUMENTED, the
 * STATS_ and DEBUG_ switches and the stats_/debug_ hooks are constant 0 or empty in the
 * release build, whose code is what it would be without them. realloc and resize
 * allocate and free through malloc_block and api_free_known_block, which count nothing,
 * so a call is counted once, as the routine the program called.
 */
#include "lfheap.h"

#include "api_exports.h"
#include "api_internal.h"
#include "arena.h"
#include "sizeclass.h"
#include "tcache.h"
#include "vgclient.h"

#include <malloc.h>
#include <string.h>

/* ---- large blocks ------------------------------------------------------------------ */

/* The heap's large-block calls, each followed by the start of the background purger if
 * its tick asked for it (tcache_purger_poll): these paths hold nothing of the cache. The
 * allocation and the free set up the thread's cache, so that its exit purges. */
static void *large_alloc(size_t size, size_t align, bool *zeroed)
{
    tcache_setup_for_large();
    /* A refused mapping on the way may end in a success (kept mappings unmapped, then
     * mapped again), and a NULL is reported by the caller (fail_nomem): the heap's calls
     * leave the program's errno as it was. */
    int saved_errno = errno;
    void *block = heap_large_alloc(size, align, zeroed);
    errno = saved_errno;
    tcache_purger_poll(false);
    return block;
}

/* A free that loses the block's claim to another free of it (a double free from two
 * threads at once) changes nothing, as a sequential double free; the secure build stops
 * the program there. */
static void large_free(void *ptr, struct descriptor *desc)
{
    tcache_setup_for_large();
    if (!heap_large_free(desc) && SECURE_ENABLED)
        secure_fail("double free", "free", ptr);
    tcache_purger_poll(true);
}

static void *large_resize(struct descriptor *desc, size_t size, size_t align)
{
    /* As in large_alloc: a NULL says the block must move, and the allocation that moves
     * it reports its own failure. */
    int saved_errno = errno;
    void *block = heap_large_resize(desc, size, align);
    errno = saved_errno;
    tcache_purger_poll(false);
    return block;
}

/* ---- allocation ------------------------------------------------------------------- */

static LFH_NOINLINE void *alloc_large(size_t size, size_t align)
{
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    bool zeroed;
    void *block = large_alloc(size, align, &zeroed);
    return block ? block : fail_nomem();
}

static LFH_NOINLINE void *malloc_medium_or_large(size_t size)
{
    if (size <= SIZECLASS_MAX_SIZE)
        return tcache_alloc(sizeclass_of(size));
    return alloc_large(size, API_MIN_ALIGN);
}

/* A zero-filled block's zeros: its whole usable size, which the program may use (the
 * Linux manual), as glibc, jemalloc, tcmalloc and mimalloc clear it, not only the
 * request; in the debug build its usable size too, the request (one byte for a request
 * of 0, which showed a free-list link's byte), with the canary after it. */
static void zero_usable(struct descriptor *desc, void *block, size_t request)
{
    if (DEBUG_ENABLED) {
        memset(block, 0, debug_usable(request));
    } else if (desc->class_index == HEAP_CLASS_LARGE) {
        heap_large_zero(desc, request);
    } else {
        memset(block, 0, usable_size(desc));
    }
}

/* A block that remembers its request size and sticky properties (llheap): a block of a
 * tracked class (heap.h) or a large block, with its record written. `props->align` is a
 * power of two of at least API_MIN_ALIGN. The block is zeroed (zero_usable)
 * if `clear` (the caller may want zero fill recorded without paying for it twice). In
 * the debug build every block the program gets comes from here, with room for its
 * canary. */
void *api_alloc_tracked(const struct heap_props *props, bool clear)
{
    size_t size = props->request;
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    size_t room = block_room(size);
    unsigned cls = sizeclass_for_aligned(room, props->align);
    void *block;
    bool zeroed = false;
    if (cls < SIZECLASS_COUNT) {
        block = tcache_alloc(heap_tracked_class(cls));
        if (!block)
            return NULL; /* errno is ENOMEM */
    } else {
        block = large_alloc(large_room(size), props->align, &zeroed);
        if (!block)
            return fail_nomem();
    }
    /* The debug build's block state (debug.h) in the record survives this. */
    struct descriptor *desc = pagemap_desc_of_own(block);
    heap_props_set(desc, block, props);
    debug_born(desc, block, size);
    /* Pages fresh from the kernel or decommitted read as zeros already (which memcheck
     * is told only here: to malloc, their bytes are undefined). */
    if (clear && !zeroed)
        zero_usable(desc, block, size);
    else if (clear)
        vgclient_zeros(block, usable_size(desc));
    return block;
}

/* malloc's fast path in the statistics and debug builds, for small requests: a block
 * from this thread's bin (in the debug build, the tracked twin of the class, as every
 * block has a record there, with its canary after the request: debug.h), or NULL if the
 * bin is empty or the request not small. *usable is the block's size. */
LFH_INLINE void *malloc_small_instrumented(size_t size, size_t *usable)
{
    /* debug_room only for sizes it cannot wrap around */
    size_t room = size <= SIZECLASS_LOOKUP_MAX ? debug_room(size) : SIZE_MAX;
    if (LFH_UNLIKELY(room > SIZECLASS_LOOKUP_MAX))
        return NULL;
    uintptr_t bins = DEBUG_ENABLED ? API_TRACKED_BINS : 0;
    void *block = tcache_bin_take(tcache_base() + bins + sizeclass_lookup[room]);
    if (LFH_UNLIKELY(block == NULL))
        return NULL;
    unsigned size_class = sizeclass_lookup[room] / SIZECLASS_STRIDE;
    uint32_t record = (uint32_t)size | HEAP_RECORD_MALLOC;
    debug_born_small(pagemap_desc_of_own(block), block, size, record);
    *usable = sizeclass_block_size[size_class];
    return block;
}

/* The debug build's malloc when the fast path cannot serve it. */
static LFH_NOINLINE void *malloc_debug_slow(size_t size)
{
    struct heap_props props = props_for(size, API_MIN_ALIGN, false);
    props.tracked = false;
    return api_alloc_tracked(&props, false);
}

/* malloc, uncounted. */
LFH_INLINE void *malloc_block(size_t size)
{
    if (DEBUG_ENABLED) {
        size_t usable;
        void *block = malloc_small_instrumented(size, &usable);
        return LFH_LIKELY(block != NULL) ? block : malloc_debug_slow(size);
    }
    /* The secure build's tail canary, for a small block; a large one ends in a guard page
     * instead, which the heap adds, and keeps its request exact (malloc_size said 8
     * bytes more). A request above PTRDIFF_MAX stays one and fails. */
    if (SECURE_ENABLED && size <= PTRDIFF_MAX) {
        size_t room = size + SECURE_TAIL_BYTES;
        if (LFH_LIKELY(room <= SIZECLASS_LOOKUP_MAX))
            return tcache_alloc_small(room);
        return room <= SIZECLASS_MAX_SIZE ? malloc_medium_or_large(room)
                                          : alloc_large(size, API_MIN_ALIGN);
    }
    if (LFH_LIKELY(size <= SIZECLASS_LOOKUP_MAX))
        return tcache_alloc_small(size);
    return malloc_medium_or_large(size);
}

LFH_EXPORT void *lfh_malloc(size_t size)
{
    if (API_INSTRUMENTED) {
        size_t usable;
        void *block = malloc_small_instrumented(size, &usable);
        if (LFH_LIKELY(block != NULL)) {
            stats_count_alloc(LFH_STATS_MALLOC, size, usable);
            return block;
        }
        block = DEBUG_ENABLED ? malloc_debug_slow(size) : malloc_block(size);
        return counted(LFH_STATS_MALLOC, size, block);
    }
    return malloc_block(size);
}

/* malloc, uncounted, for resize (api_llheap.c): malloc_block inlines this file's own
 * paths, so the other files call it through this out-of-line copy. */
void *api_malloc_block(size_t size)
{
    return malloc_block(size);
}

LFH_EXPORT void *lfh_calloc(size_t count, size_t size)
{
    size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes))
        return counted(LFH_STATS_CALLOC, SIZE_MAX, fail_nomem());
    /* The zeros also in pages that read as zeros already: the memset faults them in once
     * for writing, where the program's first read would map the zero page and its first
     * write fault again. */
    size_t usable;
    void *block = tracked_small_take(bytes, HEAP_RECORD_CALLOC, &usable);
    if (LFH_LIKELY(block != NULL))
        return counted(LFH_STATS_CALLOC, bytes, memset(block, 0, usable));
    struct heap_props props = props_for(bytes, API_MIN_ALIGN, true);
    return counted(LFH_STATS_CALLOC, bytes, api_alloc_tracked(&props, true));
}

/* ---- release ---------------------------------------------------------------------- */

/* The descriptor of the live block that starts at `ptr`, or NULL if `ptr` is no block
 * lfheap handed out and the program still holds: NULL, foreign memory, an address inside
 * (not at the start of) a block, a block never handed out, or one already freed. */
struct descriptor *api_block_descriptor(const void *ptr, const char *routine)
{
    struct descriptor *desc = pagemap_desc_or_null(ptr);
    if (LFH_LIKELY(desc && heap_block_live(desc, ptr)))
        return desc;
    /* The secure build stops the program: a block start below the carve frontier that
     * is not live carries the free mark. */
    if (SECURE_ENABLED && ptr) {
        bool freed = desc && heap_is_carved_block(desc, ptr);
        secure_fail(freed ? "double free" : "invalid pointer", routine, ptr);
    }
    return NULL;
}

/* free of a pointer the thread cache did not take (`result`, with `desc` from the page
 * map): a large block, a block of a superblock another thread owns, or no live block at
 * all (ignored). A small block the cache's checks passed only needs its free mark
 * tested: a remote free is the common case of producer and consumer threads. */
static LFH_NOINLINE void free_uncached(void *ptr, struct descriptor *desc,
                                       enum tcache_free_result result)
{
    if (result == TCACHE_FREE_NOT_OWNED && desc->class_index < HEAP_CLASS_LARGE &&
        !heap_block_marked_free(ptr, heap_mark_key(desc))) {
        tcache_free_slow(ptr, desc);
        return;
    }
    desc = api_block_descriptor(ptr, "free");
    if (!desc)
        return; /* not a block lfheap handed out: ignored */
    if (desc->class_index == HEAP_CLASS_LARGE)
        large_free(ptr, desc);
    else
        tcache_free_slow(ptr, desc);
}

/* The rest of freeing a live small block (ptr, desc) that the thread cache did not take:
 * another thread owns the superblock, or this thread has no cache any more. */
static LFH_NOINLINE void free_known_remote(void *ptr, struct descriptor *desc)
{
    STATS_ADD(STATS_REMOTE_FREES, 1);
    STATS_ADD(STATS_REMOTE_BYTES, desc->block_size);
    tcache_free_slow(ptr, desc);
}

/* Frees the block at ptr, whose descriptor is desc: free's path once it knows the block
 * (and realloc's and resize's for the block they leave, uncounted). */
void api_free_known_block(void *ptr, struct descriptor *desc)
{
    debug_died(desc, ptr);
    if (desc->class_index == HEAP_CLASS_LARGE) {
        large_free(ptr, desc);
        return;
    }
    if (tcache_free(ptr, desc) != TCACHE_FREE_CACHED)
        free_known_remote(ptr, desc);
}

/* free and its sized and aligned forms in the statistics and debug builds, the general
 * path: counts the call, checks the pointer, the size if `sized` and the alignment if
 * `align` is not 0, then frees the block as the release build would. */
static LFH_NOINLINE void free_checked(void *ptr, const char *routine, bool sized, size_t size,
                                      size_t align)
{
    if (!ptr) {
        STATS_ADD(STATS_FREE_NULL, 1);
        return;
    }
    struct descriptor *desc = api_block_descriptor(ptr, routine);
    size_t request;
    if (!debug_check(routine, ptr, desc, true, &request)) {
        STATS_ADD(STATS_FREE_INVALID, 1);
        return; /* ignored, as the release build ignores it */
    }
    if (sized || align)
        debug_check_sized(routine, ptr, desc, request, sized ? size : request, align);
    stats_count_free(usable_size(desc), request);
    api_free_known_block(ptr, desc);
}

/* free's fast path in those builds: a live small block (the debug build checks and fills
 * it first) that goes back into this thread's cache; anything else takes free_checked. */
LFH_INLINE void free_instrumented(void *ptr, const char *routine)
{
    struct descriptor *desc = pagemap_desc_or_foreign(ptr);
    size_t usable = desc->block_size;
    size_t request;
    if (!debug_died_small(desc, ptr, &request)) {
        free_checked(ptr, routine, false, 0, 0);
        return;
    }
    if (LFH_LIKELY(tcache_free(ptr, desc) == TCACHE_FREE_CACHED)) {
        stats_count_free(usable, request);
        return;
    }
    if (!DEBUG_ENABLED) {
        free_checked(ptr, routine, false, 0, 0);
        return;
    }
    /* The debug build checked the block and marked it freed: a remote free. */
    stats_count_free(usable, request);
    STATS_ADD(STATS_REMOTE_FREES, 1);
    STATS_ADD(STATS_REMOTE_BYTES, usable);
    tcache_free_slow(ptr, desc);
}

LFH_EXPORT void lfh_free(void *ptr)
{
    if (API_INSTRUMENTED) {
        free_instrumented(ptr, "free");
        return;
    }
    /* Unknown pointers (NULL too) get a descriptor with no block start: slow path. */
    struct descriptor *desc = pagemap_desc_or_foreign(ptr);
    enum tcache_free_result result = tcache_free(ptr, desc);
    if (LFH_LIKELY(result == TCACHE_FREE_CACHED))
        return;
    free_uncached(ptr, desc, result);
}

LFH_EXPORT void lfh_cfree(void *ptr)
{
    lfh_free(ptr);
}

LFH_EXPORT void lfh_free_sized(void *ptr, size_t size)
{
    if (API_INSTRUMENTED) {
        free_checked(ptr, "free_sized", true, size, 0);
        return;
    }
    lfh_free(ptr);
}

LFH_EXPORT void lfh_free_aligned_sized(void *ptr, size_t alignment, size_t size)
{
    if (API_INSTRUMENTED) {
        /* An alignment of 0 is no power of two: the check reports it as wrong. */
        free_checked(ptr, "free_aligned_sized", true, size, alignment ? alignment : 1);
        return;
    }
    lfh_free(ptr);
}

/* C++'s deletes in the statistics and debug builds: free's checks, and free_sized's for
 * the sized (`sized`) and the aligned ones (align 0 for none), under the operator's name
 * in the reports. */
void api_delete_instrumented(void *ptr, const char *operator_name, bool sized, size_t size,
                             size_t align)
{
    if (sized || align)
        free_checked(ptr, operator_name, sized, size, align);
    else
        free_instrumented(ptr, operator_name);
}

/* ---- queries and resizing --------------------------------------------------------- */

/* The record of a block, or what a plain block's would be: malloc gave it no request
 * size to remember, so its whole block counts as requested. */
struct heap_props api_block_props(struct descriptor *desc, const void *ptr)
{
    struct heap_props props;
    if (!heap_props_get(desc, ptr, &props))
        props = (struct heap_props){.request = usable_size(desc), .align = API_MIN_ALIGN};
    return props;
}

LFH_EXPORT size_t lfh_malloc_usable_size(void *ptr)
{
    struct descriptor *desc = api_block_descriptor(ptr, "malloc_usable_size");
    /* The debug build's usable bytes end where the canary starts. */
    size_t request;
    if (DEBUG_ENABLED && ptr)
        return debug_check("malloc_usable_size", ptr, desc, false, &request) ? debug_usable(request)
                                                                             : 0;
    return desc ? usable_size(desc) : 0;
}
/* True if a small block of `desc` can hold `room` bytes where it is: they fit, and the
 * block would not waste over half of itself (a smaller class would serve them then). */
static inline bool small_keeps(const struct descriptor *desc, size_t room)
{
    return room <= desc->block_size && (room > desc->block_size / 2 ||
                                        sizeclass_of(room) == heap_size_class(desc->class_index));
}

/* Tries to give the block at ptr (desc) `size` bytes where it is, aligned to `align`;
 * returns the (possibly moved, for a large block) address, or NULL to say it must move.
 * On success the block's record, if it has one, still needs updating. */
void *api_resize_in_place(void *ptr, struct descriptor *desc, size_t size, size_t align)
{
    if ((uintptr_t)ptr & (align - 1))
        return NULL;
    size_t room = block_room(size);
    /* An aligned block whose move would take a block of its own class stays: the copy
     * gave nothing back (memalign(4096, 3000) shrunk to 100 moved to another 4 KiB
     * block; found by a review helper). */
    if (desc->class_index != HEAP_CLASS_LARGE)
        return small_keeps(desc, room) ||
                       (align > API_MIN_ALIGN &&
                        sizeclass_for_aligned(room, align) == heap_size_class(desc->class_index))
                   ? ptr
                   : NULL;
    if (room <= SIZECLASS_MAX_SIZE)
        return NULL; /* a small block wastes less */
    return large_resize(desc, large_room(size), align);
}

bool api_stays_in_place(struct descriptor *desc, void *ptr, size_t size, size_t align)
{
    if ((uintptr_t)ptr & (align - 1))
        return false;
    if (desc->class_index != HEAP_CLASS_LARGE)
        return block_room(size) <= desc->block_size;
    if (large_room(size) > usable_size(desc))
        return false;
    /* A block mapped on its own gives back the pages past its new size (a 100 MiB block
     * shrunk to 100 bytes held all of them). Refused (under memcheck, say), it stays
     * whole. One in an arena keeps its whole run, as a shrink that stays in its run does
     * (heap_large_stays): at most 64 MiB, until the block is freed. */
    if (desc->os_backed)
        large_resize(desc, large_room(size), align);
    return true;
}

/* The bytes of a block that a move keeps, from its start: every byte malloc_usable_size
 * reported, which the program may have written (the Linux manual's promise, and what
 * glibc, jemalloc and tcmalloc keep; a string type that sizes itself by the usable size
 * relies on it), but only the request of a zero-filled block, whose bytes past the
 * request are zeros in the new block (the sticky zero fill, as llheap's realloc). */
static inline size_t kept_bytes(const struct descriptor *desc, size_t request, bool zero_fill)
{
    if (zero_fill)
        return request;
    return DEBUG_ENABLED ? debug_usable(request) : usable_size(desc);
}

/* The bytes of a zero-filled block that moved to `fresh` (`size` bytes requested) from
 * `copied` on: its whole usable size, as calloc clears it. The fresh block may be one
 * another block left, whose bytes past the request would otherwise show through the
 * usable tail (calloc(100) then realloc to 3000 showed 72 of them). A large block's tail
 * goes as calloc's does (heap_large_zero_tail: whole pages given back rather than
 * written, so a fresh run's pages are not faulted in for it); the debug build's usable
 * size is the request. */
static void zero_moved_tail(void *fresh, size_t copied, size_t size)
{
    struct descriptor *desc = pagemap_desc_of_own(fresh);
    if (!DEBUG_ENABLED && desc->class_index == HEAP_CLASS_LARGE) {
        heap_large_zero_tail(desc, copied);
        return;
    }
    size_t end = DEBUG_ENABLED ? size : usable_size(desc);
    if (end > copied)
        memset((char *)fresh + copied, 0, end - copied);
}

/* The end of move_contents when the thread cache did not take the old block (ptr, desc;
 * `small` if it is a small block and not the debug build's), out of line so that the
 * common case needs no stack frame for the valgrind request. Only memcheck reads the
 * free mark `fresh` got a copy of, and under memcheck no thread has a cache, so no
 * cache takes the old block: asked on every move, it cost each moving realloc about 15
 * instructions that do nothing. */
static LFH_NOINLINE void moved_block_free(void *fresh, void *ptr, struct descriptor *desc,
                                          size_t copied, bool small)
{
    if (copied >= 2 * sizeof(void *) && LFH_UNLIKELY(tcache_uncached()))
        vgclient_copied_mark(fresh);
    if (small)
        free_known_remote(ptr, desc);
    else
        api_free_known_block(ptr, desc);
}

/* The end of a realloc that moves: the old block's first `kept` bytes (kept_bytes; at
 * most `size`) into fresh, the rest of its usable size zeroed if the block is
 * zero-filled (zero_moved_tail), and the old block (ptr, desc) freed. */
static void *move_contents(void *fresh, void *ptr, struct descriptor *desc, size_t kept,
                           size_t size, bool zero_fill)
{
    size_t copied = kept < size ? kept : size;
    memcpy(fresh, ptr, copied);
    if (zero_fill)
        zero_moved_tail(fresh, copied, size);
    /* A small block goes back as free's fast path would put it, inline: a call of
     * api_free_known_block cost each moving realloc about 10 instructions more. The debug
     * build's records need api_free_known_block's debug_died. */
    bool small = !DEBUG_ENABLED && desc->class_index < HEAP_CLASS_LARGE;
    if (LFH_LIKELY(small) && LFH_LIKELY(tcache_free(ptr, desc) == TCACHE_FREE_CACHED))
        return fresh;
    moved_block_free(fresh, ptr, desc, copied, small);
    return fresh;
}

/* The end of a realloc whose large block (ptr, desc) grew by leaving its arena for a
 * mapping of its own at `fresh` (heap_large_move_out): the new block takes the record,
 * and a zero-filled block's bytes past `old_request` on the last page that moved are
 * zeroed (the program may have written there: they were usable), the pages after it
 * being the kernel's zeros. The old block, whose pages moved, is freed. */
static void *moved_out(void *fresh, void *ptr, struct descriptor *desc,
                       const struct heap_props *props, size_t old_request)
{
    heap_props_set(pagemap_desc_of_own(fresh), fresh, props);
    if (props->zero_fill) {
        size_t moved_end = (old_request + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
        memset((char *)fresh + old_request, 0, moved_end - old_request);
    }
    api_free_known_block(ptr, desc);
    return fresh;
}

/* The new bytes of a zero-filled large block at ptr (desc) that stayed in its run at
 * `size` bytes, from `old_request`, its run `old_bytes` long before: zeros up to the
 * request, as calloc's, and past it up to the usable end if the run grew into a freed
 * neighbour (heap_large_stays, arena_large_regrow), whose bytes the last tenant left
 * (calloc(400000) grown to 500000 showed 24,288 of them past the request). Below the old
 * run's end, the bytes past the old request are calloc's zeros or bytes the program
 * wrote there (docs/API.md lets a block that stays keep them). */
static void zero_stayed_large(struct descriptor *desc, void *ptr, size_t old_request, size_t size,
                              size_t old_bytes)
{
    if (size > old_request)
        memset((char *)ptr + old_request, 0, size - old_request);
    size_t old_end = old_bytes - SECURE_GUARD_BYTES;
    if (desc->size > old_bytes)
        heap_large_zero_tail(desc, size > old_end ? size : old_end);
}

/* The record field that says a block is aligned to API_MIN_ALIGN and no more. */
#define API_RECORD_MIN_ALIGN ((uint32_t)__builtin_ctz(API_MIN_ALIGN) << HEAP_RECORD_ALIGN_SHIFT)

/* The tracked small block at ptr (desc, its record `record`) holds `size` bytes where it
 * is: the bytes it gains of a zero-filled block are zeroed, and its record takes the new
 * request. */
static inline void *tracked_small_stays(void *ptr, struct descriptor *desc, uint32_t record,
                                        size_t size)
{
    size_t old_request = record & HEAP_RECORD_REQUEST_MASK;
    if ((record & HEAP_RECORD_ZERO_FILL) && size > old_request)
        memset((char *)ptr + old_request, 0, size - old_request);
    *heap_record_at(desc, ptr) = (record & ~HEAP_RECORD_REQUEST_MASK) | (uint32_t)size;
    return ptr;
}

/* realloc of a tracked small block at ptr (desc), of the minimum alignment (calloc's
 * blocks, chiefly: their zero fill is sticky), to `size` bytes that a small block holds:
 * what the general path below decides for it, read from and written to the record
 * directly. NULL with errno ENOMEM if the block must move and no block is left, but for
 * a shrink, which then stays (as in shrinks_in_place, below). Not in the debug build,
 * whose records carry block states the general path keeps. */
static void *realloc_tracked_small(void *ptr, struct descriptor *desc, uint32_t record, size_t size,
                                   size_t room)
{
    size_t old_request = record & HEAP_RECORD_REQUEST_MASK;
    uint32_t flags = record & ~HEAP_RECORD_REQUEST_MASK;
    bool zero_fill = (record & HEAP_RECORD_ZERO_FILL) != 0;
    if (small_keeps(desc, room))
        return tracked_small_stays(ptr, desc, record, size);
    int saved_errno = errno;
    void *fresh = tcache_alloc(heap_tracked_class(sizeclass_of(room)));
    if (!fresh) {
        if (room > desc->block_size)
            return NULL; /* errno is ENOMEM */
        errno = saved_errno;
        return tracked_small_stays(ptr, desc, record, size);
    }
    *heap_record_at(pagemap_desc_of_own(fresh), fresh) = flags | (uint32_t)size;
    return move_contents(fresh, ptr, desc, kept_bytes(desc, old_request, zero_fill), size,
                         zero_fill);
}

/* A shrink of a plain small block at ptr (desc) that small_keeps sends to a smaller
 * class: if no block of it is left, the block stays, errno as it was. glibc's shrinks
 * never fail, and a program that trims a buffer with `p = realloc(p, smaller)` lost it
 * to ENOMEM when memory ran out (found by an outside tester). */
static LFH_NOINLINE void *shrinks_in_place(void *ptr, struct descriptor *desc, size_t size)
{
    int saved_errno = errno;
    void *fresh = malloc_block(size);
    if (!fresh) {
        errno = saved_errno;
        return ptr;
    }
    return move_contents(fresh, ptr, desc, usable_size(desc), size, false);
}

/* realloc of a live plain small block at ptr (desc) to 0 < `size` <= PTRDIFF_MAX bytes:
 * no record, no property to keep. */
LFH_INLINE void *realloc_plain_small(void *ptr, struct descriptor *desc, size_t size)
{
    size_t room = block_room(size);
    if (small_keeps(desc, room))
        return ptr;
    if (room <= desc->block_size)
        return shrinks_in_place(ptr, desc, size);
    void *fresh = malloc_block(size);
    if (!fresh)
        return NULL;
    return move_contents(fresh, ptr, desc, usable_size(desc), size, false);
}

/* realloc of the block at ptr (desc) to `size` > 0 bytes, keeping its contents and sticky
 * properties; `align` (aligned_realloc) replaces its alignment if not 0. */
static void *realloc_block(void *ptr, struct descriptor *desc, size_t size, size_t align)
{
    if (size > PTRDIFF_MAX)
        return fail_nomem();
    if (LFH_LIKELY(desc->class_index < SIZECLASS_COUNT && align == 0))
        return realloc_plain_small(ptr, desc, size);
    size_t room = block_room(size);
    size_t old_bytes = desc->size;
    if (!DEBUG_ENABLED && desc->class_index == HEAP_CLASS_LARGE && align == 0 &&
        room > SIZECLASS_MAX_SIZE && heap_large_stays(desc, large_room(size))) {
        /* A block that stays in its run keeps its record but for the request (a buffer
         * grown a few bytes at a time: the general path below cost it three times the
         * calls). The new bytes of a zero-filled block are zeroed, as below. */
        if (desc->large_flags & HEAP_RECORD_ZERO_FILL)
            zero_stayed_large(desc, ptr, desc->large_request, size, old_bytes);
        desc->large_request = size;
        return ptr;
    }
    if (!DEBUG_ENABLED && desc->class_index < HEAP_CLASS_LARGE && align == 0) {
        uint32_t record = *heap_record_at(desc, ptr);
        if ((record & HEAP_RECORD_ALIGN_MASK << HEAP_RECORD_ALIGN_SHIFT) == API_RECORD_MIN_ALIGN &&
            room <= SIZECLASS_MAX_SIZE)
            return realloc_tracked_small(ptr, desc, record, size, room);
    }
    struct heap_props props = api_block_props(desc, ptr);
    bool recorded = desc->class_index == HEAP_CLASS_LARGE || desc->records != NULL;
    bool tracked = props.tracked || align != 0;
    if (align == 0)
        align = props.align;
    size_t old_request = props.request;
    props.request = size;
    props.align = align;
    props.tracked = tracked;
    void *fresh = NULL;
    /* A plain block that must start recording an alignment cannot stay: it has no record. */
    bool may_stay = recorded || !tracked;
    if (may_stay)
        fresh = api_resize_in_place(ptr, desc, size, align);
    if (!fresh) {
        int saved_errno = errno;
        size_t kept = kept_bytes(desc, old_request, props.zero_fill);
        if (desc->class_index == HEAP_CLASS_LARGE && size > old_request) {
            fresh = heap_large_move_out(desc, size, align, kept);
            if (fresh)
                return moved_out(fresh, ptr, desc, &props, old_request);
        }
        fresh = tracked ? api_alloc_tracked(&props, false) : malloc_block(size);
        if (fresh)
            return move_contents(fresh, ptr, desc, kept, size, props.zero_fill);
        /* A shrink that found no room to move to stays where it is (shrinks_in_place). */
        if (!may_stay || !api_stays_in_place(desc, ptr, size, align))
            return NULL;
        errno = saved_errno;
        fresh = ptr;
    }
    if (props.zero_fill && desc->class_index == HEAP_CLASS_LARGE && !desc->os_backed)
        zero_stayed_large(desc, fresh, old_request, size, old_bytes);
    else if (props.zero_fill && size > old_request) {
        /* Pages a mapped block gained beyond its old mapping are fresh zero pages.
         * Not the secure build's old guard page, which ends the old mapping: a shrink
         * put it over bytes the program had written, and they would show again. */
        size_t dirty_end = desc->os_backed && old_bytes < size ? old_bytes : size;
        memset((char *)fresh + old_request, 0, dirty_end - old_request);
    }
    debug_resized(desc, fresh, size);
    if (recorded)
        heap_props_set(desc, fresh, &props);
    return fresh;
}

/* The descriptor of the live block at ptr for a resizing routine, or NULL (the call
 * counted as a failure) if ptr is no block lfheap handed out: ignored, as free would. */
LFH_INLINE struct descriptor *resized_block(enum lfh_stats_routine routine, const char *name,
                                            void *ptr, size_t size)
{
    struct descriptor *desc = api_block_descriptor(ptr, name);
    size_t request;
    if (debug_check(name, ptr, desc, true, &request)) {
        if (desc->class_index < HEAP_CLASS_LARGE)
            secure_check_canary(ptr, desc->block_size, name);
        return desc;
    }
    counted(routine, size, NULL);
    return NULL;
}

/* The end of a resize to 0 bytes: the block at ptr (desc) is freed. */
static void resized_to_zero(enum lfh_stats_routine routine, void *ptr, struct descriptor *desc)
{
    counted_resize(routine, 0, usable_size(desc), NULL);
    api_free_known_block(ptr, desc);
}

/* realloc(ptr, 0) and its forms (ptr not NULL), counted as `routine`: frees the block and
 * returns 0, or returns EINVAL and frees nothing if ptr is no live block. The answer is
 * the return value and not errno, which posix_realloc keeps as it was: freeing may
 * change errno (a refused munmap). */
int api_resize_to_zero(enum lfh_stats_routine routine, const char *name, void *ptr)
{
    struct descriptor *desc = resized_block(routine, name, ptr, 0);
    if (!desc)
        return EINVAL;
    resized_to_zero(routine, ptr, desc);
    return 0;
}

/* What realloc and resize do first with ptr (not NULL), counted as `routine`: NULL if
 * that ends the call (ptr is no live block: ignored, errno EINVAL, whatever the size; or
 * size is 0 and the block is freed), else its descriptor. */
struct descriptor *api_resize_begin(enum lfh_stats_routine routine, const char *name, void *ptr,
                                    size_t size)
{
    struct descriptor *desc = resized_block(routine, name, ptr, size);
    if (!desc) {
        errno = EINVAL;
        return NULL;
    }
    if (size == 0) {
        resized_to_zero(routine, ptr, desc);
        return NULL;
    }
    return desc;
}

/* realloc, reallocarray and aligned_realloc (`align` not 0: a power of two, at least
 * API_MIN_ALIGN), counted as `routine`. */
void *api_realloc_call(enum lfh_stats_routine routine, const char *name, void *ptr, size_t size,
                       size_t align)
{
    if (!ptr)
        return counted(routine, size,
                       align ? alloc_aligned(align, size, false) : malloc_block(size));
    struct descriptor *desc = api_resize_begin(routine, name, ptr, size);
    if (!desc)
        return NULL;
    size_t old_usable = usable_size(desc);
    return counted_resize(routine, size, old_usable, realloc_block(ptr, desc, size, align));
}

LFH_EXPORT void *lfh_realloc(void *ptr, size_t size)
{
    /* The release build's common case, as api_realloc_call would find it without its
     * calls: a live block and a size from 1 to PTRDIFF_MAX (size - 1 wraps for 0), a plain
     * small block inline. NULL and foreign pointers get the sentinel descriptor, which has
     * no block start; they and dead blocks take the general path, which reports them. */
    if (!API_INSTRUMENTED && LFH_LIKELY(size - 1 < PTRDIFF_MAX)) {
        struct descriptor *desc = pagemap_desc_or_foreign(ptr);
        if (LFH_LIKELY(heap_block_live(desc, ptr))) {
            if (SECURE_ENABLED && desc->class_index < HEAP_CLASS_LARGE)
                secure_check_canary(ptr, desc->block_size, "realloc");
            return LFH_LIKELY(desc->class_index < SIZECLASS_COUNT)
                       ? realloc_plain_small(ptr, desc, size)
                       : realloc_block(ptr, desc, size, 0);
        }
    }
    return api_realloc_call(LFH_STATS_REALLOC, "realloc", ptr, size, 0);
}

LFH_EXPORT void *lfh_reallocarray(void *ptr, size_t count, size_t size)
{
    size_t bytes = array_bytes(count, size);
    if (bytes == SIZE_MAX)
        return counted(LFH_STATS_REALLOC, SIZE_MAX, fail_nomem());
    return api_realloc_call(LFH_STATS_REALLOC, "reallocarray", ptr, bytes, 0);
}

LFH_EXPORT int lfh_malloc_trim(size_t pad)
{
    (void)pad;
    unsigned cached = tcache_flush_all();
    size_t purged = arena_purge_all();
    return (cached != 0) | (purged != 0) | (arena_release_free_huge_pages() != 0);
}

/* glibc's tuning knobs: lfheap has none of them to set, so each is ignored, and the result
 * is glibc's (2.36): 0 only for a fast-bin size (M_MXFAST) outside 0 to 80 * sizeof(size_t)
 * / 4 bytes, 1 for every other value and parameter, including the ones glibc does not
 * know, so that a program that checks the result takes the same path as with glibc. */
LFH_EXPORT int lfh_mallopt(int param, int value)
{
    if (param == M_MXFAST)
        return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4;
    return 1;
}

/* ---- the standard names ----------------------------------------------------------- */

API_EXPORTS(API_EXPORTS_STANDARD)
