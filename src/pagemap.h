/*
 * pagemap: address -> descriptor for every page lfheap handed out (LRMalloc §3.4), so
 * that small blocks need no header. Two levels: a static root indexed by address bits
 * 47..32 and lazily mapped leaves indexed by bits 31..12. A lookup is two dependent
 * loads; a leaf costs address space (8 MiB) but only the pages of it that hold entries
 * become resident, and nothing is reserved before the first allocation.
 *
 * Entries are written when a superblock or large block is set up and cleared before its
 * pages are given back, by the one thread that owns that transition; readers are frees of
 * blocks inside it, ordered after the setup by the program's own hand-off of the pointer.
 */
#ifndef LFHEAP_PAGEMAP_H
#define LFHEAP_PAGEMAP_H

#include "common.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct descriptor;

#define PAGEMAP_PAGE_SHIFT 12
#define PAGEMAP_LEAF_SHIFT 32 /* a leaf covers 4 GiB */
#define PAGEMAP_ROOT_SIZE  ((size_t)1 << (48 - PAGEMAP_LEAF_SHIFT))
#define PAGEMAP_LEAF_SIZE  ((size_t)1 << (PAGEMAP_LEAF_SHIFT - PAGEMAP_PAGE_SHIFT))

typedef _Atomic(struct descriptor *) pagemap_entry;

extern _Atomic(pagemap_entry *) pagemap_root[PAGEMAP_ROOT_SIZE];

/* The descriptor of the page holding `ptr`, or NULL if lfheap does not own that page
 * (also for NULL and for addresses beyond 48 bits). */
LFH_INLINE struct descriptor *pagemap_lookup(const void *ptr)
{
    uintptr_t addr = (uintptr_t)ptr;
    uintptr_t root_index = addr >> PAGEMAP_LEAF_SHIFT;
    if (LFH_UNLIKELY(root_index >= PAGEMAP_ROOT_SIZE))
        return NULL;
    /* Acquire pairs with the release CAS that installs a leaf: the leaf's mapping is
     * complete before its address can be seen (on x86-64 and aarch64 this is a plain or
     * ldar load of a word that never changes once set). */
    pagemap_entry *leaf = atomic_load_explicit(&pagemap_root[root_index], memory_order_acquire);
    if (LFH_UNLIKELY(leaf == NULL))
        return NULL;
    /* Relaxed: the entry was stored before the block was handed to the program, and the
     * program's hand-off of the pointer orders that store before this load. */
    return atomic_load_explicit(&leaf[(uint32_t)addr >> PAGEMAP_PAGE_SHIFT],
                                memory_order_relaxed);
}

/* Points every page of [start, start + size) at `desc` (NULL clears). Returns false only
 * when a missing leaf could not be mapped; then nothing was changed. */
bool pagemap_set(const void *start, size_t size, struct descriptor *desc);

#endif
