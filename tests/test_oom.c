/*
 * Out of memory (issue 6), with the OS layer's failure injection (build/t-fault,
 * src/os.h). Every routine that fails must fail the standard way (NULL and ENOMEM;
 * posix_memalign returns ENOMEM and leaves *memptr alone; realloc keeps the old block),
 * nothing may be corrupted (every block keeps the pattern written into it, calloc's
 * blocks read as zeros), and once memory returns and everything is freed and trimmed,
 * the memory must really be back: no unmap pending, no descriptor in use, no dirty chunk,
 * every arena whole again (as many whole-arena chunks as arenas, without an OS call).
 *
 * - Targeted cases: a refused munmap is retried, a refused madvise keeps its chunk
 *   dirty, a failed descriptor chunk loses no descriptor, malloc_trim returns orphaned
 *   caches.
 * - Concurrency: threads allocate, reallocate and free across threads while the
 *   injection keeps switching between none, single failures and exhaustion.
 */
#include "arena.h"
#include "heap.h"
#include "lfheap.h"
#include "os.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- checks --------------------------------------------------------------------- */

/* Blocks up to PATTERN_FULL bytes carry a pattern in every byte; larger ones in their
 * first and last KiB and in 64 bytes at each of PATTERN_SPOTS points spread evenly
 * between, so that a huge block costs as little as a medium one. */
#define PATTERN_FULL  (64 * KIB)
#define PATTERN_SPOTS 62

static bool pattern_range(size_t size, unsigned k, size_t *start, size_t *len)
{
    if (size <= PATTERN_FULL) {
        *start = 0;
        *len = size;
        return k == 0;
    }
    if (k < 2) {
        *start = k == 0 ? 0 : size - KIB;
        *len = KIB;
        return true;
    }
    *start = size / (PATTERN_SPOTS + 2) * (k - 1);
    *len = 64;
    return k < PATTERN_SPOTS + 2;
}

/* Zeros everywhere up to 1 MiB, else at the pattern's positions. */
static bool reads_zero(const char *p, size_t size)
{
    if (size <= MIB) {
        for (size_t i = 0; i < size; i++)
            if (p[i]) return false;
        return true;
    }
    size_t start, len;
    for (unsigned k = 0; pattern_range(size, k, &start, &len); k++)
        for (size_t i = start; i < start + len; i++)
            if (p[i]) return false;
    return true;
}

/* Every arena must be whole: as many whole-arena chunks as there are arenas, each known
 * to be zero, and not one OS call to get them. */
static bool arenas_whole(void)
{
    static char *whole[4096];
    unsigned arenas = arena_count_mapped();
    struct os_fault_stats before, after;
    os_fault_stats(&before);
    unsigned got = 0;
    bool zeroed = true;
    while (got < arenas && got < 4096 && zeroed) {
        whole[got] = arena_alloc(ARENA_MAX_CHUNK, &zeroed);
        if (!whole[got]) break;
        got++;
    }
    os_fault_stats(&after);
    bool whole_again = got == arenas && zeroed && after.calls == before.calls;
    if (!whole_again)
        fprintf(stderr, "  %u arenas, %u whole-arena chunks found with %llu OS calls\n", arenas,
                got, (unsigned long long)(after.calls - before.calls));
    for (unsigned i = 0; i < got; i++)
        arena_free(whole[i], ARENA_MAX_CHUNK);
    arena_purge_all();
    return whole_again;
}

/* After every block is freed and malloc_trim has run, the memory must really be back: no
 * unmap pending, no descriptor in use, no dirty chunk left, every arena whole. */
static bool memory_is_back(void)
{
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    size_t in_use = heap_descriptors_in_use();
    size_t dirty = arena_purge_all();
    if (stats.pending || in_use || dirty)
        fprintf(stderr, "  %zu unmaps pending, %zu descriptors in use, %zu dirty chunks\n",
                stats.pending, in_use, dirty);
    return arenas_whole() && !stats.pending && !in_use && !dirty;
}

/* Runs `body` in a fresh child (the parent never touches lfheap, so every child starts
 * from the same state); returns its exit status, 0 if it found nothing wrong. */
static int in_child(void (*body)(void))
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        body();
        fflush(stdout);
        fflush(stderr);
        _exit(test_failures ? 1 : 0);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) fprintf(stderr, "  killed by signal %d\n", WTERMSIG(status));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static bool is_mapped(void *p)
{
    unsigned char resident;
    return mincore(p, 1, &resident) == 0;
}

/* ---- refused munmap and madvise -------------------------------------------------- */

/* The kernel may refuse a munmap (a split beyond vm.max_map_count); the range must then
 * go back once the kernel agrees, not leak. */
static void refused_unmaps_are_retried_body(void)
{
    char *huge[3];
    for (int i = 0; i < 3; i++) {
        huge[i] = lfh_malloc(70 * MIB);
        REQUIRE(huge[i]);
        memset(huge[i], i + 1, KIB);
    }
    os_fault_inject(1, true); /* memory exhausted: every call fails */
    lfh_free(huge[0]);
    lfh_free(huge[1]);
    CHECK(lfh_realloc(huge[2], 20 * MIB) == huge[2]); /* in place: the tail stays */
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    CHECK(stats.pending == 3);
    CHECK(is_mapped(huge[0]) && is_mapped(huge[1]) && is_mapped(huge[2] + 30 * MIB));
    CHECK(huge[2][KIB - 1] == 3 && lfh_malloc_usable_size(huge[2]) >= 20 * MIB);
    lfh_malloc_trim(0); /* still refused */
    os_fault_stats(&stats);
    CHECK(stats.pending == 3);
    os_fault_inject(0, false); /* memory returns */
    lfh_malloc_trim(0);
    os_fault_stats(&stats);
    CHECK(stats.pending == 0);
    CHECK(!is_mapped(huge[0]) && !is_mapped(huge[1]) && !is_mapped(huge[2] + 30 * MIB));
    CHECK(is_mapped(huge[2]) && huge[2][0] == 3);
    lfh_free(huge[2]);
    CHECK(memory_is_back());
}

static void refused_unmaps_are_retried(void)
{
    CHECK(in_child(refused_unmaps_are_retried_body) == 0);
}

/* A chunk whose decommit the kernel refused still holds its old contents: it must not
 * be handed to calloc as known zeros. */
static void refused_decommit_keeps_chunk_dirty_body(void)
{
    for (int round = 0; round < 2; round++) {
        char *p = lfh_malloc(256 * KIB);
        REQUIRE(p);
        memset(p, 0xab, 256 * KIB);
        lfh_free(p);
        os_fault_inject(round == 0 ? 1 : 0, true);
        lfh_malloc_trim(0); /* round 0: the decommit is refused */
        char *q = lfh_calloc(1, 256 * KIB);
        REQUIRE(q);
        CHECK(reads_zero(q, 256 * KIB));
        os_fault_inject(0, false);
        lfh_free(q);
    }
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void refused_decommit_keeps_chunk_dirty(void)
{
    CHECK(in_child(refused_decommit_keeps_chunk_dirty_body) == 0);
}

/* ---- descriptors and caches ------------------------------------------------------ */

/* The first allocation maps the first chunk of descriptors; when that fails, no
 * descriptor index may be lost for good. */
static void descriptor_chunk_failure_loses_nothing_body(void)
{
    os_fault_inject(1, false);
    errno = 0;
    CHECK(lfh_malloc(16) == NULL && errno == ENOMEM);
    void *p = lfh_malloc(16);
    CHECK(p != NULL);
    lfh_free(p);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void descriptor_chunk_failure_loses_nothing(void)
{
    CHECK(in_child(descriptor_chunk_failure_loses_nothing_body) == 0);
}

static void *allocate_and_exit(void *arg)
{
    (void)arg;
    void *blocks[100];
    for (int i = 0; i < 100; i++)
        blocks[i] = lfh_malloc(100);
    for (int i = 0; i < 100; i++)
        lfh_free(blocks[i]);
    return NULL;
}

/* A thread's cache outlives it (an orphan for the next thread to adopt); malloc_trim
 * must return it whole, including the block the orphan's copy lives in. */
static void trim_returns_orphaned_caches_body(void)
{
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, allocate_and_exit, NULL) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    CHECK(heap_descriptors_in_use() > 0);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void trim_returns_orphaned_caches(void)
{
    CHECK(in_child(trim_returns_orphaned_caches_body) == 0);
}

/* ---- failures under concurrency -------------------------------------------------- */

/* Threads allocate, reallocate, free and hand blocks to each other while a controller
 * keeps switching the injection between none, single failures and exhaustion, so that
 * failures land in the middle of races (two threads mapping the same leaf, descriptor
 * chunk or arena slot, purges beside allocations). Blocks carry a tag in their first,
 * middle and last words. */
#define CHAOS_THREADS 4
#define CHAOS_OPS     20000
#define CHAOS_HELD    128
#define CHAOS_SWAPS   64

struct tagged {
    uint64_t tag;
    size_t size;
};

static _Atomic(struct tagged *) chaos_swaps[CHAOS_SWAPS];
static _Atomic int chaos_errors, chaos_failures, chaos_stop;

/* Counts an error; the first few also say where. */
#define CHAOS_ERROR()                                                                              \
    do {                                                                                           \
        if (atomic_fetch_add(&chaos_errors, 1) < 5)                                                \
            fprintf(stderr, "  chaos error at line %d\n", __LINE__);                               \
    } while (0)

static uint64_t chaos_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Where the copies of the tag go: the last whole word of the block and a word halfway
 * between it and the header (the same word in a block of 24 to 31 bytes). */
static size_t chaos_last(size_t size)
{
    return (size - 8) & ~(size_t)7;
}

static size_t chaos_middle(size_t size)
{
    return sizeof(struct tagged) + ((chaos_last(size) - sizeof(struct tagged)) / 2 & ~(size_t)7);
}

static void chaos_stamp(struct tagged *b, size_t size, uint64_t tag)
{
    b->tag = tag;
    b->size = size;
    memcpy((char *)b + chaos_middle(size), &tag, 8);
    memcpy((char *)b + chaos_last(size), &tag, 8);
}

static bool chaos_intact(const struct tagged *b)
{
    uint64_t mid, end;
    memcpy(&mid, (const char *)b + chaos_middle(b->size), 8);
    memcpy(&end, (const char *)b + chaos_last(b->size), 8);
    return mid == b->tag && end == b->tag && lfh_malloc_usable_size((void *)b) >= b->size;
}

static void chaos_free(struct tagged *b)
{
    if (!b) return;
    if (!chaos_intact(b)) CHAOS_ERROR();
    lfh_free(b);
}

static size_t chaos_size(uint64_t r)
{
    if (r % 1000 == 0) return 65 * MIB + r % (5 * MIB);
    if (r % 40 == 0) return 33 * KIB + r % (4 * MIB);
    return 24 + r % (r % 8 == 0 ? 32 * KIB : 1024);
}

/* One allocation by a routine chosen by r; a failure must be ENOMEM. */
static struct tagged *chaos_alloc(uint64_t r, size_t size)
{
    errno = 0;
    void *p = NULL;
    int err;
    switch (r >> 20 & 3) {
    case 0: {
        p = lfh_calloc(1, size);
        err = errno;
        const uint64_t *words = p;
        if (p && (words[0] || words[size / 16] || words[size / 8 - 1])) CHAOS_ERROR();
        break;
    }
    case 1: {
        size_t align = (size_t)64 << (r >> 24) % 7;
        int ret = lfh_posix_memalign(&p, align, size);
        err = ret;
        if (ret != 0 ? p != NULL : (uintptr_t)p % align != 0) CHAOS_ERROR();
        break;
    }
    default:
        p = lfh_malloc(size);
        err = errno;
        break;
    }
    if (!p) {
        atomic_fetch_add(&chaos_failures, 1);
        if (err != ENOMEM) CHAOS_ERROR();
    }
    return p;
}

static void *chaos_worker(void *arg)
{
    uint64_t state = 0x9e3779b97f4a7c15u * ((uintptr_t)arg + 1);
    struct tagged *held[CHAOS_HELD] = {0};
    for (int op = 0; op < CHAOS_OPS; op++) {
        uint64_t r = chaos_random(&state);
        struct tagged **slot = &held[r % CHAOS_HELD];
        unsigned what = (unsigned)(r >> 8) % 1000;
        if (what < 3) {
            lfh_malloc_trim(0); /* purges: decommits, and fresh chunks afterwards */
        } else if (what < 450) {
            size_t size = chaos_size(r >> 12);
            struct tagged *b = chaos_alloc(r, size);
            if (b) {
                chaos_free(*slot);
                chaos_stamp(b, size, r);
                *slot = b;
            }
        } else if (what < 750) {
            chaos_free(*slot);
            *slot = NULL;
        } else if (what < 880) {
            if (!*slot) continue;
            size_t size = chaos_size(r >> 16);
            struct tagged old = **slot;
            size_t old_mid = chaos_middle(old.size);
            errno = 0;
            struct tagged *b = lfh_realloc(*slot, size);
            if (!b) {
                atomic_fetch_add(&chaos_failures, 1);
                if (errno != ENOMEM || !chaos_intact(*slot)) CHAOS_ERROR();
                continue;
            }
            /* The contents up to the smaller size moved along. */
            uint64_t mid = old.tag;
            if (old_mid + 8 <= size) memcpy(&mid, (char *)b + old_mid, 8);
            if (b->tag != old.tag || b->size != old.size || mid != old.tag) CHAOS_ERROR();
            chaos_stamp(b, size, old.tag);
            *slot = b;
        } else {
            /* Hand the block to whichever thread takes this swap slot next. */
            struct tagged *got = atomic_exchange(&chaos_swaps[(r >> 16) % CHAOS_SWAPS], *slot);
            if (got && !chaos_intact(got)) CHAOS_ERROR();
            *slot = got;
        }
    }
    for (int i = 0; i < CHAOS_HELD; i++)
        chaos_free(held[i]);
    return NULL;
}

static void *chaos_controller(void *arg)
{
    (void)arg;
    uint64_t state = 12345;
    while (!atomic_load(&chaos_stop)) {
        uint64_t r = chaos_random(&state);
        switch (r % 3) {
        case 0:
            os_fault_inject(0, false);
            break;
        case 1:
            os_fault_inject(1 + (r >> 8) % 8, false);
            break;
        default:
            os_fault_inject(1 + (r >> 8) % 4, true);
            break;
        }
        usleep(200 + (r >> 16) % 800);
    }
    return NULL;
}

static void concurrent_failures_corrupt_nothing_body(void)
{
    pthread_t workers[CHAOS_THREADS], controller;
    REQUIRE(pthread_create(&controller, NULL, chaos_controller, NULL) == 0);
    for (uintptr_t i = 0; i < CHAOS_THREADS; i++)
        REQUIRE(pthread_create(&workers[i], NULL, chaos_worker, (void *)i) == 0);
    for (int i = 0; i < CHAOS_THREADS; i++)
        pthread_join(workers[i], NULL);
    atomic_store(&chaos_stop, 1);
    pthread_join(controller, NULL);
    os_fault_inject(0, false);
    for (int i = 0; i < CHAOS_SWAPS; i++)
        chaos_free(atomic_exchange(&chaos_swaps[i], NULL));
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    printf("# %llu OS calls, %llu failed; %d allocation calls failed with ENOMEM\n",
           (unsigned long long)stats.calls, (unsigned long long)stats.failed,
           atomic_load(&chaos_failures));
    CHECK(stats.failed > 0);
    CHECK(atomic_load(&chaos_errors) == 0);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void concurrent_failures_corrupt_nothing(void)
{
    CHECK(in_child(concurrent_failures_corrupt_nothing_body) == 0);
}

int main(void)
{
    RUN(refused_unmaps_are_retried);
    RUN(refused_decommit_keeps_chunk_dirty);
    RUN(descriptor_chunk_failure_loses_nothing);
    RUN(trim_returns_orphaned_caches);
    RUN(concurrent_failures_corrupt_nothing);
    return test_exit_status();
}
