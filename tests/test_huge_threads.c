/*
 * Huge blocks under threads: blocks larger than an arena are mappings of their own, and
 * freed ones wait in the kept-mapping slots (src/mapcache.h) for the next request, which
 * claims one by CAS while other threads put, take, trim and release beside it. The other
 * tests of that structure run one thread, or stop one thread at one step (the park point
 * `mapcache.claimed`); this one lets the threads race through all of it.
 *
 * Threads allocate blocks of 65 to 320 MiB (malloc, calloc, aligned_alloc), grow and
 * shrink them with realloc, swap them through a small shared table so that most are
 * freed by another thread, and now and then call malloc_trim, which unmaps everything
 * kept. Small blocks come and go beside them, so that the arenas and the heap's own
 * mappings are at work too.
 *
 * What must hold:
 *   - no two live blocks overlap: every block's range goes into a table of live ranges
 *     (under a mutex of the test's own) when it is handed out, and is checked against
 *     every other there;
 *   - a block's pages hold what its owner wrote: a tag word at every MiB, in its last
 *     page and its last 8 bytes, checked before each free and after each realloc (up to
 *     the smaller size);
 *   - calloc's blocks read as zeros at every sampled word, though a kept mapping holds
 *     its last tenant's bytes;
 *   - aligned_alloc honours its alignment, and malloc_usable_size covers the request;
 *   - the small blocks keep the tag their thread wrote into them;
 *   - every block made is freed, and after a final malloc_trim the resident size is back
 *     near where it started.
 *
 * Only sampled pages are written, so the resident size stays small however much address
 * space the blocks span. Usage: test_huge_threads [threads] [operations per thread] [reuse]
 * (`reuse`: also check that some blocks held an earlier block's bytes, which only a kept
 * mapping does: the kept slots were really used; it takes a purge delay longer than the
 * run's pauses).
 */
#include "alloc_names.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define MIB         ((size_t)1 << 20)
#define HUGE_MIN    (65 * MIB) /* past an arena (64 MiB): a mapping of its own */
#define HUGE_SPAN   (255 * MIB)
#define HUGE_MAX    (768 * MIB) /* where realloc stops growing a block */
#define SAMPLE_STEP MIB
#define TABLE_SLOTS 6
#define SMALL_SLOTS 64
#define MAX_THREADS 16
#define MAX_LIVE    (MAX_THREADS + TABLE_SLOTS + 4)
#define BURST       32

struct header {
    uint64_t tag;
    size_t size;
};

static _Atomic(unsigned char *) table[TABLE_SLOTS];
static _Atomic long made, reused, freed, bad_contents, bad_zeros, bad_align, bad_small, overlaps,
    refused;
static long thread_count = 4, ops_per_thread = 120;
static bool expect_reuse; /* argument `reuse`: the delay is long enough for kept mappings */

/* ---- live ranges, kept by the test under a mutex of its own ---------------------------- */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    uintptr_t start, end;
} live[MAX_LIVE];

static void live_add(const void *block, size_t size)
{
    uintptr_t start = (uintptr_t)block, end = start + size;
    pthread_mutex_lock(&live_lock);
    int free_slot = -1;
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live[i].end == 0) {
            if (free_slot < 0)
                free_slot = i;
        } else if (start < live[i].end && live[i].start < end) {
            atomic_fetch_add(&overlaps, 1);
        }
    }
    if (free_slot >= 0) {
        live[free_slot].start = start;
        live[free_slot].end = end;
    }
    pthread_mutex_unlock(&live_lock);
    REQUIRE(free_slot >= 0);
}

static void live_remove(const void *block)
{
    pthread_mutex_lock(&live_lock);
    bool found = false;
    for (int i = 0; i < MAX_LIVE && !found; i++)
        if (live[i].end != 0 && live[i].start == (uintptr_t)block) {
            live[i].start = live[i].end = 0;
            found = true;
        }
    pthread_mutex_unlock(&live_lock);
    REQUIRE(found);
}

/* ---- contents ------------------------------------------------------------------------ */

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static uint64_t word_at(uint64_t tag, size_t offset)
{
    return tag ^ ((uint64_t)offset * 0x9e3779b97f4a7c15ull);
}

/* The offsets of a block of `size` bytes that carry a tag word: one every MiB past the
 * header, the start of the last page and the last 8 bytes, none overlapping another.
 * Returns how many it stored in `at` (at most SAMPLES_MAX). */
#define SAMPLES_MAX (2048 + 2)
static size_t sample_offsets(size_t size, size_t *at)
{
    size_t n = 0, last = size - 8, last_page = last & ~(size_t)4095;
    for (size_t off = sizeof(struct header); off + 8 <= last; off += SAMPLE_STEP)
        at[n++] = off;
    if (last_page >= at[n - 1] + 8 && last_page + 8 <= last)
        at[n++] = last_page;
    at[n++] = last;
    return n;
}

static void write_tags(unsigned char *block, size_t size, uint64_t tag)
{
    struct header h = {tag, size};
    memcpy(block, &h, sizeof h);
    size_t at[SAMPLES_MAX];
    size_t n = sample_offsets(size, at);
    for (size_t i = 0; i < n; i++)
        memcpy(block + at[i], &(uint64_t){word_at(tag, at[i])}, 8);
}

static bool word_is(const unsigned char *block, size_t at, uint64_t want)
{
    uint64_t got;
    memcpy(&got, block + at, 8);
    return got == want;
}

/* True if the tags of `tag` written to a block of `written` bytes are intact in its first
 * `upto` bytes (a realloc keeps only the smaller size); else says where they are not. */
static bool tags_intact(const unsigned char *block, size_t written, uint64_t tag, size_t upto)
{
    size_t at[SAMPLES_MAX];
    size_t n = sample_offsets(written, at);
    for (size_t i = 0; i < n && at[i] + 8 <= upto; i++) {
        if (word_is(block, at[i], word_at(tag, at[i])))
            continue;
        uint64_t got;
        memcpy(&got, block + at[i], 8);
        fprintf(stderr, "block %p of %zu bytes: offset %zu holds %#llx, not %#llx\n",
                (const void *)block, written, at[i], (unsigned long long)got,
                (unsigned long long)word_at(tag, at[i]));
        return false;
    }
    return true;
}

static bool zero_at_samples(const unsigned char *block, size_t size, uint64_t *rng)
{
    for (size_t at = 0; at + 8 <= size; at += SAMPLE_STEP) {
        /* a word at a random place of each MiB too, not only where tags were written */
        size_t other = at + (next_random(rng) % SAMPLE_STEP & ~(size_t)7);
        if (!word_is(block, at, 0) || (other + 8 <= size && !word_is(block, other, 0)))
            return false;
    }
    return word_is(block, size - 8, 0);
}

/* ---- the threads --------------------------------------------------------------------- */

static size_t huge_size(uint64_t *rng)
{
    size_t size = HUGE_MIN + (size_t)(next_random(rng) % HUGE_SPAN);
    /* half of them a whole number of pages, as programs' buffers often are */
    return next_random(rng) % 2 ? size & ~(size_t)4095 : size;
}

static unsigned char *make(uint64_t *rng, uint64_t tag)
{
    size_t size = huge_size(rng);
    unsigned kind = (unsigned)(next_random(rng) % 4);
    size_t align = (size_t)4096 << (next_random(rng) % 10); /* 4 KiB .. 2 MiB */
    if (kind == 1)
        size = (size + align - 1) & ~(align - 1); /* aligned_alloc's size is a multiple */
    unsigned char *block = kind == 0   ? T_CALLOC(1, size)
                           : kind == 1 ? T_ALIGNED_ALLOC(align, size)
                                       : T_MALLOC(size);
    if (!block) {
        atomic_fetch_add(&refused, 1);
        return NULL;
    }
    if (kind == 1 && (uintptr_t)block % align != 0)
        atomic_fetch_add(&bad_align, 1);
    if (T_MALLOC_USABLE_SIZE(block) < size) {
        fprintf(stderr, "block %p of %zu bytes: usable size %zu\n", (void *)block, size,
                T_MALLOC_USABLE_SIZE(block));
        atomic_fetch_add(&bad_contents, 1);
    }
    if (kind == 0 && !zero_at_samples(block, size, rng))
        atomic_fetch_add(&bad_zeros, 1);
    /* A fresh mapping reads as zeros; a kept one holds its last tenant's tags. */
    if (kind != 0 && !word_is(block, sizeof(struct header), 0))
        atomic_fetch_add(&reused, 1);
    live_add(block, size);
    write_tags(block, size, tag);
    atomic_fetch_add(&made, 1);
    return block;
}

static void drop(unsigned char *block)
{
    struct header h;
    memcpy(&h, block, sizeof h);
    if (h.size < HUGE_MIN || !tags_intact(block, h.size, h.tag, h.size)) {
        fprintf(stderr, "block %p of %zu bytes: overwritten before its free\n", (void *)block,
                h.size);
        atomic_fetch_add(&bad_contents, 1);
    }
    live_remove(block);
    T_FREE(block);
    atomic_fetch_add(&freed, 1);
}

/* Grows or shrinks a block (at least half, at most twice: the sizes a kept mapping
 * serves), checks what it kept and tags it anew. */
static unsigned char *resize(unsigned char *block, uint64_t *rng, uint64_t tag)
{
    struct header h;
    memcpy(&h, block, sizeof h);
    size_t size = h.size / 2 + (size_t)(next_random(rng) % (h.size + h.size / 2));
    if (size < HUGE_MIN)
        size = HUGE_MIN;
    if (size > HUGE_MAX)
        size = h.size / 2 > HUGE_MIN ? h.size / 2 : HUGE_MIN;
    live_remove(block);
    unsigned char *moved = T_REALLOC(block, size);
    if (!moved) {
        /* the old block stands */
        atomic_fetch_add(&refused, 1);
        live_add(block, h.size);
        return block;
    }
    if (!tags_intact(moved, h.size, h.tag, size < h.size ? size : h.size)) {
        fprintf(stderr, "block %p of %zu bytes, realloc to %p of %zu: contents lost\n",
                (void *)block, h.size, (void *)moved, size);
        atomic_fetch_add(&bad_contents, 1);
    }
    live_add(moved, size);
    write_tags(moved, size, tag);
    return moved;
}

/* Blocks of four sizes taken and freed back to back, touching two words each: the slots'
 * claims and puts are then most of what the threads do, and they collide. */
static void burst(uint64_t *rng)
{
    for (int i = 0; i < BURST; i++) {
        size_t size = HUGE_MIN + (size_t)(next_random(rng) % 4) * 16 * MIB;
        uint64_t tag = next_random(rng) | 1;
        unsigned char *block = T_MALLOC(size);
        if (!block) {
            atomic_fetch_add(&refused, 1);
            continue;
        }
        live_add(block, size);
        struct header h = {tag, size};
        memcpy(block, &h, sizeof h);
        memcpy(block + size - 8, &tag, 8);
        if (memcmp(block, &h, sizeof h) != 0 || !word_is(block, size - 8, tag))
            atomic_fetch_add(&bad_contents, 1);
        live_remove(block);
        T_FREE(block);
    }
}

static void *worker(void *arg)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    unsigned char *mine = NULL;
    void *small[SMALL_SLOTS] = {0};
    uint64_t small_tag[SMALL_SLOTS] = {0};
    for (long op = 0; op < ops_per_thread; op++) {
        uint64_t tag = next_random(&rng) | 1;
        unsigned what = (unsigned)(next_random(&rng) % 17);
        if (what == 16) {
            burst(&rng);
        } else if (what < 5) {
            if (mine)
                drop(mine);
            mine = make(&rng, tag);
        } else if (what < 9) {
            if (mine)
                mine = resize(mine, &rng, tag);
        } else if (what < 14) {
            /* hand ours over and take another thread's: freed by whoever takes it */
            unsigned char *theirs = atomic_exchange(&table[next_random(&rng) % TABLE_SLOTS], mine);
            mine = theirs;
        } else if (what == 14) {
            T_MALLOC_TRIM(0);
        } else {
            /* small blocks between: the arenas and the heap's own mappings at work too */
            for (int i = 0; i < SMALL_SLOTS; i++) {
                if (small[i] && memcmp(small[i], &small_tag[i], sizeof small_tag[i]) != 0)
                    atomic_fetch_add(&bad_small, 1);
                T_FREE(small[i]);
                small[i] = T_MALLOC(16 + next_random(&rng) % 4000);
                REQUIRE(small[i]);
                small_tag[i] = next_random(&rng);
                memcpy(small[i], &small_tag[i], sizeof small_tag[i]);
            }
        }
    }
    if (mine)
        drop(mine);
    for (int i = 0; i < SMALL_SLOTS; i++)
        T_FREE(small[i]);
    return NULL;
}

static void huge_blocks_race_through_the_kept_slots(void)
{
    long threads = thread_count;
    long start = test_rss_kib();
    pthread_t tid[MAX_THREADS];
    for (long i = 0; i < threads; i++)
        REQUIRE(pthread_create(&tid[i], NULL, worker, (void *)(uintptr_t)i) == 0);
    for (long i = 0; i < threads; i++)
        pthread_join(tid[i], NULL);
    for (int i = 0; i < TABLE_SLOTS; i++) {
        unsigned char *b = atomic_exchange(&table[i], NULL);
        if (b)
            drop(b);
    }
    T_MALLOC_TRIM(0);
    long end = test_rss_kib();
    printf("# %ld threads x %ld operations: %ld huge blocks made (%ld holding an "
           "earlier block's bytes), %ld refused; resident %ld KiB at the start, %ld after "
           "malloc_trim\n",
           threads, ops_per_thread, atomic_load(&made), atomic_load(&reused), atomic_load(&refused),
           start, end);
    CHECK(atomic_load(&made) > 0);
    CHECK(atomic_load(&made) == atomic_load(&freed));
    CHECK(atomic_load(&overlaps) == 0);
    CHECK(atomic_load(&bad_contents) == 0);
    CHECK(atomic_load(&bad_zeros) == 0);
    CHECK(atomic_load(&bad_align) == 0);
    CHECK(atomic_load(&bad_small) == 0);
    CHECK(atomic_load(&refused) == 0);
#ifndef __SANITIZE_THREAD__ /* whose shadow of the blocks' pages stays resident */
    CHECK(end - start < 32 << 10);
#endif
    if (expect_reuse)
        CHECK(atomic_load(&reused) > 0);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        thread_count = atol(argv[1]);
    if (argc > 2)
        ops_per_thread = atol(argv[2]);
    expect_reuse = argc > 3 && strcmp(argv[3], "reuse") == 0;
    REQUIRE(thread_count >= 1 && thread_count <= MAX_THREADS && ops_per_thread >= 1);
    RUN(huge_blocks_race_through_the_kept_slots);
    return test_exit_status();
}
