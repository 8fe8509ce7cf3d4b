/*
 * arena: the page back-end under the heap (docs/BUDDY.md; LRMalloc's future work of
 * a lock-free lower-level allocator that coalesces instead of calling the OS for every
 * superblock). Memory comes in arenas: aligned 64 MiB regions, each managed by one NBBS
 * instance (buddy.c), added lazily as the heap grows; several instances spread
 * contention, as the NBBS paper recommends. Superblocks are power-of-two chunks of an
 * arena (or freed runs, when those pile up: arena_alloc); a large block up to
 * ARENA_MAX_CHUNK is a run: 5/8, 6/8, 7/8 or all of a chunk, made of the chunk's leading
 * buddy chunks, the rest of the chunk staying free in its buddy, so that a fresh run
 * holds less than a quarter more than its request (a reused one up to
 * ARENA_LARGE_REUSE_MAX times it, of which the block gets less than a quarter more than
 * its request: arena_alloc_large). Anything larger is mapped from the OS directly by the
 * heap.
 *
 * A freed chunk or run does not go back to its buddy at once: it waits, still dirty, on a
 * lock-free stack per run size, where the next request of that size takes it without a
 * system call. Chunks that have waited longer than the purge delay are decommitted
 * (madvise) and only then released to the buddy, so every free page inside a buddy reads
 * as zero (a chunk the kernel refuses to decommit stays on its stack, dirty, until the
 * next purge), and a chunk is never decommitted while someone uses it: it is on the stack
 * (owned by the stack) or taken (owned by one thread), never both.
 */
#ifndef LFHEAP_ARENA_H
#define LFHEAP_ARENA_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARENA_SIZE      ((size_t)64 << 20)
#define ARENA_MIN_CHUNK ((size_t)4096)
/* Chunks up to a whole arena: a larger block is its own mapping. */
#define ARENA_MAX_CHUNK ARENA_SIZE

/* The chunk size a request of `size` bytes gets: a power of two, at least a page. */
size_t arena_chunk_size(size_t size);

/* A chunk of arena_chunk_size(size) bytes aligned to that size, for size up to
 * ARENA_MAX_CHUNK; or, when none of that size waits freed, freed runs pile up (16 MiB or
 * more) and a bigger one of up to ARENA_SUPERBLOCK_REUSE_MAX times the chunk waits, that
 * run (a superblock then holds more blocks). *chunk_size says which, *zeroed whether it
 * is known to read as zeros. NULL when no arena can be mapped. */
#define ARENA_SUPERBLOCK_REUSE_MAX 4
void *arena_alloc(size_t size, bool *zeroed, size_t *chunk_size);

/* The run size a large block of `size` bytes (up to ARENA_MAX_CHUNK) gets: the smallest
 * of 5/8, 6/8, 7/8 or 8/8 of arena_chunk_size(size) that holds it, less than a quarter
 * more than `size` (whole chunks below 32 KiB, whose eighths would be below a page). */
size_t arena_large_size(size_t size);

/* A freed run is reused whole for a large block of `size` bytes if it holds at most
 * this many times `size` bytes. */
#define ARENA_LARGE_REUSE_MAX 3

/* A run for a large block of `size` bytes, aligned to arena_chunk_size(size), and
 * *chunk_size the bytes the block may use: arena_large_size(size), of a fresh run or,
 * when a freed run waits whose pages its previous tenant left resident (reusing it costs
 * no page faults, where a fresh run faults in every page the block touches), of that
 * run: preferably one at most a quarter bigger than `size`, else a smaller one extended
 * over the free rest of its chunk, else one of at most ARENA_LARGE_REUSE_MAX * size
 * bytes; of a run bigger than a fresh one, the block gets a fresh run's bytes, and the
 * pages past them go back to the kernel if the block lives a purge delay (or at
 * arena_purge_all). Only when too many such blocks live at once to be
 * tracked (1,024), the whole bigger run; rarely, when other threads keep taking parts of
 * the chunks it carves runs from, a whole fresh chunk. *zeroed as for arena_alloc; NULL
 * when no arena can be mapped. */
void *arena_alloc_large(size_t size, bool *zeroed, size_t *chunk_size);

/* Grows in place a block of arena_alloc_large's (its *extent bytes) to hold `bytes`:
 * true, with *extent its new size (at least `bytes`, a quarter more at most where the
 * room allows), false with nothing changed if there is no room. A block given part of a
 * bigger freed run grows within that run, unless a purge is giving back its tail at this
 * moment; a block that holds its whole run grows over the free buddy chunks after it, to
 * the class that holds `bytes`, if its run starts where that class's runs may (its
 * pages past `bytes` that earlier tenants left resident go back to the kernel). */
bool arena_large_regrow(void *block, size_t *extent, size_t bytes);

/* Gives back a chunk of arena_alloc's or arena_alloc_large's *chunk_size bytes (or, for
 * arena_alloc's chunks of their own size, any size that rounds up to the same power of
 * two). */
void arena_free(void *chunk, size_t size);
/* arena_free for a superblock's chunk: its purge is not scored against the fresh large
 * runs that follow (a purge's score, arena.c). */
void arena_free_superblock(void *chunk, size_t size);

/* Decommits and releases every waiting chunk now, and the unused pages of the runs that
 * live blocks took bigger than they needed (malloc_trim); returns how many chunks and
 * runs it gave pages of back. */
size_t arena_purge_all(void);
/* With huge pages on (LFHEAP_HUGEPAGES): gives back to the kernel every huge page of the
 * arenas that no run occupies, and returns how many bytes that was (malloc_trim). */
size_t arena_release_free_huge_pages(void);

/* Between these calls (they nest), the chunks the calling thread frees are purged by the
 * outermost arena_prompt_end, with every other chunk whose delay ran out, instead of
 * waiting for the delay and a later slow path: for a thread handing its cache back at
 * exit, which will not reuse them. When the process then holds at least 8 MiB of freed
 * runs and more than it has in use, arena_prompt_end purges every one, whatever its
 * age: workers that exit after freeing what they used end a phase. */
void arena_prompt_begin(void);
void arena_prompt_end(void);

/* Lets the arenas purge chunks whose delay ran out; cheap when there is nothing due.
 * Called from the heap's slow paths, so that an active program's freed memory goes
 * back to the kernel within about one purge delay. With LFHEAP_BACKGROUND set, the
 * thread that purges also checks that the background purger runs, and if not, sets
 * arena_purger_wanted for the caller to act on. */
void arena_tick(void);

/* Before the heap maps a block of `bytes` bigger than an arena on fresh pages (after its
 * arena_tick): when freed runs pile up, a purge of all of them, which no such block can
 * use. */
void arena_before_mapping(size_t bytes);

/* The background purger (LFHEAP_BACKGROUND=1): one thread that purges like arena_tick,
 * so that a program that stops calling lfheap still gets its freed memory back to the
 * kernel. It is started lazily, by a thread that ticked, at the end of its slow path;
 * again in a forked child (which inherits no thread) and if its heartbeat stops. */
extern __thread bool arena_purger_wanted __attribute__((visibility("hidden")));

/* Threads that hold a thread cache: the caches (tcache.c) count themselves here and share
 * their budget among them. Without /proc the purger cannot count the process's threads,
 * and takes 0 here for "the program's threads may all have ended" (purger_main).
 * Relaxed updates and reads: the count orders nothing. */
extern _Atomic uint32_t arena_cached_threads __attribute__((visibility("hidden")));

/* The first purge tick of a forked child's thread (a free), after arena_tick: if the
 * child wants its own purger and this free may not start one (the parent had threads:
 * see arena_purger_start), every freed run goes back now. What the child inherited
 * waits for no later slow path, and a page given back costs the child a fault where it
 * would have cost one anyway, the copy of a page it shares with its parent. */
void arena_fork_tick(void);

/* Starts the purger unless it runs (or another thread is starting it); clears
 * arena_purger_wanted. pthread_create allocates: call it only where a malloc of the
 * calling thread is safe (no structure of its own half updated) and never from a signal
 * handler. `freeing`: called at the end of a free, which glibc may have called with a
 * lock held that pthread_create takes; then it starts nothing unless the process has
 * one thread, and the request stays. A refused start is retried by a later tick. errno
 * is left as it was. */
void arena_purger_start(bool freeing);

#if PARK_ENABLED
/* Test-only (the parking variant, park.h): how many mapped arenas are not entirely free
 * inside their buddy, counting every arena on the list. Only meaningful while no
 * thread is inside lfheap and after malloc_trim, when nothing should be: then any arena
 * it counts holds a chunk that was lost. */
unsigned arena_busy_count(void);

/* Test-only, under the same conditions: calls `seen` for every range of pages in use
 * inside the arenas arena_busy_count counts, with whether a dirty stack lists the range's
 * first page as a freed run (what a failed check reports). */
void arena_busy_runs(void (*seen)(const char *start, size_t bytes, bool listed));
#endif

/* How many arenas are mapped (they are never unmapped): what every build's statistics
 * know without counting, and what the out-of-memory tests check. */
unsigned arena_mapped(void);
/* Their mapped bytes: ARENA_SIZE each, less for the parts of arenas mapped when a whole
 * one did not fit the address space (arena_part_create in arena.c). */
size_t arena_mapped_bytes(void);
/* How many arenas have `backed` mapped bytes (ARENA_SIZE: whole ones), for the tests. */
unsigned arena_mapped_of(size_t backed);

/* The buddy instance of the arena that holds `chunk` (a chunk arena_alloc handed out),
 * for the tests. */
struct buddy *arena_buddy(const void *chunk);

#endif
