/*
 * Beyond 256 GiB (issue 13): lfheap's arenas were once bounded by a table of 4,096, so
 * after 8,192 blocks of 32 MiB even malloc(16) failed. This test reserves 9,000 blocks
 * of 32 MiB (288 GiB of address space; only a few pages are ever touched, and the page
 * map's entries, one of 8 bytes per large block, each on a leaf page of its own, so
 * about 36 MB, are the only memory it really costs), then
 * checks that the blocks are distinct and usable, that small blocks are still served,
 * and, after freeing everything, that a second run of the same allocations is served
 * from the same address space (nothing leaked: the process does not grow).
 *
 * It needs an unlimited address space (`ulimit -v`) and an overcommit policy that maps
 * untouched private memory (vm.overcommit_memory 0 or 1): arenas are ordinary
 * read-write mappings, which the heuristic policy (0) refuses only one by one beyond
 * the machine's RAM and swap, and each is 64 MiB. tests/suites/core.sh checks both
 * before running it; run directly, it requires them.
 *
 * It also holds blocks aligned at 1 TiB, more than any RAM and swap it runs with.
 *
 * Built for the prefixed library (build/t, which also counts the arenas) and as a plain
 * program run with lfheap preloaded (build/t-plain).
 */
#include "alloc_names.h"
#include "testutil.h"

#ifndef TEST_PLAIN
#include "arena.h"
#endif

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

#define MIB    ((size_t)1 << 20)
#define GIB    ((size_t)1 << 30)
#define BLOCK  (32 * MIB)
#define BLOCKS 9000 /* 288 GiB: beyond the old ceiling of 4,096 arenas of 64 MiB */
#define TOUCH  997  /* every so many blocks, one byte at each end is written */

/* The test's own arrays live in .bss, not in lfheap, so that they take no part in the
 * address space the runs compare. */
static char *blocks[BLOCKS];
static uintptr_t sorted[BLOCKS];

/* The process's mapped address space in bytes (/proc/self/statm, first field). */
static size_t mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    REQUIRE(f);
    unsigned long pages = 0;
    REQUIRE(fscanf(f, "%lu", &pages) == 1);
    fclose(f);
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

static void require_room(void)
{
    struct rlimit as;
    REQUIRE(getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur == RLIM_INFINITY);
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    int policy = 0;
    if (f) {
        REQUIRE(fscanf(f, "%d", &policy) == 1);
        fclose(f);
    }
    REQUIRE(policy != 2);
}

/* Allocates every block; returns how many were had (all, or up to the first failure). */
static unsigned allocate_all(void)
{
    for (unsigned i = 0; i < BLOCKS; i++) {
        errno = 0;
        blocks[i] = T_MALLOC(BLOCK);
        if (!blocks[i]) {
            fprintf(stderr, "malloc(32 MiB) #%u failed (errno %d) after %zu GiB\n", i, errno,
                    (size_t)i * BLOCK / GIB);
            return i;
        }
    }
    return BLOCKS;
}

static void free_all(unsigned count)
{
    for (unsigned i = 0; i < count; i++)
        T_FREE(blocks[i]);
}

static int by_address(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

static unsigned first_run;

static void blocks_beyond_256_gib(void)
{
    size_t before = mapped_bytes();
    first_run = allocate_all();
    CHECK(first_run == BLOCKS);
    /* The blocks really are reserved: the process maps at least as much. */
    CHECK(mapped_bytes() - before >= (size_t)first_run * BLOCK);
#ifndef TEST_PLAIN
    CHECK(arena_mapped() > 4096);
#endif
}

static void blocks_are_distinct(void)
{
    for (unsigned i = 0; i < first_run; i++)
        sorted[i] = (uintptr_t)blocks[i];
    qsort(sorted, first_run, sizeof sorted[0], by_address);
    unsigned overlaps = 0;
    for (unsigned i = 1; i < first_run; i++)
        overlaps += sorted[i - 1] + BLOCK > sorted[i];
    CHECK(overlaps == 0);
}

static void blocks_are_usable(void)
{
    for (unsigned i = 0; i < first_run; i += TOUCH) {
        blocks[i][0] = (char)i;
        blocks[i][BLOCK - 1] = (char)~i;
    }
    for (unsigned i = 0; i < first_run; i += TOUCH)
        CHECK(blocks[i][0] == (char)i && blocks[i][BLOCK - 1] == (char)~i);
    if (first_run)
        CHECK(T_MALLOC_USABLE_SIZE(blocks[first_run - 1]) >= BLOCK);
}

static void small_blocks_still_served(void)
{
    static const size_t sizes[] = {16, 100, 1000, 5000, 40000, 3 * MIB};
    char *small[sizeof sizes / sizeof sizes[0]];
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        small[i] = T_MALLOC(sizes[i]);
        REQUIRE(small[i]);
        memset(small[i], 0x5a, sizes[i]);
    }
    char *zeros = T_CALLOC(1, 4096);
    REQUIRE(zeros);
    for (size_t i = 0; i < 4096; i++)
        CHECK(zeros[i] == 0);
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK(small[i][0] == 0x5a && small[i][sizes[i] - 1] == 0x5a);
        T_FREE(small[i]);
    }
    T_FREE(zeros);
}

static void address_space_is_reused(void)
{
    free_all(first_run);
    size_t before = mapped_bytes();
#ifndef TEST_PLAIN
    unsigned arenas = arena_mapped();
#endif
    unsigned second_run = allocate_all();
    CHECK(second_run == BLOCKS);
    /* A leak would need as much new address space again; the page map's and the arenas'
     * metadata are already there. */
    size_t grown = mapped_bytes() - before;
    if (grown > 64 * MIB)
        fprintf(stderr, "the second run mapped %zu MiB more\n", grown / MIB);
    CHECK(grown <= 64 * MIB);
#ifndef TEST_PLAIN
    CHECK(arena_mapped() == arenas);
#endif
    free_all(second_run);
    T_MALLOC_TRIM(0);
}

/* Alignments larger than the machine's RAM and swap: the first such block usually lands
 * at an aligned address the kernel offers anyway, the next ones need a reservation of
 * the alignment's size to carve an aligned block from. A read-write reservation that
 * large is refused by the default overcommit policy (so every block after the first
 * failed); an inaccessible one is not. Each block still costs only its own pages, and
 * freeing them gives all of that address space back. */
#define HUGE_ALIGN  ((size_t)1 << 40) /* 1 TiB */
#define HUGE_ALIGNS 16

static void alignments_beyond_ram(void)
{
    size_t before = mapped_bytes();
    char *held[HUGE_ALIGNS];
    unsigned had = 0;
    for (; had < HUGE_ALIGNS; had++) {
        void *p = NULL;
        int error = T_POSIX_MEMALIGN(&p, HUGE_ALIGN, 100);
        if (error) {
            fprintf(stderr, "posix_memalign(1 TiB) #%u failed: %d\n", had, error);
            break;
        }
        held[had] = p;
        held[had][0] = (char)had;
        held[had][99] = (char)~had;
    }
    CHECK(had == HUGE_ALIGNS);
    for (unsigned i = 0; i < had; i++) {
        CHECK(((uintptr_t)held[i] & (HUGE_ALIGN - 1)) == 0);
        CHECK(held[i][0] == (char)i && held[i][99] == (char)~i);
        for (unsigned j = 0; j < i; j++)
            CHECK(held[i] != held[j]);
    }
    /* The blocks cost their pages and the page map's leaves, not the reservations. */
    CHECK(mapped_bytes() - before < (size_t)HUGE_ALIGNS * 64 * MIB);
    for (unsigned i = 0; i < had; i++)
        T_FREE(held[i]);
    small_blocks_still_served();
}

int main(void)
{
    require_room();
    RUN(alignments_beyond_ram);
    RUN(blocks_beyond_256_gib);
    RUN(blocks_are_distinct);
    RUN(blocks_are_usable);
    RUN(small_blocks_still_served);
    RUN(address_space_is_reused);
    return test_exit_status();
}
