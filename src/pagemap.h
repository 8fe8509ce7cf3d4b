/*
 * pagemap: address -> descriptor for every page lfheap handed out (LRMalloc §3.4), so
 * that small blocks need no header. Two levels: a root indexed by address bits 47..32
 * (os_map never maps at or above 2^OS_ADDRESS_BITS, 2^48) and lazily mapped leaves
 * indexed by bits 31..12; a lookup is two dependent loads, and nothing is reserved before
 * the first allocation (a leaf is 8 MiB of address space, of which only the pages holding
 * entries become resident).
 *
 * Encoding, chosen so that free's fast path needs no NULL test: a root slot holds the
 * leaf's address minus that of `pagemap.zero_leaf`, and an empty slot (0) therefore
 * designates `pagemap.zero_leaf`, a leaf that is never written (its pages are the
 * kernel's shared zero page); a leaf entry holds the descriptor's address minus that of
 * `pagemap.foreign`, and an empty entry (0) therefore designates `pagemap.foreign`, a
 * descriptor whose owner is no thread. So pagemap_desc_or_foreign() always returns a readable
 * descriptor, and one that is not lfheap's fails the owner test like a remote block.
 *
 * Entries are written when a superblock or large block is set up and cleared before its
 * pages are given back, by the one thread that owns that transition; readers are frees of
 * blocks inside it, ordered after the setup by the program's own hand-off of the pointer.
 * A superblock registers every page (its blocks start anywhere in it), a large block its
 * first page only (its one block starts there). Each clear covers exactly what its set
 * covered, so a page that no live registration covers has an empty entry: an address
 * inside a large block past its first page finds the sentinel, never the descriptor of a
 * page's earlier tenant.
 */
#ifndef LFHEAP_PAGEMAP_H
#define LFHEAP_PAGEMAP_H

#include "common.h"
#include "heap_types.h"
#include "os.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PAGEMAP_PAGE_SHIFT 12
#define PAGEMAP_LEAF_SHIFT 32 /* a leaf covers 4 GiB */
#define PAGEMAP_ROOT_SIZE  ((size_t)1 << (OS_ADDRESS_BITS - PAGEMAP_LEAF_SHIFT))
#define PAGEMAP_LEAF_SIZE  ((size_t)1 << (PAGEMAP_LEAF_SHIFT - PAGEMAP_PAGE_SHIFT))

typedef _Atomic uintptr_t pagemap_entry;

struct pagemap {
    _Atomic uintptr_t root[PAGEMAP_ROOT_SIZE];  /* leaf address - &pagemap.zero_leaf */
    pagemap_entry zero_leaf[PAGEMAP_LEAF_SIZE]; /* never written */
    struct descriptor foreign;                  /* owner HEAP_OWNER_NONE */
};

extern struct pagemap pagemap;

/* The lookup of an address below 2^OS_ADDRESS_BITS: its descriptor, or &pagemap.foreign. */
LFH_INLINE struct descriptor *pagemap_lookup(uintptr_t addr)
{
    uintptr_t root_index = addr >> PAGEMAP_LEAF_SHIFT;
    /* Acquire pairs with the release CAS that installs a leaf: the leaf's mapping is
     * complete before its address can be seen (a plain load on x86-64, ldar on
     * aarch64, of a word that never changes once set). */
    uintptr_t leaf_offset = atomic_load_explicit(&pagemap.root[root_index], memory_order_acquire);
    pagemap_entry *leaf = (pagemap_entry *)((char *)pagemap.zero_leaf + leaf_offset);
    /* An empty asm that "changes" the leaf pointer: it keeps the compiler from folding the
     * leaf's address into the entry's, which costs x86-64 one instruction more (one lea
     * then a scaled load, instead of lea, add and load). */
    __asm__("" : "+r"(leaf));
    /* Relaxed: the entry was stored before the block was handed to the program, and the
     * program's hand-off of the pointer orders that store before this load. */
    uintptr_t entry =
        atomic_load_explicit(&leaf[(uint32_t)addr >> PAGEMAP_PAGE_SHIFT], memory_order_relaxed);
    return (struct descriptor *)((char *)&pagemap.foreign + entry);
}

/* The descriptor of the page holding `ptr`, or &pagemap.foreign if lfheap does not own
 * that page (also for NULL and for addresses at or above OS_ADDRESS_LIMIT). */
LFH_INLINE struct descriptor *pagemap_desc_or_foreign(const void *ptr)
{
    if (LFH_UNLIKELY((uintptr_t)ptr >> PAGEMAP_LEAF_SHIFT >= PAGEMAP_ROOT_SIZE))
        return &pagemap.foreign;
    return pagemap_lookup((uintptr_t)ptr);
}

/* The descriptor of a block lfheap itself just allocated, for its record or usable size:
 * it lies below 2^OS_ADDRESS_BITS (os_map's promise), so the bound test of
 * pagemap_desc_or_foreign, two instructions of every calloc, is not needed. */
LFH_INLINE struct descriptor *pagemap_desc_of_own(const void *block)
{
    return pagemap_lookup((uintptr_t)block);
}

/* The descriptor of the page holding `ptr`, or NULL if lfheap does not own that page. */
LFH_INLINE struct descriptor *pagemap_desc_or_null(const void *ptr)
{
    struct descriptor *desc = pagemap_desc_or_foreign(ptr);
    return desc == &pagemap.foreign ? NULL : desc;
}

/* Points every page of [start, start + size) at `desc` (NULL clears). Returns false only
 * when a missing leaf could not be mapped; then nothing was changed. */
bool pagemap_set(const void *start, size_t size, struct descriptor *desc);

/* True if no page of [start, start + size) (whole pages, maybe none) is registered: for
 * the invariant checks. */
bool pagemap_unregistered(const void *start, size_t size);

#endif
