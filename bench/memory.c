/*
 * memory (llheap paper, §Memory Micro-Benchmark): the memory an allocator holds from
 * the OS against what the program asked for. `threads` producers each feed `consumers`
 * consumer threads: a producer allocates n objects (sizes min..max step `step`,
 * Fisher-Yates shuffled) into each consumer's buffer; a consumer starts freeing once
 * `round` of them exist and then follows the producer. The whole produce/consume cycle
 * runs `repeat` times, so that whether freed memory is reused (or returned) shows over
 * time. A sampler thread records resident set size (/proc/self/statm) and the bytes
 * currently requested every `sample_us` microseconds; --series writes that time series
 * as a table. The result line gives the RSS before the first object (base), the peak,
 * the RSS at the end when everything is freed, and the peak of bytes requested.
 * Published: 1 producer x 1 consumer and 4 x 4, n = round = 100,000, 50-500 bytes step
 * 50; the paper runs one cycle, we default to 10.
 *
 * Validation: every object carries a tag (pair, index) checked by the consumer before
 * it frees it; the bytes freed must equal the bytes allocated.
 */
#include "common.h"

#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

struct pair {
    void **blocks;   /* ring of n slots */
    uint32_t *sizes; /* size of the object for slot i (same every cycle) */
    long id;
    /* written by the producer */
    _Alignas(64) atomic_long produced;
    atomic_size_t bytes_allocated;
    /* written by the consumer */
    _Alignas(64) atomic_long consumed;
    atomic_size_t bytes_freed;
};

struct sample {
    double seconds;
    size_t rss, requested;
};

static struct {
    long producers, consumers, n, round, repeat, sample_us;
    struct pair *pairs;
    struct sample *samples;
    atomic_long nsamples; /* the sampler and the producers take samples */
    long max_samples;
    atomic_bool done;
    double t0;
} cfg;

static void wait_a_little(unsigned *spins)
{
    if (++*spins < 64)
        sched_yield();
    else
        bench_sleep_us(50);
}

static size_t requested_now(void)
{
    size_t sum = 0;
    long pairs = cfg.producers * cfg.consumers;
    for (long i = 0; i < pairs; i++) {
        struct pair *p = &cfg.pairs[i];
        /* read freed first: a slightly low figure is better than a negative one */
        size_t freed = atomic_load_explicit(&p->bytes_freed, memory_order_relaxed);
        sum += atomic_load_explicit(&p->bytes_allocated, memory_order_relaxed) - freed;
    }
    return sum;
}

static void take_sample(void)
{
    /* relaxed: the slot is this thread's; the samples are read after every thread joined */
    long i = atomic_fetch_add_explicit(&cfg.nsamples, 1, memory_order_relaxed);
    if (i < cfg.max_samples)
        cfg.samples[i] = (struct sample){
            .seconds = bench_now() - cfg.t0, .rss = bench_rss(), .requested = requested_now()};
}

/* Samples stored (read once every thread has joined). */
static long samples_taken(void)
{
    long n = atomic_load_explicit(&cfg.nsamples, memory_order_relaxed);
    return n < cfg.max_samples ? n : cfg.max_samples;
}

static void *sampler_main(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&cfg.done, memory_order_acquire)) {
        take_sample();
        bench_sleep_us(cfg.sample_us);
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    struct pair *p = arg;
    long total = cfg.n * cfg.repeat;
    long start = cfg.round < cfg.n ? cfg.round : cfg.n;
    size_t freed = 0;
    for (long g = 0; g < total; g++) {
        long cycle_start = g / cfg.n * cfg.n;
        unsigned spins = 0;
        long need = g + 1 > cycle_start + start ? g + 1 : cycle_start + start;
        /* acquire: pairs with the producer's release store, so the object is visible */
        while (atomic_load_explicit(&p->produced, memory_order_acquire) < need)
            wait_a_little(&spins);
        long i = g % cfg.n;
        bench_tag_check(p->blocks[i], p->sizes[i], bench_tag((uint64_t)p->id, (uint64_t)g), "free");
        free(p->blocks[i]);
        freed += p->sizes[i];
        atomic_store_explicit(&p->bytes_freed, freed, memory_order_relaxed);
        atomic_store_explicit(&p->consumed, g + 1, memory_order_release);
    }
    return NULL;
}

static void producer(int tid, void *arg)
{
    (void)arg;
    struct pair *mine = &cfg.pairs[tid * cfg.consumers];
    size_t tbytes = (size_t)cfg.consumers * sizeof(pthread_t);
    pthread_t *threads = bench_map(tbytes);
    for (long c = 0; c < cfg.consumers; c++)
        bench_thread_create(&threads[c], NULL, consumer_main, &mine[c]);
    for (long k = 0; k < cfg.repeat; k++) {
        for (long c = 0; c < cfg.consumers; c++) {
            struct pair *p = &mine[c];
            size_t allocated = atomic_load_explicit(&p->bytes_allocated, memory_order_relaxed);
            for (long i = 0; i < cfg.n; i++) {
                long g = k * cfg.n + i;
                unsigned spins = 0;
                /* acquire: the consumer has freed the object that used this slot */
                while (atomic_load_explicit(&p->consumed, memory_order_acquire) < g - cfg.n + 1)
                    wait_a_little(&spins);
                void *b = malloc(p->sizes[i]);
                bench_check_ptr(b, p->sizes[i], "malloc");
                bench_tag_write(b, p->sizes[i], bench_tag((uint64_t)p->id, (uint64_t)g));
                p->blocks[i] = b;
                allocated += p->sizes[i];
                atomic_store_explicit(&p->bytes_allocated, allocated, memory_order_relaxed);
                /* One sample per cycle while this cycle's first `round` objects are all
                 * live (the consumer waits for the store below to free any of them): the
                 * peak is never empty, however the sampler thread is scheduled. */
                if (c == 0 && i + 1 == (cfg.round < cfg.n ? cfg.round : cfg.n))
                    take_sample();
                atomic_store_explicit(&p->produced, g + 1, memory_order_release);
            }
        }
    }
    for (long c = 0; c < cfg.consumers; c++)
        pthread_join(threads[c], NULL);
    bench_unmap(threads, tbytes);
}

static void write_series(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        bench_fail("cannot write %s", path);
    char line[128];
    int len = snprintf(line, sizeof line, "# seconds\trss_bytes\trequested_bytes\n");
    if (write(fd, line, (size_t)len) != len)
        bench_fail("write to %s failed", path);
    for (long i = 0; i < samples_taken(); i++) {
        const struct sample *s = &cfg.samples[i];
        len = snprintf(line, sizeof line, "%.6f\t%zu\t%zu\n", s->seconds, s->rss, s->requested);
        if (write(fd, line, (size_t)len) != len)
            bench_fail("write to %s failed", path);
    }
    close(fd);
}

int main(int argc, char **argv)
{
    long threads = 1, consumers = 1, n = 100000, round = 100000, repeat = 10;
    long min = 50, max = 500, step = 50, sample_us = 1000;
    const char *series = NULL;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "producer threads (K)"),
        BENCH_INT("consumers", consumers, "consumer threads per producer (M)"),
        BENCH_INT("n", n, "objects per consumer per cycle (N)"),
        BENCH_INT("round", round, "objects produced before freeing starts"),
        BENCH_INT("repeat", repeat, "produce/consume cycles"),
        BENCH_INT("min", min, "smallest object"),
        BENCH_INT("max", max, "largest object"),
        BENCH_INT("step", step, "size increment"),
        BENCH_INT("sample_us", sample_us, "microseconds between RSS samples"),
        BENCH_TEXT("series", series, "write the RSS time series to this file"),
        BENCH_END,
    };
    bench_parse(argc, argv, "memory",
                "producers feed consumers; RSS sampled against bytes requested", opts);
    if (threads < 1 || consumers < 1 || n < 1 || round < 1 || repeat < 1 || step < 1 || min < 1 ||
        max < min || max > 1 << 30 || sample_us < 1)
        bench_fail("need every knob >= 1 and min <= max");
    cfg.producers = threads;
    cfg.consumers = consumers;
    cfg.n = n;
    cfg.round = round;
    cfg.repeat = repeat;
    cfg.sample_us = sample_us;
    long npairs = threads * consumers;
    size_t pbytes = (size_t)npairs * sizeof(struct pair);
    cfg.pairs = bench_map(pbytes);
    for (long i = 0; i < npairs; i++) {
        struct bench_rng rng;
        bench_rng_seed(&rng, (uint64_t)i);
        cfg.pairs[i].id = i;
        cfg.pairs[i].blocks = bench_map((size_t)n * sizeof(void *));
        cfg.pairs[i].sizes =
            bench_sizes_fisher((size_t)n, (uint32_t)min, (uint32_t)max, (uint32_t)step, &rng);
    }
    cfg.max_samples = 1 << 20;
    size_t sbytes = (size_t)cfg.max_samples * sizeof(struct sample);
    cfg.samples = bench_map(sbytes);

    size_t base_rss = bench_rss(); /* the program itself, before any object exists */
    cfg.t0 = bench_now();
    pthread_t sampler;
    bench_thread_create(&sampler, NULL, sampler_main, NULL);
    double secs = bench_run_threads((int)threads, producer, NULL);
    atomic_store_explicit(&cfg.done, true, memory_order_release);
    pthread_join(sampler, NULL);
    take_sample(); /* the final state, everything freed */

    size_t peak_rss = 0, peak_req = 0, allocated = 0, freed = 0;
    for (long i = 0; i < samples_taken(); i++) {
        if (cfg.samples[i].rss > peak_rss)
            peak_rss = cfg.samples[i].rss;
        if (cfg.samples[i].requested > peak_req)
            peak_req = cfg.samples[i].requested;
    }
    for (long i = 0; i < npairs; i++) {
        allocated += atomic_load(&cfg.pairs[i].bytes_allocated);
        freed += atomic_load(&cfg.pairs[i].bytes_freed);
        bench_unmap(cfg.pairs[i].blocks, (size_t)n * sizeof(void *));
        bench_sizes_release(cfg.pairs[i].sizes, (size_t)n);
    }
    if (allocated != freed)
        bench_fail("allocated %zu bytes but freed %zu", allocated, freed);
    if (series)
        write_series(series);
    const double mib = 1024.0 * 1024.0;
    size_t final_rss = cfg.samples[samples_taken() - 1].rss;
    bench_result((int)threads,
                 "consumers=%ld n=%ld round=%ld repeat=%ld min=%ld max=%ld step=%ld "
                 "seconds=%.9f base_rss_mib=%.2f peak_rss_mib=%.2f final_rss_mib=%.2f "
                 "peak_requested_mib=%.2f samples=%ld",
                 consumers, n, round, repeat, min, max, step, secs, (double)base_rss / mib,
                 (double)peak_rss / mib, (double)final_rss / mib, (double)peak_req / mib,
                 samples_taken());
    bench_unmap(cfg.samples, sbytes);
    bench_unmap(cfg.pairs, pbytes);
    return 0;
}
