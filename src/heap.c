/*
 * heap: descriptors, anchors and the partial-superblock stacks (LRMalloc §3.2).
 *
 * Lock-free stacks. Both the free-descriptor stack and the partial stacks are Treiber
 * stacks whose head is one 64-bit word: a descriptor index in the low 24 bits and a
 * 40-bit version above it, bumped by every push and pop. A pop that read a head, was
 * delayed while the same descriptor was popped and pushed back, and then CASes, fails
 * unless a multiple of 2^40 operations happened in between (the 6-bit tag of the
 * original LRMalloc code wraps after 64, a 32-bit one after 2^32: minutes of one CPU).
 *
 * Partial stacks are sharded per class; a superblock goes back to the shard of its last
 * owner, so that the thread that carved it finds it first (Streamflow's locality: remote
 * frees flow back to the owner), and other threads look at their own shard first.
 */
#include "heap.h"

#include "arena.h"
#include "invariant.h"
#include "mapcache.h"
#include "os.h"
#include "pagemap.h"
#include "park.h"
#include "platform.h"
#include "vgclient.h"
#include "stats.h"

#include <errno.h>
#include <string.h>

/* The anchor's invariants (heap_types.h, "States"), asserted of every anchor value a thread
 * reads from d->anchor (its load, or what a failed CAS returned) and of every value it
 * CASes or stores there: the count never exceeds the superblock's blocks and includes the
 * whole uncarved tail; FULL has no free block, PARTIAL some but not all, EMPTY all; the
 * chain is empty exactly when `avail` says none, and otherwise starts at a block start
 * below the tail (it holds freed blocks, which were carved). Cannot fire spuriously
 * under concurrency: the anchor checked is a value this thread read or wrote atomically,
 * whole (one 64-bit word), and the descriptor's other fields it uses (start, max_count,
 * block_size and the block-start magic) are written when the superblock is set up,
 * before any other thread can reach it, and not again until the descriptor is retired,
 * which cannot happen while the checking thread holds one of its blocks (give-back) or
 * has popped it from a partial stack (take) or is setting it up. */
static inline void anchor_check(const struct descriptor *d, uint64_t a)
{
    uint32_t count = anchor_count(a), tail = anchor_tail(a), max = d->max_count;
    unsigned state = anchor_state(a);
    LFH_INVARIANT("anchor count", tail <= max && count <= max && count >= max - tail);
    LFH_INVARIANT("anchor state", (state == ANCHOR_FULL && count == 0) ||
                                      (state == ANCHOR_PARTIAL && count != 0 && count != max) ||
                                      (state == ANCHOR_EMPTY && count == max));
    uint64_t avail = anchor_avail(a);
    LFH_INVARIANT("anchor avail", (avail == ANCHOR_AVAIL_NONE) == (count == max - tail));
    LFH_INVARIANT("anchor avail",
                  avail == ANCHOR_AVAIL_NONE || (heap_is_block_start(d, d->start + (avail << 4)) &&
                                                 (avail << 4) < (uint64_t)tail * d->block_size));
}

/* ---- descriptors ------------------------------------------------------------------ */

/* Descriptors live in chunks mapped on demand and never unmapped; index 0 means none. */
#define DESC_CHUNK_SHIFT 12
#define DESC_CHUNK_COUNT 4096 /* 16M descriptors: 1 TiB of 64 KiB superblocks */
#define DESC_NONE        0u

/* A stack head: the index of its top descriptor, and the version above. */
#define STACK_INDEX_BITS 24
#define STACK_INDEX_MASK ((1u << STACK_INDEX_BITS) - 1)
_Static_assert((uint64_t)DESC_CHUNK_COUNT << DESC_CHUNK_SHIFT <= (uint64_t)1 << STACK_INDEX_BITS,
               "every descriptor index fits in a stack head");

static _Atomic(struct descriptor *) desc_chunks[DESC_CHUNK_COUNT];
static _Atomic uint32_t desc_high_water;
static _Atomic uint64_t desc_free_stack;

static inline struct descriptor *desc_at(uint32_t index)
{
    /* Acquire pairs with the release CAS that installed the chunk. */
    struct descriptor *chunk =
        atomic_load_explicit(&desc_chunks[index >> DESC_CHUNK_SHIFT], memory_order_acquire);
    return &chunk[index & ((1u << DESC_CHUNK_SHIFT) - 1)];
}

static inline uint64_t stack_head(uint32_t index, uint64_t old_head)
{
    return (uint64_t)index | ((old_head >> STACK_INDEX_BITS) + 1) << STACK_INDEX_BITS;
}

static inline uint32_t stack_top(uint64_t head)
{
    return (uint32_t)head & STACK_INDEX_MASK;
}

static void stack_push(_Atomic uint64_t *head, struct descriptor *d)
{
    uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
    do {
        /* Relaxed: the release CAS below publishes this link together with everything
         * written to the descriptor before the push. */
        atomic_store_explicit(&d->next, stack_top(old), memory_order_relaxed);
        /* A failed CAS means another push or pop succeeded: lock-free. */
    } while (!atomic_compare_exchange_weak_explicit(head, &old, stack_head(d->self, old),
                                                    memory_order_release, memory_order_relaxed));
}

static struct descriptor *stack_pop(_Atomic uint64_t *head)
{
    /* Acquire pairs with the pushing CAS: the popped descriptor's fields and link are
     * those its pusher wrote. */
    uint64_t old = atomic_load_explicit(head, memory_order_acquire);
    struct descriptor *d;
    do {
        if (stack_top(old) == DESC_NONE)
            return NULL;
        d = desc_at(stack_top(old));
        /* The descriptor may be popped and reused meanwhile; then the version in the head
         * has moved on and the CAS below fails, so a stale `next` is never installed. */
        uint32_t next = atomic_load_explicit(&d->next, memory_order_relaxed);
        LFH_PARK(HEAP_STACK_POP);
        if (atomic_compare_exchange_weak_explicit(head, &old, stack_head(next, old),
                                                  memory_order_acquire, memory_order_acquire))
            return d;
        /* Failed: someone else pushed or popped (progress); retry with the new head. */
    } while (1);
}

/* The chunk of descriptors with index `chunk_index`, mapped if need be; NULL when out of
 * memory. */
static struct descriptor *desc_chunk(uint32_t chunk_index)
{
    if (chunk_index >= DESC_CHUNK_COUNT)
        return NULL;
    struct descriptor *chunk =
        atomic_load_explicit(&desc_chunks[chunk_index], memory_order_acquire);
    if (chunk)
        return chunk;
    size_t bytes = sizeof(struct descriptor) << DESC_CHUNK_SHIFT;
    struct descriptor *fresh = mapcache_map(bytes, OS_PAGE_SIZE);
    if (!fresh)
        return NULL;
    LFH_PARK(HEAP_DESC_CHUNK);
    /* Release publishes the zeroed chunk; on failure adopt the winner's chunk. */
    if (atomic_compare_exchange_strong_explicit(&desc_chunks[chunk_index], &chunk, fresh,
                                                memory_order_release, memory_order_acquire))
        return fresh;
    os_unmap(fresh, bytes);
    return chunk;
}

static struct descriptor *desc_alloc(void)
{
    struct descriptor *d = stack_pop(&desc_free_stack);
    if (d)
        return d;
    /* An index is taken only once its chunk is mapped, so running out of memory loses
     * none. Relaxed: the counter only hands out distinct indices; the chunk's
     * publication is ordered by its own CAS. */
    uint32_t high = atomic_load_explicit(&desc_high_water, memory_order_relaxed);
    struct descriptor *chunk;
    do {
        chunk = desc_chunk((high + 1) >> DESC_CHUNK_SHIFT);
        if (!chunk)
            return NULL;
        /* A failed CAS means another thread took an index: lock-free. */
    } while (!atomic_compare_exchange_weak_explicit(&desc_high_water, &high, high + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    LFH_PARK(HEAP_DESC_FRESH);
    d = &chunk[(high + 1) & ((1u << DESC_CHUNK_SHIFT) - 1)];
    d->self = high + 1;
    return d;
}

static void desc_retire(struct descriptor *d)
{
    stack_push(&desc_free_stack, d);
}

/* ---- the free mark ----------------------------------------------------------------- */

/* The secret that free keys are made from (heap_new_free_key): this value until the
 * first superblock, made random there (heap_mark_init), which no random value can equal
 * (its top bit is clear). */
#define HEAP_FREE_SECRET_INITIAL UINT64_C(0x6c66686561702121)

static _Atomic uint64_t heap_free_secret = HEAP_FREE_SECRET_INITIAL;

/* Before the first superblock is set up, so every free key is made from the random
 * secret. Every thread that gets here first computes the same secret and keys (os_random
 * is the same in all of a process's threads), so racing initialisations store equal
 * values. Release publishes the secure build's keys with the secret: a thread that sees
 * the secret set (acquire) and skips this sees the keys too, and a thread that frees a
 * block got it through the program from one that did. */
static void heap_mark_init(void)
{
    if (atomic_load_explicit(&heap_free_secret, memory_order_acquire) != HEAP_FREE_SECRET_INITIAL)
        return;
    /* The top bit set: the initial value lacks it. */
    uint64_t secret = os_random(0) | UINT64_C(1) << 63;
    if (SECURE_ENABLED)
        secure_init();
    atomic_store_explicit(&heap_free_secret, secret, memory_order_release);
}

/* Superblocks set up so far: each set-up's number makes its free key. */
static _Atomic uint64_t superblocks_keyed;

/* A free key for a superblock being set up (heap.h, the free mark), after heap_mark_init:
 * the secret combined with the set-up's number, mixed (SplitMix64's finaliser, a
 * bijection, so that no two set-ups' mixed numbers are equal and keys differ in every
 * bit, not only in a counter's low ones), its top bit set (heap_block_mark). Relaxed: the
 * fetch-and-add gives every set-up its own number in any order; the secret was read by
 * this thread after its own initialisation or its acquire in heap_mark_init. */
static uint64_t heap_new_free_key(void)
{
    uint64_t z = atomic_fetch_add_explicit(&superblocks_keyed, 1, memory_order_relaxed) +
                 UINT64_C(0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    z ^= z >> 31;
    uint64_t secret = atomic_load_explicit(&heap_free_secret, memory_order_relaxed);
    return (secret ^ z) | UINT64_C(1) << 63;
}

/* ---- partial stacks --------------------------------------------------------------- */

#define HEAP_SHARDS 8 /* a power of two */

struct partial_stack {
    alignas(LFH_CACHE_LINE) _Atomic uint64_t head;
};

static struct partial_stack partial_stacks[HEAP_CLASSES][HEAP_SHARDS];

static inline _Atomic uint64_t *partial_shard(unsigned cls, uint64_t tid)
{
    return &partial_stacks[cls][tid & (HEAP_SHARDS - 1)].head;
}

/* ---- superblocks ------------------------------------------------------------------ */

/* Blocks of an arena from this size on leave it when they must move to grow
 * (heap_large_move_out). Below it a copy costs about what the two mremap calls do. */
#define MOVE_OUT_MIN ((size_t)2 << 20)

/* A block that left its arena gives its pages to the kernel at its free, where a freed run
 * is reused resident: a program that grows a buffer and frees it again and again would
 * fault its pages in at every round. So the first such free raises the size from which
 * blocks leave past its own, as glibc raises its mmap threshold to the size of a freed
 * mapped chunk: the next rounds grow in their runs again. Relaxed: a threshold that only
 * picks between a move and a copy, both correct; a raise lost to a racing one is made
 * again at the next such free. */
static _Atomic size_t move_out_min = MOVE_OUT_MIN;
/* The raise stops there (glibc's own ceiling): bigger blocks cost more to copy than to
 * fault in again, and one freed block of 60 MiB would have kept every later one in. */
#define MOVE_OUT_MAX ((size_t)32 << 20)

static void move_out_raise(size_t freed)
{
    if (freed >= atomic_load_explicit(&move_out_min, memory_order_relaxed) && freed < MOVE_OUT_MAX)
        atomic_store_explicit(&move_out_min, freed + OS_PAGE_SIZE, memory_order_relaxed);
}

/* Gives back the pages of a large block, whose first page holds its page-map entry. */
static void large_pages_release(char *start, size_t size, bool os_backed, bool guarded)
{
    /* Clear the map first: once the pages are unmapped another mapping may take their
     * addresses and register them. */
    pagemap_set(start, OS_PAGE_SIZE, NULL);
    /* The secure build's guard page after a large block goes with the chunk (a mapping of
     * its own goes with its unmapping): the chunk's next tenant may put a block there. A
     * refusal keeps the chunk out of use, and its guard counted, rather than hand out a
     * trap. */
    if (SECURE_ENABLED && guarded) {
        if (!os_backed && !os_protect(start + size - SECURE_GUARD_BYTES, SECURE_GUARD_BYTES, true))
            return;
        secure_guard_put();
    }
    if (!os_backed) {
        arena_free(start, size);
        return;
    }
    if (size <= ARENA_MAX_CHUNK)
        move_out_raise(size);
    /* Kept for the next huge block (mapcache.h); the tick first gives back what waited
     * its delay, so that a program whose huge blocks never fit the kept ones (each a
     * little bigger) does not hold them until some small block's slow path. */
    arena_tick();
    /* Only blocks above an arena: a small block mapped on its own for its alignment
     * would take a slot that a huge block's pages could use. */
    if (size <= ARENA_MAX_CHUNK || !mapcache_put(start, size, platform_now_ms()))
        os_unmap_resident(start, size);
}

static bool superblock_new(unsigned cls, uint64_t tid, struct heap_fill *out)
{
    heap_mark_init();
    struct descriptor *d = desc_alloc();
    if (!d)
        return false;
    unsigned size_class = heap_size_class(cls);
    size_t size;
    bool zeroed;
    /* The chunk may be a freed run bigger than the class's superblock size (arena_alloc):
     * the superblock is as big as the chunk, and everything below reads its size. */
    char *start = arena_alloc(sizeclass_superblock_size(size_class), &zeroed, &size);
    if (!start) {
        desc_retire(d);
        return false;
    }
    d->os_backed = false;
    d->start = start;
    d->size = size;
    d->block_size = sizeclass_block_size[size_class];
    if (cls == size_class) {
        d->max_count = (uint32_t)(size / d->block_size);
        d->records = NULL;
    } else {
        /* A tracked class: each block has a 4-byte record, kept at the superblock's end. */
        d->max_count = (uint32_t)(size / (d->block_size + sizeof(uint32_t)));
        d->records = (uint32_t *)(start + size) - d->max_count;
    }
    /* The blocks are nobody's yet; a tracked superblock's records are lfheap's (memcheck
     * is told before the debug build writes them, or it would report the writes, and
     * then the reads of what it took for undefined). */
    vgclient_unused(start, (size_t)d->max_count * d->block_size);
    if (d->records) {
        vgclient_metadata(d->records, d->max_count * sizeof(uint32_t));
#if DEBUG_ENABLED
        /* The debug build's block states start at "never handed out" (a chunk may come
         * back dirty from an earlier tenant). */
        memset(d->records, 0, d->max_count * sizeof(uint32_t));
#endif
    }
    d->class_index = (uint8_t)cls;
    d->class_scaled = (uint16_t)(cls * SIZECLASS_STRIDE);
    d->free_key = heap_new_free_key();
    /* See heap_block_key: c = floor(2^64 / d) + 1, which for a power of two d is one more
     * than UINT64_MAX / d + 1. */
    uint64_t magic = UINT64_MAX / d->block_size + 1;
    if ((d->block_size & (d->block_size - 1)) == 0)
        magic++;
    d->block_magic = magic;
    d->block_limit = heap_block_key(d, start + (size_t)d->max_count * d->block_size);
    /* Relaxed: nobody else can reach this descriptor until its blocks are handed out. */
    atomic_store_explicit(&d->owner, tid, memory_order_relaxed);
    uint64_t anchor = anchor_make(ANCHOR_FULL, ANCHOR_AVAIL_NONE, 0, d->max_count);
    anchor_check(d, anchor);
    atomic_store_explicit(&d->anchor, anchor, memory_order_relaxed);
    /* The page map's publication orders it before any free of the blocks. */
    heap_set_carve_frontier(d, start);
    if (!pagemap_set(start, size, d)) {
        arena_free_superblock(start, size);
        desc_retire(d);
        return false;
    }
    STATS_ADD(STATS_SUPERBLOCKS_CREATED, 1);
    out->desc = d;
    out->chain = NULL;
    out->chain_count = 0;
    out->bump = start;
    out->bump_end = start + (size_t)d->max_count * d->block_size;
    return true;
}

/* Takes every free block of a descriptor just popped from a partial stack (LRMalloc
 * CacheFillFromPartialSB). False if it turned EMPTY meanwhile; then it is retired. */
static bool superblock_take_all(struct descriptor *d, uint64_t tid, struct heap_fill *out)
{
    /* Acquire (load and CAS) pairs with the release CAS of every give-back: the links
     * inside the chained blocks are visible before we walk or hand them out. */
    uint64_t old = atomic_load_explicit(&d->anchor, memory_order_acquire);
    uint64_t taken = anchor_make(ANCHOR_FULL, ANCHOR_AVAIL_NONE, 0, d->max_count);
    anchor_check(d, taken);
    do {
        anchor_check(d, old);
        if (anchor_state(old) == ANCHOR_EMPTY) {
            desc_retire(d);
            return false;
        }
        LFH_PARK(HEAP_TAKE_CAS);
        /* Only a FULL -> PARTIAL give-back pushes a descriptor, and only its popper
         * takes the blocks: a popped descriptor cannot be FULL. */
        LFH_INVARIANT("popped descriptor is partial", anchor_state(old) == ANCHOR_PARTIAL);
        /* A failed CAS means blocks were added: someone else made progress. */
    } while (!atomic_compare_exchange_weak_explicit(&d->anchor, &old, taken, memory_order_acquire,
                                                    memory_order_acquire));
    /* Relaxed: ownership is a locality hint; no block's correctness depends on it. */
    atomic_store_explicit(&d->owner, tid, memory_order_relaxed);
    uint32_t tail = anchor_tail(old);
    /* An uncarved tail in the anchor went back with its frontier (heap_give_back), and the
     * acquire CAS orders that store before this read. (A tail of max_count means the
     * anchor has none: a cache may still be carving.) */
    LFH_INVARIANT("anchor tail is the carve frontier",
                  tail == d->max_count ||
                      atomic_load_explicit(&d->carved_limit, memory_order_relaxed) ==
                          heap_block_key(d, d->start + (size_t)tail * d->block_size));
    out->desc = d;
    out->chain = anchor_chain(d, old);
    out->chain_count = anchor_count(old) - (d->max_count - tail);
    out->bump = d->start + (size_t)tail * d->block_size;
    out->bump_end = d->start + (size_t)d->max_count * d->block_size;
    return true;
}

bool heap_fill_partial(unsigned cls, uint64_t tid, struct heap_fill *out)
{
    arena_tick();
    for (unsigned i = 0; i < HEAP_SHARDS; i++) {
        _Atomic uint64_t *shard = partial_shard(cls, tid + i);
        struct descriptor *d;
        while ((d = stack_pop(shard)) != NULL) {
            LFH_PARK(HEAP_FILL_POPPED);
            if (superblock_take_all(d, tid, out))
                return true;
        }
    }
    return false;
}

bool heap_fill_new(unsigned cls, uint64_t tid, struct heap_fill *out)
{
    /* A refused mapping on the way may end in a success (kept mappings unmapped, a part
     * of an arena): the result says what happened, the program's errno stays (heap.h). */
    int saved_errno = errno;
    bool filled = superblock_new(cls, tid, out);
    errno = saved_errno;
    return filled;
}

/* The blocks of `d` below `bump`: those carved before it. */
static uint32_t blocks_before(const struct descriptor *d, const char *bump)
{
    return (uint32_t)((size_t)(bump - d->start) / d->block_size);
}

bool heap_only_range_held(const struct descriptor *d, const char *bump)
{
    uint32_t carved = blocks_before(d, bump);
    /* Relaxed: a hint (heap.h); a give-back that follows makes its own CAS. */
    uint64_t anchor = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    return anchor_count(anchor) == carved;
}

void heap_give_back(struct descriptor *d, void *first, void *last, uint32_t count, char *bump)
{
    uint32_t bump_index = bump ? blocks_before(d, bump) : 0;
    uint32_t returned = count + (bump ? d->max_count - bump_index : 0);
    /* Relaxed: the caller holds the tail, so nobody else writes the frontier; the CAS
     * below releases it to whoever takes the tail next. */
    if (bump)
        heap_set_carve_frontier(d, bump);
    if (returned == 0)
        return;
    /* No arena_tick here: give-backs are the most frequent slow path under remote frees,
     * and the fills and chunk releases (arena_free) that accompany them tick already. */
    /* The caller holds blocks of the superblock, so it is live and these are stable. */
    char *start = d->start;
    size_t size = d->size;
    uint64_t old = atomic_load_explicit(&d->anchor, memory_order_relaxed);
    uint64_t new;
    do {
        anchor_check(d, old);
        uint32_t new_count = anchor_count(old) + returned;
        /* The caller holds the blocks it returns, so the superblock is not EMPTY, and
         * cannot get more free blocks than it has. */
        LFH_INVARIANT("give-back within the superblock",
                      anchor_state(old) != ANCHOR_EMPTY && new_count <= d->max_count);
        uint64_t avail = anchor_avail(old);
        if (first) {
            /* The block is ours until the CAS succeeds; rewriting on retry is fine. */
            heap_link_set(last, anchor_chain(d, old));
            avail = (uint64_t)((char *)first - d->start) >> 4;
        }
        uint32_t tail = bump ? bump_index : anchor_tail(old);
        unsigned state = new_count == d->max_count ? ANCHOR_EMPTY : ANCHOR_PARTIAL;
        new = anchor_make(state, avail, new_count, tail);
        anchor_check(d, new);
        LFH_PARK(HEAP_GIVE_BACK_CAS);
        /* Release publishes the links written into the blocks to the thread that takes
         * them (its acquire CAS); acquire makes a thread whose give-back empties the
         * superblock see every earlier give-back's writes before it hands the pages on
         * (otherwise the next owner of the pages would not be ordered after them). A
         * failed CAS means another give-back or a take succeeded: lock-free. */
    } while (!atomic_compare_exchange_weak_explicit(&d->anchor, &old, new, memory_order_acq_rel,
                                                    memory_order_relaxed));
    if (anchor_state(new) == ANCHOR_EMPTY) {
        /* LRMalloc's listing pushes a FULL superblock that became EMPTY in one flush onto
         * the partial stack and leaks it; here it is released in both cases. From the
         * CAS on, `d` may only be touched if it is on no stack (old state FULL). */
        bool on_stack = anchor_state(old) != ANCHOR_FULL;
        LFH_PARK(HEAP_EMPTY_UNRELEASED);
        STATS_ADD(STATS_SUPERBLOCKS_RELEASED, 1);
        /* From copies made while the superblock was live: the thread that pops `d` may
         * recycle it at any moment now. The map is cleared first, as in
         * large_pages_release. */
        pagemap_set(start, size, NULL);
        arena_free_superblock(start, size);
        if (!on_stack)
            desc_retire(d);
    } else if (anchor_state(old) == ANCHOR_FULL) {
        stack_push(
            partial_shard(d->class_index, atomic_load_explicit(&d->owner, memory_order_relaxed)),
            d);
    }
}

/* ---- records of tracked and large blocks ----------------------------------------- */

static uint32_t record_flags(const struct heap_props *props)
{
    unsigned align_log2 = (unsigned)__builtin_ctzl(props->align);
    return (uint32_t)align_log2 << HEAP_RECORD_ALIGN_SHIFT |
           (props->zero_fill ? HEAP_RECORD_ZERO_FILL : 0) |
           (props->tracked ? HEAP_RECORD_TRACKED : 0);
}

static void record_decode(uint32_t record, struct heap_props *out)
{
    out->align = (size_t)1 << ((record >> HEAP_RECORD_ALIGN_SHIFT) & HEAP_RECORD_ALIGN_MASK);
    out->zero_fill = (record & HEAP_RECORD_ZERO_FILL) != 0;
    out->tracked = (record & HEAP_RECORD_TRACKED) != 0;
}

/* Records are plain memory: a block's record is written and read only by whoever holds
 * the block, and the program's own hand-off of the pointer orders those accesses. */
bool heap_props_get(const struct descriptor *d, const void *block, struct heap_props *out)
{
    if (d->class_index == HEAP_CLASS_LARGE) {
        record_decode(d->large_flags, out);
        out->request = d->large_request;
        return true;
    }
    if (!d->records)
        return false;
    uint32_t record = *heap_record_at(d, block);
    record_decode(record, out);
    out->request = record & HEAP_RECORD_REQUEST_MASK;
    out->tracked = true;
    return true;
}

/* The record bits heap_props_set keeps: the debug build's block state. */
#if DEBUG_ENABLED
#define RECORD_KEPT HEAP_RECORD_STATE_MASK
#else
#define RECORD_KEPT 0u
#endif

void heap_props_set(struct descriptor *d, const void *block, const struct heap_props *props)
{
    if (d->class_index == HEAP_CLASS_LARGE) {
        d->large_flags = (d->large_flags & RECORD_KEPT) | record_flags(props);
        d->large_request = props->request;
        return;
    }
    uint32_t *record = heap_record_at(d, block);
    *record = (*record & RECORD_KEPT) | record_flags(props) | (uint32_t)props->request;
}

/* ---- large blocks ----------------------------------------------------------------- */

static inline size_t round_to_pages(size_t size)
{
    return (size + OS_PAGE_SIZE - 1) & ~(OS_PAGE_SIZE - 1);
}

/* The secure build's guard page: the last page of the large block's pages. */
static bool guard_protect(const struct descriptor *d, bool accessible)
{
    return os_protect(d->start + d->size - SECURE_GUARD_BYTES, SECURE_GUARD_BYTES, accessible);
}

/* A large block's descriptor, `bytes` at `start` for a request of `size` (d->os_backed set
 * already). */
static void large_desc_fill(struct descriptor *d, char *start, size_t bytes, size_t size)
{
    d->start = start;
    d->size = bytes;
    d->block_size = 0;
    d->max_count = 0;
    d->class_index = HEAP_CLASS_LARGE;
    d->class_scaled = (uint16_t)(HEAP_CLASS_LARGE * SIZECLASS_STRIDE);
    /* The block key is the offset: its one block start, offset 0, is in the superblock's
     * sense carved (handed out). Relaxed, as for a superblock: the page map publishes it. */
    d->block_magic = 1;
    d->block_limit = 1;
    atomic_store_explicit(&d->carved_limit, 1, memory_order_relaxed);
    d->records = NULL;
    /* A plain malloc's record; the routines with sticky properties overwrite it. */
    d->large_request = size;
    d->large_flags = HEAP_RECORD_MALLOC;
    atomic_store_explicit(&d->owner, HEAP_OWNER_NONE, memory_order_relaxed);
}

void *heap_large_alloc(size_t size, size_t align, bool *zeroed)
{
    size_t bytes = round_to_pages(size ? size : 1) + SECURE_GUARD_BYTES;
    if (bytes < size)
        return NULL;
    struct descriptor *d = desc_alloc();
    if (!d)
        return NULL;
    char *start;
    /* A chunk is aligned to its own size: ask for at least `align` bytes. */
    size_t chunk_request = bytes < align ? align : bytes;
    d->os_backed = chunk_request > ARENA_MAX_CHUNK;
    if (d->os_backed) {
        /* A kept mapping holds its last tenant's bytes; a fresh one reads as zeros. The
         * tick first: a kept mapping that waited out the delay goes back rather than
         * serve a block of another size. */
        arena_tick();
        start = mapcache_take(bytes, align);
        *zeroed = start == NULL;
        if (!start) {
            arena_before_mapping(bytes);
            start = mapcache_map(bytes, align);
            if (start)
                os_advise_huge(start, bytes);
        }
    } else {
        start = arena_alloc_large(chunk_request, zeroed, &bytes);
    }
    if (!start) {
        desc_retire(d);
        return NULL;
    }
    large_desc_fill(d, start, bytes, size);
    /* Only the first page: every lookup of a large block is of its start (the pointer it
     * was handed out as, always d->start). Its other pages keep the empty entries that
     * the clears of their earlier tenants left (docs/ARCHITECTURE.md, "Page map"), so
     * that a lookup of an address inside it finds no descriptor and is refused, as the
     * block-start test refused it when every page named this one. Asserted here: the
     * block's pages are its own (the buddy's and the kernel's hand-off), and the
     * thread reads back entries that only the holder of a page writes. */
    LFH_INVARIANT("page map: a large block's other pages are unregistered",
                  pagemap_unregistered(start + OS_PAGE_SIZE, bytes - OS_PAGE_SIZE));
    if (!pagemap_set(start, OS_PAGE_SIZE, d)) {
        if (d->os_backed)
            os_unmap(start, bytes);
        else
            arena_free(start, bytes);
        desc_retire(d);
        return NULL;
    }
    /* The secure build's guard page right after the block's usable bytes, while the
     * budget of guard pages allows (secure_guard_take); the usable size leaves the page
     * out either way. */
    d->large_guarded = false;
    if (SECURE_ENABLED && secure_guard_take()) {
        d->large_guarded = guard_protect(d, false);
        if (!d->large_guarded)
            secure_guard_put();
    }
    vgclient_alloc(start, bytes);
    STATS_ADD(d->os_backed ? STATS_HUGE_ALLOCATED : STATS_LARGE_ALLOCATED, 1);
    STATS_ADD(d->os_backed ? STATS_HUGE_BYTES_IN : STATS_LARGE_BYTES_IN, bytes);
    return start;
}

bool heap_large_free(struct descriptor *d)
{
    /* The claim: the block's carve frontier drops from 1 to 0, so exactly one of two
     * racing frees goes on, and any later lookup finds the start no longer carved. Both
     * used to release its run, and two later blocks shared it. Relaxed: the exchange is
     * atomic, which is all the claim needs; the loser reads nothing more of the block,
     * and the winner's release of the run orders its own steps as before. A free that
     * checked the block before it was freed and reallocated cannot be told from a free of
     * the new block, here or in any allocator. */
    LFH_PARK(HEAP_LARGE_CLAIM);
    if (atomic_exchange_explicit(&d->carved_limit, 0, memory_order_relaxed) == 0)
        return false;
    vgclient_free(d->start);
    STATS_ADD(d->os_backed ? STATS_HUGE_FREED : STATS_LARGE_FREED, 1);
    STATS_ADD(d->os_backed ? STATS_HUGE_BYTES_OUT : STATS_LARGE_BYTES_OUT, d->size);
    large_pages_release(d->start, d->size, d->os_backed, d->large_guarded);
    desc_retire(d);
    return true;
}

/* The secure build's guard page ends a mapped block, and splits its mapping in two, where
 * mremap takes a range inside one mapping only: the guard opens for a resize (false if it
 * cannot: the block stays as it is) and closes again at the block's end then. */
static bool guard_open(struct descriptor *d)
{
    return !SECURE_ENABLED || !d->large_guarded || guard_protect(d, true);
}

/* A guard that cannot close (the kernel's mapping limit) is given up: the block goes on
 * without one, as the blocks past the guard budget do (secure_guard_take). */
static void guard_close(struct descriptor *d)
{
    if (!SECURE_ENABLED || !d->large_guarded || guard_protect(d, false))
        return;
    d->large_guarded = false;
    secure_guard_put();
}

/* A block of its own mapping resized to `bytes` (pages, and the guard page in the secure
 * build), where it is or elsewhere; NULL if neither, the block as it was. */
static void *mapping_resize(struct descriptor *d, size_t bytes, size_t align)
{
    char *old = d->start;
    size_t old_bytes = d->size;
    if (bytes < old_bytes) {
        /* Shrink in place: the tail holds no page-map entry (only the first page does,
         * and the block keeps it), so the kernel may hand it out at once. */
        os_unmap_resident(old + bytes, old_bytes - bytes);
        STATS_ADD(STATS_HUGE_BYTES_OUT, old_bytes - bytes);
        d->size = bytes;
        return old;
    }
    /* Grow where it is when the addresses after it are free: only the first page has a
     * page-map entry, so the mapping's size is all that changes. Moving at every step
     * made a block grown by 4 KiB at a time quadratic (to 128 MiB: 16,436 moves and
     * 7.5 s, where glibc's mremap moved it 12 times in 0.21 s). */
    if (os_grow(old, old_bytes, bytes)) {
        STATS_ADD(STATS_HUGE_BYTES_IN, bytes - old_bytes);
        d->size = bytes;
        return old;
    }
    /* Else reserve the destination ourselves and register it first, so that no step
     * after the move can fail; then let the kernel move the pages (no copy). The
     * reservation is twice the block, its second half given back at once: the kernel puts
     * a mapping into the highest gap that fits, often the hole an earlier move left just
     * as big, and a block grown a page at a time went back and forth between two such
     * holes at every page (to 64 MiB by 16 bytes: 5,600 moves in 6 s). The room after it
     * lets it grow where it is until another mapping takes the room. Refused (a limit on
     * the address space), the block's size alone, the kept mappings given back first if
     * need be (mapcache_map): not for the room's sake. */
    char *dest = bytes <= SIZE_MAX / 2 ? os_map(2 * bytes, align) : NULL;
    if (dest)
        os_unmap(dest + bytes, bytes);
    else
        dest = mapcache_map(bytes, align);
    if (!dest)
        return NULL;
    if (!pagemap_set(dest, OS_PAGE_SIZE, d)) {
        os_unmap(dest, bytes);
        return NULL;
    }
    pagemap_set(old, OS_PAGE_SIZE, NULL);
    if (!os_move(old, old_bytes, dest, bytes)) {
        pagemap_set(old, OS_PAGE_SIZE, d);
        pagemap_set(dest, OS_PAGE_SIZE, NULL);
        os_unmap(dest, bytes);
        return NULL;
    }
    STATS_ADD(STATS_HUGE_BYTES_IN, bytes - old_bytes);
    d->start = dest;
    d->size = bytes;
    return dest;
}

bool heap_large_stays(struct descriptor *d, size_t size)
{
    /* A block keeps its bytes (and the secure build's guard page their end): stay while
     * they are at most a quarter more than the block (arena_large_size's bound), and also
     * while the block grows within them or shrinks by at most a fifth, which adds little
     * or nothing to what it held already. A block given a whole reused run (when too many
     * live at once for arena_alloc_large to track) may hold up to ARENA_LARGE_REUSE_MAX
     * times its request, and a realloc by a few bytes of a block in such a run moved it
     * to another such run, copying it, every time (a block going back and forth between
     * two runs: gperftools' tcmalloc_unittest). */
    size_t bytes = round_to_pages(size) + SECURE_GUARD_BYTES;
    if (bytes < size)
        return false;
    /* A mapped block stays while its pages do: a buffer grown a byte at a time past its
     * arena (heap_large_move_out) took the general path at every byte, 1.5 times the
     * time of the whole growth. */
    if (d->os_backed)
        return bytes == d->size;
    /* The fifth is of the requests, not of their pages: rounded, a block of 17 pages
     * shrunk by 19% to 13 pages looked like a shrink by more than a fifth, and moved. */
    if (bytes <= d->size)
        return d->size - bytes <= bytes / 4 || size + size / 4 >= d->large_request;
    /* Past its bytes, a block that took part of a bigger freed run grows into the rest
     * (sqlite3's sorter doubles a buffer by realloc: moving it faulted in 10% more pages).
     * Not with a guard page at its end, which would have to move, nor under memcheck,
     * which sees a resize only as a move. */
    size_t extent = d->size;
    if ((SECURE_ENABLED && d->large_guarded) || vgclient_memcheck() ||
        !arena_large_regrow(d->start, &extent, bytes))
        return false;
    STATS_ADD(STATS_LARGE_BYTES_IN, extent - d->size);
    d->size = extent;
    return true;
}

void *heap_large_resize(struct descriptor *d, size_t size, size_t align)
{
    size_t bytes = round_to_pages(size) + SECURE_GUARD_BYTES;
    char *old = d->start;
    size_t old_bytes = d->size;
    if (bytes < size)
        return NULL;
    if (bytes == old_bytes)
        return old;
    if (!d->os_backed)
        return heap_large_stays(d, size) ? old : NULL;
    /* Under memcheck a block that changes size moves (memcheck then sees a malloc, a
     * copy and a free), so that no resize escapes its bookkeeping. */
    if (vgclient_memcheck() || !guard_open(d))
        return NULL;
    void *block = mapping_resize(d, bytes, align);
    guard_close(d);
    return block;
}

void *heap_large_move_out(struct descriptor *desc, size_t size, size_t align, size_t kept)
{
    size_t bytes = round_to_pages(size), moved = round_to_pages(kept);
    /* Not the debug and secure builds, whose blocks carry more than their bytes (the
     * debug build's records, the guard page), nor under memcheck, which sees a resize
     * only as a move; not a block aligned past a page, which the kernel's placement
     * would not keep. */
    if (DEBUG_ENABLED || SECURE_ENABLED || vgclient_memcheck() || desc->os_backed ||
        align > OS_PAGE_SIZE || moved < atomic_load_explicit(&move_out_min, memory_order_relaxed) ||
        moved > desc->size || bytes < size || bytes <= moved)
        return NULL;
    int saved_errno = errno; /* refused, the block is copied: errno as it was */
    struct descriptor *d = desc_alloc();
    char *start = d ? os_move_out(desc->start, moved, bytes) : NULL;
    if (start) {
        d->os_backed = true;
        large_desc_fill(d, start, bytes, size);
        LFH_INVARIANT("page map: a large block's other pages are unregistered",
                      pagemap_unregistered(start + OS_PAGE_SIZE, bytes - OS_PAGE_SIZE));
        if (!pagemap_set(start, OS_PAGE_SIZE, d)) {
            /* The old pages read as zeros now: the bytes go back by a copy. */
            memcpy(desc->start, start, moved);
            os_unmap(start, bytes);
            start = NULL;
        }
    }
    if (!start) {
        if (d)
            desc_retire(d);
        errno = saved_errno;
        return NULL;
    }
    d->large_guarded = false;
    vgclient_alloc(start, bytes);
    STATS_ADD(STATS_HUGE_ALLOCATED, 1);
    STATS_ADD(STATS_HUGE_BYTES_IN, bytes);
    return start;
}

/* Pages of a block's tail worth a madvise rather than a memset: a system call costs about
 * what clearing a few pages does, and the pages it gives back leave the resident set. */
#define ZERO_TAIL_DECOMMIT_MIN (16 * OS_PAGE_SIZE)

/* Blocks whose zeros are worth asking which pages are resident: below it a memset costs
 * less than the question. */
#define ZERO_SPARSE_MIN (64 * OS_PAGE_SIZE)

void heap_large_zero(struct descriptor *d, size_t request)
{
    size_t end = d->size - SECURE_GUARD_BYTES;
    /* A reused run is as resident as its tenants left it: one that touched a page in
     * sixteen (a sparse table, a bitmap) left most of it absent, and a memset would fault
     * every page in, where the program may touch few. Then one madvise drops the pages
     * (absent or swapped out) and they read as zeros: glibc's fresh mapping, without its
     * mmap. Mostly resident, the memset is cheaper than faulting the pages in again. Under
     * memcheck a decommit would not be seen as zeros: the memset is. */
    if (request >= ZERO_SPARSE_MIN && !vgclient_memcheck() &&
        os_mostly_absent(d->start, round_to_pages(request)) && os_decommit(d->start, end))
        return;
    memset(d->start, 0, request);
    heap_large_zero_tail(d, request);
}

void heap_large_zero_tail(struct descriptor *d, size_t from)
{
    size_t end = d->size - SECURE_GUARD_BYTES;
    size_t page_end = round_to_pages(from);
    if (from >= end)
        return;
    /* Under memcheck a decommit would not be seen as zeros: the memset is. */
    if (end > page_end && end - page_end >= ZERO_TAIL_DECOMMIT_MIN && !vgclient_memcheck() &&
        os_decommit(d->start + page_end, end - page_end))
        end = page_end;
    memset(d->start + from, 0, end - from);
}

/* ---- usage --------------------------------------------------------------------------- */

void heap_usage_get(struct heap_usage *out)
{
    *out = (struct heap_usage){0};
    /* Relaxed everywhere, and GCC's atomic loads of the plain fields: other threads set
     * descriptors up and retire them meanwhile, and a figure that mixes moments is all
     * that is asked. A descriptor counts if the page map names it for its first page:
     * live superblocks and large blocks, never retired ones (their pages are cleared
     * before they go back). */
    uint32_t high = atomic_load_explicit(&desc_high_water, memory_order_relaxed);
    for (uint32_t i = 1; i <= high; i++) {
        struct descriptor *d = desc_at(i);
        char *start = __atomic_load_n(&d->start, __ATOMIC_RELAXED);
        if (pagemap_desc_or_null(start) != d)
            continue;
        size_t size = __atomic_load_n(&d->size, __ATOMIC_RELAXED);
        if (__atomic_load_n(&d->class_index, __ATOMIC_RELAXED) == HEAP_CLASS_LARGE) {
            if (__atomic_load_n(&d->os_backed, __ATOMIC_RELAXED)) {
                out->mapped_blocks++;
                out->mapped_bytes += size;
            } else {
                out->arena_in_use += size;
            }
            continue;
        }
        /* Blocks handed out at least once, from the carve frontier's key (the frontier's
         * index times e, heap_block_key), less those free on the anchor's chain. */
        uint64_t anchor = atomic_load_explicit(&d->anchor, memory_order_relaxed);
        uint32_t block_size = __atomic_load_n(&d->block_size, __ATOMIC_RELAXED);
        uint32_t max_count = __atomic_load_n(&d->max_count, __ATOMIC_RELAXED);
        uint64_t e = __atomic_load_n(&d->block_magic, __ATOMIC_RELAXED) * block_size;
        uint64_t carved = e ? atomic_load_explicit(&d->carved_limit, memory_order_relaxed) / e : 0;
        uint64_t chained = anchor_count(anchor) - (uint64_t)(max_count - anchor_tail(anchor));
        if (anchor_state(anchor) != ANCHOR_EMPTY && carved <= max_count && chained <= carved)
            out->arena_in_use += (size_t)(carved - chained) * block_size;
    }
}

#if OS_FAULT_INJECTION
/* ---- test view -------------------------------------------------------------------- */

/* Descriptors on a stack; with only_empty, those of EMPTY superblocks only. The heap is
 * quiescent: acquire on the head is all it takes to read what the last pushes wrote. */
static size_t stack_length(_Atomic uint64_t *head, bool only_empty)
{
    size_t length = 0;
    uint32_t index = stack_top(atomic_load_explicit(head, memory_order_acquire));
    while (index != DESC_NONE) {
        struct descriptor *d = desc_at(index);
        uint64_t anchor = atomic_load_explicit(&d->anchor, memory_order_relaxed);
        length += !only_empty || anchor_state(anchor) == ANCHOR_EMPTY;
        index = atomic_load_explicit(&d->next, memory_order_relaxed);
    }
    return length;
}

size_t heap_descriptors_in_use(void)
{
    size_t in_use = atomic_load_explicit(&desc_high_water, memory_order_relaxed);
    in_use -= stack_length(&desc_free_stack, false);
    for (size_t cls = 0; cls < sizeof partial_stacks / sizeof partial_stacks[0]; cls++)
        for (unsigned shard = 0; shard < HEAP_SHARDS; shard++)
            in_use -= stack_length(&partial_stacks[cls][shard].head, true);
    return in_use;
}
#endif
