/*
 * Transparent huge pages, opt-in (LFHEAP_HUGEPAGES=1): with the switch, every mapping
 * that holds the heap's blocks (the arenas, and the blocks mapped on their own) carries
 * the kernel's huge-page advice (VmFlags "hg" in /proc/self/smaps), also after a block
 * mapped on its own has grown by mremap; without it, none does. Whether the kernel then
 * really backs a range with huge pages depends on its memory at the time, so that is
 * printed, not asserted. What is asserted besides the advice: contents survive, and
 * memory given back inside a huge page reads as zeros when handed out again (calloc
 * trusts it to: a purge splits the huge page).
 *
 * A plain program run with lfheap preloaded, with and without the switch
 * (tests/suites/core.sh); it reads the switch itself to know which to expect.
 */
#include "testutil.h"

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define MIB ((size_t)1 << 20)

/* Whether the kernel takes the advice at all (it refuses without huge-page support). */
static bool kernel_takes_advice(void)
{
    size_t size = 4 * MIB;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    bool taken = madvise(p, size, MADV_HUGEPAGE) == 0;
    munmap(p, size);
    return taken;
}

struct vma {
    bool found;
    bool advised;           /* "hg" in VmFlags */
    unsigned long huge_kib; /* AnonHugePages */
};

/* The mapping of /proc/self/smaps that holds `addr`. */
static struct vma vma_of(const void *addr)
{
    struct vma v = {false, false, 0};
    FILE *f = fopen("/proc/self/smaps", "r");
    REQUIRE(f);
    char line[1024];
    bool inside = false;
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &lo, &dash, &hi) == 3 && dash == '-') {
            if (v.found)
                break;
            inside = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            v.found = inside;
            continue;
        }
        if (!inside)
            continue;
        unsigned long kib;
        if (sscanf(line, "AnonHugePages: %lu kB", &kib) == 1)
            v.huge_kib = kib;
        if (strncmp(line, "VmFlags:", 8) == 0)
            v.advised = strstr(line, " hg") != NULL;
    }
    fclose(f);
    return v;
}

static bool expect_advice;

static void check_advice(const char *what, const void *addr)
{
    struct vma v = vma_of(addr);
    CHECK(v.found);
    if (v.advised != expect_advice)
        fprintf(stderr, "%s at %p: huge-page advice %s, expected %s\n", what, addr,
                v.advised ? "present" : "absent", expect_advice ? "present" : "absent");
    CHECK(v.advised == expect_advice);
    printf("# %s: %lu KiB of its mapping in huge pages\n", what, v.huge_kib);
}

static void fill(unsigned char *p, size_t size, unsigned seed)
{
    for (size_t i = 0; i < size; i += 4096)
        p[i] = (unsigned char)(seed + i / 4096);
    p[size - 1] = (unsigned char)seed;
}

static bool filled(const unsigned char *p, size_t size, unsigned seed)
{
    for (size_t i = 0; i < size; i += 4096)
        if (p[i] != (unsigned char)(seed + i / 4096))
            return false;
    return p[size - 1] == (unsigned char)seed;
}

/* Small blocks, a run of an arena, and a block mapped on its own (above the 64 MiB of an
 * arena), before and after that one grows by moving its pages. */
static void every_heap_mapping_is_advised(void)
{
    char *small = malloc(100);
    unsigned char *run = malloc(3 * MIB);
    unsigned char *own = malloc(100 * MIB);
    REQUIRE(small && run && own);
    memset(small, 7, 100);
    fill(run, 3 * MIB, 1);
    fill(own, 100 * MIB, 2);
    check_advice("small block", small);
    check_advice("3 MiB block", run);
    check_advice("100 MiB block", own);
    unsigned char *grown = realloc(own, 300 * MIB);
    REQUIRE(grown);
    CHECK(filled(grown, 100 * MIB, 2));
    fill(grown + 100 * MIB, 200 * MIB, 3);
    check_advice("100 MiB block grown to 300 MiB", grown + 299 * MIB);
    CHECK(filled(run, 3 * MIB, 1));
    for (int i = 0; i < 100; i++)
        CHECK(small[i] == 7);
    free(small);
    free(run);
    free(grown);
}

/* Blocks written all over, freed, their pages given back (malloc_trim purges at once),
 * then handed out again by calloc, which skips its memset on memory known to be zeros:
 * inside a huge page that needs the kernel to split it and zero the part given back. */
static void memory_given_back_reads_as_zeros(void)
{
    enum { BLOCKS = 24 };
    size_t sizes[BLOCKS];
    unsigned char *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        sizes[i] = (size_t)(i % 6 + 1) * 300 * 1024 + 64 * (size_t)i;
        blocks[i] = malloc(sizes[i]);
        REQUIRE(blocks[i]);
        memset(blocks[i], 0xa5, sizes[i]);
    }
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    malloc_trim(0);
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = calloc(1, sizes[i]);
        REQUIRE(blocks[i]);
        size_t nonzero = 0;
        for (size_t j = 0; j < sizes[i]; j++)
            nonzero += blocks[i][j] != 0;
        if (nonzero)
            fprintf(stderr, "calloc(%zu): %zu bytes not zero\n", sizes[i], nonzero);
        CHECK(nonzero == 0);
    }
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
}

/* Everything freed and malloc_trim called: the resident set goes back near where it
 * was. With huge pages, each one faulted in whole also brought in the free pages around
 * the runs that touched it, which a purge of those runs leaves resident when it splits
 * the page: malloc_trim gives back every huge page no run occupies. Blocks of 16 KiB to
 * 1 MiB, so that runs and superblocks share huge pages. */
static void trim_returns_what_was_freed(void)
{
    enum { BLOCKS = 1200 };
    static unsigned char *blocks[BLOCKS];
    malloc_trim(0);
    long before = test_rss_kib();
    uint64_t state = 12345;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < BLOCKS; i++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            size_t size = ((size_t)16 << 10) << (state >> 61) % 7;
            size += (state >> 32) % size;
            blocks[i] = malloc(size);
            REQUIRE(blocks[i]);
            memset(blocks[i], 0x5a, size);
            if (i % 3 == 2) {
                free(blocks[i / 2]);
                blocks[i / 2] = NULL;
            }
        }
        for (int i = 0; i < BLOCKS; i++) {
            free(blocks[i]);
            blocks[i] = NULL;
        }
    }
    int released = malloc_trim(0);
    /* Called again at once, it has nothing left to give back: 0, as glibc's says, also
     * with huge pages, whose free pages it gave back the first time. */
    int again = malloc_trim(0);
    long after = test_rss_kib();
    printf("  resident: %ld KiB before, %ld KiB after freeing everything and malloc_trim\n", before,
           after);
    CHECK(after <= before + 8 * 1024);
    CHECK(released == 1);
    CHECK(again == 0);
}

int main(void)
{
    bool taken = kernel_takes_advice();
    expect_advice = test_hugepages_switch_on() && taken;
    printf("# LFHEAP_HUGEPAGES %s, kernel %s the advice: expecting it %s\n",
           test_hugepages_switch_on() ? "on" : "off", taken ? "takes" : "refuses",
           expect_advice ? "on every heap mapping" : "on none");
    RUN(every_heap_mapping_is_advised);
    RUN(memory_given_back_reads_as_zeros);
    RUN(trim_returns_what_was_freed);
    return test_exit_status();
}
