/*
 * The arena layer: chunks from several threads never overlap, a chunk is never
 * decommitted while it is in use (its contents survive concurrent purges), dirty chunks
 * are reused, and once everything is freed and purged the arenas coalesce completely.
 */
#include "arena.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define THREADS 4
#define OPS     3000
#define HELD    24

static _Atomic long corrupt;
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

static void *worker(void *arg)
{
    uint64_t id = (uintptr_t)arg;
    uint64_t rng = 0x2545F4914F6CDD1Dull * (id + 1);
    char *held[HELD] = {0};
    size_t sizes[HELD] = {0};
    uint64_t tags[HELD] = {0};
    for (int op = 0; op < OPS; op++) {
        unsigned slot = (unsigned)(next_random(&rng) % HELD);
        if (held[slot]) {
            if (!stamped(held[slot], sizes[slot], tags[slot]))
                atomic_fetch_add(&corrupt, 1);
            arena_free(held[slot], sizes[slot]);
        }
        size_t size = (size_t)4096 << (next_random(&rng) % 9); /* 4 KiB .. 1 MiB */
        bool zeroed;
        char *p = arena_alloc(size, &zeroed);
        if (!p || ((uintptr_t)p & (arena_chunk_size(size) - 1))) {
            atomic_fetch_add(&corrupt, 1);
            held[slot] = NULL;
            continue;
        }
        if (zeroed && !stamped(p, size, 0))
            atomic_fetch_add(&corrupt, 1); /* promised zeros, found data */
        held[slot] = p;
        sizes[slot] = size;
        tags[slot] = id << 32 | (uint64_t)op;
        stamp(p, size, tags[slot]);
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
        whole[got] = arena_alloc(ARENA_MAX_CHUNK, &zeroed);
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
    char *a = arena_alloc(64 * 1024, &zeroed);
    REQUIRE(a);
    memset(a, 0x5c, 64 * 1024);
    arena_free(a, 64 * 1024);
    char *b = arena_alloc(60 * 1024, &zeroed); /* same chunk size: the dirty one */
    CHECK(b == a && !zeroed && b[100] == 0x5c);
    arena_free(b, 60 * 1024);
    CHECK(arena_purge_all() >= 1);
    char *c = arena_alloc(64 * 1024, &zeroed); /* purged: comes back zeroed */
    REQUIRE(c);
    CHECK(zeroed && c[100] == 0);
    arena_free(c, 64 * 1024);
}

/* A large block takes a freed chunk twice its size when none of its own size waits, and
 * only then; superblock-sized requests never do. */
static void large_blocks_reuse_a_double_chunk(void)
{
    arena_purge_all(); /* no chunk waits */
    bool zeroed;
    size_t chunk;
    char *a = arena_alloc_large(12 << 20, &zeroed, &chunk);
    REQUIRE(a);
    CHECK(chunk == (16u << 20) && zeroed);
    memset(a, 0x3d, 12 << 20);
    arena_free(a, chunk);
    char *b = arena_alloc_large(5 << 20, &zeroed, &chunk); /* 8 MiB wanted, 16 MiB waits */
    CHECK(b == a && chunk == (16u << 20) && !zeroed && b[(12 << 20) - 1] == 0x3d);
    char *c = arena_alloc_large(5 << 20, &zeroed, &chunk); /* nothing waits: a fresh one */
    REQUIRE(c);
    CHECK(c != a && chunk == (8u << 20) && zeroed);
    arena_free(b, 16 << 20);
    arena_free(c, 8 << 20);
    /* below the threshold the size is exact */
    char *d = arena_alloc_large(ARENA_LARGE_REUSE_MIN, &zeroed, &chunk);
    REQUIRE(d);
    arena_free(d, chunk);
    char *e = arena_alloc_large(ARENA_LARGE_REUSE_MIN / 2, &zeroed, &chunk);
    REQUIRE(e);
    CHECK(chunk == ARENA_LARGE_REUSE_MIN / 2 && e != d);
    arena_free(e, chunk);
    arena_purge_all();
}

int main(void)
{
    RUN(dirty_chunks_are_reused);
    RUN(large_blocks_reuse_a_double_chunk);
    RUN(concurrent_chunks_with_purges);
    RUN(everything_coalesces_after_purge);
    return test_exit_status();
}
