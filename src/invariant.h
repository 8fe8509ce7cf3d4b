/*
 * invariant: lfheap's own invariants, asserted where they must hold (the descriptor's
 * anchor, the buddy tree's nodes, the page map's entries: docs/ARCHITECTURE.md,
 * "Invariants asserted"). A broken one is a bug of lfheap or a heap the program has
 * overwritten, never a misuse the API must tolerate: the report names the invariant, the
 * condition and where it was checked, on stderr ("lfheap: broken invariant: <name>:
 * <condition> at <file>:<line>"), and the program aborts, whatever LFHEAP_ABORT says (a
 * heap whose metadata is wrong cannot be trusted to go on).
 *
 * Compiled into the debug builds (-DLFHEAP_DEBUG) and the tests' libraries
 * (-DLFHEAP_CHECKS: the prefixed, sanitizer, fault and parking variants); the release,
 * statistics and secure builds compile every check away unevaluated, so their code is
 * what it was without them.
 *
 * A check in a lock-free structure asserts only what holds for values the checking
 * thread itself read or wrote atomically, or for fields nobody writes while it holds
 * what they describe; each call site says which. Reading another thread's fields
 * non-atomically to check them would itself be a race.
 *
 * A leaf: every layer, down to the buddy back-end, may include it.
 */
#ifndef LFHEAP_INVARIANT_H
#define LFHEAP_INVARIANT_H

#include "common.h"

#if defined(LFHEAP_DEBUG) || defined(LFHEAP_CHECKS)
#define LFH_CHECKS 1
#else
#define LFH_CHECKS 0
#endif

#if LFH_CHECKS
/* Reports the broken invariant `name` (its condition `condition`, checked at file:line)
 * and aborts. In debug.c; writes with write(2), allocates nothing. */
void lfh_invariant_failed(const char *name, const char *condition, const char *file, int line)
    __attribute__((noreturn, cold, visibility("hidden")));
#define LFH_INVARIANT(name, cond)                                                                  \
    (LFH_LIKELY(cond) ? (void)0 : lfh_invariant_failed(name, #cond, __FILE__, __LINE__))
#else
#define LFH_INVARIANT(name, cond) ((void)sizeof(cond))
#endif

#endif
