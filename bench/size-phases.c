/*
 * size-phases (ours): a program that moves through block sizes. Each phase allocates
 * `--mib` MiB of blocks of one size, writes every byte, and frees them all; the sizes go
 * from 64 B up to 48 MiB, a factor of four (three at the end) apart, and the whole climb
 * runs `--rounds` times. What a phase frees is resident but of a size the next phase
 * does not ask for: an allocator that can give freed memory to a bigger or a smaller size
 * reuses it, one that cannot faults the next phase's pages in. Reports the seconds; the
 * page faults are `/usr/bin/time`'s (docs/BENCHMARKS.md, *Where lfheap is behind*).
 *
 * Validation: every block holds a byte derived from its index; its first and last bytes
 * are checked before it is freed.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const size_t phase_sizes[] = {
    64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 48 << 20,
};
#define PHASES (sizeof phase_sizes / sizeof *phase_sizes)

int main(int argc, char **argv)
{
    long rounds = 2, mib = 120;
    struct bench_opt opts[] = {
        BENCH_INT("rounds", rounds, "climbs through the sizes"),
        BENCH_INT("mib", mib, "MiB allocated in each phase"),
        BENCH_END,
    };
    bench_parse(argc, argv, "size-phases", "phases of one block size each, freed before the next",
                opts);
    if (rounds < 1 || mib < 48)
        bench_fail("need rounds >= 1 and mib >= 48");
    size_t bytes = (size_t)mib << 20, most = bytes / phase_sizes[0];
    unsigned char **blocks = malloc(most * sizeof *blocks);
    bench_check_ptr(blocks, most * sizeof *blocks, "malloc");
    double t0 = bench_now();
    for (long round = 0; round < rounds; round++)
        for (size_t phase = 0; phase < PHASES; phase++) {
            size_t size = phase_sizes[phase], count = bytes / size;
            for (size_t i = 0; i < count; i++) {
                blocks[i] = malloc(size);
                bench_check_ptr(blocks[i], size, "malloc");
                memset(blocks[i], (int)(i * 131 + phase), size);
            }
            for (size_t i = 0; i < count; i++) {
                unsigned char want = (unsigned char)(i * 131 + phase);
                if (blocks[i][0] != want || blocks[i][size - 1] != want)
                    bench_fail("block %zu of %zu bytes lost its contents", i, size);
                free(blocks[i]);
            }
        }
    double secs = bench_now() - t0;
    free(blocks);
    bench_result(1, "rounds=%ld mib=%ld seconds=%.9f", rounds, mib, secs);
    return 0;
}
