/*
 * A real out-of-memory run, without any injection: tests/suites/oom.sh runs this plain
 * program with the release library preloaded under `ulimit -v 1048576`. It allocates a
 * mix of block kinds (huge, large, medium, small, calloc'd) in turn until each of them
 * fails, so the kernel's mmap refuses lfheap at every layer; every failure must be NULL
 * with ENOMEM and every block must keep its contents. Then everything is freed and the
 * same fill runs again: memory came back, so every kind of block is had again and the
 * second fill gets nearly as far as the first.
 */
#include "testutil.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* The kinds of block, largest first: huge (its own mapping), large (arena chunks),
 * medium and small (superblocks), and calloc'd large blocks. */
static const size_t kinds[] = {100 * MIB, 16 * MIB, MIB, 40 * KIB, KIB, 64};
#define KINDS       (sizeof kinds / sizeof kinds[0])
#define CALLOC_KIND KINDS /* one more kind: calloc(1, 4 MiB) */
#define CALLOC_SIZE (4 * MIB)

/* Each block starts with this header (which chains all blocks) and carries its tag in
 * its last word and in the first word of its middle page: the first, middle and last
 * pages are all that is touched, so huge blocks cost no resident memory. */
struct header {
    struct header *next;
    size_t size;
    uint64_t tag;
};

struct fill {
    struct header *blocks;
    size_t count[KINDS + 1];
    size_t bytes;
    int bad_errno;
    int corrupt;
};

static size_t middle(size_t size)
{
    return size / 2 & ~(size_t)7;
}

static void stamp(struct header *h, size_t size, uint64_t tag)
{
    h->size = size;
    h->tag = tag;
    if (size >= 2 * sizeof(struct header)) {
        memcpy((char *)h + size - 8, &tag, 8);
        if (middle(size) >= sizeof(struct header))
            memcpy((char *)h + middle(size), &tag, 8);
    }
}

static int intact(const struct header *h)
{
    uint64_t end = h->tag, mid = h->tag;
    if (h->size >= 2 * sizeof(struct header)) {
        memcpy(&end, (const char *)h + h->size - 8, 8);
        if (middle(h->size) >= sizeof(struct header))
            memcpy(&mid, (const char *)h + middle(h->size), 8);
    }
    return end == h->tag && mid == h->tag;
}

static int reads_zero(const char *p, size_t size)
{
    static const size_t at[] = {0, 1, 2};
    for (int i = 0; i < 3; i++) {
        const char *page = p + (size - 4 * KIB) / 2 * at[i];
        for (size_t j = 0; j < 4 * KIB; j++)
            if (page[j])
                return 0;
    }
    return 1;
}

/* Allocates one block of each kind still left in turn until every kind has failed. */
static void fill(struct fill *f)
{
    memset(f, 0, sizeof *f);
    int failed[KINDS + 1] = {0};
    int left = KINDS + 1;
    uint64_t tag = 0x5eed;
    while (left > 0) {
        for (size_t k = 0; k <= KINDS; k++) {
            if (failed[k])
                continue;
            size_t size = k == CALLOC_KIND ? CALLOC_SIZE : kinds[k];
            errno = 0;
            struct header *h = k == CALLOC_KIND ? calloc(1, size) : malloc(size);
            if (!h) {
                if (errno != ENOMEM)
                    f->bad_errno++;
                failed[k] = 1;
                left--;
                continue;
            }
            if (k == CALLOC_KIND && !reads_zero((char *)h, size))
                f->corrupt++;
            stamp(h, size, tag++ * 0x9e3779b97f4a7c15u);
            h->next = f->blocks;
            f->blocks = h;
            f->count[k]++;
            f->bytes += size;
        }
    }
}

static void check_and_free(struct fill *f)
{
    while (f->blocks) {
        struct header *h = f->blocks;
        f->blocks = h->next;
        if (!intact(h))
            f->corrupt++;
        free(h);
    }
}

static struct fill first, second;

static void fills_until_enomem_and_recovers(void)
{
    fill(&first);
    check_and_free(&first);
    CHECK(first.bad_errno == 0);
    CHECK(first.corrupt == 0);
    for (size_t k = 0; k <= KINDS; k++)
        CHECK(first.count[k] > 0);
    /* Memory is back: the same fill gets every kind again and nearly as far. */
    fill(&second);
    check_and_free(&second);
    CHECK(second.bad_errno == 0);
    CHECK(second.corrupt == 0);
    for (size_t k = 0; k <= KINDS; k++)
        CHECK(second.count[k] > 0);
    CHECK(second.bytes >= first.bytes / 10 * 9);
    printf("# first fill %zu MiB (%zu huge, %zu large), second %zu MiB (%zu huge, %zu large)\n",
           first.bytes >> 20, first.count[0], first.count[1], second.bytes >> 20, second.count[0],
           second.count[1]);
}

int main(void)
{
    /* stdout's buffer before memory runs out */
    printf("# filling the address space\n");
    fflush(stdout);
    RUN(fills_until_enomem_and_recovers);
    return test_exit_status();
}
