/*
 * debug: the debug build's checks and reports (debug.h), and the report of a broken
 * invariant (invariant.h). Nothing here allocates or takes a lock: reports are built on
 * the stack and written with write(2) (out.h), so they work whatever state the heap is in.
 */
#include "debug.h"

#include "common.h"
#include "invariant.h"
#include "out.h"
#include "platform.h"
#include "sizeclass.h"
#include "stats.h"
#include "vgclient.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if LFH_CHECKS
/* ---- broken invariants (invariant.h) ---------------------------------------------- */

void lfh_invariant_failed(const char *name, const char *condition, const char *file, int line)
{
    struct out o;
    char text[OUT_LINE];
    out_report_begin(&o, &text, "broken invariant");
    out_str(&o, name);
    out_str(&o, ": ");
    out_str(&o, condition);
    out_str(&o, " at ");
    out_str(&o, file);
    out_str(&o, ":");
    out_dec(&o, (uint64_t)line);
    out_str(&o, "\n");
    out_flush(&o);
    abort();
}
#endif

#if DEBUG_ENABLED

/* ---- LFHEAP_ABORT and the report line --------------------------------------------- */

static _Atomic int debug_abort = -1;

static bool abort_enabled(void)
{
    /* Relaxed: every thread computes the same value from the environment. */
    int enabled = atomic_load_explicit(&debug_abort, memory_order_relaxed);
    if (enabled < 0) {
        const char *env = platform_getenv("LFHEAP_ABORT");
        enabled = !(env && strcmp(env, "0") == 0);
        atomic_store_explicit(&debug_abort, enabled, memory_order_relaxed);
    }
    return enabled;
}

/* LFHEAP_UNFREED=0 silences the report of unfreed storage at exit (debug_exit_report):
 * programs that never free everything before they exit (most interpreters), and test
 * harnesses that expect an empty stderr from the programs they run. */
static bool unfreed_report = true;

/* Read when the library is loaded, so that the program's own environment changes do
 * not matter. */
LFH_LOAD_CONSTRUCTOR static void debug_config(void)
{
    abort_enabled();
    const char *env = platform_getenv("LFHEAP_UNFREED");
    unfreed_report = !(env && strcmp(env, "0") == 0);
}

static void report_end(struct out *o)
{
    out_str(o, "\n");
    out_flush(o);
    if (abort_enabled())
        abort();
}

/* ---- block states ----------------------------------------------------------------- */

/* The word that holds a block's state: its record, or a large block's flags. */
static uint32_t *state_word(struct descriptor *desc, const void *block)
{
    if (desc->class_index == HEAP_CLASS_LARGE)
        return &desc->large_flags;
    return heap_record_at(desc, block);
}

static size_t request_of(const struct descriptor *desc, uint32_t word)
{
    return desc->class_index == HEAP_CLASS_LARGE ? desc->large_request
                                                 : word & HEAP_RECORD_REQUEST_MASK;
}

void debug_report_fill(const struct descriptor *desc, const void *block)
{
    const unsigned char *bytes = block;
    size_t i = sizeof(uint64_t);
    while (i < debug_fill_words(desc) * sizeof(uint64_t) && bytes[i] == DEBUG_FREED_BYTE)
        i++;
    struct out o;
    char line[OUT_LINE];
    out_report_begin(&o, &line, "write after free");
    out_str(&o, "block ");
    out_hex(&o, (uintptr_t)block);
    out_str(&o, " (");
    out_num(&o, desc->block_size);
    out_str(&o, "-byte class) was written at offset ");
    out_num(&o, i);
    out_str(&o, " while it was free (found when it was handed out again)");
    report_end(&o);
}

void debug_born(struct descriptor *desc, void *block, size_t request)
{
    uint32_t *word = state_word(desc, block);
    /* Under memcheck the block reads as undefined by now (vgclient_alloc), and memcheck
     * reports a write to a freed block itself, where it happens: no fill to check. */
    if (desc->class_index != HEAP_CLASS_LARGE && debug_state_of(*word) == DEBUG_FREED &&
        !vgclient_memcheck() && !debug_fill_intact(desc, block))
        debug_report_fill(desc, block);
    *word = debug_with_state(*word, DEBUG_LIVE);
    debug_write_canary(block, request);
    stats_add(STATS_REQUEST_IN, request);
}

void debug_resized(struct descriptor *desc, void *block, size_t request)
{
    struct stats_block *b = stats_mine();
    stats_add_to(b, STATS_REQUEST_OUT, request_of(desc, *state_word(desc, block)));
    stats_add_to(b, STATS_REQUEST_IN, request);
    debug_write_canary(block, request);
}

void debug_died(struct descriptor *desc, void *block)
{
    uint32_t *word = state_word(desc, block);
    stats_add(STATS_REQUEST_OUT, request_of(desc, *word));
    *word = debug_with_state(*word, DEBUG_FREED);
    if (desc->class_index != HEAP_CLASS_LARGE)
        debug_fill(desc, block);
}

/* ---- checks of the pointers the program passes ------------------------------------ */

static LFH_NOINLINE void report_invalid(const char *routine, const void *ptr,
                                        enum debug_state state)
{
    struct out o;
    char line[OUT_LINE];
    bool freeing = strncmp(routine, "free", 4) == 0;
    out_report_begin(&o, &line,
                     state == DEBUG_FREED ? (freeing ? "double free" : "use after free")
                                          : "invalid pointer");
    out_report_call(&o, routine, ptr);
    out_str(&o, state == DEBUG_FREED   ? "): the block was already freed"
                : state == DEBUG_NEVER ? "): a block lfheap never handed out"
                                       : "): not a block lfheap handed out (or a large "
                                         "block already freed)");
    report_end(&o);
}

static LFH_NOINLINE void report_overflow(const char *routine, const void *ptr, size_t request)
{
    struct out o;
    char line[OUT_LINE];
    out_report_begin(&o, &line, "heap overflow");
    out_str(&o, "block ");
    out_hex(&o, (uintptr_t)ptr);
    out_str(&o, " of ");
    out_num(&o, request);
    out_str(&o, " bytes was written past its end (found by ");
    out_str(&o, routine);
    out_str(&o, ")");
    report_end(&o);
}

bool debug_check(const char *routine, void *ptr, struct descriptor *desc, bool canary,
                 size_t *request)
{
    *request = 0;
    /* Blocks of plain classes are lfheap's own in this build (api.c hands out tracked
     * ones only). DEBUG_LIVE stands for "no state" here. */
    if (!desc || (desc->class_index != HEAP_CLASS_LARGE && !desc->records)) {
        report_invalid(routine, ptr, DEBUG_LIVE);
        return false;
    }
    uint32_t word = *state_word(desc, ptr);
    if (debug_state_of(word) != DEBUG_LIVE) {
        report_invalid(routine, ptr, debug_state_of(word));
        return false;
    }
    *request = request_of(desc, word);
    if (canary && !debug_canary_intact(ptr, *request))
        report_overflow(routine, ptr, *request);
    return true;
}

void debug_check_sized(const char *routine, void *ptr, struct descriptor *desc, size_t request,
                       size_t size, size_t align)
{
    struct out o;
    char line[OUT_LINE];
    if (size != request) {
        out_report_begin(&o, &line, "wrong size");
        out_report_call(&o, routine, ptr);
        out_str(&o, ", ");
        out_num(&o, size);
        out_str(&o, "): the block was allocated with ");
        out_num(&o, request);
        out_str(&o, " bytes");
        report_end(&o);
    }
    struct heap_props props;
    if (align && heap_props_get(desc, ptr, &props) && (align < 16 ? 16 : align) != props.align) {
        out_report_begin(&o, &line, "wrong alignment");
        out_report_call(&o, routine, ptr);
        out_str(&o, ", alignment ");
        out_num(&o, align);
        out_str(&o, "): the block was allocated aligned to ");
        out_num(&o, props.align);
        report_end(&o);
    }
}

/* ---- unfreed storage at exit ------------------------------------------------------ */

/* llheap's malloc_unfreed: the program may define it to say how many requested bytes it
 * leaves allocated on purpose (say, buffers of libraries it uses). Every debug library
 * has llheap's default, 0 (api_llheap.c, weak); visible, so that the program's definition
 * replaces it also in a preloaded library (the program must then export it: linked with
 * -rdynamic). */
extern size_t malloc_unfreed(void) __attribute__((visibility("default")));

/* libstdc++'s __gnu_cxx::__freeres. libstdc++ allocates an emergency pool for exceptions
 * thrown when malloc fails as it is loaded, and never frees it: 72,704 bytes with GCC 12
 * on x86-64, which every C++ program would be reported for. This routine (CXXABI_1.3.10)
 * frees it; memcheck calls it at exit for the same reason. The pool serves only an
 * exception whose malloc failed, and this destructor runs after the program's own, so
 * only a thread still running at exit, out of memory, could draw on it afterwards.
 * Weak, like api_cxx.c's references: a C program loads no C++ runtime for it. */
extern void debug_cxx_freeres(void) __asm__("_ZN9__gnu_cxx9__freeresEv")
    __attribute__((weak, visibility("default")));

/* A warning, not an error: it never aborts, so the exit status stays the program's. */
LFH_EXIT_DESTRUCTOR static void debug_exit_report(void)
{
    if (!unfreed_report)
        return;
    if (debug_cxx_freeres)
        debug_cxx_freeres();
    uint64_t count[STATS_COUNTERS];
    stats_sum(count);
    /* Threads still running may have counted a free but not yet its allocation. */
    if (count[STATS_REQUEST_OUT] >= count[STATS_REQUEST_IN])
        return;
    uint64_t unfreed = count[STATS_REQUEST_IN] - count[STATS_REQUEST_OUT];
    uint64_t declared = malloc_unfreed();
    if (unfreed <= declared)
        return;
    struct out o;
    char line[OUT_LINE];
    out_report_begin(&o, &line, "unfreed storage");
    out_num(&o, unfreed - declared);
    out_str(&o, " bytes requested and not freed at exit (");
    out_num(&o, unfreed);
    out_str(&o, " unfreed, ");
    out_num(&o, declared);
    out_str(&o, " declared by malloc_unfreed)\n");
    out_flush(&o);
}

#endif
