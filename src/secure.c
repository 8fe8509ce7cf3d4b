/*
 * secure: the hardened build's keys, checks and reports (secure.h). Everything here runs
 * on the thread that holds the block it checks; nothing waits for another thread.
 */
#include "secure.h"

#include "os.h"
#include "out.h"
#include "platform.h"

#include <stdlib.h>

#if SECURE_ENABLED

struct secure_keys secure_keys;

/* Relaxed stores: heap_mark_init publishes them with the free keys' secret (release),
 * before the first block exists; racing callers store the same keys (os_random is the
 * same in every thread). */
void secure_init(void)
{
    const char *fill = platform_getenv("LFHEAP_SECURE_FILL");
    bool zero = fill && strcmp(fill, "zero") == 0;
    bool whole = zero || (fill && strcmp(fill, "full") == 0);
    uint64_t byte = zero ? 0 : SECURE_FILL_POISON;
    atomic_store_explicit(&secure_keys.fill_word, UINT64_C(0x0101010101010101) * byte,
                          memory_order_relaxed);
    atomic_store_explicit(&secure_keys.fill_whole, whole, memory_order_relaxed);
    atomic_store_explicit(&secure_keys.link, os_random(UINT64_C(0x6c696e6b)), memory_order_relaxed);
    atomic_store_explicit(&secure_keys.canary, os_random(UINT64_C(0x63616e61)),
                          memory_order_relaxed);
}

/* Guard pages placed, and how many may be (0 until the first take reads the limit).
 * Relaxed: a count, not a publication; every take and put is one atomic read-modify-write,
 * so no more than the budget ever hold a place (a take that finds the budget spent gives
 * its increment back). */
static _Atomic long secure_guards_placed;
static _Atomic long secure_guard_budget;

bool secure_guard_take(void)
{
    long budget = atomic_load_explicit(&secure_guard_budget, memory_order_relaxed);
    if (budget == 0) {
        /* Racing first takes store the same value. */
        budget = platform_max_map_count() / 4;
        atomic_store_explicit(&secure_guard_budget, budget, memory_order_relaxed);
    }
    if (atomic_fetch_add_explicit(&secure_guards_placed, 1, memory_order_relaxed) < budget)
        return true;
    atomic_fetch_sub_explicit(&secure_guards_placed, 1, memory_order_relaxed);
    return false;
}

void secure_guard_put(void)
{
    atomic_fetch_sub_explicit(&secure_guards_placed, 1, memory_order_relaxed);
}

void secure_fail(const char *kind, const char *routine, const void *ptr)
{
    struct out o;
    char line[OUT_LINE];
    out_report_begin(&o, &line, kind);
    out_report_call(&o, routine, ptr);
    out_str(&o, ")\n");
    out_flush(&o);
    abort();
}

#endif
