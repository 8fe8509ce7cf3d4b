/*
 * pagemap: leaves are installed with one CAS on the root slot. Two threads that both find
 * a slot empty both map a leaf; the loser unmaps its own and uses the winner's, so no
 * thread waits for another.
 */
#include "pagemap.h"

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
    pagemap_entry *fresh = os_map(bytes, OS_PAGE_SIZE);
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

bool pagemap_set(const void *start, size_t size, struct descriptor *desc)
{
    uintptr_t first = (uintptr_t)start;
    uintptr_t end = first + size;
    if (end - 1 >= OS_ADDRESS_LIMIT)
        return false;
    /* Make sure every leaf exists before writing any entry, so failure changes nothing. */
    for (uintptr_t a = first; a < end; a = ((a >> PAGEMAP_LEAF_SHIFT) + 1) << PAGEMAP_LEAF_SHIFT)
        if (!pagemap_leaf(a >> PAGEMAP_LEAF_SHIFT))
            return false;
    uintptr_t entry = desc ? (uintptr_t)desc - (uintptr_t)&pagemap.foreign : 0;
    for (uintptr_t a = first; a < end; a += (uintptr_t)1 << PAGEMAP_PAGE_SHIFT) {
        pagemap_entry *leaf = leaf_at(
            atomic_load_explicit(&pagemap.root[a >> PAGEMAP_LEAF_SHIFT], memory_order_relaxed));
        /* Relaxed: see pagemap_desc_or_foreign; the pointer's hand-off orders this store. */
        atomic_store_explicit(&leaf[(uint32_t)a >> PAGEMAP_PAGE_SHIFT], entry,
                              memory_order_relaxed);
    }
    return true;
}
