/*
 * arena: arenas of NBBS instances and the stacks of dirty chunks waiting to be purged.
 *
 * Arenas: as many as the address space holds (no table bounds their number). Each new
 * arena is first entered in the registry, a two-level table indexed by the arena's
 * address (its base divided by ARENA_SIZE) whose leaves are mapped on first use and
 * installed by CAS, and then pushed onto a list, newest first, that allocations walk. An
 * arena is never unmapped once on the list, and its registry slot never changes again, so
 * a pointer to it, or a stale lookup of one of its chunks, is always safe to follow.
 *
 * Runs (arena.h): large blocks' rows of buddy chunks, of four sizes per power of two.
 *
 * Dirty stacks: one per run class (4 KiB .. 64 MiB, four per power of two) in each of
 * DIRTY_ROWS rows; a thread pushes the runs it frees onto its own row and pops its own row
 * first, so that a superblock's chunk goes back to the thread whose caches hold its lines
 * (Streamflow's locality), and any other row before a fresh chunk. A run's link
 * (the address of the run below it) and the time it was freed live in its arena's side
 * arrays, never in the run, so a thread that reads a link is never reading memory
 * somebody else is using. The head is the top run's address. A pop takes the whole stack
 * with one CAS and puts all but its top back with another, so that no CAS expects a top
 * that may have been popped and pushed again meanwhile (ABA; see dirty_top). The purger
 * takes a whole stack the same way, releases what is old enough, and pushes the rest
 * back as one chain.
 *
 * Purging runs from the slow paths (arena_tick) and, with LFHEAP_BACKGROUND=1, from a
 * thread of its own that sleeps between rounds (the background purger, below), so that a
 * program that stops calling lfheap gets its memory back too. Both run the same step and
 * compete for the same CAS: no thread waits for the purger, nor the purger for anyone.
 */
#include "arena.h"

#include "buddy.h"
#include "common.h"
#include "invariant.h"
#include "mapcache.h"
#include "os.h"
#include "park.h"
#include "platform.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#define ARENA_SHIFT     26 /* log2(ARENA_SIZE) */
#define ARENA_MIN_SHIFT 12 /* log2(ARENA_MIN_CHUNK) */
#define ARENA_PAGES     (ARENA_SIZE / ARENA_MIN_CHUNK)
#define ARENA_ORDERS    15 /* log2(ARENA_MAX_CHUNK / ARENA_MIN_CHUNK) + 1 */
/* Run classes: four per order, 5/8, 6/8, 7/8 and 8/8 of the order's chunk size (class
 * 4 * order + 3 is the whole chunk). A run is a row of buddy chunks covering its class's
 * size from a multiple of its order's chunk size: carved fresh, one per set bit of its
 * eighths (5/8: a half, then an eighth), the rest of the chunk staying free in its buddy;
 * extended (run_extend), whatever aligned chunks filled the gap. So a fresh or extended
 * run holds less than a quarter more than its block asked for (a freed one reused whole
 * up to ARENA_LARGE_REUSE_MAX times), and a buddy's index tells a run's pieces. */
#define ARENA_CLASSES (ARENA_ORDERS * 4)
/* Orders whose eighth is at least a page: the only ones with runs smaller than a chunk. */
#define RUN_MIN_ORDER 3
/* How many times a run is carved out of a fresh chunk before the chunk is kept whole. */
#define RUN_ATTEMPTS 2
_Static_assert(ARENA_SIZE == (size_t)1 << ARENA_SHIFT, "ARENA_SHIFT");
_Static_assert(ARENA_MIN_CHUNK == (size_t)1 << ARENA_MIN_SHIFT, "ARENA_MIN_SHIFT");

/* The registry: a leaf is one page of arena pointers (512 arenas, 32 GiB of address
 * space); the root, in .bss, has a slot per leaf up to OS_ADDRESS_LIMIT (8,192 slots,
 * 64 KiB of address space that stays untouched but for the slots in use). */
#define REGISTRY_LEAF_SLOTS (OS_PAGE_SIZE / sizeof(void *))
#define REGISTRY_ROOT_SLOTS (((size_t)1 << (OS_ADDRESS_BITS - ARENA_SHIFT)) / REGISTRY_LEAF_SLOTS)

/* How long a freed chunk stays dirty (reusable without a system call) before its pages
 * go back to the kernel; LFHEAP_PURGE_MS overrides it. */
#define ARENA_PURGE_DELAY_MS 250

struct arena {
    struct buddy *buddy;
    char *base;
    /* Bytes mapped from base: ARENA_SIZE, or a power of two below it for an arena mapped
     * when a whole one did not fit the address space (arena_map); its buddy holds the
     * rest of the slot taken for ever, so no chunk of it is handed out. */
    size_t backed;
    struct arena *older;                    /* next on the list; set before the push */
    _Atomic uintptr_t next[ARENA_PAGES];    /* dirty-stack link of the chunk at a page */
    _Atomic uint32_t freed_ms[ARENA_PAGES]; /* that chunk's free stamp (free_stamp) */
    _Atomic uint64_t tail[ARENA_PAGES];     /* the tail word of the run at a page (tails) */
    /* A bit per page free in the buddy but maybe resident (merged runs, below). */
    _Atomic uint64_t dirty_free[ARENA_PAGES / 64];
};

/* A freed chunk's stamp: the millisecond it was freed, rounded down to an odd one if the
 * chunk held a superblock, to an even one if a large block (never up: a purge in the
 * same millisecond would read the chunk as freed 2^32 - 1 ms ago). A purge that released
 * only superblocks' chunks is not scored against the fresh runs that follow it
 * (purge_due): a freed superblock's pages were small blocks' pages, and a fresh large run
 * of that size is no sign that the purge was early. */
static inline uint32_t free_stamp(uint32_t now, bool superblock)
{
    return superblock ? (now - 1) | 1 : now & ~(uint32_t)1;
}

static inline bool stamp_held_superblock(uint32_t stamp)
{
    return (stamp & 1) != 0;
}

typedef _Atomic(struct arena *) registry_slot;

static _Atomic(registry_slot *) registry[REGISTRY_ROOT_SLOTS];
static _Atomic(struct arena *) arena_list; /* the newest arena; NULL before the first */

/* The dirty stacks, a row per group of threads. With one row, two threads that each
 * filled and emptied 7.5 MiB of 256-byte blocks per round took each other's freed
 * superblocks, and the lines the other core held, every round: a round took twice as
 * long as with one thread; with a row each, 1.7 times (mimalloc 1.1; docs/BENCHMARKS.md,
 * "Freed chunks stay with their thread"). A thread's row is a hint: any row is correct,
 * as every pop looks at all of them before a fresh chunk is taken. */
#define DIRTY_ROWS 8
struct dirty_row {
    _Alignas(LFH_CACHE_LINE) _Atomic uint64_t head[ARENA_CLASSES];
};
static struct dirty_row dirty_rows[DIRTY_ROWS];
static _Atomic unsigned dirty_rows_assigned;
static __thread unsigned dirty_row_plus_one; /* this thread's row + 1; 0 before its first */
static _Atomic uint32_t last_purge_ms;
static _Atomic int purge_delay_ms = -1;
static __thread struct arena *arena_hint; /* the arena this thread last allocated from */

/* Bytes of runs out of the buddies (held: in use or waiting to be purged) and of those
 * waiting on the dirty stacks (dirty), for mostly_dirty. A run freed or handed out again
 * changes dirty only, a fresh run held only, a purged one both. Approximate by design:
 * the counts are updated by relaxed adds beside the stack operations, and a purge that
 * has taken a stack counts its runs until it releases them. Aligned away from the stack
 * heads, which every chunk allocation and free touches too. */
static struct {
    _Alignas(64) _Atomic size_t held;
    _Atomic size_t dirty;
} run_bytes;

/* Relaxed: the counts publish nothing; readers take them as a glance and act on the
 * stacks, which carry their own ordering. `delta` wraps for a subtraction. */
static inline void bytes_add(_Atomic size_t *count, size_t delta)
{
    atomic_fetch_add_explicit(count, delta, memory_order_relaxed);
}

/* At least MOSTLY_DIRTY_MIN bytes of runs wait on the dirty stacks, and more than are in
 * use: the process holds more freed memory than live memory. Relaxed glances, acted on
 * through the stacks' own CAS. */
#define MOSTLY_DIRTY_MIN ((size_t)8 << 20)
static bool mostly_dirty(void)
{
    size_t dirty = atomic_load_explicit(&run_bytes.dirty, memory_order_relaxed);
    size_t held = atomic_load_explicit(&run_bytes.held, memory_order_relaxed);
    return dirty >= MOSTLY_DIRTY_MIN && dirty > held / 2; /* more than held - dirty */
}

#define PURGE_DELAY_MAX_MS 60000

/* LFHEAP_PURGE_MS: a whole number of milliseconds, above PURGE_DELAY_MAX_MS taken as that;
 * anything else (empty, a word, a negative number, a number with a unit) leaves the
 * default, where it was once read as 0 and made every freed chunk go back at once.
 * Read digit by digit rather than with strtol, whose ERANGE for a number past LONG_MAX
 * was left in errno by the malloc that first read the setting. */
static int purge_delay_setting(const char *env)
{
    if (!env || *env == '\0')
        return ARENA_PURGE_DELAY_MS;
    int value = 0;
    for (const char *digit = env; *digit != '\0'; digit++) {
        if (*digit < '0' || *digit > '9')
            return ARENA_PURGE_DELAY_MS;
        value = value * 10 + (*digit - '0');
        if (value > PURGE_DELAY_MAX_MS)
            value = PURGE_DELAY_MAX_MS; /* saturates: never near INT_MAX */
    }
    return value;
}

static uint32_t purge_delay(void)
{
    /* Relaxed: every thread computes the same value from the environment. */
    int delay = atomic_load_explicit(&purge_delay_ms, memory_order_relaxed);
    if (delay < 0) {
        delay = purge_delay_setting(platform_getenv("LFHEAP_PURGE_MS"));
        atomic_store_explicit(&purge_delay_ms, delay, memory_order_relaxed);
    }
    return (uint32_t)delay;
}

size_t arena_chunk_size(size_t size)
{
    size_t chunk = ARENA_MIN_CHUNK;
    while (chunk < size)
        chunk <<= 1;
    return chunk;
}

static unsigned chunk_order(size_t chunk)
{
    return (unsigned)__builtin_ctzl(chunk) - ARENA_MIN_SHIFT;
}

static inline unsigned class_order(unsigned cls)
{
    return cls >> 2;
}

static inline unsigned whole_class(unsigned order)
{
    return 4 * order + 3;
}

/* The eighths of its order's chunk that a run of this class holds: 5 to 8. */
static inline size_t class_eighths(unsigned cls)
{
    return 5 + (cls & 3);
}

static inline size_t class_size(unsigned cls)
{
    return class_eighths(cls) << (ARENA_MIN_SHIFT + class_order(cls) - 3);
}

/* The smallest class of at least `size` bytes (up to ARENA_MAX_CHUNK). */
static unsigned size_class_of(size_t size)
{
    unsigned order = chunk_order(arena_chunk_size(size));
    if (order < RUN_MIN_ORDER)
        return whole_class(order);
    size_t eighth = (size_t)1 << (ARENA_MIN_SHIFT + order - 3);
    size_t eighths = (size + eighth - 1) / eighth; /* 5..8: size is above half the chunk */
    return eighths < 5 ? whole_class(order) : 4 * order + (unsigned)(eighths - 5);
}

size_t arena_large_size(size_t size)
{
    return class_size(size_class_of(size));
}

/* ---- the registry ----------------------------------------------------------------- */

/* The registry leaf for addresses with this root index, mapped and installed if missing
 * (NULL if it cannot be mapped). Two threads that both find the slot empty both map a
 * leaf; the loser unmaps its own and uses the winner's, so nobody waits. */
static registry_slot *registry_leaf(size_t root_index)
{
    /* Acquire pairs with the release CAS below: the leaf is complete when seen. */
    registry_slot *leaf = atomic_load_explicit(&registry[root_index], memory_order_acquire);
    if (leaf)
        return leaf;
    registry_slot *fresh = os_map(REGISTRY_LEAF_SLOTS * sizeof(registry_slot), OS_PAGE_SIZE);
    if (!fresh)
        return NULL;
    LFH_PARK(ARENA_LEAF_MAPPED);
    /* Release publishes the (zeroed) leaf; acquire on failure reads the winner's. */
    if (atomic_compare_exchange_strong_explicit(&registry[root_index], &leaf, fresh,
                                                memory_order_release, memory_order_acquire))
        return fresh;
    os_unmap(fresh, REGISTRY_LEAF_SLOTS * sizeof(registry_slot));
    return leaf;
}

/* The registry slot of the arena at `base`, NULL if its leaf cannot be mapped. */
static registry_slot *registry_slot_of(const char *base)
{
    uintptr_t index = (uintptr_t)base >> ARENA_SHIFT;
    registry_slot *leaf = registry_leaf(index / REGISTRY_LEAF_SLOTS);
    return leaf ? &leaf[index % REGISTRY_LEAF_SLOTS] : NULL;
}

/* The arena that holds `chunk`, which must lie in a registered arena (every chunk this
 * layer hands out or takes back does): two dependent loads. */
static struct arena *arena_of(const void *chunk)
{
    uintptr_t index = (uintptr_t)chunk >> ARENA_SHIFT;
    /* Acquire pairs with the release CAS that installed the leaf, and with the release
     * store that registered the arena: its fields are complete when seen. */
    registry_slot *leaf =
        atomic_load_explicit(&registry[index / REGISTRY_LEAF_SLOTS], memory_order_acquire);
    return atomic_load_explicit(&leaf[index % REGISTRY_LEAF_SLOTS], memory_order_acquire);
}

static size_t chunk_page(const struct arena *a, const void *chunk)
{
    return (size_t)((const char *)chunk - a->base) / ARENA_MIN_CHUNK;
}

/* ---- dirty stacks ----------------------------------------------------------------- */

/* The calling thread's row, given out round robin at its first use. Relaxed: the counter
 * only spreads threads over the rows, and a signal handler that gives the thread a second
 * row meanwhile costs locality, nothing else. */
static unsigned dirty_row_own(void)
{
    unsigned row = dirty_row_plus_one;
    if (LFH_UNLIKELY(row == 0)) {
        row =
            atomic_fetch_add_explicit(&dirty_rows_assigned, 1, memory_order_relaxed) % DIRTY_ROWS +
            1;
        dirty_row_plus_one = row;
    }
    return row - 1;
}

static inline _Atomic uint64_t *dirty_stack(unsigned row, unsigned cls)
{
    return &dirty_rows[row].head[cls];
}

/* A stack's head is its top run's address (0: empty), with no version against ABA: no
 * CAS on it keeps what it read below the top it expected. A push links its chain to the
 * top it read, so if that run is the top again when the CAS succeeds, what lies below it
 * is the stack as it now is; a take (dirty_take_all) empties the stack, whatever lies
 * below; a put-back (dirty_put_back) expects an empty head. The pop that compared the
 * head with the top it read and installed that top's link once carried a version of 28
 * to 32 bits, and a popper stopped while one run was popped and pushed 2^27 times got
 * its stale link in: a live run back on the stack (found by a review). */
static inline char *dirty_top(uint64_t head)
{
    return (char *)(uintptr_t)head;
}

static inline uint64_t dirty_head(const void *top)
{
    return (uint64_t)(uintptr_t)top;
}

/* Pushes the chain first..last (linked through the side arrays) onto a class's stack. */
static void dirty_push_chain(unsigned row, unsigned cls, char *first, char *last)
{
    _Atomic uint64_t *head = dirty_stack(row, cls);
    struct arena *a = arena_of(last);
    _Atomic uintptr_t *link = &a->next[chunk_page(a, last)];
    uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
    do {
        /* Relaxed: published by the release CAS below. */
        atomic_store_explicit(link, (uintptr_t)dirty_top(old), memory_order_relaxed);
        /* A failed CAS means another push or pop succeeded: lock-free. */
    } while (!atomic_compare_exchange_weak_explicit(head, &old, dirty_head(first),
                                                    memory_order_release, memory_order_relaxed));
}

/* Takes a class's whole stack, leaving it empty: the chain from its top, or NULL. */
static char *dirty_take_all(unsigned row, unsigned cls)
{
    _Atomic uint64_t *head = dirty_stack(row, cls);
    uint64_t old = atomic_load_explicit(head, memory_order_acquire);
    /* Acquire: we will read the links and stamps of the whole chain. */
    while (dirty_top(old) &&
           !atomic_compare_exchange_weak_explicit(head, &old, dirty_head(NULL),
                                                  memory_order_acquire, memory_order_acquire))
        ;
    return dirty_top(old);
}

/* Puts the chain that a pop took back onto its stack, under the runs pushed since the
 * take (taken in turn and linked above it: only their few links are walked). */
static void dirty_put_back(unsigned row, unsigned cls, char *chain)
{
    _Atomic uint64_t *head = dirty_stack(row, cls);
    uint64_t old = atomic_load_explicit(head, memory_order_relaxed);
    for (;;) {
        /* Release: the chain's links (and the pushed runs' links set below) travel with
         * it. A CAS from an empty head expects no top, so no ABA: a failure means another
         * push succeeded (lock-free). */
        if (!dirty_top(old) &&
            atomic_compare_exchange_weak_explicit(head, &old, dirty_head(chain),
                                                  memory_order_release, memory_order_relaxed))
            return;
        if (!dirty_top(old))
            continue;
        char *pushed = dirty_take_all(row, cls), *last = pushed;
        if (!pushed) {
            old = atomic_load_explicit(head, memory_order_relaxed);
            continue;
        }
        for (;;) {
            struct arena *a = arena_of(last);
            _Atomic uintptr_t *link = &a->next[chunk_page(a, last)];
            char *next = (char *)atomic_load_explicit(link, memory_order_relaxed);
            if (!next) {
                atomic_store_explicit(link, (uintptr_t)chain, memory_order_relaxed);
                break;
            }
            last = next;
        }
        chain = pushed;
        old = atomic_load_explicit(head, memory_order_relaxed);
    }
}

/* A pop takes the whole stack (dirty_take_all) and puts back all but its top
 * (dirty_put_back), two CASes that no stale head can fool (see dirty_top). While a popper
 * holds the chain, other threads find the stack empty and take other rows' runs or fresh
 * ones. */
static char *dirty_pop_row(unsigned row, unsigned cls)
{
    /* Relaxed: a glance, most stacks are empty; the take decides. */
    if (!dirty_top(atomic_load_explicit(dirty_stack(row, cls), memory_order_relaxed)))
        return NULL;
    char *top = dirty_take_all(row, cls);
    if (!top)
        return NULL;
    LFH_PARK(ARENA_DIRTY_POP);
    /* The take's acquire made the pushers' links visible. */
    struct arena *a = arena_of(top);
    char *rest = (char *)atomic_load_explicit(&a->next[chunk_page(a, top)], memory_order_relaxed);
    if (rest)
        dirty_put_back(row, cls, rest);
    return top;
}

/* A freed run of class `cls`: the calling thread's row first, then the others in turn. */
static char *dirty_pop(unsigned cls)
{
    unsigned own = dirty_row_own();
    for (unsigned i = 0; i < DIRTY_ROWS; i++) {
        char *run = dirty_pop_row((own + i) % DIRTY_ROWS, cls);
        if (run)
            return run;
    }
    return NULL;
}

/* Pushes one run onto the calling thread's row. */
static void dirty_push(unsigned cls, char *run)
{
    dirty_push_chain(dirty_row_own(), cls, run, run);
}

/* True if some row holds a run of class `cls` (relaxed: a glance, acted on later). */
static bool dirty_class_waiting(unsigned cls)
{
    for (unsigned row = 0; row < DIRTY_ROWS; row++)
        if (dirty_top(atomic_load_explicit(dirty_stack(row, cls), memory_order_relaxed)))
            return true;
    return false;
}

/* ---- tails of reused runs ----------------------------------------------------------- */

/* A large block that takes a freed run bigger than a fresh run for it would be
 * (arena_alloc_large) is given only its extent, arena_large_size(size) bytes of the run;
 * the rest, the run's tail, keeps the pages its earlier tenants left resident, which the
 * block never uses. Taking such runs saves `large` most of its page faults, but a block
 * that then lives long kept those pages for nothing: git repack peaked at 145 MB against
 * glibc's 122 (docs/BENCHMARKS.md, "Large blocks"). So the run is registered, and the
 * purge that finds its block alive a purge delay later decommits the tail; a block freed
 * sooner (nearly every one in `large`) cost its registration only.
 *
 * The run's tail word (struct arena, tail[] at its first page) says where it stands, with
 * the block's extent and the run's size in pages and the millisecond of the registration:
 *   TAIL_NONE      no registered block: every other run, and a run once its block is freed;
 *   TAIL_PENDING   a live block whose tail was not decommitted yet;
 *   TAIL_TRIMMING  a purge has claimed the tail and is decommitting it;
 *   TAIL_TRIMMED   a live block whose tail was decommitted (or the kernel refused to);
 *   TAIL_FREED     the block was freed while its tail was being decommitted: the purge
 *                  that claimed it gives the run back when its system call is done.
 * Invariants: a run whose word is PENDING, TRIMMING or TRIMMED holds a live block and is on
 * no stack; only the purge that moved the word to TRIMMING decommits the tail, and only
 * while the word is TRIMMING or FREED. A free moves the word to NONE before its run goes on
 * a stack, or, finding TRIMMING, to FREED, and leaves the run to the purge: nobody waits
 * for a system call another thread makes. The slots are hints where to look, a run each;
 * the word is the truth, so a slot left over from an earlier tenant is harmless: a purge
 * reads the current tenant's word through it. This hand-off is lfheap's own: none of the
 * four designs gives back part of a live block's run (docs/ARCHITECTURE.md, "Tails of
 * reused runs"). */
enum tail_state { TAIL_NONE, TAIL_PENDING, TAIL_TRIMMING, TAIL_TRIMMED, TAIL_FREED };

#define TAIL_STATE_BITS 3
#define TAIL_PAGES_BITS 16 /* up to 65,535 pages: an arena has 16,384 */
#define TAIL_MS_SHIFT   (TAIL_STATE_BITS + 2 * TAIL_PAGES_BITS)
#define TAIL_MS_MASK    (((uint32_t)1 << (64 - TAIL_MS_SHIFT)) - 1) /* 29 bits: 6 days */
_Static_assert(ARENA_PAGES < (1u << TAIL_PAGES_BITS), "tail word: pages");

static inline uint64_t tail_word(enum tail_state state, size_t extent, size_t run, uint32_t ms)
{
    return (uint64_t)state | (uint64_t)(extent / ARENA_MIN_CHUNK) << TAIL_STATE_BITS |
           (uint64_t)(run / ARENA_MIN_CHUNK) << (TAIL_STATE_BITS + TAIL_PAGES_BITS) |
           (uint64_t)(ms & TAIL_MS_MASK) << TAIL_MS_SHIFT;
}

static inline enum tail_state tail_state(uint64_t word)
{
    return (enum tail_state)(word & ((1u << TAIL_STATE_BITS) - 1));
}

static inline uint64_t tail_with_state(uint64_t word, enum tail_state state)
{
    return (word & ~(uint64_t)((1u << TAIL_STATE_BITS) - 1)) | state;
}

static inline uint64_t tail_with_extent(uint64_t word, size_t extent)
{
    uint64_t mask = (uint64_t)((1u << TAIL_PAGES_BITS) - 1) << TAIL_STATE_BITS;
    return (word & ~mask) | (uint64_t)(extent / ARENA_MIN_CHUNK) << TAIL_STATE_BITS;
}

static inline size_t tail_extent(uint64_t word)
{
    return (size_t)(word >> TAIL_STATE_BITS & ((1u << TAIL_PAGES_BITS) - 1)) * ARENA_MIN_CHUNK;
}

static inline size_t tail_run(uint64_t word)
{
    return (size_t)(word >> (TAIL_STATE_BITS + TAIL_PAGES_BITS) & ((1u << TAIL_PAGES_BITS) - 1)) *
           ARENA_MIN_CHUNK;
}

/* A block registered after the purge read its clock (the purge's walk took a while, or
 * it was stopped) is young, not days old: a difference past half the mask (3 days) is
 * such a registration's, and reads as 0. */
static inline uint32_t tail_age(uint64_t word, uint32_t now)
{
    uint32_t age = (now - (uint32_t)(word >> TAIL_MS_SHIFT)) & TAIL_MS_MASK;
    return age > TAIL_MS_MASK / 2 ? 0 : age;
}

/* True if a purge at `now` may claim the tail in `word`: its block lived `delay` ms, or
 * the purge is malloc_trim's (`force`). */
static inline bool tail_due(uint64_t word, uint32_t now, uint32_t delay, bool force)
{
    return force || tail_age(word, now) >= delay;
}

/* Where the purges look for registered runs. A block that finds no free slot among
 * TAIL_PROBES is not registered: it gets the whole run, as before registration existed,
 * and its tail stays resident until it is freed. So at most TAIL_SLOTS blocks at a time
 * (8 KiB of slots) have their tails given back while they live. */
#define TAIL_SLOTS  1024
#define TAIL_PROBES 8
static _Atomic uintptr_t tail_slots[TAIL_SLOTS];
static _Atomic unsigned tail_cursor;
static _Atomic unsigned tail_slots_used; /* a glance for the purges: 0 skips the scan */

static _Atomic uint64_t *tail_word_of(struct arena *a, const char *run)
{
    return &a->tail[chunk_page(a, run)];
}

/* Registers the run `run` of `run_size` bytes, just taken for a block of `extent` bytes;
 * false if no slot was free. Relaxed on the cursor and the slot: they only say where to
 * look (a purge that reads the slot before the word is stored finds TAIL_NONE and empties
 * the slot: that block's tail then stays until its free, as an unregistered one's).
 * Release on the word: a purge that reads it (acquire) and decommits the tail then comes
 * after the earlier tenant's writes there, which reached this thread through the dirty
 * stack's pop. */
static bool tail_register(char *run, size_t extent, size_t run_size)
{
    unsigned first = atomic_fetch_add_explicit(&tail_cursor, 1, memory_order_relaxed);
    for (unsigned i = 0; i < TAIL_PROBES; i++) {
        _Atomic uintptr_t *slot = &tail_slots[(first + i) % TAIL_SLOTS];
        uintptr_t empty = 0;
        if (atomic_load_explicit(slot, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong_explicit(slot, &empty, (uintptr_t)run,
                                                     memory_order_relaxed, memory_order_relaxed))
            continue;
        atomic_fetch_add_explicit(&tail_slots_used, 1, memory_order_relaxed);
        struct arena *a = arena_of(run);
        atomic_store_explicit(tail_word_of(a, run),
                              tail_word(TAIL_PENDING, extent, run_size, platform_now_ms()),
                              memory_order_release);
        return true;
    }
    return false;
}

/* The free of the block in `run` (arena_free's `size`, its extent if it was registered):
 * the run's size to give back, or 0 if a purge is decommitting its tail and will give
 * it back (TAIL_FREED). Acquire, on TAIL_TRIMMED: the purge's decommit comes before the
 * run goes on a stack and to its next tenant; release, on TAIL_FREED: this thread's last
 * steps with the block come before the purge's push. A failed CAS means a purge moved
 * the word meanwhile; the loop takes its new value (lock-free: each retry follows
 * another thread's progress). */
static size_t tail_settle(struct arena *a, const char *run, size_t size)
{
    _Atomic uint64_t *word = tail_word_of(a, run);
    uint64_t old = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        enum tail_state state = tail_state(old);
        if (state == TAIL_NONE)
            return size;
        LFH_INVARIANT("tail: the word of a live block's run", state != TAIL_FREED);
        uint64_t new = state == TAIL_TRIMMING ? tail_with_state(old, TAIL_FREED) : 0;
        if (atomic_compare_exchange_weak_explicit(word, &old, new, memory_order_acq_rel,
                                                  memory_order_acquire))
            return state == TAIL_TRIMMING ? 0 : tail_run(old);
    }
}

static bool run_extend(char *from, char *to, bool *merged);

/* Grows in place the run of a block that holds all of its run (no registered tail), of
 * *extent bytes, to the smallest class that holds `bytes`, taking the free buddy chunks
 * after it (run_extend): the run must start where a run of that class may (aligned to its
 * chunk). A buffer that grows by realloc a little at a time outgrew its run and was
 * copied into another at every other step: 64 such buffers grown to 3.4 MB each faulted
 * in twice the pages glibc's mremap did. Chunks that were merged from freed runs may
 * hold pages their tenants left resident; past `bytes` the block does not use them yet,
 * so they go back (a fresh chunk's pages there are not resident: nothing to give). */
static bool run_grow(char *run, size_t *extent, size_t bytes)
{
    if (bytes > ARENA_MAX_CHUNK)
        return false;
    unsigned old_cls = size_class_of(*extent), cls = size_class_of(bytes);
    bool merged;
    if (class_size(old_cls) != *extent || cls <= old_cls ||
        ((uintptr_t)run & ((ARENA_MIN_CHUNK << class_order(cls)) - 1)) ||
        !run_extend(run + *extent, run + class_size(cls), &merged))
        return false;
    if (merged && class_size(cls) > bytes)
        os_decommit(run + bytes, class_size(cls) - bytes);
    bytes_add(&run_bytes.held, class_size(cls) - *extent);
    *extent = class_size(cls);
    return true;
}

bool arena_large_regrow(void *block, size_t *extent, size_t bytes)
{
    struct arena *a = arena_of(block);
    _Atomic uint64_t *word = tail_word_of(a, block);
    /* Acquire, on TAIL_TRIMMED: the purge's decommit of the tail comes before the block's
     * writes there (the purge's release CAS). A failed CAS means a purge claimed the tail
     * meanwhile (TRIMMING: no growth now) or finished it (TRIMMED: try again). */
    uint64_t old = atomic_load_explicit(word, memory_order_acquire);
    for (;;) {
        enum tail_state state = tail_state(old);
        /* No registered tail: only this block's caller changes the word (registration
         * comes with the run, and the purges claim registered words only). */
        if (state == TAIL_NONE)
            return run_grow(block, extent, bytes);
        size_t run = tail_run(old);
        if ((state != TAIL_PENDING && state != TAIL_TRIMMED) || bytes > run ||
            bytes <= tail_extent(old))
            return false;
        size_t wanted = arena_large_size(bytes), grown = wanted < run ? wanted : run;
        if (atomic_compare_exchange_weak_explicit(word, &old, tail_with_extent(old, grown),
                                                  memory_order_acquire, memory_order_acquire)) {
            *extent = grown;
            return true;
        }
    }
}

static void run_freed(struct arena *a, void *chunk, size_t size, bool superblock);

/* Decommits the tails of the registered blocks that lived `delay` ms (every one with
 * force: malloc_trim), dropping the slots of blocks freed since; returns how many tails it
 * claimed. Called by the purges, one at a time but for malloc_trim's (any overlap is safe:
 * the claim is a CAS). */
static size_t tails_trim(uint32_t now, uint32_t delay, bool force)
{
    size_t claimed = 0;
    if (atomic_load_explicit(&tail_slots_used, memory_order_relaxed) == 0)
        return 0;
    for (unsigned i = 0; i < TAIL_SLOTS; i++) {
        _Atomic uintptr_t *slot = &tail_slots[i];
        uintptr_t run = atomic_load_explicit(slot, memory_order_relaxed);
        if (run == 0)
            continue;
        struct arena *a = arena_of((char *)run);
        _Atomic uint64_t *word = tail_word_of(a, (char *)run);
        /* Acquire: pairs with the registration's release (see tail_register). */
        uint64_t old = atomic_load_explicit(word, memory_order_acquire);
        if (tail_state(old) == TAIL_PENDING && !tail_due(old, now, delay, force))
            continue;
        LFH_PARK(ARENA_TAIL_READ);
        /* Relaxed: the slot is a hint; whoever empties it accounts for it. */
        if (!atomic_compare_exchange_strong_explicit(slot, &run, 0, memory_order_relaxed,
                                                     memory_order_relaxed))
            continue;
        atomic_fetch_sub_explicit(&tail_slots_used, 1, memory_order_relaxed);
        /* The claim. The tail's pages are not the block's (it never writes them). A
         * failed CAS: the block was freed or its tail claimed through another slot
         * meanwhile, or the block grew its extent (still PENDING, registered at the same
         * time: claimed with the new extent), or the block was freed and its run taken
         * and registered again by a new block, which is young: its tail waits for its own
         * delay, found through its own slot (a review saw it trimmed at once). Acquire, as
         * the load above: after a failure the word may be a new registration's, whose
         * tail is decommitted next (C11 wants the success order as strong; on x86 it
         * costs nothing). */
        uint64_t trimming = tail_with_state(old, TAIL_TRIMMING);
        while (tail_state(old) == TAIL_PENDING && tail_due(old, now, delay, force) &&
               !atomic_compare_exchange_weak_explicit(word, &old, trimming, memory_order_acquire,
                                                      memory_order_acquire))
            trimming = tail_with_state(old, TAIL_TRIMMING);
        if (tail_state(old) != TAIL_PENDING || !tail_due(old, now, delay, force))
            continue;
        LFH_PARK(ARENA_TAIL_CLAIMED);
        claimed++;
        size_t extent = tail_extent(old), run_size = tail_run(old);
        os_decommit((char *)run + extent, run_size - extent);
        /* Release: the decommit comes before a later free's push of the run (acquire in
         * tail_settle). Acquire on failure: the word is TAIL_FREED, and the freeing
         * thread's steps come before this thread's push. */
        if (atomic_compare_exchange_strong_explicit(word, &trimming,
                                                    tail_with_state(old, TAIL_TRIMMED),
                                                    memory_order_release, memory_order_acquire))
            continue;
        LFH_INVARIANT("tail: only a free moves a claimed tail", tail_state(trimming) == TAIL_FREED);
        /* Relaxed: the push's release CAS publishes it with the run. */
        atomic_store_explicit(word, 0, memory_order_relaxed);
        run_freed(a, (char *)run, run_size, false);
    }
    return claimed;
}

/* ---- purging ---------------------------------------------------------------------- */

/* Runs purge_class decommits together, sorted so that adjacent ones form one range. */
#define PURGE_BATCH 64

/* Sorts a batch of runs by address: an insertion sort, as the batch is small and libc's
 * qsort may allocate (docs/DESIGN.md, property 6: lfheap never allocates through libc). */
static void sort_runs(struct iovec *run, unsigned count)
{
    for (unsigned i = 1; i < count; i++) {
        struct iovec x = run[i];
        unsigned j = i;
        for (; j > 0 && (uintptr_t)run[j - 1].iov_base > (uintptr_t)x.iov_base; j--)
            run[j] = run[j - 1];
        run[j] = x;
    }
}

/* Gives the pieces of [start, end) back to its buddy: a run is a row of buddy chunks,
 * each found by its size in the buddy's index. */
static void pieces_release(struct buddy *buddy, char *start, const char *end)
{
    while (start < end) {
        size_t bytes = buddy_chunk_size(buddy, start);
        buddy_free(buddy, start);
        start += bytes;
    }
}

/* ---- merged runs: freed runs given back to their buddies still resident -------------
 *
 * When freed runs outweigh the runs in use, a fresh chunk needs them coalesced in their
 * buddies, before any clean room (fresh_chunk). Decommitting them first (a purge) made the
 * new blocks fault every page in again: a program that moves through block sizes, each
 * size freed before the next, faulted its whole working set in at every step
 * (bench/size-phases: 449 k page faults, glibc 42 k; docs/BENCHMARKS.md, "Sizes in
 * phases"). So there the runs go to their buddies as they are (arena_merge_up_to), each
 * page marked in its arena's dirty_free bits, and the invariant of a buddy's free space
 * becomes: a free page reads as zeros unless its bit is set.
 * - A bit is set before the pages' release (release fetch_or, then buddy_free's acq_rel
 *   CAS), so whoever takes the pages out of the buddy next (acquire CAS) reads it.
 * - A bit is cleared only by a thread that holds its page: the allocator that took the
 *   page out of its buddy (dirty_free_claim: its run is then not zeroed), or the sweep,
 *   which takes the pages with buddy_alloc_at, decommits them and gives them back.
 * - So a bit may be set on a clean page (a page handed out and decommitted as a run's
 *   tail, say), which costs a memset or a decommit that was not needed, never the other
 *   way round. Words are shared by neighbouring chunks, so every change is an atomic
 *   fetch_or or fetch_and of the chunk's own bits.
 * The sweep runs when a fresh chunk finds no chunk mostly merged (the merged pages are
 * of no use to the sizes now asked for, and the resident size should not hold both),
 * from the delay's purge once the last merge is a purge delay old (the pressure purge's:
 * 1/16 of it), and from every purge of everything (thread exits, malloc_trim, the last
 * resort of fresh_chunk), so merged pages nobody takes go back no later than the runs
 * they came from would have. */
static _Atomic size_t dirty_free_bytes; /* a glance, as run_bytes */
static _Atomic uint32_t dirty_free_ms;  /* when the last merge ran */

/* The bits of `count` pages (1 to 64) from bit `shift` of a word. */
static inline uint64_t page_bits(unsigned shift, unsigned count)
{
    return (count == 64 ? ~(uint64_t)0 : ((uint64_t)1 << count) - 1) << shift;
}

/* Marks [p, p + bytes), inside arena a, free and maybe resident. */
static void dirty_free_mark(struct arena *a, const char *p, size_t bytes)
{
    bytes_add(&dirty_free_bytes, bytes);
    for (size_t page = chunk_page(a, p), end = page + bytes / ARENA_MIN_CHUNK; page < end;) {
        size_t stop = (page / 64 + 1) * 64 < end ? (page / 64 + 1) * 64 : end;
        /* Release: the bits travel with the pages through the buddy's release CAS. */
        atomic_fetch_or_explicit(&a->dirty_free[page / 64],
                                 page_bits((unsigned)(page % 64), (unsigned)(stop - page)),
                                 memory_order_release);
        page = stop;
    }
}

/* Whether any page of [p, p + bytes) has its dirty_free bit set; with `clear`, the bits
 * are cleared too (dirty_free_claim). The caller holds the pages: the buddy's acquire
 * CAS that handed them over came after every mark's release, so the relaxed glance
 * reads every bit set before the pages were freed. */
static bool dirty_free_scan(struct arena *a, const char *p, size_t bytes, bool clear)
{
    size_t cleared = 0;
    for (size_t page = chunk_page(a, p), end = page + bytes / ARENA_MIN_CHUNK; page < end;) {
        size_t stop = (page / 64 + 1) * 64 < end ? (page / 64 + 1) * 64 : end;
        uint64_t bits = page_bits((unsigned)(page % 64), (unsigned)(stop - page));
        /* Relaxed glance first: most runs were never merged, and their words stay
         * untouched. Acquire pairs with dirty_free_mark's release. */
        if (atomic_load_explicit(&a->dirty_free[page / 64], memory_order_relaxed) & bits) {
            if (!clear)
                return true;
            cleared += (size_t)__builtin_popcountll(
                atomic_fetch_and_explicit(&a->dirty_free[page / 64], ~bits, memory_order_acquire) &
                bits);
        }
        page = stop;
    }
    if (cleared == 0)
        return false;
    bytes_add(&dirty_free_bytes, -(cleared * ARENA_MIN_CHUNK));
    return true;
}

/* Clears the bits of [p, p + bytes), which the caller holds; true if any was set (some
 * page may be resident). */
static bool dirty_free_claim(struct arena *a, const char *p, size_t bytes)
{
    return dirty_free_scan(a, p, bytes, true);
}

/* Gives `count` runs of class cls back to their buddies as they are (see above). */
static size_t merge_batch(unsigned cls, const struct iovec *run, unsigned count)
{
    if (count == 0)
        return 0;
    /* Relaxed: a stale time only moves the sweep by one purge round. */
    atomic_store_explicit(&dirty_free_ms, platform_now_ms(), memory_order_relaxed);
    for (unsigned i = 0; i < count; i++) {
        struct arena *a = arena_of(run[i].iov_base);
        dirty_free_mark(a, run[i].iov_base, class_size(cls));
        pieces_release(a->buddy, run[i].iov_base, (char *)run[i].iov_base + class_size(cls));
    }
    bytes_add(&run_bytes.dirty, -(count * class_size(cls)));
    bytes_add(&run_bytes.held, -(count * class_size(cls)));
    return count;
}

/* A chunk of `chunk` bytes of which at least half the pages were merged and are still
 * free, taken out of its buddy (buddy_alloc_at), or NULL: a fresh run there faults in
 * only the rest. Half, not all: runs merged between clean pieces (a 320 KiB run in each
 * 512 KiB chunk, say) never fill a bigger chunk whole. Relaxed loads: a glance; the
 * buddy's TRYALLOC decides, and whoever takes the chunk reads its bits again
 * (dirty_free_claim). */
static void *dirty_free_take(size_t chunk)
{
    if (atomic_load_explicit(&dirty_free_bytes, memory_order_relaxed) < chunk / 2)
        return NULL;
    const size_t pages = chunk / ARENA_MIN_CHUNK;
    const size_t words = pages >= 64 ? pages / 64 : 1, step = pages >= 64 ? 64 : pages;
    const uint64_t group = pages >= 64 ? ~(uint64_t)0 : page_bits(0, (unsigned)pages);
    /* Acquire: as alloc_from_arenas, each arena's fields are complete. */
    for (struct arena *a = atomic_load_explicit(&arena_list, memory_order_acquire); a; a = a->older)
        for (size_t word = 0; word + words <= ARENA_PAGES / 64; word += words)
            for (size_t first = 0; first < 64; first += step) {
                size_t marked = 0;
                for (size_t w = 0; w < words; w++)
                    marked += (size_t)__builtin_popcountll(
                        (atomic_load_explicit(&a->dirty_free[word + w], memory_order_relaxed) >>
                         first) &
                        group);
                char *p = a->base + (word * 64 + first) * ARENA_MIN_CHUNK;
                if (marked > 0 && 2 * marked >= pages && buddy_alloc_at(a->buddy, p, chunk))
                    return p;
            }
    return NULL;
}

/* Decommits the `count` pieces of arena a that the sweep holds (in address order) and
 * gives them back to the buddy, clean where the kernel took them. */
static size_t sweep_batch(struct arena *a, const struct iovec *piece, unsigned count)
{
    if (count == 0)
        return 0;
    struct iovec range[PURGE_BATCH];
    unsigned range_of[PURGE_BATCH], ranges = 1;
    range[0] = piece[0];
    range_of[0] = 0;
    for (unsigned i = 1; i < count; i++) {
        struct iovec *last = &range[ranges - 1];
        if ((char *)last->iov_base + last->iov_len == piece[i].iov_base)
            last->iov_len += piece[i].iov_len;
        else
            range[ranges++] = piece[i];
        range_of[i] = ranges - 1;
    }
    bool clean[PURGE_BATCH];
    os_decommit_ranges(range, ranges, clean);
    size_t released = 0;
    for (unsigned i = 0; i < count; i++) {
        if (clean[range_of[i]] && dirty_free_claim(a, piece[i].iov_base, piece[i].iov_len))
            released += piece[i].iov_len;
        buddy_free(a->buddy, piece[i].iov_base);
    }
    return released;
}

/* Decommits the merged pages still free in the buddies (all of them with force, else
 * only a purge delay after the last merge). Each piece is the largest aligned row of
 * marked pages, up to a word's 64, that buddy_alloc_at takes: a page somebody holds is
 * left to its holder, who clears its bit. */
static size_t dirty_free_sweep(uint32_t now, uint32_t age, bool force)
{
    if (atomic_load_explicit(&dirty_free_bytes, memory_order_relaxed) == 0 ||
        (!force && now - atomic_load_explicit(&dirty_free_ms, memory_order_relaxed) < age))
        return 0;
    size_t released = 0;
    /* Acquire: as alloc_from_arenas, each arena's fields are complete. */
    for (struct arena *a = atomic_load_explicit(&arena_list, memory_order_acquire); a;
         a = a->older) {
        struct iovec piece[PURGE_BATCH];
        unsigned count = 0;
        for (size_t word = 0; word < ARENA_PAGES / 64; word++) {
            uint64_t bits = atomic_load_explicit(&a->dirty_free[word], memory_order_relaxed);
            while (bits) {
                unsigned first = (unsigned)__builtin_ctzll(bits);
                unsigned pages = first ? 1u << __builtin_ctz(first) : 64;
                while (pages > 1 && (page_bits(first, pages) & ~bits))
                    pages >>= 1;
                char *p = a->base + (word * 64 + first) * ARENA_MIN_CHUNK;
                while (pages && !buddy_alloc_at(a->buddy, p, pages * ARENA_MIN_CHUNK))
                    pages >>= 1;
                if (!pages) {
                    bits &= ~page_bits(first, 1);
                    continue;
                }
                LFH_PARK(ARENA_SWEEP_TAKEN);
                bits &= ~page_bits(first, pages);
                piece[count++] = (struct iovec){p, pages * ARENA_MIN_CHUNK};
                if (count == PURGE_BATCH) {
                    released += sweep_batch(a, piece, count);
                    count = 0;
                }
            }
        }
        released += sweep_batch(a, piece, count);
    }
    return released;
}

/* Decommits `count` runs of a class (`run`, each its address and the class's size), and
 * releases them to their buddies; a run whose decommit the kernel refused stays dirty: it
 * is put back on a stack (the purging thread's row). Sorted by address, adjacent runs
 * merge into one range, and the ranges go to the kernel in one system call where it
 * allows it (os_decommit_ranges): one TLB flush for the batch instead of one per range.
 * The exits of 4,000 threads alive at once gave back 239 k superblocks in 124 k madvise
 * calls, whose flushes took 38% of the process's time (docs/BENCHMARKS.md, "Many threads
 * alive at once"). Returns how many runs were released. */
static size_t purge_batch(unsigned cls, struct iovec *run, unsigned count)
{
    if (count == 0)
        return 0;
    size_t chunk = class_size(cls);
    sort_runs(run, count);
    unsigned ranges = 0;
    for (unsigned i = 0; i < count; i++)
        if (ranges > 0 &&
            (char *)run[ranges - 1].iov_base + run[ranges - 1].iov_len == run[i].iov_base)
            run[ranges - 1].iov_len += chunk;
        else
            run[ranges++] = run[i];
    bool clean[PURGE_BATCH];
    os_decommit_ranges(run, ranges, clean);
    size_t released = 0;
    for (unsigned r = 0; r < ranges; r++)
        for (char *p = run[r].iov_base, *end = p + run[r].iov_len; p < end; p += chunk) {
            if (clean[r]) {
                pieces_release(arena_of(p)->buddy, p, p + chunk);
                bytes_add(&run_bytes.dirty, -chunk);
                bytes_add(&run_bytes.held, -chunk);
                released++;
            } else {
                dirty_push(cls, p);
            }
        }
    return released;
}

/* Releases the runs of one class that waited at least `delay` ms (all if force), row by
 * row; the others go back onto the row they came from, as one chain. *large_released
 * (if not NULL) tells whether a large block's run was among those due (a run the kernel
 * refused to decommit, put back on its stack, counts too: the answer only scores). */
static size_t purge_class(unsigned cls, uint32_t now, uint32_t delay, bool force, bool merge,
                          bool *large_released)
{
    size_t released = 0;
    struct iovec batch[PURGE_BATCH];
    unsigned batched = 0;
    for (unsigned row = 0; row < DIRTY_ROWS; row++) {
        char *keep_first = NULL, *keep_last = NULL;
        char *p = dirty_take_all(row, cls);
        while (p) {
            LFH_PARK(ARENA_PURGE_TAKEN);
            struct arena *a = arena_of(p);
            size_t page = chunk_page(a, p);
            /* Relaxed: the chain is ours since the acquire CAS that took it. */
            char *next = (char *)atomic_load_explicit(&a->next[page], memory_order_relaxed);
            uint32_t freed = atomic_load_explicit(&a->freed_ms[page], memory_order_relaxed);
            if (force || now - freed >= delay) {
                batch[batched++] = (struct iovec){p, class_size(cls)};
                if (large_released && !stamp_held_superblock(freed))
                    *large_released = true;
                if (batched == PURGE_BATCH) {
                    released +=
                        merge ? merge_batch(cls, batch, batched) : purge_batch(cls, batch, batched);
                    batched = 0;
                }
            } else {
                atomic_store_explicit(&a->next[page], (uintptr_t)keep_first, memory_order_relaxed);
                if (!keep_first)
                    keep_last = p;
                keep_first = p;
            }
            p = next;
        }
        if (keep_first)
            dirty_push_chain(row, cls, keep_first, keep_last);
    }
    released += merge ? merge_batch(cls, batch, batched) : purge_batch(cls, batch, batched);
    return released;
}

/* Gives the freed runs of the classes up to `most` bytes back to their buddies still
 * resident (see above); every freed run for SIZE_MAX. */
static size_t arena_merge_up_to(size_t most)
{
    size_t merged = 0;
    for (unsigned cls = 0; cls < ARENA_CLASSES && class_size(cls) <= most; cls++)
        if (dirty_class_waiting(cls))
            merged += purge_class(cls, 0, 0, true, true, NULL);
    return merged;
}

size_t arena_purge_all(void)
{
    size_t released = tails_trim(0, 0, true);
    for (unsigned cls = 0; cls < ARENA_CLASSES; cls++)
        released += purge_class(cls, 0, 0, true, false, NULL);
    released += dirty_free_sweep(0, 0, true) != 0;
    released += mapcache_release(0, 0, true);
    os_retry();
    return released;
}

/* A huge page is faulted in whole, so the pages around a run that the buddy holds free
 * (pages that read as zeros: runs are purged before they go back) became resident with
 * it, and stay so when a purge splits the huge page: a program that had allocated 2.8 GB
 * in blocks up to 1 MiB from 4 threads and freed it all kept 138 MiB resident after
 * malloc_trim, where it kept 17 MiB without huge pages. Each huge page wholly free in a
 * buddy is taken with TRYALLOC on its node (false, changing nothing, if any part of it
 * is in use or being taken: nobody waits), decommitted and given back still free. A
 * thread stopped in between (arena.trim_taken) holds one free chunk, which the others
 * find taken and go around, as with any chunk in use. */
size_t arena_release_free_huge_pages(void)
{
    if (!os_huge_pages())
        return 0;
    size_t released = 0;
    /* Acquire: as alloc_from_arenas, each arena's fields are complete. */
    for (struct arena *a = atomic_load_explicit(&arena_list, memory_order_acquire); a; a = a->older)
        for (size_t offset = 0; offset < a->backed; offset += OS_HUGE_PAGE_SIZE) {
            char *page = a->base + offset;
            if (!buddy_alloc_at(a->buddy, page, OS_HUGE_PAGE_SIZE))
                continue;
            LFH_PARK(ARENA_TRIM_TAKEN);
            /* Only pages that hold memory count as released (malloc_trim's answer), and
             * only they, or merged pages, are worth a system call. A merged page's bit is
             * cleared only after a decommit, also when mincore says no page is resident:
             * it says so of a page swapped out, which still holds its data (a bit cleared
             * without the decommit made calloc hand out an earlier tenant's bytes as
             * zeros, found by an outside review). */
            bool resident = os_any_resident(page, OS_HUGE_PAGE_SIZE);
            if ((resident || dirty_free_scan(a, page, OS_HUGE_PAGE_SIZE, false)) &&
                os_decommit(page, OS_HUGE_PAGE_SIZE)) {
                dirty_free_claim(a, page, OS_HUGE_PAGE_SIZE);
                if (resident)
                    released += OS_HUGE_PAGE_SIZE;
            }
            buddy_free(a->buddy, page);
        }
    return released;
}

/* Releases the runs of every stack that waited at least `delay` ms (relaxed glance at
 * each stack: one found empty is skipped, one pushed meanwhile waits for the next purge).
 * Returns the classes that released a large block's run (a bit per class): the ones a
 * fresh large run may regret (purge_score_fresh). */
static uint64_t purge_due(uint32_t now, uint32_t delay, bool merge)
{
    /* Tails by the whole delay, also under pressure: a block's age says whether it lives
     * long, and a shorter wait trims blocks that a moment later give their run back. */
    tails_trim(now, purge_delay(), false);
    dirty_free_sweep(now, delay, false);
    /* Kept huge mappings by the whole delay too: the pressure is the arenas'. */
    mapcache_release(now, purge_delay(), false);
    uint64_t released = 0;
    for (unsigned cls = 0; cls < ARENA_CLASSES; cls++) {
        bool large_released = false;
        if (dirty_class_waiting(cls)) {
            purge_class(cls, now, delay, false, merge, &large_released);
            if (large_released)
                released |= (uint64_t)1 << cls;
        }
    }
    os_retry();
    return released;
}

/* Releases the chunks that waited `delay` ms, unless somebody purged in the last `gap`
 * ms: one thread wins the CAS on the last purge time, the others go on, nobody waits.
 * Returns purge_due's classes, 0 if this call lost or released no large block's run.
 * The slow paths (arena_tick, arena_alloc_run) and the purger share it. */
static uint64_t purge_if_due(uint32_t now, uint32_t gap, uint32_t delay, bool merge)
{
    uint32_t last = atomic_load_explicit(&last_purge_ms, memory_order_relaxed);
    if (now - last < gap)
        return 0;
    /* Relaxed: the stacks carry their own ordering. */
    if (!atomic_compare_exchange_strong_explicit(&last_purge_ms, &last, now, memory_order_relaxed,
                                                 memory_order_relaxed))
        return 0;
    LFH_PARK(ARENA_TICK_WON);
    return purge_due(now, delay, merge);
}

/* True if no chunk waits on any dirty stack and no mapping in the mapcache (relaxed: a
 * glance, acted on later). */
static bool dirty_all_empty(void)
{
    if (mapcache_kept_bytes() != 0)
        return false;
    for (unsigned cls = 0; cls < ARENA_CLASSES; cls++)
        if (dirty_class_waiting(cls))
            return false;
    return true;
}

/* ---- prompt release at thread exit ------------------------------------------------- */

/* The purge delay keeps a freed chunk for the next request of the thread that freed it;
 * a thread handing its cache back at exit makes none. When more threads exit at once
 * than the tcache has orphan slots, each one's superblocks go EMPTY at once, and with the
 * delay they stayed resident until some later slow path (for ever in a program that then
 * stops calling lfheap), while the next threads reused them before the delay ran out, so
 * that each chunk collected the touched pages of all its tenants (500 threads alive at
 * once: 130 MiB resident after the last round, against 17 MiB with glibc). So chunks
 * freed at thread exit are stamped as if they had waited the whole delay, and the exits
 * purge them once PROMPT_BATCH bytes of them are waiting: at most that much address
 * space of exit-freed chunks stays dirty when the exits stop, and no walk of the stacks
 * is paid for by fewer bytes. */
#define PROMPT_BATCH ((size_t)8 << 20)

/* Thread-local: only the exit path raises it. A signal handler that frees on this thread
 * meanwhile only gets its chunks stamped due as well. */
static __thread unsigned prompt_depth;
static __thread bool prompt_freed;
/* Bytes of chunks freed at thread exits since an exit last purged. */
static _Atomic size_t prompt_pending;

void arena_prompt_begin(void)
{
    prompt_depth++;
}

/* ---- early purges keep score --------------------------------------------------------- */

/* Two purges do not wait for the delay: a thread exit's, when the process holds more
 * freed runs than runs in use (arena_prompt_end), and the one under pressure, before a
 * fresh run (purge_if_pressed). Both bet that the runs they release will not be asked for
 * again soon, and a program that joins its worker pool and starts a new one at once (a
 * pool rebuilt for every batch of work) makes both lose: its exits purged all that the
 * pool held and its next threads faulted it all in again (bench/pool-rebuild at 4
 * threads: 0.95 s, against 0.23 s without the exit purge, at the same peak RSS; tcmalloc
 * 0.21 s), and the pressure purges released runs of the sizes the pool keeps asking for.
 * So each keeps score: when it last ran, the run classes it released, how many bytes,
 * and how many bytes fresh runs of those classes took within a window after it
 * (arena_alloc_run, where a dirty run of the class would have served). While that is at
 * least half of what it released, and the window has not run out, it leaves the freed
 * runs to the delay's purge (ticks, the purger), as other allocators do; after the window
 * it purges again. Sizes a program has left behind (sqlite3 building an index after
 * filling a table, purge_if_pressed) are not asked for again, so their purge keeps going.
 * The window is 8 purge delays and at least REGRET_MIN_MS, doubled for each purge in a
 * row that was regretted, up to REGRET_DOUBLINGS times: a program that rebuilds its pool
 * all along (mimalloc's test-stress: a new set of threads every 0.1-0.5 s, 40 rounds)
 * otherwise lost a purge of its whole working set every window (372-420 k page faults
 * against 243-247 k without the exit purge, same peak RSS). A purge that was not
 * regretted starts the window over. Relaxed: a glance that only picks between two
 * correct choices (purge now or at the delay), as in mostly_dirty; a racing update at
 * worst scores one purge against another's refaults. */
#define REGRET_MIN_MS    2000
#define REGRET_DOUBLINGS 4
_Static_assert(ARENA_CLASSES <= 64, "a bit per run class");
struct purge_score {
    _Atomic uint32_t ms;      /* when the purge last ran */
    _Atomic uint64_t classes; /* the run classes it released */
    _Atomic size_t bytes;     /* the bytes it released (0: none yet) */
    _Atomic size_t refaulted; /* bytes of fresh runs of those classes since */
    _Atomic uint32_t lost;    /* the purges before it, in a row, that were regretted */
};
static struct purge_score exit_score, pressure_score;
/* The kept huge mappings given back under pressure (purge_if_pressed); a fresh huge
 * mapping is its refault (arena_before_mapping), scored as the one class below. */
static struct purge_score kept_score;
#define KEPT_CLASS 63
_Static_assert(ARENA_CLASSES <= KEPT_CLASS, "the kept mappings' bit is no run class's");

static uint32_t regret_window(const struct purge_score *score)
{
    uint64_t window = 8 * (uint64_t)purge_delay();
    if (window < REGRET_MIN_MS)
        window = REGRET_MIN_MS;
    window <<= atomic_load_explicit(&score->lost, memory_order_relaxed);
    return window < UINT32_MAX / 2 ? (uint32_t)window : UINT32_MAX / 2;
}

static bool purge_was_lost(const struct purge_score *score)
{
    size_t bytes = atomic_load_explicit(&score->bytes, memory_order_relaxed);
    return bytes != 0 && atomic_load_explicit(&score->refaulted, memory_order_relaxed) >= bytes / 2;
}

static bool purge_regretted(struct purge_score *score, uint32_t now)
{
    return purge_was_lost(score) &&
           now - atomic_load_explicit(&score->ms, memory_order_relaxed) < regret_window(score);
}

static size_t dirty_bytes(void)
{
    return atomic_load_explicit(&run_bytes.dirty, memory_order_relaxed);
}

/* A purge just released what the freed runs fell by since `dirty_before`
 * (dirty_bytes() before it; a glance, as frees may add meanwhile). Purges come in bursts:
 * the threads of a pool exit together and each exit may purge, and the pressure purges of
 * one busy moment follow each other by a sixteenth of the delay. A purge within a purge
 * delay of the score's last one (or before it: another thread's clock read may be later)
 * joins the score, adding its bytes and classes, and moves its time on. Scored on its
 * own, it found no refaults yet (the program had no time to ask again): it read as a
 * purge nobody regretted and set the window's doublings back to none, and the exits of
 * one burst that found the score old each started it again, the later ones from the
 * first one's fresh score. So a pool rebuilt all along lost its working set to an exit
 * purge every 2 s instead of after 2, 4, 8, 16 and 32 s: bench/pool-rebuild --threads=4
 * --rounds=200 faulted 228-277 k pages in 5.9-6.5 s, and 166-242 k in 5.4-6.0 s with
 * the bursts joined (3 runs each, alternated, quiet machine; --rounds=600 on a loaded one:
 * 10.8 M against 5.7 M, 613 s against 448 s). One purge starts the next score, by a CAS on
 * its time; a failure means another purge started it (lock-free), and this one joins.
 * Relaxed, as the score's other words: what a joining purge adds before the starter's
 * stores is lost, which at worst scores a burst low. */
static void purge_scored_bytes(struct purge_score *score, uint32_t now, size_t bytes,
                               uint64_t classes)
{
    uint32_t last = atomic_load_explicit(&score->ms, memory_order_relaxed);
    bool joins = atomic_load_explicit(&score->bytes, memory_order_relaxed) != 0 &&
                 (int32_t)(now - last) < (int32_t)purge_delay();
    if (joins || !atomic_compare_exchange_strong_explicit(
                     &score->ms, &last, now, memory_order_relaxed, memory_order_relaxed)) {
        bytes_add(&score->bytes, bytes);
        atomic_fetch_or_explicit(&score->classes, classes, memory_order_relaxed);
        if ((int32_t)(now - last) > 0)
            atomic_store_explicit(&score->ms, now, memory_order_relaxed);
        return;
    }
    uint32_t lost = atomic_load_explicit(&score->lost, memory_order_relaxed);
    lost = !purge_was_lost(score) ? 0 : lost < REGRET_DOUBLINGS ? lost + 1 : lost;
    atomic_store_explicit(&score->lost, lost, memory_order_relaxed);
    atomic_store_explicit(&score->refaulted, 0, memory_order_relaxed);
    atomic_store_explicit(&score->classes, classes, memory_order_relaxed);
    atomic_store_explicit(&score->bytes, bytes, memory_order_relaxed);
}

static void purge_scored(struct purge_score *score, uint32_t now, size_t dirty_before,
                         uint64_t classes)
{
    size_t dirty_after = dirty_bytes();
    purge_scored_bytes(score, now, dirty_before > dirty_after ? dirty_before - dirty_after : 0,
                       classes);
}

/* A fresh run of `bytes` was taken for a request that a dirty run of a class from
 * `first` to `last` would have served: if the purge released runs of such a class within
 * the window, the pages coming back may be theirs. */
static void purge_score_fresh(struct purge_score *score, uint32_t now, unsigned first,
                              unsigned last, size_t bytes)
{
    uint64_t range = (~(uint64_t)0 >> (63 - last)) & (~(uint64_t)0 << first);
    if (atomic_load_explicit(&score->bytes, memory_order_relaxed) != 0 &&
        (atomic_load_explicit(&score->classes, memory_order_relaxed) & range) != 0 &&
        now - atomic_load_explicit(&score->ms, memory_order_relaxed) < regret_window(score))
        bytes_add(&score->refaulted, bytes);
}

static void exit_purge(uint32_t now)
{
    size_t before = dirty_bytes();
    arena_purge_all();
    purge_scored(&exit_score, now, before, ~(uint64_t)0);
}

/* A delay under SHORT_DELAY_FLOOR_MS (LFHEAP_PURGE_MS=0, say) gave back the run of a
 * buffer grown by copying (a bigger block taken, the old one copied and freed, as jq's
 * `join` grows its string) before the next step took it, so that each step faulted the
 * whole buffer in again: with 0, jq joining 300,000 strings ran for over 400 s against
 * 7 s with 10 ms or more. So the purges of a short delay keep score too: while the
 * large runs one released come back within its window, the slow paths' purge waits
 * SHORT_DELAY_FLOOR_MS, and the next purge after the window is scored again (the window
 * doubles as for the early purges). A run nobody asks for again still goes back at the
 * first slow path after the floor. The score's words are relaxed, as the early purges'
 * are: a stale read only picks the program's delay or the floor, both correct. */
#define SHORT_DELAY_FLOOR_MS 32
static struct purge_score short_delay_score;

/* The purge by the delay (the slow paths' and the purger's), unless somebody purged in
 * the last `gap` ms. */
static void purge_by_delay(uint32_t now, uint32_t gap)
{
    uint32_t delay = purge_delay();
    bool scored = delay < SHORT_DELAY_FLOOR_MS;
    if (scored && purge_regretted(&short_delay_score, now)) {
        delay = SHORT_DELAY_FLOOR_MS;
        scored = false;
    }
    size_t before = scored ? dirty_bytes() : 0;
    uint64_t classes = purge_if_due(now, gap, delay, false);
    if (scored && classes != 0)
        purge_scored(&short_delay_score, now, before, classes);
}

void arena_prompt_end(void)
{
    if (--prompt_depth != 0)
        return;
    if (mostly_dirty()) {
        prompt_freed = false;
        uint32_t now = platform_now_ms();
        if (!purge_regretted(&exit_score, now))
            exit_purge(now);
        return;
    }
    if (!prompt_freed)
        return;
    prompt_freed = false;
    /* Relaxed: a glance; the exchange below decides. */
    if (atomic_load_explicit(&prompt_pending, memory_order_relaxed) < PROMPT_BATCH)
        return;
    /* Acquire pairs with arena_free's release add: the chunks counted are on their
     * stacks. One exit takes the count and purges; one that finds it taken meanwhile
     * goes on (nobody waits). */
    if (atomic_exchange_explicit(&prompt_pending, 0, memory_order_acquire) == 0)
        return;
    /* Every chunk that is due goes, this exit's, other exits' and the ticks'. Not counted
     * as a purge round (last_purge_ms): the ticks keep their own rhythm. */
    purge_due(platform_now_ms(), purge_delay(), false);
}

/* ---- the background purger ---------------------------------------------------------- */

/* The purger (LFHEAP_BACKGROUND) naps half a purge delay while chunks wait; while none
 * does, each nap is twice the last, up to this (or the half delay, if longer): an idle
 * process's purger wakes once a second, and memory freed just after it went to sleep
 * goes back within that second rather than half a delay. */
#define PURGER_IDLE_NAP_MS 1000
/* A heartbeat older than this many longest naps means the purger is gone (killed) or
 * stopped for that long: the next slow path replaces it. Generous, so that a loaded
 * machine's late wake-ups replace nobody. */
#define PURGER_STALE_NAPS 8
/* The purger sleeps at most this long at a time, whatever its nap: when it wakes to find
 * itself the process's last live thread (the main thread left by pthread_exit and every
 * other thread ended), it leaves too, so that the process ends, as it would without it,
 * within this time. Otherwise it would keep the process alive forever, and, since it
 * blocks every signal, deaf to all but SIGKILL. */
#define PURGER_WATCH_MS 1000
/* Set in every beat, so that a beat is never 0, which means "no purger". */
#define PURGER_ALIVE ((uint64_t)1 << 32)

static _Atomic int background_on = -1;
/* The page that holds the heartbeat, mapped on the first start. */
static _Atomic(_Atomic uint64_t *) purger_page;

__thread bool arena_purger_wanted;
_Atomic uint32_t arena_cached_threads;

static bool background_enabled(void)
{
    /* Relaxed: every thread computes the same value from the environment. */
    int on = atomic_load_explicit(&background_on, memory_order_relaxed);
    if (on < 0) {
        on = platform_env_switch("LFHEAP_BACKGROUND");
        atomic_store_explicit(&background_on, on, memory_order_relaxed);
    }
    return on;
}

/* The heartbeat: PURGER_ALIVE and the time the purger last woke, in ms; 0 while no
 * purger runs in this process. Written by the purger (CAS from its own last beat) and by
 * a thread that finds the beat stale and claims the right to start one (CAS). It lives
 * on a page of its own marked wipe-on-fork, so that a forked child, which inherits no
 * thread, reads 0 at once (on kernels without MADV_WIPEONFORK the child waits for the
 * inherited beat to go stale). NULL if the page cannot be mapped yet: no purger then. */
static _Atomic uint64_t *purger_beat(bool map)
{
    /* Acquire pairs with the release CAS below: the page is marked before it is seen. */
    _Atomic uint64_t *page = atomic_load_explicit(&purger_page, memory_order_acquire);
    if (page || !map)
        return page;
    _Atomic uint64_t *fresh = os_map(OS_PAGE_SIZE, OS_PAGE_SIZE);
    if (!fresh)
        return NULL;
    os_wipe_on_fork(fresh, OS_PAGE_SIZE);
    /* Two threads that both map one: the loser unmaps its own and uses the winner's. */
    if (atomic_compare_exchange_strong_explicit(&purger_page, &page, fresh, memory_order_release,
                                                memory_order_acquire))
        return fresh;
    os_unmap(fresh, OS_PAGE_SIZE);
    return page;
}

static uint32_t purger_interval(void)
{
    return purge_delay() / 2 + 1;
}

static uint32_t purger_longest_nap(void)
{
    uint32_t interval = purger_interval();
    return interval > PURGER_IDLE_NAP_MS ? interval : PURGER_IDLE_NAP_MS;
}

static uint32_t purger_stale_ms(void)
{
    return PURGER_STALE_NAPS * purger_longest_nap();
}

/* True if the beat names no purger of this process that woke recently. */
static bool purger_stale(uint64_t beat, uint32_t now)
{
    return beat == 0 || now - (uint32_t)beat > purger_stale_ms();
}

/* The purger: sleeps, beats, and runs the slow paths' purge step, competing for the same
 * CAS (so a purger parked anywhere stops nobody: the slow paths purge as before). It
 * never allocates. It leaves when it finds its beat replaced, and when it is the last
 * live thread (PURGER_WATCH_MS): glibc ends a process whose last thread returns. */
static void *purger_main(void *arg)
{
    _Atomic uint64_t *word = purger_beat(false);
    uint64_t beat = (uint64_t)(uintptr_t)arg;
    platform_thread_name("lfheap-purge");
    uint32_t interval = purger_interval(), longest = purger_longest_nap();
    uint32_t nap = interval;
    for (;;) {
        platform_sleep_ms(nap < PURGER_WATCH_MS ? nap : PURGER_WATCH_MS);
        /* Nobody is left to start a thread, so the count cannot rise again. Without /proc
         * (-1: a chroot without it, no file descriptor left) the threads that hold a
         * cache tell: with none, the program's threads may all have ended, and a purger
         * that stayed kept the process alive for good, deaf to every signal it blocks
         * (found by an outside tester). A thread that never allocated may still run: its
         * next slow path starts a purger again. */
        long live = platform_live_threads();
        if (live == 1 ||
            (live < 0 && atomic_load_explicit(&arena_cached_threads, memory_order_relaxed) == 0))
            return NULL;
        uint32_t now = platform_now_ms();
        /* Relaxed: the word publishes nothing but itself. It changed only if a thread
         * found this purger's beat stale and claimed its place: then this one leaves. */
        if (!atomic_compare_exchange_strong_explicit(word, &beat, PURGER_ALIVE | now,
                                                     memory_order_relaxed, memory_order_relaxed))
            return NULL;
        beat = PURGER_ALIVE | now;
        os_retry();
        if (dirty_all_empty()) {
            nap = nap > longest / 2 ? longest : nap * 2;
            continue;
        }
        nap = interval;
        /* Skipped if a slow path purged in the last quarter delay. */
        purge_by_delay(now, interval / 2 + 1);
    }
}

void arena_purger_start(bool freeing)
{
    /* A free may run inside glibc's own bookkeeping of threads: pthread_join, and a
     * detached thread's exit, free the dead thread's TLS while they hold the lock of
     * glibc's stack cache, which pthread_create takes too, so a purger started there
     * waited on its own thread for good (a forked child that joined a thread: the fork
     * made the child's next free a purge tick). A free starts it only while the process
     * has one thread, where no join or exit can be under way; otherwise the request stays
     * for this thread's next allocation that takes a slow path. */
    if (freeing && !os_single_threaded())
        return;
    arena_purger_wanted = false;
    int saved_errno = errno; /* the program's, which no successful call may change */
    _Atomic uint64_t *word = purger_beat(true);
    uint32_t now = platform_now_ms();
    /* Relaxed: see purger_main. */
    uint64_t seen = word ? atomic_load_explicit(word, memory_order_relaxed) : 0;
    uint64_t claim = PURGER_ALIVE | now;
    /* One thread claims a stale beat; the others find it fresh (or their CAS fails
     * because it was claimed or beaten) and go on: nobody waits. */
    if (word && purger_stale(seen, now) &&
        atomic_compare_exchange_strong_explicit(word, &seen, claim, memory_order_relaxed,
                                                memory_order_relaxed)) {
        LFH_PARK(ARENA_PURGER_CLAIMED);
        /* Refused (no memory, too many threads): the claim is left to go stale after
         * half a delay, when a tick asks for another try. If the word changed meanwhile,
         * a thread found the claim stale and made its own: not this thread's to change. */
        uint64_t retry = PURGER_ALIVE | (uint32_t)(now - purger_stale_ms() + purger_interval());
        if (!os_thread_start(purger_main, (void *)(uintptr_t)claim))
            atomic_compare_exchange_strong_explicit(word, &claim, retry, memory_order_relaxed,
                                                    memory_order_relaxed);
    }
    errno = saved_errno;
}

void arena_fork_tick(void)
{
    if (arena_purger_wanted && !os_single_threaded())
        arena_purge_all();
}

void arena_tick(void)
{
    uint32_t now = platform_now_ms();
    purge_by_delay(now, purge_delay() / 2 + 1);
    /* With the switch on, every tick glances at the heartbeat (a forked child's first
     * slow path finds it 0); a stale one asks the caller to start a purger. Relaxed: see
     * purger_main. */
    if (LFH_UNLIKELY(background_enabled())) {
        _Atomic uint64_t *word = purger_beat(false);
        if (!word || purger_stale(atomic_load_explicit(word, memory_order_relaxed), now))
            arena_purger_wanted = true;
    }
}

/* ---- arenas ----------------------------------------------------------------------- */

/* With trust_full, an arena whose buddy found the chunk's level full, with no release
 * since, costs two loads instead of a scan (buddy_alloc_unless_full). */
static void *alloc_in(struct arena *a, size_t chunk, bool trust_full)
{
    void *p = trust_full ? buddy_alloc_unless_full(a->buddy, chunk) : buddy_alloc(a->buddy, chunk);
    if (p)
        arena_hint = a;
    return p;
}

/* Asks every arena on the list, from the one this thread used last to the oldest, then
 * from the newest round to it; *newest says which arena was the newest then. */
static void *alloc_from_arenas(size_t chunk, struct arena **newest, bool trust_full)
{
    /* Acquire pairs with the release CAS that pushed the newest arena: its fields and
     * link, and through its pusher's acquire those of every older one, are complete. */
    struct arena *head = atomic_load_explicit(&arena_list, memory_order_acquire);
    *newest = head;
    struct arena *start = arena_hint ? arena_hint : head;
    void *p = NULL;
    for (struct arena *a = start; a && !p; a = a->older)
        p = alloc_in(a, chunk, trust_full);
    for (struct arena *a = head; a != start && !p; a = a->older)
        p = alloc_in(a, chunk, trust_full);
    return p;
}

/* The smallest part of an arena mapped when a whole one does not fit: its side arrays and
 * buddy metadata (about 250 KiB of address space) stay a quarter of it or less. */
#define ARENA_PART_MIN ((size_t)1 << 20)
/* Address space a part leaves free for what the heap maps to use it: a leaf of the page
 * map (8 MiB, pagemap.c) when the part is the first in its 4 GiB, and descriptors. */
#define ARENA_PART_ROOM ((size_t)9 << 20)
/* Address space an arena leaves the program besides, where it can: a thread's stack (8
 * MiB by default) and some more. With ARENA_PART_ROOM alone, a `ulimit -v` of 56-60 or
 * 88-94 MB let an arena (a part, a whole one) take all but that, and the program's next
 * pthread_create failed with EAGAIN, where a limit a little lower or higher left it room
 * (Python's threading failed at 94-106 MB). Where even the smallest part cannot leave
 * both, it leaves ARENA_PART_ROOM, as before. */
#define ARENA_PROGRAM_ROOM ((size_t)16 << 20)

/* A buddy over an ARENA_SIZE slot of which only the first *backed bytes are mapped, for
 * a program whose address space (`ulimit -v`) has less room than an arena: the largest
 * power of two from half an arena down to `chunk` (and ARENA_PART_MIN) that still maps
 * with `room` to spare. The rest of the slot is taken in the buddy at once, one chunk per
 * power of two above *backed, and never given back; its addresses may hold anyone's
 * mappings. NULL if not even the smallest part maps. */
static struct buddy *arena_part_create(size_t chunk, size_t *backed, size_t room)
{
    size_t least = chunk > ARENA_PART_MIN ? chunk : ARENA_PART_MIN;
    for (size_t part = ARENA_SIZE / 2; part >= least; part /= 2) {
        if (!os_room_for(part + room))
            continue;
        char *region = os_map(part, ARENA_SIZE);
        if (!region)
            continue;
        struct buddy *b =
            buddy_create(region, ARENA_SIZE, ARENA_MIN_CHUNK, ARENA_MAX_CHUNK, BUDDY_PACKED);
        if (!b) {
            os_unmap(region, part);
            return NULL;
        }
        for (size_t unmapped = part; unmapped < ARENA_SIZE; unmapped *= 2) {
            bool taken = buddy_alloc_at(b, region + unmapped, unmapped);
            /* Nobody else sees the instance yet: each of these chunks is free. */
            LFH_INVARIANT("arena part: the chunks past it are taken", taken);
        }
        *backed = part;
        return b;
    }
    return NULL;
}

/* Unmaps an arena's memory and metadata: the region is the buddy's own for a whole
 * arena, the arena's for a part. */
static void arena_unmap(struct arena *a)
{
    bool part = a->backed != ARENA_SIZE;
    char *base = a->base;
    buddy_destroy(a->buddy);
    if (part)
        os_unmap(base, a->backed);
    os_unmap(a, sizeof(struct arena));
}

/* Maps an arena that holds a chunk of `chunk` bytes and enters it in the registry, so
 * that arena_free and the dirty stacks find it as soon as any thread can allocate from it
 * (once it is on the list). */
static struct arena *arena_map(size_t chunk)
{
    int saved_errno = errno; /* the program's: the refusals below end in a success */
    struct arena *a = os_map(sizeof(struct arena), OS_PAGE_SIZE);
    if (!a)
        return NULL;
    a->backed = ARENA_SIZE;
    a->buddy = buddy_create(NULL, ARENA_SIZE, ARENA_MIN_CHUNK, ARENA_MAX_CHUNK, BUDDY_PACKED);
    /* A whole arena that leaves no room for what the heap maps to use it (a page-map leaf,
     * descriptors) would be of no use, and a listed arena keeps its address space for
     * good: with 68-74 MiB of room under `ulimit -v`, every allocation failed for the
     * rest of the process. A part leaves that room, and the program's too where it can
     * (ARENA_PROGRAM_ROOM). */
    if (a->buddy && !os_room_for(ARENA_PART_ROOM + ARENA_PROGRAM_ROOM)) {
        buddy_destroy(a->buddy);
        a->buddy = NULL;
    }
    if (!a->buddy)
        a->buddy = arena_part_create(chunk, &a->backed, ARENA_PART_ROOM + ARENA_PROGRAM_ROOM);
    if (!a->buddy)
        a->buddy = arena_part_create(chunk, &a->backed, ARENA_PART_ROOM);
    if (!a->buddy) {
        os_unmap(a, sizeof(struct arena));
        return NULL;
    }
    errno = saved_errno;
    a->base = buddy_base(a->buddy);
    /* Before any chunk is handed out: a page touched before the advice stays small. */
    os_advise_huge(a->base, a->backed);
    registry_slot *slot = registry_slot_of(a->base);
    if (!slot) {
        arena_unmap(a);
        return NULL;
    }
    /* Release publishes the arena's fields to arena_of. Nobody else writes this slot: the
     * address range is this arena's until it is unmapped (arena_discard). */
    atomic_store_explicit(slot, a, memory_order_release);
    LFH_PARK(ARENA_REGISTERED);
    return a;
}

/* Unmaps an arena that was registered but never pushed: no chunk of it exists, so nobody
 * looks its slot up. The slot is cleared before the unmap that lets a later arena take
 * the address (and the slot); relaxed, as nothing is published by the clearing. */
static void arena_discard(struct arena *a)
{
    uintptr_t index = (uintptr_t)a->base >> ARENA_SHIFT;
    registry_slot *leaf =
        atomic_load_explicit(&registry[index / REGISTRY_LEAF_SLOTS], memory_order_relaxed);
    atomic_store_explicit(&leaf[index % REGISTRY_LEAF_SLOTS], NULL, memory_order_relaxed);
    arena_unmap(a);
}

/* Pushes one more arena onto the list and allocates from it. Arenas that others pushed
 * since the caller looked (`seen` was the newest then) are new, mostly free: they are
 * tried first, and before every attempt to push, so that threads that run out together
 * do not all map one. A thread whose CAS fails tries the arena that won and pushes again;
 * one that finds its own arena already drained by others (who made progress) maps
 * another: a stopped thread costs the others at most the arena it holds, never a
 * failure. */
static void *alloc_from_new_arena(size_t chunk, struct arena *seen)
{
    struct arena *fresh = NULL;
    void *p = NULL;
    for (;;) {
        /* Acquire: see alloc_from_arenas. */
        struct arena *head = atomic_load_explicit(&arena_list, memory_order_acquire);
        for (struct arena *a = head; a != seen && !p; a = a->older)
            p = alloc_in(a, chunk, false);
        if (p)
            break;
        seen = head;
        if (!fresh && !(fresh = arena_map(chunk)))
            break;
        fresh->older = head;
        /* Release publishes the arena's fields and link to the list's readers. Relaxed on
         * failure: the loop reloads the head with acquire. A failed CAS means another
         * thread pushed an arena: lock-free. */
        if (atomic_compare_exchange_strong_explicit(&arena_list, &head, fresh, memory_order_release,
                                                    memory_order_relaxed)) {
            seen = fresh;
            fresh = NULL;
            LFH_PARK(ARENA_LISTED);
            if ((p = alloc_in(seen, chunk, false)) != NULL)
                break;
        }
    }
    if (fresh)
        arena_discard(fresh);
    return p;
}

/* The biggest run, in chunks, that a fresh chunk merges before clean memory: the chunk
 * then takes at least an eighth of it. A small request carved out of a big freed run
 * split it, and the run's class, asked for again, found no free chunk of its size there:
 * the sweep gave the merged pages back and the block faulted in new ones. */
#define MERGE_SPAN 8

/* A fresh chunk: one mostly of merged pages if there is one (resident already), else
 * any free one; its pages read as zeros except where their dirty_free bits are set
 * (merged runs, above), which the caller claims. */
static void *fresh_chunk(size_t chunk)
{
    struct arena *seen;
    /* Arenas found full are skipped first: with thousands of threads alive, a thread whose
     * arena filled up scanned every older, full one before the newest (4,000 threads:
     * the level scans were a fifth of the samples, docs/BENCHMARKS.md, "Many threads
     * alive at once"). A level can look full while a node is free, when another thread's
     * allocation marked it and lost its CAS, so before any memory is added the arenas
     * are scanned whole. */
    void *p = dirty_free_take(chunk);
    if (p)
        return p;
    dirty_free_sweep(0, 0, true);
    /* Merging freed runs lets the buddies coalesce them and keeps their pages, but gives
     * up what they were kept for (their classes' next blocks). So it comes first only
     * when the freed runs outweigh those in use, and then for the runs up to
     * MERGE_SPAN times the chunk, before any clean memory is taken. A run that could
     * have served this chunk was taken already (arena_alloc, arena_alloc_large), so what
     * waits is either smaller than the chunk, which only coalesced can serve it, or too
     * big to be reused for it: kept for its class, such a run stayed resident while the
     * chunk faulted in new pages, both resident at once (`sort -S 50M` freed its 50 MB
     * buffer, then took 13 MB ones from clean pages: a peak of 66 MiB against glibc's
     * 53). A program that frees 192 MiB of 256 KiB blocks in four arenas, the newest
     * mostly clean, took that arena's clean pages for its next 64 MiB of 1 MiB blocks,
     * 16,256 faults, while the freed runs stayed resident. When the merged runs' class
     * is asked for again, dirty_free_take finds their pages. Otherwise a new arena's
     * address space is cheaper, and the purge is the last resort when none can be
     * mapped. */
    if (mostly_dirty() && arena_merge_up_to(MERGE_SPAN * chunk) > 0 &&
        (p = dirty_free_take(chunk)) != NULL)
        return p;
    p = alloc_from_arenas(chunk, &seen, true);
    if (!p)
        p = alloc_from_arenas(chunk, &seen, false);
    if (!p && mostly_dirty() && arena_merge_up_to(SIZE_MAX) > 0)
        p = alloc_from_arenas(chunk, &seen, false);
    if (!p)
        p = alloc_from_new_arena(chunk, seen);
    /* The purge fills the buddies, and unmaps the kept huge mappings (mapcache.h), whose
     * address space only a new arena can use: both are tried again. */
    if (!p && arena_purge_all() > 0) {
        p = alloc_from_arenas(chunk, &seen, false);
        if (!p)
            p = alloc_from_new_arena(chunk, seen);
    }
    return p;
}

/* Carves a run of class cls out of a fresh chunk of its order: the chunk goes back to its
 * buddy as it was (its dirty_free bits, if any, stay set), and the run's pieces are taken
 * again at its start, largest first (buddy_alloc_at), so that the rest of the chunk is
 * free for any other chunk. Between the two steps another thread may take part of the
 * chunk: then the pieces taken so far go back and false says so. No step waits for
 * anyone. */
static bool run_carve(char *chunk, unsigned cls)
{
    struct buddy *buddy = arena_of(chunk)->buddy;
    buddy_free(buddy, chunk);
    LFH_PARK(ARENA_RUN_CARVE);
    size_t eighth = class_size(cls) / class_eighths(cls);
    char *piece = chunk;
    for (size_t bit = 8; bit; bit >>= 1) {
        if (!(class_eighths(cls) & bit))
            continue;
        if (!buddy_alloc_at(buddy, piece, bit * eighth)) {
            pieces_release(buddy, chunk, piece);
            return false;
        }
        piece += bit * eighth;
    }
    return true;
}

/* Extends a run whose pieces end at `from` to end at `to`, taking the buddy chunks in
 * between (each the largest the address is aligned to that fits) if they are all free:
 * after a fresh run, the rest of its chunk stayed free, and often still is. False,
 * with the pieces taken so far given back, if any of them is taken. */
static bool run_extend(char *from, char *to, bool *merged)
{
    struct arena *a = arena_of(from);
    for (char *piece = from; piece < to;) {
        size_t offset = (size_t)(piece - a->base);
        size_t bytes = offset ? offset & -offset : ARENA_SIZE;
        while (piece + bytes > to)
            bytes >>= 1;
        if (!buddy_alloc_at(a->buddy, piece, bytes)) {
            pieces_release(a->buddy, from, piece);
            return false;
        }
        LFH_PARK(ARENA_RUN_EXTEND);
        piece += bytes;
    }
    *merged = dirty_free_claim(a, from, (size_t)(to - from));
    return true;
}

/* A freed run of up to four classes below `cls` (about half its size and up), aligned as
 * a run of `cls` must be, extended to that class by run_extend, or NULL. Its resident
 * pages save the block as many page faults. */
static char *dirty_extended(unsigned cls)
{
    size_t align = ARENA_MIN_CHUNK << class_order(cls);
    bool merged; /* the extended run is not zeroed anyway: nothing to do with it */
    for (unsigned c = cls > 4 ? cls - 4 : 0; c < cls; c++) {
        char *dirty = dirty_pop(c);
        if (!dirty)
            continue;
        if (!((uintptr_t)dirty & (align - 1)) &&
            run_extend(dirty + class_size(c), dirty + class_size(cls), &merged)) {
            bytes_add(&run_bytes.dirty, -class_size(c));
            bytes_add(&run_bytes.held, class_size(cls) - class_size(c));
            return dirty;
        }
        /* Back on a stack, with the time it was freed (still in its side array). */
        dirty_push(c, dirty);
    }
    return NULL;
}

/* Before a fresh run, whose pages the block will fault in: runs waiting dirty are a bet
 * that their classes are asked for again within the purge delay, and when they are
 * more than a part of the runs held (and at least DIRTY_PRESSURE_MIN) the bet is losing:
 * the program's blocks have moved to other classes, and the resident size grows by every
 * fresh run while the dirty ones wait out their delay (sqlite3 building an index: 16 MiB
 * of its 62 MiB peak). Then the runs that waited DIRTY_PRESSURE_SHARE of the delay (16 ms
 * of the default 250) go back at once, through the same CAS on the last purge time as
 * the slow paths' purge, so at most one walk of the stacks per that time. A share of an
 * eighth of the delay left sqlite3 at 54 MiB. A thirty-second gave back, on a busy
 * machine, the buffer that sqlite3's next sort was about to reuse (its peak 56-59 MiB in
 * 18 of 25 runs beside three busy loops, against 1 of 25 with a sixteenth).
 * The part is a quarter before a large run, whose class may be the one waiting, and an
 * eighth before a superblock's chunk, which a waiting large run serves only merged: with
 * a quarter, dpkg -S kept its freed 4 MiB read buffer, a fifth of what it held, resident
 * beside the 8 KiB blocks that came next (a peak of 37 MiB against 33, glibc's 31); with
 * an eighth before large runs too, bench/pool-rebuild faulted more (a median of 130 k
 * pages against 114 k, in runs that spread over 77-248 k). docs/BENCHMARKS.md has the
 * measurements. Relaxed loads: a glance, as in mostly_dirty. */
#define DIRTY_PRESSURE_MIN             ((size_t)4 << 20)
#define DIRTY_PRESSURE_PART_SUPERBLOCK 8  /* before a superblock's chunk: an eighth */
#define DIRTY_PRESSURE_PART_LARGE      4  /* before a large block's run: a quarter */
#define DIRTY_PRESSURE_SHARE           16 /* the delay's share that runs wait under pressure: 1/16 */

/* Whether `waiting` bytes (freed runs, kept mappings) are pressure before a fresh run or
 * mapping: at least DIRTY_PRESSURE_MIN, more than the part of the runs held, and the
 * last purge they had, by `score`, not regretted. */
static bool pressed(size_t waiting, unsigned part, struct purge_score *score, uint32_t now)
{
    return waiting >= DIRTY_PRESSURE_MIN &&
           waiting > atomic_load_explicit(&run_bytes.held, memory_order_relaxed) / part &&
           !purge_regretted(score, now);
}

/* Kept huge mappings wait for a request of their own size and serve no run, so a fresh
 * run beside them grows the resident size by its own pages while theirs wait out the
 * whole delay: ImageMagick freed three 79 MB images and took runs of 27 and 47 MB at
 * once, a peak of 402 MB against glibc's 319. So they count as pressure too: when they
 * are more than the part of the runs held, those that waited the pressure's share of the
 * delay are unmapped. Scored as the purge under pressure is: a fresh huge mapping within
 * the window (arena_before_mapping) is a refault, and once half of what went back
 * was mapped again, the kept mappings wait out their delay for the window's length, as
 * they did before. */
static void release_kept_if_pressed(uint32_t now, unsigned part, uint32_t delay)
{
    if (!pressed(mapcache_kept_bytes(), part, &kept_score, now))
        return;
    size_t released = mapcache_release(now, delay, false);
    if (released != 0)
        purge_scored_bytes(&kept_score, now, released, (uint64_t)1 << KEPT_CLASS);
}
static void purge_if_pressed(uint32_t now, unsigned part)
{
    uint32_t delay = purge_delay() / DIRTY_PRESSURE_SHARE;
    release_kept_if_pressed(now, part, delay);
    size_t dirty = dirty_bytes();
    if (!pressed(dirty, part, &pressure_score, now))
        return;
    uint64_t classes = purge_if_due(now, delay + 1, delay, true);
    if (classes != 0)
        purge_scored(&pressure_score, now, dirty, classes);
}

/* No freed run can serve a block bigger than an arena, and a program that frees its big
 * blocks and maps a bigger one at once (ImageMagick frees two images of 35 and 41 MB
 * and takes one of 79 MB within a millisecond) gives its freed runs no time to wait
 * even the pressure purge's 1/16 of the delay: they stayed resident beside the new
 * mapping's pages. So under the same pressure as before a large block's fresh run,
 * every freed run goes back, whatever its age, decommitted rather than merged (merged
 * pages are of no use to the mapping either, and are swept, as fresh_chunk sweeps
 * them), and the purge keeps the pressure purge's score: a program that asks for those
 * runs' classes again soon stops it for the score's window. */
void arena_before_mapping(size_t bytes)
{
    uint32_t now = platform_now_ms();
    purge_score_fresh(&kept_score, now, KEPT_CLASS, KEPT_CLASS, bytes);
    size_t dirty = dirty_bytes();
    if (pressed(dirty, DIRTY_PRESSURE_PART_LARGE, &pressure_score, now)) {
        uint64_t classes = purge_due(now, 0, false);
        if (classes != 0)
            purge_scored(&pressure_score, now, dirty, classes);
    }
    dirty_free_sweep(0, 0, true);
}

/* A freed run of the first class from `first` to `last` that has one (its class in
 * *cls), or NULL. */
static char *dirty_pop_among(unsigned *cls, unsigned first, unsigned last)
{
    for (unsigned c = first; c <= last; c++) {
        char *dirty = dirty_pop(c);
        if (dirty) {
            bytes_add(&run_bytes.dirty, -class_size(c));
            *cls = c;
            return dirty;
        }
    }
    return NULL;
}

/* A fresh run of class *cls (see arena_alloc_run). */
static char *fresh_run(unsigned *cls)
{
    unsigned order = class_order(*cls);
    size_t chunk = ARENA_MIN_CHUNK << order;
    if (*cls != whole_class(order)) {
        for (unsigned attempt = 0; attempt < RUN_ATTEMPTS; attempt++) {
            char *p = fresh_chunk(chunk);
            if (!p || run_carve(p, *cls))
                return p;
        }
        *cls = whole_class(order);
    }
    return fresh_chunk(chunk);
}

/* A run of class *cls for `size` bytes, the first of: a freed run at most a quarter
 * bigger than `size`; with `extend`, a smaller freed run extended (dirty_extended); a
 * freed run of a class up to `last_dirty`, whole and as resident as it was (see
 * arena_alloc_large); a fresh run. *cls says which class the run has. A fresh run of a
 * class smaller than its chunk is carved out of a fresh chunk; if other threads keep
 * taking parts of the chunks meanwhile, after RUN_ATTEMPTS the chunk is kept whole, so
 * that nobody retries forever. Before a fresh run, purge_if_pressed with pressure_part. */
static void *arena_alloc_run(unsigned *cls, bool *zeroed, size_t size, unsigned last_dirty,
                             bool extend, unsigned pressure_part)
{
    arena_tick();
    *zeroed = false;
    const unsigned first = *cls;
    unsigned fit_last = first;
    while (fit_last < last_dirty && class_size(fit_last + 1) - size <= size / 4)
        fit_last++;
    char *run = dirty_pop_among(cls, first, fit_last);
    if (!run && extend)
        run = dirty_extended(*cls);
    if (!run)
        run = dirty_pop_among(cls, fit_last + 1, last_dirty);
    if (!run) {
        *zeroed = true;
        uint32_t now = platform_now_ms();
        purge_score_fresh(&exit_score, now, first, last_dirty, class_size(first));
        purge_score_fresh(&pressure_score, now, first, last_dirty, class_size(first));
        purge_score_fresh(&short_delay_score, now, first, last_dirty, class_size(first));
        purge_if_pressed(now, pressure_part);
        run = fresh_run(cls);
        if (run) {
            bytes_add(&run_bytes.held, class_size(*cls));
            if (dirty_free_claim(arena_of(run), run, class_size(*cls)))
                *zeroed = false;
        }
    }
    return run;
}

#define SUPERBLOCK_REUSE_DIRTY_MIN ((size_t)16 << 20)
void *arena_alloc(size_t size, bool *zeroed, size_t *chunk_size)
{
    unsigned cls = whole_class(chunk_order(arena_chunk_size(size)));
    /* When freed runs pile up, one up to ARENA_SUPERBLOCK_REUSE_MAX times the chunk will
     * do: its pages are resident already, where a fresh chunk faults in every page its
     * blocks touch while the freed runs wait out their purge delay. With its own size
     * only, clang++ -O2 took 29 MiB of fresh 64 KiB chunks in its last phase while
     * 27 MiB of freed 128 and 256 KiB runs waited, and peaked 5% higher. Only from
     * SUPERBLOCK_REUSE_DIRTY_MIN of freed runs: a bigger superblock's uncarved rest stays
     * resident with its owner, a cost worth paying only against much freed memory, and a
     * small program never pays it (docs/BENCHMARKS.md, "Superblocks in freed runs"). */
    const size_t chunk = class_size(cls);
    unsigned last = cls;
    if (dirty_bytes() >= SUPERBLOCK_REUSE_DIRTY_MIN)
        while (last + 1 < ARENA_CLASSES &&
               class_size(last + 1) <= ARENA_SUPERBLOCK_REUSE_MAX * chunk)
            last++;
    void *p = arena_alloc_run(&cls, zeroed, chunk, last, false, DIRTY_PRESSURE_PART_SUPERBLOCK);
    *chunk_size = class_size(cls);
    return p;
}

void *arena_alloc_large(size_t size, bool *zeroed, size_t *chunk_size)
{
    unsigned cls = size_class_of(size), last = cls;
    /* A freed run up to three times the request will do, kept whole and resident: with
     * blocks of varied sizes a freed run of the block's own class rarely waits, and a
     * fresh run (or the purge of every freed run that finding room for it may take)
     * faults in every page the block touches. Giving back the pages past the request
     * instead (decommit) made the next, bigger tenant fault them in again, and a bound
     * of twice the request left too few runs to choose from: with either, `large`
     * faulted and spent more system time than with power-of-two chunks
     * (docs/ARCHITECTURE.md, "Runs"). */
    while (last + 1 < ARENA_CLASSES && class_size(last + 1) <= ARENA_LARGE_REUSE_MAX * size)
        last++;
    void *p = arena_alloc_run(&cls, zeroed, size, last, true, DIRTY_PRESSURE_PART_LARGE);
    *chunk_size = class_size(cls);
    /* A freed run bigger than a fresh run would be: the block gets a fresh run's extent,
     * and the tail's pages go back if it lives a purge delay (tails, above). A run up to a
     * quarter bigger than `size` was given whole, but `size` is the request rounded up to
     * pages, so a block of 36,865 bytes took a freed 48 KiB run whole, a third more than
     * its request, where a fresh run holds 40 KiB. A fresh run's tail is not resident (a
     * whole chunk after lost carves: fresh_run). */
    size_t extent = arena_large_size(size);
    if (p && !*zeroed && class_size(cls) > extent && tail_register(p, extent, class_size(cls)))
        *chunk_size = extent;
    return p;
}

/* Puts a run freed by its block (or by a purge that was decommitting its tail when the
 * block was freed) on its stack. */
static void run_freed(struct arena *a, void *chunk, size_t size, bool superblock)
{
    uint32_t now = platform_now_ms();
    /* Freed by a thread handing its cache back at exit: due at once (arena_prompt_end). */
    if (prompt_depth != 0)
        now -= purge_delay();
    uint32_t stamp = free_stamp(now, superblock);
    /* Relaxed: the push's release CAS publishes the stamp. */
    unsigned cls = size_class_of(size);
    atomic_store_explicit(&a->freed_ms[chunk_page(a, chunk)], stamp, memory_order_relaxed);
    dirty_push(cls, chunk);
    bytes_add(&run_bytes.dirty, class_size(cls));
    if (prompt_depth != 0) {
        prompt_freed = true;
        /* Release, after the push: the exit that takes the count (acquire exchange in
         * arena_prompt_end) then finds the run on its stack. */
        atomic_fetch_add_explicit(&prompt_pending, class_size(cls), memory_order_release);
    }
}

static void chunk_free(void *chunk, size_t size, bool superblock)
{
    struct arena *a = arena_of(chunk);
    /* A superblock's chunk is never registered (only arena_alloc_large registers). */
    if (!superblock)
        size = tail_settle(a, chunk, size);
    if (size != 0)
        run_freed(a, chunk, size, superblock);
    arena_tick();
}

void arena_free(void *chunk, size_t size)
{
    chunk_free(chunk, size, false);
}

void arena_free_superblock(void *chunk, size_t size)
{
    chunk_free(chunk, size, true);
}

/* The newest arena; acquire: see alloc_from_arenas. */
static struct arena *arena_newest(void)
{
    return atomic_load_explicit(&arena_list, memory_order_acquire);
}

#if PARK_ENABLED
/* Whether `run` is the start of a run on some dirty stack; only while no thread is inside
 * lfheap, as arena_busy_runs. */
static bool dirty_listed(const char *run)
{
    for (unsigned row = 0; row < DIRTY_ROWS; row++)
        for (unsigned cls = 0; cls < ARENA_CLASSES; cls++) {
            /* Relaxed: nobody else is inside lfheap. */
            const char *p =
                dirty_top(atomic_load_explicit(dirty_stack(row, cls), memory_order_relaxed));
            while (p) {
                if (p == run)
                    return true;
                struct arena *a = arena_of(p);
                p = (const char *)atomic_load_explicit(&a->next[chunk_page(a, p)],
                                                       memory_order_relaxed);
            }
        }
    return false;
}

/* Whether the chunk of `size` bytes at `p` is free in its arena's buddy: taken and given
 * straight back. For the chunk of all the arena's mapped bytes, only if every chunk of
 * the arena was released and coalesced (buddy.h). */
static bool chunk_free_in_buddy(struct arena *a, char *p, size_t size)
{
    if (!buddy_alloc_at(a->buddy, p, size))
        return false;
    buddy_free(a->buddy, p);
    return true;
}

void arena_busy_runs(void (*seen)(const char *start, size_t bytes, bool listed))
{
    for (struct arena *a = arena_newest(); a; a = a->older) {
        if (chunk_free_in_buddy(a, a->base, a->backed))
            continue;
        /* Each range of pages in use, then the free page that ends it, skipped. */
        for (char *p = a->base, *end = a->base + a->backed; p < end;) {
            char *q = p;
            while (q < end && !chunk_free_in_buddy(a, q, ARENA_MIN_CHUNK))
                q += ARENA_MIN_CHUNK;
            if (q != p)
                seen(p, (size_t)(q - p), dirty_listed(p));
            p = q + ARENA_MIN_CHUNK;
        }
    }
}

unsigned arena_busy_count(void)
{
    unsigned busy = 0;
    for (struct arena *a = arena_newest(); a; a = a->older)
        busy += !chunk_free_in_buddy(a, a->base, a->backed);
    return busy;
}
#endif

struct buddy *arena_buddy(const void *chunk)
{
    return arena_of(chunk)->buddy;
}

unsigned arena_mapped(void)
{
    unsigned mapped = 0;
    for (const struct arena *a = arena_newest(); a; a = a->older)
        mapped++;
    return mapped;
}

unsigned arena_mapped_of(size_t backed)
{
    unsigned mapped = 0;
    for (const struct arena *a = arena_newest(); a; a = a->older)
        mapped += a->backed == backed;
    return mapped;
}

size_t arena_mapped_bytes(void)
{
    size_t bytes = 0;
    for (const struct arena *a = arena_newest(); a; a = a->older)
        bytes += a->backed;
    return bytes;
}
