/*
 * malloc, free and the rest of the family are no cancellation points (POSIX lists them
 * neither among the points nor among the functions that may be): a thread with a
 * deferred cancellation pending must come back from them with its block, and be
 * cancelled at its next cancellation point. lfheap reads small /proc files on some paths
 * (the secure build's guard budget at its first large block; the seccomp check before a
 * process_madvise), and the C library's open, read and close are cancellation points:
 * through them the thread was cancelled inside malloc and the block it was making lost.
 *
 * Run in a fresh process with each build preloaded (tests/suites/core.sh, secure.sh,
 * statsdebug.sh): the first large block of the process is taken with the cancellation
 * pending.
 */
#include "testutil.h"

#include <malloc.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

static volatile int calls_done;

static void *allocates_with_a_cancellation_pending(void *arg)
{
    (void)arg;
    /* Pending, not acted on: the default type is deferred. */
    CHECK(pthread_cancel(pthread_self()) == 0);
    static const size_t sizes[] = {16, 100, 5000, 40000, 100000, 3u << 20, 80u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *block = malloc(sizes[i]);
        CHECK(block != NULL);
        if (!block)
            continue;
        memset(block, (int)i + 1, sizes[i]);
        char *grown = realloc(block, sizes[i] * 2);
        CHECK(grown != NULL);
        if (grown) {
            CHECK(grown[0] == (char)(i + 1) && grown[sizes[i] - 1] == (char)(i + 1));
            block = grown;
        }
        free(block);
        char *zeroed = calloc(1, sizes[i]);
        CHECK(zeroed != NULL && zeroed[0] == 0 && zeroed[sizes[i] - 1] == 0);
        free(zeroed);
        void *aligned = NULL;
        CHECK(posix_memalign(&aligned, 4096, sizes[i]) == 0 && aligned != NULL);
        free(aligned);
    }
    CHECK(malloc_trim(0) >= 0);
    calls_done = 1;
    /* A cancellation point: the thread ends here. */
    for (;;)
        pause();
    return NULL;
}

static void allocation_is_no_cancellation_point(void)
{
    pthread_t thread;
    void *result = NULL;
    REQUIRE(pthread_create(&thread, NULL, allocates_with_a_cancellation_pending, NULL) == 0);
    REQUIRE(pthread_join(thread, &result) == 0);
    CHECK(calls_done == 1);
    CHECK(result == PTHREAD_CANCELED);
}

int main(void)
{
    RUN(allocation_is_no_cancellation_point);
    return test_exit_status();
}
