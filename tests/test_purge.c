/*
 * Memory goes back (docs/DESIGN.md, property 5): after a program frees what it allocated, the
 * resident size falls back to within 32 MiB of where it started while the program goes
 * on allocating (the allocator purges from its slow paths once the purge delay ran out),
 * and a churn of allocations in between reuses freed chunks instead of growing.
 *
 * `test_purge exit` (run with a purge delay of a minute, so that the delay cannot be what
 * gives the memory back): when worker threads exit and the process then holds more freed
 * memory than live memory, the exit gives it back at once, and the resident size right
 * after the joins is back near the start. `test_purge exitlarge` (the same delay): also
 * when the thread took only large blocks. Each runs in a process of its own: an exit
 * purge followed by fresh runs within its window is regretted, and keeps the next exit
 * from purging (arena.c, *early purges keep score*).
 *
 * `test_purge shift` (run with a purge delay of 3.2 s, whose 1/16 is 200 ms): a program
 * frees 24 MiB of blocks of one size and then allocates 24 MiB of a size the freed runs
 * cannot serve, with room left in its arena so that nothing else purges; the freed runs
 * that waited 200 ms go back before the new blocks fault their pages in, so the
 * resident size does not hold both (arena.c, purge_if_pressed).
 *
 * `test_purge superblocks` (run with a purge delay of 3.2 s too): the pressure purge
 * gives back freed superblocks' chunks, and then the program takes fresh large runs of
 * the same sizes. That purge was not regretted, since the superblocks' pages were small
 * blocks' pages, so a later shift of large-block sizes is still purged under pressure
 * (arena.c, free_stamp). Scoring the superblocks' purge left sqlite3 at 57 MiB instead
 * of 45 MiB.
 *
 * `test_purge buffer` (run with a purge delay of a minute, whose 1/16 is 3.75 s, and
 * whose slow-path purges come at most every 30 s, so that none of them can take the
 * pressure purge's turn however slow the machine): a program holds 16 MiB of 8 KiB
 * blocks, frees a 4 MiB buffer it wrote, waits 3.9 s and goes on with 12 MiB more of
 * 8 KiB blocks, as dpkg does with the buffer it read its file list into. The freed run
 * is a fifth of what lfheap holds, below the quarter that made a fresh chunk merge it
 * until 2026-12-07, so the new superblocks faulted in fresh pages while the buffer's
 * stayed resident for the whole delay (dpkg -S: 37 MiB of peak resident size against
 * glibc's 31). Now the run goes back to its buddy still resident (arena.c,
 * purge_if_pressed) and the new superblocks take its pages: new blocks fill at least
 * half of what the buffer's range can hold, and the resident size grows by less than
 * the new blocks' 12 MiB.
 *
 * `test_purge superruns` (run with a purge delay of a minute, so that nothing is purged
 * meanwhile): with more than 16 MiB of large blocks' runs freed and waiting, new
 * superblocks take those runs (their pages still resident) rather than fresh chunks, and
 * the small blocks carved from them are whole and distinct (arena.c, arena_alloc).
 *
 * `test_purge keeps` (run with LFHEAP_PURGE_MS set to what is no number of milliseconds:
 * empty, a word, a negative number, a number with a unit): the setting is ignored and the
 * default delay of 250 ms holds, so a freed 8 MiB block is still resident right after its
 * free and the next slow path; such settings were once read as 0, and the block went
 * back at that slow path.
 *
 * `test_purge rebuild` (run with a purge delay of 1 s): a pool of two threads, each of
 * which allocates 16 MiB of 256 KiB blocks, writes them and frees them before it exits,
 * started and joined three times. The first pool's exits give its memory back (nothing
 * says that another pool follows); the second pool faults it all in again, so its exits
 * keep the memory for the third pool, which reuses it rather than growing; and the
 * delay still returns it: one call after the delay and the resident size is back near
 * the start (arena.c, exit_purge_regretted).
 *
 * `test_purge phases` (run with a purge delay of a minute, so that only the need for
 * room merges): a program fills three arenas' worth with blocks of 248 KiB, frees them,
 * and then asks for as much in blocks of 1016 KiB from `calloc`. The freed runs outweigh
 * those in use and are smaller than the new blocks, so they go back to their buddies
 * still resident (arena.c, merged runs) before any clean room is taken, and the 1 MiB
 * blocks take them: they fault in less than half of their pages, where they faulted in
 * every page when the runs were decommitted first. The clean room came first until
 * 2026-12-05, and the test passed only where the 248 KiB blocks filled their arenas
 * exactly: on a machine where one of them went to a fourth arena, the 1 MiB blocks took
 * that arena's clean room and faulted in 33,575 of their 48,768 pages. Every byte they hold
 * must still be 0, though most of their pages held the 256 KiB blocks' bytes; and
 * malloc_trim gives the pages nobody took back.
 *
 * `test_purge regrow` (run with a purge delay of 0): a 1 MiB buffer grown by copying (a
 * block a little bigger taken, the old one copied and freed), with a pause of a
 * millisecond between steps, so that each step's slow path finds the last step's freed
 * run due. After the first steps, whose freed runs went back and came right back, the
 * short delay's purge waits its floor (arena.c, SHORT_DELAY_FLOOR_MS) and each step
 * reuses the run the last one freed: the steps fault in less than a quarter of what they
 * faulted in when every freed run went back (256 pages each). Only the steps that came
 * within 16 ms of the last free are judged: on a loaded machine a step may come later
 * than the floor, and then its run has rightly gone back. And the run freed last,
 * which nobody asks for again, still goes back. *
 * `test_purge huge` (run with a purge delay of a minute): a block larger than an arena
 * (its own mapping) is kept after its free and handed out again, same address, to the
 * next request it holds (src/mapcache.h): a block of the same size, a smaller one of at
 * least half its size (whose tail is unmapped), a bigger one of at most twice its size
 * (the mapping grown), not one more than twice smaller or bigger; calloc from a kept
 * mapping reads as zeros; a write-only loop over such blocks
 * keeps faulting nothing in; and malloc_trim unmaps what is kept. `test_purge hugedelay`
 * (a delay of 200 ms): a kept mapping goes back once it has waited the delay, at the next
 * huge block's free, and the resident size falls back.
 */
#include "alloc_names.h"
#include "testutil.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

enum { BLOCKS = 40000 };
/* How long the resident size may take to fall back: a hundred times the purge delay. */
#define PURGE_WAIT_SECONDS 25.0
static void *blocks[BLOCKS];

/* The next number of a test's generator (a 64-bit LCG; the high bits are the good ones). */
static uint64_t next_random(uint64_t *rng)
{
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    return *rng >> 33;
}

/* Allocates `count` blocks, one in `large_every` of `large_min` bytes and up to
 * `large_span` more, the others 16 bytes and up to `small_span` more, writes every byte,
 * checks that the resident size grew by at least half of it, frees them all, and
 * returns the resident size at its peak. */
static long burst_then_free(void **into, int count, uint64_t seed, int large_every,
                            size_t large_min, size_t large_span, size_t small_span)
{
    long start = test_rss_kib();
    size_t total = 0;
    for (int i = 0; i < count; i++) {
        uint64_t r = next_random(&seed);
        size_t size = i % large_every == 0 ? large_min + r % large_span : 16 + r % small_span;
        into[i] = T_MALLOC(size);
        REQUIRE(into[i]);
        memset(into[i], 0x77, size);
        total += size;
    }
    long peak = test_rss_kib();
    CHECK(peak - start > (long)(total / 1024) / 2); /* the memory really was resident */
    for (int i = 0; i < count; i++)
        T_FREE(into[i]);
    return peak;
}

/* Makes a large block's slow path a millisecond apart, as a running program would, until
 * the resident size is at most `at_most_kib` or PURGE_WAIT_SECONDS passed since
 * `freed_at`; returns the resident size. The purges may run late on a loaded machine: the
 * bound only fails a heap that never gives the memory back. */
static long rss_after_slow_paths(long at_most_kib, double freed_at)
{
    long rss = test_rss_kib();
    while (rss > at_most_kib && seconds() - freed_at < PURGE_WAIT_SECONDS) {
        void *p = T_MALLOC(200000);
        REQUIRE(p);
        memset(p, 1, 4096);
        T_FREE(p);
        usleep(1000);
        rss = test_rss_kib();
    }
    return rss;
}

static void rss_falls_back_after_free(void)
{
    long start = test_rss_kib();
    long peak = burst_then_free(blocks, BLOCKS, 12345, 200, 100000, 4u << 20, 8000);
    /* Keep allocating until the resident size is back (the delay is a quarter second). */
    double freed_at = seconds();
    long end = rss_after_slow_paths(start + 32 * 1024 - 1, freed_at);
    CHECK(end - start < 32 * 1024);
    printf("# rss: start %ld KiB, peak %ld KiB, %ld KiB %.2f s after the frees\n", start, peak, end,
           seconds() - freed_at);
}

/* The same, but the program goes on with a small working set that its thread cache holds
 * whole, so that no call leaves the fast paths (a server after a burst of work): free's
 * fast path takes the arenas' purge tick every 65,536 frees, and the memory still goes
 * back. */
enum { BURST = 200000 };
static void *burst[BURST];

static void rss_falls_back_on_the_fast_paths(void)
{
    long start = test_rss_kib();
    long peak = burst_then_free(burst, BURST, 99, 64, 8192, 57344, 497);
    uint64_t rng = 7;
    void *live[64] = {0};
    double freed_at = seconds();
    long end = test_rss_kib();
    long rounds = 0;
    while (end - start >= 32 * 1024 && seconds() - freed_at < PURGE_WAIT_SECONDS) {
        for (int k = 0; k < 100000; k++) {
            uint64_t r = next_random(&rng);
            unsigned slot = (unsigned)(r & 63);
            T_FREE(live[slot]);
            live[slot] = T_MALLOC(16 + (r >> 6) % 113);
            REQUIRE(live[slot]);
            *(char *)live[slot] = 1;
        }
        rounds++;
        end = test_rss_kib();
    }
    for (int i = 0; i < 64; i++)
        T_FREE(live[i]);
    CHECK(end - start < 32 * 1024);
    printf("# rss: start %ld KiB, peak %ld KiB, %ld KiB after %ld rounds of 100,000 frees and "
           "mallocs (%.2f s)\n",
           start, peak, end, rounds, seconds() - freed_at);
}

static void churn_reuses_chunks(void)
{
    /* the same large sizes over and over: the dirty chunks are reused, RSS stays put */
    long before = 0;
    for (int round = 0; round < 50; round++) {
        void *held[16];
        for (int i = 0; i < 16; i++) {
            held[i] = T_MALLOC((size_t)(i + 1) << 18);
            REQUIRE(held[i]);
            memset(held[i], round, (size_t)(i + 1) << 18);
        }
        for (int i = 0; i < 16; i++)
            T_FREE(held[i]);
        if (round == 5)
            before = test_rss_kib();
    }
    CHECK(test_rss_kib() - before < 16 * 1024);
}

/* The memory benchmark's pattern: a producer allocates (sizes 50-500 B), a consumer frees
 * every block (each a remote free: the producer owns the superblocks), both exit. */
enum { HANDED = 300000 };
static void *handed[HANDED];

static size_t handed_size(size_t i)
{
    return 50 + i * 7919 % 10 * 50;
}

static void *producer(void *arg)
{
    (void)arg;
    for (int i = 0; i < HANDED; i++) {
        size_t size = handed_size((size_t)i);
        handed[i] = T_MALLOC(size);
        REQUIRE(handed[i]);
        memset(handed[i], (unsigned char)i, size);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (int i = 0; i < HANDED; i++) {
        size_t size = handed_size((size_t)i);
        const unsigned char *bytes = handed[i];
        /* The contents survived the hand-over: first and last byte of every block. */
        REQUIRE(bytes[0] == (unsigned char)i && bytes[size - 1] == (unsigned char)i);
        T_FREE(handed[i]);
    }
    return NULL;
}

static void rss_falls_back_when_the_workers_exit(void)
{
    long start = test_rss_kib();
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, producer, NULL) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    long peak = test_rss_kib();
    /* 300,000 blocks of 275 B on average: about 80 MiB. */
    CHECK(peak - start > 64 * 1024);
    REQUIRE(pthread_create(&thread, NULL, consumer, NULL) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    long end = test_rss_kib();
    printf("# rss: start %ld KiB, after the producer %ld KiB, after the consumer %ld KiB\n", start,
           peak, end);
    CHECK(end - start < 16 * 1024);
}

/* A thread that takes only large blocks: 64 MiB of 1 MiB blocks, each page written, all
 * freed before it exits. Its exit gives them back as any other thread's does: before,
 * such a thread set up no cache, whose exit is where that purge runs, and the 64 MiB
 * stayed resident. */
enum { LARGE_ONLY = 64, LARGE_ONLY_SIZE = 1 << 20 };

static void *large_only(void *arg)
{
    (void)arg;
    char *blocks[LARGE_ONLY];
    for (int i = 0; i < LARGE_ONLY; i++) {
        blocks[i] = T_MALLOC(LARGE_ONLY_SIZE);
        REQUIRE(blocks[i]);
        for (size_t at = 0; at < LARGE_ONLY_SIZE; at += 4096)
            blocks[i][at] = (char)i;
    }
    for (int i = 0; i < LARGE_ONLY; i++) {
        CHECK(blocks[i][LARGE_ONLY_SIZE - 4096] == (char)i);
        T_FREE(blocks[i]);
    }
    return NULL;
}

static void rss_falls_back_when_a_large_only_thread_exits(void)
{
    long start = test_rss_kib();
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, large_only, NULL) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    long end = test_rss_kib();
    printf("# rss: start %ld KiB, after the large-only thread %ld KiB\n", start, end);
    CHECK(end - start < 16 * 1024);
}

enum { SHIFT_SMALL = 256 << 10, SHIFT_LARGE = 4 << 20, SHIFT_BYTES = 24 << 20 };
static void *shift_blocks[SHIFT_BYTES / SHIFT_SMALL];

static void rss_stays_flat_when_sizes_shift(void)
{
    long start = test_rss_kib();
    size_t small = SHIFT_BYTES / SHIFT_SMALL, large = SHIFT_BYTES / SHIFT_LARGE;
    for (size_t i = 0; i < small; i++) {
        shift_blocks[i] = malloc(SHIFT_SMALL);
        REQUIRE(shift_blocks[i]);
        memset(shift_blocks[i], (int)i, SHIFT_SMALL);
    }
    long peak = test_rss_kib();
    CHECK(peak - start > 22 * 1024);
    for (size_t i = 0; i < small; i++)
        free(shift_blocks[i]);
    /* The freed runs wait a sixteenth of the delay: 200 ms. */
    usleep(250 * 1000);
    for (size_t i = 0; i < large; i++) {
        shift_blocks[i] = malloc(SHIFT_LARGE);
        REQUIRE(shift_blocks[i]);
        memset(shift_blocks[i], (int)i, SHIFT_LARGE);
    }
    long end = test_rss_kib();
    printf("# rss: start %ld KiB, 24 MiB of 256 KiB blocks %ld KiB, freed and replaced by "
           "24 MiB of 4 MiB blocks %ld KiB\n",
           start, peak, end);
    /* Both sets resident would be 48 MiB above the start. */
    CHECK(end - start < 36 * 1024);
    for (size_t i = 0; i < large; i++) {
        unsigned char *b = shift_blocks[i];
        CHECK(b[0] == (unsigned char)i && b[SHIFT_LARGE - 1] == (unsigned char)i);
        free(b);
    }
}

enum { SHIFT_RUN = 40 << 20, SHIFT_HUGE = 80 << 20 };

/* Two 40 MiB blocks (arena runs) freed, then an 80 MiB block, which no arena run can
 * serve: it maps fresh pages, and the freed runs must not stay resident beside them. */
static void rss_stays_flat_when_a_huge_block_follows_freed_runs(void)
{
    long start = test_rss_kib();
    unsigned char *runs[2];
    for (int i = 0; i < 2; i++) {
        runs[i] = malloc(SHIFT_RUN);
        REQUIRE(runs[i]);
        memset(runs[i], i + 1, SHIFT_RUN);
    }
    long peak = test_rss_kib();
    CHECK(peak - start > 72 * 1024);
    for (int i = 0; i < 2; i++)
        free(runs[i]);
    unsigned char *huge = malloc(SHIFT_HUGE);
    REQUIRE(huge);
    memset(huge, 7, SHIFT_HUGE);
    long end = test_rss_kib();
    printf("# rss: start %ld KiB, two 40 MiB blocks %ld KiB, freed and followed by an 80 MiB "
           "block %ld KiB\n",
           start, peak, end);
    /* The freed runs and the huge block resident together would be 160 MiB above the start. */
    CHECK(end - start < 100 * 1024);
    CHECK(huge[0] == 7 && huge[SHIFT_HUGE - 1] == 7);
    free(huge);
}

/* Two 80 MiB blocks freed: one is kept for the next such block, the other unmapped at
 * once (ImageMagick freed three images of 79 MB and went on writing a fourth: a peak of
 * 402 MB with every one kept, against glibc's 319). The kept one waits out the pressure's
 * share of the delay (200 ms) and is then unmapped before fresh runs fault in pages
 * beside it. */
static void kept_huge_blocks_yield_to_fresh_runs(void)
{
    long start = test_rss_kib();
    unsigned char *huge[2];
    for (int i = 0; i < 2; i++) {
        huge[i] = malloc(SHIFT_HUGE);
        REQUIRE(huge[i]);
        memset(huge[i], i + 1, SHIFT_HUGE);
    }
    for (int i = 0; i < 2; i++)
        free(huge[i]);
    long freed = test_rss_kib();
    usleep(250 * 1000);
    unsigned char *runs[2];
    for (int i = 0; i < 2; i++) {
        runs[i] = malloc(SHIFT_RUN / 2);
        REQUIRE(runs[i]);
        memset(runs[i], i + 3, SHIFT_RUN / 2);
    }
    long end = test_rss_kib();
    printf("# rss: start %ld KiB, two 80 MiB blocks freed %ld KiB, then 40 MiB of fresh runs "
           "%ld KiB\n",
           start, freed, end);
    /* Both kept would be 160 MiB above the start, one 80. */
    CHECK(freed - start < 100 * 1024);
    /* The kept one beside the runs would be 120 MiB above the start. */
    CHECK(end - start < 60 * 1024);
    for (int i = 0; i < 2; i++) {
        CHECK(runs[i][0] == i + 3 && runs[i][SHIFT_RUN / 2 - 1] == i + 3);
        free(runs[i]);
    }
}

/* The release of kept_huge_blocks_yield_to_fresh_runs keeps score: when the next huge
 * block maps fresh pages again (the program did want its kept mapping), a fresh run
 * within the score's window (8 delays) leaves the next kept mapping alone, and the huge
 * block after it reuses it, with its last tenant's bytes. */
static void kept_release_is_regretted(void)
{
    unsigned char *runs[2];
    unsigned char *huge = malloc(SHIFT_HUGE);
    REQUIRE(huge);
    memset(huge, 1, SHIFT_HUGE);
    free(huge);
    usleep(250 * 1000);
    runs[0] = malloc(SHIFT_RUN / 2); /* a fresh run: the kept mapping goes back */
    REQUIRE(runs[0]);
    huge = malloc(SHIFT_HUGE);
    REQUIRE(huge);
    CHECK(huge[0] == 0 && huge[SHIFT_HUGE - 1] == 0); /* fresh pages: a refault */
    memset(huge, 2, SHIFT_HUGE);
    free(huge);
    usleep(250 * 1000);
    runs[1] = malloc(SHIFT_RUN / 2 + (4 << 20)); /* another fresh run: regretted, kept */
    REQUIRE(runs[1]);
    huge = malloc(SHIFT_HUGE);
    REQUIRE(huge);
    CHECK(huge[0] == 2 && huge[SHIFT_HUGE - 1] == 2);
    free(huge);
    free(runs[0]);
    free(runs[1]);
}

enum {
    SB_SMALL = 4 << 10,   /* blocks in 64 KiB superblocks */
    SB_RUN = 40 << 10,    /* large blocks whose reuse range covers 64 KiB chunks */
    SB_SHIFTED = 1 << 20, /* large blocks whose reuse range does not */
    SB_BYTES = 16 << 20
};
static void *sb_blocks[SB_BYTES / SB_SMALL];

/* Allocates SB_BYTES in blocks of `size`, each filled with its index + `seed`. */
static void sb_fill(size_t size, unsigned seed)
{
    for (size_t i = 0; i < SB_BYTES / size; i++) {
        sb_blocks[i] = malloc(size);
        REQUIRE(sb_blocks[i]);
        memset(sb_blocks[i], (int)(i + seed), size);
    }
}

static void sb_check_and_free(size_t size, unsigned seed)
{
    for (size_t i = 0; i < SB_BYTES / size; i++) {
        const unsigned char *b = sb_blocks[i];
        CHECK(b[0] == (unsigned char)(i + seed) && b[size - 1] == (unsigned char)(i + seed));
        free(sb_blocks[i]);
    }
}

static void superblock_purge_is_not_regretted(void)
{
    sb_fill(SB_SMALL, 1);
    sb_check_and_free(SB_SMALL, 1);
    /* The freed superblocks' chunks wait a sixteenth of the delay; then a fresh run for a
     * block too big to reuse them purges them under pressure. */
    usleep(250 * 1000);
    unsigned char *trigger = malloc(4 << 20);
    REQUIRE(trigger);
    memset(trigger, 7, 4 << 20);
    long base = test_rss_kib();
    /* Fresh runs whose sizes the purged chunks would have served: 16 MiB, all that went. */
    sb_fill(SB_RUN, 2);
    sb_check_and_free(SB_RUN, 2);
    long before = test_rss_kib();
    usleep(250 * 1000);
    /* A shift to sizes the freed runs cannot serve: they go back first. */
    sb_fill(SB_SHIFTED, 3);
    long after = test_rss_kib();
    printf("# rss: trigger held %ld KiB, 16 MiB of 40 KiB blocks freed %ld KiB, 16 MiB of 1 MiB "
           "blocks then %ld KiB\n",
           base, before, after);
    /* The 1 MiB blocks alone are 16 MiB above `base`; with the freed 40 KiB runs still
     * resident beside them, 32 (the score of the superblocks' purge kept the freed runs:
     * 32.1 MiB above). Measured from `base`, not from `before`: a process the machine
     * stalled for longer than the delay while it freed the runs has had its first freed
     * runs purged before `before` (12.0 MiB instead of 22.0 on a machine at a load
     * average of 80, and the check against `before` failed), which can only lower
     * `after`. */
    CHECK(after - base < 24 * 1024);
    sb_check_and_free(SB_SHIFTED, 3);
    CHECK(trigger[0] == 7 && trigger[(4 << 20) - 1] == 7);
    free(trigger);
}

enum { POOL_THREADS = 2, POOL_BLOCK = 256 << 10, POOL_BYTES = 16 << 20 };
/* The workers of a pool all hold their blocks at once, and all have freed them before
 * the first one exits, whatever the scheduler makes of them. On a busy machine it may
 * otherwise run one to its exit before the next starts, and then the first one's exit
 * purge is regretted when the second faults the same sizes in again, which leaves the
 * second one's runs to the delay (`first` 16 MiB above `start`, seen once); or one exits
 * while the other is still freeing, and what the other frees after that purge, if less
 * than the 8 MiB an exit purge needs, waits for the delay too. */
static pthread_barrier_t pool_all_allocated, pool_all_freed;

static void pool_wait(pthread_barrier_t *barrier)
{
    int waited = pthread_barrier_wait(barrier);
    REQUIRE(waited == 0 || waited == PTHREAD_BARRIER_SERIAL_THREAD);
}

static void *pool_worker(void *arg)
{
    unsigned char seed = (unsigned char)(uintptr_t)arg;
    static __thread void *mine[POOL_BYTES / POOL_BLOCK];
    /* A small block too, as any worker has: it sets up the thread's cache, whose hand-back
     * at exit is where the exit purge runs. */
    void *small = T_MALLOC(64);
    REQUIRE(small);
    T_FREE(small);
    for (size_t i = 0; i < POOL_BYTES / POOL_BLOCK; i++) {
        mine[i] = T_MALLOC(POOL_BLOCK);
        REQUIRE(mine[i]);
        memset(mine[i], (unsigned char)(seed + i), POOL_BLOCK);
    }
    pool_wait(&pool_all_allocated);
    for (size_t i = 0; i < POOL_BYTES / POOL_BLOCK; i++) {
        const unsigned char *b = mine[i];
        CHECK(b[0] == (unsigned char)(seed + i) && b[POOL_BLOCK - 1] == (unsigned char)(seed + i));
        T_FREE(mine[i]);
    }
    pool_wait(&pool_all_freed);
    return NULL;
}

static long run_pool(unsigned round)
{
    pthread_t threads[POOL_THREADS];
    REQUIRE(pthread_barrier_init(&pool_all_allocated, NULL, POOL_THREADS) == 0);
    REQUIRE(pthread_barrier_init(&pool_all_freed, NULL, POOL_THREADS) == 0);
    for (unsigned i = 0; i < POOL_THREADS; i++)
        REQUIRE(pthread_create(&threads[i], NULL, pool_worker,
                               (void *)(uintptr_t)(round * POOL_THREADS + i)) == 0);
    for (unsigned i = 0; i < POOL_THREADS; i++)
        REQUIRE(pthread_join(threads[i], NULL) == 0);
    REQUIRE(pthread_barrier_destroy(&pool_all_allocated) == 0);
    REQUIRE(pthread_barrier_destroy(&pool_all_freed) == 0);
    return test_rss_kib();
}

static void rebuilt_pool_keeps_its_memory_until_the_delay(void)
{
    long start = test_rss_kib();
    double began = seconds();
    long first = run_pool(1);
    double second_began = seconds();
    long second = run_pool(2);
    double second_took = seconds() - second_began;
    long third = run_pool(3);
    double took = seconds() - began;
    /* A call into lfheap after the delay: its tick purges what waited that long. */
    usleep(1300 * 1000);
    void *probe = T_MALLOC(300 << 10);
    REQUIRE(probe);
    T_FREE(probe);
    long later = test_rss_kib();
    printf("# rss: start %ld KiB, after pools 1, 2, 3: %ld, %ld, %ld KiB, 1.3 s later %ld KiB\n",
           start, first, second, third, later);
    const long pool = 2L * POOL_BYTES / 1024;
    CHECK(first - start < pool / 4); /* the first exits purged */
    /* The second pool faulted in again what the first exits purged, so its exits leave it
     * to the delay, for as long as the exit purge's score lasts: eight delays (8 s), which
     * only a machine stalled for seconds outlasts. Then they purge it again, also right.
     * And a second pool that took longer than the delay (1 s) from its start to the
     * count may rightly have seen a slow path purge what its first frees left. */
    if (took < 8.0 && second_took < 0.9)
        CHECK(second - start > pool / 3); /* the second pool's exits kept it */
    else
        printf("# the pools took %.1f s, the second %.1f s: the exit purge's score or the "
               "delay ran out\n",
               took, second_took);
    CHECK(third - start < pool * 3 / 2); /* and the third reused it */
    CHECK(later - start < pool / 4);     /* the delay returned it */
}

/* Resident pages of [p, p + size), p page aligned. */
static size_t resident_pages(const void *p, size_t size)
{
    static unsigned char vec[(16 << 20) / 4096];
    size_t pages = (size + 4095) / 4096;
    REQUIRE(pages <= sizeof vec);
    REQUIRE(mincore((void *)p, size, vec) == 0);
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1;
    return resident;
}

/* calloc of a large block whose run the block before it touched one page in sixteen: a
 * memset would fault in every page, where the program may touch as few; the pages go
 * back to the kernel instead and read as zeros (heap_large_zero), so that the block is
 * about as resident as its tenant left it. A tenant that touched every page leaves a run
 * that the memset clears cheaper than faults would: it stays resident. */
static void sparse_calloc_faults_in_nothing(void)
{
    enum { SIZE = 16 << 20, PAGE = 4096 };
    /* The tests before leave freed runs of smaller sizes, which a chunk no freed run
     * serves merges first (arena.c, fresh_chunk): the tenant's chunk would hold their
     * resident pages, and it would not be sparse. */
    T_MALLOC_TRIM(0);
    for (int dense = 0; dense < 2; dense++) {
        for (int round = 0; round < 4; round++) {
            unsigned char *tenant = T_MALLOC(SIZE);
            REQUIRE(tenant);
            for (size_t off = 0; off < SIZE; off += dense ? PAGE : 16 * PAGE)
                tenant[off] = 1;
            size_t touched = resident_pages(tenant, SIZE);
            T_FREE(tenant);
            unsigned char *p = T_CALLOC(1, SIZE);
            REQUIRE(p);
            size_t resident = resident_pages(p, SIZE);
            /* The pages the tenant wrote (test_api reads every byte; a read here would
             * make the pages resident for the next round's tenant). */
            size_t nonzero = 0;
            for (size_t off = 0; off < SIZE; off += dense ? PAGE : 16 * PAGE)
                for (size_t i = 0; i < PAGE; i++)
                    nonzero += p[off + i] != 0;
            CHECK(nonzero == 0);
            if (p == tenant) {
                /* The run was reused: sparse, no more resident than the tenant left it;
                 * dense, all of it (the pages a purge took may be absent). */
                if (!dense)
                    CHECK(resident <= touched);
                printf("# %s tenant: %zu pages resident, %zu after calloc\n",
                       dense ? "dense" : "sparse", touched, resident);
            }
            T_FREE(p);
        }
    }
}

static void bad_setting_keeps_the_default_delay(void)
{
    enum { BYTES = 8 << 20, ATTEMPTS = 200 };
    int timely = 0;
    for (int attempt = 0; attempt < ATTEMPTS && timely < 3; attempt++) {
        unsigned char *p = malloc(BYTES);
        REQUIRE(p);
        memset(p, 1, BYTES);
        __asm__ volatile("" : : "r"(p) : "memory"); /* the writes are not dead stores */
        long before = test_rss_kib();
        double start = seconds();
        free(p);
        /* Past the millisecond of the free, a slow path, which purges what is due (a
         * large block of another size). */
        usleep(2 * 1000);
        unsigned char *q = malloc(200 << 10);
        REQUIRE(q);
        q[0] = 1;
        long after = test_rss_kib();
        free(q);
        /* Only a check made well within the default delay tells, and within its sixteenth
         * (15 ms), after which the 200 KiB block's fresh run may purge under pressure
         * (purge_if_pressed). The library's clock ticks in up to 4 ms and a free's time is
         * kept to 2 ms, so what took 10 ms here may count as 15 there: only checks made
         * within 5 ms count. */
        if (seconds() - start > 0.005)
            continue;
        timely++;
        CHECK(before - after < BYTES / 2 / 1024);
    }
    printf("# %d of at most %d checks made within 5 ms of the free\n", timely, ATTEMPTS);
    CHECK(timely > 0);
}

enum { SR_RUNS = 96, SR_RUN_BLOCK = 200 << 10, SR_SMALLS = 20000, SR_SMALL = 48 };
static char *sr_runs[SR_RUNS];
static unsigned char *sr_smalls[SR_SMALLS];

static bool in_freed_run(const void *p)
{
    for (unsigned i = 0; i < SR_RUNS; i++)
        if ((const char *)p >= sr_runs[i] && (const char *)p < sr_runs[i] + SR_RUN_BLOCK)
            return true;
    return false;
}

static void superblocks_take_freed_runs(void)
{
    for (unsigned i = 0; i < SR_RUNS; i++) {
        sr_runs[i] = malloc(SR_RUN_BLOCK);
        REQUIRE(sr_runs[i]);
        memset(sr_runs[i], 0x6b, SR_RUN_BLOCK);
    }
    for (unsigned i = 0; i < SR_RUNS; i++)
        free(sr_runs[i]); /* 96 runs of 224 KiB wait: 21 MiB */
    unsigned inside = 0;
    for (unsigned i = 0; i < SR_SMALLS; i++) {
        sr_smalls[i] = malloc(SR_SMALL);
        REQUIRE(sr_smalls[i]);
        memset(sr_smalls[i], (int)(i & 0xff), SR_SMALL);
        inside += in_freed_run(sr_smalls[i]);
    }
    printf("# %u of %u small blocks in freed runs\n", inside, (unsigned)SR_SMALLS);
    /* All but those of a superblock the class may have had before. */
    CHECK(inside >= SR_SMALLS / 2);
    for (unsigned i = 0; i < SR_SMALLS; i++) {
        bool whole = true;
        for (unsigned k = 0; k < SR_SMALL; k++)
            whole &= sr_smalls[i][k] == (unsigned char)(i & 0xff);
        CHECK(whole);
        free(sr_smalls[i]);
    }
}

enum { BUF_SMALL = 8 << 10, BUF_BEFORE = 16 << 20, BUF_AFTER = 12 << 20, BUF_SIZE = 4 << 20 };
static unsigned char *buf_blocks[(BUF_BEFORE + BUF_AFTER) / BUF_SMALL];

static void freed_buffer_serves_new_superblocks(void)
{
    const size_t before = BUF_BEFORE / BUF_SMALL, all = before + BUF_AFTER / BUF_SMALL;
    for (size_t i = 0; i < before; i++) {
        buf_blocks[i] = malloc(BUF_SMALL);
        REQUIRE(buf_blocks[i]);
        memset(buf_blocks[i], (int)(i & 0xff), BUF_SMALL);
    }
    char *buffer = malloc(BUF_SIZE);
    REQUIRE(buffer);
    memset(buffer, 0x5a, BUF_SIZE);
    long held = test_rss_kib();
    free(buffer);
    /* Past the pressure purge's share of the delay (3.75 s). */
    usleep(3900 * 1000);
    size_t inside = 0;
    for (size_t i = before; i < all; i++) {
        buf_blocks[i] = malloc(BUF_SMALL);
        REQUIRE(buf_blocks[i]);
        memset(buf_blocks[i], (int)(i & 0xff), BUF_SMALL);
        inside += (char *)buf_blocks[i] >= buffer && (char *)buf_blocks[i] < buffer + BUF_SIZE;
    }
    long end = test_rss_kib();
    printf("# rss: %ld KiB with the buffer, %ld KiB after its free and 12 MiB of 8 KiB blocks; "
           "%zu of the %zu new blocks in the buffer's range\n",
           held, end, inside, all - before);
    /* The buffer's pages serve at least half of what they can hold... */
    CHECK(inside >= BUF_SIZE / BUF_SMALL / 2);
    /* ...so the new blocks grow the resident size by less than their 12 MiB: with the
     * buffer's pages kept aside, 12 MiB or more. */
    CHECK(end - held < (BUF_AFTER - BUF_SIZE / 2) / 1024);
    size_t damaged = 0;
    for (size_t i = 0; i < all; i++) {
        for (size_t k = 0; k < BUF_SMALL; k += 512)
            damaged += buf_blocks[i][k] != (unsigned char)(i & 0xff);
        free(buf_blocks[i]);
    }
    CHECK(damaged == 0);
}

static long minor_faults(void)
{
    struct rusage usage;
    REQUIRE(getrusage(RUSAGE_SELF, &usage) == 0);
    return usage.ru_minflt;
}

enum { REGROW_STEPS = 200, REGROW_START = 1 << 20, REGROW_GROWTH = 64 };

static void regrown_buffer_keeps_its_pages(void)
{
    size_t size = REGROW_START;
    unsigned char *buffer = T_MALLOC(size);
    REQUIRE(buffer);
    for (size_t i = 0; i < size; i++)
        buffer[i] = (unsigned char)(i * 7);
    size_t damaged = 0;
    long faults = 0, timely_faults = 0;
    int timely = 0;
    double freed_at = seconds();
    for (int step = 0; step < REGROW_STEPS; step++) {
        long faults_before = minor_faults();
        double asked_at = seconds();
        unsigned char *bigger = T_MALLOC(size + REGROW_GROWTH);
        REQUIRE(bigger);
        memcpy(bigger, buffer, size);
        for (size_t i = size; i < size + REGROW_GROWTH; i++)
            bigger[i] = (unsigned char)(i * 7);
        long step_faults = minor_faults() - faults_before;
        faults += step_faults;
        /* A step that comes more than the floor after the last free finds that run gone
         * back, rightly; on a loaded machine most steps can. Only steps that came within
         * half the floor count (the library's clock ticks in 4 ms or less). */
        if (asked_at - freed_at < 0.016) {
            timely++;
            timely_faults += step_faults;
        }
        T_FREE(buffer);
        freed_at = seconds();
        buffer = bigger;
        size += REGROW_GROWTH;
        damaged += buffer[size / 2] != (unsigned char)(size / 2 * 7);
        struct timespec pause = {0, 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    for (size_t i = 0; i < size; i++)
        damaged += buffer[i] != (unsigned char)(i * 7);
    long every_step = (long)REGROW_STEPS * (REGROW_START / 4096);
    printf("# %d steps of a %d KiB buffer: %ld page faults (%ld if every step faults it in); "
           "%d steps within 16 ms of the last free, %ld faults among them\n",
           REGROW_STEPS, REGROW_START >> 10, faults, every_step, timely, timely_faults);
    CHECK(damaged == 0);
    if (timely >= REGROW_STEPS / 4)
        CHECK(timely_faults < (long)timely * (REGROW_START / 4096) / 4);
    else
        printf("# too few timely steps to judge the reuse (a loaded machine)\n");
    /* The last run freed goes back at a later slow path (a large block's). */
    long held = test_rss_kib();
    T_FREE(buffer);
    long end = rss_after_slow_paths(held - REGROW_START / 1024 / 2, seconds());
    CHECK(held - end >= REGROW_START / 1024 / 2);
}

/* Blocks 8 KiB short of 256 KiB and 1 MiB, so that each takes a run of exactly that size
 * in every build: the secure build's guard page and the debug build's canary fit in the
 * 8 KiB. */
enum {
    PHASE_BYTES = 192 << 20,
    PHASE_SMALL = 256 << 10,
    PHASE_BIG = 1 << 20,
    PHASE_SLACK = 8 << 10
};
static unsigned char *phase_blocks[PHASE_BYTES / PHASE_SMALL];

static void freed_runs_serve_other_sizes(void)
{
    long start = test_rss_kib();
    const size_t smalls = PHASE_BYTES / PHASE_SMALL, bigs = PHASE_BYTES / PHASE_BIG;
    const size_t small = PHASE_SMALL - PHASE_SLACK, big = PHASE_BIG - PHASE_SLACK;
    for (size_t i = 0; i < smalls; i++) {
        phase_blocks[i] = T_MALLOC(small);
        REQUIRE(phase_blocks[i]);
        memset(phase_blocks[i], 0xA5, small);
    }
    for (size_t i = 0; i < smalls; i++)
        T_FREE(phase_blocks[i]);
    long faults_before = minor_faults();
    for (size_t i = 0; i < bigs; i++) {
        phase_blocks[i] = T_CALLOC(1, big);
        REQUIRE(phase_blocks[i]);
    }
    size_t nonzero = 0;
    for (size_t i = 0; i < bigs; i++)
        for (size_t k = 0; k < big; k += sizeof(uint64_t))
            nonzero += *(uint64_t *)(phase_blocks[i] + k) != 0;
    for (size_t i = 0; i < bigs; i++)
        memset(phase_blocks[i], (int)(i | 1), big);
    long faults = minor_faults() - faults_before;
    size_t damaged = 0;
    for (size_t i = 0; i < bigs; i++)
        damaged += phase_blocks[i][0] != (unsigned char)(i | 1) ||
                   phase_blocks[i][big - 1] != (unsigned char)(i | 1);
    long pages = (long)(bigs * big / 4096);
    printf("# %zu freed blocks of %zu KiB, then %zu zeroed ones of %zu KiB: %ld page faults "
           "of %ld pages; %zu words not zero\n",
           smalls, small >> 10, bigs, big >> 10, faults, pages, nonzero);
    CHECK(nonzero == 0);
    CHECK(damaged == 0);
    CHECK(faults < pages / 2);
    for (size_t i = 0; i < bigs; i++)
        T_FREE(phase_blocks[i]);
    T_MALLOC_TRIM(0);
    long end = test_rss_kib();
    printf("# resident: %ld KiB at the start, %ld after malloc_trim\n", start, end);
    CHECK(end - start < 32 << 10);
}

/* ---- huge blocks kept for the next (src/mapcache.h) ------------------------------------ */

enum { HUGE_MIB = 160 }; /* past twice an arena, so that half of it is still its own mapping */
#define HUGE_BYTES ((size_t)HUGE_MIB << 20)

static bool mapped(const void *p)
{
    unsigned char resident;
    return mincore((void *)((uintptr_t)p & ~(uintptr_t)4095), 1, &resident) == 0;
}

static void write_pages(unsigned char *p, size_t size, unsigned char value)
{
    for (size_t at = 0; at < size; at += 4096)
        p[at] = value;
    p[size - 1] = value;
}

/* After malloc_trim unmapped everything kept: one huge block written with `value` and
 * freed, so that it is the only one kept. Returns where it was. */
static unsigned char *kept_alone(unsigned char value)
{
    T_MALLOC_TRIM(0);
    unsigned char *p = T_MALLOC(HUGE_BYTES);
    REQUIRE(p);
    write_pages(p, HUGE_BYTES, value);
    T_FREE(p);
    return p;
}

static void huge_blocks_are_kept_for_the_next(void)
{
    unsigned char *a = T_MALLOC(HUGE_BYTES);
    REQUIRE(a);
    write_pages(a, HUGE_BYTES, 0x5a);
    T_FREE(a);
    /* Kept: still mapped, and handed out again to the same size. */
    CHECK(mapped(a));
    unsigned char *b = T_MALLOC(HUGE_BYTES);
    CHECK(b == a);
    REQUIRE(b);
    /* A write-only loop over a kept block faults nothing in again. */
    long before = minor_faults();
    for (int round = 0; round < 8; round++) {
        write_pages(b, HUGE_BYTES, (unsigned char)round);
        T_FREE(b);
        b = T_MALLOC(HUGE_BYTES);
        REQUIRE(b);
    }
    long faults = minor_faults() - before;
    printf("# faults over 8 rounds of a kept %d MiB block: %ld (a round faults %zu pages "
           "in when nothing is kept)\n",
           HUGE_MIB, faults, HUGE_BYTES / 4096);
    CHECK(faults < (long)(HUGE_BYTES / 4096) / 4);
    write_pages(b, HUGE_BYTES, 0x77);
    T_FREE(b);
    /* calloc from a kept mapping: zeros, though the last tenant wrote every page. */
    unsigned char *z = T_CALLOC(1, HUGE_BYTES);
    REQUIRE(z);
    CHECK(z == a);
    bool zero = true;
    for (size_t at = 0; at < HUGE_BYTES; at += 4096)
        zero &= z[at] == 0 && z[at + 4095] == 0;
    CHECK(zero);
    T_FREE(z);
    /* More than twice smaller: the kept mapping all the same, its tail unmapped (one
     * slot: a kept mapping left waiting beside a fresh one kept both resident). */
    size_t small = (HUGE_BYTES / 2) - (1 << 20);
    unsigned char *s = T_MALLOC(small);
    REQUIRE(s);
    CHECK(s == a && !mapped(a + HUGE_BYTES - 4096));
    write_pages(s, small, 0x33);
    T_FREE(s);
    /* More than twice bigger: the kept mapping grown, where it is or its pages moved. */
    size_t much = 2 * HUGE_BYTES + (4 << 20);
    unsigned char *big = T_MALLOC(much);
    REQUIRE(big);
    CHECK(big[0] == 0x33 && big[small - 4096] == 0x33 && big[much - 1] == 0);
    T_FREE(big);
    /* Bigger, at most twice: the kept mapping grown (where it is, or its pages moved):
     * the last tenant's bytes are there, the pages past them read as zeros. */
    a = kept_alone(9);
    size_t more = HUGE_BYTES + (32 << 20);
    unsigned char *g = T_MALLOC(more);
    REQUIRE(g);
    CHECK(g[0] == 9 && g[HUGE_BYTES - 4096] == 9 && g[HUGE_BYTES] == 0 && g[more - 1] == 0);
    CHECK(g == a || !mapped(a));
    write_pages(g, more, 10);
    T_FREE(g);
    /* Smaller, at least half: the smallest kept mapping that holds it, its tail unmapped. */
    a = kept_alone(1);
    size_t less = HUGE_BYTES - (16 << 20);
    unsigned char *c = T_MALLOC(less);
    CHECK(c == a);
    REQUIRE(c);
    CHECK(T_MALLOC_USABLE_SIZE(c) >= less && T_MALLOC_USABLE_SIZE(c) < HUGE_BYTES);
    CHECK(!mapped(a + less + (8 << 20)));
    CHECK(c[0] == 1 && c[less - 4096] == 1); /* the last tenant's bytes: malloc clears nothing */
    write_pages(c, less, 2);
    T_FREE(c);
    /* malloc_trim unmaps what is kept. */
    CHECK(mapped(c));
    T_MALLOC_TRIM(0);
    CHECK(!mapped(c));
}

static void kept_huge_blocks_go_back_after_the_delay(void)
{
    long start = test_rss_kib();
    unsigned char *a = T_MALLOC(HUGE_BYTES);
    REQUIRE(a);
    write_pages(a, HUGE_BYTES, 3);
    T_FREE(a);
    CHECK(mapped(a));
    long kept = test_rss_kib();
    usleep(400 * 1000); /* twice the delay */
    /* The next huge block's free purges what waited the delay (and keeps this one). */
    unsigned char *b = T_MALLOC(HUGE_BYTES * 3);
    REQUIRE(b);
    b[0] = 1;
    T_FREE(b);
    long end = test_rss_kib();
    printf("# rss: start %ld KiB, one %d MiB block kept %ld KiB, after the delay %ld KiB\n", start,
           HUGE_MIB, kept, end);
    CHECK(kept - start > HUGE_MIB * 1024 / 2);
    /* The resident size says that `a` went back: its address may be b's now, as the tick
     * that b's allocation takes first gives it back before b is mapped. */
    CHECK(end - start < 16 * 1024);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "huge") == 0) {
        RUN(huge_blocks_are_kept_for_the_next);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "hugedelay") == 0) {
        RUN(kept_huge_blocks_go_back_after_the_delay);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "phases") == 0) {
        RUN(freed_runs_serve_other_sizes);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "regrow") == 0) {
        RUN(regrown_buffer_keeps_its_pages);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "superruns") == 0) {
        RUN(superblocks_take_freed_runs);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "buffer") == 0) {
        RUN(freed_buffer_serves_new_superblocks);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "keeps") == 0) {
        RUN(bad_setting_keeps_the_default_delay);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "rebuild") == 0) {
        RUN(rebuilt_pool_keeps_its_memory_until_the_delay);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "superblocks") == 0) {
        RUN(superblock_purge_is_not_regretted);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "shift") == 0) {
        RUN(rss_stays_flat_when_sizes_shift);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "shifthuge") == 0) {
        RUN(rss_stays_flat_when_a_huge_block_follows_freed_runs);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "keptyield") == 0) {
        RUN(kept_huge_blocks_yield_to_fresh_runs);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "keptregret") == 0) {
        RUN(kept_release_is_regretted);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "exitlarge") == 0) {
        RUN(rss_falls_back_when_a_large_only_thread_exits);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "exit") == 0) {
        RUN(rss_falls_back_when_the_workers_exit);
        return test_exit_status();
    }
    RUN(rss_falls_back_after_free);
    RUN(rss_falls_back_on_the_fast_paths);
    RUN(churn_reuses_chunks);
    RUN(sparse_calloc_faults_in_nothing);
    return test_exit_status();
}
