/*
 * The launcher of the real-program workloads (bench/real/, run by bench/run.py's `real`
 * group): runs one command with an allocator preloaded and prints one result line with
 * its wall time and peak resident set, like the other workloads' programs.
 *
 *     realrun [--preload=LIB] [--workload=NAME] -- PROGRAM ARG...
 *
 * Why a launcher in C and not the Python runner itself: Linux carries the resident set
 * of the process image that calls execve into the new image's peak (ru_maxrss), and a
 * child spawned by Python starts as a copy of (or, with vfork, shares) the runner's
 * tens of MiB. Forked from this small program, that floor is the same few hundred KiB
 * for every allocator. The launcher itself runs without the allocator: LD_PRELOAD is
 * set only in the child, just before execve, so the floor does not depend on it.
 *
 * The program's stdout and stderr pass through; the result line follows its output:
 *
 *     result workload=NAME threads=1 seconds=S user_s=U sys_s=Y peak_rss_kib=K
 *
 * seconds is the wall time from fork to the end of wait4; peak_rss_kib, user_s and
 * sys_s come from wait4's rusage, which covers the program and every descendant it
 * waited for (gcc's cc1 and as). The exit status is the program's (128 + the signal
 * when a signal ended it), and no result line is printed unless it exited with 0.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_USAGE = 64, EXIT_LAUNCH = 127 };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double seconds_of(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static int usage(void)
{
    fprintf(stderr, "usage: realrun [--preload=LIB] [--workload=NAME] -- PROGRAM ARG...\n");
    return EXIT_USAGE;
}

int main(int argc, char **argv)
{
    const char *preload = NULL;
    const char *workload = "real";
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (strncmp(argv[i], "--preload=", 10) == 0)
            preload = argv[i] + 10;
        else if (strncmp(argv[i], "--workload=", 11) == 0)
            workload = argv[i] + 11;
        else
            return usage();
    }
    if (i >= argc)
        return usage();
    fflush(stdout);
    double start = now();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "realrun: fork: %s\n", strerror(errno));
        return EXIT_LAUNCH;
    }
    if (pid == 0) {
        if (preload && preload[0])
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        execvp(argv[i], argv + i);
        fprintf(stderr, "realrun: %s: %s\n", argv[i], strerror(errno));
        _exit(EXIT_LAUNCH);
    }
    int status;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "realrun: wait4: %s\n", strerror(errno));
            return EXIT_LAUNCH;
        }
    }
    double wall = now() - start;
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "realrun: %s: killed by signal %d\n", argv[i], WTERMSIG(status));
        return 128 + WTERMSIG(status);
    }
    if (WEXITSTATUS(status) != 0)
        return WEXITSTATUS(status);
    printf("result workload=%s threads=1 seconds=%.4f user_s=%.4f sys_s=%.4f "
           "peak_rss_kib=%ld\n",
           workload, wall, seconds_of(ru.ru_utime), seconds_of(ru.ru_stime), ru.ru_maxrss);
    return 0;
}
