/*
 * realloc-many (ours): `buffers` buffers grown round-robin by appends of 100-999 bytes,
 * each given an eighth more than its new length by realloc whenever an append finds it
 * full (how CPython grows a bytearray), `appends` appends in all. Many buffers of about
 * the same size grow at once, so a buffer that must move competes with the others for
 * room, where realloc-grow grows one alone. Reports the seconds and how many times a
 * buffer moved.
 *
 * Validation: every appended byte is derived from its buffer and position; each move
 * must keep the bytes written so far (checked at four places), and at the end every byte
 * of every buffer is checked.
 */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

static unsigned char byte_at(size_t buffer, size_t i)
{
    return (unsigned char)(i * 131 + (i >> 12) + buffer * 7);
}

static void check_kept(const unsigned char *p, size_t buffer, size_t n)
{
    const size_t at[] = {0, n / 4, n / 2, n - 1};
    for (int i = 0; i < 4 && n > 0; i++)
        if (p[at[i]] != byte_at(buffer, at[i]))
            bench_fail("realloc lost byte %zu of %zu of buffer %zu when it moved it", at[i], n,
                       buffer);
}

int main(int argc, char **argv)
{
    long buffers = 64, appends = 400000;
    struct bench_opt opts[] = {
        BENCH_INT("buffers", buffers, "buffers grown round-robin"),
        BENCH_INT("appends", appends, "appends in all"),
        BENCH_END,
    };
    bench_parse(argc, argv, "realloc-many", "buffers grown round-robin by realloc", opts);
    if (buffers < 1 || appends < 1)
        bench_fail("need buffers >= 1 and appends >= 1");
    unsigned char **buf = calloc((size_t)buffers, sizeof *buf);
    size_t *len = calloc((size_t)buffers, sizeof *len);
    size_t *cap = calloc((size_t)buffers, sizeof *cap);
    if (!buf || !len || !cap)
        bench_fail("out of memory for the bookkeeping");
    long moves = 0;
    double t0 = bench_now();
    for (long a = 0; a < appends; a++) {
        size_t j = (size_t)(a % buffers), add = 100 + (size_t)a % 900, need = len[j] + add;
        if (need > cap[j]) {
            size_t grown = need + need / 8 + 6;
            unsigned char *q = realloc(buf[j], grown);
            bench_check_ptr(q, grown, "realloc");
            if (q != buf[j] && buf[j]) {
                moves++;
                check_kept(q, j, len[j]);
            }
            buf[j] = q;
            cap[j] = grown;
        }
        for (size_t i = len[j]; i < need; i++)
            buf[j][i] = byte_at(j, i);
        len[j] = need;
    }
    double secs = bench_now() - t0;
    for (size_t j = 0; j < (size_t)buffers; j++) {
        for (size_t i = 0; i < len[j]; i++)
            if (buf[j][i] != byte_at(j, i))
                bench_fail("buffer %zu lost byte %zu of %zu", j, i, len[j]);
        free(buf[j]);
    }
    free(buf);
    free(len);
    free(cap);
    bench_result(1, "buffers=%ld appends=%ld seconds=%.9f moves=%ld", buffers, appends, secs,
                 moves);
    return 0;
}
