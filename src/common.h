/*
 * common: the few macros every layer uses. Nothing here allocates or calls libc.
 */
#ifndef LFHEAP_COMMON_H
#define LFHEAP_COMMON_H

#include "config.h"

#define LFH_LIKELY(x)   __builtin_expect(!!(x), 1)
#define LFH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LFH_NOINLINE    __attribute__((noinline))
#define LFH_INLINE      static inline __attribute__((always_inline))
#define LFH_EXPORT      __attribute__((visibility("default")))
/* Run before the program's own constructors and after its own destructors, also when the
 * program links the static archive and they share one .init_array (101 is the first
 * priority left to programs): the settings are read before a constructor of the program
 * can change the environment, the exit reports come after its destructors' frees. A
 * program's own constructor of priority 101 shares the rank, and in a static link the
 * linker's order decides (README, Configuration); 0 to 100 are reserved for the
 * implementation (the compiler and C library). */
#define LFH_LOAD_CONSTRUCTOR __attribute__((constructor(101)))
#define LFH_EXIT_DESTRUCTOR  __attribute__((destructor(101)))

/* A cache line on the machines lfheap targets (x86-64, aarch64): fields written by other
 * threads are kept on a line of their own, away from fields read on the fast path. */
#define LFH_CACHE_LINE 64

#endif
