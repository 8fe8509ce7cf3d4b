/*
 * Out of memory (issue 6), with the OS layer's failure injection (build/t-fault,
 * src/os.h). Every routine that fails must fail the standard way (NULL and ENOMEM;
 * posix_memalign returns ENOMEM and leaves *memptr alone; realloc keeps the old block),
 * nothing may be corrupted (every block keeps the pattern written into it, calloc's
 * blocks read as zeros), and once memory returns and everything is freed and trimmed,
 * the memory must really be back: no unmap pending, no descriptor in use, no dirty chunk,
 * every arena whole again (as many chunks of each arena's mapped size as arenas of that
 * size, without an OS call).
 *
 * - Targeted cases: a refused munmap is retried, a refused madvise keeps its chunk dirty,
 *   a failed descriptor chunk loses no descriptor, malloc_trim returns orphaned caches.
 * - Decommits in one system call (process_madvise): each range reads as zeros and the
 *   pages between keep their bytes; a kernel without the call gets madvise for each
 *   range; a thread under a seccomp filter (one that kills the process for the call)
 *   never makes it; with madvise refused too, the chunks stay dirty.
 * - Concurrency: threads allocate, reallocate and free across threads while the
 *   injection keeps switching between none, single failures and exhaustion.
 * - The sweep: a workload that uses every routine (small, medium, large and huge blocks,
 *   calloc, realloc through every kind of block including the mremap path and the
 *   in-place paths, the aligned routines, frees from a second thread, malloc_trim) runs
 *   in a fresh child process once for every OS call it makes, that call failing once,
 *   and again with every call failing from that one on ("memory exhausted"); then the
 *   injection is lifted ("memory returns") and the same workload must succeed in full.
 *
 * Usage: test_oom [margin]   (calls past the reference count to try as well; default 8)
 */
#include "arena.h"
#include "heap.h"
#include "lfheap.h"
#include "mapcache.h"
#include "os.h"
#include "tcache.h"
#include "testutil.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
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
            if (p[i])
                return false;
        return true;
    }
    size_t start, len;
    for (unsigned k = 0; pattern_range(size, k, &start, &len); k++)
        for (size_t i = start; i < start + len; i++)
            if (p[i])
                return false;
    return true;
}

/* Every arena must be whole: as many chunks of each arena's mapped size as there are
 * arenas of that size (a whole arena, or the part of one mapped when a whole one could
 * not be: a refused mmap makes lfheap try smaller ones), each known to be zero, and not
 * one OS call to get them. Largest first, so that a smaller chunk cannot come out of a
 * larger arena. */
static bool arenas_whole(void)
{
    static char *whole[4096];
    static size_t whole_size[4096];
    unsigned arenas = arena_mapped();
    struct os_fault_stats before, after;
    os_fault_stats(&before);
    unsigned got = 0;
    bool zeroed = true;
    for (size_t size = ARENA_SIZE; size >= OS_PAGE_SIZE && zeroed; size /= 2) {
        unsigned want = arena_mapped_of(size);
        for (unsigned i = 0; i < want && got < 4096 && zeroed; i++) {
            whole[got] = arena_alloc(size, &zeroed, &whole_size[got]);
            if (!whole[got])
                break;
            got++;
        }
    }
    os_fault_stats(&after);
    bool whole_again = got == arenas && zeroed && after.calls == before.calls;
    if (!whole_again)
        fprintf(stderr, "  %u arenas, %u whole chunks of their size found with %llu OS calls\n",
                arenas, got, (unsigned long long)(after.calls - before.calls));
    for (unsigned i = 0; i < got; i++)
        arena_free(whole[i], whole_size[i]);
    arena_purge_all();
    return whole_again;
}

/* After every block is freed and malloc_trim has run, the memory must really be back: no
 * unmap pending, no descriptor in use, no dirty chunk left, every arena whole. */
static bool memory_is_back(void)
{
    /* Freed huge blocks kept for the next one (src/mapcache.h) are memory given back
     * late, not lost: unmapped first, their unmaps then count as any other. */
    mapcache_release(0, 0, true);
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
    if (WIFSIGNALED(status))
        fprintf(stderr, "  killed by signal %d\n", WTERMSIG(status));
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
    /* The first freed block is kept for the next huge block (src/mapcache.h keeps one):
     * the second's unmap and the tail's were refused so far. */
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    CHECK(stats.pending == 2);
    CHECK(is_mapped(huge[0]) && is_mapped(huge[1]) && is_mapped(huge[2] + 30 * MIB));
    CHECK(huge[2][KIB - 1] == 3 && lfh_malloc_usable_size(huge[2]) >= 20 * MIB);
    lfh_malloc_trim(0); /* unmaps the kept one: refused as well */
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

/* The first allocation maps the first chunk of descriptors, right after the slab of
 * stores its cache's setup maps (below); when that fails, no descriptor index may be lost
 * for good. */
static void descriptor_chunk_failure_loses_nothing_body(void)
{
    os_fault_inject(2, false);
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

/* A thread's first allocation sets up its cache, which first maps a slab of stores for the
 * cache's cold parts (src/tcache_store.c): when that fails, the call is served without a
 * cache, errno untouched, and the next call sets the cache up. */
static void store_slab_failure_serves_uncached_body(void)
{
    os_fault_inject(1, false);
    errno = 0;
    char *first = lfh_malloc(16);
    CHECK(first != NULL && errno == 0);
    CHECK(tcache_self.id == TCACHE_ID_UNSET && tcache_self.cold == NULL);
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    CHECK(stats.failed == 1);
    char *second = lfh_malloc(16);
    CHECK(second != NULL && second != first);
    CHECK(tcache_self.id < TCACHE_ID_EXITED && tcache_self.cold != NULL);
    lfh_free(first);
    lfh_free(second);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void store_slab_failure_serves_uncached(void)
{
    CHECK(in_child(store_slab_failure_serves_uncached_body) == 0);
}

/* ---- a large block moved out of its arena --------------------------------------- */

/* The OS call of a realloc that moves a large block's pages out of its arena to fail
 * (heap_large_move_out): 1, the move; 2, the growth of the mapping after it, which then
 * copies the bytes back. Either way the realloc is served by a copy, every byte kept. */
static uint64_t move_out_failing_call;

static void move_out_failure_copies_instead_body(void)
{
    size_t n = 3 * MIB + 100;
    unsigned char *p = lfh_malloc(n), *wall = lfh_malloc(n);
    REQUIRE(p && wall);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 13 + i / 4096);
    os_fault_inject(move_out_failing_call, false);
    errno = 0;
    unsigned char *q = lfh_realloc(p, 12 * MIB);
    CHECK(q != NULL && errno == 0);
    os_fault_inject(0, false);
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    CHECK(stats.failed == 1);
    size_t wrong = 0;
    for (size_t i = 0; q && i < n; i++)
        wrong += q[i] != (unsigned char)(i * 13 + i / 4096);
    CHECK(wrong == 0);
    lfh_free(q);
    lfh_free(wall);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void move_out_failure_copies_instead(void)
{
    for (move_out_failing_call = 1; move_out_failing_call <= 2; move_out_failing_call++)
        CHECK(in_child(move_out_failure_copies_instead_body) == 0);
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
/* A worker goes on past CHAOS_OPS until injected failures have happened: on a loaded
 * machine the controller may get no CPU while the workers run. Only a controller that
 * never runs lets them reach this bound. */
#define CHAOS_OPS_MAX (CHAOS_OPS * 100)
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
    if (!b)
        return;
    if (!chaos_intact(b))
        CHAOS_ERROR();
    lfh_free(b);
}

static size_t chaos_size(uint64_t r)
{
    if (r % 1000 == 0)
        return 65 * MIB + r % (5 * MIB);
    if (r % 40 == 0)
        return 33 * KIB + r % (4 * MIB);
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
        if (p && (words[0] || words[size / 16] || words[size / 8 - 1]))
            CHAOS_ERROR();
        break;
    }
    case 1: {
        size_t align = (size_t)64 << (r >> 24) % 7;
        int ret = lfh_posix_memalign(&p, align, size);
        err = ret;
        if (ret != 0 ? p != NULL : (uintptr_t)p % align != 0)
            CHAOS_ERROR();
        break;
    }
    default:
        p = lfh_malloc(size);
        err = errno;
        break;
    }
    if (!p) {
        atomic_fetch_add(&chaos_failures, 1);
        if (err != ENOMEM)
            CHAOS_ERROR();
    }
    return p;
}

/* OS calls failed by injection before the workers started. */
static uint64_t chaos_failed_before;

/* Whether an OS call has failed by injection since the workers started. */
static bool chaos_failed_yet(void)
{
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    return stats.failed > chaos_failed_before;
}

static void *chaos_worker(void *arg)
{
    uint64_t state = 0x9e3779b97f4a7c15u * ((uintptr_t)arg + 1);
    struct tagged *held[CHAOS_HELD] = {0};
    for (int op = 0; op < CHAOS_OPS_MAX && (op < CHAOS_OPS || !chaos_failed_yet()); op++) {
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
            if (!*slot)
                continue;
            size_t size = chaos_size(r >> 16);
            struct tagged old = **slot;
            size_t old_mid = chaos_middle(old.size);
            errno = 0;
            struct tagged *b = lfh_realloc(*slot, size);
            if (!b) {
                atomic_fetch_add(&chaos_failures, 1);
                if (errno != ENOMEM || !chaos_intact(*slot))
                    CHAOS_ERROR();
                continue;
            }
            /* The contents up to the smaller size moved along. */
            uint64_t mid = old.tag;
            if (old_mid + 8 <= size)
                memcpy(&mid, (char *)b + old_mid, 8);
            if (b->tag != old.tag || b->size != old.size || mid != old.tag)
                CHAOS_ERROR();
            chaos_stamp(b, size, old.tag);
            *slot = b;
        } else {
            /* Hand the block to whichever thread takes this swap slot next. */
            struct tagged *got = atomic_exchange(&chaos_swaps[(r >> 16) % CHAOS_SWAPS], *slot);
            if (got && !chaos_intact(got))
                CHAOS_ERROR();
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
    struct os_fault_stats stats;
    os_fault_stats(&stats);
    chaos_failed_before = stats.failed;
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
    os_fault_stats(&stats);
    printf("# %llu OS calls, %llu failed; %d allocation calls failed with ENOMEM\n",
           (unsigned long long)stats.calls, (unsigned long long)stats.failed,
           atomic_load(&chaos_failures));
    CHECK(chaos_failed_yet());
    CHECK(atomic_load(&chaos_errors) == 0);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

static void concurrent_failures_corrupt_nothing(void)
{
    CHECK(in_child(concurrent_failures_corrupt_nothing_body) == 0);
}

/* ---- blocks of the workload ------------------------------------------------------ */

static inline uint8_t pattern_byte(uint8_t seed, size_t offset)
{
    return (uint8_t)(seed + offset * 31 + (offset >> 8));
}

static void pattern_fill(char *p, size_t size, uint8_t seed)
{
    size_t start, len;
    for (unsigned k = 0; pattern_range(size, k, &start, &len); k++)
        for (size_t i = start; i < start + len; i++)
            p[i] = (char)pattern_byte(seed, i);
}

/* Whether the pattern of a block of `size` bytes is intact below `limit`. */
static bool pattern_intact(const char *p, size_t size, uint8_t seed, size_t limit)
{
    size_t start, len;
    for (unsigned k = 0; pattern_range(size, k, &start, &len); k++)
        for (size_t i = start; i < start + len && i < limit; i++)
            if ((uint8_t)p[i] != pattern_byte(seed, i))
                return false;
    return true;
}

struct block {
    char *p;
    size_t size;
    uint8_t seed;
};

#define MAX_BLOCKS 1024

struct run {
    struct block blocks[MAX_BLOCKS];
    int count;
    bool must_succeed;  /* no injection: every call must succeed */
    unsigned next_seed; /* distinct patterns for distinct blocks */
    int api_failures;   /* routines that reported ENOMEM (correctly) */
    int errors;         /* anything wrong; each is also reported on stderr */
};

static void error(struct run *r, const char *what, size_t size)
{
    fprintf(stderr, "  %s (size %zu)\n", what, size);
    r->errors++;
}

/* Accounts for the result of an allocation routine that returned `p` for `size` bytes
 * aligned to `align`: a failure must be ENOMEM; a block is checked and patterned. */
static void adopt(struct run *r, void *p, size_t size, size_t align, int err)
{
    if (!p) {
        if (err != ENOMEM)
            error(r, "failed without ENOMEM", size);
        else if (r->must_succeed)
            error(r, "failed after the injection was lifted", size);
        r->api_failures++;
        return;
    }
    if ((uintptr_t)p % align || (uintptr_t)p % 16)
        error(r, "misaligned block", size);
    if (lfh_malloc_usable_size(p) < size)
        error(r, "usable size below the request", size);
    REQUIRE(r->count < MAX_BLOCKS);
    struct block *b = &r->blocks[r->count++];
    b->p = p;
    b->size = size;
    b->seed = (uint8_t)(r->next_seed++ * 37 + 1);
    pattern_fill(p, size, b->seed);
}

static void check_block(struct run *r, const struct block *b)
{
    if (!pattern_intact(b->p, b->size, b->seed, b->size))
        error(r, "block corrupted", b->size);
}

static void release(struct run *r, int index)
{
    struct block *b = &r->blocks[index];
    check_block(r, b);
    lfh_free(b->p);
    *b = r->blocks[--r->count];
}

/* ---- the workload ----------------------------------------------------------------- */

static void do_malloc(struct run *r, size_t size)
{
    errno = 0;
    void *p = lfh_malloc(size);
    adopt(r, p, size, 16, errno);
}

static void do_calloc(struct run *r, size_t count, size_t size)
{
    errno = 0;
    char *p = lfh_calloc(count, size);
    int err = errno;
    if (p && !reads_zero(p, count * size))
        error(r, "calloc's block is not zero", count * size);
    adopt(r, p, count * size, 16, err);
}

/* calloc of a chunk size whose last tenant left it dirty, before and after a trim
 * (which decommits the chunk unless the kernel refuses). */
static void do_calloc_after_dirty(struct run *r, size_t size)
{
    for (int trim = 0; trim < 2; trim++) {
        errno = 0;
        char *dirty = lfh_malloc(size);
        if (!dirty) {
            adopt(r, dirty, size, 16, errno);
            continue;
        }
        memset(dirty, 0xab, size);
        lfh_free(dirty);
        if (trim)
            lfh_malloc_trim(0);
        do_calloc(r, 1, size);
    }
}

/* Reallocates block `index` to `size` bytes: on success the old contents must have
 * moved along, on failure the old block must be untouched. */
static void do_realloc(struct run *r, int index, size_t size)
{
    struct block *b = &r->blocks[index];
    errno = 0;
    char *p = lfh_realloc(b->p, size);
    if (!p) {
        adopt(r, NULL, size, 16, errno);
        check_block(r, b);
        return;
    }
    size_t kept = b->size < size ? b->size : size;
    if (!pattern_intact(p, b->size, b->seed, kept))
        error(r, "realloc lost the contents", size);
    if (lfh_malloc_usable_size(p) < size)
        error(r, "usable size below the request", size);
    b->p = p;
    b->size = size;
    pattern_fill(p, size, b->seed);
}

static void do_aligned(struct run *r, size_t align, size_t size, int routine)
{
    errno = 0;
    void *p = NULL;
    switch (routine) {
    case 0: {
        void *out = &p;
        int ret = lfh_posix_memalign(&out, align, size);
        if (ret != 0 && out != &p)
            error(r, "posix_memalign changed *memptr on failure", size);
        if (ret != 0 && ret != ENOMEM)
            error(r, "posix_memalign failed without ENOMEM", size);
        adopt(r, ret == 0 ? out : NULL, size, align, ret == 0 ? 0 : ENOMEM);
        return;
    }
    case 1:
        p = lfh_aligned_alloc(align, size);
        break;
    case 2:
        p = lfh_memalign(align, size);
        break;
    case 3:
        p = lfh_valloc(size);
        break;
    default:
        p = lfh_pvalloc(size);
        break;
    }
    adopt(r, p, size, align, errno);
}

struct remote {
    struct run *owner; /* frees blocks [from, to) of the owner's run */
    int from, to;
    struct run mine; /* what the thread allocates, handed to the owner */
};

static void *remote_thread(void *arg)
{
    struct remote *t = arg;
    for (int i = t->from; i < t->to; i++) {
        check_block(t->owner, &t->owner->blocks[i]);
        lfh_free(t->owner->blocks[i].p);
        t->owner->blocks[i].p = NULL;
    }
    for (unsigned i = 0; i < 150; i++)
        do_malloc(&t->mine, 8 + (i * 97) % (i % 10 == 0 ? 40000 : 700));
    do_malloc(&t->mine, 300 * KIB);
    do_calloc(&t->mine, 3, MIB);
    return NULL;
}

/* Frees blocks of the run from a second thread and takes over blocks it allocated. */
static void do_remote(struct run *r)
{
    static struct remote t;
    memset(&t, 0, sizeof t);
    t.owner = r;
    t.from = r->count / 4;
    t.to = r->count / 2;
    t.mine.must_succeed = r->must_succeed;
    t.mine.next_seed = 1000;
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, remote_thread, &t) == 0);
    REQUIRE(pthread_join(thread, NULL) == 0);
    int kept = 0;
    for (int i = 0; i < r->count; i++)
        if (r->blocks[i].p)
            r->blocks[kept++] = r->blocks[i];
    r->count = kept;
    for (int i = 0; i < t.mine.count; i++) {
        REQUIRE(r->count < MAX_BLOCKS);
        r->blocks[r->count++] = t.mine.blocks[i];
    }
    r->api_failures += t.mine.api_failures;
    r->errors += t.mine.errors;
}

/* Reallocates one block through every kind of block and back: small, medium, large
 * (arena chunks; from 3 MiB to 20 MiB it leaves its arena by mremap when it cannot grow
 * in place), huge (its own mapping: grown with mremap, shrunk in place). */
static void do_realloc_journey(struct run *r)
{
    static const size_t sizes[] = {100,       1000,     20 * KIB, 100 * KIB, 600 * KIB, 700 * KIB,
                                   400 * KIB, 3 * MIB,  20 * MIB, 70 * MIB,  90 * MIB,  75 * MIB,
                                   3 * MIB,   50 * KIB, 40 * KIB, 30};
    int index = r->count;
    do_malloc(r, 24);
    if (r->count == index)
        return; /* the first malloc failed */
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        do_realloc(r, index, sizes[i]);
}

static void workload(struct run *r)
{
    for (unsigned i = 0; i < 120; i++)
        do_malloc(r, 1 + (i * 37) % 1024);
    for (unsigned i = 0; i < 16; i++)
        do_malloc(r, 1024 + i * 2000);
    static const size_t large[] = {40 * KIB, 200 * KIB, MIB, 3 * MIB, 9 * MIB, 64 * MIB};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++)
        do_malloc(r, large[i]);
    do_malloc(r, 80 * MIB);
    do_malloc(r, 65 * MIB + 1);
    do_calloc(r, 3, 100);
    do_calloc(r, 20, KIB);
    do_calloc(r, 256, KIB);
    do_calloc(r, 2, MIB);
    do_calloc(r, 70, MIB);
    do_calloc_after_dirty(r, 256 * KIB);
    do_realloc_journey(r);
    do_aligned(r, 64, 100, 0);
    do_aligned(r, 4096, 5000, 0);
    do_aligned(r, MIB, 300 * KIB, 0);
    do_aligned(r, 128 * MIB, 4096, 0);
    do_aligned(r, 256, 1024, 1);
    do_aligned(r, 32 * KIB, 40000, 2);
    do_aligned(r, 4096, 10000, 3);
    do_aligned(r, 4096, 5000, 4);
    for (int i = r->count - 1; i >= 0; i -= 2)
        release(r, i);
    lfh_malloc_trim(0);
    do_remote(r);
    for (unsigned i = 0; i < 100; i++)
        do_malloc(r, 16 + (i * 53) % 3000);
    do_malloc(r, 2 * MIB);
    do_malloc(r, 100 * MIB);
}

/* ---- decommits in one system call ------------------------------------------------ */

/* Four ranges of a mapping of RANGE_PAGES pages: page 0, pages 2-3, page 7, pages 12-15. */
#define RANGE_PAGES 20
static const unsigned range_first[4] = {0, 2, 7, 12}, range_pages[4] = {1, 2, 1, 4};

static bool page_in_a_range(unsigned page)
{
    for (unsigned i = 0; i < 4; i++)
        if (page >= range_first[i] && page < range_first[i] + range_pages[i])
            return true;
    return false;
}

/* Decommits the four ranges of a mapping filled with 0xcd and checks that each range
 * reads as zeros if `dropped` (else still 0xcd), that the pages between kept their bytes,
 * and that errno did not change when nothing was refused. Returns the OS calls it took. */
static uint64_t decommit_four_ranges(bool dropped)
{
    size_t size = RANGE_PAGES * OS_PAGE_SIZE;
    unsigned char *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    memset(p, 0xcd, size);
    struct iovec ranges[4];
    bool clean[4];
    for (unsigned i = 0; i < 4; i++)
        ranges[i] =
            (struct iovec){p + range_first[i] * OS_PAGE_SIZE, range_pages[i] * OS_PAGE_SIZE};
    struct os_fault_stats before, after;
    os_fault_stats(&before);
    errno = 4242;
    os_decommit_ranges(ranges, 4, clean);
    if (dropped)
        CHECK(errno == 4242);
    os_fault_stats(&after);
    for (unsigned i = 0; i < 4; i++)
        CHECK(clean[i] == dropped);
    unsigned wrong = 0;
    for (unsigned page = 0; page < RANGE_PAGES; page++) {
        unsigned char want = page_in_a_range(page) && dropped ? 0 : 0xcd;
        for (size_t i = 0; i < OS_PAGE_SIZE; i++)
            wrong += p[page * OS_PAGE_SIZE + i] != want;
    }
    CHECK(wrong == 0);
    munmap(p, size);
    return after.calls - before.calls;
}

/* From now on this process is killed if it calls process_madvise, and madvise fails with
 * `madvise_errno` unless that is 0: a filter that lists what a process may call, as
 * OpenSSH's and systemd's do. False if the kernel has no seccomp. */
static bool filter_system_calls(int madvise_errno)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_madvise, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, madvise_errno ? SYS_madvise : ~0U, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)madvise_errno),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {sizeof filter / sizeof filter[0], filter};
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
           prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

/* The kernel drops the pages of several ranges of the process itself in one call. */
static bool kernel_decommits_ranges(void)
{
    void *page =
        mmap(NULL, OS_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED);
    struct iovec range = {page, OS_PAGE_SIZE};
    bool yes = platform_decommit_ranges(&range, 1) == (long)OS_PAGE_SIZE;
    munmap(page, OS_PAGE_SIZE);
    return yes;
}

/* Runs of 256 KiB, freed and trimmed, then a calloc over them: it must read as zeros. */
static void purged_runs_read_as_zeros(void)
{
    enum { RUNS = 48 };
    char *run[RUNS];
    for (unsigned i = 0; i < RUNS; i++) {
        run[i] = lfh_malloc(256 * KIB);
        REQUIRE(run[i]);
        memset(run[i], 0xab, 256 * KIB);
    }
    for (unsigned i = 0; i < RUNS; i++)
        lfh_free(run[i]);
    lfh_malloc_trim(0);
    for (unsigned i = 0; i < RUNS; i++) {
        run[i] = lfh_calloc(1, 256 * KIB);
        REQUIRE(run[i]);
        CHECK(reads_zero(run[i], 256 * KIB));
    }
    for (unsigned i = 0; i < RUNS; i++)
        lfh_free(run[i]);
}

/* purged_runs_read_as_zeros, then everything back with the kernel. */
static void purged_runs_go_back(void)
{
    purged_runs_read_as_zeros();
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
}

/* Where the kernel allows it, the four ranges take one call; else one each, after the
 * one refused attempt. */
static void decommit_ranges_in_one_call_body(void)
{
    if (platform_thread_seccomp() != 0) {
        printf("  note: this test runs under a seccomp filter (or without /proc): lfheap "
               "makes one madvise per range\n");
        CHECK(decommit_four_ranges(true) == 4);
        CHECK(decommit_four_ranges(true) == 4);
    } else {
        bool one_call = kernel_decommits_ranges();
        if (!one_call)
            printf("  note: this kernel has no process_madvise(MADV_DONTNEED) on the process "
                   "itself (Linux 6.15 and later): checking the fallback\n");
        CHECK(decommit_four_ranges(true) == (one_call ? 1 : 5));
        CHECK(decommit_four_ranges(true) == (one_call ? 1 : 4));
    }
    purged_runs_go_back();
}

static void decommit_ranges_in_one_call(void)
{
    CHECK(in_child(decommit_ranges_in_one_call_body) == 0);
}

/* Decommits longer than 1 MiB go to the kernel in pieces of at most 1 MiB (os.c,
 * DECOMMIT_PIECE), one by one or as the vectors of calls of 16 pieces each, after the
 * shorter ranges before them, which go as they are: ranges that cross MiB boundaries at
 * odd pages, one of 257 MiB that takes 17 calls, and a short one after it must each read
 * as zeros afterwards, and the pages around them keep their bytes. */
static void decommit_in_pieces_body(void)
{
    size_t size = 264 * MIB;
    unsigned char *map =
        mmap(NULL, size + MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED);
    unsigned char *p = (unsigned char *)(((uintptr_t)map + MIB - 1) & ~(MIB - 1));
    const size_t first[3] = {MIB / 2 + 3 * OS_PAGE_SIZE, 4 * MIB, 262 * MIB};
    const size_t len[3] = {3 * MIB - 5 * OS_PAGE_SIZE, 257 * MIB, MIB / 2 + OS_PAGE_SIZE};
    const size_t step = 64 << 10; /* one byte per 64 KiB, and each range's first and last */
    for (size_t at = 0; at < size; at += step)
        p[at] = 0xcd;
    for (unsigned i = 0; i < 3; i++) {
        p[first[i]] = 0xcd;
        p[first[i] + len[i] - 1] = 0xcd;
        p[first[i] - 1] = 0xcd;
        p[first[i] + len[i]] = 0xcd;
    }
    struct iovec ranges[3];
    bool clean[3];
    for (unsigned i = 0; i < 3; i++)
        ranges[i] = (struct iovec){p + first[i], len[i]};
    os_decommit_ranges(ranges, 3, clean);
    unsigned wrong = 0;
    for (unsigned i = 0; i < 3; i++) {
        CHECK(clean[i]);
        wrong += p[first[i]] != 0 || p[first[i] + len[i] - 1] != 0;
        wrong += p[first[i] - 1] != 0xcd || p[first[i] + len[i]] != 0xcd;
        for (size_t at = (first[i] + step - 1) / step * step; at < first[i] + len[i]; at += step)
            wrong += p[at] != 0;
    }
    CHECK(wrong == 0);
    /* One decommit alone, across 3 MiB from an odd page. */
    unsigned char *q = p + 7 * OS_PAGE_SIZE;
    memset(q - 1, 0xcd, 3 * MIB + 2);
    CHECK(os_decommit(q, 3 * MIB));
    wrong = q[-1] != 0xcd || q[3 * MIB] != 0xcd;
    for (size_t i = 0; i < 3 * MIB; i++)
        wrong += q[i] != 0;
    CHECK(wrong == 0);
    munmap(map, size + MIB);
}

static void decommit_in_pieces(void)
{
    CHECK(in_child(decommit_in_pieces_body) == 0);
}

/* A kernel without the call (simulated: the call fails with `error` before reaching
 * it): one attempt, then madvise for every range, errno as it was, and purged runs still
 * read as zeros. */
static void decommit_ranges_fall_back_body(int error)
{
    os_fault_refuse_ranges(error);
    CHECK(decommit_four_ranges(true) == 5); /* the refused attempt, then one per range */
    CHECK(decommit_four_ranges(true) == 4); /* the refusal is remembered */
    purged_runs_go_back();
}

static void decommit_ranges_fall_back_enosys_body(void)
{
    decommit_ranges_fall_back_body(ENOSYS);
}

static void decommit_ranges_fall_back_ebadf_body(void)
{
    decommit_ranges_fall_back_body(EBADF);
}

static void decommit_ranges_fall_back(void)
{
    CHECK(in_child(decommit_ranges_fall_back_enosys_body) == 0);
    CHECK(in_child(decommit_ranges_fall_back_ebadf_body) == 0);
}

/* True once the main thread of this process has exited (its state reads Z). */
static bool main_thread_gone(void)
{
    char path[64], stat[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
    FILE *f = fopen(path, "r");
    if (!f)
        return true; /* reaped already */
    size_t got = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[got] = 0;
    const char *close_paren = strrchr(stat, ')');
    return close_paren && close_paren[1] == ' ' && close_paren[2] == 'Z';
}

/* After the main thread's pthread_exit, the other threads still decommit in one call
 * (the kernel refuses the call for the process once its first thread is gone, but not
 * for the calling thread). The thread ends the child with its own status. */
static void *decommit_after_main_exit(void *arg)
{
    (void)arg;
    /* No time limit: the main thread exits at its own pace. */
    while (!main_thread_gone())
        usleep(1000);
    bool one_call = platform_thread_seccomp() == 0 && kernel_decommits_ranges();
    if (!one_call)
        printf("  note: no process_madvise on the calling thread here: checking the fallback\n");
    CHECK(decommit_four_ranges(true) == (one_call ? 1 : 4));
    purged_runs_read_as_zeros();
    fflush(stdout);
    fflush(stderr);
    _exit(test_failures ? 1 : 0);
}

static void decommit_ranges_after_main_exit_body(void)
{
    if (platform_thread_seccomp() == 0 && !kernel_decommits_ranges())
        decommit_four_ranges(true); /* a kernel without the call: the refusal is remembered */
    pthread_t thread;
    REQUIRE(pthread_create(&thread, NULL, decommit_after_main_exit, NULL) == 0);
    pthread_exit(NULL);
}

static void decommit_ranges_after_main_exit(void)
{
    CHECK(in_child(decommit_ranges_after_main_exit_body) == 0);
}

/* The child's exit status when seccomp is not available: the check is skipped. */
#define NO_SECCOMP 77

static void skip_without_seccomp(const char *name, int status)
{
    if (status == NO_SECCOMP)
        printf("  note: %s skipped: seccomp filters are not available here\n", name);
    else
        CHECK(status == 0);
}

/* A thread under a seccomp filter never makes the call (the filter here kills the
 * process for it): one madvise per range, and purged runs read as zeros. */
static void filtered_thread_never_batches_body(void)
{
    if (!filter_system_calls(0))
        _exit(NO_SECCOMP);
    CHECK(decommit_four_ranges(true) == 4);
    purged_runs_go_back();
}

static void filtered_thread_never_batches(void)
{
    skip_without_seccomp("filtered", in_child(filtered_thread_never_batches_body));
}

/* madvise refused as well: the pages keep their bytes, and the runs stay dirty, so that
 * calloc still clears them. */
static void decommits_refused_keep_runs_dirty_body(void)
{
    if (!filter_system_calls(EPERM))
        _exit(NO_SECCOMP);
    CHECK(decommit_four_ranges(false) == 4);
    purged_runs_read_as_zeros();
}

static void decommits_refused_keep_runs_dirty(void)
{
    skip_without_seccomp("both refused", in_child(decommits_refused_keep_runs_dirty_body));
}

/* ---- the sweep: injected run, recovery, memory back ------------------------------- */

/* What the parent asks of a child, and what the child reports back (in a shared page). */
struct sweep_child {
    uint64_t nth; /* the OS call to fail first, 0 for none */
    bool persistent;
    uint64_t calls;  /* OS calls the injected workload made */
    uint64_t failed; /* of which failed */
    int api_failures;
};

static struct sweep_child *sweep_child;
static struct run first_run, second_run;

static void sweep_child_body(void)
{
    long resident_start = test_rss_kib();
    struct os_fault_stats start, end;
    os_fault_stats(&start);
    os_fault_inject(sweep_child->nth, sweep_child->persistent);
    first_run.next_seed = 1;
    workload(&first_run);
    os_fault_inject(0, false); /* memory returns */
    os_fault_stats(&end);
    sweep_child->calls = end.calls - start.calls;
    sweep_child->failed = end.failed - start.failed;
    sweep_child->api_failures = first_run.api_failures;

    second_run.must_succeed = true;
    second_run.next_seed = 500;
    workload(&second_run);
    while (first_run.count)
        release(&first_run, first_run.count - 1);
    while (second_run.count)
        release(&second_run, second_run.count - 1);
    CHECK(first_run.errors == 0 && second_run.errors == 0);
    lfh_malloc_trim(0);
    CHECK(memory_is_back());
    long resident = test_rss_kib() - resident_start;
    if (resident > 8 * 1024)
        fprintf(stderr, "  resident size %ld KiB above its start after trim\n", resident);
    CHECK(resident <= 8 * 1024);
}

static uint64_t reference_calls;
static unsigned margin = 8;

static void reference_workload_succeeds(void)
{
    memset(sweep_child, 0, sizeof *sweep_child);
    CHECK(in_child(sweep_child_body) == 0);
    CHECK(sweep_child->failed == 0 && sweep_child->api_failures == 0);
    reference_calls = sweep_child->calls;
    CHECK(reference_calls > 20);
    printf("# the workload makes %llu OS calls\n", (unsigned long long)reference_calls);
}

static void sweep(bool persistent)
{
    int api_failures = 0;
    for (uint64_t nth = 1; nth <= reference_calls + margin; nth++) {
        memset(sweep_child, 0, sizeof *sweep_child);
        sweep_child->nth = nth;
        sweep_child->persistent = persistent;
        int status = in_child(sweep_child_body);
        /* The calls before the injected one are the reference's, so the injection must
         * hit exactly when the reference made that many calls. */
        bool hit = nth <= reference_calls;
        bool injected = persistent ? (sweep_child->failed > 0) == hit : sweep_child->failed == hit;
        if (status != 0 || !injected) {
            fprintf(stderr, "  %s from OS call %llu: exit status %d, %llu calls failed\n",
                    persistent ? "exhausted" : "one failure", (unsigned long long)nth, status,
                    (unsigned long long)sweep_child->failed);
            test_failures++;
        }
        api_failures += sweep_child->api_failures;
    }
    printf("# %s: %llu runs, %d allocation calls failed with ENOMEM\n",
           persistent ? "exhausted" : "one failure", (unsigned long long)(reference_calls + margin),
           api_failures);
    CHECK(api_failures > 0);
}

static void each_os_call_fails_once(void)
{
    sweep(false);
}

static void memory_exhausted_from_each_os_call(void)
{
    sweep(true);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        margin = (unsigned)atoi(argv[1]);
    /* No purge by the clock during a run: the calls must be the same in every child. */
    setenv("LFHEAP_PURGE_MS", "60000", 1);
    sweep_child =
        mmap(NULL, sizeof *sweep_child, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sweep_child != MAP_FAILED);
    RUN(refused_unmaps_are_retried);
    RUN(refused_decommit_keeps_chunk_dirty);
    RUN(decommit_ranges_in_one_call);
    RUN(decommit_in_pieces);
    RUN(decommit_ranges_fall_back);
    RUN(filtered_thread_never_batches);
    RUN(decommit_ranges_after_main_exit);
    RUN(decommits_refused_keep_runs_dirty);
    RUN(descriptor_chunk_failure_loses_nothing);
    RUN(store_slab_failure_serves_uncached);
    RUN(move_out_failure_copies_instead);
    RUN(trim_returns_orphaned_caches);
    RUN(concurrent_failures_corrupt_nothing);
    RUN(reference_workload_succeeds);
    REQUIRE(reference_calls > 0);
    RUN(each_os_call_fails_once);
    RUN(memory_exhausted_from_each_os_call);
    return test_exit_status();
}
