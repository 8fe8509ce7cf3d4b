/*
 * fastpath: N x { p = malloc(16); free(p); } in one thread — the cost of the allocator's
 * fast path. Meant to be run under `valgrind --tool=callgrind` twice with different N
 * (bench/fastpath.py does this), so that the difference in instructions divided by the
 * difference in N is the cost of one pair with start-up cost cancelled out.
 *
 * --empty=1 runs the same loop with the malloc/free calls replaced by the same
 * barriers, so the loop's own instructions can be subtracted.
 *
 * Validation: every pointer is checked for NULL in the loop (one compare, also present
 * in the empty loop), and before and after the loop a batch of blocks is tagged and
 * checked, so an allocator that hands out overlapping blocks fails here too.
 */
#include "common.h"

#include <stdlib.h>

#define CHECK_BATCH 1000

static void check_batch(size_t size)
{
    void *blocks[CHECK_BATCH];
    for (int i = 0; i < CHECK_BATCH; i++) {
        blocks[i] = malloc(size);
        bench_check_ptr(blocks[i], size, "batch");
        bench_tag_write(blocks[i], size, bench_tag(0, (uint64_t)i));
    }
    for (int i = 0; i < CHECK_BATCH; i++)
        bench_tag_check(blocks[i], size, bench_tag(0, (uint64_t)i), "batch");
    for (int i = 0; i < CHECK_BATCH; i++)
        free(blocks[i]);
}

/* The measured loops are kept out of line so that their code is the same whatever the
 * call site looks like. */
__attribute__((noinline)) static long pairs(long n, size_t size)
{
    long nulls = 0;
    for (long i = 0; i < n; i++) {
        void *p = malloc(size);
        bench_escape(p);
        nulls += (p == NULL);
        free(p);
    }
    return nulls;
}

__attribute__((noinline)) static long empty_pairs(long n, size_t size)
{
    long nulls = 0;
    for (long i = 0; i < n; i++) {
        void *p = (void *)(uintptr_t)size;
        bench_escape(p);
        nulls += (p == NULL);
        bench_escape(p);
    }
    return nulls;
}

int main(int argc, char **argv)
{
    long n = 1000000, size = 16, empty = 0;
    struct bench_opt opts[] = {
        BENCH_INT("n", n, "malloc+free pairs"),
        BENCH_INT("size", size, "bytes per malloc"),
        BENCH_INT("empty", empty, "1: loop without malloc/free (overhead)"),
        BENCH_END,
    };
    bench_parse(argc, argv, "fastpath", "N x { malloc(size); free; } single-threaded", opts);
    if (n < 0 || size < 1)
        bench_fail("need n >= 0 and size >= 1");

    check_batch((size_t)size);
    double t0 = bench_now();
    long nulls = empty ? empty_pairs(n, (size_t)size) : pairs(n, (size_t)size);
    double t1 = bench_now();
    if (nulls != 0)
        bench_fail("malloc(%ld) returned NULL %ld times", size, nulls);
    check_batch((size_t)size);

    double secs = t1 - t0;
    bench_result(1, "n=%ld size=%ld empty=%ld seconds=%.9f ns_per_pair=%.3f", n, size, empty, secs,
                 n ? secs * 1e9 / (double)n : 0.0);
    return 0;
}
