/*
 * config: the switchboard. Every build switch of lfheap, its default and what turns it
 * on, in one place; every other file tests these 0/1 values with #if (never the -D
 * options themselves), so that a switch has one meaning everywhere. Pure preprocessor:
 * the assembly file includes it too.
 *
 * The library variants of the Makefile (and mk/park.mk) set the -D options:
 *   liblfheap           none: every switch below at its default
 *   -prefix             -DLFHEAP_PREFIX_ONLY (also -tsan, -asan, -fault, -parking*)
 *   -stats, -debug      -DLFHEAP_STATS, -DLFHEAP_DEBUG (and both: -stats-debug)
 *   -secure             -DLFHEAP_SECURE
 *   -fault              -DLFHEAP_FAULT_INJECTION
 *   -parking            -DLFHEAP_PARKING
 *   the tests' libraries -DLFHEAP_CHECKS (prefix, tsan, asan, fault, parking)
 */
#ifndef LFHEAP_CONFIG_H
#define LFHEAP_CONFIG_H

/* The standard names (malloc, free, ..., sigaction, operator new) as aliases of the lfh_*
 * routines. Default 1; -DLFHEAP_PREFIX_ONLY exports the lfh_* names only (tests beside
 * the system allocator, sanitizers). */
#ifdef LFHEAP_PREFIX_ONLY
#define API_STANDARD_NAMES 0
#else
#define API_STANDARD_NAMES 1
#endif

/* llheap's statistics counters (stats.h). Default 0; -DLFHEAP_STATS. */
#ifdef LFHEAP_STATS
#define STATS_ENABLED 1
#else
#define STATS_ENABLED 0
#endif

/* The debug build's checks of every pointer (debug.h). Default 0; -DLFHEAP_DEBUG. */
#ifdef LFHEAP_DEBUG
#define DEBUG_ENABLED 1
#else
#define DEBUG_ENABLED 0
#endif

/* The hardened build's checks (secure.h). Default 0; -DLFHEAP_SECURE. */
#ifdef LFHEAP_SECURE
#define SECURE_ENABLED 1
#else
#define SECURE_ENABLED 0
#endif

/* lfheap's own invariants asserted (invariant.h). Default 0; on in the debug builds, and
 * with -DLFHEAP_CHECKS (the tests' libraries: prefix, sanitizer, fault and parking). */
#if defined(LFHEAP_DEBUG) || defined(LFHEAP_CHECKS)
#define LFH_CHECKS 1
#else
#define LFH_CHECKS 0
#endif

/* Test only: the os layer's failure injection (os.h). Default 0;
 * -DLFHEAP_FAULT_INJECTION. */
#ifdef LFHEAP_FAULT_INJECTION
#define OS_FAULT_INJECTION 1
#else
#define OS_FAULT_INJECTION 0
#endif

/* Test only: the parking points (park.h). Default 0; -DLFHEAP_PARKING. */
#ifdef LFHEAP_PARKING
#define PARK_ENABLED 1
#else
#define PARK_ENABLED 0
#endif

/* Test only, and not a library switch: tests/test_buddy.c's chaos build compiles buddy.c
 * into itself with its own BUDDY_CHAOS() (a random yield between two steps). */

/* The client requests that tell valgrind's memcheck about blocks (vgclient.h). Default 1
 * where <valgrind/memcheck.h> is installed; -DLFHEAP_NO_VALGRIND turns them off. */
#if !defined(LFHEAP_NO_VALGRIND) && defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#define VGCLIENT_ENABLED 1
#endif
#endif
#ifndef VGCLIENT_ENABLED
#define VGCLIENT_ENABLED 0
#endif

/* Set by the compiler under AddressSanitizer or ThreadSanitizer (-fsanitize=address,
 * thread): the thread cache's fast path then addresses it as an ordinary variable, as
 * the sanitizers would check a %fs-relative access as if it were at the bare offset. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define BUILD_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#undef BUILD_SANITIZED
#define BUILD_SANITIZED 1
#endif
#ifndef BUILD_SANITIZED
#define BUILD_SANITIZED 0
#endif

/* Derived switches. */

/* The per-thread counters exist: the statistics count everything, the debug build the
 * requested bytes it reports unfreed at exit. */
#define STATS_COUNTING (STATS_ENABLED || DEBUG_ENABLED)

/* The api layer's counted and checked paths (api.c). */
#define API_INSTRUMENTED (STATS_ENABLED || DEBUG_ENABLED)

/* The free mark in a freed small block's second word (heap.h); the debug build knows
 * every block's state from its records and leaves it out. */
#define HEAP_FREE_MARKS (!DEBUG_ENABLED)

#endif
