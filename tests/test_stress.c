/*
 * Stress: threads allocate blocks of random sizes (1 B to several MiB, mostly small),
 * with malloc, calloc (checked to read as zeros) or memalign (checked for alignment), fill
 * each with a pattern derived from its size and a tag, and swap them into a shared array
 * of slots, so most blocks are freed (or reallocated) by a thread other than the one that
 * allocated them. Every block's pattern and alignment are checked before it is freed (a
 * reallocated block keeps its alignment, and a zero-filled one reads as zeros where it
 * grew), and the number of live blocks is checked at the end.
 *
 * Usage: test_stress [threads] [operations per thread]
 */
#include "alloc_names.h"
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#define SLOTS 4096

struct header {
    size_t size;
    uint64_t tag;
    uint32_t align;     /* what memalign was asked for; 16 otherwise */
    uint32_t zero_fill; /* from calloc */
};

static _Atomic(unsigned char *) slots[SLOTS];
static _Atomic long corrupt_blocks;
static _Atomic long live_blocks;
static long ops_per_thread = 200000;

static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static size_t random_size(uint64_t *rng)
{
    uint64_t r = next_random(rng);
    switch (r % 100) {
    case 0:
        return 1 + (r >> 8) % (4u << 20); /* large: up to 4 MiB */
    case 1:
    case 2:
    case 3:
        return 1 + (r >> 8) % 65536; /* medium */
    default:
        return 1 + (r >> 8) % 512; /* small */
    }
}

static inline unsigned char pattern_byte(uint64_t tag, size_t i)
{
    return (unsigned char)(tag * 31 + i * 7 + (i >> 9));
}

/* Offsets that get the pattern: all of a small block, a sample of a large one. */
static inline size_t pattern_step(size_t size)
{
    return size <= 8192 ? 1 : 61;
}

static void fill(unsigned char *block, size_t size, uint64_t tag, uint32_t align, int zero_fill)
{
    if (size >= sizeof(struct header)) {
        struct header h = {size, tag, align, (uint32_t)zero_fill};
        memcpy(block, &h, sizeof h);
    }
    for (size_t i = sizeof(struct header); i < size; i += pattern_step(size))
        block[i] = pattern_byte(tag, i);
    if (size > sizeof(struct header))
        block[size - 1] = pattern_byte(tag, size - 1);
}

static int verify(const unsigned char *block)
{
    struct header h;
    memcpy(&h, block, sizeof h);
    if (h.size < sizeof(struct header) || T_MALLOC_USABLE_SIZE((void *)block) < h.size)
        return 0;
    if ((uintptr_t)block % h.align != 0)
        return 0;
    for (size_t i = sizeof(struct header); i < h.size; i += pattern_step(h.size))
        if (block[i] != pattern_byte(h.tag, i))
            return 0;
    return h.size == sizeof(struct header) || block[h.size - 1] == pattern_byte(h.tag, h.size - 1);
}

static void *worker(void *arg)
{
    uint64_t rng = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    for (long op = 0; op < ops_per_thread; op++) {
        size_t size = random_size(&rng);
        if (size < sizeof(struct header))
            size = sizeof(struct header);
        uint64_t tag = next_random(&rng);
        unsigned kind = (unsigned)(next_random(&rng) % 16);
        uint32_t align = kind == 1 ? 16u << (next_random(&rng) % 9) : 16;
        unsigned char *block = kind == 0   ? T_CALLOC(1, size)
                               : kind == 1 ? T_MEMALIGN(align, size)
                                           : T_MALLOC(size);
        if (!block) {
            atomic_fetch_add(&corrupt_blocks, 1);
            continue;
        }
        if (kind == 0)
            for (size_t i = 0; i < size; i += pattern_step(size))
                if (block[i] != 0) {
                    atomic_fetch_add(&corrupt_blocks, 1);
                    break;
                }
        fill(block, size, tag, align, kind == 0);
        atomic_fetch_add(&live_blocks, 1);
        unsigned slot = (unsigned)(next_random(&rng) % SLOTS);
        unsigned char *old = atomic_exchange(&slots[slot], block);
        if (!old)
            continue;
        if (!verify(old))
            atomic_fetch_add(&corrupt_blocks, 1);
        if (next_random(&rng) % 8 == 0) {
            /* resize someone else's block: contents up to the smaller size survive */
            struct header h;
            memcpy(&h, old, sizeof h);
            size_t new_size = random_size(&rng) + sizeof(struct header);
            unsigned char *moved = T_REALLOC(old, new_size);
            if (!moved) {
                atomic_fetch_add(&corrupt_blocks, 1);
                continue;
            }
            size_t keep = h.size < new_size ? h.size : new_size;
            for (size_t i = sizeof(struct header); i + 1 < keep; i += pattern_step(h.size))
                if (moved[i] != pattern_byte(h.tag, i)) {
                    atomic_fetch_add(&corrupt_blocks, 1);
                    break;
                }
            /* sticky properties (llheap): the alignment stays, grown zero-fill bytes are 0 */
            if ((uintptr_t)moved % h.align != 0)
                atomic_fetch_add(&corrupt_blocks, 1);
            if (h.zero_fill)
                for (size_t i = h.size; i < new_size; i += pattern_step(new_size))
                    if (moved[i] != 0) {
                        atomic_fetch_add(&corrupt_blocks, 1);
                        break;
                    }
            old = moved;
        }
        T_FREE(old);
        atomic_fetch_sub(&live_blocks, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2)
        ops_per_thread = atol(argv[2]);
    pthread_t t[256];
    REQUIRE(threads > 0 && threads <= 256);
    for (intptr_t i = 0; i < threads; i++)
        REQUIRE(pthread_create(&t[i], NULL, worker, (void *)i) == 0);
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    long in_slots = 0;
    for (int i = 0; i < SLOTS; i++) {
        unsigned char *b = atomic_exchange(&slots[i], NULL);
        if (!b)
            continue;
        in_slots++;
        CHECK(verify(b));
        T_FREE(b);
    }
    CHECK(atomic_load(&corrupt_blocks) == 0);
    CHECK(in_slots == atomic_load(&live_blocks));
    printf("%s stress_%d_threads\n", test_failures ? "FAIL" : "PASS", threads);
    return test_exit_status();
}
