/*
 * tcache: the slow paths of the thread caches — carving, filling from the heap, flushing
 * back to it, remote-free batching, and handing the whole cache back at thread exit.
 * Nothing here takes a lock: the cache is thread-local, and the heap is lock-free.
 */
#include "tcache.h"

#include "pagemap.h"
#include "park.h"
#include "platform.h"
#include "stats.h"
#include "vgclient.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Starts as TCACHE_ID_UNSET in every new thread (a TLS initialiser), so an uninitialised
 * cache matches no owner, not even HEAP_OWNER_NONE. */
__thread struct tcache tcache_self = {.id = TCACHE_ID_UNSET};

__thread unsigned tcache_busy;
__thread unsigned tcache_in_handler;
__thread uintptr_t tcache_handler_frames[TCACHE_HANDLER_FRAMES];

/* The stack grows down: a call made inside a handler has a lower frame address than the
 * wrapper that called the handler. A signal that arrives here runs its own handler
 * between a raise and a lowering back to the count it found, so the count this reads
 * and lowers stays this thread's. Deeper than the frames kept: assumed running. */
bool tcache_handler_running(void)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    unsigned depth = tcache_in_handler;
    while (depth > 0) {
        if (depth > TCACHE_HANDLER_FRAMES || here < tcache_handler_frames[depth - 1])
            return true;
        depth--;
        tcache_in_handler = depth;
    }
    return false;
}

/* Every slow path raises tcache_busy for its whole run (sigwrap.c). The signal fences keep
 * the compiler from moving the cache's updates out of the raised stretch; a handler on
 * this thread sees the counter as of the instruction it interrupted. */
static inline void busy_enter(void)
{
    tcache_busy++;
    atomic_signal_fence(memory_order_seq_cst);
}

static inline void busy_leave(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    tcache_busy--;
}

/* A thread buffers this many frees of blocks it does not own before it returns them; the
 * batch is large enough that returning costs about one CAS per superblock run. */
#define TCACHE_REMOTE_BATCH 64

/* Bytes a bin may cache at first and at most; the block limits follow from the class.
 * The caches' budget (tcache.h) is what bounds a thread's cache; this cap only keeps one
 * class from taking all of a share. At 128 KiB, a thread that frees its batches of small
 * blocks (threadtest: 50,000 of 16 bytes) gave all but 4,096 back to their superblocks
 * and carved them again, which with 1 MiB it keeps: 67 instructions per malloc and free
 * against 55 (docs/ARCHITECTURE.md, *Thread cache*). */
#define TCACHE_BYTES_INITIAL 32768
#define TCACHE_BYTES_MAX     ((size_t)1 << 20)
#define TCACHE_BLOCKS_MAX    65536

/* Bytes of new superblocks a thread takes between two sweeps of its idle classes in its
 * fills (alloc_slow): a thread that moves on to other classes (from malloc'd blocks to
 * calloc's tracked ones, or to other sizes) otherwise kept the blocks the classes it left
 * had cached, and the superblocks they lay in, while it faulted in new ones. A sweep is
 * a walk of the 90 classes, about 900 instructions, so it waits for four superblocks of
 * 64 KiB: a thread that takes a new superblock every 8 blocks of 8,000 bytes and frees
 * nothing runs 6.5% more instructions (24% with a sweep at every new superblock). */
#define TCACHE_SWEEP_NEW_BYTES ((uint32_t)256 << 10)

/* This thread's cache is counted in arena_cached_threads, the caches set up and not yet
 * handed back: what the budget is shared among (a share computed from a stale count is
 * as good a bound for the next overflow), and what tells the background purger, without
 * /proc, that threads remain. */
static __thread bool tcache_counted;

/* Set in a forked child's thread until its first purge tick (after_fork_child). */
static __thread bool fork_tick_pending;

static _Atomic uint64_t tcache_last_id;

/* Caches of exited threads, waiting for a new thread to adopt them whole (Streamflow's
 * adoption of orphaned page blocks; LRMalloc's future work of recycling thread caches):
 * the new thread takes over the lists, the bump ranges and the id, so it also owns the
 * superblocks the old thread owned, and thread churn costs neither a flush nor a fill.
 * A slot is filled by one CAS and emptied by one exchange: no ABA, no waiting. Threads
 * that start and exit one after another use a few slots; when more exit at once, the
 * caches that find every slot taken go back to the heap, and the chunks they empty to the
 * kernel (arena_prompt_begin). 16 slots, where there were 64, leave 500 threads exiting
 * at once 12 MiB resident instead of 19 (bench/thread-churn-concurrent --hold=1) and
 * leave threads that churn one or a few at a time as fast as before. A process uses two
 * slots per CPU it may run on, 4 to 16 (orphan_slots): what fills more slots than that
 * are threads exiting at once faster than new ones start, and on two CPUs 4 slots took
 * that benchmark's resident size at its last round from 6.6 to 6.1 MiB (glibc 5.3) and
 * with --hold=1 from 12.0 to 10.0, in the same time. */
#define TCACHE_ORPHAN_SLOTS     16
#define TCACHE_ORPHAN_SLOTS_MIN 4
/* A slot holds its cache in lfheap's own static storage, never in a heap block: a block
 * the exiting thread had freed could otherwise hold the copy, and a double free of it by
 * the program (refused anywhere else) would free the orphan under its adopter. Claimed
 * EMPTY -> BUSY by CAS (acquire: the previous user's reads of the copy happen before our
 * writes), published BUSY -> FULL (release), taken FULL -> BUSY by CAS (acquire: the copy
 * is complete), handed back BUSY -> EMPTY (release). A thread finding a slot BUSY moves
 * on to the next one: nobody waits. The states sit together in one cache line, apart from
 * the caches (3 KiB each), so that a thread's setup, which reads every state, touches one
 * line: a kernel that gives a read of untouched memory a page of its own (as this
 * project's test machines' do) made every process resident in all the pages of the
 * states spread among the caches. Untouched caches cost no resident memory (.bss). An
 * orphan keeps its store (tcache_store.c), which its adopter takes over. */
enum { ORPHAN_EMPTY, ORPHAN_BUSY, ORPHAN_FULL };
static _Alignas(64) _Atomic uint32_t orphan_states[TCACHE_ORPHAN_SLOTS];
static struct tcache orphan_caches[TCACHE_ORPHAN_SLOTS];
/* The slot this thread holds BUSY, if a handler that never returns stops it there: its
 * exit, run again, gives the slot back (the cache in it is lost, as any cache of a killed
 * thread mid-hand-back; tcache_hide.c). ORPHAN_NONE when it holds none. */
#define ORPHAN_NONE TCACHE_ORPHAN_SLOTS
static __thread unsigned orphan_held = ORPHAN_NONE;
/* The slots an exiting thread may fill (tcache_orphan_slots of the CPUs); 0 until the
 * first exit reads the CPU count. Relaxed: every thread computes the same value, and a
 * stale 0 only has it computed once more. Adopters look in all TCACHE_ORPHAN_SLOTS. */
static _Atomic unsigned orphan_slots_used;
static _Atomic unsigned tcache_exit_key; /* pthread key + 1; 0 while none exists */

/* Makes `list` (`length` blocks) the bin's list: its credit lets it grow to limit/2
 * blocks, and the free after that overflows it (tcache_flush). A longer list, which a
 * fill may bring, overflows at the next free. */
static void bin_install(struct tcache_bin *bin, struct tcache_cold *cold, void *list,
                        uint32_t length)
{
    int32_t room = (int32_t)(cold->limit / 2) + 1 - (int32_t)length;
    bin->head = list;
    bin->credit = room > 0 ? room : 1;
    cold->list_base = length + (uint32_t)bin->credit;
}

static uint32_t clamp_blocks(size_t bytes, unsigned cls, uint32_t lo, uint32_t hi)
{
    size_t blocks = bytes / sizeclass_block_size[heap_size_class(cls)];
    return blocks < lo ? lo : blocks > hi ? hi : (uint32_t)blocks;
}

static void live_count_enter(void)
{
    if (tcache_counted)
        return;
    tcache_counted = true;
    atomic_fetch_add_explicit(&arena_cached_threads, 1, memory_order_relaxed);
}

static void live_count_leave(void)
{
    if (!tcache_counted)
        return;
    tcache_counted = false;
    atomic_fetch_sub_explicit(&arena_cached_threads, 1, memory_order_relaxed);
}

/* A forked child has one thread, the one that forked: the others' caches are not its
 * to count. A relaxed store is enough: the child runs no other thread yet. Its next free
 * that stays in the cache takes the purge tick: a child that inherited its parent's freed
 * memory and lives on the fast paths (LFHEAP_BACKGROUND=1's child, whose purger starts at
 * a tick, held 200 MiB of it for good) purges what is due at once, rather than 65,536
 * frees later, and starts its own purger there if the parent had no other thread; a free
 * in a child of threads may be glibc's, inside a pthread_join (arena_purger_start), so
 * that tick gives every freed run back instead (arena_fork_tick) and the purger starts
 * at the child's first allocation that takes a slow path. Starting the purger here
 * instead would make every forked child multi-threaded, which some calls refuse (unshare
 * of a user namespace). */
static void after_fork_child(void)
{
    atomic_store_explicit(&arena_cached_threads, tcache_counted ? 1 : 0, memory_order_relaxed);
    tcache_self.free_ticks = 1;
    fork_tick_pending = true;
    /* Forked by a key destructor that ran after this thread's cache was handed back: the
     * child lives on in this thread and sets up a new cache at its next call, instead of
     * being served block by block from the heap for the rest of its life (30 times the
     * time per malloc and free). Not while the cache is hidden from a signal handler,
     * whose return restores what it saved; under memcheck the setup leaves it uncached
     * again. */
    if (tcache_self.id == TCACHE_ID_EXITED && tcache_hide_outermost())
        tcache_self.id = TCACHE_ID_UNSET;
}

/* This thread's share of the caches' budget. */
uint64_t tcache_budget_share(void)
{
    uint32_t live = atomic_load_explicit(&arena_cached_threads, memory_order_relaxed);
    uint64_t share = TCACHE_BUDGET_TOTAL / (live > 1 ? live : 1);
    return share > TCACHE_BUDGET_MIN ? share : TCACHE_BUDGET_MIN;
}

/* A class counts in the cache's limit_bytes from its first fill on (last_event no longer
 * NONE), so that classes a thread never used take nothing from its share; it starts at
 * its floor if its first limit does not fit the share. Only what a limit holds above the
 * floor counts: the floors of classes a thread used once would otherwise fill a small
 * share, and the class it uses now could never grow. */
static void count_class(struct tcache *tc, unsigned cls)
{
    struct tcache_cold *cold = &tc->cold[cls];
    uint64_t size = tc->bins[cls].block_size;
    if (tc->limit_bytes + (cold->limit - TCACHE_LIMIT_FLOOR) * size > tcache_budget_share())
        cold->limit = TCACHE_LIMIT_FLOOR;
    tc->limit_bytes += (cold->limit - TCACHE_LIMIT_FLOOR) * size;
}

/* Sets a counted class's limit, keeping the cache's total in step. */
static void set_limit(struct tcache *tc, unsigned cls, uint32_t limit)
{
    uint64_t size = tc->bins[cls].block_size;
    tc->limit_bytes = tc->limit_bytes - tc->cold[cls].limit * size + limit * size;
    tc->cold[cls].limit = limit;
}

static unsigned give_back_list(void *list, uint32_t length);
static void sweep_idle_classes(struct tcache *tc);

/* Gives back the spare magazine of a class (`cold`), if it has one. */
static void give_back_spare(struct tcache_cold *cold)
{
    void *spare = cold->spare;
    if (!spare)
        return;
    cold->spare = NULL;
    LFH_PARK(TCACHE_FLUSH_CUT); /* the same state as a flush's: blocks in hand */
    give_back_list(spare, cold->spare_count);
}

/* Returns what is left of the class's bump range to its superblock (the blocks the range
 * has not handed out yet), so that the superblock can go EMPTY once its carved blocks
 * are back too. */
static void give_back_bump(struct tcache_bin *bin, struct tcache_cold *cold)
{
    if (bin->bump != bin->bump_end)
        heap_give_back(cold->bump_desc, NULL, NULL, 0, bin->bump);
    bin->bump = bin->bump_end = NULL;
    cold->bump_desc = NULL;
}

/* Class `hot` must grow and the share has no room: every other counted class above its
 * floor halves its limit, and each gives back its spare magazine. A class still in use
 * grows again at its next fill after an overflow; one the thread no longer uses stops
 * holding the share (else a thread that once used many classes could never grow the one
 * it now uses). Runs only when a growth is refused, so at most once per fill. */
static void make_room(struct tcache *tc, unsigned hot)
{
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        struct tcache_cold *cold = &tc->cold[cls];
        if (cls == hot || cold->last_event == TCACHE_EVENT_NONE)
            continue;
        if (cold->limit > TCACHE_LIMIT_FLOOR)
            set_limit(tc, cls, cold->limit / 2);
        give_back_spare(cold);
    }
}

static void tcache_thread_exit(void *unused);

/* Made when the library is loaded, before the program's own keys as a rule: made at the
 * first cache setup instead, after the program had made 32 keys, it lay in glibc's
 * second-level tables, and a thread whose first allocation was such a table, for a key
 * of the program's (its first pthread_setspecific of it), lost its registration to the
 * outer call: its cache never went back at exit (platform_thread_key). A key that still
 * lies there (the program made 32 keys before this constructor ran) is "late": see
 * tcache_setup and tcache_exit_verify. */
__attribute__((constructor)) static void tcache_exit_key_early(void)
{
    /* Refused, a forked child of many threads keeps their count: smaller shares, no more. */
    platform_at_fork_child(after_fork_child);
    platform_thread_key(&tcache_exit_key, tcache_thread_exit);
}

/* glibc allocates the table of a range of 32 keys past the first 32 with calloc(32, 16)
 * (pthread_setspecific): 512 bytes in a tracked class, a few more with the debug and
 * secure builds' room. True for the calls of those classes, which may be that one. */
static bool tcache_call_may_be_key_table(unsigned heap_class)
{
    if (heap_class < SIZECLASS_COUNT || heap_class >= HEAP_CLASSES)
        return false;
    uint32_t block_size = sizeclass_block_size[heap_size_class(heap_class)];
    return block_size >= 512 && block_size < 1024;
}

__thread bool tcache_exit_verify;

void tcache_exit_reverify(void)
{
    struct tcache *tc = &tcache_self;
    if (tc->id < TCACHE_ID_EXITED)
        platform_thread_exit_rearm(&tcache_exit_key, tcache_thread_exit, tc);
    stats_exit_reverify();
}

static bool orphan_claim(unsigned slot, uint32_t from)
{
    uint32_t expected = from;
    if (atomic_load_explicit(&orphan_states[slot], memory_order_relaxed) != from ||
        !atomic_compare_exchange_strong_explicit(&orphan_states[slot], &expected, ORPHAN_BUSY,
                                                 memory_order_acquire, memory_order_relaxed))
        return false;
    orphan_held = slot;
    return true;
}

static void orphan_leave(unsigned slot, uint32_t to)
{
    orphan_held = ORPHAN_NONE;
    /* Release: see orphan_states. */
    atomic_store_explicit(&orphan_states[slot], to, memory_order_release);
}

/* A slot with an orphan in it, now BUSY and the caller's; ORPHAN_NONE if none. The
 * relaxed peek in orphan_claim makes an empty table cost loads, not writes. */
static unsigned orphan_take(void)
{
    for (unsigned slot = 0; slot < TCACHE_ORPHAN_SLOTS; slot++)
        if (orphan_claim(slot, ORPHAN_FULL))
            return slot;
    return ORPHAN_NONE;
}

/* heap_class: the class of the allocation that calls, HEAP_CLASS_LARGE for a large block
 * or a free. */
static void tcache_setup(struct tcache *tc, unsigned heap_class)
{
    /* Registered first, and uncached until set up: pthread_setspecific may allocate (glibc
     * does beyond 32 keys), and a thread that dies inside the rest of the setup (from a
     * signal handler that never returns) still has its exit accounted for. */
    tc->id = TCACHE_ID_EXITED;
    /* A late key's registration allocates the thread's table for its range, and this call
     * may be glibc's allocation of that very table for a key of the program's: the outer
     * call then installs its table over ours, and the registration is lost (and the table
     * with it). Only where libc's own allocations are lfheap's (the standard names). So
     * a call that may be that table's allocation (its class) sets nothing up: the cache
     * stays unset and the call is served without it, and the next call of another class,
     * outside that one, sets it up. Putting off the thread's first call instead (as once)
     * lost a table for every thread whose first call was its own malloc and whose second
     * was glibc's table: the registration then came from inside that one. From then on the
     * end of every slow path checks the registration and makes it again if an outer call
     * replaced it (tcache_exit_verify). */
    bool late =
        API_STANDARD_NAMES && platform_thread_key_late(&tcache_exit_key, tcache_thread_exit);
    if (late && tcache_call_may_be_key_table(heap_class)) {
        tc->id = TCACHE_ID_UNSET;
        return;
    }
    /* Without a key the cache stays with the thread when it exits: bounded. A late key's
     * registration refused because it is nested in another of this thread's (stats.c)
     * waits for the next call, as above. */
    if (!platform_at_thread_exit(&tcache_exit_key, tcache_thread_exit, tc) && late) {
        tc->id = TCACHE_ID_UNSET;
        return;
    }
    /* The statistics' block, with a late key of its own, is taken and checked there too. */
    tcache_exit_verify = late || stats_exit_late();
    /* Under memcheck the cache stays empty, so that every call reaches a slow path that
     * reports the block to memcheck (vgclient.h). */
    if (vgclient_memcheck())
        return;
    unsigned slot = orphan_take();
    if (slot != ORPHAN_NONE) {
        /* The store first, at once: a signal handler that interrupts the copy finds the bins
         * copied so far with a store to save them in (tcache_hide), and one that kills the
         * thread has its exit give the store back (the orphan's lists and ranges are lost
         * with the slot it empties, the store is not). */
        tc->cold = orphan_caches[slot].cold;
        atomic_signal_fence(memory_order_seq_cst);
        LFH_PARK(TCACHE_ADOPT_TAKEN);
        *tc = orphan_caches[slot];
        orphan_leave(slot, ORPHAN_EMPTY);
        live_count_enter();
        STATS_ADD(STATS_CACHES_ADOPTED, 1);
        return;
    }
    /* No store, no cache: the call is served without one, and the next sets up again.
     * The failed mapping's errno is not the call's. */
    int saved_errno = errno;
    if (!tcache_store_claim(&tc->cold)) { /* all zeros, installed at once */
        errno = saved_errno;
        tc->id = TCACHE_ID_UNSET;
        return;
    }
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        tc->cold[cls].limit = clamp_blocks(TCACHE_BYTES_INITIAL, cls, TCACHE_LIMIT_FLOOR, 2048);
        bin_install(&tc->bins[cls], &tc->cold[cls], NULL, 0);
        tc->bins[cls].block_size = sizeclass_block_size[heap_size_class(cls)];
    }
    tc->limit_bytes = 0;
    /* Relaxed: ids only need to be distinct. */
    tc->id = atomic_fetch_add_explicit(&tcache_last_id, 1, memory_order_relaxed) + 1;
    live_count_enter();
    STATS_ADD(STATS_CACHES_NEW, 1);
}

/* How many blocks below the one give_back_list reads it asks the CPU to fetch ahead. A
 * list walk is a chain of dependent loads through blocks that left the CPU's caches
 * since they were freed, and no hardware prefetcher follows a chain. But a superblock's
 * blocks are carved upwards and programs often free in allocation order (a queue, a
 * batch, the data of a phase), so a cached list, newest first, runs down through each
 * superblock one block at a time, and the block this many below is the one the walk
 * reaches this many steps on. Where the order is another, it fetches some block of the
 * same superblock (when the list runs upwards, one the walk just read). Measured
 * (docs/BENCHMARKS.md, "Flushes prefetch"): half the profile samples in the walk of
 * `speed` at two threads; 4 blocks ahead did a little less. */
#define GIVE_BACK_PREFETCH 8

/* Slots of the table give_back_list gathers blocks in, per superblock (a power of two);
 * it gives every group back once half the slots are taken, so probes stay short. */
#define GIVE_BACK_SLOTS 64

/* Blocks of a list gathered per superblock, to be given back with one CAS each. */
struct give_back_table {
    struct descriptor *desc[GIVE_BACK_SLOTS]; /* NULL: the slot is free */
    void *first[GIVE_BACK_SLOTS];
    void *last[GIVE_BACK_SLOTS];
    uint32_t count[GIVE_BACK_SLOTS];
    uint8_t used[GIVE_BACK_SLOTS / 2]; /* the slots taken, in order */
    unsigned used_count;
};

static void give_back_groups(struct give_back_table *t)
{
    for (unsigned i = 0; i < t->used_count; i++) {
        unsigned slot = t->used[i];
        heap_give_back(t->desc[slot], t->first[slot], t->last[slot], t->count[slot], NULL);
        t->desc[slot] = NULL;
    }
    t->used_count = 0;
}

/* A list longer than its count (a block linked to itself is one): a block went onto the
 * list twice (a double free the free mark missed, because the program wrote into the freed
 * block's second word). The secure build stops the program; the release build leaves
 * the blocks not yet given back where they are, so that none is handed out twice by
 * the heap and no walk follows the cycle. */
static void list_corrupted(void *block)
{
#if SECURE_ENABLED
    secure_fail("double free or write after free", "free", block);
#else
    (void)block;
#endif
}

/* Returns a list of `length` blocks to their superblocks with one CAS per superblock, and
 * how many blocks it gave back. LRMalloc's CacheFlush takes one CAS per run of adjacent
 * blocks of a superblock; a batch of remote frees mixes superblocks, so the runs are
 * first merged per superblock in a small hash table on the stack, keyed by descriptor.
 * The walk trusts the cache's count, not the links the program could have overwritten:
 * it never takes more than `length` blocks, so a cycle cannot hold it. */
static unsigned give_back_list(void *list, uint32_t length)
{
    if (!list)
        return 0;
    struct give_back_table t;
    memset(t.desc, 0, sizeof t.desc);
    t.used_count = 0;
    unsigned blocks = 0;
    while (LFH_LIKELY(list != NULL) && LFH_LIKELY(blocks < length)) {
        /* A run: the list's links already chain it, a range test bounds it (the end of
         * the list, NULL, is out of every range). */
        struct descriptor *d = pagemap_desc_or_null(list);
        uintptr_t start = (uintptr_t)d->start;
        size_t size = d->size;
        void *first = list, *last = list;
        const uint32_t most = length - blocks;
        uint32_t count = 1;
        list = heap_link_get(list);
        if ((uintptr_t)list - start < size && most > 1) {
            /* Counted down, and the prefetch's distance negated (an address mode then
             * adds it), so that a step, the flush's cost per block, is 9 instructions
             * instead of 12; set up only for runs of two blocks or more, as remote frees
             * give many runs of one. */
            const intptr_t behind = -(intptr_t)(GIVE_BACK_PREFETCH * (size_t)d->block_size);
            uint32_t room = most - 1; /* blocks the run may still take */
            do {
                /* A hint: never faults, whatever the address. */
                __builtin_prefetch((const char *)list + behind);
                last = list;
                list = heap_link_get(list);
            } while (--room != 0 && (uintptr_t)list - start < size);
            count = most - room;
        }
        blocks += count;
        /* Descriptors are 128 bytes apart: their index spreads them over the slots. */
        unsigned slot =
            (unsigned)((uintptr_t)d / sizeof(struct descriptor)) & (GIVE_BACK_SLOTS - 1);
        while (t.desc[slot] && t.desc[slot] != d)
            slot = (slot + 1) & (GIVE_BACK_SLOTS - 1);
        if (t.desc[slot]) {
            heap_link_set(last, t.first[slot]);
            t.first[slot] = first;
            t.count[slot] += count;
            continue;
        }
        if (t.used_count == GIVE_BACK_SLOTS / 2)
            give_back_groups(&t);
        t.desc[slot] = d;
        t.first[slot] = first;
        t.last[slot] = last;
        t.count[slot] = count;
        t.used[t.used_count++] = (uint8_t)slot;
    }
    if (LFH_UNLIKELY(list != NULL)) {
        list_corrupted(list);
        return blocks;
    }
    give_back_groups(&t);
    return blocks;
}

static void flush_remote(struct tcache *tc)
{
    void *list = tc->remote_head;
    tc->remote_head = NULL;
    uint32_t count = tc->remote_count;
    tc->remote_count = 0;
    LFH_PARK(TCACHE_REMOTE_CUT);
    give_back_list(list, count);
}

/* A thread whose cache was handed back at exit (a later destructor still allocating), is
 * hidden from a signal handler, or runs under valgrind takes one block straight from the
 * heap and returns the rest. */
static void *alloc_uncached(unsigned cls)
{
    struct heap_fill fill;
    if (!heap_fill(cls, HEAP_OWNER_NONE, &fill)) {
        errno = ENOMEM;
        return NULL;
    }
    bool has_range = fill.bump != fill.bump_end;
    void *block;
    void *rest = NULL, *rest_last = NULL;
    uint32_t rest_count = 0;
    if (fill.chain) {
        block = fill.chain;
        rest = heap_link_get(block);
        for (void *b = rest; b; b = heap_link_get(b)) {
            rest_last = b;
            rest_count++;
        }
        /* Under memcheck the freed block is no memory of the program's, and memcheck
         * reports a write to it itself, where it happens: no fill to check. */
        if (SECURE_ENABLED && !vgclient_memcheck())
            secure_check_reuse(block, fill.desc->block_size,
                               heap_block_mark(block, heap_mark_key(fill.desc)), rest);
    } else {
        block = fill.bump;
        fill.bump += fill.desc->block_size;
    }
    uint32_t size = fill.desc->block_size;
    /* The give-back moves the frontier past a carved block before it is handed out, and
     * returns the rest of the bump range, but only if the fill brought one: an empty
     * range (the superblock's end) means another cache holds the tail and carves it, and
     * passing it on would move the frontier past that cache's uncarved blocks (they would
     * pass for live ones) and set the anchor's tail to none over the one that cache may
     * give back meanwhile, losing those blocks. */
    heap_give_back(fill.desc, rest, rest_last, rest_count, has_range ? fill.bump : NULL);
    vgclient_alloc(block, size);
    /* After the block is the program's for memcheck, so that the cleared mark reads as
     * defined: free compares it, and memcheck would report the comparison of a word the
     * program never wrote. */
    heap_block_hand_out(block, size);
    return block;
}

/* Hands out `block`, the head of a list of freed blocks, and makes the `rest` blocks
 * after it the bin's list. */
static void *hand_out_freed(struct tcache_bin *bin, struct tcache_cold *cold, void *block,
                            uint32_t rest)
{
    void *next = heap_link_get(block);
    if (SECURE_ENABLED)
        secure_check_reuse(block, bin->block_size, tcache_reused_mark(block), next);
    bin_install(bin, cold, next, rest);
    heap_block_hand_out(block, bin->block_size);
    return block;
}

static void *alloc_slow(unsigned cls)
{
    struct tcache *tc = &tcache_self;
    if (LFH_UNLIKELY(tc->id == TCACHE_ID_UNSET)) {
        tcache_setup(tc, cls);
        void *adopted =
            tcache_bin_take(tcache_base() + cls * SIZECLASS_STRIDE); /* an exited thread's cache */
        if (adopted)
            return adopted;
    }
    /* Handed back, hidden, or (TCACHE_ID_UNSET) its setup deferred (tcache_setup). */
    if (LFH_UNLIKELY(tc->id >= TCACHE_ID_EXITED))
        return alloc_uncached(cls);
    struct tcache_bin *bin = &tc->bins[cls];
    struct tcache_cold *cold = &tc->cold[cls];
    if (cold->spare) {
        /* The spare magazine becomes the list: no walk, no heap. */
        void *block = cold->spare;
        cold->spare = NULL;
        return hand_out_freed(bin, cold, block, cold->spare_count - 1);
    }
    struct heap_fill fill;
    if (!heap_fill_partial(cls, tc->id, &fill)) {
        /* A new superblock's pages: first the idle classes give back what they hold, so
         * that the superblocks only their caches kept go back to the arena and serve
         * this one (TCACHE_SWEEP_NEW_BYTES). */
        if (tc->new_bytes >= TCACHE_SWEEP_NEW_BYTES) {
            tc->new_bytes = 0;
            sweep_idle_classes(tc);
        }
        if (!heap_fill_new(cls, tc->id, &fill)) {
            errno = ENOMEM;
            return NULL;
        }
        tc->new_bytes += (uint32_t)fill.desc->size;
    }
    /* Emptied soon after overflowing: the working set is larger than the limit; it grows
     * if the thread's share of the budget has room. */
    if (cold->last_event == TCACHE_EVENT_FLUSH) {
        uint32_t max = clamp_blocks(TCACHE_BYTES_MAX, cls, 4, TCACHE_BLOCKS_MAX);
        uint32_t grown = cold->limit * 2 > max ? max : cold->limit * 2;
        uint64_t more = (uint64_t)(grown - cold->limit) * bin->block_size;
        uint64_t share = tcache_budget_share();
        if (tc->limit_bytes + more > share)
            make_room(tc, cls);
        if (tc->limit_bytes + more <= share)
            set_limit(tc, cls, grown);
    } else if (cold->last_event == TCACHE_EVENT_NONE) {
        count_class(tc, cls);
    }
    cold->last_event = TCACHE_EVENT_FILL;
    bin->bump = fill.bump;
    bin->bump_end = fill.bump_end;
    cold->bump_desc = fill.desc;
    if (fill.chain)
        return hand_out_freed(bin, cold, fill.chain, fill.chain_count - 1);
    bin_install(bin, cold, NULL, 0);
    void *block = bin->bump;
    bin->bump += bin->block_size;
    heap_set_carve_frontier(fill.desc, bin->bump);
    heap_block_hand_out(block, bin->block_size);
    return block;
}

void *tcache_alloc_slow(unsigned cls)
{
    busy_enter();
    void *block = alloc_slow(cls);
    busy_leave();
    tcache_purger_poll(false);
    return block;
}

void tcache_setup_slow(void)
{
    busy_enter();
    tcache_setup(&tcache_self, HEAP_CLASS_LARGE);
    busy_leave();
}

void *tcache_alloc_slow_size(size_t size)
{
    return tcache_alloc_slow(sizeclass_of(size));
}

static void flush_bin(void *block)
{
    struct tcache *tc = &tcache_self;
    unsigned cls = pagemap_desc_or_null(block)->class_index;
    struct tcache_bin *bin = &tc->bins[cls];
    struct tcache_cold *cold = &tc->cold[cls];
    /* The list overflowed with `block`, its head: the rest becomes the spare magazine, and
     * a spare that was still there goes back to the heap (LRMalloc's CacheFlush). */
    void *old_spare = cold->spare;
    uint32_t old_spare_count = cold->spare_count;
    void *rest = heap_link_get(block);
    uint32_t rest_count = cold->list_base - 1;
    heap_link_set(block, NULL);
    /* Over the thread's share: the class's limit halves, and the rest goes back too. Not
     * at the floor: a fill may have made the list longer than the limit, and giving that
     * rest back at each overflow would have the next fills take the same superblock's
     * blocks again and again. The class is counted in limit_bytes: only a fill makes this
     * thread the owner of blocks its list takes, and the fill counted it
     * (caches_share_a_budget checks the sum). */
    bool shrink = cold->limit > TCACHE_LIMIT_FLOOR && tc->limit_bytes > tcache_budget_share();
    if (shrink)
        set_limit(tc, cls, cold->limit / 2);
    cold->spare = shrink ? NULL : rest;
    cold->spare_count = shrink ? 0 : rest_count;
    bin_install(bin, cold, block, 1);
    if (!old_spare && !shrink)
        return;
    cold->last_event = TCACHE_EVENT_FLUSH;
    LFH_PARK(TCACHE_FLUSH_CUT);
    give_back_list(old_spare, old_spare_count);
    if (shrink)
        give_back_list(rest, rest_count);
}

/* The list from `list` holds exactly `count` blocks: it ends after them, not before and
 * not after (a cycle, which a double free the free mark missed makes, never ends). */
static bool list_holds(void *list, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        if (!list)
            return false;
        list = heap_link_get(list);
    }
    return list == NULL;
}

/* The blocks on a class's list by its count (*length); false when the count cannot be
 * right: the list handed out more blocks than it held, which a block that a missed double
 * free linked to itself makes it do (the block comes round at every pop). No walk may
 * trust that count: near 2^32, it had a sweep walk the cycle for more than 25 s. */
static bool list_count(const struct tcache_bin *bin, const struct tcache_cold *cold,
                       uint32_t *length)
{
    if ((int64_t)bin->credit > (int64_t)cold->list_base)
        return false;
    *length = cold->list_base - (uint32_t)bin->credit;
    return true;
}

/* Cuts the list of class `cls` to its first half, the blocks freed last (none of a list
 * of one), and gives back the rest. A corrupted list stays where it is (list_corrupted):
 * a double free that went onto the list twice left a block linked to itself, and a cut
 * at that block gave back the block the kept half still held, which the superblock then
 * counted twice: the program crashed at the next trim (idle_sweeps_leave_a_corrupted_list
 * in tests/test_api.c). */
static void halve_list(struct tcache *tc, unsigned cls)
{
    struct tcache_bin *bin = &tc->bins[cls];
    struct tcache_cold *cold = &tc->cold[cls];
    uint32_t length;
    if (!list_count(bin, cold, &length)) {
        list_corrupted(bin->head);
        return;
    }
    uint32_t keep = length / 2;
    void *rest = bin->head, *last_kept = NULL;
    for (uint32_t i = 0; i < keep && rest; i++) {
        last_kept = rest;
        rest = heap_link_get(rest);
    }
    /* A list that ends before the cut leaves rest NULL, which list_holds refuses too: the
     * rest has at least one block by the count. */
    if (!list_holds(rest, length - keep)) {
        list_corrupted(rest);
        return;
    }
    if (keep)
        heap_link_set(last_kept, NULL);
    bin_install(bin, cold, keep ? bin->head : NULL, keep);
    LFH_PARK(TCACHE_FLUSH_CUT);
    give_back_list(rest, length - keep);
}

/* What a purge tick sees of a class's list and bump range: the list's head and length
 * and the range's next block, folded into 16 bits. A fill or an overflow installs another
 * list, so it changes them too, and so does every block the range hands out: a class that
 * only allocates, from its range, is in use. */
static uint16_t list_mark(const struct tcache_bin *bin)
{
    uint64_t seen = ((uintptr_t)bin->head >> 4) ^ ((uint64_t)(uint32_t)bin->credit << 17) ^
                    ((uintptr_t)bin->bump >> 4 << 40);
    seen ^= seen >> 16;
    seen ^= seen >> 32;
    return (uint16_t)seen;
}

/* The sweep of idle classes, at each purge tick of the thread's frees (every 65,536th free
 * that stayed in the cache: tcache_free) and before a fill takes a new superblock
 * (TCACHE_SWEEP_NEW_BYTES). A class whose list the sweep finds as the last sweep left it
 * (the same head, the same length) gives back its spare magazine and the older half of its
 * list: the blocks at the bottom were not touched since that sweep. A class the thread
 * stopped using kept up to its limit of freed blocks for as long as the thread lived,
 * scattered over most of the class's superblocks, which stayed with them: strings grown a
 * byte at a time through every class, as gawk's concatenations grow them
 * (bench/strings-grow.c), peaked at 27.7 MB for 6 MB live, 270 of the 415 superblocks held
 * only by the cache, in 2,174 slow paths for 5.2 million allocations. Such a class empties
 * in a few ticks; one whose list moves keeps it, and one used a block at a time (a malloc
 * and its free, the head back where it was) keeps the blocks freed last, on top, which the
 * next allocations take (LIFO). An idle class also gives back its bump range once every
 * block carved from its superblock is back there, which empties the superblock: the range
 * kept it live for as long as the thread lived, however few of its blocks were in use
 * (speed's chains, which move between malloc's classes and calloc's tracked ones, took 9
 * fresh chunks in one chain while the tracked classes' ranges held theirs:
 * docs/BENCHMARKS.md, "Bump ranges left behind"). Not before: a class used now and then
 * (one block in a few hundred) looks idle at most sweeps, and its superblock, given back
 * with blocks still in use, went to another thread's fill, so that the blocks of one
 * superblock ended in several threads' caches, which kept 296 superblocks live in
 * test_idle's scenario where 242 stay now (docs/ARCHITECTURE.md, "Idle classes").
 * (LRMalloc's future work of adaptive caches; jemalloc's thread caches flush what stayed
 * below a low-water mark between two of their collections, which the fast path keeps.)
 * The thread's own cache, in its own slow path: nobody else is involved.
 */
static void sweep_idle_classes(struct tcache *tc)
{
    if (tc->id >= TCACHE_ID_EXITED)
        return;
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        struct tcache_bin *bin = &tc->bins[cls];
        struct tcache_cold *cold = &tc->cold[cls];
        bool bump_range = bin->bump != bin->bump_end;
        if (!bin->head && !cold->spare && !bump_range)
            continue; /* nothing to give back: most classes, and no mark to keep */
        uint16_t mark = list_mark(bin);
        if (cold->tick_mark != mark) {
            cold->tick_mark = mark;
            continue;
        }
        give_back_spare(cold);
        if (bin->head)
            halve_list(tc, cls);
        if (bump_range && heap_only_range_held(cold->bump_desc, bin->bump))
            give_back_bump(bin, cold);
        cold->tick_mark = list_mark(bin);
    }
}

void tcache_tick(void)
{
    busy_enter();
    sweep_idle_classes(&tcache_self);
    arena_tick();
    if (LFH_UNLIKELY(fork_tick_pending)) {
        fork_tick_pending = false;
        arena_fork_tick();
    }
    busy_leave();
    tcache_purger_poll(true);
}

void tcache_flush(void *block)
{
    busy_enter();
    flush_bin(block);
    busy_leave();
    tcache_purger_poll(true);
}

/* Buffers a block for its superblock's batch. The count goes up before the block joins
 * the list (the signal fence keeps that order against a handler on this thread): a thread
 * that never comes back from a handler here leaves a list no longer than its count, which
 * its exit returns whole (docs/ARCHITECTURE.md, *Threads that never return*). */
static inline void remote_push(struct tcache *tc, void *block, const struct descriptor *desc)
{
    heap_block_mark_free(block, heap_mark_key(desc));
    heap_link_set(block, tc->remote_head);
    tc->remote_count++;
    atomic_signal_fence(memory_order_seq_cst);
    tc->remote_head = block;
}

/* A small block this thread's cache may not keep: buffered to go back to its superblock
 * in a batch, or, once the cache was handed back, given back at once. */
static void free_remote(void *block, struct descriptor *desc)
{
    secure_check_free(block, desc->block_size);
    struct tcache *tc = &tcache_self;
    if (LFH_UNLIKELY(tc->id == TCACHE_ID_UNSET)) {
        tcache_setup(tc, HEAP_CLASS_LARGE);
        if (tc->id < TCACHE_ID_EXITED && tcache_owns(desc)) {
            /* The setup adopted the cache that owns the block: a free of its own. Sent to
             * the superblock instead, the block would wait there until the bump range the
             * cache carves runs out, so the cache carved one block more for each thread
             * that starts with a free (larson's 2,300 successive threads in 0.5 s). */
            struct tcache_bin *bin = &tc->bins[desc->class_index];
            heap_block_mark_free(block, heap_mark_key(desc));
            heap_link_set(block, bin->head);
            bin->head = block;
            if (--bin->credit == 0)
                flush_bin(block);
            return;
        }
    }
    if (LFH_UNLIKELY(tc->id >= TCACHE_ID_EXITED)) { /* as in alloc_slow */
        vgclient_free(block);
        vgclient_link(block);
        heap_block_mark_free(block, heap_mark_key(desc));
        heap_give_back(desc, block, block, 1, NULL);
        return;
    }
    remote_push(tc, block, desc);
    if (tc->remote_count >= TCACHE_REMOTE_BATCH)
        flush_remote(tc);
}

/* tcache_free_slow's cases other than a plain push: a cache not set up or handed back,
 * a full batch, the secure build's checks. Out of line, so that the push needs no frame. */
static LFH_NOINLINE void free_remote_rare(void *block, struct descriptor *desc)
{
    busy_enter();
    free_remote(block, desc);
    busy_leave();
    tcache_purger_poll(true);
}

void tcache_free_slow(void *block, struct descriptor *desc)
{
    struct tcache *tc = &tcache_self;
    /* id below TCACHE_ID_EXITED: a live cache, set up. */
    if (SECURE_ENABLED ||
        LFH_UNLIKELY(tc->id >= TCACHE_ID_EXITED || tc->remote_count + 1 >= TCACHE_REMOTE_BATCH)) {
        free_remote_rare(block, desc);
        return;
    }
    /* The push without tcache_busy: it calls nothing, so a signal landing in it finds the
     * interrupted instruction inside lfheap's code and the signal wrapper hides the cache
     * from the handler (sigwrap.c), as for the fast paths. */
    remote_push(tc, block, desc);
    tcache_purger_poll(true);
}

/* Gives back everything class `cls` of `tc` holds: its list, its spare and what is left
 * of its bump range. The number of listed blocks. */
static unsigned flush_class(struct tcache *tc, unsigned cls)
{
    struct tcache_bin *bin = &tc->bins[cls];
    struct tcache_cold *cold = &tc->cold[cls];
    void *list = bin->head;
    uint32_t length;
    if (!list_count(bin, cold, &length)) {
        list_corrupted(list); /* left where it is: dropped with the cache's list */
        list = NULL;
        length = 0;
    }
    bin_install(bin, cold, NULL, 0);
    unsigned cached = give_back_list(list, length);
    if (list)
        LFH_PARK(TCACHE_FLUSH_CLASS);
    cached += give_back_list(cold->spare, cold->spare_count);
    cold->spare = NULL;
    give_back_bump(bin, cold);
    return cached;
}

unsigned tcache_flush_cache(struct tcache *tc)
{
    unsigned cached = tc->remote_count;
    /* A cache without a store has empty bins. */
    for (unsigned cls = 0; tc->cold && cls < HEAP_CLASSES; cls++)
        cached += flush_class(tc, cls);
    flush_remote(tc);
    return cached;
}

unsigned tcache_flush_all(void)
{
    busy_enter();
    unsigned cached = 0;
    unsigned slot;
    while ((slot = orphan_take()) != ORPHAN_NONE) {
        cached += tcache_flush_cache(&orphan_caches[slot]);
        tcache_store_release(orphan_caches[slot].cold);
        orphan_leave(slot, ORPHAN_EMPTY);
    }
    /* An uncached thread's bins are empty; hidden ones are not this call's to touch. */
    if (tcache_self.id != TCACHE_ID_EXITED)
        cached += tcache_flush_cache(&tcache_self);
    busy_leave();
    return cached;
}

/* What an orphaned cache keeps of its listed free blocks, over all its classes. Adopting
 * a cache spares a new thread its first fills; the bound keeps the orphan slots from
 * pinning more than TCACHE_ORPHAN_SLOTS times this (4 MiB) of freed blocks, and through
 * them superblocks, while no thread uses them. Spares and remote frees go back (kept
 * spares made RSS climb again in concurrent_thread_churn_keeps_rss_flat); the bump
 * ranges stay, within a bound of their own (below): giving them all back made every
 * adopter fill again, which made 500 threads churning at once
 * (bench/thread-churn-concurrent) a quarter slower for a fifth less resident memory. */
#define TCACHE_ORPHAN_BYTES 262144

/* What an orphan's bump ranges may pin, counted in whole superblocks: a thread that used
 * 30 classes (bench/thread-churn-concurrent) keeps all of them, 1.9 MiB. Together with
 * TCACHE_ORPHAN_BYTES and the slots, the orphans pin at most 4 MiB of listed blocks and
 * 32 MiB of superblocks, of which only what was carved has been touched (unless a chunk
 * came back dirty): 2-3 MiB resident after 500 threads exited at once. */
#define TCACHE_ORPHAN_BUMP_BYTES ((size_t)2 << 20)

/* Cuts a cache about to be orphaned down to what an orphan keeps: its lists whole,
 * smallest classes first, while they fit TCACHE_ORPHAN_BYTES, then the head of the one
 * that does not; and its bump ranges, within TCACHE_ORPHAN_BUMP_BYTES. The rest goes
 * back to the heap. */
static void trim_for_orphan(struct tcache *tc)
{
    size_t budget = TCACHE_ORPHAN_BYTES, bump_budget = TCACHE_ORPHAN_BUMP_BYTES;
    for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
        struct tcache_bin *bin = &tc->bins[cls];
        struct tcache_cold *cold = &tc->cold[cls];
        if (bin->bump != bin->bump_end) {
            if (cold->bump_desc->size <= bump_budget) {
                bump_budget -= cold->bump_desc->size;
            } else {
                give_back_bump(bin, cold);
            }
        }
        if (!bin->head && !cold->spare)
            continue; /* most classes of a short thread: nothing to trim */
        give_back_list(cold->spare, cold->spare_count);
        cold->spare = NULL;
        uint32_t length;
        if (!list_count(bin, cold, &length)) {
            list_corrupted(bin->head); /* left where it is: dropped with the cache's list */
            bin_install(bin, cold, NULL, 0);
            continue;
        }
        size_t block_size = sizeclass_block_size[heap_size_class(cls)];
        if ((size_t)length * block_size <= budget) {
            budget -= (size_t)length * block_size; /* the whole list stays, unwalked */
            continue;
        }
        uint32_t keep = (uint32_t)(budget / block_size); /* below length */
        void *list = bin->head;
        void *rest = list;
        if (keep > 0) {
            void *last = list;
            for (uint32_t i = 1; i < keep; i++)
                last = heap_link_get(last);
            rest = heap_link_get(last);
            heap_link_set(last, NULL);
        } else {
            list = NULL;
        }
        budget -= (size_t)keep * block_size;
        bin_install(bin, cold, list, keep);
        if (rest)
            LFH_PARK(TCACHE_FLUSH_CLASS);
        give_back_list(rest, length - keep);
    }
    flush_remote(tc);
}

unsigned tcache_orphan_slots(unsigned cpus)
{
    if (cpus == 0 || cpus > TCACHE_ORPHAN_SLOTS / 2)
        return TCACHE_ORPHAN_SLOTS; /* unknown, or many: every slot */
    return 2 * cpus < TCACHE_ORPHAN_SLOTS_MIN ? TCACHE_ORPHAN_SLOTS_MIN : 2 * cpus;
}

static unsigned orphan_slots(void)
{
    unsigned slots = atomic_load_explicit(&orphan_slots_used, memory_order_relaxed);
    if (slots == 0) {
        slots = tcache_orphan_slots(platform_cpus());
        atomic_store_explicit(&orphan_slots_used, slots, memory_order_relaxed);
    }
    return slots;
}

/* Leaves the calling thread's cache, trimmed, in an orphan slot; false if every slot in
 * use is taken. */
static bool tcache_orphan(struct tcache *tc)
{
    unsigned slots = orphan_slots();
    for (unsigned slot = 0; slot < slots; slot++) {
        if (!orphan_claim(slot, ORPHAN_EMPTY))
            continue;
        trim_for_orphan(tc);
        orphan_caches[slot] = *tc;
        LFH_PARK(TCACHE_EXIT_COPIED);
        /* The store is the orphan's from here on, before the orphan is published: a handler
         * that kills this thread later and has its exit run again (tcache_exit_hidden)
         * must not touch it, nor give it back under the adopter. A kill before the
         * publication loses it with the copy (the slot goes back empty). */
        tc->cold = NULL;
        atomic_signal_fence(memory_order_seq_cst);
        orphan_leave(slot, ORPHAN_FULL);
        for (unsigned cls = 0; cls < HEAP_CLASSES; cls++) {
            tc->bins[cls].head = NULL;
            tc->bins[cls].bump = tc->bins[cls].bump_end = NULL;
        }
        tc->remote_head = NULL;
        tc->remote_count = 0;
        return true;
    }
    return false;
}

static void tcache_thread_exit(void *cache)
{
    /* Armed again for the length of the hand-back. A signal handler that interrupts it and
     * never returns (pthread_exit) unwinds to glibc's thread start, which runs the
     * destructors again: this call then finds the cache hidden and accounts for it. */
    platform_at_thread_exit(&tcache_exit_key, tcache_thread_exit, cache);
    tcache_exit_verify = false;
    if (orphan_held != ORPHAN_NONE)
        orphan_leave(orphan_held, ORPHAN_EMPTY);
    busy_enter();
    /* Whatever this hand-back empties goes back to the kernel now: no thread of ours will
     * take it again (arena.h). */
    arena_prompt_begin();
    /* A hidden cache (its handler never returned) is tcache_hide.c's to account for. */
    if (!tcache_exit_hidden(&tcache_self) && tcache_self.id < TCACHE_ID_EXITED) {
        if (tcache_orphan(&tcache_self)) {
            STATS_ADD(STATS_CACHES_ORPHANED, 1);
        } else {
            tcache_flush_cache(&tcache_self);
            STATS_ADD(STATS_CACHES_FLUSHED, 1);
        }
    }
    tcache_self.id = TCACHE_ID_EXITED;
    /* The store goes back once the bins are empty (an orphan took it along already). */
    struct tcache_cold *cold = tcache_self.cold;
    if (cold) {
        tcache_self.cold = NULL;
        atomic_signal_fence(memory_order_seq_cst);
        tcache_store_release(cold);
    }
    live_count_leave();
    arena_prompt_end();
    busy_leave();
    /* Disarmed: the cache holds nothing any more. A handler that kills the thread from
     * here on finds nothing to account for. */
    platform_at_thread_exit(&tcache_exit_key, tcache_thread_exit, NULL);
}
