/*
 * os: the only layer that talks to the kernel about memory. Everything above asks for
 * page-aligned, zero-filled regions here and gives them back here; no layer calls mmap
 * itself. All calls are thin wrappers over mmap/munmap/madvise/mremap, which are the only
 * blocking operations in lfheap (DESIGN.md, property 1).
 */
#ifndef LFHEAP_OS_H
#define LFHEAP_OS_H

#include <stdbool.h>
#include <stddef.h>

/* The granule of every OS request and of the page map. Linux on x86-64 and most aarch64
 * kernels use 4 KiB pages; lfheap assumes them. */
#define OS_PAGE_SIZE ((size_t)4096)

/* Zero-filled read-write anonymous memory of `size` bytes (a multiple of OS_PAGE_SIZE),
 * aligned to `align` (a power of two, at least OS_PAGE_SIZE). NULL when the kernel says no. */
void *os_map(size_t size, size_t align);

/* Give the range back to the kernel entirely. */
void os_unmap(void *addr, size_t size);

/* Keep the range reserved but let the kernel drop its pages; it reads back as zeros. */
void os_decommit(void *addr, size_t size);

/* Moves the pages of [old, old + old_size) onto [dest, dest + new_size), a mapping the
 * caller made with os_map, growing to new_size; the old range is unmapped. False on
 * failure, and then both mappings are as they were. */
bool os_move(void *old, size_t old_size, void *dest, size_t new_size);

#endif
