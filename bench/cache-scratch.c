/*
 * cache-scratch (Hoard; LRMalloc thesis §6.1; llheap §Cache Scratch): the main thread
 * allocates one small object per worker, all together (so they likely share cache
 * lines), and hands one to each worker. Each worker frees the object it was given, then
 * repeats `iterations` times { malloc(size); read/write it rw times; free }. An
 * allocator that gives a freed object straight back to the freeing thread instead of
 * its owner keeps the program's false sharing alive (passive false sharing).
 * Published (llheap): 1,000 iterations, 1,000,000 read/writes, 8-byte objects.
 *
 * Validation: the handed-over objects carry tags checked by the worker before it frees
 * them; the loop objects are checked as in cache-thrash.
 */
#include "thrash.h"

#include <stdlib.h>

struct ctx {
    long iterations, rw;
    size_t size;
    void **handed;
};

static void worker(int tid, void *arg)
{
    const struct ctx *c = arg;
    bench_tag_check(c->handed[tid], c->size, bench_tag(0xffff, (uint64_t)tid), "handed over");
    free(c->handed[tid]);
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
        BENCH_INT("threads", threads, "worker threads, each doing all iterations"),
        BENCH_INT("iterations", iterations, "malloc/write/free cycles per thread"),
        BENCH_INT("rw", rw, "byte read-modify-writes per object"),
        BENCH_INT("size", size, "bytes per object"),
        BENCH_END,
    };
    bench_parse(argc, argv, "cache-scratch",
                "main allocates one object per worker; each frees it, then thrashes", opts);
    if (threads < 1 || iterations < 1 || rw < 1 || size < 1)
        bench_fail("need every knob >= 1");
    size_t bytes = (size_t)threads * sizeof(void *);
    struct ctx c = {
        .iterations = iterations, .rw = rw, .size = (size_t)size, .handed = bench_map(bytes)};
    for (long t = 0; t < threads; t++) {
        c.handed[t] = malloc(c.size);
        bench_check_ptr(c.handed[t], c.size, "malloc");
        bench_tag_write(c.handed[t], c.size, bench_tag(0xffff, (uint64_t)t));
    }
    double secs = bench_run_threads((int)threads, worker, &c);
    bench_unmap(c.handed, bytes);
    bench_result((int)threads, "iterations=%ld rw=%ld size=%ld seconds=%.9f", iterations, rw, size,
                 secs);
    return 0;
}
