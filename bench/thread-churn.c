/*
 * thread-churn (our own; the thread-exit paths that LRMalloc's future work and
 * Streamflow's orphaned page blocks are about): n short-lived threads in total, run
 * `threads` at a time in lanes. Each thread frees the object its predecessor in the
 * lane left behind, does `temp` malloc/free pairs of assorted small sizes (so it has a
 * warm thread cache to give back), allocates one object that outlives it, and exits.
 * An allocator that leaks per-thread state at exit shows it as resident memory growing
 * with the number of threads; the result line reports RSS after the first tenth of the
 * threads and at the end. Default: 100,000 threads.
 *
 * Validation: every object carries a tag (lane, thread) checked by whoever frees it;
 * the count of threads that ran must match.
 */
#include "common.h"

#include <stdlib.h>

struct lane {
    void *live; /* the object left by the previous thread of this lane */
    uint64_t tag;
    long done; /* threads run in this lane */
};

static struct {
    long per_lane, temp;
    size_t size;
    struct lane *lanes;
    size_t rss_early;
} cfg;

static void *short_thread(void *arg)
{
    struct lane *l = arg;
    long lane_id = l - cfg.lanes;
    if (l->live) {
        bench_tag_check(l->live, cfg.size, l->tag, "free of predecessor's object");
        free(l->live);
    }
    void *temp[16];
    for (long i = 0; i < cfg.temp; i++) {
        size_t size = (size_t)16 << (i % 7); /* 16 .. 1024 bytes */
        void *p = malloc(size);
        bench_check_ptr(p, size, "malloc");
        uint64_t tag = bench_tag((uint64_t)lane_id, (uint64_t)i);
        bench_tag_write(p, size, tag);
        temp[i % 16] = p;
        if (i % 16 == 15 || i == cfg.temp - 1) {
            for (long k = i - i % 16; k <= i; k++) {
                size_t ks = (size_t)16 << (k % 7);
                bench_tag_check(temp[k % 16], ks, bench_tag((uint64_t)lane_id, (uint64_t)k),
                                "free of temporary");
                free(temp[k % 16]);
            }
        }
    }
    l->done++;
    l->tag = bench_tag((uint64_t)lane_id, (uint64_t)l->done);
    l->live = malloc(cfg.size);
    bench_check_ptr(l->live, cfg.size, "malloc");
    bench_tag_write(l->live, cfg.size, l->tag);
    return NULL;
}

static void lane_main(int tid, void *arg)
{
    (void)arg;
    struct lane *l = &cfg.lanes[tid];
    for (long k = 0; k < cfg.per_lane; k++) {
        pthread_t t;
        bench_thread_create(&t, NULL, short_thread, l);
        pthread_join(t, NULL);
        if (tid == 0 && k == cfg.per_lane / 10)
            cfg.rss_early = bench_rss();
    }
}

int main(int argc, char **argv)
{
    long threads = 1, n = 100000, size = 64, temp = 32;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "lanes running at once"),
        BENCH_INT("n", n, "short threads in total"),
        BENCH_INT("size", size, "bytes of the object each thread leaves"),
        BENCH_INT("temp", temp, "malloc/free pairs inside each thread"),
        BENCH_END,
    };
    bench_parse(argc, argv, "thread-churn",
                "n short threads, each leaving one object freed by its successor", opts);
    if (threads < 1 || n < threads || size < 1 || temp < 0)
        bench_fail("need threads, size >= 1, temp >= 0 and n >= threads");
    cfg.per_lane = n / threads;
    cfg.temp = temp;
    cfg.size = (size_t)size;
    size_t lbytes = (size_t)threads * sizeof(struct lane);
    cfg.lanes = bench_map(lbytes);
    size_t rss_start = bench_rss();

    double secs = bench_run_threads((int)threads, lane_main, NULL);

    size_t rss_end = bench_rss();
    for (long t = 0; t < threads; t++) {
        struct lane *l = &cfg.lanes[t];
        if (l->done != cfg.per_lane)
            bench_fail("lane %ld ran %ld threads, expected %ld", t, l->done, cfg.per_lane);
        bench_tag_check(l->live, cfg.size, l->tag, "final free");
        free(l->live);
    }
    bench_unmap(cfg.lanes, lbytes);
    const double mib = 1024.0 * 1024.0;
    bench_result((int)threads,
                 "n=%ld size=%ld temp=%ld seconds=%.9f rss_start_mib=%.2f rss_early_mib=%.2f "
                 "rss_end_mib=%.2f growth_mib=%.2f",
                 cfg.per_lane * threads, size, temp, secs, (double)rss_start / mib,
                 (double)cfg.rss_early / mib, (double)rss_end / mib,
                 ((double)rss_end - (double)cfg.rss_early) / mib);
    return 0;
}
