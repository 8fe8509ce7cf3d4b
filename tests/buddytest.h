/*
 * Helpers for the buddy tests: the tests' random numbers; whether a whole buddy tree is
 * back to its initial state (every node and every index entry zero); and the nodes that
 * are not, printed for a failure report. They read struct buddy (src/buddy.h) directly;
 * the status bits are NBBS Table 1 as src/buddy_impl.h defines them: the low five bits of a
 * 1-level node, five bits per slot in the low 20 bits of a packed bunch word (four
 * slots). The bits above are versions, which stay.
 */
#ifndef LFHEAP_BUDDYTEST_H
#define LFHEAP_BUDDYTEST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "buddy.h"

#define BUDDYTEST_NODE_STATUS 0x1fu
#define BUDDYTEST_WORD_SLOTS  ((UINT64_C(1) << (5 << (BUDDY_BUNCH_HEIGHT - 1))) - 1)

static inline size_t buddytest_words(const struct buddy *b)
{
    size_t words = 0;
    for (unsigned k = 0; k < b->bunch_levels; k++)
        words += (size_t)1 << buddy_bunch_root_level(b, k);
    return words;
}

/* xorshift64*: deterministic, one state per thread (or simulated thread). */
static inline uint64_t buddytest_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* Whether no node is marked and no chunk is recorded: the state after buddy_create. */
static inline bool buddytest_tree_empty(const struct buddy *b)
{
    if (b->flags & BUDDY_PACKED) {
        for (size_t i = 0; i < buddytest_words(b); i++)
            if (atomic_load_explicit(&b->words[i], memory_order_relaxed) & BUDDYTEST_WORD_SLOTS)
                return false;
    } else {
        for (size_t n = 1; n < ((size_t)2 << b->depth); n++)
            if (atomic_load_explicit(&b->tree[n], memory_order_relaxed) & BUDDYTEST_NODE_STATUS)
                return false;
    }
    for (size_t leaf = 0; leaf < ((size_t)1 << b->depth); leaf++)
        if (atomic_load_explicit(&b->index[leaf], memory_order_relaxed))
            return false;
    return true;
}

/* Prints the geometry and up to `limit` nodes (1-level) or bunches (packed) that are not
 * zero, with their status bits in hex (10 OCC, 02/01 occupied left/right, 08/04
 * coalescing left/right; a bunch shows its bottom slots), and the chunks index[]
 * still records. */
static inline void buddytest_print_tree(const struct buddy *b, unsigned limit)
{
    fprintf(stderr, "  tree: %s, size %zu, min chunk %zu, max chunk %zu (levels %u-%u), flags %u\n",
            (b->flags & BUDDY_PACKED) ? "packed" : "1-level", b->size, buddy_min_chunk(b),
            b->max_chunk, b->base_level, b->depth, b->flags);
    if (b->flags & BUDDY_PACKED) {
        for (unsigned k = 0; k < b->bunch_levels && limit; k++) {
            unsigned root_level = buddy_bunch_root_level(b, k);
            for (size_t i = 0; i < ((size_t)1 << root_level) && limit; i++) {
                uint64_t w =
                    atomic_load_explicit(&b->words[b->bunch_offset[k] + i], memory_order_relaxed);
                if (!(w & BUDDYTEST_WORD_SLOTS))
                    continue;
                limit--;
                fprintf(stderr,
                        "  bunch of node %zu (level %u), slots:", ((size_t)1 << root_level) + i,
                        root_level);
                for (unsigned s = 0; s < (1u << (BUDDY_BUNCH_HEIGHT - 1)); s++)
                    fprintf(stderr, " %02x", (unsigned)(w >> (5 * s)) & 0x1f);
                fprintf(stderr, "\n");
            }
        }
    } else {
        for (size_t n = 1; n < ((size_t)2 << b->depth) && limit; n++) {
            unsigned v =
                atomic_load_explicit(&b->tree[n], memory_order_relaxed) & BUDDYTEST_NODE_STATUS;
            if (!v)
                continue;
            limit--;
            fprintf(stderr, "  node %zu (level %u): %02x\n", n, 63u - (unsigned)__builtin_clzll(n),
                    v);
        }
    }
    for (size_t leaf = 0; leaf < ((size_t)1 << b->depth) && limit; leaf++) {
        unsigned tag = atomic_load_explicit(&b->index[leaf], memory_order_relaxed);
        if (!tag)
            continue;
        limit--;
        fprintf(stderr, "  index: chunk of level %u at offset %zu\n", tag - 1,
                leaf << b->min_shift);
    }
}

#endif
