/*
 * speed (llheap paper, §Speed Micro-Benchmark): the latency of the allocation routines
 * alone and chained. For each of 12 chains, every worker applies each routine of the
 * chain in turn to its n objects (sizes min..max step `step`, Fisher-Yates shuffled;
 * realloc moves each object to another size from the same range). Chains that start
 * with realloc or free work on objects malloc'd before the clock starts; objects left
 * at the end of a chain are freed after it stops. Published: 100,000 objects per
 * worker, 50-500 bytes step 50.
 *
 * Validation: every object carries a tag; realloc must keep the first bytes (checked
 * after every realloc), calloc must return zeroed memory (first, middle and last bytes
 * checked), free checks the tag first.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum routine { MALLOC, CALLOC, REALLOC, FREE };

static const struct chain {
    const char *name;
    int length;
    enum routine steps[4];
} chains[] = {
    {"malloc", 1, {MALLOC}},
    {"realloc", 1, {REALLOC}},
    {"free", 1, {FREE}},
    {"calloc", 1, {CALLOC}},
    {"malloc_free", 2, {MALLOC, FREE}},
    {"realloc_free", 2, {REALLOC, FREE}},
    {"calloc_free", 2, {CALLOC, FREE}},
    {"malloc_realloc", 2, {MALLOC, REALLOC}},
    {"calloc_realloc", 2, {CALLOC, REALLOC}},
    {"malloc_realloc_free", 3, {MALLOC, REALLOC, FREE}},
    {"calloc_realloc_free", 3, {CALLOC, REALLOC, FREE}},
    {"malloc_realloc_free_calloc", 4, {MALLOC, REALLOC, FREE, CALLOC}},
};
#define NCHAINS ((int)(sizeof chains / sizeof chains[0]))

struct worker_state {
    void **blocks;
    uint32_t *size_now; /* current size of blocks[i] */
    uint32_t *sizes;    /* first size of object i */
    uint32_t *resizes;  /* size realloc moves object i to */
    uint64_t serial;
    double began[NCHAINS], ended[NCHAINS]; /* this worker's clock around each chain */
};

static struct {
    long n, threads;
    uint32_t min, max, step;
    struct worker_state *workers;
    pthread_barrier_t phase;
    double seconds[NCHAINS];
} cfg;

static void tag_object(struct worker_state *w, long i, int tid)
{
    w->serial++;
    bench_tag_write(w->blocks[i], w->size_now[i], bench_tag((uint64_t)tid, w->serial));
}

static void check_zero(const unsigned char *p, size_t size)
{
    if (p[0] || p[size / 2] || p[size - 1])
        bench_fail("calloc(1, %zu) returned %p, which is not zeroed", size, (const void *)p);
}

static void apply(struct worker_state *w, enum routine r, int tid, uint64_t *tags)
{
    for (long i = 0; i < cfg.n; i++) {
        switch (r) {
        case MALLOC:
            w->size_now[i] = w->sizes[i];
            w->blocks[i] = malloc(w->sizes[i]);
            bench_check_ptr(w->blocks[i], w->sizes[i], "malloc");
            break;
        case CALLOC:
            w->size_now[i] = w->sizes[i];
            w->blocks[i] = calloc(1, w->sizes[i]);
            bench_check_ptr(w->blocks[i], w->sizes[i], "calloc");
            check_zero(w->blocks[i], w->sizes[i]);
            break;
        case REALLOC: {
            void *p = realloc(w->blocks[i], w->resizes[i]);
            bench_check_ptr(p, w->resizes[i], "realloc");
            uint64_t head;
            memcpy(&head, p, 8);
            if (head != tags[i])
                bench_fail("realloc(%u -> %u) to %p lost the object's contents", w->size_now[i],
                           w->resizes[i], p);
            w->blocks[i] = p;
            w->size_now[i] = w->resizes[i];
            break;
        }
        case FREE:
            bench_tag_check(w->blocks[i], w->size_now[i], tags[i], "free");
            free(w->blocks[i]);
            w->blocks[i] = NULL;
            continue;
        }
        tag_object(w, i, tid);
        tags[i] = bench_tag((uint64_t)tid, w->serial);
    }
}

static void worker(int tid, void *arg)
{
    (void)arg;
    struct worker_state *w = &cfg.workers[tid];
    size_t tag_bytes = (size_t)cfg.n * sizeof(uint64_t);
    uint64_t *tags = bench_map(tag_bytes);
    for (int c = 0; c < NCHAINS; c++) {
        const struct chain *ch = &chains[c];
        if (ch->steps[0] == REALLOC || ch->steps[0] == FREE)
            apply(w, MALLOC, tid, tags);
        pthread_barrier_wait(&cfg.phase); /* the chain starts */
        w->began[c] = bench_now();
        for (int s = 0; s < ch->length; s++)
            apply(w, ch->steps[s], tid, tags);
        w->ended[c] = bench_now();
        pthread_barrier_wait(&cfg.phase); /* the chain ends */
        if (ch->steps[ch->length - 1] != FREE)
            apply(w, FREE, tid, tags);
    }
    bench_unmap(tags, tag_bytes);
}

static void *worker_main(void *arg)
{
    worker((int)(intptr_t)arg, NULL);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 1, n = 100000, min = 50, max = 500, step = 50;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "worker threads"), BENCH_INT("n", n, "objects per worker"),
        BENCH_INT("min", min, "smallest object"),        BENCH_INT("max", max, "largest object"),
        BENCH_INT("step", step, "size increment"),       BENCH_END,
    };
    bench_parse(argc, argv, "speed", "12 chains of malloc/calloc/realloc/free over n objects",
                opts);
    if (threads < 1 || n < 1 || step < 1 || min < 16 || max < min || max > 1 << 30)
        bench_fail("need threads, n, step >= 1 and 16 <= min <= max");
    cfg.n = n;
    cfg.threads = threads;
    cfg.min = (uint32_t)min;
    cfg.max = (uint32_t)max;
    cfg.step = (uint32_t)step;
    size_t wbytes = (size_t)threads * sizeof(struct worker_state);
    cfg.workers = bench_map(wbytes);
    for (long t = 0; t < threads; t++) {
        struct worker_state *w = &cfg.workers[t];
        struct bench_rng rng;
        bench_rng_seed(&rng, (uint64_t)t);
        w->blocks = bench_map((size_t)n * sizeof(void *));
        w->size_now = bench_map((size_t)n * sizeof(uint32_t));
        w->sizes = bench_sizes_fisher((size_t)n, cfg.min, cfg.max, cfg.step, &rng);
        w->resizes = bench_sizes_fisher((size_t)n, cfg.min, cfg.max, cfg.step, &rng);
    }
    /* The workers time the chains themselves, main takes no part: a thread wakes from a
     * barrier only when a core is free, which with as many workers as cores can be a
     * scheduler slice after the workers started (or stopped), longer than a whole chain
     * at the quick profile. */
    pthread_barrier_init(&cfg.phase, NULL, (unsigned)threads);
    size_t tbytes = (size_t)threads * sizeof(pthread_t);
    pthread_t *tids = bench_map(tbytes);
    for (long t = 0; t < threads; t++)
        bench_thread_create(&tids[t], NULL, worker_main, (void *)(intptr_t)t);
    for (long t = 0; t < threads; t++)
        pthread_join(tids[t], NULL);
    double total = 0;
    for (int c = 0; c < NCHAINS; c++) { /* from the first worker's start to the last's end */
        double first = cfg.workers[0].began[c], last = cfg.workers[0].ended[c];
        for (long t = 1; t < threads; t++) {
            if (cfg.workers[t].began[c] < first)
                first = cfg.workers[t].began[c];
            if (cfg.workers[t].ended[c] > last)
                last = cfg.workers[t].ended[c];
        }
        cfg.seconds[c] = last - first;
        total += cfg.seconds[c];
    }
    for (long t = 0; t < threads; t++) {
        struct worker_state *w = &cfg.workers[t];
        for (long i = 0; i < n; i++)
            if (w->blocks[i])
                bench_fail("worker %ld object %ld was not freed", t, i);
        bench_unmap(w->blocks, (size_t)n * sizeof(void *));
        bench_unmap(w->size_now, (size_t)n * sizeof(uint32_t));
        bench_sizes_release(w->sizes, (size_t)n);
        bench_sizes_release(w->resizes, (size_t)n);
    }
    bench_unmap(tids, tbytes);
    bench_unmap(cfg.workers, wbytes);

    char chain_fields[768];
    int len = 0;
    for (int c = 0; c < NCHAINS; c++)
        len += snprintf(chain_fields + len, sizeof chain_fields - (size_t)len, " %s=%.6f",
                        chains[c].name, cfg.seconds[c]);
    bench_result((int)threads, "n=%ld min=%ld max=%ld step=%ld seconds=%.9f%s", n, min, max, step,
                 total, chain_fields);
    return 0;
}
