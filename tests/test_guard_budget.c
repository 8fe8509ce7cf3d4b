/*
 * The secure build's guard pages within the kernel's mapping limit (src/secure.h,
 * secure_guard_take). Every large block once ended in a guard page, and each guard page
 * splits the mapping around it: with 40,000 B blocks the process reached
 * vm.max_map_count (65,530 by default) after about 32,000 of them, and from then on
 * lfheap's own arenas, the program's mmap, its thread stacks and fopen failed now and
 * then with ENOMEM, with plenty of memory free. Now at most a quarter of the limit of
 * blocks carry one at a time.
 *
 * With the secure build preloaded: more live large blocks than the limit allows guard
 * pages for are all served; the process's mappings stay within half the limit; small
 * blocks, a mapping of the program's own, a thread and a stream are still granted;
 * freeing every block takes the guard pages away again (the mappings merge back), so a
 * second run is served as the first was. The blocks are never written:
 * they cost address space, not memory. Run with another build (or none) it checks the
 * same bounds, which nothing there comes near.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define BLOCK      40000 /* a large block: above the largest small class */
#define BLOCKS_MAX 70000 /* enough to pass the default limit, not more */

static char *blocks[BLOCKS_MAX]; /* .bss: not in the heap under test */

static long max_map_count(void)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long limit = 65530;
    if (f) {
        if (fscanf(f, "%ld", &limit) != 1)
            limit = 65530;
        fclose(f);
    }
    return limit;
}

/* Lines of /proc/self/maps: the process's mappings. */
static long mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    REQUIRE(f);
    long lines = 0;
    int c;
    while ((c = getc(f)) != EOF)
        lines += c == '\n';
    fclose(f);
    return lines;
}

static int thread_ran;

static void *thread_main(void *arg)
{
    (void)arg;
    char *p = malloc(100);
    if (p)
        memset(p, 1, 100);
    free(p);
    thread_ran = 1;
    return NULL;
}

/* The program's own requests, all of which fail once the mapping limit is reached. */
static void others_still_granted(void)
{
    void *small = malloc(16);
    CHECK(small != NULL);
    free(small);
    void *own = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(own != MAP_FAILED);
    if (own != MAP_FAILED)
        munmap(own, 1 << 20);
    pthread_t t;
    thread_ran = 0;
    int started = pthread_create(&t, NULL, thread_main, NULL);
    CHECK(started == 0);
    if (started == 0) {
        pthread_join(t, NULL);
        CHECK(thread_ran == 1);
    }
    FILE *stream = fopen("/proc/self/statm", "r");
    CHECK(stream != NULL);
    if (stream)
        fclose(stream);
}

/* Allocates `n` blocks; the number served. */
static long allocate(long n)
{
    long served = 0;
    for (long i = 0; i < n; i++) {
        blocks[i] = malloc(BLOCK);
        served += blocks[i] != NULL;
    }
    return served;
}

static void free_all(long n)
{
    for (long i = 0; i < n; i++)
        free(blocks[i]);
}

static void live_large_blocks_leave_mappings_to_spare(void)
{
    long limit = max_map_count();
    /* Two mappings per guard page would pass the limit by a fifth. */
    long n = limit * 6 / 10 < BLOCKS_MAX ? limit * 6 / 10 : BLOCKS_MAX;
    long start = mappings();
    for (int run = 0; run < 2; run++) {
        long served = allocate(n);
        if (served != n)
            fprintf(stderr, "run %d: %ld of %ld blocks served\n", run, served, n);
        CHECK(served == n);
        long held = mappings();
        if (held > limit / 2 + 1000)
            fprintf(stderr, "run %d: %ld mappings with %ld blocks (limit %ld)\n", run, held, n,
                    limit);
        CHECK(held <= limit / 2 + 1000);
        others_still_granted();
        free_all(n);
        long after = mappings();
        if (after > start + 200)
            fprintf(stderr, "run %d: %ld mappings after freeing, %ld before\n", run, after, start);
        CHECK(after <= start + 200);
    }
}

int main(void)
{
    RUN(live_large_blocks_leave_mappings_to_spare);
    return test_exit_status();
}
