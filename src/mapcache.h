/*
 * mapcache: blocks of their own mapping (larger than an arena), kept resident after their
 * free for the next such block, as freed arena chunks wait on their dirty stacks. A
 * program that allocates and frees a block of 128 MiB again and again (a frame, a
 * temporary array, a compression buffer) otherwise maps it, faults in its pages and
 * unmaps it every time; faults are most of that cost (docs/BENCHMARKS.md, *Huge blocks
 * kept*). A kept mapping goes back to the kernel once it has waited the purge delay, at
 * the first purge after that (the slow paths' ticks, the background purger, the next
 * huge block's free), and at every purge of everything (thread exit,
 * malloc_trim, the last resort before ENOMEM).
 *
 * At most MAPCACHE_SLOTS mappings and MAPCACHE_MAX_BYTES bytes wait. Each slot is one
 * word naming the mapping's address and size, so a thread picks a mapping without
 * touching its memory, and claims it with one CAS that empties the slot: whoever wins
 * owns the mapping (to hand out, trim or unmap), the others go on without it. No thread
 * waits for another.
 */
#ifndef LFHEAP_MAPCACHE_H
#define LFHEAP_MAPCACHE_H

#include "config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One: a kept mapping waits for a request of its size while the program writes its
 * other blocks, and each one beyond the first was resident memory that other allocators
 * gave back at the free (ImageMagick freed three 79 MB images and wrote a fourth: 402 MB
 * of peak resident size with four slots, 324 MB with one, glibc's 319). */
#define MAPCACHE_SLOTS     1
#define MAPCACHE_MAX_BYTES ((size_t)1 << 30)

/* Keeps the freed mapping [start, start + bytes) (from os_map, page aligned) for reuse,
 * stamped `now` (platform_now_ms); false if it cannot wait (the slots or the byte budget
 * are full, or the build keeps none: the secure build unmaps at once): the caller unmaps
 * it then. Its contents stay as the program left them. */
bool mapcache_put(void *start, size_t bytes, uint32_t now);

/* A kept mapping of exactly `bytes` (a multiple of the page size) aligned to `align` (a
 * power of two): the smallest kept one that holds `bytes`, its tail unmapped; else the
 * biggest, grown (in place, or its pages moved by the kernel). NULL if none is aligned.
 * Its pages hold whatever the last tenant left, zeros past it. */
void *mapcache_take(size_t bytes, size_t align);

/* Unmaps the kept mappings stamped at least `delay` ms before `now`; all of them with
 * `force`. Returns the bytes unmapped. */
size_t mapcache_release(uint32_t now, uint32_t delay, bool force);

/* os_map, and when the kernel refuses, os_map again after unmapping every kept mapping:
 * kept mappings never make a request fail for want of address space (`ulimit -v`). The
 * heap's and the page map's mappings go through here; the arenas' have their own last
 * resort, which unmaps them too (arena_purge_all). */
void *mapcache_map(size_t bytes, size_t align);

/* The bytes of the mappings that wait (a relaxed glance). */
size_t mapcache_kept_bytes(void);

#endif
