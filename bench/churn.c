/*
 * churn (llheap paper, §Churn Benchmark): a shared array of `spots` x threads spots,
 * each holding a live object. Each of the threads, n times, picks a random spot, frees
 * the object there and allocates a new one of a size from min..max in steps of `step`,
 * the sizes in Fisher-Yates shuffled order. Any thread may free any other thread's
 * object. Published: 16 spots, 100,000 objects per thread, 50-500 bytes step 50.
 *
 * Validation: an object records (spot, serial, size) in its first bytes and the
 * complement of its tag in its last 8; whoever takes it out of a spot checks that it
 * belongs to that spot and is intact before freeing it. Spots are swapped with atomic
 * exchange so each object has exactly one owner at a time; at the end every spot is
 * checked, and the count of objects freed must match the count allocated.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct header {
    uint64_t tag; /* bench_tag(spot, serial) */
    uint32_t spot;
    uint32_t size;
    uint64_t serial;
};

static struct {
    long n, spots_total;
    uint32_t min, max, step;
    _Atomic(void *) *spots;
    atomic_long freed;
} cfg;

static void *make_object(size_t size, uint32_t spot, uint64_t serial)
{
    struct header *h = malloc(size);
    bench_check_ptr(h, size, "malloc");
    *h = (struct header){
        .tag = bench_tag(spot, serial), .spot = spot, .size = (uint32_t)size, .serial = serial};
    uint64_t tail = ~h->tag;
    memcpy((char *)h + size - 8, &tail, 8);
    return h;
}

/* Checks an object taken out of `spot` and frees it. */
static void drop_object(void *p, uint32_t spot)
{
    struct header *h = p;
    uint64_t tail;
    if (h->spot != spot || h->size < cfg.min || h->size > cfg.max ||
        h->tag != bench_tag(spot, h->serial))
        bench_fail("object %p taken from spot %u has a corrupt header (spot %u, size %u)", p, spot,
                   h->spot, h->size);
    memcpy(&tail, (char *)h + h->size - 8, 8);
    if (tail != ~h->tag)
        bench_fail("object %p (%u bytes) in spot %u: its tail was overwritten", p, h->size, spot);
    free(p);
    atomic_fetch_add_explicit(&cfg.freed, 1, memory_order_relaxed);
}

static void worker(int tid, void *arg)
{
    (void)arg;
    struct bench_rng rng;
    bench_rng_seed(&rng, (uint64_t)tid + 1);
    uint32_t *sizes = bench_sizes_fisher((size_t)cfg.n, cfg.min, cfg.max, cfg.step, &rng);
    for (long i = 0; i < cfg.n; i++) {
        uint32_t spot = (uint32_t)bench_rng_below(&rng, (uint64_t)cfg.spots_total);
        /* acq_rel: we take ownership of the old object and publish the new one */
        void *old = atomic_exchange_explicit(&cfg.spots[spot], NULL, memory_order_acq_rel);
        if (old)
            drop_object(old, spot);
        uint64_t serial = ((uint64_t)tid << 40) | (uint64_t)i;
        void *fresh = make_object(sizes[i], spot, serial);
        old = atomic_exchange_explicit(&cfg.spots[spot], fresh, memory_order_acq_rel);
        if (old) /* another thread refilled the spot meanwhile */
            drop_object(old, spot);
    }
    bench_sizes_release(sizes, (size_t)cfg.n);
}

int main(int argc, char **argv)
{
    long threads = 1, spots = 16, n = 100000, min = 50, max = 500, step = 50;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads (K)"),
        BENCH_INT("spots", spots, "spots per thread in the shared array (M/K)"),
        BENCH_INT("n", n, "free+malloc cycles per thread (N)"),
        BENCH_INT("min", min, "smallest object"),
        BENCH_INT("max", max, "largest object"),
        BENCH_INT("step", step, "size increment"),
        BENCH_END,
    };
    bench_parse(argc, argv, "churn", "threads free and reallocate random spots of a shared array",
                opts);
    if (threads < 1 || spots < 1 || n < 1 || step < 1 || min < (long)sizeof(struct header) + 8 ||
        max < min || max > 1 << 30)
        bench_fail("need threads, spots, n, step >= 1 and %zu <= min <= max",
                   sizeof(struct header) + 8);
    cfg.n = n;
    cfg.spots_total = spots * threads;
    cfg.min = (uint32_t)min;
    cfg.max = (uint32_t)max;
    cfg.step = (uint32_t)step;
    size_t bytes = (size_t)cfg.spots_total * sizeof(void *);
    cfg.spots = bench_map(bytes);
    for (long s = 0; s < cfg.spots_total; s++)
        atomic_store(&cfg.spots[s], make_object((size_t)min, (uint32_t)s, 0));

    double secs = bench_run_threads((int)threads, worker, NULL);

    for (long s = 0; s < cfg.spots_total; s++)
        drop_object(atomic_load(&cfg.spots[s]), (uint32_t)s);
    long allocated = cfg.spots_total + n * threads;
    if (atomic_load(&cfg.freed) != allocated)
        bench_fail("allocated %ld objects but freed %ld", allocated, atomic_load(&cfg.freed));
    bench_unmap(cfg.spots, bytes);
    bench_result((int)threads, "spots=%ld n=%ld min=%ld max=%ld step=%ld seconds=%.9f mops=%.3f",
                 spots, n, min, max, step, secs, 2.0 * (double)n * (double)threads / secs / 1e6);
    return 0;
}
