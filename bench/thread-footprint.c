/*
 * thread-footprint (ours): what each thread alive costs in resident memory. Starts
 * `threads` threads that each allocate `blocks` blocks of 16 B-1 KiB (0: none, a thread
 * that never calls the allocator), write them, and wait at a barrier with their blocks
 * held; the main thread reads the resident size then, lets them free their blocks and
 * exit, and reports the resident size per thread alive above what it was before they
 * started.
 *
 * An allocator's per-thread state (its thread cache, in thread-local storage or taken
 * from its heap) shows up here: glibc puts a thread's static thread-local storage at the
 * top of its stack, where every new thread touches it.
 *
 * Validation: every block carries its thread's tag, checked before it is freed.
 */
#include "common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_barrier_t started, measured;
static long blocks_per_thread;

static void *footprint_thread(void *arg)
{
    uint64_t owner = (uint64_t)(uintptr_t)arg;
    void **held = NULL;
    size_t *sizes = NULL;
    if (blocks_per_thread > 0) {
        held = malloc((size_t)blocks_per_thread * sizeof *held);
        sizes = malloc((size_t)blocks_per_thread * sizeof *sizes);
        bench_check_ptr(held, (size_t)blocks_per_thread * sizeof *held, "malloc");
        bench_check_ptr(sizes, (size_t)blocks_per_thread * sizeof *sizes, "malloc");
        for (long i = 0; i < blocks_per_thread; i++) {
            sizes[i] = 16 + (size_t)((owner * 7 + (uint64_t)i * 13) % 1009);
            held[i] = malloc(sizes[i]);
            bench_check_ptr(held[i], sizes[i], "malloc");
            bench_tag_write(held[i], sizes[i], bench_tag(owner, (uint64_t)i));
        }
    }
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&measured);
    for (long i = 0; i < blocks_per_thread; i++) {
        bench_tag_check(held[i], sizes[i], bench_tag(owner, (uint64_t)i), "held block");
        free(held[i]);
    }
    free(sizes);
    free(held);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 500, blocks = 0;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads alive at once"),
        BENCH_INT("blocks", blocks, "blocks of 16 B-1 KiB each thread allocates and holds"),
        BENCH_END,
    };
    bench_parse(argc, argv, "thread-footprint", "resident memory per thread alive", opts);
    if (threads < 1 || blocks < 0)
        bench_fail("need threads >= 1 and blocks >= 0");
    blocks_per_thread = blocks;
    /* Taken before the first reading, so that the bookkeeping is not counted as the
     * threads'. */
    pthread_t *ids = calloc((size_t)threads, sizeof *ids);
    bench_check_ptr(ids, (size_t)threads * sizeof *ids, "calloc");
    if (pthread_barrier_init(&started, NULL, (unsigned)threads + 1) != 0 ||
        pthread_barrier_init(&measured, NULL, (unsigned)threads + 1) != 0)
        bench_fail("pthread_barrier_init failed");
    size_t before = bench_rss();
    double t0 = bench_now();
    for (long t = 0; t < threads; t++)
        bench_thread_create(&ids[t], NULL, footprint_thread, (void *)(uintptr_t)(t + 1));
    pthread_barrier_wait(&started);
    size_t alive = bench_rss();
    pthread_barrier_wait(&measured);
    for (long t = 0; t < threads; t++)
        if (pthread_join(ids[t], NULL) != 0)
            bench_fail("pthread_join failed");
    double seconds = bench_now() - t0;
    free(ids);
    if (before == 0 || alive == 0)
        bench_fail("cannot read the resident size (/proc/self/statm)");
    double per_thread_kib = ((double)alive - (double)before) / 1024.0 / (double)threads;
    bench_result((int)threads,
                 "seconds=%.6f rss_before_kib=%zu rss_alive_kib=%zu kib_per_thread=%.2f", seconds,
                 before / 1024, alive / 1024, per_thread_kib);
    return 0;
}
