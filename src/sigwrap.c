/*
 * sigwrap: lfheap's signal-handler wrapper and the calls that install handlers.
 *
 * Records. For each signal one 64-bit word holds the last handler the program installed
 * (bit 63 set if it takes three arguments, SA_SIGINFO; handlers are user-space addresses,
 * whose top bit is clear on x86-64 and aarch64), and the kernel holds the wrapper with
 * the program's flags and mask (plus SA_SIGINFO, for the interrupted context). The word
 * is written before the kernel action, and SIG_DFL and SIG_IGN go to the kernel alone,
 * so whenever the kernel can call the wrapper the word holds a handler to call. The
 * kernel's action is the truth for everything else: an action that is not the wrapper is
 * reported as it is (SIG_DFL after SA_RESETHAND, an action installed behind lfheap's
 * back), and the wrapper's is reported with the word's handler in its place.
 *
 * The wrapper. Its own work is a load, a range test and, if the signal interrupted
 * lfheap, tcache_hide and tcache_unhide around the handler: no system call, no lock,
 * nothing that sets errno, so it is async-signal-safe and the program's errno is what
 * the handler leaves.
 *
 * Where the interrupted thread was: lfheap's code is one address range (the release
 * objects' text is the section lfheap_text, see the Makefile), so an interrupted
 * instruction pointer inside it means lfheap was running; a slow path of the thread
 * cache that is inside a libc call (mmap, clock_gettime in the vDSO, memcpy) raises
 * tcache_busy. One more place counts: the signal-return trampoline (glibc's
 * __restore_rt, the return address the kernel gives every handler). Between a wrapper's
 * return and the sigreturn system call, the context the wrapper interrupted is still
 * suspended where it was, maybe in the middle of a cache update that the wrapper has just
 * put back; a signal landing there must not use the cache either. Either way the handler
 * runs with the cache hidden.
 */
#include "sigwrap.h"

#include "common.h"
#include "platform.h"
#include "tcache.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

/* Relaxed counters: statistics for tests. */
static _Atomic uint64_t sigwrap_delivered, sigwrap_in_code, sigwrap_in_slow_path;

void lfh_signal_counters_get(struct lfh_signal_counters *out)
{
    struct tcache_lost lost;
    tcache_lost_get(&lost);
    out->delivered = atomic_load_explicit(&sigwrap_delivered, memory_order_relaxed);
    out->in_code = atomic_load_explicit(&sigwrap_in_code, memory_order_relaxed);
    out->in_slow_path = atomic_load_explicit(&sigwrap_in_slow_path, memory_order_relaxed);
    out->caches_reclaimed = lost.reclaimed;
    out->caches_abandoned = lost.abandoned;
    out->blocks_abandoned = lost.abandoned_blocks;
    out->bytes_abandoned = lost.abandoned_bytes;
}

#if API_STANDARD_NAMES

/* glibc's exported entry point, through which lfheap installs actions with the kernel. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);

/* Defined by the linker around the section that holds all of lfheap's code. */
extern const char __start_lfheap_text[] __attribute__((visibility("hidden")));
extern const char __stop_lfheap_text[] __attribute__((visibility("hidden")));

#define SIGWRAP_INFO ((uint64_t)1 << 63)

static _Atomic uint64_t sigwrap_actions[NSIG];
/* Bit sig - 1: siginterrupt(sig, 1) was called, so signal() installs without SA_RESTART. */
static _Atomic uint64_t sigwrap_interrupting;

/* The signal-return trampoline, as every wrapper finds it (relaxed: each wrapper stores
 * the same value, once, before it can return to it; loaded first so that the line stays
 * shared). Its two instructions fit in 16 bytes. */
static _Atomic uintptr_t sigwrap_restorer;
#define SIGWRAP_RESTORER_BYTES 16

enum { SIGWRAP_OUTSIDE, SIGWRAP_IN_CODE, SIGWRAP_IN_SLOW_PATH };

static unsigned interrupted_where(const void *context)
{
    uintptr_t ip = platform_context_ip(context);
    if (ip - (uintptr_t)__start_lfheap_text <
            (uintptr_t)__stop_lfheap_text - (uintptr_t)__start_lfheap_text ||
        ip - atomic_load_explicit(&sigwrap_restorer, memory_order_relaxed) < SIGWRAP_RESTORER_BYTES)
        return SIGWRAP_IN_CODE;
    return tcache_busy ? SIGWRAP_IN_SLOW_PATH : SIGWRAP_OUTSIDE;
}

/* Calls the program's handler, with tcache_in_handler raised and this frame recorded
 * (tcache.h). On return the count goes back to what it was, which also drops the counts
 * of handlers nested in this one that left by siglongjmp. */
static inline void run_handler(uint64_t action, int sig, siginfo_t *info, void *context)
{
    uintptr_t handler = (uintptr_t)(action & ~SIGWRAP_INFO);
    unsigned depth = tcache_in_handler;
    /* Signal fences: only a handler on this thread reads these. The count first: a signal
     * between the two stores then records itself one level up, never over this slot. */
    tcache_in_handler = depth + 1;
    atomic_signal_fence(memory_order_seq_cst);
    if (depth < TCACHE_HANDLER_FRAMES)
        tcache_handler_frames[depth] = (uintptr_t)__builtin_frame_address(0);
    atomic_signal_fence(memory_order_seq_cst);
    if (action & SIGWRAP_INFO)
        ((void (*)(int, siginfo_t *, void *))handler)(sig, info, context);
    else
        ((void (*)(int))handler)(sig);
    atomic_signal_fence(memory_order_seq_cst);
    tcache_in_handler = depth;
}

/* A signal that interrupted lfheap while a hiding is in progress on this thread (a handler
 * running with the cache hidden, or a hide or unhide under way): its hiding nests and
 * saves the bins in this frame (1.3 KiB). Out of line, so that only such signals take that
 * stack. */
static LFH_NOINLINE void run_hidden_nested(uint64_t action, int sig, siginfo_t *info, void *context)
{
    struct tcache_hidden frame;
    tcache_hide(&frame);
    run_handler(action, sig, info, context);
    tcache_unhide(&frame);
}

/* The same with the thread's cache hidden from the handler: the signal interrupted
 * lfheap. The outermost hiding saves into the thread's own area, so a handler that
 * allocates on a small alternate stack keeps that stack for lfheap's own paths: with the
 * save in this frame, 8 KiB barely held them (allocating_handlers_fit_sigstksz in
 * tests/test_signals.c). Out of line, as every other handler needs none of this. */
static LFH_NOINLINE void run_hidden(uint64_t action, int sig, siginfo_t *info, void *context)
{
    if (!tcache_hide_outermost()) {
        run_hidden_nested(action, sig, info, context);
        return;
    }
    tcache_hide(NULL);
    run_handler(action, sig, info, context);
    tcache_unhide(NULL);
}

static void sigwrap_handler(int sig, siginfo_t *info, void *context)
{
    uintptr_t restorer = (uintptr_t)__builtin_return_address(0);
    if (atomic_load_explicit(&sigwrap_restorer, memory_order_relaxed) != restorer)
        atomic_store_explicit(&sigwrap_restorer, restorer, memory_order_relaxed);
    /* Acquire pairs with the installing exchange: the handler's code was in place before
     * its address was published. */
    uint64_t action = atomic_load_explicit(&sigwrap_actions[sig], memory_order_acquire);
    unsigned where = interrupted_where(context);
    atomic_fetch_add_explicit(&sigwrap_delivered, 1, memory_order_relaxed);
    if (where == SIGWRAP_OUTSIDE) {
        run_handler(action, sig, info, context);
        return;
    }
    atomic_fetch_add_explicit(where == SIGWRAP_IN_CODE ? &sigwrap_in_code : &sigwrap_in_slow_path,
                              1, memory_order_relaxed);
    run_hidden(action, sig, info, context);
}

/* The action to report for the kernel's `kernel_old`, given the word that was current. */
static void report(const struct sigaction *kernel_old, uint64_t word, struct sigaction *oldact)
{
    *oldact = *kernel_old;
    if (kernel_old->sa_sigaction == sigwrap_handler) {
        oldact->sa_sigaction =
            (void (*)(int, siginfo_t *, void *))(uintptr_t)(word & ~SIGWRAP_INFO);
        oldact->sa_flags &= ~SA_SIGINFO;
        if (word & SIGWRAP_INFO)
            oldact->sa_flags |= SA_SIGINFO;
    } else if (kernel_old->sa_handler == SIG_DFL && (kernel_old->sa_flags & SA_RESETHAND) &&
               word != 0 && !(word & SIGWRAP_INFO)) {
        /* The kernel reset a one-shot wrapper to SIG_DFL and kept its flags, which carry
         * the SA_SIGINFO the wrapper needed and the program did not ask for. */
        oldact->sa_flags &= ~SA_SIGINFO;
    }
}

LFH_EXPORT int sigaction(int sig, const struct sigaction *restrict act,
                         struct sigaction *restrict oldact)
{
    if (sig < 1 || sig >= NSIG)
        return __sigaction(sig, act, oldact); /* glibc's EINVAL */
    /* Relaxed: the word is only reported here; the kernel call orders the rest. */
    uint64_t word = atomic_load_explicit(&sigwrap_actions[sig], memory_order_relaxed);
    struct sigaction kernel_old;
    int result;
    if (!act || act->sa_handler == SIG_DFL || act->sa_handler == SIG_IGN) {
        result = __sigaction(sig, act, &kernel_old);
    } else {
        struct sigaction wrapped = *act;
        wrapped.sa_sigaction = sigwrap_handler;
        wrapped.sa_flags |= SA_SIGINFO;
        /* The wrapper itself comes back only from a program that read the kernel's action
         * behind lfheap's back: it stands for the handler already recorded. */
        if (act->sa_sigaction != sigwrap_handler) {
            uint64_t handler = (uint64_t)(uintptr_t)act->sa_handler;
            /* Release publishes the handler to the wrapper's acquire load. A failed
             * installation (SIGKILL, SIGSTOP, glibc's internal signals) leaves a word the
             * kernel never makes the wrapper read. */
            word = atomic_exchange_explicit(
                &sigwrap_actions[sig], handler | (act->sa_flags & SA_SIGINFO ? SIGWRAP_INFO : 0),
                memory_order_acq_rel);
        }
        result = __sigaction(sig, &wrapped, &kernel_old);
    }
    if (result == 0 && oldact)
        report(&kernel_old, word, oldact);
    return result;
}

static sighandler_t install_simple(int sig, sighandler_t handler, int flags, bool block_self)
{
    if (handler == SIG_ERR || sig < 1 || sig >= NSIG) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction act, old;
    act.sa_handler = handler;
    act.sa_flags = flags;
    sigemptyset(&act.sa_mask);
    if (block_self)
        sigaddset(&act.sa_mask, sig);
    return sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
}

/* BSD semantics, as glibc's signal(): the handler stays installed, the signal is blocked
 * while it runs, and interrupted system calls restart unless siginterrupt() said not. */
LFH_EXPORT sighandler_t signal(int sig, sighandler_t handler)
{
    bool interrupting =
        sig >= 1 && sig < NSIG &&
        (atomic_load_explicit(&sigwrap_interrupting, memory_order_relaxed) >> (sig - 1) & 1);
    return install_simple(sig, handler, interrupting ? 0 : SA_RESTART, true);
}

/* System V semantics: one shot, not blocked while it runs, no restart. */
LFH_EXPORT sighandler_t sysv_signal(int sig, sighandler_t handler)
{
    return install_simple(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

/* X/Open: SIG_HOLD blocks the signal; anything else installs the disposition (no flags,
 * empty mask) and unblocks it. The result is SIG_HOLD if the signal was blocked. */
LFH_EXPORT sighandler_t sigset(int sig, sighandler_t disposition)
{
    sigset_t one, before;
    sigemptyset(&one);
    if (sigaddset(&one, sig) != 0)
        return SIG_ERR;
    struct sigaction old;
    if (disposition == SIG_HOLD) {
        if (sigprocmask(SIG_BLOCK, &one, &before) != 0)
            return SIG_ERR;
        if (sigismember(&before, sig))
            return SIG_HOLD;
        return sigaction(sig, NULL, &old) == 0 ? old.sa_handler : SIG_ERR;
    }
    sighandler_t previous = install_simple(sig, disposition, 0, false);
    if (previous == SIG_ERR || sigprocmask(SIG_UNBLOCK, &one, &before) != 0)
        return SIG_ERR;
    return sigismember(&before, sig) ? SIG_HOLD : previous;
}

LFH_EXPORT int sigignore(int sig)
{
    return install_simple(sig, SIG_IGN, 0, false) == SIG_ERR ? -1 : 0;
}

LFH_EXPORT int siginterrupt(int sig, int interrupt)
{
    struct sigaction act;
    if (sigaction(sig, NULL, &act) != 0)
        return -1;
    uint64_t bit = (uint64_t)1 << (sig - 1);
    /* Relaxed: each bit is read only by signal() for its own signal. */
    if (interrupt) {
        atomic_fetch_or_explicit(&sigwrap_interrupting, bit, memory_order_relaxed);
        act.sa_flags &= ~SA_RESTART;
    } else {
        atomic_fetch_and_explicit(&sigwrap_interrupting, ~bit, memory_order_relaxed);
        act.sa_flags |= SA_RESTART;
    }
    return sigaction(sig, &act, NULL);
}

/* glibc's other names for the same calls. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
#define SIGWRAP_ALIAS(name, target)                                                                \
    extern __typeof(target) name __attribute__((alias(#target), visibility("default")))
SIGWRAP_ALIAS(bsd_signal, signal);
SIGWRAP_ALIAS(ssignal, signal);
SIGWRAP_ALIAS(__sysv_signal, sysv_signal);

#endif
