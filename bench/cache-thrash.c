/*
 * cache-thrash (Hoard; LRMalloc thesis §6.1; llheap §Cache Thrash): each thread
 * repeats `iterations` times { malloc(size); read/write it rw times; free }. Objects of
 * different threads that share a cache line slow everyone down: this shows whether
 * the allocator itself induces (active) false sharing. Work grows with the threads.
 * Published (llheap): 1,000 iterations, 1,000,000 read/writes, 8-byte objects.
 */
#include "thrash.h"

#include <stdlib.h>

struct ctx {
    long iterations, rw;
    size_t size;
};

static void worker(int tid, void *arg)
{
    const struct ctx *c = arg;
    for (long i = 0; i < c->iterations; i++) {
        void *p = malloc(c->size);
        bench_check_ptr(p, c->size, "malloc");
        thrash_object(p, c->size, c->rw, ((uint64_t)tid << 32) | (uint64_t)i);
        free(p);
    }
}

int main(int argc, char **argv)
{
    long threads = 1, iterations = 1000, rw = 1000000, size = 8;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads, each doing all iterations"),
        BENCH_INT("iterations", iterations, "malloc/write/free cycles per thread"),
        BENCH_INT("rw", rw, "byte read-modify-writes per object"),
        BENCH_INT("size", size, "bytes per object"),
        BENCH_END,
    };
    bench_parse(argc, argv, "cache-thrash",
                "each thread: iterations x { malloc(size); rw writes; free }", opts);
    if (threads < 1 || iterations < 1 || rw < 1 || size < 1)
        bench_fail("need every knob >= 1");
    struct ctx c = {.iterations = iterations, .rw = rw, .size = (size_t)size};
    double secs = bench_run_threads((int)threads, worker, &c);
    bench_result((int)threads, "iterations=%ld rw=%ld size=%ld seconds=%.9f", iterations, rw, size,
                 secs);
    return 0;
}
