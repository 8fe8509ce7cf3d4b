/*
 * The arena layer: chunks from several threads never overlap, a chunk is never
 * decommitted while it is in use (its contents survive concurrent purges), a large
 * block's run grows in place only over chunks nobody holds, dirty chunks are reused, by
 * the thread that freed them first, and once everything is freed and purged the arenas
 * coalesce completely.
 */
#include "arena.h"
#include "buddy.h"
#include "os.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 4
#define OPS     3000
#define HELD    24

static _Atomic long corrupt;
static _Atomic long regrown; /* growths in place that succeeded */
static _Atomic int stop_purger;

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Stamps the first word of every page with (owner, serial) and checks it later: a chunk
 * handed out twice, or decommitted while held, loses its stamps. */
static void stamp(char *p, size_t size, uint64_t value)
{
    for (size_t off = 0; off < size; off += 4096)
        memcpy(p + off, &value, sizeof value);
}

static int stamped(const char *p, size_t size, uint64_t value)
{
    for (size_t off = 0; off < size; off += 4096) {
        uint64_t got;
        memcpy(&got, p + off, sizeof got);
        if (got != value)
            return 0;
    }
    return 1;
}

/* arena_alloc where the test knows that no bigger freed run waits: the chunk is of the
 * request's own size. */
/* The purge delay this test runs with (main sets it before the first call). */
#define ARENA_TEST_DELAY_MS 2000

static char *own_chunk(size_t size, bool *zeroed)
{
    size_t got = 0;
    char *p = arena_alloc(size, zeroed, &got);
    CHECK(!p || got == arena_chunk_size(size));
    return p;
}

static void *worker(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    uint64_t rng = 0x2545F4914F6CDD1Dull * (id + 1);
    char *held[HELD] = {0};
    size_t sizes[HELD] = {0};
    uint64_t tags[HELD] = {0};
    bool large[HELD] = {0};
    for (int op = 0; op < OPS; op++) {
        unsigned slot = (unsigned)(next_random(&rng) % HELD);
        if (held[slot] && large[slot] && (next_random(&rng) & 1)) {
            /* Grown in place when there is room, while other threads take and free the
             * chunks after it: the pages it had keep their stamps, and every page of the
             * new extent is its own (a chunk taken twice loses a stamp somewhere). */
            size_t extent = sizes[slot], want = extent + 4096 * (1 + next_random(&rng) % 64);
            if (!stamped(held[slot], extent, tags[slot]))
                atomic_fetch_add(&corrupt, 1);
            if (arena_large_regrow(held[slot], &extent, want)) {
                if (extent < want || extent > arena_large_size(want))
                    atomic_fetch_add(&corrupt, 1);
                sizes[slot] = extent;
                stamp(held[slot], extent, tags[slot]);
                atomic_fetch_add(&regrown, 1);
            } else if (extent != sizes[slot]) {
                atomic_fetch_add(&corrupt, 1); /* refused, yet changed */
            }
            continue;
        }
        if (held[slot]) {
            if (!stamped(held[slot], sizes[slot], tags[slot]))
                atomic_fetch_add(&corrupt, 1);
            arena_free(held[slot], sizes[slot]);
        }
        uint64_t r = next_random(&rng);
        size_t size = (size_t)4096 << (r % 9); /* 4 KiB .. 1 MiB */
        bool zeroed;
        size_t run = size;
        char *p;
        if (r & 1024) { /* a large block's run: 5/8 to 8/8 of a chunk, or a freed one */
            size += (size_t)(r >> 20) % size;
            p = arena_alloc_large(size, &zeroed, &run);
        } else {
            p = arena_alloc(size, &zeroed, &run); /* its size, or a freed bigger run */
        }
        if (!p || ((uintptr_t)p & (arena_chunk_size(size) - 1))) {
            atomic_fetch_add(&corrupt, 1);
            held[slot] = NULL;
            continue;
        }
        if (zeroed && !stamped(p, run, 0))
            atomic_fetch_add(&corrupt, 1); /* promised zeros, found data */
        held[slot] = p;
        sizes[slot] = run;
        large[slot] = (r & 1024) != 0;
        tags[slot] = id << 32 | (uint64_t)op;
        stamp(p, run, tags[slot]);
    }
    for (unsigned slot = 0; slot < HELD; slot++)
        if (held[slot]) {
            if (!stamped(held[slot], sizes[slot], tags[slot]))
                atomic_fetch_add(&corrupt, 1);
            arena_free(held[slot], sizes[slot]);
        }
    return NULL;
}

static void *purger(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_purger))
        arena_purge_all();
    return NULL;
}

static void concurrent_chunks_with_purges(void)
{
    pthread_t t[THREADS], p;
    REQUIRE(pthread_create(&p, NULL, purger, NULL) == 0);
    for (uintptr_t i = 0; i < THREADS; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    atomic_store(&stop_purger, 1);
    pthread_join(p, NULL);
    CHECK(atomic_load(&corrupt) == 0);
    /* Some of the thousands of attempts found room (most runs are fresh, 5/8 to 7/8 of
     * a chunk whose rest nobody took yet): the path above was taken, not just tried. */
    CHECK(atomic_load(&regrown) > 0);
    printf("# %ld growths in place\n", atomic_load(&regrown));
}

static void everything_coalesces_after_purge(void)
{
    arena_purge_all();
    /* every arena's whole region is free again: whole-arena chunks come back, as many
     * as there are arenas, without a new one being mapped for each */
    char *whole[64];
    int got = 0;
    bool zeroed;
    for (; got < 64; got++) {
        whole[got] = own_chunk(ARENA_MAX_CHUNK, &zeroed);
        if (!whole[got] || !zeroed)
            break;
    }
    CHECK(got >= 1);
    for (int i = 0; i < got; i++)
        arena_free(whole[i], ARENA_MAX_CHUNK);
    arena_purge_all();
}

static void dirty_chunks_are_reused(void)
{
    bool zeroed;
    char *a = own_chunk(64 * 1024, &zeroed);
    REQUIRE(a);
    memset(a, 0x5c, 64 * 1024);
    arena_free(a, 64 * 1024);
    char *b = own_chunk(60 * 1024, &zeroed); /* same chunk size: the dirty one */
    CHECK(b == a && !zeroed && b[100] == 0x5c);
    arena_free(b, 60 * 1024);
    CHECK(arena_purge_all() >= 1);
    char *c = own_chunk(64 * 1024, &zeroed); /* purged: comes back zeroed */
    REQUIRE(c);
    CHECK(zeroed && c[100] == 0);
    arena_free(c, 64 * 1024);
}

/* Freed chunks go back to the thread that freed them: two threads each free a chunk, one
 * after the other, and then each allocates one and gets its own back (with one stack for
 * all threads, the first to allocate took the chunk freed last, the other's). A thread
 * that freed nothing still reuses another thread's dirty chunk before a fresh one. */
struct row_thread {
    pthread_barrier_t *phase;
    int order; /* 0: frees and allocates first */
    char *freed, *reused;
    bool reused_zeroed;
};

static void *row_worker(void *arg)
{
    struct row_thread *t = arg;
    bool zeroed;
    t->freed = own_chunk(64 * 1024, &zeroed);
    if (t->freed)
        memset(t->freed, 0x3c + t->order, 64 * 1024);
    for (int step = 0; step < 4; step++) {
        pthread_barrier_wait(t->phase);
        if (step / 2 == 0 && step % 2 == t->order && t->freed)
            arena_free(t->freed, 64 * 1024);
        if (step / 2 == 1 && step % 2 == t->order)
            t->reused = own_chunk(64 * 1024, &t->reused_zeroed);
    }
    return NULL;
}

static void *alloc_worker(void *arg)
{
    struct row_thread *t = arg;
    t->reused = own_chunk(64 * 1024, &t->reused_zeroed);
    return NULL;
}

static void freed_chunks_return_to_their_thread(void)
{
    pthread_barrier_t phase;
    REQUIRE(pthread_barrier_init(&phase, NULL, 2) == 0);
    struct row_thread t[2] = {{.phase = &phase, .order = 0}, {.phase = &phase, .order = 1}};
    pthread_t id[2];
    for (int i = 0; i < 2; i++)
        REQUIRE(pthread_create(&id[i], NULL, row_worker, &t[i]) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(id[i], NULL);
    pthread_barrier_destroy(&phase);
    REQUIRE(t[0].freed && t[1].freed && t[0].reused && t[1].reused);
    for (int i = 0; i < 2; i++)
        CHECK(t[i].reused == t[i].freed && !t[i].reused_zeroed && t[i].reused[100] == 0x3c + i);
    arena_free(t[1].reused, 64 * 1024);
    arena_purge_all();
    arena_free(t[0].reused, 64 * 1024);
    struct row_thread third = {.phase = NULL};
    pthread_t other;
    REQUIRE(pthread_create(&other, NULL, alloc_worker, &third) == 0);
    pthread_join(other, NULL);
    CHECK(third.reused == t[0].reused && !third.reused_zeroed);
    if (third.reused)
        arena_free(third.reused, 64 * 1024);
}

/* A buddy level marked full while a chunk of it is free (as when another thread's
 * allocation had marked that chunk and lost its CAS during the scan that set the mark):
 * the arenas are scanned whole before a new one is mapped, and the free chunk is found.
 * Runs first, while one arena is mapped. */
static void level_wrongly_marked_full_maps_no_arena(void)
{
    REQUIRE(arena_mapped() <= 1);
    bool zeroed;
    char *c = own_chunk(64 * 1024, &zeroed);
    REQUIRE(c && arena_mapped() == 1);
    arena_free(c, 64 * 1024);
    REQUIRE(arena_purge_all() >= 1); /* free inside its buddy again */
    struct buddy *b = arena_buddy(c);
    unsigned level = b->size_shift - 16;
    atomic_store(&b->full_at[level], atomic_load(&b->release_count) + 1);
    CHECK(buddy_alloc_unless_full(b, 64 * 1024) == NULL); /* the mark is trusted */
    char *again = own_chunk(64 * 1024, &zeroed);
    CHECK(again && arena_buddy(again) == b && arena_mapped() == 1);
    if (again)
        arena_free(again, 64 * 1024);
    arena_purge_all();
}

#define MIB ((size_t)1 << 20)

/* A large block gets a run: its class's leading pieces of a chunk aligned to the chunk
 * size, holding less than a quarter more than the request (and a page); a fresh one
 * reads as zeros. */
static void large_runs_hold_at_most_a_quarter_more(void)
{
    for (size_t size = 32 * 1024 + 1; size <= 48 * MIB; size += size / 13 + 4093) {
        arena_purge_all(); /* nothing waits: every run is fresh */
        bool zeroed;
        size_t run;
        char *p = arena_alloc_large(size, &zeroed, &run);
        REQUIRE(p);
        CHECK(run >= size && run - size <= size / 4 + 4096 && run == arena_large_size(size));
        CHECK(zeroed && ((uintptr_t)p & (arena_chunk_size(size) - 1)) == 0);
        if (run - size > size / 4 + 4096 || run < size)
            fprintf(stderr, "  size %zu got a run of %zu\n", size, run);
        p[0] = 1;
        p[run - 1] = 1;
        arena_free(p, run);
    }
    arena_purge_all();
}

/* The rest of a run's chunk is free in its buddy: other chunks are carved from it. */
static void run_tails_are_reused(void)
{
    arena_purge_all();
    bool zeroed;
    size_t run;
    char *a = arena_alloc_large(20 * MIB + 1, &zeroed, &run); /* 24 of a 32 MiB chunk */
    REQUIRE(a);
    CHECK(run == 24 * MIB && zeroed);
    /* This thread allocates from a's arena first, and it has at most five free chunks of
     * 8 MiB (four in its other half): the tail's must be one of them. */
    char *eight[5];
    int in_tail = 0;
    for (int i = 0; i < 5; i++) {
        eight[i] = own_chunk(8 * MIB, &zeroed);
        REQUIRE(eight[i]);
        in_tail += eight[i] == a + 24 * MIB;
        CHECK(eight[i] + 8 * MIB <= a || eight[i] >= a + run); /* never inside the run */
    }
    CHECK(in_tail == 1);
    for (int i = 0; i < 5; i++)
        arena_free(eight[i], 8 * MIB);
    arena_free(a, run);
    arena_purge_all();
}

/* A freed run is reused by a smaller block if it holds at most three times the
 * block (ARENA_LARGE_REUSE_MAX), with the pages its previous tenant wrote as they were,
 * and by a bigger block of its order, extended over the free rest of its chunk; a run
 * more than three times the block is not taken whole: with the freed runs outweighing
 * those in use, it is merged into its buddy and the block takes a chunk of its pages. */
static void freed_runs_are_reused_and_extended(void)
{
    arena_purge_all();
    bool zeroed;
    size_t run;
    char *a = arena_alloc_large(20 * MIB + 1, &zeroed, &run);
    REQUIRE(a);
    CHECK(run == 24 * MIB);
    memset(a, 0x3d, run);
    arena_free(a, run);
    /* a class of 10 MiB: the run whole, of which the block gets its 10 MiB (its tail waits
     * for the block to live a purge delay: reused_run_tails_go_back) */
    char *b = arena_alloc_large(8 * MIB + 1, &zeroed, &run);
    CHECK(b == a && run == 10 * MIB && !zeroed);
    CHECK(b[0] == 0x3d && b[run - 1] == 0x3d);
    memset(b, 0x3e, run);
    arena_free(b, run);
    char *c = arena_alloc_large(27 * MIB, &zeroed, &run); /* 28 MiB: 24 waits, 4 free */
    CHECK(c == a && run == 28 * MIB && !zeroed);
    /* Past b's 10 MiB, a's bytes, or zeros if a slow machine let b outlive the delay. */
    CHECK(c[0] == 0x3e && c[10 * MIB - 1] == 0x3e && (c[24 * MIB - 1] | 0x3d) == 0x3d &&
          c[24 * MIB] == 0 && c[run - 1] == 0);
    arena_free(c, run);
    /* 28 MiB is more than three times 9 MiB: the run is merged, and a run of 10 MiB is
     * carved from its pages, which hold c's bytes (not zeroed) */
    char *d = arena_alloc_large(9 * MIB, &zeroed, &run);
    REQUIRE(d);
    CHECK(d >= a && d + 10 * MIB <= a + 28 * MIB && run == 10 * MIB && !zeroed);
    arena_free(d, run);
    arena_purge_all();
}

/* Pages of [p, p + size) that are resident. */
static size_t resident_pages(const char *p, size_t size)
{
    unsigned char vec[8192];
    size_t pages = size / 4096, count = 0;
    REQUIRE(pages <= sizeof vec && mincore((void *)p, size, vec) == 0);
    for (size_t i = 0; i < pages; i++)
        count += vec[i] & 1;
    return count;
}

/* A block that takes a freed run more than a quarter bigger than itself gets its extent
 * (arena_large_size), and the rest of the run, which the earlier tenant left resident,
 * goes back to the kernel once a purge finds the block alive a purge delay on (or at
 * malloc_trim's, arena_purge_all): the block's bytes stay, the tail reads as zeros, and
 * the block's free gives the whole run back. A block freed sooner keeps its run as it
 * was. */
static void reused_run_tails_go_back(void)
{
    arena_purge_all();
    bool zeroed;
    size_t run;
    char *a = arena_alloc_large(20 * MIB + 1, &zeroed, &run); /* 24 of a 32 MiB chunk */
    REQUIRE(a);
    CHECK(run == 24 * MIB);
    memset(a, 0x5a, run);
    arena_free(a, run);
    char *b = arena_alloc_large(8 * MIB + 1, &zeroed, &run);
    CHECK(b == a && run == arena_large_size(8 * MIB + 1) && run == 10 * MIB && !zeroed);
    REQUIRE(b == a);
    memset(b, 0x5b, run);
    CHECK(resident_pages(a + 10 * MIB, 14 * MIB) == 14 * MIB / 4096);
    arena_purge_all();
    CHECK(resident_pages(a + 10 * MIB, 14 * MIB) == 0);
    CHECK(resident_pages(b, run) == run / 4096 && b[0] == 0x5b && b[run - 1] == 0x5b);
    arena_free(b, run);
    char *c = arena_alloc_large(23 * MIB, &zeroed, &run); /* 24 MiB: the run whole again */
    CHECK(c == a && run == 24 * MIB && !zeroed);
    CHECK(c[0] == 0x5b && c[10 * MIB - 1] == 0x5b && c[10 * MIB] == 0 && c[run - 1] == 0);
    memset(c, 0x5c, run);
    arena_free(c, run);
    /* Aged by the delay: the next slow path's purge (arena_tick) trims it. */
    char *d = arena_alloc_large(8 * MIB + 1, &zeroed, &run);
    CHECK(d == a && run == 10 * MIB);
    usleep(2 * ARENA_TEST_DELAY_MS * 1000 + 50 * 1000); /* twice the delay main sets */
    arena_tick();
    CHECK(resident_pages(a + 10 * MIB, 14 * MIB) == 0);
    CHECK(d[0] == 0x5c && d[run - 1] == 0x5c);
    arena_free(d, run);
    /* Grown in place within its run, before and after its tail went back: the bytes it
     * had stay, the new ones are the run's, and a trim spares them. */
    char *g = arena_alloc_large(8 * MIB + 1, &zeroed, &run);
    CHECK(g == a && run == 10 * MIB);
    memset(g, 0x5e, run);
    size_t extent = run;
    CHECK(arena_large_regrow(g, &extent, 12 * MIB + 1) && extent == 14 * MIB);
    memset(g + 10 * MIB, 0x5f, 4 * MIB);
    arena_purge_all();
    CHECK(resident_pages(a + 14 * MIB, 10 * MIB) == 0);
    CHECK(g[0] == 0x5e && g[10 * MIB - 1] == 0x5e && g[10 * MIB] == 0x5f &&
          g[14 * MIB - 1] == 0x5f);
    CHECK(arena_large_regrow(g, &extent, 20 * MIB) && extent == 20 * MIB);
    CHECK(g[14 * MIB] == 0 && g[20 * MIB - 1] == 0);
    CHECK(!arena_large_regrow(g, &extent, 24 * MIB + 4096) && extent == 20 * MIB);
    arena_free(g, extent);
    char *h = arena_alloc_large(23 * MIB, &zeroed, &run); /* the run whole again */
    CHECK(h == a && run == 24 * MIB);
    CHECK(!arena_large_regrow(h, &run, 24 * MIB) && run == 24 * MIB); /* not part of a run */
    arena_free(h, run);
    /* Freed before the delay: the whole run as it was. */
    char *e = arena_alloc_large(23 * MIB, &zeroed, &run);
    CHECK(e == a && run == 24 * MIB);
    memset(e, 0x5d, run);
    arena_free(e, run);
    char *f = arena_alloc_large(8 * MIB + 1, &zeroed, &run);
    CHECK(f == a && run == 10 * MIB);
    arena_free(f, run);
    CHECK(resident_pages(a + 10 * MIB, 14 * MIB) == 14 * MIB / 4096 && a[24 * MIB - 1] == 0x5d);
    arena_purge_all();
}

/* A block that holds its whole run (a fresh one here) grows in place into the free chunks
 * after it, class by class, while its run starts where the bigger class's runs may; a
 * taken chunk in the way stops it, and nothing changes then. The bytes it had stay. */
static void whole_runs_grow_into_free_chunks(void)
{
    arena_purge_all();
    bool zeroed;
    size_t run;
    char *a = arena_alloc_large(5 * MIB, &zeroed, &run); /* 5 of an 8 MiB chunk */
    REQUIRE(a);
    CHECK(run == 5 * MIB && zeroed && ((uintptr_t)a & (8 * MIB - 1)) == 0);
    memset(a, 0x61, run);
    struct buddy *b = arena_buddy(a);
    REQUIRE(buddy_alloc_at(b, a + 5 * MIB, MIB)); /* the chunk right after the run */
    size_t extent = run;
    CHECK(!arena_large_regrow(a, &extent, 5 * MIB + 4096) && extent == 5 * MIB);
    CHECK(buddy_free(b, a + 5 * MIB));
    CHECK(arena_large_regrow(a, &extent, 5 * MIB + 4096) && extent == 6 * MIB);
    CHECK(a[0] == 0x61 && a[5 * MIB - 1] == 0x61);
    memset(a + 5 * MIB, 0x62, MIB);
    CHECK(arena_large_regrow(a, &extent, 7 * MIB + 1) && extent == 8 * MIB);
    CHECK(!arena_large_regrow(a, &extent, 7 * MIB) && extent == 8 * MIB); /* holds it */
    memset(a + 6 * MIB, 0x63, 2 * MIB);
    /* Past the chunk, only a run aligned to the next chunk size grows (10 of 16 MiB). */
    size_t grown = extent;
    bool aligned = ((uintptr_t)a & (16 * MIB - 1)) == 0;
    bool next_free = aligned && buddy_alloc_at(b, a + 8 * MIB, 2 * MIB);
    if (next_free)
        buddy_free(b, a + 8 * MIB);
    CHECK(arena_large_regrow(a, &grown, 9 * MIB) == next_free);
    CHECK(grown == (next_free ? 10 * MIB : 8 * MIB));
    CHECK(a[0] == 0x61 && a[6 * MIB - 1] == 0x62 && a[8 * MIB - 1] == 0x63);
    arena_free(a, grown);
    /* The grown run is freed whole: its class's next block takes it. */
    char *c = arena_alloc_large(grown, &zeroed, &run);
    CHECK(c == a && run == grown && !zeroed);
    arena_free(c, run);
    arena_purge_all();
}

/* A chunk for a superblock takes a freed run up to four times its size
 * (ARENA_SUPERBLOCK_REUSE_MAX) when none of its own size waits and freed runs pile up (16 MiB
 * or more): the run whole, its pages as the previous tenant left them; its own size first
 * when both wait; nothing bigger whole, but a freed run up to eight times the chunk
 * merged and a chunk of its pages; and with little freed memory waiting, a fresh chunk. */
static void superblock_chunks_take_bigger_freed_runs(void)
{
    arena_purge_all();
    bool zeroed;
    size_t run, got = 0;
    char *big = arena_alloc_large(200 * 1024, &zeroed, &run); /* 224 KiB: 7/8 of 256 */
    REQUIRE(big);
    CHECK(run == 224 * 1024);
    memset(big, 0x4d, run);
    arena_free(big, run);
    char *fresh = arena_alloc(64 * 1024, &zeroed, &got); /* 224 KiB alone wait: too little */
    REQUIRE(fresh);
    CHECK(got == 64 * 1024 && zeroed && (fresh + got <= big || fresh >= big + run));
    size_t pile_run;
    char *pile = arena_alloc_large(16 * MIB, &zeroed, &pile_run); /* too big to be taken */
    REQUIRE(pile);
    arena_free(pile, pile_run);
    arena_free(fresh, 64 * 1024);
    char *a = arena_alloc(64 * 1024, &zeroed, &got); /* both wait: its own size */
    CHECK(a == fresh && got == 64 * 1024 && !zeroed);
    char *b = arena_alloc(64 * 1024, &zeroed, &got); /* only the bigger run waits */
    CHECK(b == big && got == 224 * 1024 && !zeroed);
    CHECK(b && b[0] == 0x4d && b[got - 1] == 0x4d);
    if (a)
        arena_free(a, 64 * 1024);
    if (b)
        arena_free(b, got);
    arena_purge_all();
    /* 384 KiB (6/8 of 512) is more than four times 64 KiB: not taken whole, but merged
     * (the 16 MiB pile is too big to be split for it), and the chunk is one of its pages */
    char *huge = arena_alloc_large(380 * 1024, &zeroed, &run);
    REQUIRE(huge);
    CHECK(run == 384 * 1024);
    pile = arena_alloc_large(16 * MIB, &zeroed, &pile_run);
    REQUIRE(pile);
    arena_free(pile, pile_run);
    arena_free(huge, run);
    char *c = arena_alloc(64 * 1024, &zeroed, &got);
    REQUIRE(c);
    CHECK(got == 64 * 1024 && !zeroed && c >= huge && c + got <= huge + run);
    arena_free(c, got);
    arena_purge_all();
    /* The pile alone waits: more than eight times the chunk, it is not split for it */
    pile = arena_alloc_large(16 * MIB, &zeroed, &pile_run);
    REQUIRE(pile);
    arena_free(pile, pile_run);
    c = arena_alloc(64 * 1024, &zeroed, &got);
    REQUIRE(c);
    CHECK(got == 64 * 1024 && zeroed && (c + got <= pile || c >= pile + pile_run));
    arena_free(c, got);
    arena_purge_all();
}

/* While set, every page reads as absent to mincore, as a page swapped out does, though
 * it holds its data. The library is linked in statically, so this definition is the one
 * its residency checks call. */
static _Atomic int pages_swapped_out;

int mincore(void *addr, size_t length, unsigned char *vec)
{
    long r = syscall(SYS_mincore, addr, length, vec);
    if (r == 0 && atomic_load(&pages_swapped_out))
        memset(vec, 0, (length + 4095) / 4096);
    return (int)r;
}

/* With huge pages on (LFHEAP_HUGEPAGES=1), malloc_trim gives back every free huge page
 * (arena_release_free_huge_pages). Merged pages, freed runs given back to their buddy
 * still resident, are among them; swapped out, they hold their data though mincore says
 * they are absent, so the trim must decommit them before it clears their bits, or a run
 * carved from them later is reported zeroed and calloc hands out old bytes. */
static void trim_of_swapped_merged_pages_keeps_zeroes_true(void)
{
    REQUIRE(os_huge_pages());
    enum { RUNS = 32, RUN = 1 << 20, LATER = 512 << 10, LATER_COUNT = 256 };
    char *run[RUNS];
    size_t size[RUNS];
    bool zeroed;
    for (int i = 0; i < RUNS; i++) {
        run[i] = arena_alloc_large(RUN, &zeroed, &size[i]);
        REQUIRE(run[i]);
        memset(run[i], 0xA5, size[i]);
    }
    for (int i = 0; i < RUNS; i++)
        arena_free(run[i], size[i]);
    /* A request none of the freed runs serves, while they outweigh the runs in use: they
     * are merged into their buddies, resident, and the request takes part of them. */
    size_t big_size;
    char *big = arena_alloc_large(15 * MIB, &zeroed, &big_size);
    REQUIRE(big);
    atomic_store(&pages_swapped_out, 1);
    arena_release_free_huge_pages();
    atomic_store(&pages_swapped_out, 0);
    static char *later[LATER_COUNT];
    static size_t later_size[LATER_COUNT];
    size_t zeroed_runs = 0, stale_bytes = 0;
    for (int i = 0; i < LATER_COUNT; i++) {
        later[i] = arena_alloc_large(LATER, &zeroed, &later_size[i]);
        REQUIRE(later[i]);
        if (!zeroed)
            continue;
        zeroed_runs++;
        for (size_t b = 0; b < later_size[i]; b++)
            stale_bytes += later[i][b] != 0;
    }
    printf("# %zu runs reported zeroed, %zu bytes of them not zero\n", zeroed_runs, stale_bytes);
    CHECK(zeroed_runs > 0);
    CHECK(stale_bytes == 0);
    for (int i = 0; i < LATER_COUNT; i++)
        arena_free(later[i], later_size[i]);
    arena_free(big, big_size);
    arena_purge_all();
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "hugetrim") == 0) {
        RUN(trim_of_swapped_merged_pages_keeps_zeroes_true);
        return test_exit_status();
    }
    /* Two seconds, not the default 250 ms: freed_chunks_return_to_their_thread expects
     * a chunk freed three barrier crossings earlier to be still resident, and under
     * ThreadSanitizer on a loaded machine those crossings could add up to the default. */
    char delay[16];
    snprintf(delay, sizeof delay, "%d", ARENA_TEST_DELAY_MS);
    setenv("LFHEAP_PURGE_MS", delay, 1);
    RUN(level_wrongly_marked_full_maps_no_arena);
    RUN(dirty_chunks_are_reused);
    RUN(freed_chunks_return_to_their_thread);
    RUN(large_runs_hold_at_most_a_quarter_more);
    RUN(run_tails_are_reused);
    RUN(freed_runs_are_reused_and_extended);
    RUN(reused_run_tails_go_back);
    RUN(whole_runs_grow_into_free_chunks);
    RUN(superblock_chunks_take_bigger_freed_runs);
    RUN(concurrent_chunks_with_purges);
    RUN(everything_coalesces_after_purge);
    return test_exit_status();
}
