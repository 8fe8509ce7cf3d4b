/*
 * Helpers shared by the test programs: a CHECK macro that reports the failing
 * expression with file and line, and the PASS/FAIL lines the runner counts.
 */
#ifndef LFHEAP_TESTUTIL_H
#define LFHEAP_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
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

static inline int test_exit_status(void)
{
    return test_failures ? 1 : 0;
}

#endif
