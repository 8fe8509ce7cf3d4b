/*
 * Tests of the buddy back-end (src/buddy*.c), for both tree layouts:
 * - argument checks and the public lfh_buddy_* API;
 * - a sequential model check: thousands of random alloc/free sequences against a
 *   reference that tracks every minimum unit of the region. Every chunk must be inside
 *   the region, of the right size, aligned to its size, over free units only; an
 *   allocation may fail only when no aligned free block of that size exists (in
 *   isolation NBBS never fails spuriously, property S4); frees of anything but a live
 *   chunk's start are refused; after freeing everything the region is allocatable again
 *   as maximal chunks;
 * - a concurrent test: threads allocate random sizes, stamp every word of each chunk
 *   with owner and sequence, pass some chunks to other threads through mailboxes, check
 *   every word before freeing; afterwards full coalescing is checked. Overlapping chunks
 *   show up as a broken stamp here and as a data race under ThreadSanitizer.
 * Usage: test_buddy [scale] - scale (default 100) is the percentage of the default work;
 * the ThreadSanitizer run uses a smaller one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "buddy.h"
#include "buddytest.h"
#include "lfheap_buddy.h"
#include "testutil.h"

static unsigned scale = 100;

static unsigned scaled(unsigned n)
{
    unsigned v = (unsigned)((unsigned long)n * scale / 100);
    return v ? v : 1;
}

static const unsigned layouts[] = {0, BUDDY_PACKED};

static const char *layout_name(unsigned flags)
{
    return (flags & BUDDY_PACKED) ? "packed" : "1-level";
}

/* A request size: a power-of-two class chosen uniformly between min and max, then a
 * random size inside it so that rounding up is exercised; now and then 0 or 1. */
static size_t random_request(uint64_t *rng, size_t min_chunk, size_t max_request)
{
    unsigned lo = (unsigned)__builtin_ctzll(min_chunk);
    unsigned hi = (unsigned)__builtin_ctzll(max_request);
    uint64_t r = buddytest_random(rng);
    if (r % 64 == 0)
        return r % 128 < 64 ? 0 : 1;
    unsigned shift = lo + (unsigned)((r >> 8) % (hi - lo + 1));
    size_t top = (size_t)1 << shift;
    if (shift == lo)
        return 1 + (size_t)((r >> 32) % top);
    return top / 2 + 1 + (size_t)((r >> 32) % (top / 2));
}

static size_t round_chunk(size_t bytes, size_t min_chunk)
{
    size_t s = min_chunk;
    while (s < bytes)
        s <<= 1;
    return s;
}

/* ---------------------------------------------------------------------------------- */

static void test_create_arguments(void)
{
    for (unsigned i = 0; i < 2; i++) {
        unsigned f = layouts[i];
        errno = 0;
        CHECK(!buddy_create(NULL, 3 << 20, 4096, 0, f) && errno == EINVAL);
        CHECK(!buddy_create(NULL, 1 << 20, 3000, 0, f) && errno == EINVAL);
        CHECK(!buddy_create(NULL, 1 << 20, 32, 0, f) && errno == EINVAL);
        CHECK(!buddy_create(NULL, 1 << 20, 4096, 2048, f) && errno == EINVAL);
        CHECK(!buddy_create(NULL, 1 << 20, 4096, 2 << 20, f) && errno == EINVAL);
        CHECK(!buddy_create(NULL, 1 << 20, 4096, 0, f | 64) && errno == EINVAL);
        CHECK(!buddy_create((void *)(uintptr_t)4160, 1 << 20, 4096, 0, f) && errno == EINVAL);
        CHECK(!buddy_create(NULL, (size_t)1 << 40, 64, 0, f) && errno == EINVAL);

        /* A reserved region is aligned to its size; a 1 GiB arena with 4 KiB chunks has
         * small metadata (4.3 MiB with the 1-level tree's 8-byte nodes, under 1 MiB
         * packed). */
        struct buddy *b = buddy_create(NULL, (size_t)1 << 30, 4096, 0, f);
        REQUIRE(b);
        CHECK(((uintptr_t)buddy_base(b) & (((size_t)1 << 30) - 1)) == 0);
        CHECK(b->meta_size <= ((f & BUDDY_PACKED) ? (size_t)1 << 20 : (size_t)9 << 19));
        void *p = buddy_alloc(b, (size_t)1 << 30);
        CHECK(p == buddy_base(b));
        CHECK(!buddy_alloc(b, 4096));
        CHECK(buddy_free(b, p));
        void *q = buddy_alloc(b, 5000);
        CHECK(q && buddy_chunk_size(b, q) == 8192);
        CHECK(buddy_contains(b, q) && !buddy_contains(b, (char *)buddy_base(b) - 1) &&
              !buddy_contains(b, (char *)buddy_base(b) + ((size_t)1 << 30)));
        CHECK(!buddy_alloc(b, ((size_t)1 << 30) + 1));
        CHECK(buddy_free(b, q));
        buddy_destroy(b);
    }
}

/* The metadata mapping holds the tree and the index array for every max_chunk: the
 * packed tree's bunches start at base_level, so its last bunch level (and word count)
 * depends on max_chunk, not only on the depth. Every depth mod 3 (the bunch height)
 * against every base_level mod 3, and more; then every index entry is written
 * (the whole region as leaves). */
static void test_metadata_size(void)
{
    for (unsigned i = 0; i < 2; i++)
        for (unsigned depth = 8; depth <= 11; depth++)
            for (unsigned base = 0; base < 4; base++) {
                size_t size = BUDDY_MIN_CHUNK << depth;
                struct buddy *b =
                    buddy_create(NULL, size, BUDDY_MIN_CHUNK, size >> base, layouts[i]);
                REQUIRE(b);
                const char *meta = (const char *)b, *end = meta + b->meta_size;
                const char *tree_end =
                    (layouts[i] & BUDDY_PACKED)
                        ? (const char *)&b
                              ->words[b->bunch_offset[b->bunch_levels - 1] +
                                      ((size_t)1 << buddy_bunch_root_level(b, b->bunch_levels - 1))]
                        : (const char *)&b->tree[(size_t)2 << depth];
                CHECK(b->meta_size ==
                      buddy_metadata_size(size, BUDDY_MIN_CHUNK, size >> base, layouts[i]));
                CHECK(tree_end <= (const char *)b->index);
                CHECK((const char *)&b->index[(size_t)1 << depth] <= end);
                if (test_failures) {
                    fprintf(stderr, "metadata: %s depth %u base_level %u: %zu bytes\n",
                            layout_name(layouts[i]), depth, base, b->meta_size);
                    buddy_destroy(b);
                    return;
                }
                size_t got = 0;
                while (buddy_alloc(b, 1))
                    got++;
                CHECK(got == (size_t)1 << depth);
                buddy_destroy(b);
            }
}

static void test_public_api(void)
{
    /* Over a caller-given region. */
    size_t size = 1 << 20;
    void *region = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(region != MAP_FAILED);
    for (unsigned i = 0; i < 2; i++) {
        lfh_buddy *b = lfh_buddy_create(region, size, 4096, 256 << 10,
                                        i ? LFH_BUDDY_PACKED : LFH_BUDDY_SCATTER);
        REQUIRE(b);
        CHECK(lfh_buddy_base(b) == region);
        errno = 0;
        CHECK(!lfh_buddy_alloc(b, (256 << 10) + 1) && errno == ENOMEM);
        void *p = lfh_buddy_alloc(b, 100000);
        CHECK(p && lfh_buddy_size(b, p) == 128 << 10 && lfh_buddy_contains(b, p));
        CHECK(((uintptr_t)p - (uintptr_t)region) % (128 << 10) == 0);
        memset(p, 0xab, 100000);
        errno = 0;
        CHECK(lfh_buddy_free(b, (char *)p + 4096) == -1 && errno == EINVAL);
        CHECK(lfh_buddy_free(b, (char *)region - 4096) == -1);
        CHECK(lfh_buddy_free(b, p) == 0);
        CHECK(lfh_buddy_free(b, p) == -1); /* double free is refused */
        CHECK(lfh_buddy_size(b, p) == 0);
        /* The region is four max chunks again. */
        void *all[4];
        for (int k = 0; k < 4; k++)
            CHECK((all[k] = lfh_buddy_alloc(b, 256 << 10)) != NULL);
        CHECK(!lfh_buddy_alloc(b, 4096));
        for (int k = 0; k < 4; k++)
            CHECK(lfh_buddy_free(b, all[k]) == 0);
        lfh_buddy_destroy(b);
    }
    munmap(region, size);
}

/* ---------------------------------------------------------------------------------- */
/* Sequential model check. */

struct model {
    size_t units;  /* region / min_chunk */
    uint8_t *used; /* per unit */
    void **live;   /* live chunks */
    size_t *live_size;
    size_t nlive;
};

static bool model_range_free(const struct model *m, size_t first, size_t count)
{
    for (size_t u = first; u < first + count; u++)
        if (m->used[u])
            return false;
    return true;
}

static bool model_has_block(const struct model *m, size_t count)
{
    for (size_t u = 0; u < m->units; u += count)
        if (model_range_free(m, u, count))
            return true;
    return false;
}

struct seq_config {
    size_t size, min_chunk, max_chunk;
    unsigned sequences, ops;
};

/* Checks the whole region is free: exactly size / max_chunk maximal chunks come back. */
static void check_fully_coalesced(struct buddy *b)
{
    size_t n = b->size / b->max_chunk;
    void **all = calloc(n, sizeof *all);
    REQUIRE(all);
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        all[i] = buddy_alloc(b, b->max_chunk);
        if (all[i])
            got++;
    }
    CHECK(got == n);
    CHECK(!buddy_alloc(b, buddy_min_chunk(b)));
    for (size_t i = 0; i < n; i++)
        if (all[i])
            CHECK(buddy_free(b, all[i]));
    free(all);
}

/* buddy_alloc_at takes the one chunk it names if it is free, and nothing else: a run of
 * adjacent chunks of decreasing size (arena.c's runs), and every other chunk still
 * comes from buddy_alloc, without overlap; once all is freed the region coalesces. */
static void test_alloc_at(void)
{
    const unsigned layouts[] = {0, BUDDY_PACKED};
    for (unsigned i = 0; i < 2; i++) {
        struct buddy *b = buddy_create(NULL, 1 << 20, 4096, 0, layouts[i]);
        REQUIRE(b);
        char *base = buddy_base(b);
        CHECK(buddy_alloc_at(b, base, 512 << 10));
        CHECK(!buddy_alloc_at(b, base, 512 << 10));                 /* taken */
        CHECK(!buddy_alloc_at(b, base + 4096, 4096));               /* inside a taken chunk */
        CHECK(!buddy_alloc_at(b, base, 1 << 20));                   /* around a taken chunk */
        CHECK(!buddy_alloc_at(b, base + (512 << 10) + 4096, 8192)); /* misaligned */
        CHECK(!buddy_alloc_at(b, base + (512 << 10), 3 << 12));     /* not a power of two */
        CHECK(!buddy_alloc_at(b, base + (1 << 20), 4096));          /* outside */
        CHECK(buddy_alloc_at(b, base + (512 << 10), 128 << 10));
        CHECK(buddy_alloc_at(b, base + (640 << 10), 64 << 10));
        CHECK(buddy_chunk_size(b, base) == 512 << 10);
        CHECK(buddy_chunk_size(b, base + (640 << 10)) == 64 << 10);
        /* what is left: one chunk of 64 KiB and one of 256 KiB */
        CHECK(buddy_alloc(b, 256 << 10) == base + (768 << 10));
        CHECK(buddy_alloc(b, 64 << 10) == base + (704 << 10));
        CHECK(!buddy_alloc(b, 4096));
        for (size_t off = 0; off < (1 << 20);) {
            size_t size = buddy_chunk_size(b, base + off);
            CHECK(size && buddy_free(b, base + off));
            off += size ? size : 4096;
        }
        check_fully_coalesced(b);
        buddy_destroy(b);
    }
}

static void model_free(struct buddy *b, struct model *m, size_t k)
{
    char *p = m->live[k];
    size_t size = m->live_size[k];
    size_t first = (size_t)(p - b->base) >> b->min_shift;
    CHECK(buddy_chunk_size(b, p) == size);
    if (size > buddy_min_chunk(b))
        CHECK(!buddy_free(b, p + buddy_min_chunk(b))); /* an inner address is refused */
    CHECK(buddy_free(b, p));
    CHECK(!buddy_free(b, p)); /* and a double free */
    memset(m->used + first, 0, size >> b->min_shift);
    m->live[k] = m->live[m->nlive - 1];
    m->live_size[k] = m->live_size[m->nlive - 1];
    m->nlive--;
}

static void run_model(const struct seq_config *c, unsigned flags, uint64_t seed)
{
    struct buddy *b = buddy_create(NULL, c->size, c->min_chunk, c->max_chunk, flags);
    REQUIRE(b);
    struct model m = {.units = c->size / c->min_chunk};
    m.used = calloc(m.units, 1);
    m.live = calloc(m.units, sizeof *m.live);
    m.live_size = calloc(m.units, sizeof *m.live_size);
    REQUIRE(m.used && m.live && m.live_size);
    uint64_t rng = seed;
    size_t max_chunk = c->max_chunk ? c->max_chunk : c->size;
    unsigned failures = 0;
    for (unsigned s = 0; s < c->sequences; s++) {
        for (unsigned op = 0; op < c->ops; op++) {
            uint64_t r = buddytest_random(&rng);
            if (m.nlive == 0 || r % 100 < 55) {
                size_t want = random_request(&rng, c->min_chunk, max_chunk);
                if (r % 500 == 7)
                    want = max_chunk + 1 + (r >> 40) % max_chunk; /* too big: NULL */
                /* Half the requests trust the levels found full: in isolation a level
                 * is marked only when it is full, and any free clears the marks. */
                char *p = (r >> 8) % 2 ? buddy_alloc(b, want) : buddy_alloc_unless_full(b, want);
                if (want > max_chunk) {
                    CHECK(!p);
                    continue;
                }
                size_t size = round_chunk(want, c->min_chunk);
                size_t count = size / c->min_chunk;
                if (!p) {
                    /* S4: in isolation, a failure means there is no room. */
                    CHECK(!model_has_block(&m, count));
                    continue;
                }
                size_t offset = (size_t)(p - b->base);
                CHECK(offset < c->size && offset + size <= c->size);
                CHECK(offset % size == 0);
                CHECK(buddy_chunk_size(b, p) == size);
                if (!model_range_free(&m, offset / c->min_chunk, count)) {
                    failures++;
                    CHECK(!"chunk overlaps a live chunk");
                }
                memset(m.used + offset / c->min_chunk, 1, count);
                m.live[m.nlive] = p;
                m.live_size[m.nlive++] = size;
            } else {
                model_free(b, &m, (size_t)((r >> 16) % m.nlive));
            }
            if (failures > 10)
                break;
        }
        while (m.nlive) /* free everything, in random order */
            model_free(b, &m, (size_t)(buddytest_random(&rng) % m.nlive));
        check_fully_coalesced(b);
        if (test_failures) {
            fprintf(stderr, "model: %s size %zu min %zu max %zu seed %llu sequence %u\n",
                    layout_name(flags), c->size, c->min_chunk, c->max_chunk,
                    (unsigned long long)seed, s);
            break;
        }
    }
    free(m.used);
    free(m.live);
    free(m.live_size);
    buddy_destroy(b);
}

/* Depths 8-12 cover every position of the last bunch of the packed tree (depth mod 3);
 * the 256 KiB one has max_chunk < size (base_level 5); the last is an arena with 4 KiB
 * pages. */
static const struct seq_config seq_configs[] = {
    {16 << 10, 64, 0, 300, 300},  {32 << 10, 64, 0, 300, 300},        {64 << 10, 64, 0, 300, 400},
    {128 << 10, 64, 0, 300, 400}, {256 << 10, 64, 8 << 10, 200, 600}, {4 << 20, 4096, 0, 150, 300},
};

static void run_model_layout(unsigned layout)
{
    static const unsigned hint_flags[] = {0, BUDDY_NO_HINTS, BUDDY_SCATTER};
    for (size_t i = 0; i < sizeof seq_configs / sizeof *seq_configs; i++) {
        struct seq_config c = seq_configs[i];
        c.sequences = scaled(c.sequences);
        run_model(&c, layout | hint_flags[i % 3], 0x9e3779b97f4a7c15ull * (i + 1) + layout);
        if (test_failures)
            return;
    }
}

static void test_model_flat(void)
{
    run_model_layout(0);
}
static void test_model_packed(void)
{
    run_model_layout(BUDDY_PACKED);
}

/* Fill the whole region with minimum chunks, then with maximum ones (exhaustion). */
static void test_exhaustion(void)
{
    for (unsigned i = 0; i < 2; i++) {
        size_t size = 1 << 20, min = 256;
        struct buddy *b = buddy_create(NULL, size, min, 0, layouts[i]);
        REQUIRE(b);
        size_t n = size / min;
        void **all = calloc(n, sizeof *all);
        REQUIRE(all);
        size_t got = 0;
        while (got < n && (all[got] = buddy_alloc(b, 1)) != NULL)
            got++;
        CHECK(got == n);
        CHECK(!buddy_alloc(b, 1));
        for (size_t k = 0; k < got; k += 2) /* free every other: no merge possible */
            CHECK(buddy_free(b, all[k]));
        CHECK(!buddy_alloc(b, 2 * min));
        for (size_t k = 1; k < got; k += 2)
            CHECK(buddy_free(b, all[k]));
        check_fully_coalesced(b);
        free(all);
        buddy_destroy(b);
    }
}

/* The one free chunk of a level is found wherever it lies, also among taken nodes that
 * share its bunch word (the packed scan tests a word's nodes against one load of it):
 * every level filled, then each chunk in turn freed and asked for again, the scan starting
 * at the level's first node (no hints) or at the thread's hint. */
static void test_scan_finds_each_node(void)
{
    const unsigned flags[] = {0, BUDDY_NO_HINTS, BUDDY_PACKED, BUDDY_PACKED | BUDDY_NO_HINTS};
    const size_t size = 1 << 20, min = 4096;
    for (unsigned f = 0; f < sizeof flags / sizeof flags[0]; f++) {
        struct buddy *b = buddy_create(NULL, size, min, 0, flags[f]);
        REQUIRE(b);
        void *all[256];
        for (size_t chunk = min; chunk <= size; chunk <<= 1) {
            size_t n = size / chunk;
            for (size_t k = 0; k < n; k++)
                CHECK((all[k] = buddy_alloc(b, chunk)) != NULL);
            CHECK(!buddy_alloc(b, chunk));
            for (size_t k = 0; k < n; k++) {
                CHECK(buddy_free(b, all[k]));
                CHECK(buddy_alloc(b, chunk) == all[k]);
            }
            for (size_t k = 0; k < n; k++)
                CHECK(buddy_free(b, all[k]));
            check_fully_coalesced(b);
        }
        buddy_destroy(b);
    }
}

/* A level that a scan found full is not scanned again until a release: a mark set while
 * a chunk is free (as when another thread's allocation had marked the chunk and lost its
 * CAS) is trusted by buddy_alloc_unless_full until then, and ignored by buddy_alloc. */
static void test_full_mark(void)
{
    for (unsigned i = 0; i < 2; i++) {
        const size_t size = 1 << 20, chunk = 64 << 10, n = size / chunk;
        struct buddy *b = buddy_create(NULL, size, 4096, 0, layouts[i]);
        REQUIRE(b);
        unsigned level = b->size_shift - 16;
        void *all[16];
        for (size_t k = 0; k < n; k++)
            CHECK((all[k] = buddy_alloc_unless_full(b, chunk)) != NULL);
        CHECK(atomic_load(&b->full_at[level]) == 0);
        CHECK(!buddy_alloc_unless_full(b, chunk));
        CHECK(atomic_load(&b->full_at[level]) == atomic_load(&b->release_count) + 1);
        CHECK(buddy_free(b, all[5])); /* a release clears it */
        CHECK(buddy_alloc_unless_full(b, chunk) == all[5]);
        CHECK(!buddy_alloc(b, chunk)); /* buddy_alloc marks too */
        CHECK(atomic_load(&b->full_at[level]) == atomic_load(&b->release_count) + 1);
        CHECK(buddy_free(b, all[9]));
        atomic_store(&b->full_at[level], atomic_load(&b->release_count) + 1); /* wrongly */
        CHECK(!buddy_alloc_unless_full(b, chunk));
        CHECK(buddy_alloc(b, chunk) == all[9]);
        for (size_t k = 0; k < n; k++)
            CHECK(buddy_free(b, all[k]));
        check_fully_coalesced(b);
        buddy_destroy(b);
    }
}

/* ---------------------------------------------------------------------------------- */
/* Concurrent test. */

struct record {
    uint64_t *p;
    size_t size;
    uint64_t stamp;
};

#define MAILBOXES 16

struct shared {
    struct buddy *b;
    size_t max_request;
    unsigned max_live;
    unsigned ops;
    _Atomic(struct record *) box[MAILBOXES];
    _Atomic unsigned errors;
    _Atomic unsigned long nulls;
    _Atomic unsigned long allocs;
    pthread_barrier_t start; /* all workers begin together, so that they overlap */
};

struct worker {
    struct shared *s;
    unsigned id;
    pthread_t thread;
};

static void stamp_chunk(struct record *r)
{
    size_t words = r->size / sizeof(uint64_t);
    for (size_t i = 0; i < words; i++)
        r->p[i] = r->stamp ^ i;
}

static bool verify_and_free(struct shared *s, struct record *r)
{
    bool ok = true;
    size_t words = r->size / sizeof(uint64_t);
    for (size_t i = 0; i < words; i++)
        if (r->p[i] != (r->stamp ^ i)) {
            ok = false;
            break;
        }
    if (buddy_chunk_size(s->b, r->p) != r->size)
        ok = false;
    if (!buddy_free(s->b, r->p))
        ok = false;
    free(r);
    if (!ok)
        atomic_fetch_add(&s->errors, 1);
    return ok;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *s = w->s;
    struct record **live = calloc(s->max_live, sizeof *live);
    unsigned nlive = 0;
    uint64_t rng = 0x1234567ull * (w->id + 1) + 99;
    uint64_t seq = 0;
    unsigned long nulls = 0, allocs = 0;
    size_t min_chunk = buddy_min_chunk(s->b);
    pthread_barrier_wait(&s->start);
    for (unsigned op = 0; op < s->ops; op++) {
        uint64_t r = buddytest_random(&rng);
        unsigned pick = (unsigned)(r % 100);
        if (nlive == 0 || (nlive < s->max_live && pick < 50)) {
            size_t want = random_request(&rng, min_chunk, s->max_request);
            if (r % 256 == 3) /* now and then a big one: allocations high in the tree */
                want = s->max_request * 4 <= buddy_max_chunk(s->b) ? s->max_request * 4
                                                                   : s->max_request;
            uint64_t *p = buddy_alloc(s->b, want);
            if (!p) {
                nulls++;
                continue;
            }
            allocs++;
            struct record *rec = malloc(sizeof *rec);
            rec->p = p;
            rec->size = round_chunk(want, min_chunk);
            rec->stamp = ((uint64_t)(w->id + 1) << 48) | ++seq;
            if (!buddy_contains(s->b, p) ||
                ((uintptr_t)p - (uintptr_t)s->b->base) % rec->size != 0 ||
                buddy_chunk_size(s->b, p) != rec->size)
                atomic_fetch_add(&s->errors, 1);
            stamp_chunk(rec);
            live[nlive++] = rec;
        } else if (pick < 62) {
            /* Pass a chunk to whoever visits this mailbox next, and take what is there.
             * acq_rel: the stamp we wrote is seen by the taker, and we see its stamp. */
            unsigned k = (unsigned)((r >> 20) % nlive);
            struct record *mine = live[k];
            struct record *theirs = atomic_exchange_explicit(&s->box[(r >> 40) % MAILBOXES], mine,
                                                             memory_order_acq_rel);
            if (theirs)
                live[k] = theirs;
            else
                live[k] = live[--nlive];
        } else {
            unsigned k = (unsigned)((r >> 20) % nlive);
            verify_and_free(s, live[k]);
            live[k] = live[--nlive];
        }
    }
    while (nlive)
        verify_and_free(s, live[--nlive]);
    free(live);
    atomic_fetch_add(&s->nulls, nulls);
    atomic_fetch_add(&s->allocs, allocs);
    return NULL;
}

struct conc_config {
    size_t size, min_chunk, max_chunk, max_request;
    unsigned threads, max_live, ops;
};

static void run_concurrent(const struct conc_config *c, unsigned flags)
{
    struct shared s = {
        .max_request = c->max_request, .max_live = c->max_live, .ops = scaled(c->ops)};
    s.b = buddy_create(NULL, c->size, c->min_chunk, c->max_chunk, flags);
    REQUIRE(s.b);
    REQUIRE(pthread_barrier_init(&s.start, NULL, c->threads) == 0);
    struct worker w[16];
    for (unsigned i = 0; i < c->threads; i++) {
        w[i].s = &s;
        w[i].id = i;
        REQUIRE(pthread_create(&w[i].thread, NULL, worker_main, &w[i]) == 0);
    }
    for (unsigned i = 0; i < c->threads; i++)
        pthread_join(w[i].thread, NULL);
    pthread_barrier_destroy(&s.start);
    for (unsigned i = 0; i < MAILBOXES; i++) {
        struct record *r = atomic_load(&s.box[i]);
        if (r)
            verify_and_free(&s, r);
    }
    CHECK(atomic_load(&s.errors) == 0);
    unsigned long allocs = atomic_load(&s.allocs), nulls = atomic_load(&s.nulls);
    /* Live memory stays far below the region, so a NULL is only a concurrency artefact
     * (documented in buddy.h); there must be few. */
    CHECK(nulls * 100 <= allocs + 100);
    if (atomic_load(&s.errors) || nulls || getenv("TEST_VERBOSE"))
        fprintf(stderr, "concurrent %s flags %u size %zu: %lu allocations, %lu NULL, %u errors\n",
                layout_name(flags), flags, c->size, allocs, nulls, atomic_load(&s.errors));
    check_fully_coalesced(s.b);
    buddy_destroy(s.b);
}

static const struct conc_config conc_configs[] = {
    /* arena-like: max chunk below the region, climbs stop at base_level */
    {16 << 20, 64, 64 << 10, 16 << 10, 8, 32, 40000},
    /* climbs to the root: every operation contends on the top of the tree */
    {2 << 20, 64, 0, 4 << 10, 4, 16, 40000},
    /* 4 KiB pages as the heap will use them */
    {64 << 20, 4096, 0, 64 << 10, 6, 24, 20000},
};

static void run_concurrent_layout(unsigned layout)
{
    static const unsigned hint_flags[] = {0, BUDDY_SCATTER, BUDDY_NO_HINTS};
    for (size_t i = 0; i < sizeof conc_configs / sizeof *conc_configs; i++)
        run_concurrent(&conc_configs[i], layout | hint_flags[i % 3]);
}

static void test_concurrent_flat(void)
{
    run_concurrent_layout(0);
}
static void test_concurrent_packed(void)
{
    run_concurrent_layout(BUDDY_PACKED);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        scale = (unsigned)strtoul(argv[1], NULL, 10);
    if (!scale)
        scale = 1;
#ifdef TEST_BUDDY_CHAOS
    /* tests/test_buddy_chaos.c: only what the random yields make interesting. */
    RUN(test_exhaustion);
    RUN(test_concurrent_flat);
    RUN(test_concurrent_packed);
    return test_exit_status();
#endif
    RUN(test_create_arguments);
    RUN(test_metadata_size);
    RUN(test_public_api);
    RUN(test_alloc_at);
    RUN(test_scan_finds_each_node);
    RUN(test_full_mark);
    RUN(test_exhaustion);
    RUN(test_model_flat);
    RUN(test_model_packed);
    RUN(test_concurrent_flat);
    RUN(test_concurrent_packed);
    return test_exit_status();
}
