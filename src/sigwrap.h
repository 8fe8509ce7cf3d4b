/*
 * sigwrap: async-signal safety. The release library defines sigaction, signal and the
 * other glibc calls that install a signal handler; each records the program's handler
 * and gives the kernel one lfheap wrapper instead. When a signal interrupts lfheap (the
 * interrupted instruction lies in lfheap's code, or a slow path of the thread cache is
 * running: tcache_busy), the wrapper hides the thread's cache for the duration of the
 * handler (tcache_hide), so that the handler's mallocs and frees go straight to the
 * lock-free heap and never touch the half-updated cache; then it puts the cache back
 * exactly. The fast paths carry no flag: the program counter is the flag.
 * docs/ARCHITECTURE.md, "Signals", states what is and is not covered.
 */
#ifndef LFHEAP_SIGWRAP_H
#define LFHEAP_SIGWRAP_H

#include "common.h"

#include <stdint.h>

/* Internal counters for tests (exported from every variant; not part of lfheap.h). */
struct lfh_signal_counters {
    uint64_t delivered;        /* signals that reached a handler through the wrapper */
    uint64_t in_code;          /* ... that interrupted lfheap's code (or the sigreturn) */
    uint64_t in_slow_path;     /* ... that interrupted a slow path elsewhere (libc calls) */
    uint64_t caches_reclaimed; /* exited threads whose handler never returned: cache whole */
    uint64_t caches_abandoned; /* ... cache possibly half updated, left out of use */
    uint64_t blocks_abandoned; /* the blocks those caches held */
    uint64_t bytes_abandoned;  /* and their bytes */
};

LFH_EXPORT void lfh_signal_counters_get(struct lfh_signal_counters *out);

#endif
