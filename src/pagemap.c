/*
 * pagemap: leaves are installed with one CAS on the root slot. Two threads that both find
 * a slot empty both map a leaf; the loser unmaps its own and uses the winner's, so no
 * thread waits for another.
 */
#include "pagemap.h"

#include "invariant.h"
#include "mapcache.h"
#include "os.h"
#include "park.h"

/* All zero, so it lives in .bss: the zero leaf costs address space only, and the
 * sentinel's owner is HEAP_OWNER_NONE (0). */
struct pagemap pagemap;

static pagemap_entry *leaf_at(uintptr_t offset)
{
    return (pagemap_entry *)((char *)pagemap.zero_leaf + offset);
}

static pagemap_entry *pagemap_leaf(size_t root_index)
{
    uintptr_t offset = atomic_load_explicit(&pagemap.root[root_index], memory_order_acquire);
    if (offset)
        return leaf_at(offset);
    size_t bytes = PAGEMAP_LEAF_SIZE * sizeof(pagemap_entry);
    pagemap_entry *fresh = mapcache_map(bytes, OS_PAGE_SIZE);
    if (!fresh)
        return NULL;
    uintptr_t fresh_offset = (uintptr_t)fresh - (uintptr_t)pagemap.zero_leaf;
    LFH_PARK(PAGEMAP_LEAF_MAPPED);
    /* Release publishes the (zeroed) leaf; acquire on failure reads the winner's leaf. */
    if (atomic_compare_exchange_strong_explicit(&pagemap.root[root_index], &offset, fresh_offset,
                                                memory_order_release, memory_order_acquire))
        return fresh;
    os_unmap(fresh, bytes);
    return leaf_at(offset);
}

/* The page map's other half of its contract: a page belongs to at most one registration
 * at a time. A set finds every entry of its range empty (the chunk's previous tenant
 * cleared them before giving its pages back), and a clear finds every entry of its range
 * set to the one descriptor registered there (`registered`, taken from its first page).
 * Cannot fire spuriously under concurrency: the entries of a range are written only by
 * the thread that holds the range (it got the chunk from an arena or from the kernel, or
 * holds the block it resizes or releases), the previous tenant's clear happens before it
 * got the chunk (the buddy back-end's acq_rel hand-off of a chunk, or munmap before the
 * kernel maps the addresses again), and the entries are read atomically. */
static void pagemap_check_entry(pagemap_entry *slot, bool setting, bool first_page,
                                uintptr_t *registered)
{
    uintptr_t old = atomic_load_explicit(slot, memory_order_relaxed);
    if (setting) {
        LFH_INVARIANT("page map set over an empty page", old == 0);
        return;
    }
    if (first_page)
        *registered = old;
    LFH_INVARIANT("page map clear of one registration", old != 0 && old == *registered);
}

bool pagemap_set(const void *start, size_t size, struct descriptor *desc)
{
    uintptr_t first = (uintptr_t)start;
    uintptr_t end = first + size;
    /* Callers register and clear whole pages of their own chunks, and never the sentinel,
     * whose address would read as an empty entry. */
    LFH_INVARIANT("page map range is whole pages",
                  size != 0 && ((first | size) & (((uintptr_t)1 << PAGEMAP_PAGE_SHIFT) - 1)) == 0);
    LFH_INVARIANT("page map never maps the sentinel", desc != &pagemap.foreign);
    if (end - 1 >= OS_ADDRESS_LIMIT)
        return false;
    /* Make sure every leaf exists before writing any entry, so failure changes nothing. */
    for (uintptr_t a = first; a < end; a = ((a >> PAGEMAP_LEAF_SHIFT) + 1) << PAGEMAP_LEAF_SHIFT)
        if (!pagemap_leaf(a >> PAGEMAP_LEAF_SHIFT))
            return false;
    uintptr_t entry = desc ? (uintptr_t)desc - (uintptr_t)&pagemap.foreign : 0;
    uintptr_t registered = 0;
    for (uintptr_t a = first; a < end; a += (uintptr_t)1 << PAGEMAP_PAGE_SHIFT) {
        pagemap_entry *leaf = leaf_at(
            atomic_load_explicit(&pagemap.root[a >> PAGEMAP_LEAF_SHIFT], memory_order_relaxed));
        if (LFH_CHECKS)
            pagemap_check_entry(&leaf[(uint32_t)a >> PAGEMAP_PAGE_SHIFT], desc != NULL, a == first,
                                &registered);
        /* Relaxed: see pagemap_desc_or_foreign; the pointer's hand-off orders this store. */
        atomic_store_explicit(&leaf[(uint32_t)a >> PAGEMAP_PAGE_SHIFT], entry,
                              memory_order_relaxed);
    }
    /* The lookup's contract, read back: every address of a registered range finds its
     * descriptor, every address of a cleared one the sentinel. The entries are this
     * thread's own stores, and nobody else writes them (see pagemap_check_entry). */
    struct descriptor *found = desc ? desc : &pagemap.foreign;
    LFH_INVARIANT("page map lookup finds what was set",
                  pagemap_desc_or_foreign(start) == found &&
                      pagemap_desc_or_foreign((const char *)end - 1) == found);
    return true;
}

bool pagemap_unregistered(const void *start, size_t size)
{
    const char *end = (const char *)start + size;
    for (const char *a = start; a < end; a += (size_t)1 << PAGEMAP_PAGE_SHIFT)
        if (pagemap_desc_or_null(a))
            return false;
    return true;
}
