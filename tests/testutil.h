/*
 * Helpers shared by the test programs: a CHECK macro that reports the failing
 * expression with file and line, and the PASS/FAIL lines the runner counts.
 */
#ifndef LFHEAP_TESTUTIL_H
#define LFHEAP_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>

static int test_failures;

#define CHECK(cond)                                                                        \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);       \
            test_failures++;                                                               \
        }                                                                                  \
    } while (0)

/* Checks that cannot be continued past (a later step would crash on a NULL, say). */
#define REQUIRE(cond)                                                                      \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

/* Runs one named case and prints the line the test runner counts. */
#define RUN(name)                                                                          \
    do {                                                                                   \
        int before_ = test_failures;                                                       \
        name();                                                                            \
        fflush(stderr);                                                                    \
        printf("%s %s\n", test_failures == before_ ? "PASS" : "FAIL", #name);              \
        fflush(stdout);                                                                    \
    } while (0)

static inline int test_exit_status(void) { return test_failures ? 1 : 0; }

#endif
