/*
 * Schedule exploration for the buddy back-end (src/buddy*.c). A few simulated threads
 * (coroutines on one OS thread, switched with swapcontext) allocate and free chunks of a
 * small tree; at every step boundary of the algorithms (BUDDY_CHAOS, compiled into this
 * program as a switch point) a seeded random scheduler decides which thread goes on. So
 * the interleavings inside TRYALLOC, FREENODE and UNMARK that a real run hits once in
 * hours come up every few hundred runs, and each run is reproducible from its seed.
 *
 * Each run draws its configuration from its seed: tree depth 4-10, max_chunk 1-4 times
 * below the region, layout (1-level or packed), hints (per thread, none, scattered), 2-4
 * threads with 2-13 operations each, the sizes they ask for, whether a thread frees
 * chunks other threads allocated, and how often the scheduler switches. Checked:
 * - every chunk lies inside the region, is aligned to its size, has the size
 *   buddy_chunk_size reports, and overlaps no live chunk; every free is accepted;
 * - once all threads have finished, every node of the tree and every index entry is zero
 *   again (a bit left set is memory that never comes back, even if it is below the
 *   level of maximal chunks), and the region is allocatable as maximal chunks.
 * The first failing runs print their seed, configuration and the nodes left set.
 * Usage: test_buddy_sched [scale [first seed]]: scale (default 100) is the percentage
 * of the default number of runs.
 */
#include <stdint.h>
#include <string.h>
#include <ucontext.h>

static void sched_point(void);
#define BUDDY_CHAOS() sched_point()
/* With the tree's invariant checks (src/invariant.h), as in the tests' library. */
#define LFHEAP_CHECKS
#include "../src/buddy.c"
#include "../src/buddy_flat.c"
#include "../src/buddy_packed.c"

#include "buddytest.h"
#include "testutil.h"

#define RUNS        30000u
#define MAX_THREADS 4
#define STACK_SIZE  (64u << 10)
#define MAX_POINTS  (1u << 22) /* per run: far above any lock-free run, a livelock alarm */

struct sim_thread {
    ucontext_t context;
    char *stack;
    struct hint_way hints[HINT_WAYS]; /* its thread-local hints while it is switched out */
    uint64_t rng;
    unsigned ops;
    bool done;
};

struct run_config {
    uint64_t seed;
    unsigned depth, base_level, flags, threads, ops, stay_percent;
    unsigned min_level, max_level; /* levels of the requests */
    bool cross;                    /* a free takes any live chunk, not the thread's last */
};

static struct sim_thread threads[MAX_THREADS];
static unsigned current;
static ucontext_t scheduler_context;
static bool simulating;
static unsigned long points, total_points;
static uint64_t sched_rng;

static struct buddy *tree;
static struct run_config config;
static void *live[MAX_THREADS * 16];
static unsigned nlive;
static uint8_t *unit_owned; /* per minimum chunk: 1 while a live chunk covers it */
static unsigned run_errors;

/* BUDDY_CHAOS: hand control back to the scheduler (or, now and then, keep going). */
static void sched_point(void)
{
    if (!simulating)
        return;
    if (++points > MAX_POINTS) {
        fprintf(stderr, "seed %llu: no progress after %u steps (livelock?)\n",
                (unsigned long long)config.seed, MAX_POINTS);
        exit(1);
    }
    if (buddytest_random(&sched_rng) % 100 < config.stay_percent)
        return;
    swapcontext(&threads[current].context, &scheduler_context);
}

static void run_error(const char *what)
{
    if (run_errors++ == 0)
        fprintf(stderr, "seed %llu: %s\n", (unsigned long long)config.seed, what);
}

static void allocate(struct sim_thread *t)
{
    unsigned span = config.max_level - config.min_level + 1;
    unsigned level = config.min_level + (unsigned)(buddytest_random(&t->rng) % span);
    size_t size = tree->size >> level;
    char *p = buddy_alloc(tree, size);
    if (!p)
        return; /* allowed under concurrency (buddy.h); the end state is checked */
    size_t offset = (size_t)(p - tree->base);
    if (offset >= tree->size || offset % size || buddy_chunk_size(tree, p) != size) {
        run_error("chunk outside the region, misaligned or of the wrong size");
        return;
    }
    size_t first = offset >> tree->min_shift, count = size >> tree->min_shift;
    for (size_t u = first; u < first + count; u++) {
        if (unit_owned[u])
            run_error("chunk overlaps a live chunk");
        unit_owned[u] = 1;
    }
    live[nlive++] = p;
}

static void release(struct sim_thread *t)
{
    unsigned k = config.cross ? (unsigned)(buddytest_random(&t->rng) % nlive) : nlive - 1;
    char *p = live[k];
    live[k] = live[--nlive];
    size_t size = buddy_chunk_size(tree, p);
    size_t first = (size_t)(p - tree->base) >> tree->min_shift;
    /* The chunk is the owner's until it calls free: unmark it first. */
    memset(unit_owned + first, 0, size >> tree->min_shift);
    if (!size || !buddy_free(tree, p))
        run_error("free of a live chunk refused");
}

static void thread_main(void)
{
    struct sim_thread *t = &threads[current];
    for (unsigned op = 0; op < t->ops; op++) {
        if (nlive == 0 ||
            (nlive < sizeof live / sizeof *live && buddytest_random(&t->rng) % 100 < 55))
            allocate(t);
        else
            release(t);
    }
    while (nlive) /* the threads empty the region together */
        release(t);
    t->done = true;
    swapcontext(&t->context, &scheduler_context);
}

static bool maximal_chunks_come_back(struct buddy *b)
{
    size_t n = b->size / b->max_chunk, got = 0;
    void *all[4];
    for (size_t i = 0; i < n; i++)
        if ((all[got] = buddy_alloc(b, b->max_chunk)) != NULL)
            got++;
    bool ok = got == n && !buddy_alloc(b, buddy_min_chunk(b));
    for (size_t i = 0; i < got; i++)
        buddy_free(b, all[i]);
    return ok;
}

static void draw_config(uint64_t seed)
{
    uint64_t r = mix64(seed) | 1;
    static const unsigned hint_flags[] = {0, BUDDY_NO_HINTS, BUDDY_SCATTER};
    config.seed = seed;
    config.depth = 4 + (unsigned)(buddytest_random(&r) % 7);
    config.base_level = (unsigned)(buddytest_random(&r) % 3);
    config.flags =
        ((buddytest_random(&r) & 1) ? BUDDY_PACKED : 0) | hint_flags[buddytest_random(&r) % 3];
    config.threads = 2 + (unsigned)(buddytest_random(&r) % (MAX_THREADS - 1));
    config.ops = 2 + (unsigned)(buddytest_random(&r) % 12);
    config.stay_percent = (unsigned)(buddytest_random(&r) % 90);
    unsigned levels = config.depth - config.base_level + 1;
    config.min_level = config.base_level + (unsigned)(buddytest_random(&r) % levels);
    config.max_level =
        config.min_level + (unsigned)(buddytest_random(&r) % (config.depth - config.min_level + 1));
    config.cross = buddytest_random(&r) & 1;
    sched_rng = buddytest_random(&r) | 1;
}

/* One run; true if it passed. */
static bool run_one(uint64_t seed)
{
    draw_config(seed);
    size_t size = BUDDY_MIN_CHUNK << config.depth;
    tree = buddy_create(NULL, size, BUDDY_MIN_CHUNK, size >> config.base_level, config.flags);
    REQUIRE(tree);
    unit_owned = calloc((size_t)1 << config.depth, 1);
    REQUIRE(unit_owned);
    nlive = 0;
    run_errors = 0;
    points = 0;
    for (unsigned i = 0; i < config.threads; i++) {
        struct sim_thread *t = &threads[i];
        /* Each thread's hints start as a new thread's would, but seeded from the run's
         * seed (the library seeds scattered hints from the TLS address, which varies). */
        memset(t->hints, 0, sizeof t->hints);
        struct hint_way *way = &t->hints[tree->serial % HINT_WAYS];
        way->serial = tree->serial;
        for (unsigned l = config.base_level; (config.flags & BUDDY_SCATTER) && l <= config.depth;
             l++)
            way->node[l] =
                (uint32_t)((1ull << l) | (buddytest_random(&sched_rng) & ((1ull << l) - 1)));
        t->rng = mix64(seed * MAX_THREADS + i) | 1;
        t->ops = config.ops;
        t->done = false;
        REQUIRE(getcontext(&t->context) == 0);
        t->context.uc_stack.ss_sp = t->stack;
        t->context.uc_stack.ss_size = STACK_SIZE;
        t->context.uc_link = NULL;
        makecontext(&t->context, thread_main, 0);
    }
    simulating = true;
    for (unsigned running = config.threads; running;) {
        unsigned k = (unsigned)(buddytest_random(&sched_rng) % config.threads);
        if (threads[k].done)
            continue;
        current = k;
        memcpy(hint_ways, threads[k].hints, sizeof hint_ways); /* switch its TLS in */
        swapcontext(&scheduler_context, &threads[k].context);
        memcpy(threads[k].hints, hint_ways, sizeof hint_ways);
        if (threads[k].done)
            running--;
    }
    simulating = false;
    total_points += points;
    memset(hint_ways, 0, sizeof hint_ways);
    if (!buddytest_tree_empty(tree)) {
        run_error("tree not empty after every chunk was freed");
        buddytest_print_tree(tree, 16);
    }
    if (!maximal_chunks_come_back(tree))
        run_error("the region is not allocatable as maximal chunks");
    if (run_errors)
        fprintf(stderr,
                "  config: %s%s%s, size %zu, max_chunk %zu, %u threads x %u ops, request levels "
                "%u-%u, %s, switch %u%%\n",
                (config.flags & BUDDY_PACKED) ? "packed" : "1-level",
                (config.flags & BUDDY_NO_HINTS) ? " no hints" : "",
                (config.flags & BUDDY_SCATTER) ? " scattered hints" : "", tree->size,
                tree->max_chunk, config.threads, config.ops, config.min_level, config.max_level,
                config.cross ? "cross frees" : "own frees", 100 - config.stay_percent);
    free(unit_owned);
    buddy_destroy(tree);
    return run_errors == 0;
}

static unsigned scale = 100;
static uint64_t first_seed = 1;

static void test_schedules(void)
{
    unsigned runs = (unsigned)((unsigned long)RUNS * scale / 100), failed = 0, run;
    if (!runs)
        runs = 1;
    for (unsigned i = 0; i < MAX_THREADS; i++) {
        threads[i].stack = malloc(STACK_SIZE);
        REQUIRE(threads[i].stack);
    }
    for (run = 0; run < runs && failed < 3; run++) /* three failures show the pattern */
        if (!run_one(first_seed + run))
            failed++;
    if (failed || getenv("TEST_VERBOSE"))
        fprintf(stderr, "schedules: %u runs from seed %llu, %u failed, %lu switch points\n", run,
                (unsigned long long)first_seed, failed, total_points);
    CHECK(failed == 0);
    for (unsigned i = 0; i < MAX_THREADS; i++)
        free(threads[i].stack);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scale = (unsigned)strtoul(argv[1], NULL, 10);
    if (argc > 2)
        first_seed = strtoull(argv[2], NULL, 0);
    if (!scale)
        scale = 1;
    RUN(test_schedules);
    return test_exit_status();
}
