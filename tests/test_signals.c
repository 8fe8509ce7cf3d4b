/*
 * Signal handlers that allocate, interrupting malloc and free on the same thread
 * (issue 6): a worker thread allocates, reallocates and frees blocks of mixed sizes,
 * checking their contents, while other threads send it signals as fast as they can;
 * every handler allocates, writes, checks and frees, and keeps some blocks until a later
 * signal. Variants: handlers installed by sigaction with and without SA_SIGINFO (and on
 * an alternate stack), by signal(), and nested signals. The counters lfheap keeps
 * (lfh_signal_counters_get) prove that a healthy number of signals interrupted lfheap
 * itself. Then: sigaction's round trip, and threads killed (pthread_exit) or jumped out
 * of (siglongjmp) by a handler that interrupted them inside lfheap.
 *
 * A plain program: run with lfheap preloaded (build/t-plain) or linked with
 * build/liblfheap.a (build/t-linked). Without lfheap it runs the stress test on glibc's
 * malloc in a child process and reports what happened, for information only.
 *
 * usage: test_signals [signals per variant] [threads to kill] [only the cases whose name
 *        contains this]
 */
#include "sigwrap.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* Present when lfheap is linked or preloaded. */
extern void lfh_signal_counters_get(struct lfh_signal_counters *out) __attribute__((weak));

/* glibc's own entry point, which lfheap does not interpose: what the kernel really has. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);

static uint64_t signals_per_variant = 50000;
static unsigned threads_to_kill = 200;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct lfh_signal_counters counters(void)
{
    struct lfh_signal_counters c = {0};
    if (lfh_signal_counters_get)
        lfh_signal_counters_get(&c);
    return c;
}

static uint64_t landed_inside(void)
{
    struct lfh_signal_counters c = counters();
    return c.in_code + c.in_slow_path;
}

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Mostly small, some medium, a few large (the large path too). */
static size_t pick_size(uint64_t r)
{
    unsigned kind = (unsigned)(r % 100);
    if (kind < 80)
        return 1 + (size_t)(r >> 8) % 512;
    if (kind < 98)
        return 513 + (size_t)(r >> 8) % 32000;
    return 40000 + (size_t)(r >> 8) % 200000;
}

/* Patterns: the first 256 and the last 64 bytes of a block. */
static void fill(unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n && i < 256; i++)
        p[i] = (unsigned char)(seed + i * 7);
    for (size_t i = n > 64 ? n - 64 : 0; i < n; i++)
        p[i] = (unsigned char)(seed + i * 7);
}

static int intact(const unsigned char *p, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n && i < 256; i++)
        if (p[i] != (unsigned char)(seed + i * 7))
            return 0;
    for (size_t i = n > 64 ? n - 64 : 0; i < n; i++)
        if (p[i] != (unsigned char)(seed + i * 7))
            return 0;
    return 1;
}

/* ---- what every handler does ------------------------------------------------------ */

static _Atomic uint64_t handled, handler_errors, nested_deliveries;
static _Atomic unsigned deepest;

#define KEPT_DEPTH 8
#define KEPT_SLOTS 4
struct kept {
    unsigned char *p;
    size_t n;
    uint64_t seed;
};
/* Per thread and per nesting level, so that a nested handler never races the one it
 * interrupted over the same slot. */
static __thread struct kept kept[KEPT_DEPTH][KEPT_SLOTS];
static __thread unsigned handler_depth;
static __thread uint64_t handler_seq;

static void handler_error(void)
{
    atomic_fetch_add_explicit(&handler_errors, 1, memory_order_relaxed);
}

/* ---- blocks from another thread, for the remote-free variant -------------------------- */

/* A block handed over: its address, size and fill pattern. */
struct slot {
    unsigned char *p;
    size_t n;
    uint64_t seed;
};

/* A single-producer, single-consumer ring of blocks (test code: the feeder may wait). */
#define RING_SIZE 1024
struct ring {
    _Atomic uint64_t head, tail; /* next to take, next to fill */
    struct slot items[RING_SIZE];
};

/* The feeder allocates blocks for the worker to free and for the worker's handler to
 * free: each of their frees is a remote free (tcache_free_slow's push, or, in a handler
 * that interrupted lfheap, the hidden cache's direct give-back). */
static struct ring to_worker, to_handler;
static bool remote_mode;
static _Atomic int feeder_stop;
static _Atomic uint64_t fed, freed_remote;

static bool ring_put(struct ring *r, struct slot item)
{
    uint64_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
    /* Acquire: the consumer's reads of the slots it freed are done. */
    if (tail - atomic_load_explicit(&r->head, memory_order_acquire) == RING_SIZE)
        return false;
    r->items[tail % RING_SIZE] = item;
    /* Release: publishes the slot. */
    atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
    return true;
}

static bool ring_take(struct ring *r, struct slot *item)
{
    uint64_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (head == atomic_load_explicit(&r->tail, memory_order_acquire))
        return false;
    *item = r->items[head % RING_SIZE];
    atomic_store_explicit(&r->head, head + 1, memory_order_release);
    return true;
}

/* Checks a handed-over block's pattern and frees it; false if it was damaged. */
static bool free_handed_over(struct ring *r)
{
    struct slot item;
    if (!ring_take(r, &item))
        return true;
    bool whole = intact(item.p, item.n, item.seed);
    free(item.p);
    atomic_fetch_add_explicit(&freed_remote, 1, memory_order_relaxed);
    return whole;
}

static void *feeder_main(void *arg)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (unsigned turn = 0; !atomic_load_explicit(&feeder_stop, memory_order_relaxed); turn++) {
        uint64_t r = next_random(&rng);
        struct slot item = {.n = 1 + (size_t)(r >> 8) % 1024, .seed = r};
        item.p = malloc(item.n);
        if (!item.p) {
            handler_error();
            continue;
        }
        fill(item.p, item.n, item.seed);
        struct ring *to = turn % 4 == 0 ? &to_handler : &to_worker;
        while (!ring_put(to, item)) {
            if (atomic_load_explicit(&feeder_stop, memory_order_relaxed)) {
                free(item.p);
                return arg;
            }
            sched_yield();
        }
        atomic_fetch_add_explicit(&fed, 1, memory_order_relaxed);
    }
    return arg;
}

static void handler_work(void)
{
    unsigned depth = handler_depth;
    if (depth >= KEPT_DEPTH)
        return;
    handler_depth++;
    if (depth > 0)
        atomic_fetch_add_explicit(&nested_deliveries, 1, memory_order_relaxed);
    unsigned seen = atomic_load_explicit(&deepest, memory_order_relaxed);
    while (depth + 1 > seen && !atomic_compare_exchange_weak(&deepest, &seen, depth + 1))
        ;
    uint64_t seed = ++handler_seq * 0x9e3779b97f4a7c15ull + depth;
    /* The ring's one consumer: only the outermost handler takes from it. */
    if (remote_mode && depth == 0 && !free_handed_over(&to_handler))
        handler_error();
    /* Blocks for this signal only. */
    size_t n = pick_size(seed);
    unsigned char *p = malloc(n);
    unsigned char *z = calloc(1, 1 + (seed >> 20) % 700);
    if (!p || !z) {
        handler_error();
    } else {
        fill(p, n, seed);
        for (size_t i = 0; i < 1 + (seed >> 20) % 700; i++)
            if (z[i]) {
                handler_error();
                break;
            }
        free(z);
        if (!intact(p, n, seed))
            handler_error();
        free(p);
    }
    /* Blocks kept until a later signal, freed or reallocated then. */
    {
        struct kept *k = &kept[depth][seed % KEPT_SLOTS];
        if (k->p) {
            if (!intact(k->p, k->n, k->seed))
                handler_error();
            if (seed & 0x100) {
                free(k->p);
                k->p = NULL;
            } else {
                size_t grown = pick_size(seed >> 3);
                unsigned char *q = realloc(k->p, grown);
                if (!q) {
                    handler_error();
                } else {
                    size_t common = grown < k->n ? grown : k->n;
                    if (!intact(q, common < 256 ? common : 256, k->seed))
                        handler_error();
                    k->p = q;
                    k->n = grown;
                    k->seed = seed;
                    fill(q, grown, seed);
                }
            }
        } else {
            k->n = pick_size(seed >> 5);
            k->p = malloc(k->n);
            k->seed = seed;
            if (k->p)
                fill(k->p, k->n, seed);
            else
                handler_error();
        }
    }
    atomic_fetch_add_explicit(&handled, 1, memory_order_relaxed);
    handler_depth--;
}

static void free_kept(void)
{
    for (unsigned d = 0; d < KEPT_DEPTH; d++)
        for (unsigned s = 0; s < KEPT_SLOTS; s++) {
            struct kept *k = &kept[d][s];
            if (k->p && !intact(k->p, k->n, k->seed))
                handler_error();
            free(k->p);
            k->p = NULL;
        }
}

/* The handlers of the variants. */
static _Atomic uint64_t arity_errors;
static char *altstack;
static size_t altstack_size;

static void plain_handler(int sig)
{
    if (sig != SIGUSR1 && sig != SIGUSR2)
        atomic_fetch_add_explicit(&arity_errors, 1, memory_order_relaxed);
    handler_work();
}

static void info_handler(int sig, siginfo_t *info, void *context)
{
    if (sig != SIGUSR1 || !info || info->si_signo != SIGUSR1 || info->si_code != SI_TIMER ||
        !context)
        atomic_fetch_add_explicit(&arity_errors, 1, memory_order_relaxed);
    handler_work();
}

static void onstack_handler(int sig)
{
    char here;
    if (sig != SIGUSR1 || &here < altstack || &here >= altstack + altstack_size)
        atomic_fetch_add_explicit(&arity_errors, 1, memory_order_relaxed);
    handler_work();
}

/* ---- the interrupted thread and the signallers -------------------------------------- */

static _Atomic int worker_stop;
static _Atomic uint64_t worker_ops, worker_errors;
static _Atomic pid_t worker_tid;

static void worker_error(void)
{
    atomic_fetch_add_explicit(&worker_errors, 1, memory_order_relaxed);
}

/* One step of the worker's mix; also used by the threads that are killed. */
static void worker_step(struct slot *slots, unsigned count, uint64_t *rng)
{
    uint64_t r = next_random(rng);
    struct slot *s = &slots[r % count];
    if (s->p) {
        if (!intact(s->p, s->n, s->seed))
            worker_error();
        if ((r >> 40) % 3 == 0) {
            size_t n = pick_size(r >> 9);
            unsigned char *q = realloc(s->p, n);
            if (!q) {
                worker_error();
                return;
            }
            size_t common = n < s->n ? n : s->n;
            if (!intact(q, common < 256 ? common : 256, s->seed))
                worker_error();
            s->p = q;
            s->n = n;
            s->seed = r;
            fill(q, n, r);
        } else {
            free(s->p);
            s->p = NULL;
        }
    } else {
        s->n = pick_size(r >> 9);
        if ((r >> 50) & 1) {
            s->p = calloc(1, s->n);
            if (s->p && (s->p[0] || s->p[s->n - 1]))
                worker_error();
        } else {
            s->p = malloc(s->n);
        }
        if (!s->p) {
            worker_error();
            return;
        }
        s->seed = r;
        fill(s->p, s->n, r);
    }
}

static void *worker_main(void *arg)
{
    int use_altstack = arg != NULL;
    if (use_altstack) {
        stack_t ss = {.ss_sp = altstack, .ss_size = altstack_size, .ss_flags = 0};
        REQUIRE(sigaltstack(&ss, NULL) == 0);
    }
    struct slot slots[64] = {{0}};
    uint64_t rng = 0x1234567 + (uintptr_t)&slots;
    atomic_store(&worker_tid, gettid());
    /* Successful calls never change errno: a handler (or lfheap's wrapper) that did
     * would show here. */
    errno = EDOM;
    while (!atomic_load_explicit(&worker_stop, memory_order_relaxed)) {
        worker_step(slots, 64, &rng);
        for (unsigned i = 0; remote_mode && i < 2; i++)
            if (!free_handed_over(&to_worker))
                worker_error();
        if (errno != EDOM) {
            worker_error();
            errno = EDOM;
        }
        atomic_fetch_add_explicit(&worker_ops, 1, memory_order_relaxed);
    }
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    for (unsigned i = 0; i < 64; i++) {
        if (slots[i].p && !intact(slots[i].p, slots[i].n, slots[i].seed))
            worker_error();
        free(slots[i].p);
    }
    free_kept();
    if (use_altstack) {
        stack_t ss = {.ss_flags = SS_DISABLE};
        sigaltstack(&ss, NULL);
    }
    return NULL;
}

/* A timer that sends `sig` to thread `tid` every `interval_ns`: each signal interrupts
 * the thread wherever it is running (a signal sent while it is preempted waits until it
 * runs again). */
static timer_t start_timer(pid_t tid, int sig, long interval_ns)
{
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev._sigev_un._tid = tid;
    timer_t timer;
    REQUIRE(timer_create(CLOCK_MONOTONIC, &sev, &timer) == 0);
    struct itimerspec spec = {{0, interval_ns}, {0, interval_ns}};
    REQUIRE(timer_settime(timer, 0, &spec, NULL) == 0);
    return timer;
}

enum install {
    INSTALL_SIGINFO,
    INSTALL_PLAIN_ONSTACK,
    INSTALL_SIGNAL,
    INSTALL_NESTED,
    INSTALL_REMOTE
};

static void install(enum install how)
{
    struct sigaction act;
    memset(&act, 0, sizeof act);
    sigemptyset(&act.sa_mask);
    switch (how) {
    case INSTALL_SIGINFO:
    case INSTALL_REMOTE:
        act.sa_sigaction = info_handler;
        act.sa_flags = SA_SIGINFO | SA_RESTART;
        REQUIRE(sigaction(SIGUSR1, &act, NULL) == 0);
        break;
    case INSTALL_PLAIN_ONSTACK:
        act.sa_handler = onstack_handler;
        act.sa_flags = SA_ONSTACK | SA_RESTART;
        REQUIRE(sigaction(SIGUSR1, &act, NULL) == 0);
        break;
    case INSTALL_SIGNAL:
        REQUIRE(signal(SIGUSR1, plain_handler) != SIG_ERR);
        break;
    case INSTALL_NESTED:
        /* SIGUSR1 may interrupt its own handler (SA_NODEFER) and SIGUSR2's; SIGUSR2,
         * installed by signal(), blocks only itself, so it interrupts SIGUSR1's. A handler
         * nested deeper than KEPT_DEPTH returns at once. */
        act.sa_handler = plain_handler;
        act.sa_flags = SA_NODEFER | SA_RESTART;
        REQUIRE(sigaction(SIGUSR1, &act, NULL) == 0);
        REQUIRE(signal(SIGUSR2, plain_handler) != SIG_ERR);
        break;
    }
}

struct stress_result {
    uint64_t handled, inside, ops, nested;
    unsigned deepest;
    double seconds;
};

/* What a variant must have seen: `target` signals handled, enough of them inside lfheap
 * to have tried the dangerous case many times over (valgrind delivers signals where its
 * scheduler looks for them, not at any instruction: there the run only has to be clean),
 * and for the nested variant handlers interrupted by handlers. How fast these come
 * depends on the machine's load and on valgrind, so a variant runs until it has them. */
static bool stress_saw_enough(enum install how, uint64_t target, uint64_t handled_now,
                              uint64_t inside, uint64_t nested, unsigned depth)
{
    if (handled_now < target)
        return false;
    if (!RUNNING_ON_VALGRIND && (inside < handled_now / 100 || inside < 50))
        return false;
    return how != INSTALL_NESTED || (nested >= 50 && depth >= 2);
}

/* Runs one variant until it saw enough (above), or for `limit` seconds: a bound that only
 * a run in which the events truly stopped happening reaches. */
static struct stress_result stress(enum install how, uint64_t target, double limit)
{
    atomic_store(&handled, 0);
    atomic_store(&worker_ops, 0);
    atomic_store(&nested_deliveries, 0);
    atomic_store(&deepest, 0);
    atomic_store(&worker_stop, 0);
    atomic_store(&worker_tid, 0);
    install(how);
    uint64_t inside_before = landed_inside();
    double start = now_s();
    remote_mode = how == INSTALL_REMOTE;
    pthread_t feeder;
    if (remote_mode) {
        atomic_store(&feeder_stop, 0);
        REQUIRE(pthread_create(&feeder, NULL, feeder_main, NULL) == 0);
    }
    pthread_t worker;
    REQUIRE(pthread_create(&worker, NULL, worker_main,
                           how == INSTALL_PLAIN_ONSTACK ? (void *)1 : NULL) == 0);
    while (!atomic_load(&worker_tid))
        sched_yield();
    /* Intervals several times a handler's work, so that the worker runs between signals.
     * Nested: SIGUSR2 often, and SIGUSR1 (not blocked in its own handler) more rarely,
     * so that nesting stays shallow. */
    timer_t timers[2];
    unsigned count = how == INSTALL_NESTED ? 2 : 1;
    timers[0] = start_timer(atomic_load(&worker_tid), SIGUSR1, count == 2 ? 250000 : 60000);
    if (count == 2)
        timers[1] = start_timer(atomic_load(&worker_tid), SIGUSR2, 37000);
    while (!stress_saw_enough(how, target, atomic_load(&handled), landed_inside() - inside_before,
                              atomic_load(&nested_deliveries), atomic_load(&deepest)) &&
           now_s() - start < limit)
        usleep(2000);
    for (unsigned i = 0; i < count; i++)
        timer_delete(timers[i]);
    atomic_store(&worker_stop, 1);
    pthread_join(worker, NULL);
    if (remote_mode) {
        atomic_store(&feeder_stop, 1);
        pthread_join(feeder, NULL);
        /* What neither took: freed here, checked like the rest. */
        while (to_worker.head != to_worker.tail)
            if (!free_handed_over(&to_worker))
                worker_error();
        while (to_handler.head != to_handler.tail)
            if (!free_handed_over(&to_handler))
                handler_error();
        remote_mode = false;
    }
    struct stress_result r = {atomic_load(&handled),    landed_inside() - inside_before,
                              atomic_load(&worker_ops), atomic_load(&nested_deliveries),
                              atomic_load(&deepest),    now_s() - start};
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
    return r;
}

static const char *const install_names[] = {"sigaction SA_SIGINFO", "sigaction SA_ONSTACK",
                                            "signal()", "nested", "remote frees"};

static void check_stress(enum install how)
{
    atomic_store(&handler_errors, 0);
    atomic_store(&worker_errors, 0);
    atomic_store(&arity_errors, 0);
    /* A thousand signals a second at the least (the timers send 4,000 to 27,000). */
    struct stress_result r = stress(how, signals_per_variant, 180.0 + 1e-3 * signals_per_variant);
    printf("  %s: %llu signals handled in %.1f s, %llu inside lfheap, %llu worker operations, "
           "%llu nested (depth %u)\n",
           install_names[how], (unsigned long long)r.handled, r.seconds,
           (unsigned long long)r.inside, (unsigned long long)r.ops, (unsigned long long)r.nested,
           r.deepest);
    CHECK(atomic_load(&handler_errors) == 0);
    CHECK(atomic_load(&worker_errors) == 0);
    CHECK(atomic_load(&arity_errors) == 0);
    CHECK(stress_saw_enough(how, signals_per_variant, r.handled, r.inside, r.nested, r.deepest));
}

/* The worker and its handler free blocks that a third thread allocated (every free a
 * remote one), while signals land in those frees too: every handed-over block arrives
 * whole and is freed once. */
static void signals_interrupting_remote_frees(void)
{
    atomic_store(&fed, 0);
    atomic_store(&freed_remote, 0);
    check_stress(INSTALL_REMOTE);
    printf("  remote frees: %llu blocks handed over, %llu freed\n",
           (unsigned long long)atomic_load(&fed), (unsigned long long)atomic_load(&freed_remote));
    CHECK(atomic_load(&fed) > 0);
    CHECK(atomic_load(&freed_remote) == atomic_load(&fed));
}

static void signals_interrupting_siginfo_handler(void)
{
    check_stress(INSTALL_SIGINFO);
}

static void signals_interrupting_onstack_handler(void)
{
    check_stress(INSTALL_PLAIN_ONSTACK);
}

static void signals_interrupting_signal_handler(void)
{
    check_stress(INSTALL_SIGNAL);
}

static void signals_interrupting_nested_handlers(void)
{
    check_stress(INSTALL_NESTED);
}

/* ---- sigaction's round trip --------------------------------------------------------- */

static _Atomic int simple_hits;
static void simple_handler(int sig)
{
    (void)sig;
    atomic_fetch_add(&simple_hits, 1);
}
static void simple_info_handler(int sig, siginfo_t *info, void *context)
{
    (void)info;
    (void)context;
    simple_handler(sig);
}

static int mask_has(const sigset_t *set, int sig)
{
    return sigismember(set, sig) == 1;
}

/* Flags the program set, ignoring SA_RESTORER, which glibc adds and reports. */
#define FLAGS_OF(act) ((unsigned)(act).sa_flags & ~0x04000000u)

static void sigaction_reports_what_the_program_installed(void)
{
    struct sigaction act, old, now, kernel;
    memset(&act, 0, sizeof act);
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, SIGUSR2);
    act.sa_handler = simple_handler;
    act.sa_flags = SA_RESTART;
    CHECK(sigaction(SIGUSR1, &act, &old) == 0);
    CHECK(old.sa_handler == SIG_DFL);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
    CHECK(now.sa_handler == simple_handler);
    CHECK(FLAGS_OF(now) == SA_RESTART);
    CHECK(mask_has(&now.sa_mask, SIGUSR2) && !mask_has(&now.sa_mask, SIGINT));
    /* What the kernel really holds: lfheap's wrapper when lfheap is there. */
    CHECK(__sigaction(SIGUSR1, NULL, &kernel) == 0);
    if (lfh_signal_counters_get)
        CHECK(kernel.sa_handler != simple_handler);

    act.sa_sigaction = simple_info_handler;
    act.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&act.sa_mask);
    CHECK(sigaction(SIGUSR1, &act, &old) == 0);
    CHECK(old.sa_handler == simple_handler && FLAGS_OF(old) == SA_RESTART);
    CHECK(mask_has(&old.sa_mask, SIGUSR2));
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
    CHECK(now.sa_sigaction == simple_info_handler);
    CHECK(FLAGS_OF(now) == (SA_SIGINFO | SA_ONSTACK | SA_NODEFER));
    CHECK(!mask_has(&now.sa_mask, SIGUSR2));
    atomic_store(&simple_hits, 0);
    raise(SIGUSR1);
    CHECK(atomic_load(&simple_hits) == 1);

    /* Handing back what was reported restores it exactly. */
    CHECK(sigaction(SIGUSR1, &old, NULL) == 0);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
    CHECK(now.sa_handler == simple_handler && FLAGS_OF(now) == SA_RESTART);

    act.sa_handler = SIG_IGN;
    act.sa_flags = 0;
    CHECK(sigaction(SIGUSR1, &act, &old) == 0);
    CHECK(old.sa_handler == simple_handler);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0 && now.sa_handler == SIG_IGN);
    raise(SIGUSR1); /* ignored */
    act.sa_handler = SIG_DFL;
    CHECK(sigaction(SIGUSR1, &act, &old) == 0 && old.sa_handler == SIG_IGN);

    /* A one-shot handler: the kernel resets it to SIG_DFL when it runs. */
    act.sa_handler = simple_handler;
    act.sa_flags = SA_RESETHAND;
    CHECK(sigaction(SIGUSR1, &act, NULL) == 0);
    atomic_store(&simple_hits, 0);
    raise(SIGUSR1);
    CHECK(atomic_load(&simple_hits) == 1);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
    CHECK(now.sa_handler == SIG_DFL && !(now.sa_flags & SA_SIGINFO));

    /* signal(): BSD semantics, returns the previous handler. */
    CHECK(signal(SIGUSR1, simple_handler) == SIG_DFL);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
    CHECK(now.sa_handler == simple_handler && FLAGS_OF(now) == SA_RESTART);
    CHECK(mask_has(&now.sa_mask, SIGUSR1));
    CHECK(signal(SIGUSR1, SIG_IGN) == simple_handler);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    /* siginterrupt: no SA_RESTART, and signal() remembers it. */
    CHECK(signal(SIGUSR1, simple_handler) == SIG_IGN);
    CHECK(siginterrupt(SIGUSR1, 1) == 0);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0 && !(now.sa_flags & SA_RESTART));
    CHECK(now.sa_handler == simple_handler);
    CHECK(signal(SIGUSR1, simple_handler) == simple_handler);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0 && !(now.sa_flags & SA_RESTART));
    CHECK(siginterrupt(SIGUSR1, 0) == 0);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0 && (now.sa_flags & SA_RESTART));

    /* sysv_signal: one shot, not blocked while it runs. */
    CHECK(sysv_signal(SIGUSR1, simple_handler) == simple_handler);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0);
    CHECK(FLAGS_OF(now) == (SA_RESETHAND | SA_NODEFER));
    atomic_store(&simple_hits, 0);
    raise(SIGUSR1);
    CHECK(atomic_load(&simple_hits) == 1);
    CHECK(signal(SIGUSR1, SIG_DFL) == SIG_DFL);

    /* sigset and sigignore (X/Open). */
    sigset_t mask;
    CHECK(sigset(SIGUSR1, SIG_HOLD) == SIG_DFL);
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 && mask_has(&mask, SIGUSR1));
    CHECK(sigset(SIGUSR1, simple_handler) == SIG_HOLD);
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 && !mask_has(&mask, SIGUSR1));
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0 && now.sa_handler == simple_handler);
    CHECK(sigset(SIGUSR1, SIG_DFL) == simple_handler);
    CHECK(sigignore(SIGUSR1) == 0);
    CHECK(sigaction(SIGUSR1, NULL, &now) == 0 && now.sa_handler == SIG_IGN);
#pragma GCC diagnostic pop
    CHECK(signal(SIGUSR1, SIG_DFL) == SIG_IGN);

    /* What the kernel refuses is refused. */
    act.sa_handler = simple_handler;
    act.sa_flags = 0;
    errno = 0;
    CHECK(sigaction(SIGKILL, &act, NULL) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(sigaction(0, &act, NULL) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(sigaction(_NSIG, &act, NULL) == -1 && errno == EINVAL);
    errno = 0;
    CHECK(signal(SIGSTOP, simple_handler) == SIG_ERR && errno == EINVAL);
    errno = 0;
    CHECK(signal(-1, simple_handler) == SIG_ERR && errno == EINVAL);
    CHECK(sigaction(SIGKILL, NULL, &now) == 0 && now.sa_handler == SIG_DFL);
}

/* The mask a handler runs with: its sa_mask, and its own signal unless SA_NODEFER. */
static _Atomic int mask_bits;
static void mask_handler(int sig)
{
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    atomic_store(&mask_bits, (mask_has(&mask, sig) ? 1 : 0) | (mask_has(&mask, SIGUSR2) ? 2 : 0));
}

static void handlers_run_with_their_mask(void)
{
    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = mask_handler;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGUSR1, &act, NULL) == 0);
    raise(SIGUSR1);
    CHECK(atomic_load(&mask_bits) == 3);
    act.sa_flags = SA_NODEFER;
    sigemptyset(&act.sa_mask);
    CHECK(sigaction(SIGUSR1, &act, NULL) == 0);
    raise(SIGUSR1);
    CHECK(atomic_load(&mask_bits) == 0);
    signal(SIGUSR1, SIG_DFL);
}

/* ---- threads that never return from a handler that interrupted lfheap --------------- */

static _Atomic uint64_t kill_baseline;
static _Atomic int kill_slow_only;
static _Atomic int jumped, left_handler;
static __thread sigjmp_buf *jump_target;
/* Set when this thread has left a handler by pthread_exit: the signals that keep coming
 * while it unwinds and runs its exit (lfheap's cache hand-back among it) must not make it
 * leave a second time, from the middle of its own exit, which no count could follow. */
static __thread int leaving;
/* Set when the doomed thread returns from its start routine. What it runs from then on,
 * lfheap's cache hand-back among it, is its exit: a handler that killed it there would
 * be counted here but, past the hand-back, not by lfheap (tests/test_parking.c kills
 * threads inside their exit on purpose). */
static __thread volatile sig_atomic_t returning;

/* Leaves only when this signal interrupted lfheap (a slow path, if kill_slow_only): the
 * only thread receiving signals is the doomed one, so the counters tell. */
static void doom_handler(int sig)
{
    (void)sig;
    if (leaving || returning)
        return;
    if (atomic_load(&jumped)) {
        /* A survivor of siglongjmp, its cache still hidden: handlers keep working. */
        handler_work();
        return;
    }
    struct lfh_signal_counters c = counters();
    uint64_t inside = atomic_load(&kill_slow_only) ? c.in_slow_path : c.in_code + c.in_slow_path;
    if (inside == atomic_load(&kill_baseline))
        return;
    /* The cache is hidden: this allocation goes to the heap. */
    void *p = malloc(200);
    if (p)
        memset(p, 0x5a, 200);
    free(p);
    atomic_store(&left_handler, 1);
    if (jump_target) {
        atomic_store(&jumped, 1);
        siglongjmp(*jump_target, 1);
    }
    leaving = 1;
    pthread_exit(NULL);
}

static _Atomic int doomed_running, doomed_stop;

/* The doomed thread's blocks live here, so that the main thread frees what a dead one
 * left (a block is unlinked before it is freed: one interrupted call loses at most it). */
#define DOOMED_BLOCKS 1024
static void *_Atomic doomed_blocks[DOOMED_BLOCKS];

static void doomed_release(unsigned i)
{
    void *p = atomic_exchange(&doomed_blocks[i], NULL);
    free(p);
}

/* Bursts of one size that overflow and refill its cache, so that slow paths are
 * frequent, between small mixed allocations. */
static void *doomed_main(void *arg)
{
    int survive = arg != NULL;
    uint64_t rng = 0x9876543 + (uintptr_t)&rng;
    sigjmp_buf target;
    if (survive) {
        if (sigsetjmp(target, 1)) {
            /* Jumped out of the handler: the thread must still allocate correctly. */
            jump_target = NULL;
            struct slot after[64] = {{0}};
            for (unsigned i = 0; i < 20000; i++)
                worker_step(after, 64, &rng);
            sigset_t all;
            sigfillset(&all);
            pthread_sigmask(SIG_BLOCK, &all, NULL);
            for (unsigned i = 0; i < 64; i++) {
                if (after[i].p && !intact(after[i].p, after[i].n, after[i].seed))
                    worker_error();
                free(after[i].p);
            }
            free_kept();
            return NULL;
        }
        jump_target = &target;
    }
    /* The thread's cache is set up before it can be caught: one killed inside its first
     * call, before lfheap registered its exit (tcache_setup), has no cache for its exit to
     * reclaim or abandon, and the counts of killed_threads_leave_the_process_working would
     * be one short (seen once in CI). Through doomed_blocks, so that the pair stays. */
    atomic_store(&doomed_blocks[0], malloc(1));
    doomed_release(0);
    atomic_store(&doomed_running, 1);
    while (!atomic_load(&doomed_stop)) {
        for (unsigned i = 0; i < 200; i++) {
            unsigned k = (unsigned)(next_random(&rng) % 64);
            if (atomic_load(&doomed_blocks[k]))
                doomed_release(k);
            else
                atomic_store(&doomed_blocks[k], malloc(1 + next_random(&rng) % 400));
        }
        size_t n = 16 + (size_t)(next_random(&rng) % 300);
        for (unsigned i = 64; i < DOOMED_BLOCKS; i++)
            atomic_store(&doomed_blocks[i], malloc(n));
        for (unsigned i = 64; i < DOOMED_BLOCKS; i++)
            doomed_release(i);
    }
    returning = 1;
    return NULL;
}

/* A thread that never receives signals: it must keep working throughout. */
static _Atomic int bystander_stop;
static void *bystander_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    struct slot slots[64] = {{0}};
    uint64_t rng = 0x5555 + (uintptr_t)&slots;
    while (!atomic_load(&bystander_stop)) {
        worker_step(slots, 64, &rng);
        atomic_fetch_add_explicit(&worker_ops, 1, memory_order_relaxed);
    }
    for (unsigned i = 0; i < 64; i++) {
        if (slots[i].p && !intact(slots[i].p, slots[i].n, slots[i].seed))
            worker_error();
        free(slots[i].p);
    }
    return NULL;
}

/* The bound on a group of `count` doomed threads: each is caught in milliseconds when the
 * machine is idle, so only a run where they never are reaches it. */
#define DOOMED_SECONDS(count) (120.0 + 2.0 * (count))

/* Runs doomed threads one at a time until `count` of them have left through the handler,
 * or until DOOMED_SECONDS(count) have passed; returns how many left (fewer: out of time).
 * How soon a signal catches a thread inside lfheap (or in a slow path) depends on the
 * machine's load and on valgrind, so a thread gets signals until it leaves: only the time
 * limit, which a run whose signals truly stopped landing inside lfheap reaches, stops one
 * still running. */
static unsigned run_doomed(unsigned count, int slow_only, int survive)
{
    double limit = DOOMED_SECONDS(count);
    unsigned left = 0;
    double start = now_s();
    atomic_store(&kill_slow_only, slow_only);
    while (left < count && now_s() - start < limit) {
        atomic_store(&doomed_running, 0);
        atomic_store(&jumped, 0);
        atomic_store(&left_handler, 0);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, doomed_main, survive ? (void *)1 : NULL) == 0);
        while (!atomic_load(&doomed_running))
            sched_yield();
        struct lfh_signal_counters c = counters();
        atomic_store(&kill_baseline, slow_only ? c.in_slow_path : c.in_code + c.in_slow_path);
        int done = 0;
        while (!done && now_s() - start < limit) {
            /* Done once the thread is gone (pthread_tryjoin_np does not wait; a thread that
             * has exited but is not joined yet makes pthread_kill fail with ESRCH). */
            if (pthread_kill(t, SIGUSR1) == ESRCH)
                done = pthread_join(t, NULL) == 0;
            else
                done = pthread_tryjoin_np(t, NULL) == 0;
            if (!done)
                usleep(50);
        }
        if (!done) {
            atomic_store(&doomed_stop, 1);
            pthread_join(t, NULL);
            atomic_store(&doomed_stop, 0);
        }
        /* Counted by the handler itself: a thread may still be unwinding, or working on
         * after its jump, when the time is up. */
        left += (unsigned)atomic_load(&left_handler);
        for (unsigned k = 0; k < DOOMED_BLOCKS; k++)
            doomed_release(k);
    }
    return left;
}

static void *exit_at_once(void *arg)
{
    pthread_exit(arg);
}

/* ---- the smallest alternate stack ---------------------------------------------------- */

static volatile sig_atomic_t small_stack_ran;

static void note_small_stack(int sig)
{
    (void)sig;
    small_stack_ran = 1;
}

/* The kernel's fixed floor for an alternate stack on x86-64 and aarch64 (its MINSIGSTKSZ;
 * glibc's macro of that name is a sysconf call under _GNU_SOURCE). */
#define KERNEL_MINSIGSTKSZ 2048

/* In a forked child: installs an alternate signal stack of the top `bytes` bytes of a
 * fresh mapping whose pages below them are unmapped guard (a page at least), so that an
 * overflow kills the child instead of writing past it; returns the stack's lowest byte.
 * Exits the child (status 2 or 3) if that cannot be done. */
static unsigned char *guarded_altstack(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (bytes + page - 1) / page * page;
    char *base =
        mmap(NULL, page + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED || mprotect(base, page, PROT_NONE) != 0)
        _exit(2);
    stack_t ss = {.ss_sp = base + page + size - bytes, .ss_size = bytes, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0)
        _exit(3);
    return (unsigned char *)ss.ss_sp;
}

/* A handler that does not allocate, for a signal that did not interrupt lfheap, runs on an
 * alternate stack of the size the C library names as the minimum (sysconf
 * _SC_MINSIGSTKSZ, or the kernel's floor where that is larger, as sigaltstack refuses
 * less): the wrapper's own frame must fit in what that leaves. The stack has a guard
 * page below it, so an overflow kills the child instead of writing past it. Not under
 * valgrind, whose signal frames are its own. */
static void handlers_fit_the_minimum_alternate_stack(void)
{
    long minimum = sysconf(_SC_MINSIGSTKSZ);
    if (minimum < KERNEL_MINSIGSTKSZ)
        minimum = KERNEL_MINSIGSTKSZ;
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        guarded_altstack((size_t)minimum);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = note_small_stack;
        sa.sa_flags = SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGUSR2, &sa, NULL) != 0)
            _exit(4);
        raise(SIGUSR2);
        _exit(small_stack_ran ? 0 : 5);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    printf("# alternate stack of %ld bytes (_SC_MINSIGSTKSZ): %s %d\n", minimum,
           WIFSIGNALED(status) ? "child killed by signal" : "child exit status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* ---- allocating handlers on the classic SIGSTKSZ ------------------------------------ */

/* The classic constant SIGSTKSZ: what programs size alternate stacks by (glibc makes the
 * macro a sysconf call under _GNU_SOURCE, which this file defines). */
#define CLASSIC_SIGSTKSZ 8192
#define STKSZ_SLOTS      256
#define STKSZ_FILL       0xA5
/* Signals every child must handle before it stops. */
#define STKSZ_SIGNALS 2000

struct stksz_shared {
    _Atomic unsigned long handled, errors;
    unsigned long inside;
    size_t deepest;
};
static struct stksz_shared *stksz;
static unsigned char *stksz_stack;
static void *stksz_held[STKSZ_SLOTS];
static size_t stksz_size[STKSZ_SLOTS];

static uint64_t stksz_tag(unsigned slot, size_t size)
{
    return ((uint64_t)slot << 32 | size) ^ 0x5a5aa5a5c3c33c3cULL;
}

static void stksz_drop(unsigned slot)
{
    unsigned char *p = stksz_held[slot];
    if (!p)
        return;
    uint64_t head;
    memcpy(&head, p, sizeof head);
    if (head != stksz_tag(slot, stksz_size[slot]) ||
        p[stksz_size[slot] - 1] != (unsigned char)(slot ^ stksz_size[slot]))
        atomic_fetch_add(&stksz->errors, 1);
    free(p);
    stksz_held[slot] = NULL;
}

/* Bursts of frees and allocations of 16 B to 3 KB (cache overflows, fills, superblocks
 * emptied), every 16th signal everything freed, every 32nd a large block: the deepest
 * paths a handler's call can take, flushes and purges included. Then it records how
 * deep the stack was ever written (the fill left untouched below) and fills the part
 * below its own frame again for the next one. */
static void stksz_handler(int sig)
{
    (void)sig;
    unsigned long n = atomic_fetch_add(&stksz->handled, 1) + 1;
    unsigned r = (unsigned)n * 2654435761u;
    for (unsigned i = 0; i < 32; i++) {
        unsigned slot = (r + i * 7) % STKSZ_SLOTS;
        stksz_drop(slot);
        size_t size = 16 + ((r >> 8) + i * 37) % 3000;
        unsigned char *p = malloc(size);
        if (!p) {
            atomic_fetch_add(&stksz->errors, 1);
            continue;
        }
        uint64_t head = stksz_tag(slot, size);
        memcpy(p, &head, sizeof head);
        p[size - 1] = (unsigned char)(slot ^ size);
        stksz_held[slot] = p;
        stksz_size[slot] = size;
    }
    if (n % 16 == 0)
        for (unsigned slot = 0; slot < STKSZ_SLOTS; slot++)
            stksz_drop(slot);
    if (n % 32 == 0) {
        char *big = malloc(200 << 10);
        if (!big)
            atomic_fetch_add(&stksz->errors, 1);
        else
            big[(200 << 10) - 1] = 1;
        free(big);
    }
    size_t untouched = 0;
    while (untouched < CLASSIC_SIGSTKSZ && stksz_stack[untouched] == STKSZ_FILL)
        untouched++;
    if (CLASSIC_SIGSTKSZ - untouched > stksz->deepest)
        stksz->deepest = CLASSIC_SIGSTKSZ - untouched;
    volatile char here = 0;
    size_t below = (size_t)((uintptr_t)&here - (uintptr_t)stksz_stack);
    if (below > 512 && below <= CLASSIC_SIGSTKSZ)
        memset(stksz_stack, STKSZ_FILL, below - 512);
}

/* The guarantee that SIGSTKSZ suffices for a handler that allocates: its stack has a guard
 * page below it, so a path of lfheap's too deep for it kills the child. The child's own
 * loop allocates and frees all along, so that most signals land inside lfheap and the
 * handler runs with the cache hidden; the suite runs this variant once more with a purge
 * delay of 0, so that the handlers' calls purge too. Not under valgrind, whose signal
 * frames are its own. */
static void allocating_handlers_fit_sigstksz(void)
{
    stksz = mmap(NULL, sizeof *stksz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(stksz != MAP_FAILED);
    memset(stksz, 0, sizeof *stksz);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        stksz_stack = guarded_altstack(CLASSIC_SIGSTKSZ);
        memset(stksz_stack, STKSZ_FILL, CLASSIC_SIGSTKSZ);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = stksz_handler;
        sa.sa_flags = SA_ONSTACK | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGALRM, &sa, NULL) != 0)
            _exit(4);
        struct lfh_signal_counters before = counters();
        struct itimerval every = {{0, 200}, {0, 200}};
        if (setitimer(ITIMER_REAL, &every, NULL) != 0)
            _exit(5);
        void *blocks[2000];
        unsigned x = 1;
        while (atomic_load(&stksz->handled) < STKSZ_SIGNALS) {
            for (unsigned i = 0; i < 2000; i++) {
                x = x * 1103515245u + 12345u;
                blocks[i] = malloc(16 + (x >> 16) % 2000);
                if (!blocks[i])
                    _exit(6);
                *(char *)blocks[i] = 1;
            }
            for (unsigned i = 0; i < 2000; i++)
                free(blocks[i]);
            char *big = malloc((size_t)(1 + x % 4) << 20);
            if (!big)
                _exit(7);
            big[0] = 1;
            free(big);
        }
        struct itimerval off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_REAL, &off, NULL);
        /* A signal already pending would run the handler over the slots freed below. */
        sigset_t alarm;
        sigemptyset(&alarm);
        sigaddset(&alarm, SIGALRM);
        sigprocmask(SIG_BLOCK, &alarm, NULL);
        struct lfh_signal_counters after = counters();
        stksz->inside = (unsigned long)(after.in_code + after.in_slow_path - before.in_code -
                                        before.in_slow_path);
        for (unsigned slot = 0; slot < STKSZ_SLOTS; slot++)
            stksz_drop(slot);
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    printf("# handlers on an alternate stack of %d bytes: %s %d, %lu signals (%lu inside "
           "lfheap), deepest write %zu bytes from the top\n",
           CLASSIC_SIGSTKSZ, WIFSIGNALED(status) ? "child killed by signal" : "child exit status",
           WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
           (unsigned long)atomic_load(&stksz->handled), stksz->inside, stksz->deepest);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(atomic_load(&stksz->handled) >= STKSZ_SIGNALS);
    CHECK(atomic_load(&stksz->errors) == 0);
    CHECK(stksz->inside > 0);
    munmap(stksz, sizeof *stksz);
}

static void killed_threads_leave_the_process_working(void)
{
    /* pthread_exit unwinds through the signal frame with libgcc_s, which glibc loads on
     * first use: load it before the first thread dies inside lfheap. */
    pthread_t warm;
    REQUIRE(pthread_create(&warm, NULL, exit_at_once, NULL) == 0);
    pthread_join(warm, NULL);

    struct sigaction act;
    memset(&act, 0, sizeof act);
    act.sa_handler = doom_handler;
    sigemptyset(&act.sa_mask);
    REQUIRE(sigaction(SIGUSR1, &act, NULL) == 0);
    atomic_store(&worker_errors, 0);
    atomic_store(&bystander_stop, 0);
    pthread_t bystander;
    REQUIRE(pthread_create(&bystander, NULL, bystander_main, NULL) == 0);

    /* Warm up, so that the RSS baseline includes the heap's working set. */
    run_doomed(threads_to_kill / 10 + 1, 0, 0);
    struct lfh_signal_counters before = counters();
    long rss_before = test_rss_kib();
    unsigned anywhere = run_doomed(threads_to_kill / 2, 0, 0);
    unsigned slow = run_doomed(threads_to_kill / 2, 1, 0);
    unsigned jumps = run_doomed(threads_to_kill / 10 + 1, 0, 1);
    long rss_after = test_rss_kib();
    struct lfh_signal_counters after = counters();
    atomic_store(&bystander_stop, 1);
    pthread_join(bystander, NULL);
    signal(SIGUSR1, SIG_DFL);

    uint64_t reclaimed = after.caches_reclaimed - before.caches_reclaimed;
    uint64_t abandoned = after.caches_abandoned - before.caches_abandoned;
    uint64_t bytes = after.bytes_abandoned - before.bytes_abandoned;
    uint64_t blocks = after.blocks_abandoned - before.blocks_abandoned;
    printf("  %u threads left a handler that interrupted lfheap (%u of them in a slow path, "
           "%u by siglongjmp): %llu caches reclaimed, %llu abandoned holding %llu blocks, "
           "%llu KiB; RSS %ld -> %ld KiB\n",
           anywhere + slow + jumps, slow, jumps, (unsigned long long)reclaimed,
           (unsigned long long)abandoned, (unsigned long long)blocks,
           (unsigned long long)(bytes / 1024), rss_before, rss_after);
    CHECK(atomic_load(&worker_errors) == 0);
    /* Every thread was caught inside lfheap (in a slow path, for the second group). How
     * soon a signal lands there depends on the machine: on one busy enough that a group ran
     * out of its time (the long variant beside another suite at a load of 40 caught 137
     * of 200 in a slow path in 520 s), each group must have had some caught, and the
     * checks below hold for those. */
    bool out_of_time = anywhere < threads_to_kill / 2 || slow < threads_to_kill / 2 ||
                       jumps < threads_to_kill / 10 + 1;
    if (out_of_time) {
        printf("  out of time: %u, %u and %u of %u, %u and %u threads caught\n", anywhere, slow,
               jumps, threads_to_kill / 2, threads_to_kill / 2, threads_to_kill / 10 + 1);
        CHECK(anywhere > 0 && slow > 0 && jumps > 0);
    } else {
        CHECK(anywhere == threads_to_kill / 2 && slow == threads_to_kill / 2 &&
              jumps == threads_to_kill / 10 + 1);
    }
    /* Every one of them was found hidden at its exit, and accounted for. */
    CHECK(reclaimed + abandoned == anywhere + slow + jumps);
    CHECK(abandoned >= slow / 2);
    /* What an abandoned cache holds is bounded by the cache limits (a few MiB at most;
     * these threads use a few classes), and the resident size grows by no more than that
     * plus the heap's own slack. */
    CHECK(abandoned == 0 || bytes / abandoned <= ((uint64_t)4 << 20));
    CHECK(rss_after - rss_before <= (long)(bytes / 1024) + 32768);
    /* The process keeps working: a full mix on this thread. */
    struct slot slots[64] = {{0}};
    uint64_t rng = 42;
    for (unsigned i = 0; i < 100000; i++)
        worker_step(slots, 64, &rng);
    for (unsigned i = 0; i < 64; i++) {
        CHECK(!slots[i].p || intact(slots[i].p, slots[i].n, slots[i].seed));
        free(slots[i].p);
    }
    CHECK(atomic_load(&worker_errors) == 0);
}

/* ---- glibc, for contrast ------------------------------------------------------------ */

/* Shared with the child: how far it got. */
struct progress {
    _Atomic uint64_t handled, ops, errors;
};

static void contrast(void)
{
    struct progress *shared =
        mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(shared != MAP_FAILED);
    fflush(stdout);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        install(INSTALL_SIGINFO);
        pthread_t worker;
        REQUIRE(pthread_create(&worker, NULL, worker_main, NULL) == 0);
        while (!atomic_load(&worker_tid))
            sched_yield();
        start_timer(atomic_load(&worker_tid), SIGUSR1, 20000);
        for (;;) {
            atomic_store(&shared->handled, atomic_load(&handled));
            atomic_store(&shared->ops, atomic_load(&worker_ops));
            atomic_store(&shared->errors, atomic_load(&handler_errors) +
                                              atomic_load(&worker_errors) +
                                              atomic_load(&arity_errors));
            usleep(10000);
        }
    }
    double start = now_s(), last_change = start;
    uint64_t last = 0;
    int status = 0;
    const char *outcome = NULL;
    while (!outcome) {
        usleep(20000);
        if (waitpid(child, &status, WNOHANG) == child) {
            outcome = "died";
            break;
        }
        uint64_t now = atomic_load(&shared->handled) + atomic_load(&shared->ops);
        if (now != last) {
            last = now;
            last_change = now_s();
        }
        if (now_s() - last_change > 3.0)
            outcome = "stopped making progress (deadlock: a handler waits for a lock its own "
                      "thread holds)";
        else if (now_s() - start > 10.0 || atomic_load(&shared->handled) >= signals_per_variant)
            outcome = "was stopped after its run";
    }
    if (strcmp(outcome, "died") != 0) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    printf("INFO glibc's malloc, handlers allocating while the thread they interrupt "
           "allocates: the child %s",
           outcome);
    if (strcmp(outcome, "died") == 0 && WIFSIGNALED(status))
        printf(" with signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    printf(" after %llu signals and %llu worker operations, %llu corrupted blocks seen\n",
           (unsigned long long)atomic_load(&shared->handled),
           (unsigned long long)atomic_load(&shared->ops),
           (unsigned long long)atomic_load(&shared->errors));
    munmap(shared, sizeof *shared);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        signals_per_variant = strtoull(argv[1], NULL, 10);
    if (argc > 2)
        threads_to_kill = (unsigned)strtoul(argv[2], NULL, 10);
    setvbuf(stdout, NULL, _IOLBF, 0);
    altstack_size = 1 << 16;
    altstack =
        mmap(NULL, altstack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(altstack != MAP_FAILED);
    if (!lfh_signal_counters_get) {
        /* Not running on lfheap: the contrast, for information only. */
        contrast();
        return 0;
    }
    const char *only = argc > 3 ? argv[3] : "";
#define RUN_SELECTED(name)                                                                         \
    do {                                                                                           \
        if (strstr(#name, only))                                                                   \
            RUN(name);                                                                             \
    } while (0)
    RUN_SELECTED(sigaction_reports_what_the_program_installed);
    RUN_SELECTED(handlers_run_with_their_mask);
    RUN_SELECTED(signals_interrupting_siginfo_handler);
    /* memcheck loses track of a thread's own stack around handlers that run on an
     * alternate one: now and then (more often on a loaded machine, and with the
     * alternate stack 8 MiB from any other) it took the area just below the worker's
     * stack pointer for freed, and reported the next call's push of its return address
     * as "Invalid write ... on thread 2's stack". Outside valgrind the variant runs in
     * every suite that runs this program. */
    if (!RUNNING_ON_VALGRIND)
        RUN_SELECTED(signals_interrupting_onstack_handler);
    RUN_SELECTED(signals_interrupting_signal_handler);
    RUN_SELECTED(signals_interrupting_nested_handlers);
    RUN_SELECTED(signals_interrupting_remote_frees);
    RUN_SELECTED(killed_threads_leave_the_process_working);
    if (!RUNNING_ON_VALGRIND) {
        RUN_SELECTED(handlers_fit_the_minimum_alternate_stack);
        RUN_SELECTED(allocating_handlers_fit_sigstksz);
    }
    struct lfh_signal_counters c = counters();
    printf("  lfheap's counters: %llu signals through its wrapper, %llu in its code, %llu in "
           "a slow path elsewhere\n",
           (unsigned long long)c.delivered, (unsigned long long)c.in_code,
           (unsigned long long)c.in_slow_path);
    return test_exit_status();
}
