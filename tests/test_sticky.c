/*
 * llheap's extended API and sticky properties (docs/API.md, "Sticky properties"): the
 * array and aligned-array routines, resize and aligned_resize, aligned_realloc, the
 * queries malloc_size, malloc_alignment and malloc_zero_fill, and what realloc keeps. A
 * model check drives random chains of reallocations through small, large and huge blocks
 * and compares every block with what the properties promise.
 */
#include "lfheap.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

static int all_bytes(const unsigned char *p, size_t from, size_t to, unsigned char value)
{
    for (size_t i = from; i < to; i++)
        if (p[i] != value)
            return 0;
    return 1;
}

static int aligned_to(const void *p, size_t align)
{
    return ((uintptr_t)p & (align - 1)) == 0;
}

static void array_routines(void)
{
    unsigned char *a = lfh_aalloc(5, 20);
    REQUIRE(a);
    CHECK(lfh_malloc_size(a) == 100 && lfh_malloc_alignment(a) == 16 && !lfh_malloc_zero_fill(a));
    CHECK(lfh_malloc_usable_size(a) >= 100);
    unsigned char *am = lfh_amemalign(128, 7, 9);
    REQUIRE(am);
    CHECK(aligned_to(am, 128) && lfh_malloc_size(am) == 63 && lfh_malloc_alignment(am) == 128);
    CHECK(!lfh_malloc_zero_fill(am));
    unsigned char *cm = lfh_cmemalign(64, 10, 30);
    REQUIRE(cm);
    CHECK(aligned_to(cm, 64) && lfh_malloc_size(cm) == 300 && lfh_malloc_zero_fill(cm));
    CHECK(all_bytes(cm, 0, 300, 0));
    /* large and page-aligned */
    unsigned char *big = lfh_cmemalign(8192, 1000, 100);
    REQUIRE(big);
    CHECK(aligned_to(big, 8192) && lfh_malloc_size(big) == 100000 && lfh_malloc_zero_fill(big));
    CHECK(all_bytes(big, 0, 100000, 0));
    /* zero-size arrays are unique blocks, like malloc(0) */
    void *z1 = lfh_aalloc(0, 8), *z2 = lfh_aalloc(8, 0);
    CHECK(z1 && z2 && z1 != z2 && lfh_malloc_size(z1) == 0);
    /* overflow and bad alignments */
    errno = 0;
    CHECK(lfh_aalloc(SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(lfh_cmemalign(64, SIZE_MAX, 2) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(lfh_amemalign(48, 1, 1) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(lfh_cmemalign(0, 1, 1) == NULL && errno == EINVAL);
    errno = 0;
    CHECK(lfh_aalloc((size_t)PTRDIFF_MAX, 2) == NULL && errno == ENOMEM);
    lfh_free(a);
    lfh_free(am);
    lfh_free(cm);
    lfh_free(big);
    lfh_free(z1);
    lfh_free(z2);
}

static void queries(void)
{
    CHECK(lfh_malloc_size(NULL) == 0 && lfh_malloc_alignment(NULL) == 0);
    CHECK(!lfh_malloc_zero_fill(NULL));
    int on_stack;
    CHECK(lfh_malloc_size(&on_stack) == 0 && lfh_malloc_alignment(&on_stack) == 0);
    /* plain malloc keeps no record for small blocks: the usable size stands in */
    void *p = lfh_malloc(100);
    REQUIRE(p);
    CHECK(lfh_malloc_size(p) == lfh_malloc_usable_size(p));
    CHECK(lfh_malloc_alignment(p) == 16 && !lfh_malloc_zero_fill(p));
    /* an interior pointer is not a block */
    CHECK(lfh_malloc_size((char *)p + 16) == 0);
    lfh_free(p);
    /* large blocks always know their request size */
    void *l = lfh_malloc(100000);
    REQUIRE(l);
    CHECK(lfh_malloc_size(l) == 100000 && lfh_malloc_alignment(l) == 16);
    lfh_free(l);
    /* every routine with a record reports the request, never above the usable size */
    for (size_t s = 0; s < 300000; s = s * 3 / 2 + 1) {
        void *c = lfh_calloc(1, s), *m = lfh_memalign(32, s), *v = lfh_valloc(s);
        void *a = lfh_aligned_alloc(256, s);
        REQUIRE(c && m && v && a);
        CHECK(lfh_malloc_size(c) == s && lfh_malloc_zero_fill(c) && lfh_malloc_alignment(c) == 16);
        CHECK(lfh_malloc_size(m) == s && lfh_malloc_alignment(m) == 32 && aligned_to(m, 32));
        CHECK(lfh_malloc_size(v) == s && lfh_malloc_alignment(v) == 4096 && aligned_to(v, 4096));
        CHECK(lfh_malloc_size(a) == s && lfh_malloc_alignment(a) == 256 && aligned_to(a, 256));
        CHECK(lfh_malloc_usable_size(c) >= s && lfh_malloc_usable_size(m) >= s);
        CHECK(lfh_malloc_usable_size(v) >= s && lfh_malloc_usable_size(a) >= s);
        void *pm;
        REQUIRE(lfh_posix_memalign(&pm, 64, s) == 0);
        CHECK(lfh_malloc_alignment(pm) == 64 && lfh_malloc_size(pm) == s);
        /* alignments up to the minimum are the minimum, with the exact request (their
         * own fast path, like calloc's) */
        void *small_align = lfh_memalign(4, s);
        REQUIRE(small_align);
        CHECK(lfh_malloc_alignment(small_align) == 16 && lfh_malloc_size(small_align) == s);
        void *pm16;
        REQUIRE(lfh_posix_memalign(&pm16, 16, s) == 0);
        CHECK(lfh_malloc_alignment(pm16) == 16 && lfh_malloc_size(pm16) == s);
        CHECK(!lfh_malloc_zero_fill(pm16) && aligned_to(pm16, 16));
        unsigned char *cm8 = lfh_cmemalign(8, 1, s);
        REQUIRE(cm8);
        CHECK(lfh_malloc_size(cm8) == s && lfh_malloc_zero_fill(cm8) && all_bytes(cm8, 0, s, 0));
        lfh_free(pm16);
        lfh_free(cm8);
        lfh_free(c);
        lfh_free(m);
        lfh_free(v);
        lfh_free(a);
        lfh_free(pm);
        lfh_free(small_align);
    }
}

/* Zero fill survives growth in place, growth by moving, and shrink-then-grow in place
 * (where the bytes beyond the shrunk size still hold old data). */
static void zero_fill_growth(void)
{
    /* small, in place: 100 -> 60 stays in its 112-byte block, then back to 100 */
    unsigned char *p = lfh_calloc(1, 100);
    REQUIRE(p);
    memset(p, 0xAB, 100);
    unsigned char *q = lfh_realloc(p, 60);
    CHECK(q == p);
    q = lfh_realloc(q, 100);
    CHECK(q == p && all_bytes(q, 0, 60, 0xAB) && all_bytes(q, 60, 100, 0));
    CHECK(lfh_malloc_size(q) == 100 && lfh_malloc_zero_fill(q));
    /* growth through every kind of block, each step checking old bytes and new zeros */
    static const size_t steps[] = {100,      3000,    40000, 5 << 20, 70 << 20,
                                   90 << 20, 2 << 20, 500,   9000};
    size_t have = 100;
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        size_t want = steps[i];
        memset(q, 0x5C, have);
        q = lfh_realloc(q, want);
        REQUIRE(q);
        size_t kept = have < want ? have : want;
        CHECK(all_bytes(q, 0, kept, 0x5C));
        CHECK(all_bytes(q, kept, want, 0));
        CHECK(lfh_malloc_size(q) == want && lfh_malloc_zero_fill(q));
        have = want;
    }
    lfh_free(q);
    /* large, in place: a block in a run of 1 MiB shrunk to 900 KiB (the run then holds
     * at most a quarter more) and grown back (not the whole run, so that the debug
     * build's canary fits too); malloc_trim first, so that no bigger freed run waits */
    lfh_malloc_trim(0);
    size_t full = 1000 * 1000;
    unsigned char *l = lfh_calloc(1000, 1000);
    REQUIRE(l);
    memset(l, 0xAB, full);
    unsigned char *l2 = lfh_realloc(l, 900 << 10);
    CHECK(l2 == l);
    l2 = lfh_realloc(l2, full);
    CHECK(l2 == l && all_bytes(l2, 0, 900 << 10, 0xAB) && all_bytes(l2, 900 << 10, full, 0));
    lfh_free(l2);
    /* reallocarray keeps it too */
    unsigned char *r = lfh_calloc(10, 10);
    REQUIRE(r);
    memset(r, 1, 100);
    r = lfh_reallocarray(r, 50, 10);
    REQUIRE(r);
    CHECK(all_bytes(r, 0, 100, 1) && all_bytes(r, 100, 500, 0) && lfh_malloc_zero_fill(r));
    lfh_free(r);
}

/* A zero-filled block that moves reads as zeros over its whole usable size past the
 * bytes it kept, as calloc clears it, also when the block it moves to is one another
 * block left filled: the bytes past the new request once showed the old tenant's (72
 * bytes of them after calloc(100) and realloc to 3000). Small, large, and through
 * aligned_realloc; the blocks of the target size are filled and freed first, so that the
 * move reuses them. */
static unsigned char *moved_from_calloc(size_t from, size_t to, size_t align)
{
    enum { TENANTS = 64 };
    static unsigned char *tenant[TENANTS];
    size_t tenants = to < (64u << 10) ? TENANTS : 1;
    for (size_t i = 0; i < tenants; i++) {
        tenant[i] = lfh_malloc(to);
        REQUIRE(tenant[i]);
        memset(tenant[i], 0x5A, lfh_malloc_usable_size(tenant[i]));
    }
    for (size_t i = 0; i < tenants; i++)
        lfh_free(tenant[i]);
    unsigned char *p = lfh_calloc(1, from);
    REQUIRE(p);
    memset(p, 0x11, from);
    unsigned char *q = align ? lfh_aligned_realloc(p, align, to) : lfh_realloc(p, to);
    REQUIRE(q);
    CHECK(lfh_malloc_zero_fill(q) && lfh_malloc_size(q) == to);
    CHECK(all_bytes(q, 0, from, 0x11));
    return q;
}

static void moved_zero_fill_is_zero_to_the_usable_end(void)
{
    static const size_t cases[][3] = {
        {100, 3000, 0}, {40, 200, 0}, {2000, 20000, 0}, {100000, 600000, 0}, {50000, 600000, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned char *q = moved_from_calloc(cases[i][0], cases[i][1], cases[i][2]);
        size_t usable = lfh_malloc_usable_size(q);
        CHECK(usable >= cases[i][1]);
        CHECK(all_bytes(q, cases[i][0], usable, 0));
        lfh_free(q);
    }
}

/* A zero-filled large block that grows in place into the freed run after it (the run of
 * a bigger block freed just before) reads as zeros up to its new usable end, not only up
 * to its new request: calloc(400000) grown to 500000 in place showed 24,288 bytes of the
 * freed block past the request. Through realloc's fast path (calloc) and its general path
 * (cmemalign, which records an alignment), grown by a few steps. */
static void grown_in_place_zero_fill_is_zero_to_the_usable_end(void)
{
    enum { BIG = 1 << 20, FIRST = 400000, STEP = 100000 };
    size_t stayed = 0, steps = 0;
    for (int aligned = 0; aligned < 2; aligned++) {
        unsigned char *big = lfh_malloc(BIG);
        REQUIRE(big);
        memset(big, 0xAA, lfh_malloc_usable_size(big));
        lfh_free(big);
        unsigned char *p = aligned ? lfh_cmemalign(64, 1, FIRST) : lfh_calloc(1, FIRST);
        REQUIRE(p);
        for (size_t size = FIRST + STEP; size <= BIG; size += STEP) {
            unsigned char *q = lfh_realloc(p, size);
            REQUIRE(q);
            steps++;
            stayed += q == p;
            size_t usable = lfh_malloc_usable_size(q);
            CHECK(usable >= size && lfh_malloc_zero_fill(q));
            CHECK(all_bytes(q, 0, usable, 0));
            p = q;
        }
        lfh_free(p);
    }
    printf("# grown in place: %zu of %zu steps\n", stayed, steps);
}

/* Zero-filled large blocks grown by realloc a step at a time among blocks of varied sizes
 * that were written and freed (their runs waiting dirty, merged or purged, the chunks after
 * a grown block held by others or free): wherever each step leaves the block (in place,
 * over the free chunks after its run, or moved) it reads as zeros up to its usable end,
 * and keeps the bytes the program wrote. */
static void zero_fill_grown_among_freed_blocks(void)
{
    enum { ROUNDS = 40, OTHERS = 24 };
    uint64_t rng = 0x9E3779B97F4A7C15ull;
    size_t stayed = 0, steps = 0;
    for (int round = 0; round < ROUNDS; round++) {
        unsigned char *other[OTHERS];
        for (int i = 0; i < OTHERS; i++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            size_t size = 40000 + (size_t)(rng % (2u << 20));
            other[i] = lfh_malloc(size);
            REQUIRE(other[i]);
            memset(other[i], 0xAA, size);
        }
        for (int i = round & 1; i < OTHERS; i += 2)
            lfh_free(other[i]);
        size_t size = 40000 + (size_t)(rng >> 40) % 200000;
        unsigned char *p = lfh_calloc(1, size);
        REQUIRE(p);
        size_t written = 0;
        for (int step = 0; step < 12; step++) {
            size_t grown = size + size / 8 + 4096;
            unsigned char *q = lfh_realloc(p, grown);
            REQUIRE(q);
            steps++;
            stayed += q == p;
            size_t usable = lfh_malloc_usable_size(q);
            CHECK(usable >= grown && lfh_malloc_zero_fill(q));
            CHECK(all_bytes(q, 0, written, 0x5C) && all_bytes(q, written, usable, 0));
            memset(q + written, 0x5C, size - written); /* the program fills what it had */
            written = size;
            p = q;
            size = grown;
        }
        lfh_free(p);
        for (int i = 1 - (round & 1); i < OTHERS; i += 2)
            lfh_free(other[i]);
    }
    CHECK(stayed > 0);
    printf("# grown in place: %zu of %zu steps\n", stayed, steps);
}

/* calloc and cmemalign of 0 bytes: whatever usable size the block reports reads as
 * zeros (the debug build's is 1 byte for a request of 0, and that byte showed the link of
 * the free list the block came from). Blocks of the smallest class are filled and freed
 * first, so that the zero-byte blocks reuse them. */
static void zero_byte_zero_fill_blocks_read_as_zero(void)
{
    enum { N = 100 };
    static unsigned char *b[N];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++) {
            b[i] = lfh_malloc(1 + (size_t)i % 16);
            REQUIRE(b[i]);
            memset(b[i], 0x5A, lfh_malloc_usable_size(b[i]));
        }
        for (int i = 0; i < N; i++)
            lfh_free(b[i]);
        for (int i = 0; i < N; i++) {
            b[i] = round ? lfh_cmemalign(64, 1, 0) : lfh_calloc(1, 0);
            REQUIRE(b[i]);
            CHECK(all_bytes(b[i], 0, lfh_malloc_usable_size(b[i]), 0));
        }
        for (int i = 0; i < N; i++)
            lfh_free(b[i]);
    }
}

/* Also alignments of 4 GiB and more, whose log2 no longer fits five bits of the record
 * (they were recorded as 1 and 16, and a block that moved lost its alignment). */
static void alignment_survives_realloc(void)
{
    static const size_t aligns[] = {32, 256, 4096, 65536, (size_t)1 << 32, (size_t)1 << 36};
    static const size_t sizes[] = {10, 5000, 100000, 3 << 20, 80 << 20, 40, 70000};
    for (size_t a = 0; a < sizeof aligns / sizeof *aligns; a++) {
        unsigned char *p = lfh_memalign(aligns[a], 1);
        REQUIRE(p);
        p[0] = 0x77;
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            p = lfh_realloc(p, sizes[s]);
            REQUIRE(p);
            CHECK(aligned_to(p, aligns[a]) && lfh_malloc_alignment(p) == aligns[a]);
            CHECK(p[0] == 0x77 && !lfh_malloc_zero_fill(p));
        }
        lfh_free(p);
    }
}

static void aligned_realloc_changes_alignment(void)
{
    unsigned char *p = lfh_calloc(1, 200);
    REQUIRE(p);
    memset(p, 0x42, 200);
    p = lfh_aligned_realloc(p, 1024, 400);
    REQUIRE(p);
    CHECK(aligned_to(p, 1024) && lfh_malloc_alignment(p) == 1024);
    CHECK(lfh_malloc_zero_fill(p) && all_bytes(p, 0, 200, 0x42) && all_bytes(p, 200, 400, 0));
    /* back down to a smaller alignment: the block may stay */
    p = lfh_aligned_realloc(p, 64, 300);
    REQUIRE(p);
    CHECK(aligned_to(p, 64) && lfh_malloc_alignment(p) == 64 && all_bytes(p, 0, 200, 0x42));
    /* a plain block gains a recorded alignment */
    unsigned char *m = lfh_malloc(50);
    REQUIRE(m);
    memset(m, 9, 50);
    m = lfh_aligned_realloc(m, 512, 50);
    REQUIRE(m);
    CHECK(aligned_to(m, 512) && lfh_malloc_alignment(m) == 512 && lfh_malloc_size(m) == 50);
    CHECK(all_bytes(m, 0, 50, 9));
    /* NULL allocates, 0 frees, bad alignment fails and leaves the block alone */
    void *n = lfh_aligned_realloc(NULL, 128, 10);
    CHECK(n && aligned_to(n, 128) && lfh_malloc_alignment(n) == 128);
    CHECK(lfh_aligned_realloc(n, 128, 0) == NULL);
    errno = 0;
    CHECK(lfh_aligned_realloc(m, 100, 10) == NULL && errno == EINVAL);
    CHECK(lfh_malloc_size(m) == 50 && all_bytes(m, 0, 50, 9));
    lfh_free(m);
    lfh_free(p);
}

/* A small block without a property keeps no record, whatever the chain it ends: after a
 * resize (which drops the properties) a realloc to a small size, and a realloc of a large
 * plain block to a small size, give blocks whose malloc_size is their usable size
 * (docs/API.md, "Sticky properties"). */
static void propertyless_small_blocks_report_usable_size(void)
{
    void *p = lfh_memalign(512 * 1024, 510);
    REQUIRE(p);
    void *q = lfh_resize(p, 36918);
    REQUIRE(q);
    CHECK(lfh_malloc_size(q) == 36918 && lfh_malloc_alignment(q) == 16);
    void *r = lfh_realloc(q, 29176);
    REQUIRE(r);
    CHECK(lfh_malloc_size(r) == lfh_malloc_usable_size(r) && lfh_malloc_size(r) >= 29176);
    CHECK(lfh_malloc_alignment(r) == 16 && !lfh_malloc_zero_fill(r));
    lfh_free(r);
    p = lfh_calloc(1, 40000);
    REQUIRE(p);
    q = lfh_resize(p, 39000);
    REQUIRE(q);
    CHECK(lfh_malloc_size(q) == 39000 && !lfh_malloc_zero_fill(q));
    r = lfh_realloc(q, 100);
    REQUIRE(r);
    CHECK(lfh_malloc_size(r) == lfh_malloc_usable_size(r) && lfh_malloc_size(r) >= 100);
    lfh_free(r);
    p = lfh_malloc(40000);
    REQUIRE(p);
    CHECK(lfh_malloc_size(p) == 40000);
    r = lfh_realloc(p, 100);
    REQUIRE(r);
    CHECK(lfh_malloc_size(r) == lfh_malloc_usable_size(r) && lfh_malloc_size(r) >= 100);
    lfh_free(r);
}

static void resize_keeps_nothing(void)
{
    void *p = lfh_calloc(1, 100);
    REQUIRE(p);
    void *r = lfh_resize(p, 90);
    REQUIRE(r);
    CHECK(lfh_malloc_size(r) == 90 && !lfh_malloc_zero_fill(r) && lfh_malloc_alignment(r) == 16);
    /* A small block keeps its record through resize, and realloc then reports requests
     * (docs/API.md's example). */
    r = lfh_realloc(r, 95);
    REQUIRE(r);
    CHECK(lfh_malloc_size(r) == 95 && !lfh_malloc_zero_fill(r));
    r = lfh_realloc(r, 5000);
    REQUIRE(r);
    CHECK(lfh_malloc_size(r) == 5000 && !lfh_malloc_zero_fill(r));
    void *m = lfh_memalign(2048, 100);
    REQUIRE(m);
    m = lfh_resize(m, 5000);
    REQUIRE(m);
    CHECK(lfh_malloc_alignment(m) == 16 && !lfh_malloc_zero_fill(m));
    m = lfh_aligned_resize(m, 512, 3000);
    REQUIRE(m);
    CHECK(aligned_to(m, 512) && lfh_malloc_alignment(m) == 512 && lfh_malloc_size(m) == 3000);
    /* large blocks too */
    void *l = lfh_calloc(1, 1 << 20);
    REQUIRE(l);
    l = lfh_resize(l, 3 << 20);
    REQUIRE(l);
    CHECK(lfh_malloc_size(l) == (3u << 20) && !lfh_malloc_zero_fill(l));
    /* NULL allocates, 0 frees, bad alignment and foreign pointers fail */
    void *n = lfh_resize(NULL, 10);
    CHECK(n && lfh_malloc_usable_size(n) >= 10);
    CHECK(lfh_resize(n, 0) == NULL);
    errno = 0;
    CHECK(lfh_aligned_resize(m, 3, 10) == NULL && errno == EINVAL);
    CHECK(lfh_malloc_size(m) == 3000);
    int on_stack;
    errno = 0;
    CHECK(lfh_resize(&on_stack, 10) == NULL && errno == EINVAL);
    lfh_free(r);
    lfh_free(m);
    lfh_free(l);
}

/* The model: for each live block, what its properties must be and which prefix of it
 * must still hold its pattern. */
struct model {
    unsigned char *p;
    size_t request, align, valid; /* valid: bytes that must hold the pattern */
    int zero_fill;
    int tracked; /* from a routine that records the request (realloc keeps it, resize not) */
    unsigned char fill;
};

static uint64_t rng_state = 88172645463325252ull;

static uint64_t next_random(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static size_t random_size(void)
{
    uint64_t r = next_random();
    switch (r % 200) {
    case 0:
        return (64 << 20) + (r >> 8) % (8 << 20); /* beyond the largest arena chunk */
    case 1:
    case 2:
    case 3:
    case 4:
        return (r >> 8) % (3 << 20); /* large */
    default:
        return r % 4 == 0 ? (r >> 8) % 40000 : (r >> 8) % 700;
    }
}

static size_t random_align(void)
{
    return (size_t)16 << (next_random() % 10); /* 16 .. 8192 */
}

static void model_check(const struct model *m)
{
    CHECK(aligned_to(m->p, m->align));
    CHECK(lfh_malloc_alignment(m->p) == m->align);
    CHECK(lfh_malloc_zero_fill(m->p) == m->zero_fill);
    CHECK(lfh_malloc_usable_size(m->p) >= m->request);
    /* exact for tracked blocks and for every large block */
    if (m->tracked || m->request > 32768)
        CHECK(lfh_malloc_size(m->p) == m->request);
    CHECK(all_bytes(m->p, 0, m->valid, m->fill));
}

/* Fills the block with its own byte so that the next step can tell kept from lost. */
static void model_refill(struct model *m)
{
    m->fill = (unsigned char)(next_random() | 1);
    memset(m->p, m->fill, m->request);
    m->valid = m->request;
}

static void model_chains(void)
{
    enum { BLOCKS = 24, STEPS = 3000 };
    struct model live[BLOCKS];
    memset(live, 0, sizeof live);
    for (int step = 0; step < STEPS; step++) {
        struct model *m = &live[next_random() % BLOCKS];
        size_t size = random_size();
        unsigned op = (unsigned)(next_random() % 9);
        if (!m->p) {
            /* a new block from one of the routines that start a chain */
            size_t align = random_align();
            switch (op % 4) {
            case 0:
                m->p = lfh_calloc(1, size);
                *m = (struct model){m->p, size, 16, 0, 1, 1, 0};
                if (m->p)
                    CHECK(all_bytes(m->p, 0, size, 0));
                break;
            case 1:
                m->p = lfh_memalign(align, size);
                *m = (struct model){m->p, size, align, 0, 0, 1, 0};
                break;
            case 2:
                m->p = lfh_cmemalign(align, 1, size);
                *m = (struct model){m->p, size, align, 0, 1, 1, 0};
                if (m->p)
                    CHECK(all_bytes(m->p, 0, size, 0));
                break;
            default:
                m->p = lfh_malloc(size);
                *m = (struct model){m->p, size, 16, 0, 0, 0, 0};
                break;
            }
            REQUIRE(m->p);
            model_check(m);
            model_refill(m);
            continue;
        }
        model_check(m);
        size_t old = m->request;
        if (op == 0) {
            lfh_free(m->p);
            m->p = NULL;
            continue;
        }
        if (op <= 4) {
            /* realloc keeps both properties and the contents up to the smaller size */
            unsigned char *q = lfh_realloc(m->p, size ? size : 1);
            REQUIRE(q);
            size = size ? size : 1;
            m->p = q;
            m->valid = old < size ? old : size;
            m->request = size;
            if (m->zero_fill && size > old)
                CHECK(all_bytes(q, old, size, 0));
        } else if (op <= 6) {
            size_t align = random_align();
            unsigned char *q = lfh_aligned_realloc(m->p, align, size ? size : 1);
            REQUIRE(q);
            size = size ? size : 1;
            m->p = q;
            m->valid = old < size ? old : size;
            m->request = size;
            m->align = align;
            m->tracked = 1;
            if (m->zero_fill && size > old)
                CHECK(all_bytes(q, old, size, 0));
        } else if (op == 7) {
            unsigned char *q = lfh_resize(m->p, size ? size : 1);
            REQUIRE(q);
            size = size ? size : 1;
            *m = (struct model){q, size, 16, 0, 0, 0, 0};
        } else {
            size_t align = random_align();
            unsigned char *q = lfh_aligned_resize(m->p, align, size ? size : 1);
            REQUIRE(q);
            size = size ? size : 1;
            *m = (struct model){q, size, align, 0, 0, 1, 0};
        }
        model_check(m);
        model_refill(m);
    }
    for (int i = 0; i < BLOCKS; i++)
        if (live[i].p) {
            model_check(&live[i]);
            lfh_free(live[i].p);
        }
}

/* The array forms of resize, aligned_resize and aligned_realloc: the same routines for
 * dim * elem_size bytes, and ENOMEM with the old block untouched when that overflows. */
static void array_forms_of_the_resizers(void)
{
    unsigned char *p = lfh_malloc(40);
    REQUIRE(p);
    memset(p, 0xAB, 40);
    errno = 0;
    CHECK(lfh_resizearray(p, SIZE_MAX / 2, 3) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(lfh_aligned_resizearray(p, 64, SIZE_MAX, 2) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(lfh_aligned_reallocarray(p, 64, SIZE_MAX, 2) == NULL && errno == ENOMEM);
    errno = 0;
    CHECK(lfh_aligned_reallocarray(p, 48, 1, 1) == NULL && errno == EINVAL);
    CHECK(all_bytes(p, 0, 40, 0xAB));
    /* aligned_reallocarray keeps the contents and records the new alignment */
    p = lfh_aligned_reallocarray(p, 256, 30, 10);
    REQUIRE(p);
    CHECK(aligned_to(p, 256) && lfh_malloc_size(p) == 300 && lfh_malloc_alignment(p) == 256);
    CHECK(all_bytes(p, 0, 40, 0xAB));
    /* resizearray keeps no property */
    p = lfh_resizearray(p, 100, 50);
    REQUIRE(p);
    CHECK(lfh_malloc_usable_size(p) >= 5000 && lfh_malloc_alignment(p) == 16);
    p = lfh_aligned_resizearray(p, 4096, 3, 1000);
    REQUIRE(p);
    CHECK(aligned_to(p, 4096) && lfh_malloc_alignment(p) == 4096 && lfh_malloc_size(p) == 3000);
    /* a zero-fill block stays zero-fill through aligned_reallocarray's growth */
    unsigned char *z = lfh_calloc(3, 7);
    REQUIRE(z);
    z = lfh_aligned_reallocarray(z, 64, 200, 30);
    REQUIRE(z);
    CHECK(lfh_malloc_zero_fill(z) && lfh_malloc_size(z) == 6000 && all_bytes(z, 0, 6000, 0));
    lfh_free(z);
    lfh_free(p);
}

/* posix_realloc and its forms: the result in *ptrp and 0, or the error number with *ptrp
 * and errno as they were, so that the block is never lost. */
static void posix_forms_keep_the_pointer_on_failure(void)
{
    void *p = NULL;
    CHECK(lfh_posix_realloc(&p, 100) == 0 && p != NULL);
    REQUIRE(p);
    memset(p, 0x5A, 100);
    void *before = p;
    errno = 1234;
    CHECK(lfh_posix_realloc(&p, (size_t)PTRDIFF_MAX + 1) == ENOMEM && p == before);
    CHECK(lfh_posix_reallocarray(&p, SIZE_MAX, 2) == ENOMEM && p == before);
    CHECK(lfh_posix_aligned_realloc(&p, 48, 10) == EINVAL && p == before);
    CHECK(lfh_posix_aligned_reallocarray(&p, 64, SIZE_MAX / 4, 8) == ENOMEM && p == before);
    CHECK(lfh_posix_realloc(NULL, 10) == EINVAL);
    CHECK(errno == 1234);
    CHECK(all_bytes(p, 0, 100, 0x5A));
    /* success moves or keeps the block, with its contents */
    CHECK(lfh_posix_reallocarray(&p, 50, 10) == 0 && lfh_malloc_usable_size(p) >= 500);
    CHECK(all_bytes(p, 0, 100, 0x5A));
    CHECK(lfh_posix_aligned_reallocarray(&p, 1024, 20, 100) == 0 && aligned_to(p, 1024));
    CHECK(lfh_malloc_alignment(p) == 1024 && lfh_malloc_size(p) == 2000);
    CHECK(all_bytes(p, 0, 100, 0x5A));
    CHECK(lfh_posix_aligned_realloc(&p, 32, 200000) == 0 && aligned_to(p, 32));
    CHECK(lfh_malloc_alignment(p) == 32 && lfh_malloc_size(p) == 200000);
    CHECK(all_bytes(p, 0, 100, 0x5A));
    /* zero fill is kept, and a size of 0 frees the block and leaves NULL */
    void *z = lfh_calloc(10, 10);
    REQUIRE(z);
    CHECK(lfh_posix_realloc(&z, 5000) == 0 && lfh_malloc_zero_fill(z) && all_bytes(z, 0, 5000, 0));
    CHECK(lfh_posix_realloc(&z, 0) == 0 && z == NULL);
    /* a NULL *ptrp gets a new block, as realloc(NULL, n) does: for 0, malloc(0)'s */
    CHECK(lfh_posix_realloc(&z, 0) == 0 && z != NULL && lfh_malloc_usable_size(z) > 0);
    lfh_free(z);
    /* a pointer lfheap never handed out is refused and left alone, also with a size of
     * 0 (test_api.c's refused_at passes freed blocks to realloc) */
    int on_stack;
    void *foreign = &on_stack;
    errno = 1234;
    CHECK(lfh_posix_realloc(&foreign, 10) == EINVAL && foreign == &on_stack);
    CHECK(lfh_posix_realloc(&foreign, 0) == EINVAL && foreign == &on_stack);
    CHECK(lfh_posix_reallocarray(&foreign, 0, 8) == EINVAL && foreign == &on_stack);
    CHECK(lfh_posix_aligned_realloc(&foreign, 64, 0) == EINVAL && foreign == &on_stack);
    CHECK(errno == 1234);
    lfh_free(p);
}

/* A size of 0 frees the block only when the call is otherwise valid: an alignment that
 * is no power of two is refused first (EINVAL), and the block stays live and intact. */
static void bad_alignment_with_size_0_keeps_the_block(void)
{
    static const size_t sizes[] = {100, 5000, 200000, (size_t)100 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t size = sizes[i];
        unsigned char *p = lfh_aligned_alloc(64, size);
        REQUIRE(p);
        memset(p, 0x3C, size);
        void *kept = p;
        errno = 1234;
        CHECK(lfh_posix_aligned_realloc(&kept, 3, 0) == EINVAL && kept == p);
        CHECK(lfh_posix_aligned_reallocarray(&kept, 24, 0, 8) == EINVAL && kept == p);
        CHECK(lfh_posix_aligned_realloc(&kept, 0, 0) == EINVAL && kept == p);
        CHECK(errno == 1234);
        errno = 0;
        CHECK(lfh_aligned_realloc(p, 3, 0) == NULL && errno == EINVAL);
        errno = 0;
        CHECK(lfh_aligned_reallocarray(p, 24, 0, 8) == NULL && errno == EINVAL);
        errno = 0;
        CHECK(lfh_aligned_resize(p, 3, 0) == NULL && errno == EINVAL);
        errno = 0;
        CHECK(lfh_aligned_resizearray(p, 24, 0, 8) == NULL && errno == EINVAL);
        /* still live: the queries see it, and its bytes are as they were */
        CHECK(lfh_malloc_usable_size(p) >= size && lfh_malloc_alignment(p) == 64);
        CHECK(all_bytes(p, 0, size, 0x3C));
        /* a valid alignment with a size of 0 frees it */
        CHECK(lfh_posix_aligned_realloc(&kept, 128, 0) == 0 && kept == NULL);
    }
}

static pthread_barrier_t owner_alive;

static void *allocate_and_stay(void *slot)
{
    *(void **)slot = lfh_malloc(48);
    pthread_barrier_wait(&owner_alive); /* the block is there */
    pthread_barrier_wait(&owner_alive); /* the main thread has looked at it */
    return NULL;
}

/* malloc_remote: a small block of a superblock another thread's cache owns is remote;
 * this thread's own blocks, large blocks, NULL and non-blocks are not. */
static void malloc_remote_tells_whose_heap(void)
{
    void *mine = lfh_malloc(48), *large = lfh_malloc(1 << 20);
    REQUIRE(mine && large);
    CHECK(!lfh_malloc_remote(mine) && !lfh_malloc_remote(large) && !lfh_malloc_remote(NULL));
    void *theirs = NULL;
    pthread_t thread;
    REQUIRE(pthread_barrier_init(&owner_alive, NULL, 2) == 0);
    REQUIRE(pthread_create(&thread, NULL, allocate_and_stay, &theirs) == 0);
    pthread_barrier_wait(&owner_alive);
    REQUIRE(theirs);
    CHECK(lfh_malloc_remote(theirs));
    CHECK(!lfh_malloc_remote((char *)theirs + 16)); /* inside a block: no block */
    pthread_barrier_wait(&owner_alive);
    REQUIRE(pthread_join(thread, NULL) == 0);
    pthread_barrier_destroy(&owner_alive);
    lfh_free(theirs);
    lfh_free(mine);
    lfh_free(large);
}

/* malloc_mmap_start: a request up to it comes from an arena chunk, beyond it from a
 * mapping of its own, aligned only to the page (the statistics build counts the two
 * kinds apart: tests/test_stats.c); malloc_extend is the arena size, at least that. */
static void crossover_sizes(void)
{
    size_t start = lfh_malloc_mmap_start();
    CHECK(start >= (size_t)1 << 20 && lfh_malloc_extend() >= start);
    void *at = lfh_malloc(start), *beyond = lfh_malloc(start + 1);
    REQUIRE(at && beyond);
    CHECK(lfh_malloc_usable_size(at) >= start && lfh_malloc_usable_size(beyond) > start);
    CHECK(lfh_malloc_size(at) == start && lfh_malloc_size(beyond) == start + 1);
    lfh_free(at);
    lfh_free(beyond);
}

int main(void)
{
    RUN(array_routines);
    RUN(queries);
    RUN(zero_fill_growth);
    RUN(moved_zero_fill_is_zero_to_the_usable_end);
    RUN(grown_in_place_zero_fill_is_zero_to_the_usable_end);
    RUN(zero_fill_grown_among_freed_blocks);
    RUN(zero_byte_zero_fill_blocks_read_as_zero);
    RUN(alignment_survives_realloc);
    RUN(aligned_realloc_changes_alignment);
    RUN(propertyless_small_blocks_report_usable_size);
    RUN(resize_keeps_nothing);
    RUN(model_chains);
    RUN(array_forms_of_the_resizers);
    RUN(posix_forms_keep_the_pointer_on_failure);
    RUN(bad_alignment_with_size_0_keeps_the_block);
    RUN(malloc_remote_tells_whose_heap);
    RUN(crossover_sizes);
    return test_exit_status();
}
