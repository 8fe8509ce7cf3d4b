/*
 * strings-grow (ours): `strings` strings grown one byte at a time in random order, each
 * step a new block one byte longer, a copy and a free of the old one, as an interpreter's
 * string concatenation grows them (gawk's `w[k] = w[k] "."`). Live data stays at the
 * strings' total length, while every string passes through the size classes one after
 * the other: what an allocator keeps of the classes the strings have left decides its
 * peak RSS. Reports the seconds and the live bytes at the end.
 *
 * Validation: each string holds a byte derived from its index and position at every
 * place; its first and last bytes are checked at every step, the whole string at the end.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char byte_of(size_t string, size_t at)
{
    return (unsigned char)(string * 31 + at * 7 + 1);
}

int main(int argc, char **argv)
{
    long strings = 5000, steps = 5200000;
    struct bench_opt opts[] = {
        BENCH_INT("strings", strings, "strings grown side by side"),
        BENCH_INT("steps", steps, "bytes added in all, one string at a time"),
        BENCH_END,
    };
    bench_parse(argc, argv, "strings-grow", "strings grown a byte at a time by malloc+copy+free",
                opts);
    if (strings < 1 || steps < 0)
        bench_fail("need strings >= 1 and steps >= 0");
    unsigned char **text = calloc((size_t)strings, sizeof *text);
    size_t *length = calloc((size_t)strings, sizeof *length);
    bench_check_ptr(text, (size_t)strings * sizeof *text, "calloc");
    bench_check_ptr(length, (size_t)strings * sizeof *length, "calloc");
    uint64_t state = 88172645463325252u;
    double t0 = bench_now();
    for (long i = 0; i < steps; i++) {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        size_t k = (size_t)(state % (uint64_t)strings), n = length[k];
        unsigned char *grown = malloc(n + 1);
        bench_check_ptr(grown, n + 1, "malloc");
        if (n) {
            if (text[k][0] != byte_of(k, 0) || text[k][n - 1] != byte_of(k, n - 1))
                bench_fail("string %zu lost its bytes at length %zu", k, n);
            memcpy(grown, text[k], n);
        }
        grown[n] = byte_of(k, n);
        free(text[k]);
        text[k] = grown;
        length[k] = n + 1;
    }
    double secs = bench_now() - t0;
    size_t live = 0;
    for (size_t k = 0; k < (size_t)strings; k++) {
        for (size_t at = 0; at < length[k]; at++)
            if (text[k][at] != byte_of(k, at))
                bench_fail("string %zu holds a wrong byte at %zu", k, at);
        live += length[k];
        free(text[k]);
    }
    free(text);
    free(length);
    bench_result(1, "strings=%ld steps=%ld seconds=%.9f live=%zu", strings, steps, secs, live);
    return 0;
}
