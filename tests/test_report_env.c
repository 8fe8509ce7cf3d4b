/*
 * test_report_env: a plain program for tests/suites/statsdebug.sh's checks of how the
 * statistics and debug builds read their settings and write their exit reports. It
 * allocates and frees a few blocks, then, by its argument:
 *   plain          exits
 *   double-free    frees one block twice (the debug build reports it) and goes on
 *   pipe           writes malloc_stats' report into a pipe that has room for part of
 *                  it, then into an empty one: prints "pieces N whole N room N", the
 *                  bytes of report that reached the pipe each time and the first room
 *   secure FILE    says whether it runs in secure-execution mode (AT_SECURE: set-user-ID)
 *                  and creates FILE, to show that it could have written a report there
 * With TEST_CLEAR_ENV set, a constructor of the program clears the environment first, as
 * a program may before lfheap's settings would be read if lfheap's constructors ran after
 * the program's (they share one .init_array when the static archive is linked).
 * Exits 0 after printing "done", 2 on a bad argument.
 */
#include "lfheap.h"

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

__attribute__((constructor)) static void clear_environment_early(void)
{
    if (getenv("TEST_CLEAR_ENV"))
        clearenv();
}

/* The bytes of malloc_stats' report that reach a non-blocking pipe with `room` bytes free
 * (all of its capacity if room is 0). */
static size_t report_into_pipe(size_t room)
{
    int ends[2];
    if (pipe(ends) != 0 || fcntl(ends[0], F_SETFL, O_NONBLOCK) != 0 ||
        fcntl(ends[1], F_SETFL, O_NONBLOCK) != 0)
        return 0;
    int capacity = fcntl(ends[1], F_GETPIPE_SZ);
    static char filler[1 << 20];
    size_t fill = room && capacity > 0 && (size_t)capacity > room ? (size_t)capacity - room : 0;
    if (fill > sizeof filler || write(ends[1], filler, fill) != (ssize_t)fill)
        return 0;
    int previous = malloc_stats_fd(ends[1]);
    malloc_stats();
    malloc_stats_fd(previous);
    size_t total = 0;
    ssize_t n;
    static char drained[1 << 20];
    while ((n = read(ends[0], drained, sizeof drained)) > 0)
        total += (size_t)n;
    close(ends[0]);
    close(ends[1]);
    return total - fill;
}

/* Through a volatile pointer, so that the compiler keeps every call. */
static void *(*volatile allocate)(size_t) = malloc;
static void (*volatile release)(void *) = free;

int main(int argc, char **argv)
{
    void *blocks[64];
    for (size_t i = 0; i < 64; i++)
        blocks[i] = allocate(16 + 40 * i);
    for (size_t i = 0; i < 64; i++)
        release(blocks[i]);
    if (argc == 2 && strcmp(argv[1], "plain") == 0) {
        /* nothing more */
    } else if (argc == 2 && strcmp(argv[1], "double-free") == 0) {
        void *p = allocate(48);
        release(p);
        release(p);
    } else if (argc == 2 && strcmp(argv[1], "pipe") == 0) {
        size_t room = 1100;
        size_t pieces = report_into_pipe(room);
        printf("pieces %zu whole %zu room %zu\n", pieces, report_into_pipe(0), room);
    } else if (argc == 3 && strcmp(argv[1], "secure") == 0) {
        FILE *f = fopen(argv[2], "w");
        printf("secure %lu, created %d\n", getauxval(AT_SECURE), f != NULL && fclose(f) == 0);
    } else {
        fprintf(stderr, "usage: test_report_env plain|double-free|pipe|secure FILE\n");
        return 2;
    }
    printf("done\n");
    return 0;
}
