/*
 * os: the memory layer. Everything above asks for page-aligned, zero-filled regions
 * here and gives them back here; no layer above maps memory itself. The calls go to the
 * kernel through the platform layer (platform.h): mmap/munmap/madvise/mremap/mprotect/mincore,
 * which are the only blocking operations in lfheap (docs/DESIGN.md, property 1), and,
 * for the optional background purger (arena.c), pthread_create.
 *
 * Failure: every call can fail, and a failed call changes nothing the layer above can
 * see. os_map returns NULL, os_move false, os_decommit false (the pages keep their
 * contents, so the caller must not count them as zero); a refused unmap is kept here
 * and done later by os_retry (the caller may forget the range at once).
 */
#ifndef LFHEAP_OS_H
#define LFHEAP_OS_H

#include "platform.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The granule of every OS request and of the page map (platform.h). */
#define OS_PAGE_SIZE PLATFORM_PAGE_SIZE

/* Every mapping os_map returns ends at or below 2^OS_ADDRESS_BITS (256 TiB), which is
 * what the page map and the arena registry cover (platform.h says why the kernel stays
 * below it); lfheap's only hints lie below a mapping the kernel just chose. os_map checks
 * the result all the same, and refuses (ENOMEM) rather than hand out memory the page map
 * cannot describe. */
#define OS_ADDRESS_BITS  PLATFORM_ADDRESS_BITS
#define OS_ADDRESS_LIMIT ((uintptr_t)1 << OS_ADDRESS_BITS)

/* Zero-filled read-write anonymous memory of `size` bytes (a multiple of OS_PAGE_SIZE),
 * aligned to `align` (a power of two, at least OS_PAGE_SIZE), below OS_ADDRESS_LIMIT.
 * NULL when the kernel says no. */
void *os_map(size_t size, size_t align);

/* Give the range back to the kernel entirely. If the kernel refuses (munmap can fail
 * with ENOMEM when it would have to split a mapping beyond vm.max_map_count), the range
 * stays reserved until a later os_retry unmaps it; nobody may touch it meanwhile. */
void os_unmap(void *addr, size_t size);

/* os_unmap for a range that may hold many resident pages (a freed huge block): they are
 * first decommitted in os_decommit's pieces, since one unmap of a long resident range
 * slows the process's later touches of its other pages as one long madvise does
 * (docs/BENCHMARKS.md, "Huge blocks kept"). */
void os_unmap_resident(void *addr, size_t size);

/* True if `size` more bytes of read-write memory could be mapped now (`ulimit -v`,
 * `ulimit -d`): a mapping made and given back at once. A hint, as another thread may map
 * meanwhile. */
bool os_room_for(size_t size);

/* Keep the range reserved but let the kernel drop its pages; it then reads back as
 * zeros. False if the kernel refused: the pages may still hold their old contents. */
bool os_decommit(void *addr, size_t size);

/* os_decommit for `count` ranges, with one system call for all of them where the kernel
 * allows it (platform_decommit_ranges), else one per range. clean[i] says whether range i
 * was decommitted. errno is left as it was unless a range was refused. The one call is
 * made only from a thread that no seccomp filter watches: a filter that lists the
 * system calls a process may make (OpenSSH's, a systemd unit's SystemCallFilter=, a
 * browser's) kills it for one that was not listed, and madvise is what such lists
 * allow for malloc. */
void os_decommit_ranges(const struct iovec *ranges, unsigned count, bool *clean);

/* True if fewer than a quarter of the pages of [addr, addr + size) are resident (both
 * page aligned). False when a quarter or more are, and when the kernel refused to tell. A page
 * swapped out counts as absent: the answer says what a memset would fault in, not what
 * reads as zeros. */
bool os_mostly_absent(const void *addr, size_t size);

/* True if any page of [addr, addr + size) is resident (both page aligned), and when the
 * kernel refused to tell. */
bool os_any_resident(const void *addr, size_t size);

/* Moves the pages of [old, old + old_size) onto [dest, dest + new_size), a mapping the
 * caller made with os_map, growing to new_size; the old range is unmapped. False on
 * failure, and then both mappings are as they were. */
bool os_move(void *old, size_t old_size, void *dest, size_t new_size);

/* Moves the pages of [old, old + size), inside a mapping, to a mapping of their own,
 * new_size long (at least size; fresh zero pages after the moved ones), and returns it:
 * nothing is copied or faulted in again. The old range stays mapped, reading as zeros
 * with none of its pages resident. NULL on failure, and then [old, old + size) holds its
 * bytes as before (copied back if the growth failed after the move). */
void *os_move_out(void *old, size_t size, size_t new_size);

/* Extends a mapping from os_map where it is, to new_size; false (and nothing changed) if
 * the addresses after it are taken. */
bool os_grow(void *addr, size_t old_size, size_t new_size);

/* Makes the pages of the range inaccessible (a guard page) or accessible again. False
 * if the kernel refused (it may, when the split would exceed vm.max_map_count). */
bool os_protect(void *addr, size_t size, bool accessible);

/* A random value, different in every process and for every `salt`, and the same in all
 * the process's threads: the kernel's AT_RANDOM bytes mixed with the salt, read without
 * a system call. */
uint64_t os_random(uint64_t salt);

/* Retries the unmaps the kernel refused; cheap when there are none. Called when the
 * arenas purge, so that memory given back during a shortage goes back after it. */
void os_retry(void);

/* Starts a detached thread running fn(arg) with every signal blocked (the program's
 * handlers never run on it, and process-directed signals go to the program's threads).
 * The caller's signal mask is as it was on return. pthread_create allocates (the new
 * thread's TLS vector): the caller must be where a malloc of its own is safe, and not in
 * a signal handler. False if refused (no memory, too many threads): nothing started. */
bool os_thread_start(void *(*fn)(void *), void *arg);

/* Whether the process has had only the calling thread since it started or forked (no
 * other thread can be in pthread_join or exiting); false where the C library does not
 * tell. */
bool os_single_threaded(void);

/* Marks the range to read as zeros in a child made by fork (MADV_WIPEONFORK, Linux 4.14
 * on): a word kept there tells a child that what it describes ran in the parent. False
 * if the kernel refused (too old): the range is copied to children as usual. */
bool os_wipe_on_fork(void *addr, size_t size);

/* With LFHEAP_HUGEPAGES=1 in the environment (read once), asks the kernel to back the
 * range with transparent huge pages (MADV_HUGEPAGE), for the heap's large mappings: the
 * arenas and the blocks mapped on their own. Off by default: a huge page is faulted in
 * whole, so a program touching a few pages of a fresh arena would hold 2 MiB. False
 * when off or refused (a kernel without them); either way the range works as before. */
bool os_advise_huge(void *addr, size_t size);
/* Whether LFHEAP_HUGEPAGES is on (read once). */
bool os_huge_pages(void);
/* The size of a transparent huge page on x86-64: what the kernel faults in whole. */
#define OS_HUGE_PAGE_SIZE ((size_t)2 << 20)

#if OS_FAULT_INJECTION
/* Failure injection, compiled only into the test variant (`liblfheap-fault.a`): each
 * call above whose failure lfheap handles (all but os_wipe_on_fork; os_advise_huge while
 * LFHEAP_HUGEPAGES is on) and each retried unmap counts as one OS call, and the injected
 * ones fail as the kernel's would (ENOMEM), before reaching the kernel. */

/* The `nth` OS call from now (1: the next) fails; with `persistent`, every call from
 * that one on fails too, until os_fault_inject(0, false) lifts the injection. */
void os_fault_inject(uint64_t nth, bool persistent);

struct os_fault_stats {
    uint64_t calls;           /* OS calls made since the program started */
    uint64_t failed;          /* of which failed by injection */
    size_t pending;           /* refused unmaps waiting for os_retry */
    uint64_t threads_started; /* threads os_thread_start started */
};
void os_fault_stats(struct os_fault_stats *out);

/* From now on the one call for several ranges (os_decommit_ranges) fails with `error`
 * before reaching the kernel, as on a kernel without it; 0 lifts this. */
void os_fault_refuse_ranges(int error);
#endif

#endif
