/*
 * Helpers shared by the test programs: a CHECK macro that reports the failing
 * expression with file and line, and the PASS/FAIL lines the runner counts.
 */
#ifndef LFHEAP_TESTUTIL_H
#define LFHEAP_TESTUTIL_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int test_failures;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            test_failures++;                                                                       \
        }                                                                                          \
    } while (0)

/* Checks that cannot be continued past (a later step would crash on a NULL, say). */
#define REQUIRE(cond)                                                                              \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond);         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Runs one named case and prints the line the test runner counts. */
#define RUN(name)                                                                                  \
    do {                                                                                           \
        int before_ = test_failures;                                                               \
        name();                                                                                    \
        fflush(stderr);                                                                            \
        printf("%s %s\n", test_failures == before_ ? "PASS" : "FAIL", #name);                      \
        fflush(stdout);                                                                            \
    } while (0)

/* The process's resident size in KiB (0 if /proc cannot tell). */
static inline long test_rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* True if the switch `name` (LFHEAP_HUGEPAGES, LFHEAP_BACKGROUND) is on: set to anything
 * but an empty value or 0, as lfheap reads its switches. */
static inline bool test_switch_on(const char *name)
{
    const char *env = getenv(name);
    return env && env[0] != '\0' && strcmp(env, "0") != 0;
}

static inline bool test_hugepages_switch_on(void)
{
    return test_switch_on("LFHEAP_HUGEPAGES");
}

/* The process's anonymous memory in transparent huge pages in KiB (AnonHugePages of
 * /proc/self/smaps_rollup; -1 if /proc cannot tell): a huge page is resident whole. */
static inline long test_anon_huge_kib(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    char line[256];
    long kib = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

static inline int test_exit_status(void)
{
    return test_failures ? 1 : 0;
}

#ifdef TEST_PLAIN
/* A plain program calls the standard names and is run with lfheap preloaded (or linked
 * with it, build/t-linked). A preload that does not load (a wrong path) only makes the
 * dynamic linker print a warning: the program would then test glibc's malloc and pass.
 * So before main it asks lfheap about a block from the program's own malloc:
 * lfh_malloc_usable_size, which only lfheap defines, answers 0 for a block lfheap did not
 * hand out. A run that means to use another allocator says so with TEST_ON_GLIBC=1. */
#ifdef __cplusplus
extern "C" {
#endif
size_t lfh_malloc_usable_size(void *ptr) __attribute__((weak));
#ifdef __cplusplus
}
#endif

/* errno after that first malloc and free of the process (set to 0 before them; -1 when
 * they were not made), for a test of what a successful call leaves in errno: the first
 * calls read lfheap's settings. */
static int test_first_call_errno = -1;

__attribute__((constructor)) static void test_require_lfheap(void)
{
    if (getenv("TEST_ON_GLIBC"))
        return;
    errno = 0;
    void *block = malloc(24);
    size_t usable = block && lfh_malloc_usable_size ? lfh_malloc_usable_size(block) : 0;
    free(block);
    test_first_call_errno = errno;
    if (usable < 24) {
        const char *preload = getenv("LD_PRELOAD");
        printf("FAIL lfheap-is-the-allocator: %s (LD_PRELOAD=%s)\n",
               lfh_malloc_usable_size ? "malloc's blocks are not lfheap's" : "lfheap is not loaded",
               preload ? preload : "");
        exit(1);
    }
}
#endif

#endif
