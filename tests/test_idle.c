/*
 * Idle programs (issue 13, part 2): a program that frees its memory and then waits,
 * calling lfheap no more, gets its resident size back when the background purger runs
 * (LFHEAP_BACKGROUND=1, src/arena.c); without the switch lfheap starts no thread.
 *
 * Usage: test_idle CASE [MiB]
 *   idle     4 threads allocate MiB (default 1024) in mixed sizes, free it all (half of
 *            it from another thread than the allocating one) and stay alive, idle; the
 *            main thread calls no allocator routine while it polls its RSS (raw reads of
 *            /proc) for up to 20 s: it must fall back to within 32 MiB of the start
 *   measure  the same scenario, printing the RSS every 250 ms for 4 s, asserting nothing
 *            (to compare runs with and without the switch, and with other allocators)
 *   off      without the switch: slow paths for a few purge delays, no thread appears
 *   once     with the switch: bursts of threads that allocate, idle pauses, fork; the
 *            purger is one thread, started once, which never allocates (in the
 *            statistics build: no thread cache is set up but the test's threads')
 *   fork     with the switch and the purger running: a child (which inherits no thread)
 *            works, and its memory goes back once it freed it: it starts its own purger
 *   forkfast with the switch and a purge delay of seconds: a child forked right after its
 *            parent freed a burst, which lives on the fast paths, gets its purger at its
 *            first free, and the memory it inherited goes back
 *   forkjoin with the switch: the child of a process with 8 threads creates and joins a
 *            thread (glibc frees inside the join with a lock held that starting a thread
 *            takes: the purger must not start there), ends, and gets its purger
 *   last     with the switch: a process whose main thread leaves by pthread_exit ends
 *            when its last other thread returns, as without lfheap: the purger stays
 *            while a thread lives (and still gives memory back), then leaves too
 *   last-no-proc  the same with no file descriptor left (RLIMIT_NOFILE 0), so that
 *            /proc cannot tell the purger how many threads live: the process still ends
 *            when its last thread returns (the purger once stayed for good)
 *   jump     with the switch: a thread whose signal handler left by siglongjmp still
 *            starts the purger
 *   fault    failure-injection build, with the switch: starting the purger fails with
 *            every OS call failing; lfheap goes on working and starts it once calls
 *            succeed again
 *
 * Every wait is for an event with a generous bound (the machine may be loaded): nothing
 * here asserts on how fast anything happens.
 */
#include "alloc_names.h"
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef LFHEAP_FAULT_INJECTION
#include "os.h"
#endif

#define MIB               ((size_t)1 << 20)
#define THREADS           4
#define NEAR_START_KIB    (32 * 1024) /* the bound: within 32 MiB of the start */
#define WAIT_SECONDS      20
#define POLL_MICROSECONDS 50000

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A /proc file's text in `buf`, read with open and read into the caller's stack: the
 * waiting thread must not call the allocator (fopen would). False if unreadable. */
static bool proc_read(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return true;
}

/* The number after `key` in a /proc file; -1 if not found. */
static long proc_number(const char *path, const char *key)
{
    char buf[4096];
    if (!proc_read(path, buf, sizeof buf))
        return -1;
    const char *at = key[0] ? strstr(buf, key) : buf;
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

static long rss_kib(void)
{
    /* statm: size, then resident, in pages */
    char buf[128];
    if (!proc_read("/proc/self/statm", buf, sizeof buf))
        return -1;
    char *end;
    strtol(buf, &end, 10);
    return strtol(end, NULL, 10) * (sysconf(_SC_PAGESIZE) / 1024);
}

static long threads_now(void)
{
    return proc_number("/proc/self/status", "Threads:");
}

/* How many threads are named lfheap-purge (the purger names itself so), and the id of
 * the last one found in *tid. Reads the task directory with opendir, which allocates:
 * not for the quiet parts. */
static size_t mixed_size(uint64_t *rng, size_t i);

static int purgers(long *tid)
{
    DIR *dir = opendir("/proc/self/task");
    REQUIRE(dir);
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.')
            continue;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, name, sizeof name - 1);
        close(fd);
        if (n > 0 && strncmp(name, "lfheap-purge\n", 13) == 0) {
            count++;
            *tid = atol(entry->d_name);
        }
    }
    closedir(dir);
    return count;
}

/* Allocates `mib` MiB in mixed sizes from the calling thread, each block filled, checks
 * the fill and frees everything: one burst of a working program. */
static void burst(size_t mib)
{
    size_t capacity = mib * MIB / 256 + 1024;
    char **blocks = mmap(NULL, capacity * sizeof(char *), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(blocks != MAP_FAILED);
    uint64_t rng = 42;
    size_t count = 0, total = 0;
    size_t *sizes = mmap(NULL, capacity * sizeof(size_t), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sizes != MAP_FAILED);
    while (total < mib * MIB && count < capacity) {
        size_t size = mixed_size(&rng, count);
        char *p = T_MALLOC(size);
        REQUIRE(p);
        memset(p, (int)(count & 0xff), size);
        blocks[count] = p;
        sizes[count++] = size;
        total += size;
    }
    for (size_t i = 0; i < count; i++) {
        CHECK(blocks[i][0] == (char)(i & 0xff) && blocks[i][sizes[i] - 1] == (char)(i & 0xff));
        T_FREE(blocks[i]);
    }
    munmap(blocks, capacity * sizeof(char *));
    munmap(sizes, capacity * sizeof(size_t));
}

/* Slow paths until a purger runs (up to WAIT_SECONDS): large blocks go through arena_tick
 * every time. True once there is one. */
static bool purger_appears(void)
{
    long tid;
    double until = seconds() + WAIT_SECONDS;
    while (purgers(&tid) == 0 && seconds() < until) {
        void *p = T_MALLOC(300000);
        REQUIRE(p);
        memset(p, 1, 4096);
        T_FREE(p);
        usleep(10000);
    }
    return purgers(&tid) == 1;
}

/* ---- the scenario: 4 threads allocate in mixed sizes, free it all, stay idle ---- */

struct worker {
    pthread_t thread;
    unsigned index;
    size_t budget; /* bytes to allocate */
    void **blocks; /* mapped with mmap, so the test's own arrays cost the allocator nothing */
    size_t count, capacity;
    struct worker *neighbour;
};

static pthread_barrier_t allocated, freed, finish;

static size_t mixed_size(uint64_t *rng, size_t i)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = *rng >> 33;
    /* about a third of the bytes each in small (16 B - 1 KiB), medium (1 - 32 KiB) and
     * large blocks (32 KiB - 2 MiB): by count mostly small ones */
    if (i % 1000 == 999)
        return 32768 + r % (2 * MIB);
    if (i % 40 == 39)
        return 1024 + r % 31744;
    return 16 + r % 1008;
}

static void free_half(struct worker *w, size_t parity)
{
    for (size_t i = parity; i < w->count; i += 2)
        T_FREE(w->blocks[i]);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (w->index + 1);
    size_t total = 0;
    while (total < w->budget && w->count < w->capacity) {
        size_t size = mixed_size(&rng, w->count);
        char *p = T_MALLOC(size);
        REQUIRE(p);
        memset(p, (int)(w->count & 0xff), size);
        w->blocks[w->count++] = p;
        total += size;
    }
    pthread_barrier_wait(&allocated);
    /* Half its own blocks, half its neighbour's: remote frees as well as local ones. */
    free_half(w, 0);
    free_half(w->neighbour, 1);
    pthread_barrier_wait(&freed);
    /* Idle until the main thread has measured. */
    pthread_barrier_wait(&finish);
    return NULL;
}

/* Runs the scenario up to the point where everything is freed and the threads are idle;
 * finish_scenario lets them exit. */
static void start_scenario(struct worker *workers, size_t total_mib)
{
    REQUIRE(pthread_barrier_init(&allocated, NULL, THREADS) == 0);
    REQUIRE(pthread_barrier_init(&freed, NULL, THREADS + 1) == 0);
    REQUIRE(pthread_barrier_init(&finish, NULL, THREADS + 1) == 0);
    for (unsigned t = 0; t < THREADS; t++) {
        struct worker *w = &workers[t];
        w->index = t;
        w->budget = total_mib * MIB / THREADS;
        w->capacity = w->budget / 256 + 1024; /* the mean size is well above 256 B */
        w->blocks = mmap(NULL, w->capacity * sizeof(void *), PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        REQUIRE(w->blocks != MAP_FAILED);
        w->count = 0;
        w->neighbour = &workers[(t + 1) % THREADS];
    }
    for (unsigned t = 0; t < THREADS; t++)
        REQUIRE(pthread_create(&workers[t].thread, NULL, worker_main, &workers[t]) == 0);
    pthread_barrier_wait(&freed);
    for (unsigned t = 0; t < THREADS; t++)
        munmap(workers[t].blocks, workers[t].capacity * sizeof(void *));
}

static void finish_scenario(struct worker *workers)
{
    pthread_barrier_wait(&finish);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(workers[t].thread, NULL);
    pthread_barrier_destroy(&allocated);
    pthread_barrier_destroy(&freed);
    pthread_barrier_destroy(&finish);
}

static size_t scenario_mib = 1024;

/* The scenario; the RSS must come back near the start while nobody calls lfheap. */
static void idle_rss_falls_back(void)
{
    static struct worker workers[THREADS];
    printf("# scenario: %zu MiB in %d threads\n", scenario_mib, THREADS);
    fflush(stdout); /* stdout's buffer exists before the quiet part */
    long start = rss_kib();
    double t0 = seconds();
    start_scenario(workers, scenario_mib);
    double freed_at = seconds();
    long after_free = rss_kib();
    long now = after_free;
    /* No allocator call from here until the RSS is back (or the bound is reached). */
    while (now - start > NEAR_START_KIB && seconds() - freed_at < WAIT_SECONDS) {
        usleep(POLL_MICROSECONDS);
        now = rss_kib();
    }
    double back_after = seconds() - freed_at;
    finish_scenario(workers);
    CHECK(now - start <= NEAR_START_KIB);
    printf("# rss: start %ld KiB, after free %ld KiB (allocation and frees took %.1f s), "
           "%ld KiB %.1f s later\n",
           start, after_free, freed_at - t0, now, back_after);
}

static void measure(void)
{
    static struct worker workers[THREADS];
    fflush(stdout);
    long start = rss_kib();
    double start_time = seconds();
    start_scenario(workers, scenario_mib);
    double freed_at = seconds();
    long samples[17];
    for (int i = 0; i <= 16; i++) {
        samples[i] = rss_kib();
        if (i < 16)
            usleep(250000);
    }
    finish_scenario(workers);
    usleep(2000000);
    long exited = rss_kib();
    T_MALLOC_TRIM(0);
    long trimmed = rss_kib();
    printf("# rss (MiB) start %.1f; after free (threads alive, idle), every 250 ms for 4 s:",
           (double)start / 1024);
    for (int i = 0; i <= 16; i++)
        printf(" %.1f", (double)samples[i] / 1024);
    printf("\n# threads exited, 2 s later: %.1f; after malloc_trim: %.1f (allocating and "
           "freeing took %.1f s)\n",
           (double)exited / 1024, (double)trimmed / 1024, freed_at - start_time);
}

static void *burst_thread(void *arg)
{
    burst((size_t)(uintptr_t)arg);
    return NULL;
}

/* Without the switch, slow paths for several purge delays, in two threads: no thread
 * of lfheap's appears. */
static void no_thread_without_switch(void)
{
    long before = threads_now();
    double until = seconds() + 1.5;
    while (seconds() < until) {
        burst(8);
        usleep(20000);
    }
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, burst_thread, (void *)(uintptr_t)8) == 0);
    pthread_join(t, NULL);
    /* A joined thread may stay listed for a moment after it exited. */
    double bound = seconds() + WAIT_SECONDS;
    while (threads_now() != before && seconds() < bound)
        usleep(POLL_MICROSECONDS);
    long tid;
    CHECK(threads_now() == before);
    CHECK(purgers(&tid) == 0);
}

/* Bursts of threads, idle pauses long enough for the purger to lengthen its naps: one
 * purger throughout, the same thread, and (statistics build) it set up no thread cache,
 * so it never allocated: the caches set up are the main thread's and the bursts'. */
static void purger_started_once(void)
{
    REQUIRE(purger_appears());
    long first = 0, tid = 0;
    purgers(&first);
    enum { ROUNDS = 4, PER_ROUND = 4 };
    for (int round = 0; round < ROUNDS; round++) {
        pthread_t t[PER_ROUND];
        for (int i = 0; i < PER_ROUND; i++)
            REQUIRE(pthread_create(&t[i], NULL, burst_thread, (void *)(uintptr_t)16) == 0);
        for (int i = 0; i < PER_ROUND; i++)
            pthread_join(t[i], NULL);
        usleep(1500000);
        CHECK(purgers(&tid) == 1 && tid == first);
        CHECK(threads_now() == 2);
    }
#ifndef TEST_PLAIN
    struct lfh_stats stats;
    REQUIRE(lfh_stats_get(&stats) == 1); /* 1: the library counts */
    printf("# thread caches set up: %llu (the main thread and %d bursts)\n",
           (unsigned long long)stats.threads_started, ROUNDS * PER_ROUND);
    CHECK(stats.threads_started == 1 + ROUNDS * PER_ROUND);
#endif
}

/* A child forked while the purger runs inherits no thread; it works, and once it has
 * freed its memory and stopped calling lfheap, its own purger gives the memory back. */
static void forked_child_gets_its_own_purger(void)
{
    REQUIRE(purger_appears());
    long first = 0, tid = 0;
    purgers(&first);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        int status = threads_now() == 1 ? 0 : 1;
        long start = rss_kib();
        burst(256);
        long after = rss_kib();
        /* Quiet: no allocator call while waiting for the child's purger to do its work. */
        double until = seconds() + WAIT_SECONDS;
        long now = after;
        while ((threads_now() != 2 || now - start > NEAR_START_KIB) && seconds() < until) {
            usleep(POLL_MICROSECONDS);
            now = rss_kib();
        }
        if (threads_now() != 2)
            status |= 2;
        if (now - start > NEAR_START_KIB)
            status |= 4;
        fprintf(stderr, "# child: rss start %ld KiB, after its burst %ld KiB, then %ld KiB\n",
                start, after, now);
        _exit(status | (test_failures ? 8 : 0));
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    /* 1: the child had another thread; 2: it got no purger; 4: its RSS stayed up; 8: a
     * fill check failed */
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "child status %#x\n", (unsigned)status);
    CHECK(purgers(&tid) == 1 && tid == first);
    burst(16);
}

/* A child forked right after its parent freed a burst inherits the freed memory, and
 * lives on the fast paths: it takes a cached block and frees it again, over and over.
 * Its first free takes the purge tick, which starts its own purger, and the inherited
 * memory goes back. Before, the child's purger waited for a slow path (or 65,536 frees),
 * and such a child held the parent's freed memory for good. Run with a purge delay of
 * seconds, so that the parent's purger cannot release the burst before the fork. */
static void forked_child_on_the_fast_paths_gets_its_purger(void)
{
    long base = rss_kib();
    burst(256);
    /* A block of this size in the cache: the child's calls below never leave the fast
     * paths. */
    T_FREE(T_MALLOC(16));
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        long start = rss_kib();
        /* 1: the child did not inherit the freed burst (the test proves nothing then) */
        int status = start - base > 128 * 1024 ? 0 : 1;
        double until = seconds() + WAIT_SECONDS;
        long now = start;
        while (now - base > NEAR_START_KIB && seconds() < until) {
            char *p = T_MALLOC(16);
            if (!p)
                status |= 8;
            else
                *(volatile char *)p = 1;
            T_FREE(p);
            usleep(POLL_MICROSECONDS);
            now = rss_kib();
        }
        if (now - base > NEAR_START_KIB)
            status |= 2;
        fprintf(stderr, "# child: rss at the start %ld KiB, at the fork %ld KiB, then %ld KiB\n",
                base, start, now);
        _exit(status);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    /* 2: the child's RSS stayed up; 8: malloc failed */
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "child status %#x\n", (unsigned)status);
}

/* Waits up to a minute for child `pid` (a bound on a hang, not a speed target); one that
 * has not ended by then is killed and fails, with `hung` said, as does one that ended
 * with a status other than 0. */
static void child_exits_cleanly_within_a_minute(pid_t pid, const char *hung)
{
    int status = 0;
    pid_t ended = 0;
    double until = seconds() + 60;
    while ((ended = waitpid(pid, &status, WNOHANG)) == 0 && seconds() < until)
        usleep(POLL_MICROSECONDS);
    if (ended == 0) {
        fprintf(stderr, "%s within 60 s: killed\n", hung);
        kill(pid, SIGKILL);
        REQUIRE(waitpid(pid, &status, 0) == pid);
    }
    CHECK(ended == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (ended == pid && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
        fprintf(stderr, "child status %#x\n", (unsigned)status);
}

/* A forked child's first free is a purge tick, and it used to start the child's purger
 * wherever it came from: glibc's pthread_join frees the TLS of stacks it drops from its
 * cache (the parent's threads' stacks, inherited, overflow it) while it holds the cache's
 * lock, which pthread_create takes too, so the child waited on itself for good, with
 * every signal blocked (an outside tester's probe; parents with 4 or more threads hung).
 * Now a free starts the purger only in a process that never had another thread, and the
 * child's allocations that reach a slow path start it after the join. */
static int idle_pipe[2];

static void *idle_until_closed(void *arg)
{
    (void)arg;
    char byte;
    while (read(idle_pipe[0], &byte, 1) < 0 && errno == EINTR)
        ;
    return NULL;
}

static void *return_arg(void *arg)
{
    return arg;
}

static void forked_child_joins_a_thread(void)
{
    enum { IDLE_THREADS = 8 };
    REQUIRE(pipe(idle_pipe) == 0);
    pthread_t idle[IDLE_THREADS];
    for (int i = 0; i < IDLE_THREADS; i++)
        REQUIRE(pthread_create(&idle[i], NULL, idle_until_closed, NULL) == 0);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        pthread_t t;
        static int token;
        void *result = NULL;
        if (pthread_create(&t, NULL, return_arg, &token) != 0 || pthread_join(t, &result) != 0 ||
            result != &token)
            _exit(1);
        _exit(purger_appears() ? 0 : 2);
    }
    /* 1: the thread or its join failed; 2: the child got no purger */
    child_exits_cleanly_within_a_minute(pid, "the child did not end");
    close(idle_pipe[1]);
    for (int i = 0; i < IDLE_THREADS; i++)
        REQUIRE(pthread_join(idle[i], NULL) == 0);
    close(idle_pipe[0]);
}

/* The state of the main thread, from /proc/self/stat (after the last ')'); 0 if unknown. */
static char main_thread_state(void)
{
    char buf[1024];
    if (!proc_read("/proc/self/stat", buf, sizeof buf))
        return 0;
    const char *paren = strrchr(buf, ')');
    return paren && paren[1] == ' ' ? paren[2] : 0;
}

static int last_pipe[2];

/* The child's last program thread: once the main thread has left, it waits past the
 * purger's next wake-up, checks that the purger stayed for it, lets the purger give back
 * a burst's memory (no allocator call while it waits), reports, and returns. */
static void *last_thread(void *arg)
{
    (void)arg;
    unsigned char status = 0;
    double until = seconds() + WAIT_SECONDS;
    while (main_thread_state() != 'Z' && seconds() < until)
        usleep(POLL_MICROSECONDS);
    if (main_thread_state() != 'Z')
        status |= 1;
    usleep(1500000);
    long tid;
    if (purgers(&tid) != 1)
        status |= 2;
    long start = rss_kib();
    burst(128);
    long now = rss_kib();
    until = seconds() + WAIT_SECONDS;
    while (now - start > NEAR_START_KIB && seconds() < until) {
        usleep(POLL_MICROSECONDS);
        now = rss_kib();
    }
    if (now - start > NEAR_START_KIB)
        status |= 4;
    if (test_failures)
        status |= 8;
    REQUIRE(write(last_pipe[1], &status, 1) == 1);
    return NULL;
}

/* A child whose main thread calls pthread_exit while `last` (the one other program
 * thread) works must end, with status 0, when that thread returns: its purger, blocking
 * every signal, would otherwise keep it alive for good, deaf to all but SIGKILL. With
 * `no_proc`, the child has no file descriptor left to read /proc/self/stat with, so that
 * the purger cannot count the process's threads, and must still leave once no thread
 * holds a cache. The bound only catches a process that never ends. */
static void child_ends_with_its_last_thread(void *(*last)(void *), bool no_proc)
{
    REQUIRE(pipe(last_pipe) == 0);
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        close(last_pipe[0]);
        if (!purger_appears())
            _exit(16);
        struct rlimit none = {0, 0};
        /* pthread_exit unwinds with libgcc_s, which it loads on first use: not with no
         * file descriptor left. */
        if (no_proc &&
            (!dlopen("libgcc_s.so.1", RTLD_NOW) || setrlimit(RLIMIT_NOFILE, &none) != 0 ||
             open("/proc/self/stat", O_RDONLY) != -1))
            _exit(18);
        pthread_t t;
        if (pthread_create(&t, NULL, last, NULL) != 0)
            _exit(17);
        pthread_detach(t);
        pthread_exit(NULL);
    }
    close(last_pipe[1]);
    unsigned char report = 0xff;
    ssize_t got = read(last_pipe[0], &report, 1);
    close(last_pipe[0]);
    /* 1: the main thread never showed as gone; 2: the purger left while a thread lived;
     * 4: the burst's memory stayed; 8: a fill check failed */
    CHECK(got == 1 && report == 0);
    if (got != 1 || report != 0)
        fprintf(stderr, "last thread's report: %zd byte(s), %#x\n", got, (unsigned)report);
    child_exits_cleanly_within_a_minute(pid, "the process outlived its last thread");
}

static void purger_leaves_with_the_last_thread(void)
{
    child_ends_with_its_last_thread(last_thread, false);
}

/* The child's last program thread without /proc: it allocates (its cache counts it),
 * waits past the purger's next wake-up, reports and returns. */
static void *last_thread_no_proc(void *arg)
{
    (void)arg;
    unsigned char status = 0;
    void *block = T_MALLOC(1000);
    if (!block)
        status |= 8;
    usleep(1500000);
    T_FREE(block);
    REQUIRE(write(last_pipe[1], &status, 1) == 1);
    return NULL;
}

static void purger_leaves_without_proc(void)
{
    child_ends_with_its_last_thread(last_thread_no_proc, true);
}

static sigjmp_buf jump_env;

static void jump_out(int sig)
{
    (void)sig;
    siglongjmp(jump_env, 1);
}

/* A handler that leaves by siglongjmp (a shell's or a REPL's SIGINT) never returns to
 * the wrapper, so the wrapper's count of running handlers stays raised; the thread must
 * still start the purger once the handler is over. A forked child inherits no purger:
 * its handler jumps out before its first call into lfheap, whose slow paths then must
 * start one. */
static void purger_starts_after_a_handler_jumped_out(void)
{
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = jump_out;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGUSR1, &sa, NULL) != 0)
            _exit(2);
        if (sigsetjmp(jump_env, 1) == 0) {
            raise(SIGUSR1);
            _exit(3);
        }
        _exit(purger_appears() ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    /* 1: no purger started; 2: sigaction failed; 3: the handler did not jump */
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "child status %#x\n", (unsigned)status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

#ifdef LFHEAP_FAULT_INJECTION
/* The n-th OS call from the first allocation on fails, and every call after it, until
 * the test lifts the failure (a fresh child process per n: lfheap untouched before): the
 * calls include the purger's page and its thread start. lfheap goes on working after the
 * failure is lifted, and a purger starts. Children report in their exit status. */
static int refused_run(uint64_t n)
{
    os_fault_inject(n, true);
    for (int i = 0; i < 20; i++) {
        void *p = T_MALLOC(300000);
        if (p)
            memset(p, 1, 4096);
        T_FREE(p);
        usleep(5000);
    }
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    os_fault_inject(0, false);
    if (stats.failed == 0)
        return 3; /* the workload makes fewer than n calls: done */
    /* Only a thread whose start was a call that succeeded may run. The purger may have
     * started before the failures began: on a busy machine the workload outlasts the
     * purge delay, and the purges after the start are calls that fail. */
    if (threads_now() > 1 + (long)stats.threads_started)
        return 1; /* a thread was started without a call that succeeded */
    return purger_appears() ? 0 : 2;
}

static void purger_start_refused(void)
{
    uint64_t n = 1;
    for (;; n++) {
        fflush(stdout);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0)
            _exit(refused_run(n));
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        REQUIRE(WIFEXITED(status));
        if (WEXITSTATUS(status) == 3)
            break;
        if (WEXITSTATUS(status) != 0)
            fprintf(stderr, "call %llu failing: child status %d\n", (unsigned long long)n,
                    WEXITSTATUS(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    printf("# failed each of the first %llu OS calls in turn, and every call after it\n",
           (unsigned long long)(n - 1));
    CHECK(n > 2);
}
#endif

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "idle";
    if (argc > 2)
        scenario_mib = (size_t)atol(argv[2]);
#ifdef LFHEAP_FAULT_INJECTION
    /* lfheap untouched until each child's first call */
    if (strcmp(which, "fault") == 0) {
        setenv("LFHEAP_BACKGROUND", "1", 1);
        RUN(purger_start_refused);
        return test_exit_status();
    }
#endif
    /* lfheap set up before the start is measured */
    T_FREE(T_MALLOC(64));
    if (strcmp(which, "idle") == 0) {
        RUN(idle_rss_falls_back);
    } else if (strcmp(which, "measure") == 0) {
        measure();
    } else if (strcmp(which, "off") == 0) {
        RUN(no_thread_without_switch);
    } else if (strcmp(which, "once") == 0) {
        RUN(purger_started_once);
    } else if (strcmp(which, "fork") == 0) {
        RUN(forked_child_gets_its_own_purger);
    } else if (strcmp(which, "forkfast") == 0) {
        RUN(forked_child_on_the_fast_paths_gets_its_purger);
    } else if (strcmp(which, "forkjoin") == 0) {
        RUN(forked_child_joins_a_thread);
    } else if (strcmp(which, "last") == 0) {
        RUN(purger_leaves_with_the_last_thread);
    } else if (strcmp(which, "last-no-proc") == 0) {
        RUN(purger_leaves_without_proc);
    } else if (strcmp(which, "jump") == 0) {
        RUN(purger_starts_after_a_handler_jumped_out);
    } else {
        printf("FAIL unknown case %s\n", which);
        return 1;
    }
    return test_exit_status();
}
