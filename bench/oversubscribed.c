/*
 * oversubscribed (ours, issue 6: over-subscription): a fixed amount of allocator work
 * split across `threads` threads, meant to be run with many more threads than cores
 * (32 on 2) and compared with a run at as many threads as cores. A thread preempted
 * while it holds an allocator's lock stalls every thread that needs that lock until it
 * runs again; a lock-free allocator has no such holder, so its throughput should stay
 * near its throughput without over-subscription.
 *
 * The work is shaped to keep every thread going through the shared parts of an
 * allocator, not only its thread cache: sizes from 8 B to 512 KiB (mostly small, a
 * share of medium ones up to 32 KiB, occasionally a large one), random replacement in
 * a private working set, some realloc, and blocks handed to other threads to free.
 * `ops` steps and `slots` private blocks in all, split evenly across the threads, so
 * the work and the working set are the same at every thread count. A step is one of:
 *   - private (100 - handoff %): pick one of the thread's own slots; with `realloc`
 *     percent, realloc its block to a new size, otherwise free it and malloc a new one;
 *   - hand-off (handoff %): free every block other threads have handed to this one
 *     since its last hand-off step (remote frees), then malloc a block of 32 B up to
 *     `handoff_max` and push it on a random other thread's inbox.
 * Inboxes are lock-free stacks (a push CAS retries only when another push or a take
 * succeeded; the receiver takes the whole stack with one exchange), so the benchmark
 * itself never waits for a thread that is not running. An inbox holds at most about
 * `inbox_max` blocks: a hand-off step whose receiver's inbox is full (or that finds every
 * other thread finished) is a private step instead. Without that bound the blocks waiting
 * for threads the scheduler has not run yet made most of the peak live data, and how many
 * waited depended on how much work a thread got through in its time slice, so on the
 * allocator's speed: a faster allocator had more live data (at 32 threads and small sizes
 * only, lfheap's program held 43 MB live at 45 MiB resident), and the peak RSS column
 * compared different heaps. Every handed-off block is freed
 * by a thread other than the one that allocated it, at every thread count but 1 (a
 * single thread hands blocks to itself); with more threads than cores the blocks wait
 * longer in the inboxes of threads that are not running. Reports allocator calls
 * (malloc, free, realloc) per second.
 *
 * Validation: a private block carries a tag (thread, serial) held in its slot, checked
 * before free and realloc; realloc must keep the head tag and, when growing, the old
 * tail. A handed-off block carries a header (tag, receiver, size, serial naming the
 * sender) and the complement of its tag in its last 8 bytes, checked by the receiver.
 * At the end every block is checked and freed, and the mallocs must equal the frees.
 */
#include "common.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Size ranges, log-uniform inside each (a power-of-two band is chosen uniformly, then
 * a size inside it): small 8 B-1 KiB, medium 1-32 KiB (still a small block for lfheap,
 * a "large" one for some peers), large 32-512 KiB (a chunk or a mapping). */
enum { SMALL_BITS_LO = 3, MEDIUM_BITS_LO = 10, LARGE_BITS_LO = 15, LARGE_BITS_HI = 19 };

/* A handed-off block starts with this header and ends with ~tag. */
struct header {
    uint64_t tag;        /* bench_tag(receiver, serial) */
    uint64_t serial;     /* sender << 40 | the sender's count */
    struct header *next; /* in the receiver's inbox */
    uint32_t receiver;
    uint32_t size;
};
#define HANDOFF_MIN (sizeof(struct header) + 8)

struct slot {
    void *block;
    uint64_t tag;
    uint32_t size;
};

/* One thread's state, on cache lines of its own (the array is page-aligned). */
struct worker {
    _Alignas(64) _Atomic(struct header *) inbox; /* written by every sender */
    _Atomic long pending;                        /* blocks pushed on it and not yet taken */
    atomic_bool done;                            /* no longer takes from its inbox */
    _Alignas(64) struct slot *slots;
    long nslots;
    long steps;
    uint64_t serial;
    long mallocs, frees, reallocs, received, inbox_full;
};

static struct {
    long threads, medium_pct, large_every, realloc_pct, handoff_pct, inbox_max;
    unsigned handoff_bits; /* handed-off sizes are below 2^handoff_bits */
    struct worker *workers;
} cfg;

/* A size in [2^lo, 2^hi), log-uniform: a power-of-two band, then a size inside it. */
static size_t band_size(struct bench_rng *rng, unsigned lo, unsigned hi)
{
    unsigned bits = lo + (unsigned)bench_rng_below(rng, hi - lo);
    return ((size_t)1 << bits) + (size_t)bench_rng_below(rng, (uint64_t)1 << bits);
}

/* A private block's size: small, medium (medium %) or now and then large. */
static size_t pick_size(struct bench_rng *rng)
{
    if (cfg.large_every > 0 && bench_rng_below(rng, (uint64_t)cfg.large_every) == 0)
        return band_size(rng, LARGE_BITS_LO, LARGE_BITS_HI);
    if ((long)bench_rng_below(rng, 100) < cfg.medium_pct)
        return band_size(rng, MEDIUM_BITS_LO, LARGE_BITS_LO);
    return band_size(rng, SMALL_BITS_LO, MEDIUM_BITS_LO);
}

static void fill_slot(struct worker *w, int tid, struct slot *s, size_t size)
{
    void *p = malloc(size);
    bench_check_ptr(p, size, "malloc");
    w->mallocs++;
    uint64_t tag = bench_tag((uint64_t)tid, ++w->serial);
    bench_tag_write(p, size, tag);
    *s = (struct slot){.block = p, .tag = tag, .size = (uint32_t)size};
}

static void free_slot(struct worker *w, struct slot *s, const char *what)
{
    bench_tag_check(s->block, s->size, s->tag, what);
    free(s->block);
    w->frees++;
}

/* realloc must keep min(old, new) bytes: the head tag, and the old tail if it grew. */
static void realloc_slot(struct worker *w, int tid, struct slot *s, size_t size)
{
    bench_tag_check(s->block, s->size, s->tag, "realloc");
    size_t old = s->size;
    void *p = realloc(s->block, size);
    bench_check_ptr(p, size, "realloc");
    w->reallocs++;
    uint64_t head = 0, tail = 0;
    size_t head_len = old < size ? old : size;
    memcpy(&head, p, head_len < 8 ? head_len : 8);
    bool kept = memcmp(&head, &s->tag, head_len < 8 ? head_len : 8) == 0;
    if (kept && old >= 16 && size >= old) {
        memcpy(&tail, (char *)p + old - 8, 8);
        kept = tail == ~s->tag;
    }
    if (!kept)
        bench_fail("realloc(%zu -> %zu) to %p lost the block's contents", old, size, p);
    uint64_t tag = bench_tag((uint64_t)tid, ++w->serial);
    bench_tag_write(p, size, tag);
    *s = (struct slot){.block = p, .tag = tag, .size = (uint32_t)size};
}

/* Checks and frees every block of an inbox taken by thread `receiver`. */
static void free_received(struct worker *w, struct header *h, long receiver)
{
    while (h) {
        uint64_t tail;
        if (h->receiver != (uint64_t)receiver || h->size < HANDOFF_MIN ||
            ((long)(h->serial >> 40) == receiver && cfg.threads > 1) ||
            (long)(h->serial >> 40) >= cfg.threads ||
            h->tag != bench_tag((uint64_t)receiver, h->serial))
            bench_fail("block %p in thread %ld's inbox has a corrupt header (receiver %u, "
                       "size %u)",
                       (void *)h, receiver, h->receiver, h->size);
        memcpy(&tail, (char *)h + h->size - 8, 8);
        if (tail != ~h->tag)
            bench_fail("block %p (%u bytes) in thread %ld's inbox: its tail was overwritten",
                       (void *)h, h->size, receiver);
        struct header *next = h->next;
        free(h);
        w->frees++;
        w->received++;
        h = next;
    }
}

/* Takes this thread's inbox and frees what it held. */
static void take_inbox(struct worker *w, int tid)
{
    long before = w->received;
    /* acquire: the senders' header writes happen before we read them */
    free_received(w, atomic_exchange_explicit(&w->inbox, NULL, memory_order_acquire), tid);
    /* relaxed: the count only bounds the inbox, it orders nothing */
    atomic_fetch_sub_explicit(&w->pending, w->received - before, memory_order_relaxed);
}

/* True if thread `r` still takes from its inbox and the inbox has room (relaxed loads:
 * a receiver that finishes meanwhile leaves the block to main's cleanup, and the count
 * only bounds the inbox, so a take racing with it does no harm). */
static bool has_room(struct worker *r)
{
    return !atomic_load_explicit(&r->done, memory_order_relaxed) &&
           (cfg.inbox_max == 0 ||
            atomic_load_explicit(&r->pending, memory_order_relaxed) < cfg.inbox_max);
}

/* One hand-off; false (nothing allocated) if every other thread has finished or has a
 * full inbox. */
static bool handoff_step(struct worker *w, int tid, struct bench_rng *rng)
{
    /* relaxed peek: most of the time there is nothing, and no need to own the line */
    if (atomic_load_explicit(&w->inbox, memory_order_relaxed))
        take_inbox(w, tid);
    /* a random other thread that still runs and has room (with one thread: itself) */
    long to = tid;
    if (cfg.threads > 1) {
        to = (long)bench_rng_below(rng, (uint64_t)cfg.threads - 1);
        if (to >= tid)
            to++;
        for (long tries = 0; !has_room(&cfg.workers[to]);) {
            if (++tries == cfg.threads - 1) {
                w->inbox_full++;
                return false; /* every other thread has finished or has a full inbox */
            }
            to = (to + 1) % cfg.threads;
            if (to == tid)
                to = (to + 1) % cfg.threads;
        }
    }
    struct worker *receiver = &cfg.workers[to];
    size_t size = band_size(rng, SMALL_BITS_LO, cfg.handoff_bits);
    if (size < HANDOFF_MIN)
        size = HANDOFF_MIN;
    struct header *h = malloc(size);
    bench_check_ptr(h, size, "malloc");
    w->mallocs++;
    uint64_t serial = ((uint64_t)tid << 40) | ++w->serial;
    *h = (struct header){.tag = bench_tag((uint64_t)to, serial),
                         .serial = serial,
                         .receiver = (uint32_t)to,
                         .size = (uint32_t)size};
    uint64_t tail = ~h->tag;
    memcpy((char *)h + size - 8, &tail, 8);
    /* relaxed: counted before the push, so a take never subtracts a block not counted */
    atomic_fetch_add_explicit(&receiver->pending, 1, memory_order_relaxed);
    _Atomic(struct header *) *inbox = &receiver->inbox;
    h->next = atomic_load_explicit(inbox, memory_order_relaxed);
    /* release: the receiver sees the whole block; a failed CAS means another push or
     * the receiver's take succeeded, and reloads the head into h->next */
    while (!atomic_compare_exchange_weak_explicit(inbox, &h->next, h, memory_order_release,
                                                  memory_order_relaxed))
        ;
    return true;
}

static void private_step(struct worker *w, int tid, struct bench_rng *rng)
{
    struct slot *s = &w->slots[bench_rng_below(rng, (uint64_t)w->nslots)];
    size_t size = pick_size(rng);
    if ((long)bench_rng_below(rng, 100) < cfg.realloc_pct) {
        realloc_slot(w, tid, s, size);
    } else {
        free_slot(w, s, "free");
        fill_slot(w, tid, s, size);
    }
}

static void worker(int tid, void *arg)
{
    (void)arg;
    struct worker *w = &cfg.workers[tid];
    struct bench_rng rng;
    bench_rng_seed(&rng, (uint64_t)tid + 1);
    for (long k = 0; k < w->nslots; k++)
        fill_slot(w, tid, &w->slots[k], pick_size(&rng));
    for (long i = 0; i < w->steps; i++) {
        if ((long)bench_rng_below(&rng, 100) >= cfg.handoff_pct || !handoff_step(w, tid, &rng))
            private_step(w, tid, &rng);
    }
    for (long k = 0; k < w->nslots; k++)
        free_slot(w, &w->slots[k], "final free");
    /* relaxed: senders that miss it push blocks that main frees at the end */
    atomic_store_explicit(&w->done, true, memory_order_relaxed);
    take_inbox(w, tid);
}

/* Start and length of part `i` of `total` things split into `parts` near-equal parts. */
static void split(long total, long parts, long i, long *first, long *count)
{
    *first = total * i / parts;
    *count = total * (i + 1) / parts - *first;
}

int main(int argc, char **argv)
{
    long threads = 1, ops = 10000000, slots = 8192, medium = 20, large = 500, realloc_pct = 10,
         handoff = 30, handoff_max = 1024, inbox_max = 256;
    struct bench_opt opts[] = {
        BENCH_INT("threads", threads, "threads sharing the work"),
        BENCH_INT("ops", ops, "steps in all, split across the threads"),
        BENCH_INT("slots", slots, "private blocks in all, split across threads"),
        BENCH_INT("handoff", handoff, "percent of steps that hand a block over"),
        BENCH_INT("handoff_max", handoff_max, "handed-off blocks are smaller (power of 2)"),
        BENCH_INT("inbox_max", inbox_max, "blocks an inbox holds at most (0: no bound)"),
        BENCH_INT("realloc", realloc_pct, "percent of private steps that realloc"),
        BENCH_INT("medium", medium, "percent of sizes that are 1-32 KiB"),
        BENCH_INT("large", large, "one private size in N is 32-512 KiB (0: none)"),
        BENCH_END,
    };
    bench_parse(argc, argv, "oversubscribed",
                "fixed work split across many threads: mixed sizes, realloc, hand-offs", opts);
    if (threads < 1 || threads >= 1 << 20 || ops < threads || slots < threads || handoff < 0 ||
        handoff > 100 || realloc_pct < 0 || realloc_pct > 100 || medium < 0 || medium > 100 ||
        large < 0 || inbox_max < 0 || handoff_max < 64 || handoff_max > 1 << LARGE_BITS_LO ||
        (handoff_max & (handoff_max - 1)) != 0)
        bench_fail("need 1 <= threads <= ops, slots; percentages 0-100; large, inbox_max >= 0; "
                   "handoff_max a power of two from 64 to %d",
                   1 << LARGE_BITS_LO);
    cfg.threads = threads;
    cfg.medium_pct = medium;
    cfg.large_every = large;
    cfg.realloc_pct = realloc_pct;
    cfg.handoff_pct = handoff;
    cfg.inbox_max = inbox_max;
    cfg.handoff_bits = (unsigned)__builtin_ctzl((unsigned long)handoff_max);

    size_t worker_bytes = (size_t)threads * sizeof(struct worker);
    size_t slot_bytes = (size_t)slots * sizeof(struct slot);
    cfg.workers = bench_map(worker_bytes);
    struct slot *all_slots = bench_map(slot_bytes);
    for (long t = 0; t < threads; t++) {
        struct worker *w = &cfg.workers[t];
        long first;
        split(slots, threads, t, &first, &w->nslots);
        w->slots = all_slots + first;
        split(ops, threads, t, &first, &w->steps);
    }

    double secs = bench_run_threads((int)threads, worker, NULL);

    /* every call the threads made is timed; blocks still in inboxes are freed after */
    long calls = 0, mallocs = 0, frees = 0, reallocs = 0, received = 0, inbox_full = 0;
    for (long t = 0; t < threads; t++) {
        const struct worker *w = &cfg.workers[t];
        calls += w->mallocs + w->frees + w->reallocs;
        mallocs += w->mallocs;
        frees += w->frees;
        reallocs += w->reallocs;
        received += w->received;
        inbox_full += w->inbox_full;
    }
    struct worker cleaner = {.frees = 0};
    for (long t = 0; t < threads; t++)
        free_received(&cleaner, atomic_load(&cfg.workers[t].inbox), t);
    frees += cleaner.frees;
    if (mallocs != frees)
        bench_fail("allocated %ld blocks but freed %ld", mallocs, frees);
    bench_unmap(all_slots, slot_bytes);
    bench_unmap(cfg.workers, worker_bytes);
    bench_result(
        (int)threads,
        "ops=%ld slots=%ld handoff=%ld handoff_max=%ld inbox_max=%ld realloc=%ld medium=%ld "
        "large=%ld "
        "calls=%ld mallocs=%ld reallocs=%ld handed=%ld left=%ld inbox_full=%ld seconds=%.9f "
        "mops=%.3f",
        ops, slots, handoff, handoff_max, inbox_max, realloc_pct, medium, large, calls, mallocs,
        reallocs, received, cleaner.frees, inbox_full, secs, (double)calls / secs / 1e6);
    return 0;
}
