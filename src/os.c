/*
 * os: mmap/munmap/madvise/mremap wrappers. Aligned mappings over-reserve by the
 * alignment and trim both ends, which costs at most two extra munmap calls and never
 * leaves an unaligned mapping behind. The statistics build counts every call here (and
 * the bytes it names), so the counts are exactly the system calls lfheap makes.
 */
#include "os.h"

#include "stats.h"

#include <stdint.h>
#include <sys/mman.h>

/* `calls` is a STATS_*_CALLS counter; its bytes counter follows it. */
static inline void os_count(unsigned calls, size_t bytes)
{
    STATS_ADD(calls, 1);
    STATS_ADD(calls + 1, bytes);
}

void *os_map(size_t size, size_t align)
{
    if (align <= OS_PAGE_SIZE) {
        os_count(STATS_MMAP_CALLS, size);
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    size_t padded = size + align - OS_PAGE_SIZE;
    if (padded < size)
        return NULL;
    os_count(STATS_MMAP_CALLS, padded);
    char *raw = mmap(NULL, padded, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
        return NULL;
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)raw;
    size_t tail = padded - head - size;
    if (head) {
        os_count(STATS_MUNMAP_CALLS, head);
        munmap(raw, head);
    }
    if (tail) {
        os_count(STATS_MUNMAP_CALLS, tail);
        munmap((char *)start + size, tail);
    }
    return (void *)start;
}

void os_unmap(void *addr, size_t size)
{
    os_count(STATS_MUNMAP_CALLS, size);
    munmap(addr, size);
}

void os_decommit(void *addr, size_t size)
{
    os_count(STATS_MADVISE_CALLS, size);
    madvise(addr, size, MADV_DONTNEED);
}

bool os_move(void *old, size_t old_size, void *dest, size_t new_size)
{
    os_count(STATS_MREMAP_CALLS, new_size);
    return mremap(old, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, dest) != MAP_FAILED;
}
