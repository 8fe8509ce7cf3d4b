/*
 * API conformance: C11, POSIX and glibc semantics of every allocation routine, with the
 * errno values, alignment guarantees and edge cases a program relies on. Built twice:
 * against lfh_* (build/t, build/t-asan) and against the standard names, run with lfheap
 * preloaded (build/t-plain, TEST_PLAIN).
 */
#include "alloc_names.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

/* volatile so that the compiler cannot reason about the requests */
static volatile size_t huge = (size_t)PTRDIFF_MAX + 1;
static volatile size_t zero = 0;
static volatile size_t two_pow_33 = (size_t)1 << 33;
static volatile size_t two_pow_40 = (size_t)1 << 40;

/* The same for an alignment that is no power of two, which clang refuses at compile time
 * when it sees one (-Wnon-power-of-two-alignment). */
static size_t unseen(size_t value)
{
    volatile size_t copy = value;
    return copy;
}

static int aligned(const void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

static void malloc_zero_is_unique(void)
{
    void *a = T_MALLOC(zero), *b = T_MALLOC(zero);
    CHECK(a && b && a != b);
    CHECK(T_MALLOC_USABLE_SIZE(a) >= 1);
    T_FREE(a);
    T_FREE(b);
}

static void too_large_fails_with_enomem(void)
{
    errno = 0;
    CHECK(T_MALLOC(huge) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(T_MALLOC(SIZE_MAX - zero) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(T_CALLOC(huge, 2) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(T_CALLOC(two_pow_33, two_pow_33) == NULL && errno == ENOMEM);
    errno = 0;
    /* volatile: the compiler may not assume the failed reallocs invalidated it */
    char *volatile p = T_MALLOC(10);
    REQUIRE(p);
    p[9] = 'x';
    CHECK(T_REALLOC(p, huge) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(T_REALLOCARRAY(p, two_pow_40, two_pow_40) == NULL && errno == ENOMEM);
    CHECK(p[9] == 'x'); /* still valid after the failed calls */
    T_FREE(p);
    errno = 0;
    CHECK(T_ALIGNED_ALLOC(64, huge) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(T_PVALLOC(SIZE_MAX - zero) == NULL && errno == ENOMEM);
}

static void every_block_is_16_aligned(void)
{
    for (size_t s = 16; s < 70000; s = s * 5 / 4 + 1) {
        void *p = T_MALLOC(s);
        CHECK(p && aligned(p, 16));
        CHECK(T_MALLOC_USABLE_SIZE(p) >= s);
        memset(p, 0x5a, s);
        T_FREE(p);
    }
}

static void calloc_zeroes(void)
{
    /* dirty some blocks first so calloc has to clear reused memory */
    for (size_t s = 8; s < 100000; s *= 3) {
        unsigned char *d = T_MALLOC(s);
        REQUIRE(d);
        memset(d, 0xff, s);
        T_FREE(d);
        unsigned char *c = T_CALLOC(1, s);
        REQUIRE(c);
        size_t nonzero = 0;
        for (size_t i = 0; i < s; i++)
            nonzero += c[i] != 0;
        CHECK(nonzero == 0);
        T_FREE(c);
    }
    CHECK(T_CALLOC(0, 10) != NULL); /* a unique block, like malloc(0); leaked on purpose */
}

static void realloc_semantics(void)
{
    char *p = T_REALLOC(NULL, 100); /* NULL: like malloc */
    REQUIRE(p);
    for (int i = 0; i < 100; i++)
        p[i] = (char)i;
    char *same = T_REALLOC(p, 90); /* shrink within the class stays in place */
    CHECK(same == p);
    char *grown = T_REALLOC(same, 5000);
    REQUIRE(grown);
    for (int i = 0; i < 90; i++)
        CHECK(grown[i] == (char)i);
    char *big = T_REALLOC(grown, 3 << 20); /* small to large */
    REQUIRE(big);
    for (int i = 0; i < 90; i++)
        CHECK(big[i] == (char)i);
    memset(big + 90, 7, (3 << 20) - 90);
    char *bigger = T_REALLOC(big, 9 << 20); /* large grows (pages move, no copy) */
    REQUIRE(bigger);
    CHECK(bigger[0] == 0 && bigger[89] == 89 && bigger[(3 << 20) - 1] == 7);
    char *smaller = T_REALLOC(bigger, 100); /* large to small */
    REQUIRE(smaller);
    CHECK(smaller[0] == 0 && smaller[89] == 89 && smaller[99] == 7);
    errno = 0;
    CHECK(T_REALLOC(smaller, zero) == NULL && errno == 0); /* glibc: frees, returns NULL */
    char *arr = T_REALLOCARRAY(NULL, 10, 10);
    CHECK(arr != NULL);
    T_FREE(arr);
}

/* The byte that offset i of a block holds in the pattern `seed`. */
static unsigned char pattern_at(size_t i, unsigned seed)
{
    return (unsigned char)(i * 131 + seed);
}

static void pattern_fill(unsigned char *p, size_t from, size_t to, unsigned seed)
{
    for (size_t i = from; i < to; i++)
        p[i] = pattern_at(i, seed);
}

/* Bytes of p[from, to) that differ from the pattern (or from 0 if `zeros`). */
static size_t pattern_errors(const unsigned char *p, size_t from, size_t to, unsigned seed,
                             int zeros)
{
    size_t bad = 0;
    for (size_t i = from; i < to; i++)
        bad += p[i] != (zeros ? 0 : pattern_at(i, seed));
    return bad;
}

/* One step of a realloc chain: the block p, whose first `have` bytes hold the pattern,
 * resized to `want` bytes. The pattern must survive up to the smaller size and, for a
 * calloc block (`zero_fill`: the property is sticky), the bytes it gained must read 0.
 * Leaves the pattern in all `want` bytes. */
static unsigned char *realloc_step(unsigned char *p, size_t have, size_t want, unsigned seed,
                                   int zero_fill)
{
    unsigned char *q = T_REALLOC(p, want);
    REQUIRE(q);
    size_t kept = have < want ? have : want;
    CHECK(pattern_errors(q, 0, kept, seed, 0) == 0);
    if (zero_fill)
        CHECK(pattern_errors(q, kept, want, seed, 1) == 0);
    pattern_fill(q, kept, want, seed);
    return q;
}

/* Chains of realloc through every size-class boundary, small to large and back, from
 * malloc and from calloc blocks: growing to the block's usable size keeps a small block
 * where it is, one byte more takes the next class (a move); large blocks grow by half,
 * then everything shrinks by halves and to just above half, down to one byte. */
static void realloc_chains_keep_contents(void)
{
    for (int from_calloc = 0; from_calloc < 2; from_calloc++) {
        unsigned seed = 17 + (unsigned)from_calloc;
        size_t have = 1;
        unsigned char *p = from_calloc ? T_CALLOC(1, have) : T_MALLOC(have);
        REQUIRE(p);
        pattern_fill(p, 0, have, seed);
        size_t moves = 0;
        while (have < ((size_t)6 << 20)) {
            size_t usable = T_MALLOC_USABLE_SIZE(p);
            REQUIRE(usable >= have);
            uintptr_t before = (uintptr_t)p;
            p = realloc_step(p, have, usable, seed, from_calloc);
            if (usable <= 16384)
                CHECK((uintptr_t)p == before); /* it fits: no reason to move */
            have = usable;
            size_t want = usable <= 32768 ? usable + 1 : usable + usable / 2;
            before = (uintptr_t)p;
            p = realloc_step(p, have, want, seed, from_calloc);
            moves += (uintptr_t)p != before;
            have = want;
        }
        CHECK(moves >= 30); /* every small class boundary moved the block */
        while (have > 1) {
            size_t want = have / 2 + 1;
            p = realloc_step(p, have, want, seed, from_calloc);
            have = want;
            want = have / 2 > 0 ? have / 2 : 1;
            p = realloc_step(p, have, want, seed, from_calloc);
            have = want;
        }
        T_FREE(p);
    }
}

/* Every byte malloc_usable_size reports belongs to the program (the Linux manual), so a
 * realloc that moves the block keeps them all: for plain, aligned and large blocks, each
 * filled to its usable size, then grown past it. A calloc block keeps its request, and
 * the bytes past the request read 0 in the grown block (the sticky zero fill, docs/API.md),
 * even where the program wrote into its usable tail. */
static void realloc_keeps_every_usable_byte(void)
{
    /* Up to 1 MiB, grown to about 4 MiB: the suite also runs this under ulimit -v 128 MiB. */
    static const size_t sizes[] = {0, 1, 24, 100, 3000, 32768, 40000, 100000, 1 << 20};
    for (int kind = 0; kind < 6; kind++) {
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            size_t n = sizes[i];
            unsigned char *p = NULL;
            switch (kind) {
            case 0:
                p = T_MALLOC(n);
                break;
            case 1:
                p = T_ALIGNED_ALLOC(64, (n + 63) & ~(size_t)63);
                break;
            case 2:
                REQUIRE(T_POSIX_MEMALIGN((void **)&p, 64, n) == 0);
                break;
            case 3:
                p = T_MEMALIGN(4096, n);
                break;
            case 4:
                p = T_VALLOC(n);
                break;
            case 5:
                p = T_CALLOC(1, n);
                break;
            }
            REQUIRE(p);
            size_t usable = T_MALLOC_USABLE_SIZE(p);
            REQUIRE(usable >= n);
            unsigned seed = (unsigned)(kind * 31 + i);
            pattern_fill(p, 0, usable, seed);
            for (int step = 0; step < 2; step++) {
                size_t want = step == 0 ? usable + 1 : usable * 2 + 100000;
                unsigned char *q = T_REALLOC(p, want);
                REQUIRE(q);
                size_t kept = kind == 5 ? n : usable;
                size_t lost = pattern_errors(q, 0, kept, seed, 0);
                if (lost)
                    printf("  kind %d, %zu bytes (usable %zu) grown to %zu: %zu bytes lost\n", kind,
                           n, usable, want, lost);
                CHECK(lost == 0);
                if (kind == 5)
                    CHECK(pattern_errors(q, kept, want, seed, 1) == 0);
                p = q;
                n = want;
                usable = T_MALLOC_USABLE_SIZE(p);
                REQUIRE(usable >= want);
                pattern_fill(p, 0, usable, seed);
            }
            T_FREE(p);
        }
    }
}

/* A calloc block keeps its zero fill through reallocs that stay in place: dirtied, shrunk
 * by a quarter and grown back, the bytes it regained read 0 although the program wrote
 * them before the shrink. */
static void calloc_block_regrows_zeroed(void)
{
    for (size_t s = 48; s <= ((size_t)1 << 20); s = s * 3 + 5) {
        unsigned char *p = T_CALLOC(1, s);
        REQUIRE(p);
        memset(p, 0xab, s);
        size_t shrunk = s - s / 4;
        unsigned char *q = T_REALLOC(p, shrunk);
        REQUIRE(q);
        size_t dirty = 0;
        for (size_t i = 0; i < shrunk; i++)
            dirty += q[i] == 0xab;
        CHECK(dirty == shrunk);
        q = T_REALLOC(q, s);
        REQUIRE(q);
        CHECK(pattern_errors(q, shrunk, s, 0, 1) == 0);
        T_FREE(q);
    }
}

/* calloc returns zeros in reused memory: blocks of each size are dirtied and freed, then
 * calloc'd again many times (the same blocks, from the thread's cache) and checked. */
static void calloc_zeroes_reused_blocks(void)
{
    enum { N = 64 };
    static unsigned char *blocks[N];
    for (size_t s = 1; s <= ((size_t)1 << 19); s = s * 2 + 3) {
        for (int round = 0; round < 3; round++) {
            for (int i = 0; i < N; i++) {
                blocks[i] = T_MALLOC(s);
                REQUIRE(blocks[i]);
                memset(blocks[i], 0xff, s);
            }
            for (int i = 0; i < N; i++)
                T_FREE(blocks[i]);
            size_t nonzero = 0;
            for (int i = 0; i < N; i++) {
                blocks[i] = round == 1 ? T_CALLOC(s, 1) : T_CALLOC(1, s);
                REQUIRE(blocks[i]);
                nonzero += pattern_errors(blocks[i], 0, s, 0, 1);
                memset(blocks[i], 0xee, s);
            }
            CHECK(nonzero == 0);
            for (int i = 0; i < N; i++)
                T_FREE(blocks[i]);
        }
    }
}

/* Blocks of `size` bytes that calloc_zeroes_fresh_blocks and its dirtying thread take
 * at once: enough to fill superblocks, about 1 MiB (the suite also runs under ulimit -v). */
enum { FRESH_MAX = 3000 };

static int fresh_count(size_t size)
{
    size_t n = ((size_t)1 << 20) / size;
    return n > FRESH_MAX ? FRESH_MAX : n < 64 ? 64 : (int)n;
}

/* A thread that dirties blocks of one size and frees them, then exits: its cache goes
 * back, and the emptied superblocks' chunks return to the arena dirty. */
struct dirtier {
    size_t size;
    int use_calloc;
};

static void *dirty_and_exit(void *arg)
{
    const struct dirtier *d = arg;
    static unsigned char *blocks[FRESH_MAX];
    int n = fresh_count(d->size);
    for (int i = 0; i < n; i++) {
        blocks[i] = d->use_calloc ? T_CALLOC(1, d->size) : T_MALLOC(d->size);
        if (blocks[i])
            memset(blocks[i], 0xc3, d->size);
    }
    for (int i = 0; i < n; i++)
        T_FREE(blocks[i]);
    return NULL;
}

/* calloc in fresh memory: blocks carved from new superblocks, some of them set up in
 * chunks that other threads dirtied and gave back (calloc may skip the clearing only for
 * pages that read as zeros), all read 0. */
static void calloc_zeroes_fresh_blocks(void)
{
    static unsigned char *blocks[FRESH_MAX];
    size_t sizes[] = {16, 48, 200, 1000, 1024, 1100, 5000, 30000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int use_calloc = 0; use_calloc < 2; use_calloc++) {
            struct dirtier d = {sizes[k], use_calloc};
            pthread_t t;
            REQUIRE(pthread_create(&t, NULL, dirty_and_exit, &d) == 0);
            REQUIRE(pthread_join(t, NULL) == 0);
            int n = fresh_count(d.size);
            size_t nonzero = 0;
            for (int i = 0; i < n; i++) {
                blocks[i] = T_CALLOC(1, d.size);
                REQUIRE(blocks[i]);
                nonzero += pattern_errors(blocks[i], 0, d.size, 0, 1);
                memset(blocks[i], 0x3c, d.size);
            }
            CHECK(nonzero == 0);
            for (int i = 0; i < n; i++)
                T_FREE(blocks[i]);
        }
}

/* calloc clears the whole usable size, not only the request: the program may use those
 * bytes (the Linux manual), and glibc, jemalloc, tcmalloc and mimalloc clear them. Each
 * size is allocated after blocks of it were filled to their usable size and freed, so
 * the blocks come back dirty; a large one also comes after a bigger block was freed, so
 * that it may reuse that block's run, which holds more than it asked for. */
static void calloc_zeroes_the_usable_size(void)
{
    enum { ROUNDS = 8 };
    static unsigned char *blocks[ROUNDS];
    size_t nonzero = 0, checked = 0;
    for (size_t size = 1; size <= ((size_t)1 << 20); size = size * 3 / 2 + 1) {
        unsigned char *bigger = T_MALLOC(size * 5 / 2);
        REQUIRE(bigger);
        memset(bigger, 0xab, T_MALLOC_USABLE_SIZE(bigger));
        for (int i = 0; i < ROUNDS; i++) {
            blocks[i] = T_CALLOC(1, size);
            REQUIRE(blocks[i]);
            memset(blocks[i], 0xab, T_MALLOC_USABLE_SIZE(blocks[i]));
        }
        for (int i = 0; i < ROUNDS; i++)
            T_FREE(blocks[i]);
        T_FREE(bigger);
        for (int i = 0; i < ROUNDS; i++) {
            blocks[i] = T_CALLOC(size, 1);
            REQUIRE(blocks[i]);
            size_t usable = T_MALLOC_USABLE_SIZE(blocks[i]);
            CHECK(usable >= size);
            size_t bad = pattern_errors(blocks[i], 0, usable, 0, 1);
            if (bad)
                fprintf(stderr, "  calloc(%zu, 1): %zu of its %zu usable bytes not zero\n", size,
                        bad, usable);
            nonzero += bad;
            checked += usable;
        }
        for (int i = 0; i < ROUNDS; i++)
            T_FREE(blocks[i]);
    }
    CHECK(nonzero == 0);
    CHECK(checked > 0);
}

/* calloc of a large block whose run a tenant before used sparsely, densely or in part:
 * a block of most pages not resident has its pages given back rather than cleared
 * (heap_large_zero), and either way every usable byte reads 0. The tenant writes one
 * page in `stride`, and its last byte; the next block asks the same size, so that it may
 * reuse the run, or a smaller one. */
static void calloc_zeroes_sparsely_used_runs(void)
{
    size_t sizes[] = {300 << 10, (1 << 20) + 5, 6 << 20};
    size_t strides[] = {1, 2, 3, 16, 1000};
    size_t nonzero = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t s = 0; s < sizeof strides / sizeof strides[0]; s++)
            for (int smaller = 0; smaller < 2; smaller++) {
                size_t size = sizes[k];
                unsigned char *tenant = T_MALLOC(size);
                REQUIRE(tenant);
                for (size_t off = 0; off < size; off += strides[s] * 4096)
                    tenant[off] = 0x5a;
                tenant[size - 1] = 0x5a;
                T_FREE(tenant);
                size_t want = smaller ? size / 2 + 17 : size;
                unsigned char *p = T_CALLOC(1, want);
                REQUIRE(p);
                size_t bad = pattern_errors(p, 0, T_MALLOC_USABLE_SIZE(p), 0, 1);
                if (bad)
                    fprintf(stderr,
                            "  calloc(1, %zu) after a tenant of %zu writing 1 page in %zu: %zu "
                            "bytes not zero\n",
                            want, size, strides[s], bad);
                nonzero += bad;
                T_FREE(p);
            }
    CHECK(nonzero == 0);
}

/* A realloc that fails leaves the block as it was, whichever path it took: a calloc
 * block (it has a record) and a malloc block, small and large. */
static void failed_realloc_keeps_block(void)
{
    size_t sizes[] = {24, 700, 20000, 100000, (size_t)3 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (int from_calloc = 0; from_calloc < 2; from_calloc++) {
            size_t s = sizes[k];
            /* volatile: the compiler may not assume the failed reallocs invalidated it */
            unsigned char *volatile p = from_calloc ? T_CALLOC(1, s) : T_MALLOC(s);
            REQUIRE(p);
            pattern_fill(p, 0, s, 5);
            errno = 0;
            CHECK(T_REALLOC(p, huge) == NULL && errno == ENOMEM);
            errno = 0;
            CHECK(T_REALLOCARRAY(p, two_pow_40, two_pow_40) == NULL && errno == ENOMEM);
            CHECK(pattern_errors(p, 0, s, 5, 0) == 0);
            CHECK(T_MALLOC_USABLE_SIZE(p) >= s);
            p = T_REALLOC(p, s + 1); /* still a live block that realloc takes */
            REQUIRE(p);
            CHECK(pattern_errors(p, 0, s, 5, 0) == 0);
            T_FREE(p);
        }
}

static void posix_memalign_semantics(void)
{
    void *p = (void *)0x1234;
    CHECK(T_POSIX_MEMALIGN(&p, 3, 10) == EINVAL && p == (void *)0x1234);
    CHECK(T_POSIX_MEMALIGN(&p, sizeof(void *) / 2, 10) == EINVAL && p == (void *)0x1234);
    CHECK(T_POSIX_MEMALIGN(&p, 0, 10) == EINVAL && p == (void *)0x1234);
    errno = 0;
    CHECK(T_POSIX_MEMALIGN(&p, 64, huge) == ENOMEM && p == (void *)0x1234);
    /* as glibc leaves it; gcc assumes posix_memalign keeps errno, so make it read it */
    __asm__ volatile("" ::: "memory");
    CHECK(errno == ENOMEM);
    for (size_t a = sizeof(void *); a <= ((size_t)1 << 22); a <<= 1)
        for (size_t s = 0; s < 100000; s = s * 3 + 7) {
            void *q = NULL;
            CHECK(T_POSIX_MEMALIGN(&q, a, s) == 0);
            CHECK(q && aligned(q, a));
            CHECK(T_MALLOC_USABLE_SIZE(q) >= s);
            if (q)
                memset(q, 1, s);
            T_FREE(q);
        }
}

static void aligned_alloc_and_memalign(void)
{
    /* C17/glibc: any power of two, also below sizeof(void *) */
    void *p = T_ALIGNED_ALLOC(1, 10);
    CHECK(p != NULL);
    T_FREE(p);
    p = T_ALIGNED_ALLOC(4, 10);
    CHECK(p && aligned(p, 4));
    T_FREE(p);
    errno = 0;
    CHECK(T_ALIGNED_ALLOC(unseen(24), 10) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(T_ALIGNED_ALLOC(zero, 10) == NULL && errno == EINVAL);
    /* memalign rounds a non-power-of-two alignment up */
    p = T_MEMALIGN(unseen(48), 100);
    CHECK(p && aligned(p, 64));
    T_FREE(p);
    errno = 0;
    CHECK(T_MEMALIGN(unseen(SIZE_MAX / 2 + 2), 10) == NULL && errno == EINVAL);
    p = T_MEMALIGN(8192, 5000);
    CHECK(p && aligned(p, 8192));
    T_FREE(p);
    p = T_VALLOC(10);
    CHECK(p && aligned(p, 4096));
    T_FREE(p);
    p = T_PVALLOC(10);
    CHECK(p && aligned(p, 4096) && T_MALLOC_USABLE_SIZE(p) >= 4096);
    T_FREE(p);
    p = T_PVALLOC(0);
    CHECK(p && aligned(p, 4096) && T_MALLOC_USABLE_SIZE(p) >= 4096);
    T_FREE(p);
}

static void usable_size_and_free_edge_cases(void)
{
    CHECK(T_MALLOC_USABLE_SIZE(NULL) == 0);
    T_FREE(NULL);
    int on_stack = 0;
    CHECK(T_MALLOC_USABLE_SIZE(&on_stack) == 0);
    for (size_t s = 1; s < 40000; s = s * 2 + 1) {
        char *p = T_MALLOC(s);
        size_t u = T_MALLOC_USABLE_SIZE(p);
        CHECK(u >= s);
        CHECK(s <= 64 || u <= s + s / 4 + 16);
        memset(p, 3, u); /* the whole usable size is ours */
        T_FREE(p);
    }
}

/* A power of two from 1 KiB to 16 KiB plus a header of up to an eighth of it (sqlite3's
 * 4,104-byte page buffers, a 1,032-byte cell) gets a block at most an eighth bigger than
 * the request, not the quarter of the next class of four. */
static void power_of_two_plus_header_wastes_an_eighth(void)
{
    for (size_t pow = 1024; pow <= 16384; pow *= 2)
        for (size_t header = 1; header <= pow / 8; header = header * 2 + 7) {
            size_t s = pow + header;
            char *p = T_MALLOC(s);
            REQUIRE(p);
            size_t u = T_MALLOC_USABLE_SIZE(p);
            CHECK(u >= s && u <= pow + pow / 8);
            if (u < s || u > pow + pow / 8)
                fprintf(stderr, "  malloc(%zu): usable size %zu\n", s, u);
            memset(p, 7, u);
            T_FREE(p);
        }
}

/* A large block holds at most a quarter more than its request, and a page (arena runs:
 * 5/8 to 8/8 of a power of two): a fresh run (malloc_trim first, so that no freed run
 * waits), and a reused one too, which may be up to three times the request, of which
 * the block gets as much as a fresh run would give it (the second loop, where every
 * block may reuse the last one's run). */
static void large_blocks_hold_at_most_a_quarter_more(void)
{
    for (size_t s = 32 * 1024 + 1; s <= ((size_t)6 << 20); s += s / 7 + 4095) {
        T_MALLOC_TRIM(0);
        char *p = T_MALLOC(s);
        REQUIRE(p);
        size_t u = T_MALLOC_USABLE_SIZE(p);
        CHECK(u >= s && u <= s + s / 4);
        if (u < s || u > s + s / 4)
            fprintf(stderr, "  malloc(%zu): usable size %zu\n", s, u);
        memset(p, 5, u);
        T_FREE(p);
    }
    for (size_t s = ((size_t)6 << 20); s > 32 * 1024; s -= s / 7 + 4095) {
        char *p = T_MALLOC(s);
        REQUIRE(p);
        size_t u = T_MALLOC_USABLE_SIZE(p);
        CHECK(u >= s && u <= s + s / 4);
        if (u < s || u > s + s / 4)
            fprintf(stderr, "  malloc(%zu) after bigger blocks: usable size %zu\n", s, u);
        memset(p, 6, u);
        T_FREE(p);
    }
    /* Right after a freed block a little more than a quarter bigger, whose run waits
     * resident: the block takes that run, but only a fresh run's share of it. A run up
     * to a quarter bigger than the request rounded up to pages was given whole: 36,865
     * bytes got a freed 48 KiB run, 49,152 usable bytes. Sizes a byte past a page show
     * it best, as their rounding adds the most. */
    for (size_t s = 32 * 1024 + 1; s <= ((size_t)1 << 20); s += 3 * 4096) {
        for (size_t extra = s / 4 + 1; extra <= s / 3; extra += s / 12) {
            char *freed = T_MALLOC(s + extra);
            REQUIRE(freed);
            memset(freed, 7, s + extra);
            T_FREE(freed);
            char *p = T_MALLOC(s);
            REQUIRE(p);
            size_t u = T_MALLOC_USABLE_SIZE(p);
            CHECK(u >= s && u <= s + s / 4);
            if (u < s || u > s + s / 4)
                fprintf(stderr, "  malloc(%zu) after a freed %zu: usable size %zu\n", s, s + extra,
                        u);
            memset(p, 8, u);
            T_FREE(p);
        }
    }
    T_MALLOC_TRIM(0);
}

/* A realloc that changes a large block by a little keeps it where it is while its
 * usable size holds it (grows within it, or shrinks by at most a fifth): a block given a
 * whole reused run, which held more than a quarter over its request, moved to another
 * run and was copied at every such call (back and forth between two runs). Blocks in
 * reused runs now get a fresh run's share of them, which this checks too. */
static void large_realloc_by_a_little_stays(void)
{
    static const long deltas[] = {1, -2, 4, -8, 16, -32, 64, -128, 4096, -4096, 100, -3000};
    int roomy = 0, reused = 0;
    for (size_t s = 40 * 1024; s <= ((size_t)4 << 20); s = s * 3 / 2) {
        /* A freed run of twice the size waits: the block takes it, and may use less than a
         * quarter more than its request of it (the rest is the run's tail, which goes back
         * to the kernel if the block lives long). (Written to, so that the compiler keeps
         * the pair of calls.) */
        unsigned char *big = T_MALLOC(2 * s);
        REQUIRE(big);
        memset(big, 1, 2 * s);
        T_FREE(big);
        unsigned char *p = T_MALLOC(s);
        REQUIRE(p);
        size_t usable = T_MALLOC_USABLE_SIZE(p), n = s;
        roomy += usable > s + s / 4 + 4096;
        reused += p == big;
        if (usable > s + s / 4 + 4096)
            fprintf(stderr, "  a block of %zu bytes has %zu usable\n", s, usable);
        memset(p, 9, s);
        for (size_t i = 0; i < sizeof deltas / sizeof deltas[0]; i++) {
            size_t m = (size_t)((long)n + deltas[i]);
            if (m > usable)
                continue;
            unsigned char *q = T_REALLOC(p, m);
            REQUIRE(q);
            CHECK(q == p);
            if (q != p)
                fprintf(stderr, "  realloc(%zu -> %zu) of a block of %zu usable bytes moved\n", n,
                        m, usable);
            size_t kept = m < n ? m : n;
            CHECK(q[0] == 9 && q[kept - 1] == 9);
            memset(q, 9, m);
            p = q;
            n = m;
        }
        T_FREE(p);
    }
    /* The case it is about came up, and no block got more than a quarter over its request
     * (page rounding aside) from the bigger run. */
    CHECK(reused > 0 && roomy == 0);
}

/* A large block of the arenas that a realloc shrinks by at most a fifth of its request
 * stays where it is, whatever the pages the two sizes round to: by pages, a block of 17
 * pages shrunk by 19% (65,537 -> 53,000 bytes) to 13 pages was taken for a shrink by more
 * than a fifth and moved. Sizes from just above 40 KiB (whose four fifths are above 32 KiB,
 * still large) to 8 MiB, each shrunk to 4/5 of
 * its request rounded up, and a few bytes less than a fifth. */
static void large_realloc_shrink_by_a_fifth_stays(void)
{
    int moved = 0, tried = 0;
    for (size_t s = 40 * 1024 + 1; s <= ((size_t)8 << 20); s = s + s / 4 + 4097) {
        for (size_t less = 0; less <= 3; less += 3) {
            size_t m = s - s / 5 + less; /* at least 4/5 of s */
            unsigned char *p = T_MALLOC(s);
            REQUIRE(p);
            memset(p, 7, s);
            unsigned char *q = T_REALLOC(p, m);
            REQUIRE(q);
            tried++;
            if (q != p) {
                moved++;
                fprintf(stderr, "  realloc(%zu -> %zu) moved\n", s, m);
            }
            CHECK(q[0] == 7 && q[m / 2] == 7 && q[m - 1] == 7);
            T_FREE(q);
        }
    }
    printf("# shrinks by at most a fifth that moved: %d of %d\n", moved, tried);
    CHECK(tried > 0 && moved == 0);
}

/* Whether the address space or the data size is limited below 512 MiB (the suite's
 * ulimit -v and -d runs), for the tests that need more: said, and then they skip. */
static bool address_space_limited(void)
{
    static const int limits[] = {RLIMIT_AS, RLIMIT_DATA};
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
        struct rlimit limit;
        if (getrlimit(limits[i], &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
            limit.rlim_cur < ((rlim_t)512 << 20)) {
            printf("  skipped: %s is limited to %llu MiB\n",
                   limits[i] == RLIMIT_AS ? "the address space" : "the data size",
                   (unsigned long long)(limit.rlim_cur >> 20));
            return true;
        }
    }
    return false;
}

/* A block above 64 MiB (a mapping of its own) grown 256 KiB at a time to 128 MiB keeps
 * every byte it had: it grows where it is when the addresses after it are free, and is
 * remapped elsewhere when they are not. How often it moved depends on the kernel's
 * layout of the address space, so it is printed, not judged. */
static void mapped_block_grows_by_small_steps(void)
{
    /* It needs about 300 MiB of address space (a move maps the new block before the old
     * one goes): not under the suite's ulimit -v or -d of 128 MiB, which the rest meets. */
    if (address_space_limited())
        return;
    size_t n = ((size_t)64 << 20) + 4096, step = (size_t)256 << 10;
    unsigned char *p = T_MALLOC(n);
    REQUIRE(p);
    memset(p, 0x5c, n);
    size_t moves = 0, wrong = 0;
    for (size_t want = n + step; want <= ((size_t)128 << 20); want += step) {
        unsigned char *q = T_REALLOC(p, want);
        REQUIRE(q);
        moves += q != p;
        /* The old end and a page in the middle, each step; every byte at the end. */
        wrong += q[n - 1] != 0x5c || q[n / 2] != 0x5c || q[0] != 0x5c;
        memset(q + n, 0x5c, want - n);
        p = q;
        n = want;
    }
    for (size_t i = 0; i < n; i += 4096)
        wrong += p[i] != 0x5c;
    printf("  64 MiB to 128 MiB in 256 steps: %zu moves\n", moves);
    CHECK(wrong == 0);
    T_FREE(p);
}

static long minor_faults(void)
{
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt;
}

/* Whether the allocator is lfheap's debug build, whose usable size is the request (its
 * large blocks are copied, as memcheck's are). */
static bool debug_build(void)
{
    void *p = T_MALLOC(100);
    REQUIRE(p);
    bool exact = T_MALLOC_USABLE_SIZE(p) == 100;
    T_FREE(p);
    return exact;
}

/* A large block of the arenas from 2 MiB on that must move to grow takes its pages along
 * to a mapping of its own (mremap): they are neither copied nor faulted in again, and it
 * then grows where it is, a page at a time, as glibc's mapped blocks do. Its bytes stay;
 * a calloc block's new bytes are zeros, also those past its old request on its last page,
 * which the program may have written. The neighbour `wall` keeps the run from growing in
 * place. Under valgrind (which may refuse the call) and with the debug build the block is
 * copied: contents only. Run in a process of its own (below): the first free of such a
 * block raises the size from which blocks leave (src/heap.c, move_out_raise), so the
 * blocks live until both are checked. */
static void moves_out_in_a_fresh_process(void)
{
    bool moves_out = !RUNNING_ON_VALGRIND && !debug_build();
    size_t n = ((size_t)3 << 20) + 100, pages = n / 4096;
    unsigned char *grown[2], *walls[2];
    for (int zeroed = 0; zeroed < 2; zeroed++) {
        unsigned char *p = zeroed ? T_CALLOC(1, n) : T_MALLOC(n);
        unsigned char *wall = T_MALLOC(n);
        REQUIRE(p && wall);
        size_t usable = T_MALLOC_USABLE_SIZE(p);
        for (size_t i = 0; i < n; i++)
            p[i] = zeroed ? 0 : (unsigned char)(i * 7 + i / 4096);
        memset(p + n, 0xee, usable - n); /* usable, so the program may write it */
        long before = minor_faults();
        unsigned char *q = T_REALLOC(p, (size_t)12 << 20);
        long faults = minor_faults() - before;
        REQUIRE(q);
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            wrong += q[i] != (zeroed ? 0 : (unsigned char)(i * 7 + i / 4096));
        if (zeroed)
            for (size_t i = n; i < ((size_t)12 << 20); i++)
                wrong += q[i] != 0;
        CHECK(wrong == 0);
        printf("  %s of 3 MiB grown to 12 MiB: %ld page faults (%zu pages)\n",
               zeroed ? "calloc" : "malloc", faults, pages);
        if (moves_out)
            CHECK(faults < (long)pages / 8);
        /* Grown a page at a time to 20 MiB, it moves now and then, not at every page:
         * the kernel's layout decides where, so only a bound is checked. */
        size_t moves = 0, steps = 0;
        for (size_t want = ((size_t)12 << 20) + 4096; want <= ((size_t)20 << 20); want += 4096) {
            unsigned char *r = T_REALLOC(q, want);
            REQUIRE(r);
            moves += r != q;
            steps++;
            wrong += r[n - 1] != (zeroed ? 0 : (unsigned char)((n - 1) * 7 + (n - 1) / 4096));
            q = r;
        }
        printf("  then to 20 MiB by pages: %zu moves in %zu steps\n", moves, steps);
        CHECK(wrong == 0);
        if (moves_out)
            CHECK(moves < steps / 64);
        grown[zeroed] = q;
        walls[zeroed] = wall;
    }
    for (int i = 0; i < 2; i++) {
        T_FREE(grown[i]);
        T_FREE(walls[i]);
    }
}

/* Whether the mapping that holds `addr` is locked in memory ("lo" among its VmFlags in
 * /proc/self/smaps); false if it cannot tell. */
static bool mapping_locked(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return false;
    char line[512];
    bool inside = false, locked = false;
    while (fgets(line, sizeof line, f)) {
        unsigned long from, to;
        if (sscanf(line, "%lx-%lx ", &from, &to) == 2 && strchr(line, ':') != line)
            inside = (uintptr_t)addr >= from && (uintptr_t)addr < to;
        else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            locked = strstr(line, " lo") != NULL;
            break;
        }
    }
    fclose(f);
    return locked;
}

/* A process that locked its memory: the kernel would unlock the whole mapping a block's
 * pages leave by mremap (the arena), so the block is copied instead and its neighbours
 * stay locked. Skipped where mlockall is refused (no CAP_IPC_LOCK, a small
 * RLIMIT_MEMLOCK) or locks nothing. */
static void locked_memory_stays_locked(void)
{
    if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
        printf("  skipped: mlockall refused (%s)\n", strerror(errno));
        return;
    }
    size_t n = ((size_t)3 << 20) + 100;
    unsigned char *p = T_MALLOC(n), *wall = T_MALLOC(n);
    REQUIRE(p && wall);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + i / 4096);
    if (!mapping_locked(wall)) {
        /* AddressSanitizer's mlockall does nothing. */
        printf("  skipped: mlockall locked nothing\n");
        T_FREE(p);
        T_FREE(wall);
        return;
    }
    unsigned char *q = T_REALLOC(p, (size_t)12 << 20);
    REQUIRE(q);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += q[i] != (unsigned char)(i * 7 + i / 4096);
    CHECK(wrong == 0);
    CHECK(mapping_locked(wall));
    T_FREE(q);
    T_FREE(wall);
    munlockall();
}

#if defined(__x86_64__)
static volatile sig_atomic_t opens_trapped;

/* SIGSYS from the filter below: the open fails with EACCES, as in OpenSSH's sandbox, and
 * is counted. */
static void open_trapped(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)info;
    ((ucontext_t *)context)->uc_mcontext.gregs[REG_RAX] = -EACCES;
    opens_trapped++;
}

/* A seccomp filter that traps open and openat: false (and why, printed) if the kernel or
 * the process refuses one. */
static bool sandbox_without_opens(void)
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_open, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
    };
    struct sock_fprog program = {.len = sizeof filter / sizeof filter[0], .filter = filter};
    struct sigaction action = {.sa_sigaction = open_trapped, .sa_flags = SA_SIGINFO};
    REQUIRE(sigaction(SIGSYS, &action, NULL) == 0);
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        printf("  skipped: no seccomp filter (%s)\n", strerror(errno));
        return false;
    }
    return true;
}
#endif

/* A sandboxed process (a seccomp filter that refuses or kills on open, as a program may
 * install once it opened what it needs) grows a large block as any other: lfheap opens no
 * file on the way (it read /proc/self/status there once, which such a filter kills), and
 * the block still moves out. */
static void sandboxed_realloc_opens_nothing(void)
{
#if defined(__x86_64__)
    bool moves_out = !debug_build();
    size_t n = ((size_t)3 << 20) + 100, pages = n / 4096;
    unsigned char *p = T_MALLOC(n), *wall = T_MALLOC(n);
    REQUIRE(p && wall);
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 7 + i / 4096);
    if (!sandbox_without_opens()) {
        T_FREE(p);
        T_FREE(wall);
        return;
    }
    long before = minor_faults();
    unsigned char *q = T_REALLOC(p, (size_t)12 << 20);
    long faults = minor_faults() - before;
    REQUIRE(q);
    CHECK(opens_trapped == 0);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += q[i] != (unsigned char)(i * 7 + i / 4096);
    CHECK(wrong == 0);
    printf("  3 MiB grown to 12 MiB in the sandbox: %ld page faults (%zu pages)\n", faults, pages);
    if (moves_out)
        CHECK(faults < (long)pages / 8);
    /* The filter does catch an open. */
    errno = 0;
    CHECK(open("/proc/self/status", O_RDONLY) == -1 && errno == EACCES);
    CHECK(opens_trapped == 1);
    T_FREE(q);
    T_FREE(wall);
#else
    printf("  skipped: the filter is written for x86-64\n");
#endif
}

static const char *program_path;

/* Runs this program again with `mode` (main) in a child: a process of its own. */
static void run_fresh(const char *mode)
{
    fflush(stdout);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        /* One report at exit per run of the program (the suite counts them). */
        unsetenv("LFHEAP_STATS");
        /* No purge: its batch may read /proc/thread-self/status (docs/GUARANTEES.md), an
         * open the sandboxed mode would count against the realloc. */
        setenv("LFHEAP_PURGE_MS", "60000", 1);
        execl("/proc/self/exe", program_path, mode, (char *)NULL);
        _exit(127);
    }
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void large_block_moves_its_pages_out(void)
{
    if (address_space_limited())
        return;
    /* Under valgrind /proc/self/exe is valgrind's own program; the checks there are of
     * the contents only, which need no fresh process. */
    if (RUNNING_ON_VALGRIND) {
        moves_out_in_a_fresh_process();
        return;
    }
    run_fresh("move-out");
    run_fresh("move-out-locked");
    run_fresh("move-out-sandboxed");
}

/* Hides where a pointer came from, so that the compiler does not take the interior
 * pointers below for the block itself (it warns about a use after realloc otherwise). */
static void *opaque(void *ptr)
{
    __asm__ volatile("" : "+r"(ptr));
    return ptr;
}

/* free, realloc and malloc_usable_size of an address inside a block (not its start)
 * must leave lfheap untouched: nothing is freed, and no later block overlaps the live one. */
static void interior_pointers_are_ignored(void)
{
    static const size_t sizes[] = {16, 48, 100, 1000, 5000, 40000, 200000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t s = sizes[i];
        unsigned char *p = T_MALLOC(s);
        REQUIRE(p);
        memset(p, 0xA5, s);
        size_t u = T_MALLOC_USABLE_SIZE(p);
        for (size_t off = 1; off < s; off += off < 64 ? 1 : off) {
            CHECK(T_MALLOC_USABLE_SIZE(opaque(p + off)) == 0);
            errno = 0;
            CHECK(T_REALLOC(opaque(p + off), s * 2) == NULL && errno == EINVAL);
            errno = 0;
            CHECK(T_REALLOC(opaque(p + off), zero) == NULL && errno == EINVAL);
            T_FREE(opaque(p + off));
        }
        enum { N = 64 };
        unsigned char *q[N];
        for (int j = 0; j < N; j++) {
            q[j] = T_MALLOC(s);
            REQUIRE(q[j]);
            CHECK(q[j] + s <= p || q[j] >= p + u);
            memset(q[j], 0x5A, s);
        }
        size_t bad = 0;
        for (size_t k = 0; k < s; k++)
            bad += p[k] != 0xA5;
        CHECK(bad == 0);
        for (int j = 0; j < N; j++)
            T_FREE(q[j]);
        T_FREE(p);
    }
}

/* Whether `ptr` is refused as a block the program does not hold: malloc_usable_size says
 * 0, realloc fails with EINVAL (also to 0 bytes, which would free a live block), free
 * ignores it. */
static void refused_at(uintptr_t addr)
{
    void *ptr = (void *)addr;
    CHECK(T_MALLOC_USABLE_SIZE(opaque(ptr)) == 0);
    errno = 0;
    CHECK(T_REALLOC(opaque(ptr), 64) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(T_REALLOC(opaque(ptr), zero) == NULL && errno == EINVAL);
    T_FREE(opaque(ptr));
}

/* After refusals, the heap still hands out distinct blocks: `n` blocks of `size`, each
 * filled with its own byte, all intact once all are allocated, none equal to `avoid`
 * (a block the caller still holds, or NULL). */
static void blocks_stay_distinct(size_t size, const void *avoid)
{
    enum { N = 8 };
    unsigned char *b[N];
    for (int i = 0; i < N; i++) {
        b[i] = T_MALLOC(size);
        REQUIRE(b[i]);
        CHECK(b[i] != avoid);
        memset(b[i], 0x30 + i, size);
    }
    for (int i = 0; i < N; i++) {
        size_t bad = 0;
        for (size_t k = 0; k < size; k++)
            bad += b[i][k] != 0x30 + i;
        CHECK(bad == 0);
        for (int j = 0; j < i; j++)
            CHECK(b[i] != b[j]);
    }
    for (int i = 0; i < N; i++)
        T_FREE(b[i]);
}

/* Addresses lfheap never handed out: the stack, a global. */
static void foreign_addresses_are_refused(void)
{
    static char global[64];
    char on_stack[64];
    refused_at((uintptr_t)on_stack);
    refused_at((uintptr_t)global);
    blocks_stay_distinct(64, NULL);
}

static const size_t refusal_sizes[] = {16, 100, 1000, 5000, 20000, 40000, 200000, 3u << 20};

/* A block freed twice: the second free is ignored wherever the block waits, in the
 * freeing thread's cache, back in its superblock after a trim, or, for a large block,
 * gone from the page map. */
static void double_frees_are_ignored(void)
{
    for (size_t i = 0; i < sizeof refusal_sizes / sizeof *refusal_sizes; i++) {
        size_t s = refusal_sizes[i];
        void *p = T_MALLOC(s);
        REQUIRE(p);
        uintptr_t freed = (uintptr_t)p;
        T_FREE(p);
        refused_at(freed);
        blocks_stay_distinct(s, NULL);
        void *q = T_MALLOC(s);
        REQUIRE(q);
        freed = (uintptr_t)q;
        T_FREE(q);
        T_MALLOC_TRIM(0);
        refused_at(freed);
        blocks_stay_distinct(s, NULL);
    }
}

static void *free_twice(void *ptr)
{
    uintptr_t freed = (uintptr_t)ptr;
    T_FREE(ptr);
    refused_at(freed);
    return NULL;
}

/* The same from a thread that does not own the block: its second free finds the block
 * waiting in its buffer of remote frees. */
static void remote_double_frees_are_ignored(void)
{
    for (size_t i = 0; i < sizeof refusal_sizes / sizeof *refusal_sizes; i++) {
        size_t s = refusal_sizes[i];
        void *p = T_MALLOC(s);
        REQUIRE(p);
        uintptr_t freed = (uintptr_t)p;
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, free_twice, p) == 0);
        REQUIRE(pthread_join(t, NULL) == 0);
        refused_at(freed);
        blocks_stay_distinct(s, NULL);
    }
}

/* The block starts after a thread's first block of a size class no other code uses are
 * never handed out (blocks are carved in address order): each is refused, and the heap
 * does not hand out a block twice afterwards. */
static void *uncarved_slots(void *unused)
{
    (void)unused;
    enum { SIZE = 7000 };
    unsigned char *p = T_MALLOC(SIZE);
    REQUIRE(p);
    size_t u = T_MALLOC_USABLE_SIZE(p);
    REQUIRE(u >= SIZE);
    for (size_t k = 1; k <= 3; k++)
        refused_at((uintptr_t)(p + k * u));
    blocks_stay_distinct(SIZE, p);
    T_FREE(p);
    return NULL;
}

static void uncarved_slots_are_ignored(void)
{
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, uncarved_slots, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
}

/* A block freed by a thread that then exits, freed again by another thread: the second
 * free is refused like any double free. The exiting thread's cache is orphaned, and the
 * orphan's copy once lived in a heap block, the one the thread freed last when its size
 * class matched: the second free then freed the orphan under its adopter, and a later
 * malloc handed a block out twice. Every class from 16 bytes to 8 KiB is tried. */
static void *free_and_exit(void *block)
{
    T_FREE(block);
    return NULL;
}

static void double_free_after_the_freeing_thread_exited(void)
{
    enum { N = 16 };
    for (size_t size = 16; size <= 8192; size += size / 8) {
        void *p = T_MALLOC(size);
        REQUIRE(p);
        pthread_t t;
        REQUIRE(pthread_create(&t, NULL, free_and_exit, p) == 0);
        REQUIRE(pthread_join(t, NULL) == 0);
        refused_at((uintptr_t)p);
        /* a new thread adopts the orphan; then blocks of the size must all be distinct */
        REQUIRE(pthread_create(&t, NULL, free_and_exit, T_MALLOC(size)) == 0);
        REQUIRE(pthread_join(t, NULL) == 0);
        unsigned char *b[N];
        for (int i = 0; i < N; i++) {
            b[i] = T_MALLOC(size);
            REQUIRE(b[i]);
            memset(b[i], i, size);
        }
        for (int i = 0; i < N; i++) {
            CHECK(b[i][0] == i && b[i][size - 1] == i);
            for (int j = 0; j < i; j++)
                CHECK(b[i] != b[j]);
        }
        for (int i = 0; i < N; i++)
            T_FREE(b[i]);
    }
}

/* A write into a freed block's second word (where the free mark is) and then a second
 * free of it: the mark cannot tell, and the block goes onto the cache's list twice, a
 * cycle. Walks of a list follow the cache's count, not the links, so the flushes that
 * follow return (they followed the cycle forever); the release build leaves a list it
 * finds corrupted where it is. Not under memcheck,
 * which rightly reports the write. */
static void double_free_after_a_write_into_the_block_returns(void)
{
    for (size_t size = 16; size <= 4096; size *= 4) {
        uint64_t *p = T_MALLOC(size);
        REQUIRE(p);
        uint64_t *alias = opaque(p); /* the compiler must not see the use after free */
        T_FREE(p);
        ((volatile uint64_t *)alias)[1] = 0;
        T_FREE(alias);
        enum { N = 5000 };
        static void *more[N];
        for (int i = 0; i < N; i++)
            REQUIRE(more[i] = T_MALLOC(size));
        for (int i = 0; i < N; i++)
            T_FREE(more[i]);
        /* the heap still serves other sizes with distinct, intact blocks */
        enum { M = 64 };
        unsigned char *b[M];
        for (int i = 0; i < M; i++) {
            b[i] = T_MALLOC(size * 2 + 24);
            REQUIRE(b[i]);
            memset(b[i], i, size * 2 + 24);
        }
        for (int i = 0; i < M; i++) {
            CHECK(b[i][0] == i && b[i][size * 2 + 23] == i);
            for (int j = 0; j < i; j++)
                CHECK(b[i] != b[j]);
        }
        for (int i = 0; i < M; i++)
            T_FREE(b[i]);
    }
}

/* The same double free, then the sweeps of idle classes (tcache.c, halve_list): the
 * purge ticks that another class's frees take find the corrupted list unchanged and
 * halve it. A cut at the block linked to itself gave back the block the kept half still
 * held, so the superblock counted it twice (the checks stop the program at the trim's
 * flush; without them it could hand the block out twice). The list stays where it is,
 * and the heap goes on serving intact, distinct blocks. */
static void idle_sweeps_leave_a_corrupted_list(void)
{
    enum { SIZE = 48, OTHER = 80, TICKS = 4 };
    uint64_t *p = T_MALLOC(SIZE);
    REQUIRE(p);
    uint64_t *alias = opaque(p);
    T_FREE(p);
    ((volatile uint64_t *)alias)[1] = 0;
    T_FREE(alias);
    for (long i = 0; i < TICKS * 65536L; i++) {
        void *q = T_MALLOC(OTHER);
        REQUIRE(q);
        T_FREE(q);
    }
    T_MALLOC_TRIM(0);
    blocks_stay_distinct(SIZE, NULL);
    blocks_stay_distinct(OTHER, NULL);
}

/* Every block of some superblocks freed and the cache trimmed, so that the superblocks
 * empty and their pages go back: their blocks are refused too. */
static void blocks_of_emptied_superblocks_are_ignored(void)
{
    enum { N = 600, SIZE = 900 };
    static uintptr_t blocks[N];
    for (int i = 0; i < N; i++) {
        void *p = T_MALLOC(SIZE);
        REQUIRE(p);
        blocks[i] = (uintptr_t)p;
    }
    for (int i = 0; i < N; i++)
        T_FREE((void *)blocks[i]);
    T_MALLOC_TRIM(0);
    for (int i = 0; i < N; i += 7)
        refused_at(blocks[i]);
    blocks_stay_distinct(SIZE, NULL);
}

/* A thread that frees many small blocks and exits: the superblocks its hand-back empties
 * return to the arena dirty, their freed blocks' bytes as they were left. */
static void *free_small_blocks_and_exit(void *unused)
{
    enum { N = 32768, SIZE = 64 };
    static void *blocks[N];
    for (int i = 0; i < N; i++) {
        blocks[i] = T_MALLOC(SIZE);
        REQUIRE(blocks[i]);
        memset(blocks[i], 0x5a, SIZE);
    }
    for (int i = 0; i < N; i++)
        T_FREE(blocks[i]);
    return unused;
}

/* realloc copies every byte of a block, also those the program never wrote: a large
 * block in a chunk that small blocks used before holds what they left (the free marks of
 * freed blocks among it), and the small block realloc copies it into must stay a live
 * block for realloc, free and malloc_usable_size. */
static void copies_of_stale_bytes_stay_live_blocks(void)
{
    enum { N = 64, LARGE = 40 * 1024 };
    static uint64_t *moved[N];
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_small_blocks_and_exit, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    size_t refused = 0;
    for (int i = 0; i < N; i++) {
        uint64_t *large = T_MALLOC(LARGE);
        REQUIRE(large);
        large[0] = (uint64_t)i; /* the rest is whatever the chunk held */
        uint64_t *small = T_REALLOC(large, 100);
        REQUIRE(small);
        refused += T_MALLOC_USABLE_SIZE(small) < 100;
        moved[i] = T_REALLOC(small, 200);
        REQUIRE(moved[i]);
        CHECK(moved[i][0] == (uint64_t)i);
    }
    CHECK(refused == 0);
    for (int i = 0; i < N; i++)
        T_FREE(moved[i]);
    blocks_stay_distinct(100, NULL);
}

/* A block at the first address of a chunk where small blocks were freed gets, where the
 * program never wrote, the free mark of the block freed there. Moved away (no mark
 * there) and back to a new block at that address, by realloc (`by_realloc`) or by the
 * program's own copies (which move the bytes it never wrote too), the word used to be a
 * valid mark again: the new block passed for freed (free ignored it, realloc refused it,
 * malloc_usable_size said 0). The program writes every byte but that word. Returns the
 * blocks refused; prints how many came back to their first address. */
static size_t chains_home(bool by_realloc)
{
    enum { ROUNDS = 64, LARGE = 64 * 1024, MIDDLE = 16353, SMALL = 4096 };
    pthread_t t;
    REQUIRE(pthread_create(&t, NULL, free_small_blocks_and_exit, NULL) == 0);
    REQUIRE(pthread_join(t, NULL) == 0);
    size_t refused = 0, came_home = 0;
    for (int i = 0; i < ROUNDS; i++) {
        unsigned char *large = T_MALLOC(LARGE), *middle, *small;
        REQUIRE(large);
        memset(large, i, sizeof(uint64_t));
        memset(large + 2 * sizeof(uint64_t), i, LARGE - 2 * sizeof(uint64_t));
        if (by_realloc) {
            middle = T_REALLOC(large, MIDDLE);
            REQUIRE(middle);
            small = T_REALLOC(middle, SMALL);
            REQUIRE(small);
        } else {
            middle = T_MALLOC(MIDDLE);
            REQUIRE(middle);
            memcpy(middle, large, MIDDLE);
            T_FREE(large);
            small = T_MALLOC(SMALL);
            REQUIRE(small);
            memcpy(small, middle, SMALL);
            T_FREE(middle);
        }
        came_home += small == large;
        refused += T_MALLOC_USABLE_SIZE(small) < SMALL;
        CHECK(small[0] == (unsigned char)i && small[16] == (unsigned char)i &&
              small[SMALL - 1] == (unsigned char)i);
        unsigned char *again = T_REALLOC(small, SMALL + 1);
        CHECK(again != NULL);
        T_FREE(again ? again : small);
    }
    printf("# %s: back at their first address %zu of %d, refused %zu\n",
           by_realloc ? "realloc" : "copies", came_home, ROUNDS, refused);
    blocks_stay_distinct(SMALL, NULL);
    return refused;
}

/* Each chain in a child of its own, which starts from the same heap (the first chain in
 * a process is the one whose block comes home). Not the copies under valgrind: memcheck
 * reports free's compare of the copied word, which is undefined for it. */
static void stale_marks_brought_home_stay_live_blocks(void)
{
    for (int by_realloc = 0; by_realloc < 2; by_realloc++) {
        if (!by_realloc && RUNNING_ON_VALGRIND)
            continue;
        fflush(stdout);
        pid_t child = fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            int failures_before = test_failures;
            size_t refused = chains_home(by_realloc);
            fflush(stdout);
            _exit(refused == 0 && test_failures == failures_before ? 0 : 1);
        }
        int status;
        REQUIRE(waitpid(child, &status, 0) == child);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* errno as the program left it after every call that succeeds, as glibc leaves it: the
 * system calls lfheap gets over on the way (a mapped block that cannot grow where it is
 * and moves, a refused decommit or unmap) are not the program's errors. Before, a realloc
 * that moved a mapped block showed ENOMEM from the refused growth. Blocks of every kind,
 * and mapped ones only where the address space has room (the ulimit runs skip them). */
#define ERRNO_SENTINEL 4321
static int errno_changed;

static void *kept_errno(void *result)
{
    errno_changed += result != NULL && errno != ERRNO_SENTINEL;
    errno = ERRNO_SENTINEL;
    return result;
}

static void freed_keeps_errno(void *p)
{
    T_FREE(p);
    errno_changed += errno != ERRNO_SENTINEL;
    errno = ERRNO_SENTINEL;
}

static void successful_calls_leave_errno(void)
{
    errno_changed = 0;
    errno = ERRNO_SENTINEL;
    /* A call refused for want of room (the ulimit runs) is no success: skipped. */
    int granted = 0;
    for (size_t size = 1; size <= ((size_t)8 << 20); size = size * 2 + 7) {
        char *p = kept_errno(T_MALLOC(size));
        char *z = kept_errno(T_CALLOC(1, size));
        errno = ERRNO_SENTINEL;
        if (p) {
            memset(p, 1, size);
            char *grown = kept_errno(T_REALLOC(p, size * 3 + 1));
            p = grown ? grown : p;
            char *shrunk = kept_errno(T_REALLOC(p, size / 2 + 1));
            p = shrunk ? shrunk : p;
            granted++;
        }
        void *aligned = NULL;
        if (T_POSIX_MEMALIGN(&aligned, size < 4096 ? 64 : 4096, size) == 0)
            errno_changed += errno != ERRNO_SENTINEL;
        errno = ERRNO_SENTINEL;
        freed_keeps_errno(aligned);
        freed_keeps_errno(p);
        freed_keeps_errno(z);
    }
    /* Two mapped blocks, the second usually placed right below the first by the kernel,
     * so that growing it must move it. */
    size_t mapped = (size_t)96 << 20;
    char *first = T_MALLOC(mapped);
    char *second = first ? T_MALLOC(mapped) : NULL;
    errno = ERRNO_SENTINEL;
    if (second) {
        second[0] = 2;
        char *grown = kept_errno(T_REALLOC(second, 2 * mapped));
        if (grown) {
            CHECK(grown[0] == 2);
            second = grown;
        }
        grown = kept_errno(T_REALLOC(first, 2 * mapped + 4096));
        if (grown)
            first = grown;
    }
    freed_keeps_errno(second);
    freed_keeps_errno(first);
    T_MALLOC_TRIM(0);
    errno_changed += errno != ERRNO_SENTINEL;
    CHECK(errno_changed == 0);
    CHECK(granted >= 10); /* the ten sizes up to 4 KiB at least, under any limit of the suite */
}

static void blocks_do_not_overlap(void)
{
    enum { N = 5000 };
    static unsigned char *ptrs[N];
    static size_t sizes[N];
    unsigned seed = 42;
    for (int i = 0; i < N; i++) {
        seed = seed * 1103515245u + 12345u;
        sizes[i] = (seed >> 8) % 3000 + 1;
        ptrs[i] = T_MALLOC(sizes[i]);
        REQUIRE(ptrs[i]);
        memset(ptrs[i], (unsigned char)i, sizes[i]);
    }
    for (int i = 0; i < N; i++) {
        size_t bad = 0;
        for (size_t k = 0; k < sizes[i]; k++)
            bad += ptrs[i][k] != (unsigned char)i;
        CHECK(bad == 0);
        T_FREE(ptrs[i]);
    }
}

/* `test_api errno`: the errno test alone, and the errno of the process's first calls,
 * which read lfheap's settings (core.sh runs it with a purge delay past LONG_MAX, which
 * strtol once answered with ERANGE left in errno); with no file descriptor to spare, so
 * that a file lfheap opens (/proc/sys/vm/max_map_count in the secure build) is refused
 * inside it (secure.sh). */
static void successful_calls_leave_errno_without_descriptors(void)
{
#ifdef TEST_PLAIN
    CHECK(test_first_call_errno == 0); /* testutil.h: the process's first malloc and free */
#endif
    struct rlimit files;
    REQUIRE(getrlimit(RLIMIT_NOFILE, &files) == 0);
    struct rlimit none = {.rlim_cur = 0, .rlim_max = files.rlim_max};
    REQUIRE(setrlimit(RLIMIT_NOFILE, &none) == 0);
    successful_calls_leave_errno();
    REQUIRE(setrlimit(RLIMIT_NOFILE, &files) == 0);
}

int main(int argc, char **argv)
{
    program_path = argv[0];
    if (argc > 1 && strcmp(argv[1], "move-out") == 0) {
        RUN(moves_out_in_a_fresh_process);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "move-out-locked") == 0) {
        RUN(locked_memory_stays_locked);
        return test_exit_status();
    }
    if (argc > 1 && strcmp(argv[1], "move-out-sandboxed") == 0) {
        RUN(sandboxed_realloc_opens_nothing);
        /* Without the exit handlers: AddressSanitizer's leak check reads /proc, which the
         * filter refuses, and waits for ever. */
        fflush(stdout);
        _exit(test_exit_status());
    }
    if (argc > 1 && strcmp(argv[1], "errno") == 0) {
        RUN(successful_calls_leave_errno_without_descriptors);
        return test_exit_status();
    }
    RUN(malloc_zero_is_unique);
    RUN(too_large_fails_with_enomem);
    RUN(every_block_is_16_aligned);
    RUN(calloc_zeroes);
    RUN(calloc_zeroes_sparsely_used_runs);
    RUN(realloc_semantics);
    RUN(realloc_chains_keep_contents);
    RUN(realloc_keeps_every_usable_byte);
    RUN(calloc_block_regrows_zeroed);
    RUN(calloc_zeroes_reused_blocks);
    RUN(calloc_zeroes_fresh_blocks);
    RUN(calloc_zeroes_the_usable_size);
    RUN(failed_realloc_keeps_block);
    RUN(posix_memalign_semantics);
    RUN(aligned_alloc_and_memalign);
    RUN(usable_size_and_free_edge_cases);
    RUN(power_of_two_plus_header_wastes_an_eighth);
    RUN(large_blocks_hold_at_most_a_quarter_more);
    RUN(large_realloc_by_a_little_stays);
    RUN(large_realloc_shrink_by_a_fifth_stays);
    RUN(mapped_block_grows_by_small_steps);
    RUN(large_block_moves_its_pages_out);
    RUN(interior_pointers_are_ignored);
    RUN(foreign_addresses_are_refused);
    RUN(uncarved_slots_are_ignored);
    RUN(double_frees_are_ignored);
    RUN(remote_double_frees_are_ignored);
    RUN(double_free_after_the_freeing_thread_exited);
    if (!RUNNING_ON_VALGRIND)
        RUN(double_free_after_a_write_into_the_block_returns);
    if (!RUNNING_ON_VALGRIND)
        RUN(idle_sweeps_leave_a_corrupted_list);
    RUN(blocks_of_emptied_superblocks_are_ignored);
    RUN(copies_of_stale_bytes_stay_live_blocks);
    RUN(stale_marks_brought_home_stay_live_blocks);
    RUN(blocks_do_not_overlap);
    RUN(successful_calls_leave_errno);
    return test_exit_status();
}
