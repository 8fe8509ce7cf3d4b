/*
 * Statistics (docs/STATISTICS.md): lfh_stats_get against a known workload (exact
 * calls, 0-byte calls, failures, bytes requested and allocated, frees of NULL, invalid
 * frees, remote frees, bytes in use), OS calls that are there and only grow, totals read
 * while other threads still hold their counts, malloc_stats output parsed back, mallinfo2
 * and mallopt. Built against the -stats libraries (build/t-stats, build/t-stats-debug),
 * and against the release one (build/t), where it checks that nothing is counted and
 * that the reports say so. With `--xml FILE` it also writes malloc_info there, for the
 * suite to parse.
 *
 * Counts are compared as differences of two snapshots taken around the workload, with
 * nothing else allocating in between (no stdio, no thread creation).
 */
#include "lfheap.h"
#include "testutil.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct lfh_stats before, after;
static int counting; /* the library counts (a -stats build) */
static int debug;    /* a debug build: usable sizes are request sizes */

static void snap(struct lfh_stats *s)
{
    REQUIRE(lfh_stats_get(s) == counting);
}

#define DELTA(field)      (after.field - before.field)
#define ROUTINE(r, field) (after.routine[r].field - before.routine[r].field)

/* Bytes of the block lfheap gave for p (malloc_usable_size is the request in debug
 * builds, the block's size otherwise). */
static size_t block_bytes(void *p)
{
    return lfh_malloc_usable_size(p);
}

static void allocating_routines_are_counted_exactly(void)
{
    enum { N = 100 };
    void *p[N], *z[10];
    snap(&before);
    size_t alloc = 0;
    for (int i = 0; i < N; i++) {
        p[i] = lfh_malloc(100);
        REQUIRE(p[i]);
        alloc += block_bytes(p[i]);
    }
    for (int i = 0; i < 10; i++)
        z[i] = lfh_malloc(0);
    errno = 0;
    void *huge = lfh_malloc((size_t)PTRDIFF_MAX + 1);
    int huge_errno = errno;
    snap(&after);
    CHECK(huge == NULL && huge_errno == ENOMEM);
    CHECK(ROUTINE(LFH_STATS_MALLOC, calls) == N + 10 + 1);
    CHECK(ROUTINE(LFH_STATS_MALLOC, zero_calls) == 10);
    CHECK(ROUTINE(LFH_STATS_MALLOC, failures) == 1);
    CHECK(ROUTINE(LFH_STATS_MALLOC, request_bytes) == N * 100);
    if (!debug) {
        CHECK(alloc == N * 112); /* the 112-byte class */
        CHECK(ROUTINE(LFH_STATS_MALLOC, alloc_bytes) == alloc + 10 * 16);
    } else {
        CHECK(ROUTINE(LFH_STATS_MALLOC, alloc_bytes) >= N * 108 + 10 * 9);
    }
    CHECK(DELTA(bytes_in_use) == ROUTINE(LFH_STATS_MALLOC, alloc_bytes));

    /* the other routines, one row each */
    snap(&before);
    void *c = lfh_calloc(10, 30);
    void *a = lfh_aalloc(7, 9);
    void *m = lfh_memalign(64, 200);
    void *aa = lfh_aligned_alloc(128, 256);
    void *pm = NULL;
    int pm_ok = lfh_posix_memalign(&pm, 32, 40);
    int pm_bad = lfh_posix_memalign(&pm, 3, 40);
    void *v = lfh_valloc(10);
    void *pv = lfh_pvalloc(10);
    void *am = lfh_amemalign(64, 3, 5);
    void *cm = lfh_cmemalign(64, 0, 5);
    void *bad = lfh_aligned_alloc(3, 10);
    void *over = lfh_calloc(SIZE_MAX / 2, 3);
    snap(&after);
    CHECK(c && a && m && aa && pm_ok == 0 && pm_bad == EINVAL && v && pv && am && cm);
    CHECK(bad == NULL && over == NULL);
    CHECK(ROUTINE(LFH_STATS_CALLOC, calls) == 2 && ROUTINE(LFH_STATS_CALLOC, failures) == 1);
    CHECK(ROUTINE(LFH_STATS_CALLOC, request_bytes) == 300);
    CHECK(ROUTINE(LFH_STATS_AALLOC, calls) == 1 && ROUTINE(LFH_STATS_AALLOC, request_bytes) == 63);
    CHECK(ROUTINE(LFH_STATS_MEMALIGN, request_bytes) == 200);
    CHECK(ROUTINE(LFH_STATS_ALIGNED_ALLOC, calls) == 2);
    CHECK(ROUTINE(LFH_STATS_ALIGNED_ALLOC, failures) == 1);
    CHECK(ROUTINE(LFH_STATS_ALIGNED_ALLOC, request_bytes) == 256);
    CHECK(ROUTINE(LFH_STATS_POSIX_MEMALIGN, calls) == 2);
    CHECK(ROUTINE(LFH_STATS_POSIX_MEMALIGN, failures) == 1);
    CHECK(ROUTINE(LFH_STATS_POSIX_MEMALIGN, request_bytes) == 40);
    CHECK(ROUTINE(LFH_STATS_VALLOC, request_bytes) == 10);
    CHECK(ROUTINE(LFH_STATS_PVALLOC, request_bytes) == 10);
    CHECK(ROUTINE(LFH_STATS_AMEMALIGN, request_bytes) == 15);
    CHECK(ROUTINE(LFH_STATS_CMEMALIGN, calls) == 1 &&
          ROUTINE(LFH_STATS_CMEMALIGN, zero_calls) == 1);
    if (!debug)
        CHECK(ROUTINE(LFH_STATS_PVALLOC, alloc_bytes) == block_bytes(pv));
    CHECK(ROUTINE(LFH_STATS_MALLOC, calls) == 0);

    /* frees: of live blocks, of NULL, of something that is not a block */
    snap(&before);
    size_t freed = 0;
    for (int i = 0; i < N; i++) {
        freed += block_bytes(p[i]);
        lfh_free(p[i]);
    }
    for (int i = 0; i < 7; i++)
        lfh_free(NULL);
    for (int i = 0; i < 10; i++)
        lfh_free(z[i]);
    void *all[] = {c, a, m, aa, pm, v, pv, am, cm};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        lfh_free(all[i]);
    snap(&after);
    CHECK(DELTA(free.calls) == N + 10 + 9);
    CHECK(DELTA(free.null_calls) == 7);
    if (!debug)
        CHECK(DELTA(free.alloc_bytes) >= freed + 10 * 16);
    else
        CHECK(DELTA(free.request_bytes) == N * 100 + 300 + 63 + 200 + 256 + 40 + 10 + 4096 + 15);
    CHECK(ROUTINE(LFH_STATS_MALLOC, calls) == 0);
}

static void frees_of_unknown_pointers_count_as_invalid(void)
{
    if (debug)
        return; /* the debug build reports and aborts: tests/test_debug.c */
    int on_stack;
    char *p = lfh_malloc(64);
    REQUIRE(p);
    snap(&before);
    lfh_free(&on_stack);
    lfh_free(p + 16);
    snap(&after);
    CHECK(DELTA(free.invalid_calls) == 2 && DELTA(free.calls) == 0);
    lfh_free(p);
}

static void resizing_routines_count_once(void)
{
    snap(&before);
    char *r = lfh_realloc(NULL, 50); /* counted as realloc, not malloc */
    REQUIRE(r);
    r = lfh_realloc(r, 5000); /* moves */
    REQUIRE(r);
    r = lfh_realloc(r, 4000); /* stays */
    REQUIRE(r);
    void *gone = lfh_realloc(r, 0); /* frees */
    char *q = lfh_reallocarray(NULL, 10, 10);
    REQUIRE(q);
    q = lfh_resize(q, 300);
    REQUIRE(q);
    q = lfh_aligned_resize(q, 256, 300);
    REQUIRE(q);
    q = lfh_aligned_realloc(q, 512, 1000);
    REQUIRE(q);
    snap(&after);
    CHECK(gone == NULL);
    CHECK(ROUTINE(LFH_STATS_REALLOC, calls) == 5 && ROUTINE(LFH_STATS_REALLOC, zero_calls) == 1);
    CHECK(ROUTINE(LFH_STATS_REALLOC, request_bytes) == 50 + 5000 + 4000 + 100);
    CHECK(ROUTINE(LFH_STATS_RESIZE, calls) == 1 && ROUTINE(LFH_STATS_RESIZE, request_bytes) == 300);
    CHECK(ROUTINE(LFH_STATS_ALIGNED_RESIZE, calls) == 1);
    CHECK(ROUTINE(LFH_STATS_ALIGNED_REALLOC, request_bytes) == 1000);
    CHECK(ROUTINE(LFH_STATS_MALLOC, calls) == 0 && DELTA(free.calls) == 0);
    /* only q is live: what is in use grew by exactly its block */
    CHECK(DELTA(bytes_in_use) == (debug ? DELTA(bytes_in_use) : block_bytes(q)));
    if (debug)
        CHECK(DELTA(request_in_use) == 1000);
    lfh_free(q);
}

/* ---- remote frees ------------------------------------------------------------------ */

enum { REMOTE_BLOCKS = 300 };
static void *remote[REMOTE_BLOCKS];

static void *allocate_for_main(void *unused)
{
    (void)unused;
    for (int i = 0; i < REMOTE_BLOCKS; i++)
        remote[i] = lfh_malloc(48);
    return NULL;
}

static void remote_frees_are_counted(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, allocate_for_main, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    size_t bytes = 0;
    for (int i = 0; i < REMOTE_BLOCKS; i++) {
        REQUIRE(remote[i]);
        bytes += debug ? 64 : block_bytes(remote[i]); /* 48 + 8 of canary: the 64 class */
    }
    snap(&before);
    for (int i = 0; i < REMOTE_BLOCKS; i++)
        lfh_free(remote[i]);
    snap(&after);
    CHECK(DELTA(remote_frees) == REMOTE_BLOCKS);
    CHECK(DELTA(remote_bytes) == bytes);
    CHECK(DELTA(free.calls) == REMOTE_BLOCKS);
}

/* ---- totals while threads still run ------------------------------------------------ */

enum { LIVE_THREADS = 4 };
static pthread_barrier_t counted_barrier, release_barrier;

static void *hold_counts(void *arg)
{
    size_t n = 1000 * ((uintptr_t)arg + 1);
    void **blocks = lfh_malloc(n * sizeof *blocks); /* one more malloc call */
    for (size_t i = 0; i < n; i++)
        blocks[i] = lfh_malloc(64);
    pthread_barrier_wait(&counted_barrier); /* the main thread reads the totals now */
    pthread_barrier_wait(&release_barrier);
    for (size_t i = 0; i < n; i++)
        lfh_free(blocks[i]);
    lfh_free(blocks);
    return NULL;
}

static void totals_are_right_while_threads_run(void)
{
    pthread_t t[LIVE_THREADS];
    REQUIRE(pthread_barrier_init(&counted_barrier, NULL, LIVE_THREADS + 1) == 0);
    REQUIRE(pthread_barrier_init(&release_barrier, NULL, LIVE_THREADS + 1) == 0);
    snap(&before);
    for (uintptr_t i = 0; i < LIVE_THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, hold_counts, (void *)i) == 0);
    pthread_barrier_wait(&counted_barrier);
    snap(&after);
    /* 1000 + 2000 + 3000 + 4000 blocks, and each thread's array */
    uint64_t blocks = 10000;
    CHECK(ROUTINE(LFH_STATS_MALLOC, calls) == blocks + LIVE_THREADS);
    CHECK(ROUTINE(LFH_STATS_MALLOC, request_bytes) ==
          blocks * 64 + (1000 + 2000 + 3000 + 4000) * sizeof(void *));
    CHECK(DELTA(threads_started) == LIVE_THREADS && DELTA(threads_exited) == 0);
    CHECK(DELTA(bytes_in_use) >= blocks * 64);
    pthread_barrier_wait(&release_barrier);
    for (int i = 0; i < LIVE_THREADS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0);
    snap(&after);
    CHECK(DELTA(threads_exited) == LIVE_THREADS);
    CHECK(DELTA(free.calls) >= blocks + LIVE_THREADS);
    pthread_barrier_destroy(&counted_barrier);
    pthread_barrier_destroy(&release_barrier);
}

/* The live figures are differences of two totals read one after the other: with
 * threads allocating and freeing meanwhile, a free may be seen without its allocation,
 * and the difference read as 2^64 less a few hundred MB (found by an outside tester: 4
 * of 200,000 reads). They may read low, never below 0. */
static _Atomic bool churning;

static void *churn_blocks(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[64] = {0};
    while (atomic_load_explicit(&churning, memory_order_relaxed)) {
        unsigned i = (unsigned)rand_r(&seed) % 64;
        lfh_free(held[i]);
        held[i] = lfh_malloc((size_t)rand_r(&seed) % 3000);
    }
    for (int i = 0; i < 64; i++)
        lfh_free(held[i]);
    return NULL;
}

static void live_figures_never_wrap(void)
{
    enum { CHURNERS = 3, READS = 50000 };
    pthread_t t[CHURNERS];
    atomic_store(&churning, true);
    for (uintptr_t i = 0; i < CHURNERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, churn_blocks, (void *)(i + 1)) == 0);
    uint64_t wrapped = 0;
    const uint64_t absurd = (uint64_t)1 << 48;
    for (int k = 0; k < READS; k++) {
        struct lfh_stats s;
        snap(&s);
        wrapped += s.bytes_in_use > absurd || s.request_in_use > absurd ||
                   s.superblocks_live > absurd || s.large_live > absurd ||
                   s.large_live_bytes > absurd || s.huge_live > absurd ||
                   s.huge_live_bytes > absurd;
    }
    atomic_store(&churning, false);
    for (int i = 0; i < CHURNERS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0);
    printf("  %d reads while %d threads churned: %llu wrapped\n", READS, CHURNERS,
           (unsigned long long)wrapped);
    CHECK(wrapped == 0);
}

/* ---- orphan slots ------------------------------------------------------------------ */

enum { EXITING_THREADS = 20 };
static pthread_barrier_t all_set_up;

static void *set_up_and_exit(void *unused)
{
    (void)unused;
    void *blocks[8];
    for (int i = 0; i < 8; i++)
        blocks[i] = lfh_malloc(32 + 32 * (size_t)i);
    pthread_barrier_wait(&all_set_up); /* every cache exists before the first exit */
    for (int i = 0; i < 8; i++)
        lfh_free(blocks[i]);
    return NULL;
}

/* The caches of threads that exit at once fill the orphan slots the process uses, two
 * per CPU it may run on, from 4 to 16, and the rest go back to the heap: each slot keeps
 * an exited thread's blocks and superblocks until a new thread adopts them. */
static void exits_beyond_the_orphan_slots_go_back(void)
{
    /* A mask wider than cpu_set_t's 1,024 CPUs is refused here: so many CPUs get all 16. */
    cpu_set_t set;
    long cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1024;
    long slots = 2 * cpus < 4 ? 4 : 2 * cpus > 16 ? 16 : 2 * cpus;
    lfh_malloc_trim(0); /* empties the slots that earlier threads filled */
    pthread_t t[EXITING_THREADS];
    REQUIRE(pthread_barrier_init(&all_set_up, NULL, EXITING_THREADS) == 0);
    snap(&before);
    for (int i = 0; i < EXITING_THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, set_up_and_exit, NULL) == 0);
    for (int i = 0; i < EXITING_THREADS; i++)
        REQUIRE(pthread_join(t[i], NULL) == 0);
    snap(&after);
    pthread_barrier_destroy(&all_set_up);
    /* No thread started while they exited: none adopted a cache, and the first exits
     * took every slot in use. */
    CHECK(DELTA(caches_new) == EXITING_THREADS && DELTA(caches_adopted) == 0);
    CHECK(DELTA(caches_orphaned) == (uint64_t)slots);
    CHECK(DELTA(caches_flushed) == (uint64_t)(EXITING_THREADS - slots));
    if (DELTA(caches_orphaned) != (uint64_t)slots)
        fprintf(stderr, "%ld CPUs: %llu caches orphaned, %ld slots expected\n", cpus,
                (unsigned long long)DELTA(caches_orphaned), slots);
}

/* ---- the kernel, superblocks, large blocks ---------------------------------------- */

static int monotonic(const struct lfh_stats *a, const struct lfh_stats *b)
{
    const struct lfh_stats_os *oa[] = {&a->mmap, &a->munmap, &a->madvise, &a->mremap};
    const struct lfh_stats_os *ob[] = {&b->mmap, &b->munmap, &b->madvise, &b->mremap};
    for (int i = 0; i < 4; i++)
        if (ob[i]->calls < oa[i]->calls || ob[i]->bytes < oa[i]->bytes)
            return 0;
    return b->superblocks_created >= a->superblocks_created &&
           b->large_allocated >= a->large_allocated && b->huge_allocated >= a->huge_allocated;
}

static void os_calls_superblocks_and_large_blocks(void)
{
    size_t huge_size = (size_t)100 << 20; /* above the largest arena chunk: own mapping */
    snap(&before);
    char *huge = lfh_malloc(huge_size);
    REQUIRE(huge);
    huge[huge_size - 1] = 1;
    snap(&after);
    CHECK(monotonic(&before, &after));
    CHECK(DELTA(mmap.calls) >= 1 && DELTA(mmap.bytes) >= huge_size);
    CHECK(DELTA(huge_allocated) == 1 && DELTA(huge_live) == 1);
    CHECK(DELTA(huge_live_bytes) >= huge_size);

    before = after;
    /* The kernel grows the mapping where it is, or, when the addresses after it are
     * taken, that mremap fails and a second one moves the pages. */
    huge = lfh_realloc(huge, huge_size * 2);
    REQUIRE(huge);
    snap(&after);
    CHECK(monotonic(&before, &after));
    CHECK(DELTA(mremap.calls) >= 1 && DELTA(mremap.calls) <= 2 &&
          DELTA(huge_live_bytes) >= huge_size);

    before = after;
    lfh_free(huge);
    /* Kept for the next huge block (src/mapcache.h) until malloc_trim unmaps it. */
    CHECK(lfh_malloc_trim(0) == 1);
    char *large = lfh_malloc(100000); /* an arena run of 112 KiB, or a freed one */
    REQUIRE(large);
    snap(&after);
    CHECK(monotonic(&before, &after));
    CHECK(DELTA(munmap.calls) >= 1 && DELTA(munmap.bytes) >= 2 * huge_size);
    CHECK(after.huge_live == before.huge_live - 1);
    /* 7/8 of 128 KiB, or a freed run of up to twice the request */
    CHECK(DELTA(large_allocated) == 1 && DELTA(large_live_bytes) >= 7 * 16384 &&
          DELTA(large_live_bytes) <= 200000);

    before = after;
    lfh_free(large);
    void *fresh_class = lfh_malloc(20000); /* a class nothing used yet: a new superblock */
    REQUIRE(fresh_class);
    lfh_free(fresh_class);
    lfh_malloc_trim(0); /* purges the freed chunk: madvise */
    snap(&after);
    CHECK(monotonic(&before, &after));
    CHECK(DELTA(large_freed) == 1 && DELTA(superblocks_created) >= 1);
    CHECK(DELTA(madvise.calls) >= 1);
    CHECK(after.superblocks_live == after.superblocks_created - after.superblocks_released);
    CHECK(after.arenas >= 1 && after.arena_bytes == after.arenas * ((uint64_t)64 << 20));

    /* A long decommit goes to the kernel in calls of at most 1 MiB (madvise) or 16 such
     * pieces (process_madvise), and each call counts: 40 MiB is at least 3 calls. They
     * counted as one before. */
    const size_t run_size = (size_t)40 << 20;
    char *run = lfh_malloc(run_size);
    REQUIRE(run);
    memset(run, 1, run_size);
    before = after;
    lfh_free(run);
    lfh_malloc_trim(0);
    snap(&after);
    CHECK(DELTA(madvise.bytes) >= run_size);
    CHECK(DELTA(madvise.calls) * ((uint64_t)16 << 20) >= DELTA(madvise.bytes));
}

/* ---- the reports ------------------------------------------------------------------ */

/* The number after `label` on the line of malloc_stats' output that starts with `row`,
 * thousands separators dropped; UINT64_MAX if absent. */
static uint64_t stats_value(const char *text, const char *row, const char *label)
{
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", row);
    const char *line = strstr(text, key);
    if (!line)
        return UINT64_MAX;
    line += strlen(key);
    const char *end = strchr(line, '\n');
    const char *at = strstr(line, label);
    if (!at || (end && at > end))
        return UINT64_MAX;
    uint64_t value = 0;
    for (at += strlen(label); (*at >= '0' && *at <= '9') || *at == ','; at++)
        if (*at != ',')
            value = value * 10 + (uint64_t)(*at - '0');
    return value;
}

/* Reads what a report wrote into a pipe until its write end is closed, then closes it. */
static void read_report(int fd, char *text, size_t size)
{
    size_t len = 0;
    ssize_t n;
    while ((n = read(fd, text + len, size - 1 - len)) > 0)
        len += (size_t)n;
    text[len] = '\0';
    close(fd);
}

static void malloc_stats_prints_the_totals(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int previous = lfh_malloc_stats_fd(fds[1]);
    CHECK(previous == STDERR_FILENO);
    struct lfh_stats s;
    snap(&s);
    lfh_malloc_stats();
    CHECK(lfh_malloc_stats_fd(previous) == fds[1]);
    close(fds[1]);
    static char text[16384];
    read_report(fds[0], text, sizeof text);
    CHECK(strncmp(text, "lfheap statistics", 17) == 0);
    CHECK(stats_value(text, "arenas         ", "") == s.arenas);
    if (!counting) {
        CHECK(strstr(text, "keeps no counters") != NULL);
        return;
    }
    CHECK(stats_value(text, "malloc         ", "calls ") == s.routine[LFH_STATS_MALLOC].calls);
    CHECK(stats_value(text, "malloc         ", "0-byte ") ==
          s.routine[LFH_STATS_MALLOC].zero_calls);
    CHECK(stats_value(text, "malloc         ", "storage ") ==
          s.routine[LFH_STATS_MALLOC].request_bytes);
    CHECK(stats_value(text, "calloc         ", "failed ") == s.routine[LFH_STATS_CALLOC].failures);
    CHECK(stats_value(text, "free           ", "null ") == s.free.null_calls);
    CHECK(stats_value(text, "remote frees   ", "blocks ") == s.remote_frees);
    CHECK(stats_value(text, "mmap           ", "calls ") == s.mmap.calls);
    CHECK(stats_value(text, "threads        ", "started ") == s.threads_started);
    CHECK(stats_value(text, "superblocks    ", "live ") == s.superblocks_live);
    CHECK(stats_value(text, "in use         ", "") == s.bytes_in_use);
}

/* What a report printed: fn() with the statistics descriptor sent into a pipe. */
static void capture(void (*fn)(void), char *text, size_t size)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int previous = lfh_malloc_stats_fd(fds[1]);
    fn();
    lfh_malloc_stats_fd(previous);
    close(fds[1]);
    read_report(fds[0], text, size);
}

#define AMEMALIGN_ROW "amemalign      "

static char thread_report[16384];

static void *count_in_a_thread(void *unused)
{
    (void)unused;
    for (int i = 0; i < 5; i++)
        lfh_free(lfh_amemalign(64, 3, 10));
    capture(lfh_heap_stats, thread_report, sizeof thread_report);
    return NULL;
}

/* malloc_stats_clear starts every count again (the live figures stay: they are
 * differences of whole counts); heap_stats prints the calling thread's counts only. */
static void clear_and_heap_stats(void)
{
    static char text[16384];
    if (!counting) {
        capture(lfh_heap_stats, text, sizeof text);
        CHECK(strstr(text, "this thread's heap") && strstr(text, "keeps no counters"));
        lfh_malloc_stats_clear(); /* nothing to clear: harmless */
        return;
    }
    void *kept = lfh_malloc(300000);
    REQUIRE(kept);
    snap(&before);
    lfh_malloc_stats_clear();
    snap(&after);
    CHECK(after.routine[LFH_STATS_MALLOC].calls == 0 && after.free.calls == 0);
    CHECK(after.mmap.calls == 0 && after.superblocks_created == 0 && after.large_allocated == 0);
    CHECK(after.bytes_in_use == before.bytes_in_use && after.large_live == before.large_live);
    CHECK(after.superblocks_live == before.superblocks_live && after.large_live >= 1);
    /* counting goes on from the new zero */
    for (int i = 0; i < 3; i++)
        lfh_free(lfh_malloc(100));
    snap(&after);
    CHECK(after.routine[LFH_STATS_MALLOC].calls == 3 && after.free.calls == 3);
    /* another thread's heap_stats shows its 5 calls, the main thread's its own 3 */
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, count_in_a_thread, NULL) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    for (int i = 0; i < 3; i++)
        lfh_free(lfh_amemalign(64, 3, 10));
    capture(lfh_heap_stats, text, sizeof text);
    CHECK(strstr(thread_report, "this thread's heap") && strstr(text, "this thread's heap"));
    CHECK(stats_value(thread_report, AMEMALIGN_ROW, "calls ") == 5);
    CHECK(stats_value(thread_report, AMEMALIGN_ROW, "storage ") == 5 * 30);
    CHECK(stats_value(text, AMEMALIGN_ROW, "calls ") == 3);
    /* no process-wide figure in a thread's report */
    CHECK(!strstr(text, "in use") && !strstr(text, "superblocks") && !strstr(text, "arenas"));
    snap(&after);
    CHECK(after.routine[LFH_STATS_AMEMALIGN].calls == 8);
    capture(lfh_malloc_stats, text, sizeof text);
    CHECK(stats_value(text, AMEMALIGN_ROW, "calls ") == 8);
    lfh_free(kept);
}

static volatile int report_returned;

static void *report_with_cancel_pending(void *unused)
{
    (void)unused;
    pthread_cancel(pthread_self()); /* deferred: acted on at the next cancellation point */
    lfh_malloc_stats();
    report_returned = 1;
    pthread_testcancel();
    return NULL;
}

/* A report is no cancellation point, as glibc's malloc_stats is not: a thread with a
 * cancellation pending gets its whole report and returns from the call. */
static void reports_are_no_cancellation_point(void)
{
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int previous = lfh_malloc_stats_fd(fds[1]);
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, report_with_cancel_pending, NULL) == 0);
    void *result;
    REQUIRE(pthread_join(thread, &result) == 0);
    lfh_malloc_stats_fd(previous);
    close(fds[1]);
    static char text[16384];
    read_report(fds[0], text, sizeof text);
    CHECK(result == PTHREAD_CANCELED && report_returned);
    CHECK(strncmp(text, "lfheap statistics", 17) == 0 && strstr(text, "arenas") != NULL);
}

/* glibc's fields: uordblks is what the arenas hold in blocks, hblkhd what the blocks in
 * their own mappings take, so that uordblks + hblkhd counts every live block once. */
static void mallinfo2_and_mallopt(void)
{
    size_t huge_size = (size_t)100 << 20; /* above the largest arena chunk: own mapping */
    char *huge = lfh_malloc(huge_size);
    REQUIRE(huge);
    struct lfh_stats s;
    snap(&s);
    struct mallinfo2 info = lfh_mallinfo2();
    CHECK(info.arena == s.arena_bytes);
    CHECK(info.uordblks + info.fordblks == info.arena);
    CHECK(info.hblks >= 1 && info.hblkhd >= huge_size && info.uordblks > 0 &&
          info.uordblks < huge_size);
    if (counting) {
        CHECK(info.hblks == s.huge_live && info.hblkhd == s.huge_live_bytes);
        CHECK(info.uordblks + info.hblkhd == s.bytes_in_use);
    }
    struct mallinfo narrow = lfh_mallinfo();
    CHECK((size_t)narrow.arena == info.arena || narrow.arena == INT32_MAX);
    CHECK((size_t)narrow.uordblks == info.uordblks && (size_t)narrow.hblkhd == info.hblkhd);
    lfh_free(huge);
    /* Without counters too (from the heap's descriptors), uordblks follows the blocks: up
     * by at least what was allocated, and down once they are freed and the caches
     * trimmed (glibc's tst-mallinfo2 asks as much). */
    enum { N = 2000, SIZE = 1000 };
    static char *blocks[N];
    size_t before_alloc = lfh_mallinfo2().uordblks;
    for (int i = 0; i < N; i++) {
        blocks[i] = lfh_malloc(SIZE);
        REQUIRE(blocks[i]);
    }
    size_t allocated = lfh_mallinfo2().uordblks;
    CHECK(allocated >= before_alloc + (size_t)N * SIZE);
    for (int i = 0; i < N; i++)
        lfh_free(blocks[i]);
    lfh_malloc_trim(0);
    size_t freed = lfh_mallinfo2().uordblks;
    if (allocated < freed + (size_t)N * SIZE / 2)
        fprintf(stderr, "uordblks %zu before, %zu allocated, %zu freed\n", before_alloc, allocated,
                freed);
    CHECK(allocated >= freed + (size_t)N * SIZE / 2);
    /* glibc 2.36's results: 0 only for a fast-bin size outside 0..160 bytes. */
    CHECK(lfh_mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1);
    CHECK(lfh_mallopt(M_MMAP_THRESHOLD, -1) == 1);
    CHECK(lfh_mallopt(M_ARENA_MAX, 1) == 1);
    CHECK(lfh_mallopt(M_ARENA_MAX, -5) == 1);
    CHECK(lfh_mallopt(M_MXFAST, 0) == 1 && lfh_mallopt(M_MXFAST, 160) == 1);
    CHECK(lfh_mallopt(M_MXFAST, -1) == 0 && lfh_mallopt(M_MXFAST, 161) == 0);
    CHECK(lfh_mallopt(12345, 1) == 1 && lfh_mallopt(0, 0) == 1 && lfh_mallopt(-100, 3) == 1);
}

static void release_build_counts_nothing(void)
{
    if (counting)
        return;
    snap(&before);
    lfh_free(lfh_malloc(10));
    snap(&after);
    CHECK(after.routine[LFH_STATS_MALLOC].calls == 0 && after.free.calls == 0);
    CHECK(after.mmap.calls == 0 && after.bytes_in_use == 0 && after.arenas >= 1);
    CHECK(lfh_stats_get(NULL) == -1 && errno == EINVAL);
}

int main(int argc, char **argv)
{
    struct lfh_stats probe;
    counting = lfh_stats_get(&probe);
    debug = probe.debug;
    if (counting) {
        RUN(allocating_routines_are_counted_exactly);
        RUN(frees_of_unknown_pointers_count_as_invalid);
        RUN(resizing_routines_count_once);
        RUN(remote_frees_are_counted);
        RUN(totals_are_right_while_threads_run);
        RUN(live_figures_never_wrap);
        RUN(exits_beyond_the_orphan_slots_go_back);
        RUN(os_calls_superblocks_and_large_blocks);
    }
    RUN(release_build_counts_nothing);
    RUN(malloc_stats_prints_the_totals);
    RUN(mallinfo2_and_mallopt);
    RUN(reports_are_no_cancellation_point);
    if (argc == 3 && strcmp(argv[1], "--xml") == 0) {
        FILE *f = fopen(argv[2], "w");
        REQUIRE(f);
        fputs("<!-- lfheap malloc_info -->\n", f); /* written before: fflush keeps order */
        CHECK(lfh_malloc_info(0, f) == 0);
        errno = 0;
        CHECK(lfh_malloc_info(1, f) == EINVAL && errno == 0);
        fclose(f);
        /* A stream with no file descriptor gets the same report through stdio. */
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        REQUIRE(mem);
        fputs("<!-- before -->\n", mem);
        errno = 0;
        CHECK(lfh_malloc_info(0, mem) == 0 && errno == 0);
        fputs("<!-- after -->\n", mem);
        REQUIRE(fclose(mem) == 0);
        CHECK(text && strncmp(text, "<!-- before -->\n<malloc version=\"lfheap-1\"", 42) == 0);
        CHECK(text && strstr(text, "</malloc>\n<!-- after -->\n") != NULL);
        CHECK(text && strstr(text, "<routine name=\"malloc\" calls=\"") != NULL);
        free(text);
    }
    /* Last: it clears the counts that the report above shows whole. */
    RUN(clear_and_heap_stats);
    return test_exit_status();
}
