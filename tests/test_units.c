/*
 * Unit tests of the layers below the API: size classes, the page map, and the heap's
 * superblock life cycle, including a multi-threaded check of the heap's invariants.
 */
#include "arena.h"
#include "buddy.h"
#include "heap.h"
#include "os.h"
#include "pagemap.h"
#include "platform.h"
#include "sizeclass.h"
#include "tcache.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/utsname.h>

/* The kernel's version read from the vDSO's note (no system call) is the one uname
 * reports, major and minor (distributions number the patch level their own way). Where
 * the kernel maps no vDSO the version is unknown (0), and process_madvise is tried once
 * (src/os.c). */
static void kernel_version_from_the_vdso(void)
{
    struct utsname name;
    REQUIRE(uname(&name) == 0);
    unsigned major = 0, minor = 0;
    REQUIRE(sscanf(name.release, "%u.%u", &major, &minor) == 2);
    uint32_t version = platform_kernel_version();
    printf("  uname %s, vDSO note %u.%u.%u\n", name.release, version >> 16, (version >> 8) & 255,
           version & 255);
    if (getauxval(AT_SYSINFO_EHDR) == 0) {
        CHECK(version == 0);
        return;
    }
    CHECK(version >> 16 == major);
    CHECK(((version >> 8) & 255) == minor);
}

static void sizeclass_series(void)
{
    for (unsigned c = 0; c < SIZECLASS_COUNT; c++) {
        size_t s = sizeclass_block_size[c];
        CHECK(s % 16 == 0);
        if (c > 0)
            CHECK(s > sizeclass_block_size[c - 1]);
        /* four classes per doubling from 128 to 1024, five above (the first at 9/8) */
        if (c >= 8 && c + 4 < SIZECLASS_TABLE_CLASSES)
            CHECK(sizeclass_block_size[c + 4] == 2 * s);
        if (c + 1 >= SIZECLASS_TABLE_CLASSES && c + SIZECLASS_PER_DOUBLING < SIZECLASS_COUNT)
            CHECK(sizeclass_block_size[c + SIZECLASS_PER_DOUBLING] == 2 * s);
        if (c >= SIZECLASS_TABLE_CLASSES &&
            (c - SIZECLASS_TABLE_CLASSES) % SIZECLASS_PER_DOUBLING == 0)
            CHECK(sizeclass_block_size[c] * 8 == sizeclass_block_size[c - 1] * 9);
    }
    CHECK(sizeclass_of(SIZECLASS_LOOKUP_MAX) == SIZECLASS_TABLE_CLASSES - 1);
    CHECK(sizeclass_block_size[SIZECLASS_COUNT - 1] == SIZECLASS_MAX_SIZE);
    CHECK(sizeclass_block_size[sizeclass_of(16384)] == 16384);
}

static void sizeclass_lookup_is_smallest_fit(void)
{
    for (size_t size = 0; size <= SIZECLASS_MAX_SIZE; size++) {
        unsigned c = sizeclass_of(size);
        REQUIRE(c < SIZECLASS_COUNT);
        CHECK(sizeclass_block_size[c] >= size);
        if (c > 0)
            CHECK(sizeclass_block_size[c - 1] < size);
        if (size > 64)
            CHECK((double)sizeclass_block_size[c] <= 1.25 * (double)size);
        /* a power of two plus a header of up to an eighth of it fits 9/8 of it */
        if (size > 1024 && (size & (size - 1)) == 0 && size < SIZECLASS_MAX_SIZE)
            CHECK(sizeclass_block_size[sizeclass_of(size + size / 8)] == size + size / 8);
    }
}

static void sizeclass_aligned(void)
{
    for (size_t align = 16; align <= 4096; align <<= 1)
        for (size_t size = 1; size <= 20000; size += 37) {
            unsigned c = sizeclass_for_aligned(size, align);
            if (c == SIZECLASS_COUNT) {
                CHECK(size > SIZECLASS_MAX_SIZE || align > SIZECLASS_PAGE_ALIGN);
                continue;
            }
            CHECK(sizeclass_block_size[c] >= size);
            CHECK(sizeclass_block_size[c] % align == 0);
        }
    CHECK(sizeclass_for_aligned(16, 8192) == SIZECLASS_COUNT);
    for (unsigned c = 0; c < SIZECLASS_COUNT; c++) {
        size_t sb = sizeclass_superblock_size(c);
        CHECK((sb & (sb - 1)) == 0);
        CHECK(sb / sizeclass_block_size[c] >= SIZECLASS_MIN_BLOCKS);
    }
}

/* Two orphan slots per CPU, 4 at least, all 16 from 8 CPUs on or when the count is
 * unknown (0). */
static void orphan_slots_follow_the_cpus(void)
{
    static const unsigned cpus[] = {0, 1, 2, 3, 7, 8, 9, 64, 4096};
    static const unsigned slots[] = {16, 4, 4, 6, 14, 16, 16, 16, 16};
    for (size_t i = 0; i < sizeof cpus / sizeof cpus[0]; i++)
        CHECK(tcache_orphan_slots(cpus[i]) == slots[i]);
}

static void pagemap_set_lookup_clear(void)
{
    static struct descriptor fake_a, fake_b;
    size_t size = 64 * OS_PAGE_SIZE;
    char *region = os_map(size, OS_PAGE_SIZE);
    REQUIRE(region);
    CHECK(pagemap_desc_or_null(region) == NULL);
    CHECK(pagemap_desc_or_null(NULL) == NULL);
    CHECK(pagemap_desc_or_null((void *)~(uintptr_t)0) == NULL);
    CHECK(pagemap_desc_or_null((void *)((uintptr_t)1 << 50)) == NULL);
    REQUIRE(pagemap_set(region, 32 * OS_PAGE_SIZE, &fake_a));
    REQUIRE(pagemap_set(region + 32 * OS_PAGE_SIZE, 32 * OS_PAGE_SIZE, &fake_b));
    for (size_t off = 0; off < size; off += 512)
        CHECK(pagemap_desc_or_null(region + off) == (off < 32 * OS_PAGE_SIZE ? &fake_a : &fake_b));
    CHECK(pagemap_desc_or_null(region - 1) != &fake_a);
    CHECK(pagemap_desc_or_null(region + size) != &fake_b);
    /* A clear takes back one registration (the page map's contract, asserted in the
     * tests' library): one call per descriptor. */
    REQUIRE(pagemap_set(region, 32 * OS_PAGE_SIZE, NULL));
    REQUIRE(pagemap_set(region + 32 * OS_PAGE_SIZE, 32 * OS_PAGE_SIZE, NULL));
    for (size_t off = 0; off < size; off += OS_PAGE_SIZE)
        CHECK(pagemap_desc_or_null(region + off) == NULL);
    CHECK(!pagemap_set((void *)((uintptr_t)1 << 48), OS_PAGE_SIZE, &fake_a));
    os_unmap(region, size);
}

static int mapped_aligned_and_writable(char *p, size_t size, size_t align)
{
    if (!p || ((uintptr_t)p & (align - 1)) != 0)
        return 0;
    p[0] = 1;
    p[size - 1] = 2;
    return p[0] == 1 && p[size - 1] == 2;
}

/* Aligned mappings: asked for where the kernel puts them anyway (no more address space
 * than their size), and when that address is taken, over-reserved and trimmed. */
static void os_map_aligns(void)
{
    size_t size = (size_t)4 << 20, align = (size_t)4 << 20;
    for (int i = 0; i < 8; i++) {
        char *p = os_map(size, align);
        CHECK(mapped_aligned_and_writable(p, size, align));
        if (p)
            os_unmap(p, size);
    }
    /* The hint taken: inside a reservation of our own, a hole a few MiB larger than the
     * mapping, a page above an aligned address A. The kernel, filling the address space
     * downward, puts the first (unaligned) mapping near the top of the hole if no higher
     * gap fits it (the size is large, so that none does; the slack is for kernels that
     * align large anonymous mappings to 2 MiB), and the aligned address at or below it,
     * A, is ours: the mapping has to be over-reserved and trimmed, outside. */
    size = align = (size_t)64 << 20;
    size_t span = size + 3 * align;
    char *range = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(range != MAP_FAILED);
    char *at = (char *)(((uintptr_t)range + align - 1) & ~(uintptr_t)(align - 1)) + align;
    REQUIRE(munmap(at + OS_PAGE_SIZE, size + ((size_t)4 << 20)) == 0);
    char *p = os_map(size, align);
    CHECK(mapped_aligned_and_writable(p, size, align));
    CHECK(p + size <= range || p >= range + span);
    if (p)
        os_unmap(p, size);
    munmap(range, span);
}

/* Takes all blocks of one fill, as a cache would: chain plus bump range. */
static size_t take_fill(struct heap_fill *f, void **out, size_t max)
{
    size_t n = 0;
    for (void *b = f->chain; b && n < max; b = *(void **)b)
        out[n++] = b;
    for (char *b = f->bump; b < f->bump_end && n < max; b += f->desc->block_size)
        out[n++] = b;
    return n;
}

/* heap_is_block_start is exact: for every class, every offset of a real superblock is
 * accepted if and only if it starts one of the superblock's blocks. */
static void heap_block_start_is_exact(void)
{
    for (unsigned cls = 0; cls < SIZECLASS_COUNT; cls++) {
        struct heap_fill f;
        REQUIRE(heap_fill(cls, 1, &f));
        struct descriptor *d = f.desc;
        size_t wrong = 0;
        for (size_t x = 0; x < d->size; x++) {
            bool expected = x % d->block_size == 0 && x / d->block_size < d->max_count;
            wrong += heap_is_block_start(d, d->start + x) != expected;
        }
        CHECK(wrong == 0);
        /* the first address past the last block is refused even when it is a multiple */
        CHECK(!heap_is_block_start(d, d->start + (size_t)d->max_count * d->block_size));
        /* heap_is_carved_block, free's test, accepts exactly the block starts below the
         * carve frontier, wherever the frontier is */
        uint32_t frontiers[] = {0, 1, d->max_count / 2, d->max_count - 1, d->max_count};
        for (size_t i = 0; i < sizeof frontiers / sizeof frontiers[0]; i++) {
            heap_set_carve_frontier(d, d->start + (size_t)frontiers[i] * d->block_size);
            size_t wrong_carved = 0;
            for (size_t x = 0; x < d->size; x++) {
                bool expected = x % d->block_size == 0 && x / d->block_size < frontiers[i];
                wrong_carved += heap_is_carved_block(d, d->start + x) != expected;
            }
            CHECK(wrong_carved == 0);
        }
        heap_give_back(d, NULL, NULL, 0, f.bump);
        CHECK(pagemap_desc_or_null(d->start) == NULL || pagemap_desc_or_null(d->start) != d);
    }
}

static void heap_superblock_cycle(void)
{
    unsigned cls = sizeclass_of(48);
    struct heap_fill f;
    REQUIRE(heap_fill(cls, 1, &f));
    struct descriptor *d = f.desc;
    CHECK(f.chain == NULL);
    size_t max = d->max_count;
    CHECK(max == sizeclass_superblock_size(cls) / 48);
    CHECK(pagemap_desc_or_null(f.bump) == d);
    CHECK(pagemap_desc_or_null(f.bump_end - 1) == d);
    /* carve 10, give the rest of the bump range back: the superblock becomes partial */
    char *start = f.bump;
    char *rest = f.bump + 10 * 48;
    heap_give_back(d, NULL, NULL, 0, rest);
    /* a second fill by the same thread finds it again, with the tail as a bump range */
    struct heap_fill g;
    REQUIRE(heap_fill(cls, 1, &g));
    CHECK(g.desc == d);
    CHECK(g.chain == NULL && g.chain_count == 0);
    CHECK(g.bump == rest);
    /* return the 10 carved blocks as one chain and the tail: everything free -> EMPTY,
     * the superblock goes back and its pages leave the page map */
    for (int i = 0; i < 9; i++)
        *(void **)(start + i * 48) = start + (i + 1) * 48;
    heap_give_back(d, start, start + 9 * 48, 10, g.bump);
    CHECK(pagemap_desc_or_null(start) == NULL);
}

/* A large block over the pages of a released superblock, all of which were registered:
 * the clear left no entry behind, so no address inside the block but its start finds a
 * descriptor (the superblock's, recycled, would take a pointer into the block). */
static void large_block_over_superblock_pages(void)
{
    unsigned cls = sizeclass_of(48);
    arena_purge_all(); /* no freed run waits: the superblock's is the one to reuse */
    struct heap_fill f;
    REQUIRE(heap_fill(cls, 1, &f));
    struct descriptor *d = f.desc;
    char *start = d->start;
    size_t size = d->size;
    REQUIRE(size > SIZECLASS_MAX_SIZE);
    CHECK(pagemap_desc_or_null(start + size - 1) == d);
    heap_give_back(d, NULL, NULL, 0, f.bump);
    bool zeroed;
    char *p = heap_large_alloc(size - 100, 16, &zeroed);
    REQUIRE(p);
    CHECK(p == start && !zeroed);
    struct descriptor *large = pagemap_desc_or_null(p);
    CHECK(large && large->class_index == HEAP_CLASS_LARGE && large->size == size);
    for (size_t off = OS_PAGE_SIZE; off < size; off += OS_PAGE_SIZE)
        CHECK(pagemap_desc_or_null(p + off) == NULL);
    heap_large_free(large);
    for (size_t off = 0; off < size; off += OS_PAGE_SIZE)
        CHECK(pagemap_desc_or_null(p + off) == NULL);
}

static void heap_full_to_empty_in_one_give_back(void)
{
    /* LRMalloc's listing leaks a superblock that goes FULL -> EMPTY in one flush. */
    unsigned cls = sizeclass_of(1024);
    struct heap_fill f;
    REQUIRE(heap_fill(cls, 7, &f));
    static void *blocks[4096];
    size_t n = take_fill(&f, blocks, 4096);
    CHECK(n == f.desc->max_count);
    char *first = blocks[0];
    for (size_t i = 0; i + 1 < n; i++)
        *(void **)blocks[i] = blocks[i + 1];
    heap_give_back(f.desc, blocks[0], blocks[n - 1], (uint32_t)n, NULL);
    CHECK(pagemap_desc_or_null(first) == NULL);
}

/* Several threads act as caches: fill, stamp every block with their id, give blocks back
 * in chains (sometimes another thread's), check no block is ever held twice. */
#define MT_THREADS 4
#define MT_ROUNDS  300
static _Atomic int mt_errors;

struct mt_shared {
    _Atomic(void *) exchange[MT_THREADS];
};
static struct mt_shared mt;

static void give_list(void **blocks, size_t n)
{
    size_t i = 0;
    while (i < n) {
        struct descriptor *d = pagemap_desc_or_null(blocks[i]);
        size_t j = i;
        while (j + 1 < n && pagemap_desc_or_null(blocks[j + 1]) == d) {
            *(void **)blocks[j] = blocks[j + 1];
            j++;
        }
        heap_give_back(d, blocks[i], blocks[j], (uint32_t)(j - i + 1), NULL);
        i = j + 1;
    }
}

static void *mt_worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    unsigned cls = sizeclass_of(64);
    static _Thread_local void *mine[8192];
    for (int round = 0; round < MT_ROUNDS; round++) {
        struct heap_fill f;
        if (!heap_fill(cls, id + 1, &f)) {
            atomic_fetch_add(&mt_errors, 1);
            return NULL;
        }
        size_t n = take_fill(&f, mine, 8192);
        if (n == 0 || n != f.chain_count + (size_t)(f.bump_end - f.bump) / 64)
            atomic_fetch_add(&mt_errors, 1);
        for (size_t i = 0; i < n; i++) {
            uint64_t *w = mine[i];
            if (pagemap_desc_or_null(w) != f.desc)
                atomic_fetch_add(&mt_errors, 1);
            w[1] = id;
            w[2] = (uint64_t)(uintptr_t)w;
        }
        /* verify stamps survive while we hold them */
        for (size_t i = 0; i < n; i++) {
            uint64_t *w = mine[i];
            if (w[1] != id || w[2] != (uint64_t)(uintptr_t)w)
                atomic_fetch_add(&mt_errors, 1);
        }
        /* hand one block to a neighbour, take the one offered to us */
        void *gift = mine[--n];
        void *got = atomic_exchange(&mt.exchange[(id + 1) % MT_THREADS], gift);
        if (got)
            mine[n++] = got;
        /* give everything back in chains, the neighbour's block among them */
        give_list(mine, n);
    }
    return NULL;
}

static void heap_concurrent_invariants(void)
{
    pthread_t t[MT_THREADS];
    for (uintptr_t i = 0; i < MT_THREADS; i++)
        pthread_create(&t[i], NULL, mt_worker, (void *)i);
    for (int i = 0; i < MT_THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&mt_errors) == 0);
    /* return the blocks still parked in the exchange slots */
    for (int i = 0; i < MT_THREADS; i++) {
        void *b = atomic_exchange(&mt.exchange[i], NULL);
        if (b)
            give_list(&b, 1);
    }
    /* every superblock of the class is now EMPTY: a fill must find a fresh one */
    struct heap_fill f;
    REQUIRE(heap_fill(sizeclass_of(64), 99, &f));
    CHECK(f.chain == NULL && f.bump == f.desc->start);
    heap_give_back(f.desc, NULL, NULL, 0, f.bump);
}

/* Superblocks that turn EMPTY while their descriptor sits on a partial stack, while other
 * threads pop (and recycle) those descriptors and reuse them for large blocks. Checks
 * that every block a fill hands out belongs to the superblock it came with and that all
 * superblocks come back. (The thread that empties a superblock must not touch its
 * descriptor after the CAS, since a popper may already have recycled it; that window is
 * too narrow to hit reliably here: the preloaded thread-churn and memory benchmarks hit
 * it about once in 25 runs before the fix.) */
#define EMPTY_THREADS 4
#define EMPTY_ROUNDS  3000
static _Atomic(void *) empty_mailbox[EMPTY_THREADS];
static _Atomic long empty_errors;

static void *empty_worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    unsigned cls = sizeclass_of(4096); /* 16 blocks per superblock */
    static _Thread_local void *mine[64];
    for (int round = 0; round < EMPTY_ROUNDS; round++) {
        struct heap_fill f;
        if (!heap_fill(cls, id + 1, &f)) {
            atomic_fetch_add(&empty_errors, 1);
            return NULL;
        }
        size_t n = take_fill(&f, mine, 64);
        for (size_t i = 0; i < n; i++)
            if (pagemap_desc_or_null(mine[i]) != f.desc)
                atomic_fetch_add(&empty_errors, 1);
        /* keep one block, give the rest back: the superblock becomes PARTIAL and goes
         * on a stack; the kept block goes to a neighbour, whose give-back empties it */
        give_list(mine, n - 1);
        void *other = atomic_exchange(&empty_mailbox[(id + 1) % EMPTY_THREADS], mine[n - 1]);
        if (other)
            give_list(&other, 1);
        /* recycle descriptors for large blocks meanwhile */
        bool zeroed;
        void *large = heap_large_alloc(40000, 16, &zeroed);
        if (!large)
            atomic_fetch_add(&empty_errors, 1);
        else
            heap_large_free(pagemap_desc_or_null(large));
    }
    return NULL;
}

static void heap_empty_while_on_partial_stack(void)
{
    pthread_t t[EMPTY_THREADS];
    for (uintptr_t i = 0; i < EMPTY_THREADS; i++)
        pthread_create(&t[i], NULL, empty_worker, (void *)i);
    for (int i = 0; i < EMPTY_THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < EMPTY_THREADS; i++) {
        void *b = atomic_exchange(&empty_mailbox[i], NULL);
        if (b)
            give_list(&b, 1);
    }
    CHECK(atomic_load(&empty_errors) == 0);
    /* everything was given back: the next fill starts a fresh superblock */
    struct heap_fill f;
    REQUIRE(heap_fill(sizeclass_of(4096), 77, &f));
    CHECK(f.chain == NULL && f.bump == f.desc->start);
    heap_give_back(f.desc, NULL, NULL, 0, f.bump);
}

static void large_blocks(void)
{
    bool zeroed;
    /* an arena run: 6/8 of an 8 MiB chunk, aligned to it, resized in place within it
     * while it holds at most a quarter more than the block, and grown in place over the
     * free chunks after it where a bigger run may start */
    arena_purge_all(); /* no freed run waits */
    size_t size = 5 * 1024 * 1024 + 123;
    char *p = heap_large_alloc(size, 16, &zeroed);
    REQUIRE(p);
    struct descriptor *d = pagemap_desc_or_null(p);
    REQUIRE(d);
    CHECK(d->class_index == HEAP_CLASS_LARGE && !d->os_backed);
    CHECK(d->size == 6 * 1024 * 1024 && ((uintptr_t)p & (8 * 1024 * 1024 - 1)) == 0);
    /* only its first page is registered: every other address inside it is refused */
    for (size_t off = OS_PAGE_SIZE; off < d->size; off += OS_PAGE_SIZE)
        CHECK(pagemap_desc_or_null(p + off) == NULL);
    CHECK(pagemap_desc_or_null(p + OS_PAGE_SIZE - 1) == d &&
          pagemap_desc_or_null(p + d->size) != d);
    memset(p, 0xab, size);
    CHECK(heap_large_resize(d, 5 * 1024 * 1024, 16) == p);
    CHECK(heap_large_resize(d, 7 * 1024 * 1024, 16) == p && d->size == 7 * 1024 * 1024);
    CHECK(p[0] == (char)0xab && p[size - 1] == (char)0xab);
    /* past its chunk, a run grows only over a free next chunk: here a taken one */
    struct buddy *buddy = arena_buddy(p);
    bool blocked = buddy_alloc_at(buddy, p + 8 * 1024 * 1024, 8 * 1024 * 1024);
    CHECK(heap_large_resize(d, 3 * size, 16) == NULL && d->size == 7 * 1024 * 1024);
    if (blocked)
        CHECK(buddy_free(buddy, p + 8 * 1024 * 1024));
    CHECK(heap_large_resize(d, size / 2, 16) == NULL);
    heap_large_free(d);
    CHECK(pagemap_desc_or_null(p) == NULL);
    /* a freed chunk is reused dirty, without zeroing */
    char *again = heap_large_alloc(size, 16, &zeroed);
    CHECK(again == p && !zeroed && again[0] == (char)0xab);
    heap_large_free(pagemap_desc_or_null(again));

    /* above the largest chunk: its own mapping, grown by moving pages */
    size_t huge = ARENA_MAX_CHUNK + 12345;
    char *h = heap_large_alloc(huge, 16, &zeroed);
    REQUIRE(h);
    d = pagemap_desc_or_null(h);
    CHECK(d->os_backed && zeroed);
    h[0] = 1;
    h[huge - 1] = 2;
    char *moved = heap_large_resize(d, 2 * huge, 16);
    REQUIRE(moved);
    CHECK(moved[0] == 1 && moved[huge - 1] == 2);
    CHECK(pagemap_desc_or_null(moved) == d && pagemap_desc_or_null(moved + OS_PAGE_SIZE) == NULL);
    CHECK(moved == h || pagemap_desc_or_null(h) == NULL);
    CHECK(heap_large_resize(d, huge, 16) == moved);
    CHECK(pagemap_desc_or_null(moved) == d);
    heap_large_free(d);
    CHECK(pagemap_desc_or_null(moved) == NULL);

    /* a zero-byte large request still gets a registered page of its own */
    char *z = heap_large_alloc(0, 8192, &zeroed);
    REQUIRE(z);
    CHECK(pagemap_desc_or_null(z) != NULL && ((uintptr_t)z & 8191) == 0);
    heap_large_free(pagemap_desc_or_null(z));
    char *a = heap_large_alloc(100000, 1 << 20, &zeroed);
    REQUIRE(a);
    CHECK(((uintptr_t)a & ((1 << 20) - 1)) == 0);
    heap_large_free(pagemap_desc_or_null(a));
}

int main(void)
{
    RUN(sizeclass_series);
    RUN(sizeclass_lookup_is_smallest_fit);
    RUN(sizeclass_aligned);
    RUN(orphan_slots_follow_the_cpus);
    RUN(pagemap_set_lookup_clear);
    RUN(os_map_aligns);
    RUN(heap_block_start_is_exact);
    RUN(heap_superblock_cycle);
    RUN(heap_full_to_empty_in_one_give_back);
    RUN(large_block_over_superblock_pages);
    RUN(heap_concurrent_invariants);
    RUN(heap_empty_while_on_partial_stack);
    RUN(large_blocks);
    RUN(kernel_version_from_the_vdso);
    return test_exit_status();
}
