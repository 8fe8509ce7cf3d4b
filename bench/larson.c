/*
 * larson (Larson & Krishnan, "Memory allocation for long-running server applications",
 * ISMM 1998; used by LRMalloc thesis §6.1 and Streamflow §4.2.2): a server simulator.
 * `threads` slices of `slots` blocks each are worked on by one thread at a time; the
 * thread replaces a random slot's block by a new one of min..max bytes (freeing the
 * old one first) `ops` times, then creates a successor thread that inherits the slice
 * and exits. Most frees are therefore of blocks allocated by a thread that has exited
 * (remote frees and thread churn). The run lasts a fixed time and reports throughput
 * (malloc + free operations per second). Published: 1,000 slots per thread, 16-128
 * bytes; Streamflow runs it for 5 seconds.
 *
 * Validation: every block carries a tag (slice, slot, serial) that the next thread
 * checks before freeing it; at the end every live block is checked and freed, and the
 * operation count is checked against the generations that ran.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>

struct slot {
    void *block;
    uint32_t size;
    uint64_t tag;
};

struct slice {
    struct slot *slots;
    long index;
    long generation; /* thread generations that ran on this slice */
    long ops;        /* malloc + free operations done on this slice */
    uint64_t serial; /* blocks allocated on this slice so far */
};

static struct {
    long slots, ops, min, max;
    atomic_bool stop;
    atomic_long running; /* slices whose chain of threads has not finished */
    pthread_attr_t detached;
} cfg;

static void fill(struct slice *s, struct slot *slot, struct bench_rng *rng)
{
    size_t size = (size_t)cfg.min + bench_rng_below(rng, (uint64_t)(cfg.max - cfg.min + 1));
    void *p = malloc(size);
    bench_check_ptr(p, size, "malloc");
    uint64_t tag = bench_tag((uint64_t)s->index, ++s->serial);
    bench_tag_write(p, size, tag);
    *slot = (struct slot){.block = p, .size = (uint32_t)size, .tag = tag};
}

/* One operation pair of the workload: free a random slot's block, put a new one. */
static void replace(struct slice *s, struct bench_rng *rng)
{
    struct slot *slot = &s->slots[bench_rng_below(rng, (uint64_t)cfg.slots)];
    bench_tag_check(slot->block, slot->size, slot->tag, "free");
    free(slot->block);
    fill(s, slot, rng);
    s->ops += 2;
}

static void *generation(void *arg)
{
    struct slice *s = arg;
    struct bench_rng rng;
    bench_rng_seed(&rng, ((uint64_t)s->index << 32) ^ (uint64_t)s->generation);
    for (long i = 0; i < cfg.ops; i++)
        replace(s, &rng);
    s->generation++;
    if (atomic_load_explicit(&cfg.stop, memory_order_acquire)) {
        /* release: main reads the slice after seeing the count drop */
        atomic_fetch_sub_explicit(&cfg.running, 1, memory_order_release);
        return NULL;
    }
    pthread_t next;
    bench_thread_create(&next, &cfg.detached, generation, s);
    return NULL;
}

int main(int argc, char **argv)
{
    long threads = 1, seconds_ms = 5000, slots = 1000, ops = 10000, min = 16, max = 128;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "slices, i.e. threads running at once"),
        BENCH_INT("ms", seconds_ms, "duration in milliseconds"),
        BENCH_INT("slots", slots, "blocks per slice"),
        BENCH_INT("ops", ops, "replacements per thread before it hands over"),
        BENCH_INT("min", min, "smallest block"),
        BENCH_INT("max", max, "largest block"),
        BENCH_END,
    };
    bench_parse(argc, argv, "larson",
                "server simulation: random replacement in slices, thread hand-over", opts);
    if (threads < 1 || seconds_ms < 1 || slots < 1 || ops < 1 || min < 1 || max < min)
        bench_fail("need every knob >= 1 and min <= max");
    cfg.slots = slots;
    cfg.ops = ops;
    cfg.min = min;
    cfg.max = max;
    pthread_attr_init(&cfg.detached);
    pthread_attr_setdetachstate(&cfg.detached, PTHREAD_CREATE_DETACHED);

    size_t slice_bytes = (size_t)threads * sizeof(struct slice);
    size_t slot_bytes = (size_t)threads * (size_t)slots * sizeof(struct slot);
    struct slice *slices = bench_map(slice_bytes);
    struct slot *all_slots = bench_map(slot_bytes);
    struct bench_rng rng;
    bench_rng_seed(&rng, 42);
    for (long t = 0; t < threads; t++) {
        slices[t].slots = all_slots + t * slots;
        slices[t].index = t;
        /* the main thread fills every slot first, as in the original */
        for (long k = 0; k < slots; k++)
            fill(&slices[t], &slices[t].slots[k], &rng);
    }

    atomic_store(&cfg.running, threads);
    double t0 = bench_now();
    for (long t = 0; t < threads; t++) {
        pthread_t first;
        bench_thread_create(&first, &cfg.detached, generation, &slices[t]);
    }
    bench_sleep_us(seconds_ms * 1000);
    atomic_store_explicit(&cfg.stop, true, memory_order_release);
    while (atomic_load_explicit(&cfg.running, memory_order_acquire) > 0)
        bench_sleep_us(100);
    double secs = bench_now() - t0;

    long total_ops = 0, generations = 0;
    for (long t = 0; t < threads; t++) {
        struct slice *s = &slices[t];
        /* every generation frees and allocates ops blocks */
        if (s->ops != 2 * ops * s->generation)
            bench_fail("slice %ld counted %ld operations in %ld generations", t, s->ops,
                       s->generation);
        total_ops += s->ops;
        generations += s->generation;
        for (long k = 0; k < slots; k++) {
            struct slot *slot = &s->slots[k];
            bench_tag_check(slot->block, slot->size, slot->tag, "final free");
            free(slot->block);
        }
    }
    bench_unmap(all_slots, slot_bytes);
    bench_unmap(slices, slice_bytes);
    bench_result((int)threads,
                 "ms=%ld slots=%ld ops=%ld min=%ld max=%ld generations=%ld seconds=%.9f "
                 "mops=%.3f",
                 seconds_ms, slots, ops, min, max, generations, secs,
                 (double)total_ops / secs / 1e6);
    return 0;
}
