/*
 * calloc-sparse (ours): large zeroed tables that the program touches sparsely, as a hash
 * table or a bitmap is: `rounds` blocks of 1 MiB to `max_mib` MiB (pseudo-random sizes,
 * the same sequence every run), each from calloc, written at one page in `stride` and
 * freed. A reused block that is cleared by writing zeros over it faults in every page,
 * where the program touches one in `stride`. Reports the seconds.
 *
 * Validation: every byte the program reads before writing it (the first of each page it
 * touches, and the block's last) must be zero.
 */
#include "common.h"

#include <stdlib.h>

#define PAGE 4096

int main(int argc, char **argv)
{
    long rounds = 300, max_mib = 50, stride = 16;
    struct bench_opt opts[] = {
        BENCH_INT("rounds", rounds, "blocks, one after the other"),
        BENCH_INT("max_mib", max_mib, "the biggest block, in MiB (the smallest is 1 MiB)"),
        BENCH_INT("stride", stride, "pages between the pages the program writes"),
        BENCH_END,
    };
    bench_parse(argc, argv, "calloc-sparse", "large calloc'd tables written at one page in stride",
                opts);
    if (rounds < 1 || max_mib < 1 || stride < 1)
        bench_fail("need rounds, max_mib and stride of at least 1");
    uint64_t rng = 12345;
    double t0 = bench_now();
    for (long r = 0; r < rounds; r++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        size_t size = (size_t)(1 + (long)((rng >> 33) % (uint64_t)max_mib)) << 20;
        unsigned char *p = calloc(1, size);
        bench_check_ptr(p, size, "calloc");
        for (size_t off = 0; off < size; off += (size_t)stride * PAGE) {
            if (p[off] != 0)
                bench_fail("calloc(1, %zu): byte %zu is %d, not 0", size, off, p[off]);
            p[off] = 1;
        }
        if (p[size - 1] != 0)
            bench_fail("calloc(1, %zu): its last byte is %d, not 0", size, p[size - 1]);
        p[size - 1] = 1;
        free(p);
    }
    double secs = bench_now() - t0;
    bench_result(1, "rounds=%ld max_mib=%ld stride=%ld seconds=%.9f", rounds, max_mib, stride,
                 secs);
    return 0;
}
