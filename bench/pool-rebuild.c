/*
 * pool-rebuild (our own): a pool of worker threads torn down and started again. In each
 * of `rounds` rounds, `threads` threads run at once, each doing `steps` steps on its
 * `slots` private slots: free the block of a random slot and allocate another, of 16 B to
 * 1 KiB, or (`large` per mille of the steps) of 64 KiB to `max_kib` KiB with a word
 * written into every page, so that its pages are really used. One step in `share` then
 * swaps the new block with a random cell of a table shared by all threads and rounds, so
 * that blocks are freed by other threads and outlive the round that made them. A thread
 * frees its slots and exits at the end of its steps; every round is joined before the
 * next starts. So each round climbs to the same peak and the allocator sits idle in
 * between only as long as starting the threads takes: what it gives back when the
 * threads exit (and keeps for the next round) decides how many pages fault in again.
 *
 * Validation: every block carries a tag (thread, step) in its header, after it and in its
 * last 8 bytes and, for a large block, in every page; all are checked before the block is
 * freed, the shared ones by whichever thread takes them out of the table. A block kept in
 * a private slot is also checked against the tag its slot remembers: a block handed out
 * twice carries its second owner's tag, whole and consistent, which only a tag kept
 * outside the block tells from its own (whatever the scheduler interleaves).
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>

#define PAGE        4096
#define SMALL_MIN   24 /* the header and a tagged word */
#define SMALL_MAX   1024
#define LARGE_MIN   ((size_t)64 << 10)
#define MAX_SLOTS   4096
#define SHARED_SIZE 1024

struct block {
    uint64_t tag;
    size_t size;
};

static struct {
    long threads, rounds, steps, slots, large, share;
    size_t large_max;
    _Atomic(struct block *) shared[SHARED_SIZE];
    _Atomic long made, freed;
} cfg;

static uint64_t page_word(uint64_t tag, size_t page)
{
    return tag ^ ((uint64_t)page * 0x9e3779b97f4a7c15ull);
}

static struct block *make(struct bench_rng *rng, uint64_t tag)
{
    size_t size;
    if ((long)bench_rng_below(rng, 1000) < cfg.large)
        size = LARGE_MIN + (size_t)bench_rng_below(rng, cfg.large_max - LARGE_MIN + 1);
    else
        size = SMALL_MIN + (size_t)bench_rng_below(rng, SMALL_MAX - SMALL_MIN + 1);
    struct block *b = malloc(size);
    bench_check_ptr(b, size, "malloc");
    b->tag = tag;
    b->size = size;
    bench_tag_write(b + 1, size - sizeof *b, tag);
    for (size_t off = PAGE; off + 8 <= size - 8; off += PAGE)
        *(uint64_t *)((char *)b + off) = page_word(tag, off / PAGE);
    atomic_fetch_add_explicit(&cfg.made, 1, memory_order_relaxed);
    return b;
}

/* Checks and frees a block; `expected` is its tag where the caller knows it, else 0. */
static void drop(struct block *b, uint64_t expected, const char *what)
{
    size_t size = b->size;
    if (size < SMALL_MIN || size > cfg.large_max)
        bench_fail("block %p (%s) has a corrupt header", (void *)b, what);
    if (expected && b->tag != expected)
        bench_fail("block %p (%s) carries another block's tag: handed out twice", (void *)b, what);
    bench_tag_check(b + 1, size - sizeof *b, b->tag, what);
    for (size_t off = PAGE; off + 8 <= size - 8; off += PAGE)
        if (*(const uint64_t *)((const char *)b + off) != page_word(b->tag, off / PAGE))
            bench_fail("block %p (%zu bytes, %s): page at offset %zu was overwritten", (void *)b,
                       size, what, off);
    free(b);
    atomic_fetch_add_explicit(&cfg.freed, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
    uint64_t id = (uint64_t)(uintptr_t)arg;
    struct bench_rng rng;
    bench_rng_seed(&rng, id * 7919 + 13);
    /* The slots live on the stack, out of the allocator under test. */
    struct block *slot[MAX_SLOTS] = {0};
    uint64_t slot_tag[MAX_SLOTS] = {0}; /* the tag of the block this thread made there; 0: taken */
    for (long s = 0; s < cfg.steps; s++) {
        long i = (long)bench_rng_below(&rng, (uint64_t)cfg.slots);
        if (slot[i])
            drop(slot[i], slot_tag[i], "free of a private block");
        slot_tag[i] = bench_tag(id, (uint64_t)s);
        slot[i] = make(&rng, slot_tag[i]);
        if (cfg.share > 0 && bench_rng_below(&rng, (uint64_t)cfg.share) == 0) {
            long cell = (long)bench_rng_below(&rng, SHARED_SIZE);
            /* acq_rel: take the block another thread published, publish ours */
            slot[i] = atomic_exchange_explicit(&cfg.shared[cell], slot[i], memory_order_acq_rel);
            slot_tag[i] = 0; /* from the table: only its own tags say what it holds */
        }
    }
    for (long i = 0; i < cfg.slots; i++)
        if (slot[i])
            drop(slot[i], slot_tag[i], "free at thread exit");
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 4, rounds = 20, steps = 20000, slots = 1000, large = 10, share = 4,
         max_kib = 4096;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads of the pool, alive at once in every round"),
        BENCH_INT("rounds", rounds, "times the pool is started and joined"),
        BENCH_INT("steps", steps, "free+malloc steps of each thread in a round"),
        BENCH_INT("slots", slots, "private slots of a thread"),
        BENCH_INT("large", large, "per mille of the steps that allocate 64 KiB..max_kib"),
        BENCH_INT("share", share, "one step in `share` swaps its block with the shared table"),
        BENCH_INT("max_kib", max_kib, "largest block in KiB"),
        BENCH_END,
    };
    bench_parse(argc, argv, "pool-rebuild",
                "a thread pool started and joined again and again, small and large blocks", opts);
    if (threads < 1 || rounds < 1 || steps < 1 || slots < 1 || slots > MAX_SLOTS || large < 0 ||
        large > 1000 || share < 0 || max_kib < 64)
        bench_fail("need threads, rounds, steps >= 1, slots 1..%d, large 0..1000, share >= 0, "
                   "max_kib >= 64",
                   MAX_SLOTS);
    cfg.threads = threads;
    cfg.steps = steps;
    cfg.slots = slots;
    cfg.large = large;
    cfg.share = share;
    cfg.large_max = (size_t)max_kib << 10;
    size_t tid_bytes = (size_t)threads * sizeof(pthread_t);
    pthread_t *tids = bench_map(tid_bytes);

    double t0 = bench_now();
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < threads; i++)
            bench_thread_create(&tids[i], NULL, worker, (void *)(uintptr_t)(r * threads + i + 1));
        for (long i = 0; i < threads; i++)
            pthread_join(tids[i], NULL);
    }
    double secs = bench_now() - t0;

    for (long c = 0; c < SHARED_SIZE; c++) {
        struct block *b = atomic_exchange(&cfg.shared[c], NULL);
        if (b)
            drop(b, 0, "final free of a shared block");
    }
    if (atomic_load(&cfg.freed) != atomic_load(&cfg.made))
        bench_fail("allocated %ld blocks but freed %ld", atomic_load(&cfg.made),
                   atomic_load(&cfg.freed));
    bench_unmap(tids, tid_bytes);
    bench_result((int)threads,
                 "rounds=%ld steps=%ld slots=%ld large=%ld share=%ld max_kib=%ld "
                 "seconds=%.9f",
                 rounds, steps, slots, large, share, max_kib, secs);
    return 0;
}
