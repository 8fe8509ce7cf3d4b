/*
 * backend: the buddy back-end alone, through its own API, in the four scenarios of the
 * NBBS paper (§5.1), against a spin-locked buddy with the same tree (bench/spinbuddy.c)
 * and against mmap/munmap:
 *   cached     - each thread allocates one chunk and frees it at once, in a loop;
 *   linux      - Linux Scalability: each thread allocates a burst of B chunks, then frees
 *                them, in a loop;
 *   thread     - Thread Test: the same with the burst divided among the threads;
 *   occupancy  - Constant Occupancy: each thread holds a pool of chunks of four sizes
 *                (s, 2s, 4s, 8s; eight times more of the smallest), then repeatedly
 *                frees a random one and allocates the same size again.
 * Every measurement does the same total number of alloc+free pairs, split among the
 * threads, so throughput (millions of pairs per second, all threads together) compares
 * across thread counts; mmap does a twentieth of the work (it is that much slower).
 * The buddies manage 1 GiB with 4 KiB minimum and 4 MiB maximum chunks, as in the paper;
 * no chunk memory is touched (the allocators' own cost is measured). Every run measures
 * every allocator, and ratios are taken within a run; the table shows medians over runs.
 *
 * Usage: backend [-r runs] [-s scale%] [-t 1,2,4,8] [-z 4096,32768,262144]
 *                [-w cached,linux,thread,occupancy] [-c file.csv]
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "buddy.h"
#include "spinbuddy.h"

#define REGION      ((size_t)1 << 30)
#define MIN_CHUNK   ((size_t)4096)
#define MAX_CHUNK   ((size_t)4 << 20)
#define MAX_THREADS 64
#define MAX_RUNS    15

enum kind { NBBS_1LVL, NBBS_4LVL, SPIN, MMAP, KINDS };
static const char *kind_name[KINDS] = {"nbbs-1lvl", "nbbs-packed", "spin-buddy", "mmap"};

enum scenario { CACHED, LINUX, THREAD, OCCUPANCY, SCENARIOS };
static const char *scenario_name[SCENARIOS] = {"cached", "linux", "thread", "occupancy"};
static const char *scenario_title[SCENARIOS] = {"Cached allocation", "Linux scalability",
                                                "Thread test", "Constant occupancy"};

/* Work per measurement in alloc+free pairs (at scale 100), and the burst lengths. */
#define PAIRS        600000
#define MMAP_DIVISOR 20
#define LINUX_BURST  256  /* per thread */
#define THREAD_BURST 2048 /* all threads together */
#define POOL_UNIT    4    /* occupancy pool: 8u, 4u, 2u, u chunks of s, 2s, 4s, 8s */

struct instance {
    enum kind kind;
    struct buddy *nbbs;
    struct spinbuddy *spin;
};

static inline void *chunk_alloc(struct instance *in, size_t size)
{
    switch (in->kind) {
    case NBBS_1LVL:
    case NBBS_4LVL:
        return buddy_alloc(in->nbbs, size);
    case SPIN:
        return spinbuddy_alloc(in->spin, size);
    default: {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    }
}

static inline void chunk_free(struct instance *in, void *p, size_t size)
{
    switch (in->kind) {
    case NBBS_1LVL:
    case NBBS_4LVL:
        buddy_free(in->nbbs, p);
        break;
    case SPIN:
        spinbuddy_free(in->spin, p);
        break;
    default:
        munmap(p, size);
    }
}

struct job {
    struct instance *in;
    enum scenario scenario;
    size_t size;
    unsigned threads, id;
    unsigned long pairs; /* this thread's share */
    pthread_barrier_t *start;
    double t_start, t_end;
    unsigned long failures;
    pthread_t thread;
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* An allocation that must not fail: NBBS may miss a chunk under contention (buddy.h),
 * and the paper's benchmarks are set up so that memory never runs out; count and retry. */
static void *must_alloc(struct job *j, size_t size)
{
    void *p;
    while (!(p = chunk_alloc(j->in, size))) {
        if (++j->failures > 1000000) {
            fprintf(stderr, "backend: %s cannot allocate %zu bytes\n", kind_name[j->in->kind],
                    size);
            exit(1);
        }
    }
    return p;
}

static uint64_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

static void *job_main(void *arg)
{
    struct job *j = arg;
    size_t s = j->size;
    unsigned long pairs = j->pairs;
    void **chunks = NULL;
    size_t *sizes = NULL;
    unsigned burst = 0;
    if (j->scenario == LINUX || j->scenario == THREAD) {
        burst = j->scenario == LINUX ? LINUX_BURST : THREAD_BURST / j->threads;
        chunks = malloc(burst * sizeof *chunks);
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull * (j->id + 1);
    unsigned pool = 15 * POOL_UNIT;
    if (j->scenario == OCCUPANCY) {
        chunks = malloc(pool * sizeof *chunks);
        sizes = malloc(pool * sizeof *sizes);
        /* The pool is set up before the clock starts: the loop is what is measured. */
        unsigned k = 0;
        for (unsigned cls = 0; cls < 4; cls++)
            for (unsigned i = 0; i < (8u >> cls) * POOL_UNIT; i++, k++) {
                sizes[k] = s << cls;
                chunks[k] = must_alloc(j, sizes[k]);
            }
    }
    pthread_barrier_wait(j->start);
    j->t_start = now();
    switch (j->scenario) {
    case CACHED:
        for (unsigned long i = 0; i < pairs; i++)
            chunk_free(j->in, must_alloc(j, s), s);
        break;
    case LINUX:
    case THREAD:
        for (unsigned long done = 0; done < pairs; done += burst) {
            for (unsigned i = 0; i < burst; i++)
                chunks[i] = must_alloc(j, s);
            for (unsigned i = 0; i < burst; i++)
                chunk_free(j->in, chunks[i], s);
        }
        break;
    case OCCUPANCY:
        for (unsigned long i = 0; i < pairs; i++) {
            unsigned k = (unsigned)(next_random(&rng) % pool);
            chunk_free(j->in, chunks[k], sizes[k]);
            chunks[k] = must_alloc(j, sizes[k]);
        }
        break;
    default:
        break;
    }
    j->t_end = now();
    if (j->scenario == OCCUPANCY)
        for (unsigned k = 0; k < pool; k++)
            chunk_free(j->in, chunks[k], sizes[k]);
    free(chunks);
    free(sizes);
    return NULL;
}

/* One measurement: millions of alloc+free pairs per second, all threads together. */
static double measure(enum kind kind, enum scenario sc, size_t size, unsigned threads,
                      unsigned long total_pairs, unsigned long *failures)
{
    struct instance in = {.kind = kind};
    if (kind == NBBS_1LVL || kind == NBBS_4LVL) {
        in.nbbs =
            buddy_create(NULL, REGION, MIN_CHUNK, MAX_CHUNK, kind == NBBS_4LVL ? BUDDY_PACKED : 0);
        if (!in.nbbs) {
            perror("buddy_create");
            exit(1);
        }
    } else if (kind == SPIN) {
        in.spin = spinbuddy_create(REGION, MIN_CHUNK, MAX_CHUNK);
        if (!in.spin) {
            perror("spinbuddy_create");
            exit(1);
        }
    }
    if (kind == MMAP)
        total_pairs /= MMAP_DIVISOR;
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, threads);
    struct job jobs[MAX_THREADS];
    unsigned long share = total_pairs / threads;
    if (sc == LINUX && share < LINUX_BURST)
        share = LINUX_BURST;
    for (unsigned i = 0; i < threads; i++) {
        jobs[i] = (struct job){.in = &in,
                               .scenario = sc,
                               .size = size,
                               .threads = threads,
                               .id = i,
                               .pairs = share,
                               .start = &start};
        if (pthread_create(&jobs[i].thread, NULL, job_main, &jobs[i])) {
            perror("pthread_create");
            exit(1);
        }
    }
    double t0 = 1e300, t1 = 0;
    unsigned long done = 0;
    for (unsigned i = 0; i < threads; i++) {
        pthread_join(jobs[i].thread, NULL);
        t0 = jobs[i].t_start < t0 ? jobs[i].t_start : t0;
        t1 = jobs[i].t_end > t1 ? jobs[i].t_end : t1;
        *failures += jobs[i].failures;
        /* the pairs actually done (bursts round the share up) */
        unsigned burst = sc == LINUX ? LINUX_BURST : sc == THREAD ? THREAD_BURST / threads : 1;
        done += (share + burst - 1) / burst * burst;
    }
    pthread_barrier_destroy(&start);
    if (in.nbbs)
        buddy_destroy(in.nbbs);
    if (in.spin)
        spinbuddy_destroy(in.spin);
    return (double)done / (t1 - t0) / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, unsigned n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static unsigned parse_list(const char *arg, unsigned long *out, unsigned max)
{
    unsigned n = 0;
    char *copy = strdup(arg), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
        out[n++] = strtoul(tok, NULL, 0);
    free(copy);
    return n;
}

int main(int argc, char **argv)
{
    unsigned runs = 3, scale = 100;
    unsigned long threads[8] = {1, 2, 4, 8}, sizes[8] = {4096, 32768, 262144};
    unsigned nthreads = 4, nsizes = 3;
    bool want[SCENARIOS] = {true, true, true, true};
    const char *csv_path = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *opt = argv[i], *val = argv[i + 1];
        if (!strcmp(opt, "-r"))
            runs = (unsigned)strtoul(val, NULL, 10);
        else if (!strcmp(opt, "-s"))
            scale = (unsigned)strtoul(val, NULL, 10);
        else if (!strcmp(opt, "-t"))
            nthreads = parse_list(val, threads, 8);
        else if (!strcmp(opt, "-z"))
            nsizes = parse_list(val, sizes, 8);
        else if (!strcmp(opt, "-c"))
            csv_path = val;
        else if (!strcmp(opt, "-w"))
            for (unsigned s = 0; s < SCENARIOS; s++)
                want[s] = strstr(val, scenario_name[s]) != NULL;
        else {
            fprintf(stderr, "usage: backend [-r runs] [-s scale%%] [-t threads,..] "
                            "[-z sizes,..] [-w scenarios,..] [-c file.csv]\n");
            return 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS || !scale) {
        fprintf(stderr, "backend: runs must be 1..%d, scale > 0\n", MAX_RUNS);
        return 2;
    }
    for (unsigned t = 0; t < nthreads; t++)
        if (threads[t] < 1 || threads[t] > MAX_THREADS) {
            fprintf(stderr, "backend: threads must be 1..%d\n", MAX_THREADS);
            return 2;
        }
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "scenario,size,threads,allocator,run,mpairs_per_s,ratio_to_nbbs_1lvl\n");
    unsigned long total = (unsigned long)PAIRS * scale / 100;
    printf("Throughput in millions of alloc+free pairs per second (all threads), median of %u "
           "runs;\nin brackets: throughput relative to nbbs-1lvl in the same run. Region 1 GiB, "
           "chunks 4 KiB - 4 MiB;\n%lu pairs per measurement (mmap: %lu).\n",
           runs, total, total / MMAP_DIVISOR);
    unsigned long failures[KINDS] = {0};
    double geo_sum[KINDS][8] = {{0}};
    unsigned geo_n = 0;
    for (unsigned sc = 0; sc < SCENARIOS; sc++) {
        if (!want[sc])
            continue;
        printf("\n### %s%s\n\n| size | allocator |", scenario_title[sc],
               sc == OCCUPANCY ? " (sizes s..8s)" : "");
        for (unsigned t = 0; t < nthreads; t++)
            printf(" %lu thr |", threads[t]);
        printf("\n|---|---|");
        for (unsigned t = 0; t < nthreads; t++)
            printf("---|");
        printf("\n");
        for (unsigned z = 0; z < nsizes; z++) {
            double thr[KINDS][8][MAX_RUNS], ratio[KINDS][8][MAX_RUNS];
            for (unsigned t = 0; t < nthreads; t++)
                for (unsigned r = 0; r < runs; r++)
                    for (unsigned k = 0; k < KINDS; k++) {
                        thr[k][t][r] =
                            measure(k, sc, sizes[z], (unsigned)threads[t], total, &failures[k]);
                        ratio[k][t][r] = thr[k][t][r] / thr[NBBS_1LVL][t][r];
                        if (csv)
                            fprintf(csv, "%s,%lu,%lu,%s,%u,%.4f,%.4f\n", scenario_name[sc],
                                    sizes[z], threads[t], kind_name[k], r, thr[k][t][r],
                                    ratio[k][t][r]);
                    }
            for (unsigned k = 0; k < KINDS; k++) {
                printf("| %lu KiB | %s |", sizes[z] >> 10, kind_name[k]);
                for (unsigned t = 0; t < nthreads; t++) {
                    double m = median(thr[k][t], runs), q = median(ratio[k][t], runs);
                    if (k == NBBS_1LVL)
                        printf(" %.2f |", m);
                    else
                        printf(" %.2f (%.2f) |", m, q);
                    geo_sum[k][t] += log(q);
                }
                printf("\n");
            }
            geo_n++;
            fflush(stdout);
        }
    }
    if (geo_n) {
        printf("\n### Summary: throughput relative to nbbs-1lvl, geometric mean over the %u "
               "scenario x size cells\n\n| allocator |",
               geo_n);
        for (unsigned t = 0; t < nthreads; t++)
            printf(" %lu thr |", threads[t]);
        printf(" all |\n|---|");
        for (unsigned t = 0; t <= nthreads; t++)
            printf("---|");
        printf("\n");
        for (unsigned k = 1; k < KINDS; k++) {
            double all = 0;
            printf("| %s |", kind_name[k]);
            for (unsigned t = 0; t < nthreads; t++) {
                printf(" %.2f |", exp(geo_sum[k][t] / geo_n));
                all += geo_sum[k][t];
            }
            printf(" %.2f |\n", exp(all / (geo_n * nthreads)));
        }
    }
    for (unsigned k = 0; k < KINDS; k++)
        if (failures[k])
            printf("note: %s returned NULL %lu times (retried)\n", kind_name[k], failures[k]);
    if (csv)
        fclose(csv);
    return 0;
}
