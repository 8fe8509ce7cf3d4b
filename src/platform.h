/*
 * platform: the boundary between lfheap and the kernel, libc and the CPU. Every layer
 * above reaches the system through here (the os layer adds what lfheap needs of memory:
 * alignment, counting, refused unmaps, failure injection).
 */
#ifndef LFHEAP_PLATFORM_H
#define LFHEAP_PLATFORM_H

#include "common.h"

#include <stdbool.h>
#include <stddef.h>

/* The kernel's page: the granule of every memory call. Linux on x86-64 and most aarch64
 * kernels use 4 KiB pages; lfheap assumes them. */
#define PLATFORM_PAGE_SIZE ((size_t)4096)

/* Zero-filled read-write anonymous memory of `size` bytes (a multiple of the page size),
 * page-aligned, wherever the kernel puts it; NULL when it says no. Uncounted: the
 * statistics' own counters live in such memory (stats.c), below the os layer that
 * counts. */
void *platform_map(size_t size);

/* Has `destructor(value)` run when this thread exits, under a process-wide pthread key
 * made on first use and kept in *key_plus_one (key + 1; 0 while none exists). False if
 * no key could be made: then nothing runs at exit. A NULL value cancels the run for this
 * thread; a destructor that sets a value again is run again (POSIX: up to
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds, and a fresh round after pthread_exit from inside
 * a destructor). */
bool platform_at_thread_exit(_Atomic unsigned *key_plus_one, void (*destructor)(void *),
                             void *value);

#endif
