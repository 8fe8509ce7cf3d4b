/*
 * What the shared library of tests/test_static_archive.c (test_static_archive_lib.c)
 * offers the test program: calls it makes itself, so that they bind to whatever the
 * executable brought in from liblfheap.a, or else to glibc's.
 */
#ifndef LFHEAP_TEST_STATIC_ARCHIVE_H
#define LFHEAP_TEST_STATIC_ARCHIVE_H

#include <stddef.h>

/* A block of size bytes aligned to alignment from one of the aligned routines, by kind:
 * 0 posix_memalign, 1 aligned_alloc, 2 memalign, 3 valloc (page alignment). */
void *lib_aligned(int kind, size_t alignment, size_t size);
void *lib_realloc(void *p, size_t size);
/* lfheap's own query, which answers 0 for a block lfheap did not hand out. */
size_t lib_lfheap_usable(void *p);

/* lib_signal installs an allocating handler for sig with sigaction (how 0) or signal
 * (how 1), raises sig, and reports: the kernel's handler, whether sigaction still reports
 * the library's own handler, how many times the handler ran and whether its allocations
 * were lfheap's. */
struct lib_signal_result {
    void *kernel_handler;
    void *own_handler;
    int reported_own;
    int handled;
    int handler_ok;
};
struct lib_signal_result lib_signal(int sig, int how);

#endif
