/*
 * recycle (Streamflow, Schneider et al., ISMM 2006, §4.2.2): each thread allocates n
 * objects with sizes drawn from [min, max] and frees everything it holds after every
 * `rate` allocations — purely thread-local allocation, so it measures sequential speed
 * and its scaling. The work grows with the thread count. Published: 10^7 objects of 8
 * bytes per thread, rate = 1,000.
 *
 * Validation: every object carries a tag (thread, index), checked before free.
 */
#include "common.h"

#include <stdlib.h>

struct ctx {
    long n, rate, min, max;
};

static void worker(int tid, void *arg)
{
    const struct ctx *c = arg;
    size_t bytes = (size_t)c->rate * (sizeof(void *) + sizeof(uint32_t));
    void **blocks = bench_map(bytes);
    uint32_t *sizes = (uint32_t *)(blocks + c->rate);
    struct bench_rng rng;
    bench_rng_seed(&rng, (uint64_t)tid);
    uint64_t span = (uint64_t)(c->max - c->min + 1);
    long held = 0;
    for (long i = 0; i < c->n; i++) {
        size_t size = (size_t)c->min + (span > 1 ? bench_rng_below(&rng, span) : 0);
        void *p = malloc(size);
        bench_check_ptr(p, size, "malloc");
        bench_tag_write(p, size, bench_tag((uint64_t)tid, (uint64_t)i));
        blocks[held] = p;
        sizes[held] = (uint32_t)size;
        if (++held == c->rate || i == c->n - 1) {
            long first = i + 1 - held;
            for (long k = 0; k < held; k++) {
                bench_tag_check(blocks[k], sizes[k],
                                bench_tag((uint64_t)tid, (uint64_t)(first + k)), "free");
                free(blocks[k]);
            }
            held = 0;
        }
    }
    bench_unmap(blocks, bytes);
}

int main(int argc, char **argv)
{
    long threads = 1, n = 10000000, rate = 1000, min = 8, max = 8;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "independent threads"),
        BENCH_INT("n", n, "objects allocated per thread"),
        BENCH_INT("rate", rate, "free everything held after this many mallocs"),
        BENCH_INT("min", min, "smallest object size"),
        BENCH_INT("max", max, "largest object size"),
        BENCH_END,
    };
    bench_parse(argc, argv, "recycle",
                "each thread: n mallocs of min..max bytes, freeing all every rate", opts);
    if (threads < 1 || n < 1 || rate < 1 || min < 1 || max < min || max > 1 << 30)
        bench_fail("need threads, n, rate, min >= 1 and min <= max");
    struct ctx c = {.n = n, .rate = rate, .min = min, .max = max};
    double secs = bench_run_threads((int)threads, worker, &c);
    bench_result((int)threads, "n=%ld rate=%ld min=%ld max=%ld seconds=%.9f mops=%.3f", n, rate,
                 min, max, secs, 2.0 * (double)n * (double)threads / secs / 1e6);
    return 0;
}
