/*
 * large (our own; the large-block path): `iterations` times in total, split across the
 * threads, a thread picks one of `slots` shared slots at random, frees the block there
 * and allocates a new one of min..max MiB (any byte count in between), writing one
 * word into every page so the memory is really used. At most `slots` blocks are live at
 * once. This measures how the allocator gets big blocks from the OS and gives them back
 * (mmap/munmap, caching, page faults). Default: 2,000 iterations, 20 slots, 5-25 MiB.
 *
 * Validation: each block's header records (slot, serial, size) and every page holds a
 * word derived from the block's tag; all are checked before the block is freed.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>

#define PAGE 4096

struct header {
    uint64_t tag;
    uint64_t size;
    uint64_t slot;
    uint64_t serial;
};

static struct {
    long per_thread, slots;
    size_t min, max;
    _Atomic(struct header *) *slot;
    atomic_long freed;
} cfg;

static uint64_t page_word(uint64_t tag, size_t page)
{
    return tag ^ ((uint64_t)page * 0x9e3779b97f4a7c15ull);
}

static struct header *make_block(size_t size, long slot, uint64_t serial)
{
    struct header *h = malloc(size);
    bench_check_ptr(h, size, "malloc");
    *h = (struct header){.tag = bench_tag((uint64_t)slot, serial),
                         .size = size,
                         .slot = (uint64_t)slot,
                         .serial = serial};
    char *b = (char *)h;
    for (size_t off = PAGE; off + 8 <= size; off += PAGE)
        *(uint64_t *)(b + off) = page_word(h->tag, off / PAGE);
    return h;
}

static void drop_block(struct header *h, long slot)
{
    if (h->slot != (uint64_t)slot || h->size < cfg.min || h->size > cfg.max ||
        h->tag != bench_tag((uint64_t)slot, h->serial))
        bench_fail("block %p taken from slot %ld has a corrupt header", (void *)h, slot);
    const char *b = (const char *)h;
    for (size_t off = PAGE; off + 8 <= h->size; off += PAGE)
        if (*(const uint64_t *)(b + off) != page_word(h->tag, off / PAGE))
            bench_fail("block %p (%zu bytes): page at offset %zu was overwritten", (void *)h,
                       (size_t)h->size, off);
    free(h);
    atomic_fetch_add_explicit(&cfg.freed, 1, memory_order_relaxed);
}

static void worker(int tid, void *arg)
{
    (void)arg;
    struct bench_rng rng;
    bench_rng_seed(&rng, (uint64_t)tid + 77);
    for (long i = 0; i < cfg.per_thread; i++) {
        long slot = (long)bench_rng_below(&rng, (uint64_t)cfg.slots);
        /* acq_rel: take ownership of the old block, publish the new one */
        struct header *old = atomic_exchange_explicit(&cfg.slot[slot], NULL, memory_order_acq_rel);
        if (old)
            drop_block(old, slot);
        size_t size = cfg.min + (size_t)bench_rng_below(&rng, cfg.max - cfg.min + 1);
        struct header *fresh = make_block(size, slot, ((uint64_t)tid << 32) | (uint64_t)i);
        old = atomic_exchange_explicit(&cfg.slot[slot], fresh, memory_order_acq_rel);
        if (old)
            drop_block(old, slot);
    }
}

int main(int argc, char **argv)
{
    long threads = 1, iterations = 2000, slots = 20, min_mib = 5, max_mib = 25;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads sharing the iterations"),
        BENCH_INT("iterations", iterations, "free+malloc cycles in total"),
        BENCH_INT("slots", slots, "shared slots (most blocks live at once)"),
        BENCH_INT("min_mib", min_mib, "smallest block in MiB"),
        BENCH_INT("max_mib", max_mib, "largest block in MiB"),
        BENCH_END,
    };
    bench_parse(argc, argv, "large",
                "random replacement of up to `slots` live blocks of min..max MiB", opts);
    if (threads < 1 || iterations < threads || slots < 1 || min_mib < 1 || max_mib < min_mib)
        bench_fail("need threads, slots, min_mib >= 1, iterations >= threads, min <= max");
    cfg.per_thread = iterations / threads;
    cfg.slots = slots;
    cfg.min = (size_t)min_mib << 20;
    cfg.max = (size_t)max_mib << 20;
    size_t bytes = (size_t)slots * sizeof(void *);
    cfg.slot = bench_map(bytes);

    double secs = bench_run_threads((int)threads, worker, NULL);

    for (long s = 0; s < slots; s++) {
        struct header *h = atomic_load(&cfg.slot[s]);
        if (h)
            drop_block(h, s);
    }
    long allocated = cfg.per_thread * threads;
    if (atomic_load(&cfg.freed) != allocated)
        bench_fail("allocated %ld blocks but freed %ld", allocated, atomic_load(&cfg.freed));
    bench_unmap(cfg.slot, bytes);
    bench_result((int)threads, "iterations=%ld slots=%ld min_mib=%ld max_mib=%ld seconds=%.9f",
                 allocated, slots, min_mib, max_mib, secs);
    return 0;
}
