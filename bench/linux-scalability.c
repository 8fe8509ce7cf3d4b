/*
 * linux-scalability (Lever & Boreham, "malloc() performance in a multithreaded Linux
 * environment", USENIX 2000; used by LRMalloc thesis §6.1 and NBBS §5): each thread
 * independently mallocs N blocks of 16 bytes, then frees them in allocation order.
 * Published: N = 10,000,000 per thread.
 *
 * Validation: each block gets a tag (thread, index) when allocated, checked before it
 * is freed. The published program does not touch its blocks; writing the tag does, so
 * allocators that never touch fresh memory lose a little of their edge here.
 */
#include "common.h"

#include <stdlib.h>

struct ctx {
    long n;
    size_t size;
};

static void worker(int tid, void *arg)
{
    const struct ctx *c = arg;
    size_t bytes = (size_t)c->n * sizeof(void *);
    void **blocks = bench_map(bytes);
    for (long i = 0; i < c->n; i++) {
        void *p = malloc(c->size);
        bench_check_ptr(p, c->size, "malloc");
        bench_tag_write(p, c->size, bench_tag((uint64_t)tid, (uint64_t)i));
        blocks[i] = p;
    }
    for (long i = 0; i < c->n; i++) {
        bench_tag_check(blocks[i], c->size, bench_tag((uint64_t)tid, (uint64_t)i), "free");
        free(blocks[i]);
    }
    bench_unmap(blocks, bytes);
}

int main(int argc, char **argv)
{
    long threads = 1, n = 10000000, size = 16;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "independent threads"),
        BENCH_INT("n", n, "mallocs per thread, then as many frees"),
        BENCH_INT("size", size, "bytes per block"),
        BENCH_END,
    };
    bench_parse(argc, argv, "linux-scalability",
                "each thread: n x malloc(size), then free them in allocation order", opts);
    if (threads < 1 || n < 1 || size < 1)
        bench_fail("need threads, n and size >= 1");
    struct ctx c = {.n = n, .size = (size_t)size};
    double secs = bench_run_threads((int)threads, worker, &c);
    bench_result((int)threads, "n=%ld size=%ld seconds=%.9f mops=%.3f", n, size, secs,
                 2.0 * (double)n * (double)threads / secs / 1e6);
    return 0;
}
