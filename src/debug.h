/*
 * debug: the checks of the debug build (-DLFHEAP_DEBUG; llheap's debug mode), compiled
 * into liblfheap-debug and liblfheap-stats-debug only. Errors of the program are
 * reported on stderr, one line each ("lfheap: <kind>: ..."), with write(2), and abort
 * the program unless LFHEAP_ABORT=0; then the offending call is ignored as the release
 * build ignores unknown pointers.
 *
 * Every block has a record in this build (api.c allocates all small blocks from tracked
 * classes, heap.h), and the record keeps the block's state in two bits: never handed out
 * (a fresh superblock's records are zeroed), live, or freed. That finds double frees and
 * frees of pointers lfheap never returned. A block is given DEBUG_CANARY_BYTES more than
 * asked for, and a canary right after the request finds writes past its end (checked by
 * free and realloc). A freed small block is filled with DEBUG_FREED_BYTE, all but its
 * first word (the free-list link), up to DEBUG_FILL_MAX bytes, and the fill is checked
 * when the block is handed out again: writes to freed blocks. The requested bytes still
 * allocated are counted (stats.h), and reported at exit less what the program's
 * malloc_unfreed() says it keeps on purpose.
 *
 * Records are the program's blocks' own metadata: a block's record is read and written
 * only by whoever holds the block, so checks need no atomics (as heap.h says of records);
 * a double free racing with itself in two threads is undefined, as it is in C.
 */
#ifndef LFHEAP_DEBUG_H
#define LFHEAP_DEBUG_H

#include "common.h"
#include "heap.h"
#include "stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The tail canary: eight bytes right after a block's usable bytes. */
#define DEBUG_CANARY_BYTES 8
#define DEBUG_CANARY_WORD  UINT64_C(0x0DF0FECA0DF0FECA)
/* How much of a freed block is filled and checked: writes after free usually hit the
 * first fields of a structure, and filling whole blocks would cost the debug build more
 * than its budget (docs/DEBUGGING.md, docs/BENCHMARKS.md). A multiple of 16, like every
 * block. */
#define DEBUG_FILL_MAX   64
#define DEBUG_FREED_BYTE 0xDF
#define DEBUG_FILL_WORD  (UINT64_C(0x0101010101010101) * DEBUG_FREED_BYTE)

/* A block's state, in the record bits heap.h keeps for it. */
enum debug_state { DEBUG_NEVER = 0, DEBUG_LIVE = 1, DEBUG_FREED = 2 };

/* What the debug build lets the program use of a block of `request` bytes: the request,
 * but at least one byte, so that malloc(0) has a usable byte before its canary. */
LFH_INLINE size_t debug_usable(size_t request)
{
    return request ? request : 1;
}

/* Bytes to allocate for a request: in the debug build, room for the canary too. */
LFH_INLINE size_t debug_room(size_t request)
{
    return DEBUG_ENABLED ? debug_usable(request) + DEBUG_CANARY_BYTES : request;
}

LFH_INLINE enum debug_state debug_state_of(uint32_t record)
{
    return (enum debug_state)((record & HEAP_RECORD_STATE_MASK) >> HEAP_RECORD_STATE_SHIFT);
}

LFH_INLINE uint32_t debug_with_state(uint32_t record, enum debug_state state)
{
    return (record & ~HEAP_RECORD_STATE_MASK) | (uint32_t)state << HEAP_RECORD_STATE_SHIFT;
}

LFH_INLINE void debug_write_canary(void *block, size_t request)
{
    uint64_t canary = DEBUG_CANARY_WORD;
    memcpy((char *)block + debug_usable(request), &canary, sizeof canary);
}

LFH_INLINE bool debug_canary_intact(const void *block, size_t request)
{
    uint64_t canary;
    memcpy(&canary, (const char *)block + debug_usable(request), sizeof canary);
    return canary == DEBUG_CANARY_WORD;
}

/* Words of a freed small block's fill, the link word (word 0) included. */
LFH_INLINE size_t debug_fill_words(const struct descriptor *desc)
{
    size_t bytes = desc->block_size < DEBUG_FILL_MAX ? desc->block_size : DEBUG_FILL_MAX;
    return bytes / sizeof(uint64_t);
}

/* Whether a freed small block's fill is intact (words 1.. of debug_fill_words). No early
 * exit: the loop stays short and branch-free. */
LFH_INLINE bool debug_fill_intact(const struct descriptor *desc, const void *block)
{
    size_t count = debug_fill_words(desc);
    uint64_t changed = 0;
    for (size_t i = 1; i < count; i++) {
        uint64_t word;
        memcpy(&word, (const char *)block + i * sizeof word, sizeof word);
        changed |= word ^ DEBUG_FILL_WORD;
    }
    return changed == 0;
}

LFH_INLINE void debug_fill(const struct descriptor *desc, void *block)
{
    size_t count = debug_fill_words(desc);
    for (size_t i = 1; i < count; i++) {
        uint64_t word = DEBUG_FILL_WORD;
        memcpy((char *)block + i * sizeof word, &word, sizeof word);
    }
}

#if DEBUG_ENABLED
/* A block (its record just written) is handed to the program: checks the fill if it was
 * freed before, marks it live, writes its canary, counts its request. */
void debug_born(struct descriptor *desc, void *block, size_t request);
/* A live block keeps its place with a new request size (realloc, resize in place); called
 * before its record changes. */
void debug_resized(struct descriptor *desc, void *block, size_t request);
/* A live block goes back: marks it freed, fills it, counts its request out. */
void debug_died(struct descriptor *desc, void *block);
/* Whether `ptr`, whose descriptor block_descriptor() found (NULL if none), is a live block
 * the program may pass to `routine`; reports and returns false if not. `canary` checks
 * the tail canary too (free, realloc). *request is the block's request size. */
bool debug_check(const char *routine, void *ptr, struct descriptor *desc, bool canary,
                 size_t *request);
/* free_sized, free_aligned_sized or a sized or aligned operator delete (`routine`; align
 * 0 for no alignment) of the live block `ptr` of `request` bytes: reports a size or
 * alignment other than it was allocated with. */
void debug_check_sized(const char *routine, void *ptr, struct descriptor *desc, size_t request,
                       size_t size, size_t align);
/* Reports a write to the freed block `block` (its fill is not intact). */
void debug_report_fill(const struct descriptor *desc, const void *block) LFH_NOINLINE;

/* malloc's fast path: `block`, of a tracked class,
 * becomes a live block of `request` bytes with record `record` (state bits clear). */
LFH_INLINE void debug_born_small(struct descriptor *desc, void *block, size_t request,
                                 uint32_t record)
{
    uint32_t *word = heap_record_at(desc, block);
    if (debug_state_of(*word) == DEBUG_FREED && LFH_UNLIKELY(!debug_fill_intact(desc, block)))
        debug_report_fill(desc, block);
    *word = debug_with_state(record, DEBUG_LIVE);
    debug_write_canary(block, request);
    stats_add(STATS_REQUEST_IN, request);
}

/* free's fast path: if `ptr` (desc = pagemap_desc_or_foreign(ptr)) is a live small block with an
 * intact canary, marks it freed, fills it, sets *request and returns true; otherwise
 * returns false and changes nothing (the checked path then reports). */
LFH_INLINE bool debug_died_small(struct descriptor *desc, void *ptr, size_t *request)
{
    if (!desc->records || !heap_is_block_start(desc, ptr))
        return false;
    uint32_t *word = heap_record_at(desc, ptr);
    uint32_t record = *word;
    size_t bytes = record & HEAP_RECORD_REQUEST_MASK;
    if (debug_state_of(record) != DEBUG_LIVE || !debug_canary_intact(ptr, bytes))
        return false;
    *word = debug_with_state(record, DEBUG_FREED);
    debug_fill(desc, ptr);
    stats_add(STATS_REQUEST_OUT, bytes);
    *request = bytes;
    return true;
}
#else
LFH_INLINE void debug_born(struct descriptor *desc, void *block, size_t request)
{
    (void)desc, (void)block, (void)request;
}
LFH_INLINE void debug_resized(struct descriptor *desc, void *block, size_t request)
{
    (void)desc, (void)block, (void)request;
}
LFH_INLINE void debug_died(struct descriptor *desc, void *block)
{
    (void)desc, (void)block;
}
LFH_INLINE bool debug_check(const char *routine, void *ptr, struct descriptor *desc, bool canary,
                            size_t *request)
{
    (void)routine, (void)ptr, (void)canary;
    *request = 0;
    return desc != NULL;
}
LFH_INLINE void debug_check_sized(const char *routine, void *ptr, struct descriptor *desc,
                                  size_t request, size_t size, size_t align)
{
    (void)routine, (void)ptr, (void)desc, (void)request, (void)size, (void)align;
}
LFH_INLINE void debug_born_small(struct descriptor *desc, void *block, size_t request,
                                 uint32_t record)
{
    (void)desc, (void)block, (void)request, (void)record;
}
LFH_INLINE bool debug_died_small(struct descriptor *desc, void *ptr, size_t *request)
{
    (void)desc, (void)ptr;
    *request = 0;
    return true;
}
#endif

#endif
