/*
 * Errors valgrind's memcheck must find in lfheap's blocks (tests/suites/memcheck.sh runs
 * it with lfheap preloaded and expects each report): proof that memcheck watches
 * lfheap's own malloc and free through its client requests, not a replacement
 * allocator. Each error is made once, on purpose; the program itself succeeds.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* volatile: the compiler must not see through the errors (nor warn about them). */
static char *volatile kept, *volatile stale;

/* Loses a block: out of line, so that no register of main's keeps its address. */
static __attribute__((noinline)) void lose_a_block(void)
{
    kept = malloc(77);
    memset(kept, 4, 77);
    kept = NULL;
}

/* A decision on a large block malloc did not initialise, fresh from the kernel (its pages
 * read as zeros, which malloc does not promise): memcheck must report each, in these
 * functions by name (out of line for that). One block from an arena's run, one of a
 * mapping of its own (memcheck reported neither, or only the first, before 2026-12-07). */
static __attribute__((noinline)) void decide_on_fresh_run(void)
{
    char *volatile block = malloc(100000);
    REQUIRE(block);
    if (block[50000] == 42)
        puts("unlikely");
    free(block);
}

static __attribute__((noinline)) void decide_on_fresh_mapping(void)
{
    char *volatile block = malloc((size_t)80 << 20);
    REQUIRE(block);
    if (block[(size_t)40 << 20] == 42)
        puts("unlikely");
    free(block);
}

int main(void)
{
    decide_on_fresh_run();
    decide_on_fresh_mapping();

    /* A read after free of a small block (past its first word: lfheap links free small
     * blocks through it, so memcheck lets lfheap, and the program, address it). */
    char *small = malloc(40);
    memset(small, 1, 40);
    stale = small;
    free(small);
    volatile char after_free = stale[20];
    (void)after_free;

    /* A large block: a write after free. */
    char *large = malloc(300000);
    memset(large, 2, 300000);
    stale = large;
    free(large);
    stale[1000] = 3;

    /* A decision on memory malloc did not initialise (not bytes 8 to 15, the free mark's
     * word, which lfheap clears when it hands a block out). */
    int *volatile fresh = malloc(sizeof *fresh * 8);
    if (fresh[5] == 42)
        puts("unlikely");
    free(fresh);

    /* Blocks lost for good: the leak check must find them. Not the first block of a
     * superblock (lfheap's descriptor points at that one, which keeps it reachable), and
     * three of them: a stale copy of the last address somewhere may keep one reachable. */
    char *first = malloc(77);
    lose_a_block();
    lose_a_block();
    lose_a_block();
    free(first);

    /* A clean realloc chain: no error expected here. */
    char *grow = malloc(8);
    memcpy(grow, "abcdefg", 8);
    for (size_t n = 16; n <= 70000; n *= 3) {
        grow = realloc(grow, n);
        REQUIRE(grow);
        CHECK(strcmp(grow, "abcdefg") == 0);
    }
    free(grow);
    puts("done");
    return test_exit_status();
}
