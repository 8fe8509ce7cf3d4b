/*
 * realloc-grow (ours): a buffer grown by realloc a few bytes at a time, as a program
 * reading input of unknown length grows it, from `step` bytes to `max`; `rounds` times,
 * freeing it between rounds. Reports the seconds and how many times the buffer moved.
 *
 * Validation: every step writes the buffer's new last byte; every move must keep the
 * bytes written so far (checked at four places: the start, a quarter, half and the end).
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static unsigned char byte_at(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 12));
}

static void check_kept(const unsigned char *p, size_t n)
{
    const size_t at[] = {0, n / 4, n / 2, n - 1};
    for (int i = 0; i < 4; i++)
        if (p[at[i]] != byte_at(at[i]))
            bench_fail("realloc lost byte %zu of %zu when it moved the buffer", at[i], n);
}

int main(int argc, char **argv)
{
    long max = 64L << 20, step = 16, rounds = 1;
    struct bench_opt opts[] = {
        BENCH_INT("max", max, "the buffer's final size"),
        BENCH_INT("step", step, "bytes added by each realloc"),
        BENCH_INT("rounds", rounds, "buffers grown, one after the other"),
        BENCH_END,
    };
    bench_parse(argc, argv, "realloc-grow", "one buffer grown by realloc, step bytes at a time",
                opts);
    if (step < 1 || max < step || rounds < 1)
        bench_fail("need 1 <= step <= max and rounds >= 1");
    long moves = 0;
    double t0 = bench_now();
    for (long r = 0; r < rounds; r++) {
        unsigned char *p = NULL;
        for (size_t n = (size_t)step; n <= (size_t)max; n += (size_t)step) {
            unsigned char *q = realloc(p, n);
            bench_check_ptr(q, n, "realloc");
            if (q != p && p) {
                moves++;
                check_kept(q, n - (size_t)step);
            }
            for (size_t i = n - (size_t)step; i < n; i++)
                q[i] = byte_at(i);
            p = q;
        }
        check_kept(p, (size_t)max / (size_t)step * (size_t)step);
        free(p);
    }
    double secs = bench_now() - t0;
    bench_result(1, "max=%ld step=%ld rounds=%ld seconds=%.9f moves=%ld", max, step, rounds, secs,
                 moves);
    return 0;
}
