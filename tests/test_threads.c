/*
 * Thread life cycle: thousands of short-lived threads, each leaving a block for the next
 * one to free, must not make the process grow (caches go back at thread exit), also when
 * hundreds of them are alive at once; fork()
 * while other threads allocate must give a child whose allocator works.
 */
#include "alloc_names.h"
#include "lfheap.h"
#include "testutil.h"

#include <alloca.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic(uint64_t *) handover;
static _Atomic long bad_handovers;

static void *short_lived(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    /* touch several classes, so the thread's cache holds superblocks of each */
    void *scratch[64];
    for (int i = 0; i < 64; i++) {
        scratch[i] = T_MALLOC(16 + (size_t)(i % 16) * 48);
        memset(scratch[i], 0x11, 16);
    }
    for (int i = 0; i < 64; i += 2)
        T_FREE(scratch[i]);
    uint64_t *mine = T_MALLOC(64);
    mine[0] = id;
    mine[7] = ~id;
    uint64_t *prev = atomic_exchange(&handover, mine);
    if (prev) {
        if (prev[0] + 1 != id || prev[7] != ~prev[0])
            atomic_fetch_add(&bad_handovers, 1);
        T_FREE(prev); /* freed by a thread other than its owner, which has exited */
    }
    for (int i = 1; i < 64; i += 2)
        T_FREE(scratch[i]);
    return NULL;
}

/* Short threads in the churn test; the first argument overrides it (valgrind runs fewer). */
static int churn_threads = 5000;

/* Runs `total` threads of `body` one after the other (ids 1 to total, for the hand-over
 * chain) and returns how much the resident size grew after the first tenth of them, in
 * KiB; checks every handed-over block. */
static long churn_growth(void *(*body)(void *), int total)
{
    const int warmup = total / 10;
    long after_warmup = 0;
    for (int i = 0; i < total; i++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, body, (void *)(uintptr_t)(i + 1)) == 0);
        pthread_join(t, NULL);
        if (i + 1 == warmup)
            after_warmup = test_rss_kib();
    }
    long end = test_rss_kib();
    T_FREE(atomic_exchange(&handover, NULL));
    CHECK(atomic_load(&bad_handovers) == 0);
    printf("# rss after %d threads %ld KiB, after %d %ld KiB\n", warmup, after_warmup, total, end);
    return end - after_warmup;
}

static void thread_churn_keeps_rss_flat(void)
{
    /* Without the hand-back each thread would keep ~1 MiB of superblocks. */
    CHECK(churn_growth(short_lived, churn_threads) < 4096);
}

/* Keys made before the allocator's first call, as a program's constructor (or main, before
 * any allocation) may make them: the last one's index is at least 32, past the first
 * level of glibc's per-thread table, so the first pthread_setspecific of it in a thread
 * allocates that thread's second-level table. If that allocation is the thread's first,
 * the thread's cache is set up inside it, and the cache's own exit key, if it also lies
 * past the first level, went into a second table that the outer call then replaced:
 * the cache never went back at exit. Priority 101 runs this before lfheap's own
 * constructor where both are in the program (the static archive), and after it where
 * lfheap is a shared library. */
enum { KEYS_FIRST = 33 };
static pthread_key_t keys_first[KEYS_FIRST];
static bool keys_first_made;

__attribute__((constructor(101))) static void make_keys_first(void)
{
    /* The run that checks threads whose first call comes from a late destructor round
     * wants lfheap's key among glibc's first 32, as most programs have it. */
    if (getenv("TEST_THREADS_NO_KEYS_FIRST"))
        return;
    keys_first_made = true;
    for (int i = 0; i < KEYS_FIRST; i++)
        keys_first_made &= pthread_key_create(&keys_first[i], NULL) == 0;
}

static _Atomic long keys_lost;

static void *keyed_short_lived(void *arg)
{
    pthread_key_t key = keys_first[KEYS_FIRST - 1];
    /* The thread's first call that allocates, made by glibc inside this one. */
    REQUIRE(pthread_setspecific(key, arg) == 0);
    short_lived(arg);
    if (pthread_getspecific(key) != arg)
        atomic_fetch_add(&keys_lost, 1);
    return NULL;
}

/* Weak: the preloaded runs may be over a library without the prefixed names. */
#pragma weak lfh_stats_get
#pragma weak lfh_heap_stats
#pragma weak lfh_malloc_stats_fd

/* The library's counters into `s`; false where it keeps none. */
static bool stats_read(struct lfh_stats *s)
{
    return lfh_stats_get && lfh_stats_get(s) == 1;
}

/* The malloc calls counted in the calling thread's statistics block (heap_stats), which
 * holds the counts of every earlier thread that had it; -1 where the library keeps no
 * counters. */
static long thread_block_malloc_calls(void)
{
    struct lfh_stats s;
    if (!stats_read(&s))
        return -1;
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int previous = lfh_malloc_stats_fd(fds[1]);
    lfh_heap_stats(); /* a few KiB: within the pipe's buffer */
    lfh_malloc_stats_fd(previous);
    close(fds[1]);
    static char text[16384];
    size_t len = 0;
    ssize_t got;
    while (len + 1 < sizeof text && (got = read(fds[0], text + len, sizeof text - 1 - len)) > 0)
        len += (size_t)got;
    close(fds[0]);
    text[len] = '\0';
    const char *row = strstr(text, "\n  malloc ");
    REQUIRE(row);
    const char *at = strstr(row, "calls ");
    REQUIRE(at);
    long calls = 0;
    for (at += strlen("calls "); (*at >= '0' && *at <= '9') || *at == ','; at++)
        if (*at != ',')
            calls = calls * 10 + (*at - '0');
    return calls;
}

static void *keyed_counts(void *out)
{
    REQUIRE(pthread_setspecific(keys_first[KEYS_FIRST - 1], out) == 0);
    void *blocks[64];
    for (int i = 0; i < 64; i++) {
        blocks[i] = T_MALLOC(16 + (size_t)(i % 16) * 48);
        REQUIRE(blocks[i]);
        memset(blocks[i], 0x22, 16);
    }
    for (int i = 0; i < 64; i++)
        T_FREE(blocks[i]);
    *(long *)out = thread_block_malloc_calls();
    return NULL;
}

static void first_allocation_inside_pthread_setspecific(void)
{
    REQUIRE(keys_first_made);
    REQUIRE(keys_first[KEYS_FIRST - 1] >= 32);
    /* Each thread's cache lost at its exit kept about 100 KiB resident. */
    int threads = churn_threads < 1000 ? 60 : 300;
    CHECK(churn_growth(keyed_short_lived, threads) < 4096);
    CHECK(atomic_load(&keys_lost) == 0);
    /* The statistics' block goes back at exit too, and the next thread takes it over with
     * its counts: a thread after the churn counts into a block that holds the calls of
     * those before it. One lost at each exit (2 KiB) left each thread a fresh block. */
    long calls = 0;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, keyed_counts, &calls) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    if (calls >= 0) {
        printf("# malloc calls in the last thread's statistics block: %ld\n", calls);
        CHECK(calls > (long)threads * 32);
    }
}

/* A key whose destructor sets it again until its third round and allocates only then:
 * the thread's first call to the allocator comes from inside glibc's destructor rounds,
 * after lfheap's own key was passed over in the earlier ones. */
static pthread_key_t late_round_key;
enum { LATE_ROUND = 3 };

static void allocates_in_a_late_round(void *value)
{
    uintptr_t round = (uintptr_t)value;
    if (round < LATE_ROUND) {
        REQUIRE(pthread_setspecific(late_round_key, (void *)(round + 1)) == 0);
        return;
    }
    void *blocks[64];
    for (int size_step = 0; size_step < 8; size_step++) {
        for (int i = 0; i < 64; i++) {
            blocks[i] = T_MALLOC((size_t)16 << size_step);
            REQUIRE(blocks[i]);
            memset(blocks[i], 0x5a, 16);
        }
        for (int i = 0; i < 64; i++)
            T_FREE(blocks[i]);
    }
}

static void *arms_the_late_round_key(void *arg)
{
    (void)arg;
    REQUIRE(pthread_setspecific(late_round_key, (void *)1) == 0);
    return NULL;
}

static void first_allocation_in_a_later_destructor_round(void)
{
    REQUIRE(pthread_key_create(&late_round_key, allocates_in_a_late_round) == 0);
    /* The exit destructor lfheap registers from that round runs in the next one (glibc
     * runs up to 4): each thread's cache goes back. Lost, each kept about 190 KiB. */
    int threads = churn_threads < 1000 ? 60 : 600;
    CHECK(churn_growth(arms_the_late_round_key, threads) < 4096);
    REQUIRE(pthread_key_delete(late_round_key) == 0);
}

/* Thread caches set up so far by the statistics (new or adopted); -1 without them. */
static long caches_set_up(void)
{
    struct lfh_stats s;
    if (!stats_read(&s))
        return -1;
    return (long)s.threads_started;
}

/* A key made after lfheap's: its destructor runs after lfheap's has handed the thread's
 * cache back, and forks. The child lives on in that thread. */
static pthread_key_t fork_after_exit_key;

static void forks_after_the_hand_back(void *value)
{
    int *child_status = value;
    pid_t child = fork();
    if (child == 0) {
        long before = caches_set_up();
        int bad = 0;
        for (int round = 0; round < 100; round++) {
            unsigned char *blocks[64];
            for (int i = 0; i < 64; i++) {
                blocks[i] = T_MALLOC(24 + (size_t)i * 8);
                if (!blocks[i])
                    _exit(2);
                memset(blocks[i], i + round, 24 + (size_t)i * 8);
            }
            for (int i = 0; i < 64; i++) {
                bad += blocks[i][23 + i * 8] != (unsigned char)(i + round);
                T_FREE(blocks[i]);
            }
        }
        long after = caches_set_up();
        /* Served from a cache of its own: one set up since the fork. */
        _exit(bad ? 3 : (before >= 0 && after != before + 1) ? 4 : 0);
    }
    int status = -1;
    if (child > 0 && waitpid(child, &status, 0) != child)
        status = -1;
    *child_status = status;
}

static void *allocates_then_arms_the_fork_key(void *child_status)
{
    T_FREE(T_MALLOC(64));
    REQUIRE(pthread_setspecific(fork_after_exit_key, child_status) == 0);
    return NULL;
}

static void child_forked_after_the_hand_back_gets_a_cache(void)
{
    REQUIRE(pthread_key_create(&fork_after_exit_key, forks_after_the_hand_back) == 0);
    int child_status = -1;
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, allocates_then_arms_the_fork_key, &child_status) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    printf("# child's exit status %d (3: a block lost its bytes, 4: no cache set up)\n",
           WIFEXITED(child_status) ? WEXITSTATUS(child_status) : -1);
    CHECK(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0);
    REQUIRE(pthread_key_delete(fork_after_exit_key) == 0);
}

/* The bytes of live blocks by the library's counters; -1 where it keeps none. */
static long bytes_in_use(void)
{
    struct lfh_stats s;
    if (!stats_read(&s))
        return -1;
    return (long)s.bytes_in_use;
}

static void *keyed_after_own_malloc(void *arg)
{
    (void)arg;
    /* The thread's first call is its own; its second, glibc's table for the key's range,
     * made inside pthread_setspecific. */
    void *own = T_MALLOC(64);
    REQUIRE(own);
    pthread_key_t key = keys_first[KEYS_FIRST - 1];
    REQUIRE(pthread_setspecific(key, own) == 0);
    if (pthread_getspecific(key) != own)
        atomic_fetch_add(&keys_lost, 1);
    REQUIRE(pthread_setspecific(key, NULL) == 0);
    T_FREE(own);
    return NULL;
}

/* As above, but the table is the thread's second allocation: with the cache set up in
 * it, a registration from inside it went into a table of its own that the outer call
 * replaced, and was lost with that table (512 bytes per thread; found by an outside
 * tester with a library that made 40 keys in its constructor). Counted where the library
 * keeps counters (the static archive with statistics): lfheap's key is late there. */
static void first_allocation_before_pthread_setspecific(void)
{
    REQUIRE(keys_first_made);
    enum { THREADS = 400 };
    long before = bytes_in_use();
    for (int i = 0; i < THREADS; i++) {
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, keyed_after_own_malloc, NULL) == 0);
        REQUIRE(pthread_join(t, NULL) == 0);
    }
    long after = bytes_in_use();
    CHECK(atomic_load(&keys_lost) == 0);
    if (before >= 0) {
        printf("# bytes in use before %d threads %ld, after %ld\n", THREADS, before, after);
        CHECK(after - before < THREADS * 128);
    }
}

/* Concurrent churn: rounds of many threads alive at once, each allocating blocks of
 * thirty size classes, freeing them but one, and handing that one to a later thread. */
enum { CONCURRENT_THREADS_MAX = 400, CONCURRENT_BLOCKS = 100, CONCURRENT_SLOTS = 512 };
static pthread_barrier_t concurrent_start, concurrent_end;
static _Atomic(uint64_t *) concurrent_slots[CONCURRENT_SLOTS];
static _Atomic long concurrent_bad;

static void *concurrent_worker(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    uint64_t rng = id * 0x9E3779B97F4A7C15ull + 1;
    uint64_t *blocks[CONCURRENT_BLOCKS];
    pthread_barrier_wait(&concurrent_start);
    for (int i = 0; i < CONCURRENT_BLOCKS; i++) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        /* 30 classes: 16 bytes to 3.5 KiB, four per doubling */
        unsigned k = (unsigned)(rng % 30);
        size_t size = ((size_t)16 << (k / 4)) + (k % 4) * ((size_t)4 << (k / 4));
        blocks[i] = T_MALLOC(size);
        REQUIRE(blocks[i]);
        memset(blocks[i], (int)(id & 0x7F), size);
        blocks[i][0] = id;
    }
    for (int i = 0; i < CONCURRENT_BLOCKS; i++) {
        if (blocks[i][0] != id)
            atomic_fetch_add(&concurrent_bad, 1);
        if (i > 0)
            T_FREE(blocks[i]);
    }
    uint64_t *prev = atomic_exchange(&concurrent_slots[id % CONCURRENT_SLOTS], blocks[0]);
    if (prev) {
        if (prev[0] % CONCURRENT_SLOTS != id % CONCURRENT_SLOTS)
            atomic_fetch_add(&concurrent_bad, 1);
        T_FREE(prev);
    }
    /* Every cache of the round is alive until all are done, and they are handed back at
     * once: more than the orphan slots, whatever the scheduler does. */
    pthread_barrier_wait(&concurrent_end);
    return NULL;
}

/* Rounds and threads of the concurrent churn (RSS is measured after a few rounds): the
 * first argument scales them down (valgrind runs threads one at a time). */
static int concurrent_rounds = 40;
static int concurrent_threads = CONCURRENT_THREADS_MAX;
/* Under valgrind the RSS is mostly the tool's own, which grows by tens of MiB over the
 * first rounds (its per-thread state and translations): the bound from the start then
 * says nothing about lfheap, and only the growth after the warm-up rounds is checked. */
static bool concurrent_rss_from_start = true;

/* The caches of exited threads wait for new threads in orphan slots; with hundreds of
 * threads exiting at once, orphans kept every freed block they held, and through them
 * superblocks (RSS climbed from round to round: 23 MiB to 37 MiB over 250 rounds of 500
 * threads); an orphan keeps at most 256 KiB of its lists now. The caches that find no
 * slot go back to the heap, and the superblocks they empty went on waiting out the purge
 * delay, reused meanwhile by the next round, so each collected the pages of all its
 * tenants (here 80-115 MiB at the end, 8-38 MiB of it grown after round 4); they go back
 * to the kernel at the exit now. The second barrier makes every round's 400 caches live
 * at once and exit together whatever the scheduler does, so what the exits leave resident
 * does not depend on timing: the orphans (4 to 16 slots), at most 8 MiB of address space
 * of chunks freed at exits and not yet purged, the live blocks and glibc's stack cache
 * (measured once settled, below: 5-11 MiB above the start, -0.4 to +0.3 MiB grown after
 * round 4). The blocks must come back intact wherever they were handed on.
 * The superblocks emptied by the frees of a round (not its exits) wait out the purge
 * delay as any freed chunk does, and a round takes about as long as the delay, so what
 * is resident when a round ends depends on where the last purge fell: 12.8 to 25 MiB in
 * the stats-debug library (rounds that purged 55 MiB less address space ended 10 MiB
 * higher). So RSS is read once the delay has run out and a slow path has purged
 * (rss_settled): what stays then is what the churn really kept. */
static long rss_settled(void)
{
    /* Twice the default purge delay (LFHEAP_PURGE_MS is not set where this runs). A
     * sleep longer than asked only makes more chunks due. */
    usleep(500000);
    /* A large block's allocation is a slow path that purges every chunk that is due;
     * writing it keeps the compiler from eliding the pair. */
    volatile char *large = T_MALLOC(256 << 10);
    REQUIRE(large);
    large[0] = 1;
    T_FREE((void *)large);
    return test_rss_kib();
}

static void concurrent_thread_churn_keeps_rss_flat(void)
{
    static pthread_t threads[CONCURRENT_THREADS_MAX];
    long after_warmup = 0, huge_after_warmup = 0, start = test_rss_kib();
    for (int round = 0; round < concurrent_rounds; round++) {
        REQUIRE(pthread_barrier_init(&concurrent_start, NULL, (unsigned)concurrent_threads) == 0);
        REQUIRE(pthread_barrier_init(&concurrent_end, NULL, (unsigned)concurrent_threads) == 0);
        for (int i = 0; i < concurrent_threads; i++) {
            uintptr_t id = (uintptr_t)round * (uintptr_t)concurrent_threads + (uintptr_t)i + 1;
            REQUIRE(pthread_create(&threads[i], NULL, concurrent_worker, (void *)id) == 0);
        }
        for (int i = 0; i < concurrent_threads; i++)
            pthread_join(threads[i], NULL);
        pthread_barrier_destroy(&concurrent_start);
        pthread_barrier_destroy(&concurrent_end);
        if (round == 4) {
            after_warmup = rss_settled();
            huge_after_warmup = test_anon_huge_kib();
        }
    }
    /* With LFHEAP_HUGEPAGES=1 a chunk touched where a whole 2 MiB range was free is
     * faulted in as a huge page, all of it resident while any of its blocks lives; which
     * ranges end so depends on the scheduling (12 MiB of them at the end of one run on a
     * loaded machine, none after round 4). The pages outside huge pages keep the bound,
     * and those in huge pages grow by at most 32 MiB. */
    bool huge = test_hugepages_switch_on();
    long end = rss_settled(), huge_growth = 0;
    /* On a loaded machine the last round's threads may still have been exiting, their
     * chunks not yet due, when the first settle purged: what lfheap keeps for good stays
     * above the bound however often it settles, what was merely late does not. */
    for (int again = 0;; again++) {
        huge_growth = huge ? test_anon_huge_kib() - huge_after_warmup : 0;
        if (again == 3 || end - after_warmup - huge_growth < 8192)
            break;
        end = rss_settled();
    }
    for (int i = 0; i < CONCURRENT_SLOTS; i++)
        T_FREE(atomic_exchange(&concurrent_slots[i], NULL));
    CHECK(atomic_load(&concurrent_bad) == 0);
    if (concurrent_rss_from_start)
        CHECK(end - start - huge_growth < 24576);
    CHECK(end - after_warmup - huge_growth < 8192);
    CHECK(huge_growth <= 32768);
    if (huge || (concurrent_rss_from_start && end - start >= 24576) || end - after_warmup >= 8192)
        fprintf(stderr,
                "rss: %ld KiB at the start, %ld after round 4, %ld at the end; in huge pages: "
                "%ld after round 4, %ld at the end\n",
                start, after_warmup, end, huge_after_warmup, test_anon_huge_kib());
}

static _Atomic int stop_busy;

static void *busy(void *arg)
{
    uint64_t rng = 88172645463325252ull + (uintptr_t)arg;
    void *held[256] = {0};
    while (!atomic_load(&stop_busy)) {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        unsigned slot = (unsigned)(rng % 256);
        T_FREE(held[slot]);
        held[slot] = T_MALLOC(1 + (size_t)(rng >> 20) % (rng % 64 == 0 ? 200000 : 2000));
    }
    for (int i = 0; i < 256; i++)
        T_FREE(held[i]);
    return NULL;
}

static void *child_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 1000; i++)
        T_FREE(T_MALLOC((size_t)i * 13 + 1));
    return T_MALLOC(10);
}

static int child_works(void)
{
    /* every class and a large block, from the forking thread and a new one */
    void *blocks[200];
    for (int i = 0; i < 200; i++) {
        blocks[i] = T_MALLOC((size_t)i * 170 + 1);
        if (!blocks[i])
            return 0;
        memset(blocks[i], i, (size_t)i * 170 + 1);
    }
    void *large = T_MALLOC(3 << 20);
    if (!large)
        return 0;
    memset(large, 1, 3 << 20);
    pthread_t t;
    void *from_thread = NULL;
    if (pthread_create(&t, NULL, child_thread, NULL) != 0 || pthread_join(t, &from_thread) != 0)
        return 0;
    for (int i = 0; i < 200; i++) {
        unsigned char *b = blocks[i];
        if (b[0] != (unsigned char)i || b[(size_t)i * 170] != (unsigned char)i)
            return 0;
        T_FREE(b);
    }
    T_FREE(large);
    T_FREE(from_thread);
    return from_thread != NULL;
}

static void fork_from_busy_process(void)
{
    pthread_t t[4];
    atomic_store(&stop_busy, 0);
    for (intptr_t i = 0; i < 4; i++)
        REQUIRE(pthread_create(&t[i], NULL, busy, (void *)i) == 0);
    int good = 0, forks = 40;
    for (int i = 0; i < forks; i++) {
        usleep(2000);
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0)
            _exit(child_works() ? 0 : 1);
        int status = 0;
        waitpid(pid, &status, 0);
        good += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    atomic_store(&stop_busy, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(good == forks);
}

#ifndef TEST_PLAIN
#include "pagemap.h"
#include "tcache.h"

/* A thread that starts after another exited adopts its cache whole: its id (and with it
 * the superblocks it owned) and its cached blocks. */
static uint64_t exited_id;
static void *exited_block;

static void *leave_cache(void *arg)
{
    (void)arg;
    void *b = T_MALLOC(48);
    T_FREE(T_MALLOC(48)); /* make sure the cache is set up and holds blocks */
    T_FREE(b);            /* b is now the head of this thread's 48-byte list */
    exited_id = tcache_self.id;
    exited_block = b;
    return NULL;
}

static void *adopt_cache(void *arg)
{
    (void)arg;
    void *b = T_MALLOC(48);
    CHECK(tcache_self.id == exited_id);
    CHECK(b == exited_block); /* the list came along, hottest block first */
    T_FREE(b);
    return NULL;
}

/* Runs `first` in a thread to its exit, then `second` in a new one. */
static void run_in_turn(void *(*first)(void *), void *(*second)(void *))
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, first, NULL) == 0);
    pthread_join(t, NULL);
    REQUIRE(pthread_create(&t, NULL, second, NULL) == 0);
    pthread_join(t, NULL);
}

static void exited_cache_is_adopted(void)
{
    run_in_turn(leave_cache, adopt_cache);
    CHECK(exited_id != 0);
}

/* A thread whose first call frees a block of the cache it then adopts keeps the block
 * in that cache. Sent back to its superblock as another thread's, it waited there while
 * the cache carved new blocks: one block more for each of larson's threads, which each
 * start with a free. */
static void *leave_live_block(void *arg)
{
    (void)arg;
    T_FREE(T_MALLOC(80));        /* the cache is set up */
    exited_block = T_MALLOC(80); /* live across the exit */
    exited_id = tcache_self.id;
    return NULL;
}

static void *free_first(void *arg)
{
    (void)arg;
    T_FREE(exited_block); /* this thread's first call */
    CHECK(tcache_self.id == exited_id);
    void *b = T_MALLOC(80);
    CHECK(b == exited_block); /* the head of the adopted cache's list */
    T_FREE(b);
    return NULL;
}

static void first_free_after_adoption_stays_cached(void)
{
    run_in_turn(leave_live_block, free_first);
}

/* Bytes of the superblocks whose bump ranges the calling thread's cache holds. */
static size_t bump_range_bytes(void)
{
    size_t bytes = 0;
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++)
        if (tcache_self.bins[cls].bump != tcache_self.bins[cls].bump_end)
            bytes += tcache_self.cold[cls].bump_desc->size;
    return bytes;
}

static size_t bumps_before_exit;

static void *leave_every_class(void *arg)
{
    (void)arg;
    static void *first[SIZECLASS_COUNT];
    for (unsigned c = 0; c < SIZECLASS_COUNT; c++) {
        first[c] = T_MALLOC(sizeclass_block_size[c]);
        REQUIRE(first[c] != NULL);
    }
    /* Each class took a new superblock, and the sweeps of idle classes that those fills
     * took (tcache.c, TCACHE_SWEEP_NEW_BYTES) gave back the ranges of the classes passed
     * first. Their first blocks keep those superblocks live, so a second block of each
     * class comes from its range, or from its superblock again, range and all. */
    for (unsigned c = 0; c < SIZECLASS_COUNT; c++)
        T_FREE(T_MALLOC(sizeclass_block_size[c]));
    for (unsigned c = 0; c < SIZECLASS_COUNT; c++)
        T_FREE(first[c]);
    bumps_before_exit = bump_range_bytes();
    exited_id = tcache_self.id;
    return NULL;
}

static void *adopt_bump_ranges(void *arg)
{
    (void)arg;
    T_FREE(T_MALLOC(16));
    CHECK(tcache_self.id == exited_id);
    size_t kept = bump_range_bytes();
    CHECK(kept > 0 && kept <= (size_t)2 << 20);
    return NULL;
}

/* An orphan keeps bump ranges only while their superblocks fit 2 MiB: a thread that used
 * every class held 3.5 MiB of them, which its adopter must not inherit. */
static void orphan_keeps_bounded_bump_ranges(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, leave_every_class, NULL) == 0);
    pthread_join(t, NULL);
    CHECK(bumps_before_exit > (size_t)2 << 20);
    REQUIRE(pthread_create(&t, NULL, adopt_bump_ranges, NULL) == 0);
    pthread_join(t, NULL);
}

/* Adaptive caches: threads alive together share the caches' budget. Each of them cycles
 * every class through far more blocks than its cache may keep, so that without the
 * budget every limit grows to its largest (5 MiB a thread); with it, what a thread's
 * limits hold above the classes' floors must stay within its share. What the cache holds
 * is printed, not judged: a list may also hold the free blocks of one superblock that a
 * fill brought in, until its next overflow. */
enum { BUDGET_THREADS = 16, BUDGET_BLOCKS = 2048 };
static pthread_barrier_t budget_start, budget_measured;
static _Atomic long budget_corrupt;

struct budget_seen {
    uint64_t limit_bytes, limits_counted, held;
};

static void *cycle_every_class(void *out)
{
    void **blocks = T_MALLOC(BUDGET_BLOCKS * sizeof *blocks);
    REQUIRE(blocks != NULL);
    pthread_barrier_wait(&budget_start); /* every cache counts before any limit moves */
    for (int rep = 0; rep < 6; rep++)
        for (unsigned c = 0; c < SIZECLASS_COUNT; c++) {
            size_t size = sizeclass_block_size[c], n = ((size_t)256 << 10) / size;
            n = n > BUDGET_BLOCKS ? BUDGET_BLOCKS : n;
            for (size_t i = 0; i < n; i++) {
                blocks[i] = T_MALLOC(size);
                REQUIRE(blocks[i] != NULL);
                *(uintptr_t *)blocks[i] = (uintptr_t)&blocks[i];
            }
            for (size_t i = 0; i < n; i++) {
                if (*(uintptr_t *)blocks[i] != (uintptr_t)&blocks[i])
                    atomic_fetch_add(&budget_corrupt, 1);
                T_FREE(blocks[i]);
            }
        }
    T_FREE(blocks);
    struct budget_seen *seen = out;
    *seen = (struct budget_seen){.limit_bytes = tcache_self.limit_bytes};
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        const struct tcache_cold *cold = &tcache_self.cold[cls];
        uint64_t size = tcache_self.bins[cls].block_size;
        seen->held +=
            (cold->list_base - (uint32_t)tcache_self.bins[cls].credit + cold->spare_count) * size;
        if (cold->last_event != TCACHE_EVENT_NONE) /* counted: the class was filled */
            seen->limits_counted += (uint64_t)(cold->limit - TCACHE_LIMIT_FLOOR) * size;
    }
    pthread_barrier_wait(&budget_measured); /* nobody leaves before all are measured */
    return NULL;
}

static void caches_share_a_budget(void)
{
    pthread_t t[BUDGET_THREADS];
    struct budget_seen seen[BUDGET_THREADS];
    REQUIRE(pthread_barrier_init(&budget_start, NULL, BUDGET_THREADS) == 0);
    REQUIRE(pthread_barrier_init(&budget_measured, NULL, BUDGET_THREADS) == 0);
    for (int i = 0; i < BUDGET_THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, cycle_every_class, &seen[i]) == 0);
    for (int i = 0; i < BUDGET_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&budget_start);
    pthread_barrier_destroy(&budget_measured);
    CHECK(atomic_load(&budget_corrupt) == 0);
    /* At least BUDGET_THREADS caches were live, so no share was above this one. */
    uint64_t share = TCACHE_BUDGET_TOTAL / BUDGET_THREADS, limits = 0, held = 0;
    share = share > TCACHE_BUDGET_MIN ? share : TCACHE_BUDGET_MIN;
    for (int i = 0; i < BUDGET_THREADS; i++) {
        CHECK(seen[i].limit_bytes == seen[i].limits_counted);
        CHECK(seen[i].limit_bytes <= share);
        limits = seen[i].limit_bytes > limits ? seen[i].limit_bytes : limits;
        held = seen[i].held > held ? seen[i].held : held;
    }
    printf("  %d threads: largest limits above the floors %llu KiB (share %llu KiB), largest "
           "cache %llu KiB\n",
           BUDGET_THREADS, (unsigned long long)(limits >> 10), (unsigned long long)(share >> 10),
           (unsigned long long)(held >> 10));
}

/* Idle classes (tcache.c, sweep_idle_classes): a class the thread stopped using gives
 * back what it cached, spare and list, and the rest of its bump range, at the purge ticks
 * that the thread's frees of other classes take (every 65,536th free that stays in the
 * cache), where it kept those blocks, and the superblocks they lie in, for as long as the
 * thread lived. The class in use goes on with its blocks intact. */
enum { IDLE_BLOCKS = 400, IDLE_MAX = 8192, IDLE_SIZE = 256, BUSY_SIZE = 64 };

struct idle_seen {
    uint32_t held_before, held_after;
    bool range_before, range_after;
    bool intact;
};

static uint32_t cached_blocks(unsigned cls)
{
    const struct tcache_cold *cold = &tcache_self.cold[cls];
    uint32_t listed = cold->list_base - (uint32_t)tcache_self.bins[cls].credit;
    return listed + (cold->spare ? cold->spare_count : 0);
}

static bool holds_bump_range(unsigned cls)
{
    return tcache_self.bins[cls].bump != tcache_self.bins[cls].bump_end;
}

/* Allocates IDLE_BLOCKS blocks of IDLE_SIZE, and more until the class holds a bump range
 * (a fill may end one exactly, or bring none), then frees them all: the class then caches
 * freed blocks and a range the thread will not use. */
static void use_a_class_then_leave_it(struct idle_seen *seen)
{
    static void *blocks[IDLE_MAX];
    unsigned cls = sizeclass_of(IDLE_SIZE);
    int n = 0;
    while (n < IDLE_BLOCKS || (!holds_bump_range(cls) && n < IDLE_MAX)) {
        blocks[n] = T_MALLOC(IDLE_SIZE);
        REQUIRE(blocks[n] != NULL);
        memset(blocks[n], n & 0xff, IDLE_SIZE);
        n++;
    }
    seen->range_before = holds_bump_range(cls);
    for (int i = 0; i < n; i++) {
        const unsigned char *b = blocks[i];
        seen->intact &= b[0] == (i & 0xff) && b[IDLE_SIZE - 1] == (i & 0xff);
        T_FREE(blocks[i]);
    }
    seen->held_before = cached_blocks(cls);
}

static void *leave_a_class_idle(void *out)
{
    struct idle_seen *seen = out;
    seen->intact = true;
    use_a_class_then_leave_it(seen);
    /* 20 purge ticks: one clears the class's mark of its last fill or overflow, each
     * further one takes its spare and halves its list. */
    unsigned char *kept = T_MALLOC(BUSY_SIZE);
    REQUIRE(kept != NULL);
    memset(kept, 0x5c, BUSY_SIZE);
    for (long i = 0; i < 20L * 65536; i++) {
        unsigned char *p = T_MALLOC(BUSY_SIZE);
        REQUIRE(p != NULL);
        memset(p, (int)(i & 0xff), BUSY_SIZE);
        seen->intact &= p != kept && p[BUSY_SIZE - 1] == (i & 0xff);
        T_FREE(p);
    }
    for (int i = 0; i < BUSY_SIZE; i++)
        seen->intact &= kept[i] == 0x5c;
    T_FREE(kept);
    seen->held_after = cached_blocks(sizeclass_of(IDLE_SIZE));
    seen->range_after = holds_bump_range(sizeclass_of(IDLE_SIZE));
    return NULL;
}

static void idle_classes_give_their_blocks_back(void)
{
    pthread_t t;
    struct idle_seen seen;
    REQUIRE(pthread_create(&t, NULL, leave_a_class_idle, &seen) == 0);
    pthread_join(t, NULL);
    printf("  %d-byte blocks cached: %u after the frees, %u after 20 purge ticks; bump range "
           "held: %d, then %d\n",
           IDLE_SIZE, seen.held_before, seen.held_after, seen.range_before, seen.range_after);
    CHECK(seen.intact);
    CHECK(seen.held_before >= 16);
    CHECK(seen.held_after == 0);
    CHECK(seen.range_before);
    CHECK(!seen.range_after);
}

/* A thread that moves on to other classes and only allocates (a phase that builds a
 * structure of other sizes, or of calloc's blocks) takes no purge tick: the classes it
 * left give back what they cached before its fills take new superblocks
 * (TCACHE_SWEEP_NEW_BYTES), instead of keeping those blocks, and the superblocks they
 * lie in, while new pages fault in. */
enum { NEW_PHASE_SIZE = 192, NEW_PHASE_BYTES = 8 << 20 };

static void *leave_a_class_for_new_superblocks(void *out)
{
    struct idle_seen *seen = out;
    enum { KEPT = NEW_PHASE_BYTES / NEW_PHASE_SIZE };
    static unsigned char *kept[KEPT];
    seen->intact = true;
    use_a_class_then_leave_it(seen);
    for (int i = 0; i < KEPT; i++) {
        kept[i] = T_MALLOC(NEW_PHASE_SIZE);
        REQUIRE(kept[i] != NULL);
        memset(kept[i], i & 0xff, NEW_PHASE_SIZE);
    }
    seen->held_after = cached_blocks(sizeclass_of(IDLE_SIZE));
    seen->range_after = holds_bump_range(sizeclass_of(IDLE_SIZE));
    for (int i = 0; i < KEPT; i++) {
        seen->intact &= kept[i][0] == (i & 0xff) && kept[i][NEW_PHASE_SIZE - 1] == (i & 0xff);
        T_FREE(kept[i]);
    }
    return NULL;
}

static void classes_left_give_back_before_new_superblocks(void)
{
    pthread_t t;
    struct idle_seen seen;
    REQUIRE(pthread_create(&t, NULL, leave_a_class_for_new_superblocks, &seen) == 0);
    pthread_join(t, NULL);
    printf("  %d-byte blocks cached: %u after the frees, %u after %d MiB of %d-byte blocks; "
           "bump range held: %d, then %d\n",
           IDLE_SIZE, seen.held_before, seen.held_after, NEW_PHASE_BYTES >> 20, NEW_PHASE_SIZE,
           seen.range_before, seen.range_after);
    CHECK(seen.intact);
    CHECK(seen.held_before >= 16);
    CHECK(seen.held_after == 0);
    CHECK(seen.range_before);
    CHECK(!seen.range_after);
}

/* A child forked while other threads hold caches has only the forking thread: its share
 * is the whole budget again, where it would otherwise stay divided by the parent's
 * threads for the child's whole life. */
static pthread_barrier_t fork_hold;

static void *hold_a_cache(void *arg)
{
    (void)arg;
    T_FREE(T_MALLOC(64)); /* the cache is set up and counted */
    pthread_barrier_wait(&fork_hold);
    pthread_barrier_wait(&fork_hold); /* until the child was checked */
    return NULL;
}

static void forked_child_gets_the_whole_budget(void)
{
    enum { HOLDERS = 7 };
    pthread_t t[HOLDERS];
    T_FREE(T_MALLOC(64));
    REQUIRE(pthread_barrier_init(&fork_hold, NULL, HOLDERS + 1) == 0);
    for (int i = 0; i < HOLDERS; i++)
        REQUIRE(pthread_create(&t[i], NULL, hold_a_cache, NULL) == 0);
    pthread_barrier_wait(&fork_hold);
    uint64_t parent_share = tcache_budget_share();
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        void *p = T_MALLOC(64);
        bool ok = p != NULL && tcache_budget_share() == TCACHE_BUDGET_TOTAL;
        T_FREE(p);
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(parent_share <= TCACHE_BUDGET_TOTAL / (HOLDERS + 1));
    pthread_barrier_wait(&fork_hold);
    for (int i = 0; i < HOLDERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&fork_hold);
}

/* An allocation that bypasses the caches (here from a thread-exit destructor that runs
 * after lfheap's: the thread's cache was handed back) takes every free block of a
 * superblock whose uncarved tail another thread's cache holds, and must leave that tail
 * and its carve frontier alone. It gave its fill's bump pointer back, the superblock's
 * end, which moved the frontier past blocks never carved: they passed for live blocks;
 * and had the holder given its tail back meanwhile, the anchor would have lost it. */
enum { RANGE_BLOCK = 5000 };  /* a class that no earlier test of this program uses */
static char *range_blocks[3]; /* the holder's first blocks, carved one after the other */
static pthread_barrier_t range_hold;
static pthread_key_t range_key;
static void *range_taken; /* what the uncached malloc returned */

static void *hold_bump_range(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        range_blocks[i] = T_MALLOC(RANGE_BLOCK);
    pthread_barrier_wait(&range_hold); /* the bump range is held */
    pthread_barrier_wait(&range_hold); /* until the uncached malloc was checked */
    size_t size = pagemap_desc_or_foreign(range_blocks[0])->block_size;
    char *next = T_MALLOC(RANGE_BLOCK);
    CHECK(next == range_blocks[2] + size); /* carved from the range it kept */
    T_FREE(next);
    for (int i = 1; i < 3; i++)
        T_FREE(range_blocks[i]);
    return NULL;
}

static void free_and_malloc_uncached(void *value)
{
    (void)value;
    CHECK(tcache_uncached()); /* lfheap's exit handler ran first */
    T_FREE(range_blocks[0]);  /* its superblock goes on a partial stack */
    range_taken = T_MALLOC(RANGE_BLOCK);
}

static void *exit_through_late_key(void *arg)
{
    (void)arg;
    T_FREE(T_MALLOC(16)); /* the cache is set up, so its exit comes before the key's */
    REQUIRE(pthread_setspecific(range_key, &range_key) == 0);
    return NULL;
}

static void uncached_fill_leaves_held_range(void)
{
    REQUIRE(pthread_key_create(&range_key, free_and_malloc_uncached) == 0);
    REQUIRE(pthread_barrier_init(&range_hold, NULL, 2) == 0);
    pthread_t holder, leaver;
    REQUIRE(pthread_create(&holder, NULL, hold_bump_range, NULL) == 0);
    pthread_barrier_wait(&range_hold);
    struct descriptor *desc = pagemap_desc_or_foreign(range_blocks[0]);
    char *uncarved = range_blocks[2] + desc->block_size;
    /* The three blocks came from a fresh superblock's bump range, which goes on. */
    REQUIRE(range_blocks[1] == range_blocks[0] + desc->block_size &&
            range_blocks[2] == range_blocks[1] + desc->block_size &&
            uncarved + desc->block_size <=
                desc->start + (size_t)desc->max_count * desc->block_size);
    CHECK(!heap_is_carved_block(desc, uncarved));
    REQUIRE(pthread_create(&leaver, NULL, exit_through_late_key, NULL) == 0);
    pthread_join(leaver, NULL);
    CHECK(range_taken == range_blocks[0]); /* it took that superblock's free block */
    CHECK(!heap_is_carved_block(desc, uncarved));
    CHECK(lfh_malloc_usable_size(uncarved) == 0);
    T_FREE(range_taken);
    pthread_barrier_wait(&range_hold);
    pthread_join(holder, NULL);
    pthread_barrier_destroy(&range_hold);
    pthread_key_delete(range_key);
}
#endif

/* Resident KiB of the anonymous mapping that follows the shared object holding `malloc`
 * (its zero-initialised data, .bss), -1 if `malloc` is no shared lfheap's, -2 if it is
 * but that mapping was not found. smaps names files by their canonical path, and a
 * preload may name lfheap through a symbolic link or a relative path. */
static long lfheap_bss_resident_kib(void)
{
    Dl_info info;
    char object[PATH_MAX];
    if (!dladdr((void *)malloc, &info) || !info.dli_fname || !strstr(info.dli_fname, "liblfheap"))
        return -1;
    if (!realpath(info.dli_fname, object))
        return -2;
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -2;
    char line[PATH_MAX + 128], path[PATH_MAX];
    unsigned long lo, hi, object_end = 0;
    bool in_bss = false;
    long rss = -2;
    while (fgets(line, sizeof line, f)) {
        path[0] = '\0';
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095s", &lo, &hi, path) >= 2) {
            in_bss = path[0] == '\0' && object_end && lo == object_end;
            object_end = strcmp(path, object) == 0 ? hi : 0;
        } else if (in_bss && sscanf(line, "Rss: %ld kB", &rss) == 1) {
            break;
        }
    }
    fclose(f);
    return rss;
}

static void *one_block_thread(void *arg)
{
    (void)arg;
    free(malloc(40));
    return NULL;
}

/* The child's part of static_storage_stays_untouched: one block, one thread, then the
 * count on stdout. */
static int report_static_storage(void)
{
    free(malloc(24));
    pthread_t t;
    if (pthread_create(&t, NULL, one_block_thread, NULL) == 0)
        pthread_join(t, NULL);
    printf("%ld\n", lfheap_bss_resident_kib());
    return 0;
}

/* lfheap's static storage is 9 MiB of zeros (the default page-map leaf, the registry, the
 * orphan slots...), resident only where it is touched. A kernel may give a read of an
 * untouched page a page of its own (this project's test machines' does): the 16 orphan
 * states, spread among the slots' caches, once made every process resident in 16 pages
 * of it, read by the setup of its first thread. A fresh process that made one block and
 * ran one thread holds 11 pages of it (release build; 26 before); this allows 20. Only
 * with a shared lfheap serving malloc. */
static void static_storage_stays_untouched(void)
{
    int out[2];
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, out[0]);
    /* The program's own path: under valgrind, /proc/self/exe is valgrind's tool, and
     * readlink gives the program's. */
    char self[4096];
    ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);
    REQUIRE(length > 0);
    self[length] = '\0';
    char *argv[] = {self, "--static-storage", NULL};
    extern char **environ;
    pid_t pid;
    REQUIRE(posix_spawn(&pid, self, &actions, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    char text[32] = "";
    ssize_t got = read(out[0], text, sizeof text - 1);
    close(out[0]);
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(got > 0);
    long kib = atol(text);
    CHECK(kib != -2);
    if (kib == -1) {
        fprintf(stderr, "  malloc is no shared lfheap's: nothing to measure\n");
        return;
    }
    fprintf(stderr, "  lfheap's static storage: %ld KiB resident\n", kib);
    CHECK(kib <= 20 * 4);
}

#ifndef TEST_PLAIN
/* Two barriers: the count is taken between them, while every holder still waits on the
 * second. With one, the holders it lets go may exit, and purge their slabs, before the
 * main thread counts (18 slabs of 50 counted, one run in six). */
static pthread_barrier_t stores_held, stores_counted;

static void *store_holder(void *arg)
{
    (void)arg;
    void *block = T_MALLOC(48);
    REQUIRE(block);
    CHECK(tcache_self.cold != NULL); /* the setup took a store */
    pthread_barrier_wait(&stores_held);
    pthread_barrier_wait(&stores_counted);
    T_FREE(block);
    return NULL;
}

/* The stores of the caches' cold parts (src/tcache_store.c) go back to the kernel when all
 * of a slab's caches have exited: 1,600 threads alive at once fill 50 slabs of 32 stores;
 * once they exit, only the slabs that hold a store still in use keep pages resident, at
 * most one per orphan slot and the main thread's. Without the slabs' purge, every slab
 * stayed resident (11.6 MiB after 4,000 threads). */
static void stores_of_exited_threads_go_back(void)
{
    enum { HOLDERS = 1600 };
    static pthread_t threads[HOLDERS];
    pthread_attr_t attr;
    REQUIRE(pthread_attr_init(&attr) == 0);
    REQUIRE(pthread_attr_setstacksize(&attr, 64 << 10) == 0);
    REQUIRE(pthread_barrier_init(&stores_held, NULL, HOLDERS + 1) == 0);
    REQUIRE(pthread_barrier_init(&stores_counted, NULL, HOLDERS + 1) == 0);
    for (int i = 0; i < HOLDERS; i++)
        REQUIRE(pthread_create(&threads[i], &attr, store_holder, NULL) == 0);
    pthread_barrier_wait(&stores_held);
    size_t resident_held = tcache_store_resident_slabs();
    pthread_barrier_wait(&stores_counted);
    for (int i = 0; i < HOLDERS; i++)
        pthread_join(threads[i], NULL);
    pthread_barrier_destroy(&stores_held);
    pthread_barrier_destroy(&stores_counted);
    pthread_attr_destroy(&attr);
    size_t resident = tcache_store_resident_slabs();
    printf("# slabs of stores resident: %zu while the threads lived, %zu after\n", resident_held,
           resident);
    /* Some threads adopt orphans, whose stores lie in earlier slabs. */
    CHECK(resident_held >= HOLDERS / 64);
    CHECK(resident <= tcache_orphan_slots(0) + 1);
}
#endif

/* Frames a thread of PTHREAD_STACK_MIN bytes uses before it allocates, in
 * small_stack_threads_allocate. glibc places a thread's static thread-local storage at the
 * top of its stack, so lfheap's part of it comes out of this room: with 7.9 KB there (the
 * cold parts and the hidden save in TLS), such a thread crashed from 768 bytes of frames on
 * (lazy binding's resolver, which saves the vector registers on the stack) and from 3 KiB
 * with every symbol bound at load; with 3.6 KB, from 5 and 7.25 KiB. */
static size_t small_stack_frames = 3072;

/* Every kind of block from the deepest frame: small, medium and large, calloc'd and grown
 * by realloc, each written and checked. */
static __attribute__((noinline)) bool allocate_everything(void)
{
    static const size_t sizes[] = {16, 100, 1000, 5000, 70000, 1 << 20, 8 << 20, 40};
    enum { COUNT = sizeof sizes / sizeof sizes[0] };
    unsigned char *blocks[COUNT];
    bool ok = true;
    for (unsigned i = 0; i < COUNT; i++) {
        blocks[i] = T_MALLOC(sizes[i]);
        if (!blocks[i])
            return false;
        memset(blocks[i], (int)i + 1, sizes[i]);
    }
    unsigned char *zeros = T_CALLOC(1, 3 << 20);
    ok &= zeros && zeros[0] == 0 && zeros[(3 << 20) - 1] == 0;
    blocks[0] = T_REALLOC(blocks[0], 300000);
    ok &= blocks[0] && blocks[0][15] == 1;
    for (unsigned i = 0; i < COUNT; i++) {
        ok &= blocks[i] && blocks[i][sizes[i] - 1] == (i == 0 ? 1 : (unsigned char)(i + 1));
        T_FREE(blocks[i]);
    }
    T_FREE(zeros);
    return ok;
}

static void *small_stack_thread(void *unused)
{
    (void)unused;
    volatile char *frames = alloca(small_stack_frames);
    memset((char *)frames, 0x5a, small_stack_frames);
    bool ok = allocate_everything() && frames[small_stack_frames - 1] == 0x5a;
    return ok ? (void *)1 : NULL;
}

/* A thread made with the smallest stack POSIX allows still has room for its own frames and
 * lfheap's deepest paths (docs/GUARANTEES.md, *Stack*). Run in a child, as an overflow kills
 * the process. `--small-stack BYTES` runs it alone with BYTES of frames (the room
 * GUARANTEES.md gives was found so). */
static void small_stack_threads_allocate(void)
{
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN);
        pthread_t t;
        void *result = NULL;
        if (pthread_create(&t, &attr, small_stack_thread, NULL) != 0)
            _exit(3);
        pthread_join(t, &result);
        _exit(result ? 0 : 4);
    }
    int status;
    REQUIRE(waitpid(child, &status, 0) == child);
    if (!WIFEXITED(status))
        printf("# the child died of signal %d\n", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--static-storage") == 0)
        return report_static_storage();
    if (argc > 2 && strcmp(argv[1], "--small-stack") == 0) {
        small_stack_frames = (size_t)atol(argv[2]);
        RUN(small_stack_threads_allocate);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "--late-round") == 0) {
        RUN(first_allocation_in_a_later_destructor_round);
        return test_exit_status();
    }
    if (argc > 1) {
        churn_threads = atoi(argv[1]);
        if (churn_threads < 1000) {
            concurrent_rounds = 6;
            concurrent_threads = 50;
            concurrent_rss_from_start = false;
        }
    }
#ifndef TEST_PLAIN
    RUN(uncached_fill_leaves_held_range);
    RUN(exited_cache_is_adopted);
    RUN(first_free_after_adoption_stays_cached);
    RUN(orphan_keeps_bounded_bump_ranges);
    RUN(caches_share_a_budget);
    RUN(forked_child_gets_the_whole_budget);
    RUN(idle_classes_give_their_blocks_back);
    RUN(classes_left_give_back_before_new_superblocks);
    RUN(stores_of_exited_threads_go_back);
#endif
    RUN(thread_churn_keeps_rss_flat);
    RUN(first_allocation_inside_pthread_setspecific);
    RUN(first_allocation_before_pthread_setspecific);
    RUN(first_allocation_in_a_later_destructor_round);
    RUN(concurrent_thread_churn_keeps_rss_flat);
    RUN(fork_from_busy_process);
    RUN(child_forked_after_the_hand_back_gets_a_cache);
    RUN(static_storage_stays_untouched);
    RUN(small_stack_threads_allocate);
    return test_exit_status();
}
