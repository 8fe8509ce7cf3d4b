/*
 * consume (Hoard distribution; Streamflow §4.2.2, Table 1): one producer thread
 * allocates, in each of `iterations` rounds, one block of `objects` small objects for
 * each of the `threads` consumer threads; each consumer frees the objects of the
 * blocks it receives. Production and consumption overlap (each consumer has a queue of
 * two blocks), so nearly every free is a remote free of memory another thread
 * allocated. The producer is the bottleneck, so time grows with the consumers.
 * Published: 6,000 objects per block, 5,000 iterations (240M objects with 8 threads),
 * objects of 4 bytes on average.
 *
 * Validation: every object carries a tag (consumer, round, index) that the consumer
 * checks before freeing it; the number of objects freed must equal those allocated.
 */
#include "common.h"

#include <semaphore.h>
#include <stdlib.h>

#define QUEUE_DEPTH 2

struct consumer {
    void **batch[QUEUE_DEPTH];
    sem_t full;  /* batches ready for the consumer */
    sem_t empty; /* batch buffers free for the producer */
    long freed;
};

static struct {
    long threads, iterations, objects;
    size_t size;
    struct consumer *consumers;
} cfg;

static uint64_t owner(long consumer, long round)
{
    return ((uint64_t)consumer << 32) | (uint64_t)round;
}

static void wait_sem(sem_t *s)
{
    while (sem_wait(s) != 0)
        ; /* EINTR */
}

static void *consumer_main(void *arg)
{
    long id = (long)(intptr_t)arg;
    struct consumer *c = &cfg.consumers[id];
    for (long r = 0; r < cfg.iterations; r++) {
        wait_sem(&c->full);
        void **batch = c->batch[r % QUEUE_DEPTH];
        for (long i = 0; i < cfg.objects; i++) {
            bench_tag_check(batch[i], cfg.size, bench_tag(owner(id, r), (uint64_t)i), "free");
            free(batch[i]);
        }
        c->freed += cfg.objects;
        sem_post(&c->empty);
    }
    return NULL;
}

static void producer(int tid, void *arg)
{
    (void)tid;
    (void)arg;
    size_t tbytes = (size_t)cfg.threads * sizeof(pthread_t);
    pthread_t *consumers = bench_map(tbytes);
    for (long t = 0; t < cfg.threads; t++)
        bench_thread_create(&consumers[t], NULL, consumer_main, (void *)(intptr_t)t);
    for (long r = 0; r < cfg.iterations; r++) {
        for (long t = 0; t < cfg.threads; t++) {
            struct consumer *c = &cfg.consumers[t];
            wait_sem(&c->empty);
            void **batch = c->batch[r % QUEUE_DEPTH];
            for (long i = 0; i < cfg.objects; i++) {
                void *p = malloc(cfg.size);
                bench_check_ptr(p, cfg.size, "malloc");
                bench_tag_write(p, cfg.size, bench_tag(owner(t, r), (uint64_t)i));
                batch[i] = p;
            }
            sem_post(&c->full);
        }
    }
    for (long t = 0; t < cfg.threads; t++)
        pthread_join(consumers[t], NULL);
    bench_unmap(consumers, tbytes);
}

int main(int argc, char **argv)
{
    long threads = 1, iterations = 5000, objects = 6000, size = 4;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "consumer threads (plus one producer)"),
        BENCH_INT("iterations", iterations, "rounds; each gives every consumer a block"),
        BENCH_INT("objects", objects, "objects per block"),
        BENCH_INT("size", size, "bytes per object"),
        BENCH_END,
    };
    bench_parse(argc, argv, "consume",
                "one producer allocates blocks of objects, consumer threads free them", opts);
    if (threads < 1 || iterations < 1 || objects < 1 || size < 1)
        bench_fail("need every knob >= 1");
    cfg.threads = threads;
    cfg.iterations = iterations;
    cfg.objects = objects;
    cfg.size = (size_t)size;
    size_t cbytes = (size_t)threads * sizeof(struct consumer);
    size_t bbytes = (size_t)objects * sizeof(void *);
    cfg.consumers = bench_map(cbytes);
    for (long t = 0; t < threads; t++) {
        struct consumer *c = &cfg.consumers[t];
        for (int q = 0; q < QUEUE_DEPTH; q++)
            c->batch[q] = bench_map(bbytes);
        sem_init(&c->full, 0, 0);
        sem_init(&c->empty, 0, QUEUE_DEPTH);
    }

    double secs = bench_run_threads(1, producer, NULL);

    long freed = 0;
    for (long t = 0; t < threads; t++) {
        struct consumer *c = &cfg.consumers[t];
        freed += c->freed;
        for (int q = 0; q < QUEUE_DEPTH; q++)
            bench_unmap(c->batch[q], bbytes);
        sem_destroy(&c->full);
        sem_destroy(&c->empty);
    }
    bench_unmap(cfg.consumers, cbytes);
    long allocated = threads * iterations * objects;
    if (freed != allocated)
        bench_fail("allocated %ld objects, consumers freed %ld", allocated, freed);
    bench_result((int)threads, "iterations=%ld objects=%ld size=%ld seconds=%.9f mops=%.3f",
                 iterations, objects, size, secs, 2.0 * (double)allocated / secs / 1e6);
    return 0;
}
