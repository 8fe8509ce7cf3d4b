/*
 * pagemap: leaves are installed with one CAS on the root slot. Two threads that both find
 * a slot empty both map a leaf; the loser unmaps its own and uses the winner's, so no
 * thread waits for another.
 */
#include "pagemap.h"

#include "os.h"

_Atomic(pagemap_entry *) pagemap_root[PAGEMAP_ROOT_SIZE];

static pagemap_entry *pagemap_leaf(size_t root_index)
{
    pagemap_entry *leaf = atomic_load_explicit(&pagemap_root[root_index], memory_order_acquire);
    if (leaf)
        return leaf;
    size_t bytes = PAGEMAP_LEAF_SIZE * sizeof(pagemap_entry);
    pagemap_entry *fresh = os_map(bytes, OS_PAGE_SIZE);
    if (!fresh)
        return NULL;
    /* Release publishes the (zeroed) leaf; acquire on failure reads the winner's leaf. */
    if (atomic_compare_exchange_strong_explicit(&pagemap_root[root_index], &leaf, fresh,
                                                memory_order_release, memory_order_acquire))
        return fresh;
    os_unmap(fresh, bytes);
    return leaf;
}

bool pagemap_set(const void *start, size_t size, struct descriptor *desc)
{
    uintptr_t first = (uintptr_t)start;
    uintptr_t end = first + size;
    if ((end - 1) >> 48)
        return false;
    /* Make sure every leaf exists before writing any entry, so failure changes nothing. */
    for (uintptr_t a = first; a < end; a = ((a >> PAGEMAP_LEAF_SHIFT) + 1) << PAGEMAP_LEAF_SHIFT)
        if (!pagemap_leaf(a >> PAGEMAP_LEAF_SHIFT))
            return false;
    for (uintptr_t a = first; a < end; a += (uintptr_t)1 << PAGEMAP_PAGE_SHIFT) {
        pagemap_entry *leaf =
            atomic_load_explicit(&pagemap_root[a >> PAGEMAP_LEAF_SHIFT], memory_order_relaxed);
        /* Relaxed: see pagemap_lookup; the pointer's hand-off orders this store. */
        atomic_store_explicit(&leaf[(uint32_t)a >> PAGEMAP_PAGE_SHIFT], desc,
                              memory_order_relaxed);
    }
    return true;
}
