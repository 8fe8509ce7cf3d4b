/*
 * thread-churn-concurrent (our own, issue 13's concurrent churn): `rounds` rounds of
 * `threads` threads alive at once. Each thread waits for the whole round at a barrier,
 * allocates `blocks` blocks spread over 30 size classes (16 bytes to 3.5 KiB, four per
 * doubling), writes them, frees all but one, and leaves that one in a slot where a
 * thread of a later round frees it; every round is joined before the next starts. Live
 * data stays small (one block per slot), so what the resident size does across rounds
 * is what the allocator keeps for threads that are gone. The result line reports RSS
 * after the first round, at the last round, and `settle_ms` after the churn stopped,
 * with no call into the allocator in between. With `hold` every thread also waits at a
 * second barrier before it exits, so that all the round's threads hold their caches at
 * once and exit together: what a loaded machine's scheduler may make of the default run,
 * made certain.
 *
 * Validation: every block carries a tag (thread, index) checked before it is freed, the
 * handed-on blocks by the thread that frees them.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>

#define CLASSES    30
#define MAX_BLOCKS 1024

struct slot {
    void *block; /* left by a thread of an earlier round */
    uint64_t tag;
    size_t size;
};

static struct {
    long threads, blocks, hold;
    pthread_barrier_t start, end;
    struct slot *slots; /* one per thread of a round */
    _Atomic long ran;
} cfg;

static size_t class_size(uint64_t k)
{
    return ((size_t)16 << (k / 4)) + (size_t)(k % 4) * ((size_t)4 << (k / 4));
}

static void *churner(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    struct slot *slot = &cfg.slots[id % (uint64_t)cfg.threads];
    struct bench_rng rng;
    bench_rng_seed(&rng, id);
    /* The bookkeeping stays out of the allocator under test (on the stack), so that a
     * corrupting allocator is caught by the tags, not by a crash on a damaged pointer. */
    void *blocks[MAX_BLOCKS];
    size_t sizes[MAX_BLOCKS];
    pthread_barrier_wait(&cfg.start);
    for (long i = 0; i < cfg.blocks; i++) {
        sizes[i] = class_size(bench_rng_below(&rng, CLASSES));
        blocks[i] = malloc(sizes[i]);
        bench_check_ptr(blocks[i], sizes[i], "malloc");
        bench_tag_write(blocks[i], sizes[i], bench_tag(id, (uint64_t)i));
    }
    for (long i = 1; i < cfg.blocks; i++) {
        bench_tag_check(blocks[i], sizes[i], bench_tag(id, (uint64_t)i), "free");
        free(blocks[i]);
    }
    /* Each thread owns its slot within a round; the join orders rounds. */
    if (slot->block) {
        bench_tag_check(slot->block, slot->size, slot->tag, "free of an earlier round's block");
        free(slot->block);
    }
    slot->block = blocks[0];
    slot->size = sizes[0];
    slot->tag = bench_tag(id, 0);
    atomic_fetch_add_explicit(&cfg.ran, 1, memory_order_relaxed);
    if (cfg.hold)
        pthread_barrier_wait(&cfg.end);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 500, rounds = 300, blocks = 100, settle_ms = 1250, hold = 0;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads alive at once in every round"),
        BENCH_INT("rounds", rounds, "rounds, each joined before the next"),
        BENCH_INT("blocks", blocks, "blocks each thread allocates (all but one freed)"),
        BENCH_INT("settle_ms", settle_ms, "wait after the churn before the last RSS reading"),
        BENCH_INT("hold", hold, "1: the threads of a round exit together, after a second barrier"),
        BENCH_END,
    };
    bench_parse(argc, argv, "thread-churn-concurrent",
                "rounds of many threads alive at once, each handing one block on", opts);
    if (threads < 1 || rounds < 1 || blocks < 1 || blocks > MAX_BLOCKS || settle_ms < 0 ||
        (hold != 0 && hold != 1))
        bench_fail("need threads, rounds >= 1, blocks from 1 to %d, settle_ms >= 0, hold 0 or 1",
                   MAX_BLOCKS);
    cfg.threads = threads;
    cfg.blocks = blocks;
    cfg.hold = hold;
    size_t slot_bytes = (size_t)threads * sizeof(struct slot);
    cfg.slots = bench_map(slot_bytes);
    size_t tid_bytes = (size_t)threads * sizeof(pthread_t);
    pthread_t *tids = bench_map(tid_bytes);
    size_t rss_start = bench_rss(), rss_first = 0;

    double t0 = bench_now();
    for (long r = 0; r < rounds; r++) {
        if (pthread_barrier_init(&cfg.start, NULL, (unsigned)threads) != 0 ||
            pthread_barrier_init(&cfg.end, NULL, (unsigned)threads) != 0)
            bench_fail("pthread_barrier_init");
        for (long i = 0; i < threads; i++)
            bench_thread_create(&tids[i], NULL, churner, (void *)(uintptr_t)(r * threads + i + 1));
        for (long i = 0; i < threads; i++)
            pthread_join(tids[i], NULL);
        pthread_barrier_destroy(&cfg.start);
        pthread_barrier_destroy(&cfg.end);
        if (r == 0)
            rss_first = bench_rss();
    }
    double secs = bench_now() - t0;
    size_t rss_last = bench_rss();
    bench_sleep_us(settle_ms * 1000);
    size_t rss_settled = bench_rss();

    if (atomic_load_explicit(&cfg.ran, memory_order_relaxed) != rounds * threads)
        bench_fail("%ld threads ran, expected %ld",
                   atomic_load_explicit(&cfg.ran, memory_order_relaxed), rounds * threads);
    for (long i = 0; i < threads; i++) {
        struct slot *slot = &cfg.slots[i];
        if (slot->block) {
            bench_tag_check(slot->block, slot->size, slot->tag, "final free");
            free(slot->block);
        }
    }
    bench_unmap(tids, tid_bytes);
    bench_unmap(cfg.slots, slot_bytes);
    const double mib = 1024.0 * 1024.0;
    bench_result((int)threads,
                 "rounds=%ld blocks=%ld hold=%ld seconds=%.9f rss_start_mib=%.2f "
                 "rss_first_mib=%.2f rss_last_round_mib=%.2f rss_settled_mib=%.2f",
                 rounds, blocks, hold, secs, (double)rss_start / mib, (double)rss_first / mib,
                 (double)rss_last / mib, (double)rss_settled / mib);
    return 0;
}
