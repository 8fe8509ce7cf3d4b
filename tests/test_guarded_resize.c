/*
 * realloc of large blocks keeps them where they are as often in the secure build as in
 * the release build, and the secure build's guard page still ends each block after every
 * resize (src/heap.c, heap_large_resize; docs/HARDENING.md).
 *
 * The secure build once moved and copied a large block at every resize, because its
 * guard page ended the block: a buffer grown a page at a time to 16 MiB was copied 4,096
 * times. A run keeps its guard at its end, so a block that grows or shrinks inside its
 * run stays; a block of its own mapping (above 64 MiB) opens its guard, is resized by the
 * kernel and closes the guard at its new end.
 *
 * Run with any build preloaded; with the argument `guarded` (the secure build) it also
 * checks, in a child process, that a write to the first byte past the usable size faults.
 */
#include "testutil.h"

#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>

static int expect_guard;

/* The byte at block + i, a function of its offset only. */
static unsigned char pattern(size_t i)
{
    return (unsigned char)(i * 131 + (i >> 12));
}

static void fill(unsigned char *block, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        block[i] = pattern(i);
}

/* Offsets checked: both ends and one byte in every page between. */
static int intact(const unsigned char *block, size_t size)
{
    for (size_t i = 0; i < size; i += 4093)
        if (block[i] != pattern(i))
            return 0;
    return size == 0 || block[size - 1] == pattern(size - 1);
}

/* In the secure build, writing the first byte past the usable size kills a child. */
static void guard_ends(unsigned char *block)
{
    if (!expect_guard)
        return;
    size_t usable = malloc_usable_size(block);
    fflush(NULL);
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        *(volatile unsigned char *)(block + usable) = 1;
        _exit(0);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGSEGV)
        fprintf(stderr, "  a write past %zu usable bytes at %p did not fault (status %#x)\n",
                usable, (void *)block, (unsigned)status);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
}

/* From 40 KiB to 8 MiB a page at a time, then back down: each block of an arena run. */
static void run_block_stays_while_it_fits(void)
{
    size_t size = 40 * 1024, steps = 0, moves = 0;
    unsigned char *block = malloc(size);
    REQUIRE(block);
    fill(block, 0, size);
    guard_ends(block);
    for (; size < ((size_t)8 << 20); size += 4096) {
        unsigned char *grown = realloc(block, size + 4096);
        REQUIRE(grown);
        steps++;
        moves += grown != block;
        block = grown;
        fill(block, size, size + 4096);
        if (steps % 256 == 0) {
            CHECK(intact(block, size + 4096));
            guard_ends(block);
        }
    }
    CHECK(intact(block, size));
    for (; size > 40 * 1024; size -= 4096) {
        unsigned char *shrunk = realloc(block, size - 4096);
        REQUIRE(shrunk);
        steps++;
        moves += shrunk != block;
        block = shrunk;
        if (steps % 256 == 0) {
            CHECK(intact(block, size - 4096));
            guard_ends(block);
        }
    }
    CHECK(intact(block, size));
    guard_ends(block);
    free(block);
    /* A run holds up to a quarter more than its block, so a block a page at a time moves
     * a few times for every doubling of its size, on the way up and on the way down;
     * every step moved it before. */
    printf("  %zu resizes of a run, %zu moves\n", steps, moves);
    CHECK(moves <= steps / 16);
}

/* Above 64 MiB, a mapping of its own: grown and shrunk 256 KiB at a time. */
static void mapped_block_keeps_its_guard(void)
{
    size_t size = (size_t)65 << 20, step = 256 * 1024, moves = 0;
    unsigned char *block = malloc(size);
    REQUIRE(block);
    fill(block, 0, size);
    guard_ends(block);
    for (int i = 0; i < 16; i++) {
        unsigned char *grown = realloc(block, size + step);
        REQUIRE(grown);
        moves += grown != block;
        block = grown;
        fill(block, size, size + step);
        size += step;
        if (i % 4 == 3) {
            CHECK(intact(block, size));
            guard_ends(block);
        }
    }
    for (int i = 0; i < 8; i++) {
        unsigned char *shrunk = realloc(block, size - step);
        REQUIRE(shrunk);
        CHECK(shrunk == block);
        block = shrunk;
        size -= step;
        if (i % 4 == 3) {
            CHECK(intact(block, size));
            guard_ends(block);
        }
    }
    /* Moves depend on what the kernel put after the block: printed, not judged. */
    printf("  16 growths of a mapped block, %zu moves\n", moves);
    free(block);
}

/* A zero-filled block of its own mapping, written whole, shrunk in place and grown again
 * (where it is, and moved): every byte it gained reads as zero. The secure build's guard
 * page of the shrunk block lies over bytes the program wrote; growing again once showed
 * them (found by a probe that ran mimalloc's API tests against the sticky zero fill). */
static void mapped_zero_fill_gains_zeros(void)
{
    static const size_t mib[][3] = {{70, 35, 60}, {70, 68, 80}, {66, 65, 66}};
    for (size_t k = 0; k < sizeof mib / sizeof mib[0]; k++) {
        size_t first = mib[k][0] << 20, shrunk = mib[k][1] << 20, grown = mib[k][2] << 20;
        unsigned char *block = calloc(1, first);
        REQUIRE(block);
        memset(block, 0x11, malloc_usable_size(block));
        unsigned char *small = realloc(block, shrunk);
        REQUIRE(small);
        CHECK(small == block);
        unsigned char *big = realloc(small, grown);
        REQUIRE(big);
        size_t nonzero = 0, at = 0;
        for (size_t i = shrunk; i < grown; i++)
            if (big[i] != 0 && nonzero++ == 0)
                at = i;
        if (nonzero)
            fprintf(stderr, "  %zu -> %zu -> %zu MiB: %zu gained bytes not zero, first at %zu\n",
                    mib[k][0], mib[k][1], mib[k][2], nonzero, at);
        CHECK(nonzero == 0);
        CHECK(big[0] == 0x11 && big[shrunk - 1] == 0x11);
        guard_ends(big);
        free(big);
    }
}

/* llheap's query, which lfheap defines. */
size_t malloc_size(void *ptr) __attribute__((weak));

/* A large block from plain malloc (and from realloc of a small one) knows its request
 * exactly: the secure build once recorded the 8 bytes of a small block's tail canary
 * with it, which a large block, ended by its guard page, does not have. */
static void large_requests_are_recorded_exactly(void)
{
    REQUIRE(malloc_size != NULL);
    static const size_t sizes[] = {32 * 1024 + 1, 100000, 3 << 20, 100 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        void *p = malloc(sizes[i]);
        REQUIRE(p);
        CHECK(malloc_size(p) == sizes[i] && malloc_usable_size(p) >= sizes[i]);
        free(p);
        void *q = realloc(malloc(100), sizes[i]);
        REQUIRE(q);
        CHECK(malloc_size(q) == sizes[i] && malloc_usable_size(q) >= sizes[i]);
        free(q);
    }
}

/* A realloc to any size up to the usable size keeps a large block where it is: the
 * secure build counted a small block's 8-byte tail canary in the new size, so a size in
 * the last 8 bytes asked for one more page, and the block moved (copied) every time. */
static void realloc_to_the_usable_size_stays(void)
{
    static const size_t sizes[] = {100000, 877745, 3 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        unsigned char *block = malloc(sizes[i]);
        REQUIRE(block);
        size_t usable = malloc_usable_size(block);
        fill(block, 0, usable);
        size_t moves = 0;
        for (size_t back = 0; back <= 16; back++) {
            unsigned char *same = realloc(block, usable - back);
            REQUIRE(same);
            moves += same != block;
            block = same;
        }
        CHECK(moves == 0);
        CHECK(malloc_usable_size(block) >= usable - 16 && intact(block, usable - 16));
        guard_ends(block);
        free(block);
    }
}

int main(int argc, char **argv)
{
    expect_guard = argc > 1 && strcmp(argv[1], "guarded") == 0;
    RUN(run_block_stays_while_it_fits);
    RUN(mapped_block_keeps_its_guard);
    RUN(mapped_zero_fill_gains_zeros);
    RUN(large_requests_are_recorded_exactly);
    RUN(realloc_to_the_usable_size_stays);
    return test_exit_status();
}
