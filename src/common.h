/*
 * common: the few macros every layer uses. Nothing here allocates or calls libc.
 */
#ifndef LFHEAP_COMMON_H
#define LFHEAP_COMMON_H

#define LFH_LIKELY(x)   __builtin_expect(!!(x), 1)
#define LFH_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LFH_NOINLINE    __attribute__((noinline))
#define LFH_INLINE      static inline __attribute__((always_inline))
#define LFH_EXPORT      __attribute__((visibility("default")))

/* A cache line on the machines lfheap targets (x86-64, aarch64): fields written by other
 * threads are kept on a line of their own, away from fields read on the fast path. */
#define LFH_CACHE_LINE 64

#endif
