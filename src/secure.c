/*
 * secure: the hardened build's keys, checks and reports (secure.h). Everything here runs
 * on the thread that holds the block it checks; nothing waits for another thread.
 */
#include "secure.h"

#include "out.h"

#include <stdlib.h>
#include <unistd.h>

#ifdef LFHEAP_SECURE

struct secure_keys secure_keys;

/* splitmix64's finaliser, to spread one seed over independent-looking keys. */
static uint64_t spread(uint64_t x)
{
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

/* Relaxed stores: heap_mark_init publishes them with the mark (release), before the
 * first block exists; racing callers pass the same seed and store the same keys. */
void secure_init(uint64_t seed)
{
    const char *fill = getenv("LFHEAP_SECURE_FILL");
    int byte = SECURE_FILL_POISON;
    if (fill && fill[0] == 'z')
        byte = 0;
    atomic_store_explicit(&secure_keys.fill, byte, memory_order_relaxed);
    atomic_store_explicit(&secure_keys.link, spread(seed ^ UINT64_C(0x6c696e6b)),
                          memory_order_relaxed);
    atomic_store_explicit(&secure_keys.canary, spread(seed ^ UINT64_C(0x63616e61)),
                          memory_order_relaxed);
}

void secure_fail(const char *kind, const char *routine, const void *ptr)
{
    struct out o;
    out_init(&o, STDERR_FILENO);
    out_str(&o, "lfheap: ");
    out_str(&o, kind);
    out_str(&o, ": ");
    out_str(&o, routine);
    out_str(&o, "(");
    out_hex(&o, (uintptr_t)ptr);
    out_str(&o, ")\n");
    out_flush(&o);
    abort();
}

void secure_check_reuse(void *block, size_t block_size, uint64_t mark, void *next)
{
    uint64_t word;
    memcpy(&word, (char *)block + sizeof word, sizeof word);
    /* Blocks are 16-aligned: a link that decodes otherwise was overwritten. */
    if (word != mark || ((uintptr_t)next & 15) != 0)
        secure_fail("write after free", "malloc", block);
    size_t end = block_size < 16 + SECURE_CHECK_BYTES ? block_size : 16 + SECURE_CHECK_BYTES;
    uint64_t fill = UINT64_C(0x0101010101010101) *
                    (unsigned char)atomic_load_explicit(&secure_keys.fill, memory_order_relaxed);
    uint64_t changed = 0;
    /* Word by word (blocks are multiples of 16 bytes), with no early exit. */
    for (size_t i = 16; i < end; i += sizeof word) {
        memcpy(&word, (char *)block + i, sizeof word);
        changed |= word ^ fill;
    }
    if (changed)
        secure_fail("write after free", "malloc", block);
}

void secure_check_free(void *block, size_t block_size)
{
    uint64_t canary;
    memcpy(&canary, (char *)block + block_size - sizeof canary, sizeof canary);
    if (canary != secure_canary(block))
        secure_fail("heap overflow", "free", block);
    if (block_size > 16)
        memset((char *)block + 16, atomic_load_explicit(&secure_keys.fill, memory_order_relaxed),
               block_size - 16);
}

#endif
