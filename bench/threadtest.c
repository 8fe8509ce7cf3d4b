/*
 * threadtest (Berger et al., Hoard, ASPLOS 2000; used by LRMalloc thesis §6.1, NBBS §5
 * and llheap): each thread runs rounds of { malloc n/threads blocks of 8 bytes; free
 * them in allocation order }. The total work is split across the threads, so ideal
 * scaling shows as falling time. Published: 100 rounds of 100,000 objects, 8 bytes.
 *
 * Validation: every block carries a tag (thread, round, index), checked before free.
 */
#include "common.h"

#include <stdlib.h>

struct ctx {
    long rounds;
    long per_thread;
    size_t size;
};

static void worker(int tid, void *arg)
{
    const struct ctx *c = arg;
    size_t bytes = (size_t)c->per_thread * sizeof(void *);
    void **blocks = bench_map(bytes);
    for (long r = 0; r < c->rounds; r++) {
        uint64_t owner = ((uint64_t)tid << 20) | (uint64_t)r;
        for (long i = 0; i < c->per_thread; i++) {
            void *p = malloc(c->size);
            bench_check_ptr(p, c->size, "malloc");
            bench_tag_write(p, c->size, bench_tag(owner, (uint64_t)i));
            blocks[i] = p;
        }
        for (long i = 0; i < c->per_thread; i++) {
            bench_tag_check(blocks[i], c->size, bench_tag(owner, (uint64_t)i), "free");
            free(blocks[i]);
        }
    }
    bench_unmap(blocks, bytes);
}

int main(int argc, char **argv)
{
    long threads = 1, rounds = 100, n = 100000, size = 8;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads sharing the work"),
        BENCH_INT("rounds", rounds, "rounds of malloc-all, free-all"),
        BENCH_INT("n", n, "objects per round, split across threads"),
        BENCH_INT("size", size, "bytes per object"),
        BENCH_END,
    };
    bench_parse(argc, argv, "threadtest",
                "rounds x { n/threads mallocs, then frees in order } per thread", opts);
    if (threads < 1 || rounds < 1 || n < threads || size < 1)
        bench_fail("need threads, rounds, size >= 1 and n >= threads");
    struct ctx c = {.rounds = rounds, .per_thread = n / threads, .size = (size_t)size};
    double secs = bench_run_threads((int)threads, worker, &c);
    double ops = 2.0 * (double)c.per_thread * (double)threads * (double)rounds;
    bench_result((int)threads, "rounds=%ld n=%ld size=%ld seconds=%.9f mops=%.3f", rounds, n, size,
                 secs, ops / secs / 1e6);
    return 0;
}
