/*
 * platform: the boundary between lfheap and the kernel, libc and the CPU. Every other
 * file reaches the system through here: the memory system calls (the os layer above
 * adds alignment, counting, refused unmaps and failure injection), threads and their exit
 * keys, the clock, the environment, raw output, the process's random bytes, the
 * interrupted context of a signal, and the thread-pointer-relative access of the thread
 * cache's fast path. Nothing here keeps state of its own but the thread-exit keys the
 * callers hold.
 *
 * Porting lfheap to another CPU or kernel is a matter of this file pair:
 *  - PLATFORM_PAGE_SIZE (aarch64 kernels may use 16 KiB or 64 KiB pages) and
 *    PLATFORM_ADDRESS_BITS (what the page map must cover);
 *  - PLATFORM_TLS_SEG and platform_tls_offset: x86-64 reaches the thread cache
 *    %fs-relative; elsewhere the generic fallback (an ordinary thread-local address, one
 *    instruction more on the fast path) is already correct, and aarch64 could read
 *    tpidr_el0 here;
 *  - platform_context_ip: where the ucontext keeps the interrupted instruction pointer
 *    (x86-64 and aarch64 are written);
 *  - the system calls in platform.c, if the kernel is not Linux (MADV_DONTNEED reading
 *    back as zeros, MADV_WIPEONFORK, mremap, prctl, AT_RANDOM, CLOCK_MONOTONIC_COARSE).
 * Beside it only the C++ unwinding table of api_cxx_catch.S is per CPU (x86-64 and
 * aarch64 are written), and LFH_CACHE_LINE (common.h) assumes 64-byte lines.
 *
 * What stays outside, on purpose: the portable parts of the C library (memcpy, memset,
 * strtol, abort, errno); malloc_info's fflush and fileno of the program's own stream
 * (stats_report.c); and sigwrap.c, which is itself the interposition of glibc's signal
 * calls (sigaction, signal, sigprocmask, glibc's __sigaction).
 */
#ifndef LFHEAP_PLATFORM_H
#define LFHEAP_PLATFORM_H

#include "common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The kernel's page: the granule of every memory call. Linux on x86-64 and most aarch64
 * kernels use 4 KiB pages; lfheap assumes them. */
#define PLATFORM_PAGE_SIZE ((size_t)4096)

/* Linux maps below 2^47 on x86-64 and below 2^48 on aarch64, also where 5-level page
 * tables (x86-64 LA57) or 52-bit virtual addresses (aarch64) offer more, unless mmap is
 * given a hint above that limit. */
#define PLATFORM_ADDRESS_BITS 48

/* ---- memory ----------------------------------------------------------------------- */

/* Zero-filled read-write anonymous memory of `size` bytes (a multiple of the page size),
 * page-aligned, at `hint` if the kernel agrees (NULL: wherever it likes); NULL when it
 * says no. Uncounted: the os layer counts its own calls, and the statistics' counters
 * live in memory mapped here directly (stats.c), below the layer that counts. */
void *platform_map(void *hint, size_t size);

/* Inaccessible anonymous address space of `size` bytes (a multiple of the page size),
 * page-aligned, wherever the kernel likes; NULL when it says no. Not writable, so the
 * kernel's overcommit accounting charges nothing for it until platform_protect makes a
 * part of it read-write (which charges that part, as platform_map would). */
void *platform_reserve(size_t size);

/* Read-write anonymous address space of `size` bytes that the caller only unmaps again:
 * it is counted against both RLIMIT_AS and RLIMIT_DATA, as the read-write mappings the
 * caller asks about would be, and (MAP_NORESERVE) charged by the kernel's overcommit
 * accounting only where that accounting is strict (overcommit_memory 2), where those
 * mappings would be charged too. NULL when the kernel says no. */
void *platform_probe(size_t size);

/* munmap; false if the kernel refused. */
bool platform_unmap(void *addr, size_t size);

/* Lets the kernel drop the range's pages (MADV_DONTNEED), which then read back as zeros;
 * false if the kernel refused. */
bool platform_decommit(void *addr, size_t size);

/* Lets the kernel drop the pages of `count` ranges in one system call: process_madvise
 * with MADV_DONTNEED on the calling thread's memory (PIDFD_SELF_THREAD), which Linux 6.13
 * allows and 6.15 names without a descriptor. The kernel then flushes the TLB once for
 * all the ranges, where madvise flushes it once per range: on every other CPU that runs
 * the process, by an interrupt. Returns the bytes dropped, range after range from the
 * first, or -1 with errno (ENOSYS, EINVAL or EBADF from an older kernel, EPERM from a
 * seccomp filter). */
long platform_decommit_ranges(const struct iovec *ranges, unsigned count);

/* The running kernel's version as (major << 16) | (minor << 8) | patch (the patch level
 * at most 255), read from the version note of the vDSO the kernel maps into every
 * process: no system call, so a seccomp filter never sees it. 0 if there is none. */
uint32_t platform_kernel_version(void);

#define PLATFORM_KERNEL(major, minor) (((uint32_t)(major) << 16) | ((uint32_t)(minor) << 8))

/* The calling thread's seccomp mode, read from /proc/thread-self/status: 0 without a
 * filter, 1 strict, 2 filtered; -1 if it cannot be read (no /proc, no descriptor left).
 * Raw system calls, so that no cancellation point is crossed. */
int platform_thread_seccomp(void);

/* Which pages of the range are resident (mincore): vec gets one byte per page, bit 0 set
 * for a resident one. False if the kernel refused. A page swapped out counts as not
 * resident though it holds data: only a caller that drops the pages it finds absent
 * (platform_decommit) may take them for zeros. */
bool platform_resident(const void *addr, size_t size, unsigned char *vec);

/* Marks the range to read as zeros in a forked child (MADV_WIPEONFORK); false if the
 * kernel refused. */
bool platform_wipe_on_fork(void *addr, size_t size);

/* Asks for transparent huge pages on the range (MADV_HUGEPAGE); false if the kernel
 * refused (built without them). */
bool platform_advise_huge(void *addr, size_t size);

/* Moves the pages of [old, old + old_size) onto `dest`, growing to new_size (mremap with
 * MREMAP_FIXED); false on failure, and then both mappings are as they were. */
bool platform_move(void *old, size_t old_size, void *dest, size_t new_size);

/* Whether the mapping that holds the page at `addr` (page-aligned) is locked in memory (mlock,
 * mlockall), or the kernel cannot tell: platform_move_out would unlock that whole mapping.
 * One madvise(MADV_COLD) of the page, which the kernel refuses for a locked mapping and
 * otherwise only ages the page: no file is opened, so a seccomp filter that kills on
 * openat does not see it. errno kept. */
bool platform_mapping_locked(const void *addr);

/* Moves the pages of [addr, addr + size) to a mapping of their own where the kernel
 * chooses (mremap with MREMAP_DONTUNMAP): the old range stays mapped and reads as zeros,
 * none of its pages resident. NULL on failure, and then nothing moved; errno kept.
 * *unknown_flag says whether the kernel refused the flag itself (before Linux 5.7). */
void *platform_move_out(void *addr, size_t size, bool *unknown_flag);

/* Resizes the mapping [addr, addr + old_size) to new_size, where it is or elsewhere
 * (mremap with MREMAP_MAYMOVE); NULL on failure, the mapping as it was; errno kept. */
void *platform_remap(void *addr, size_t old_size, size_t new_size);

/* Extends the mapping [addr, addr + old_size) to new_size where it is (mremap without
 * MREMAP_MAYMOVE); false if the addresses after it are taken, and then nothing changed. */
bool platform_grow(void *addr, size_t old_size, size_t new_size);

/* Makes the range inaccessible or read-write again; false if the kernel refused. */
bool platform_protect(void *addr, size_t size, bool accessible);

/* ---- threads ---------------------------------------------------------------------- */

/* Has `destructor(value)` run when this thread exits, under a process-wide pthread key
 * made on first use and kept in *key_plus_one (key + 1; 0 while none exists). False if
 * no key could be made or the value not set, and without trying for a key whose setting
 * allocates (platform_thread_key_late) when called from inside another registration
 * of this thread (from the allocation it made): then nothing runs at exit. A NULL value
 * cancels the run for this thread; a destructor that sets a value again is run again
 * (POSIX: up to PTHREAD_DESTRUCTOR_ITERATIONS rounds, and a fresh round after
 * pthread_exit from inside a destructor). */
bool platform_at_thread_exit(_Atomic unsigned *key_plus_one, void (*destructor)(void *),
                             void *value);

/* Makes the key platform_at_thread_exit uses now, if none exists yet, and returns it + 1
 * (0 if none could be made). For a library constructor: keys made early get the low
 * indexes, whose values glibc keeps in the thread's descriptor. A higher one lives in a
 * second-level table that the thread's first pthread_setspecific of a key in its range
 * allocates; if that allocation is where the caller registers its own value in the same
 * range, the outer call then installs its table over the one holding that value, which is
 * lost (glibc 2.36, keys 32 and up). */
unsigned platform_thread_key(_Atomic unsigned *key_plus_one, void (*destructor)(void *));

/* True if the key in *key_plus_one (made now if none exists yet) is late: its first
 * pthread_setspecific in a thread may allocate (glibc: keys from 32 up), so a value set
 * under it from inside glibc's allocation of the table for the program's own key in the
 * same range is lost (platform_thread_key). False if no key could be made. */
bool platform_thread_key_late(_Atomic unsigned *key_plus_one, void (*destructor)(void *));

/* Registers `value` again (platform_at_thread_exit) unless this thread's value for the
 * key already is `value`: for a caller whose registration under a late key may have been
 * replaced by the pthread_setspecific it was nested in. */
void platform_thread_exit_rearm(_Atomic unsigned *key_plus_one, void (*destructor)(void *),
                                void *value);

/* The most memory mappings the kernel lets the process have (vm.max_map_count), or the
 * kernel's default, 65,530, if it cannot be read. No allocation. */
long platform_max_map_count(void);

/* Starts a detached thread running fn(arg) with every signal blocked; the caller's mask
 * is as it was on return. False if refused. */
bool platform_thread_start(void *(*fn)(void *), void *arg);

/* Whether the process has only ever had the calling thread since it started or forked
 * (glibc's __libc_single_threaded, which stays false once a thread was created); false
 * where the C library does not say. */
bool platform_single_threaded(void);

/* Has `fn` run in the child of every later fork(), in its one thread, before fork
 * returns there (pthread_atfork). False if refused. */
bool platform_at_fork_child(void (*fn)(void));

/* Names the calling thread (15 characters at most); a refusal is ignored. */
void platform_thread_name(const char *name);

/* Sleeps `ms` milliseconds; may return early. */
void platform_sleep_ms(uint32_t ms);

/* How many of the process's threads are alive, the caller included; -1 if /proc cannot
 * tell. A main thread that left by pthread_exit stays in the kernel's count (a zombie
 * task, until the last thread leaves) and is not counted here. */
long platform_live_threads(void);

/* How many CPUs the calling thread may run on (its affinity mask); 0 if the kernel does
 * not say (a mask wider than 4,096 CPUs). No allocation. */
unsigned platform_cpus(void);

/* ---- the process ------------------------------------------------------------------ */

/* A coarse monotonic clock in milliseconds (a few ms of resolution, no system call:
 * the vDSO), wrapping after 49 days. */
uint32_t platform_now_ms(void);

/* The environment variable `name`, or NULL; always NULL in a program that runs with more
 * rights than its user (set-user-ID, set-group-ID, capabilities). Does not allocate. */
const char *platform_getenv(const char *name);

/* Whether the switch `name` is on: set to anything but empty or "0" (LFHEAP_BACKGROUND,
 * LFHEAP_HUGEPAGES, LFHEAP_STATS). Does not allocate. */
bool platform_env_switch(const char *name);

/* `path` made absolute against the current directory, in `out` (`size` bytes); false,
 * and `out` empty, if it does not fit or the directory cannot be read. Does not
 * allocate. */
bool platform_absolute_path(const char *path, char *out, size_t size);

/* A file opened for the process's reports: `path` created if missing (mode 0644), each
 * write appended, closed at exec; -1 with errno set if it cannot be opened, or if it is
 * a FIFO that nobody reads. */
int platform_open_report(const char *path);

/* Closes a file descriptor from platform_open_report. */
void platform_close(int fd);

/* The process id, for reports. */
uint64_t platform_pid(void);

/* The kernel's 16 random bytes for this process (AT_RANDOM), read without a system call
 * and without taking anything from anyone; zeros if the kernel gave none. */
void platform_random_bytes(uint64_t out[2]);

/* write(2) of up to `len` bytes, made as a raw system call: libc's write is a
 * cancellation point, and a report must not be cancelled half way. The bytes written, or
 * -1 with errno set. */
long platform_write(int fd, const void *buf, size_t len);

/* The instruction pointer the signal whose handler got `context` (a ucontext_t, the
 * third argument of an SA_SIGINFO handler) interrupted. */
uintptr_t platform_context_ip(const void *context);

/* ---- the thread pointer ----------------------------------------------------------- */

/* The fast paths reach a thread-local variable relative to the thread pointer. On x86-64
 * the variable's offset from %fs is one load from the GOT (initial-exec TLS; the linker
 * turns it into an immediate in an executable) and the variable is accessed %fs-relative
 * (the __seg_fs address space of gcc and clang), which spares reading the thread pointer
 * and adding it. Elsewhere, and under the sanitizers (BUILD_SANITIZED), the "offset" is
 * the variable's address and PLATFORM_TLS_SEG is empty. A pointer to PLATFORM_TLS_SEG
 * memory made from platform_tls_offset(var) + n reaches the bytes at n in `var`. */
#if defined(__x86_64__) && defined(__SEG_FS) && !BUILD_SANITIZED
#define PLATFORM_TLS_SEG __seg_fs
#define platform_tls_offset(var)                                                                   \
    __extension__({                                                                                \
        uintptr_t platform_offset_;                                                                \
        __asm__("movq " #var "@gottpoff(%%rip), %0" : "=r"(platform_offset_));                     \
        platform_offset_;                                                                          \
    })
#else
#define PLATFORM_TLS_SEG
#define platform_tls_offset(var) ((uintptr_t) & (var))
#endif

#endif
