/*
 * os: the memory layer over the platform's mmap/munmap/madvise/mremap/mincore. An aligned mapping
 * is first asked of the kernel at an aligned address it would choose anyway (below), so that it
 * needs no more address space than its size; only when that fails does it reserve the size plus
 * the alignment, inaccessible, trim both ends and make the rest read-write. Three system calls
 * in the common case, five at most, and never an unaligned mapping left behind.
 *
 * Refused unmaps wait in a small table of slots. A slot is claimed by a CAS on its size
 * (0: free) and published by a release store of its address; a retrying thread takes the
 * address with an exchange, so each range is retried by one thread at a time, and frees
 * the slot by clearing the size once the range is gone. No thread waits for another.
 *
 * The statistics build counts every memory system call here (and the bytes it names), so
 * the counts are the memory system calls lfheap makes for its heap (the counters' own
 * slabs, mapped by stats.c through the platform layer, are not counted). The calls
 * themselves are the platform layer's; the thread start at the end serves the optional
 * background purger (arena.c) and is not counted.
 */
#include "os.h"

#include "stats.h"
#include "vgclient.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* `calls` is a STATS_*_CALLS counter; its bytes counter follows it. */
static inline void os_count(unsigned calls, size_t bytes)
{
    STATS_ADD(calls, 1);
    STATS_ADD(calls + 1, bytes);
}

#if OS_FAULT_INJECTION
/* Relaxed throughout: the test sets the injection from one thread and orders it with the
 * threads it starts and joins; the counters only count. */
static _Atomic uint64_t fault_calls;
static _Atomic uint64_t fault_failed;
static _Atomic uint64_t fault_first; /* number of the first call to fail; 0: none */
static _Atomic bool fault_persistent;
static _Atomic uint64_t fault_threads_started;

/* Counts one OS call and says whether it is to fail. */
static bool os_fault(void)
{
    uint64_t call = atomic_fetch_add_explicit(&fault_calls, 1, memory_order_relaxed) + 1;
    uint64_t first = atomic_load_explicit(&fault_first, memory_order_relaxed);
    if (first == 0 || call < first ||
        (call > first && !atomic_load_explicit(&fault_persistent, memory_order_relaxed)))
        return false;
    atomic_fetch_add_explicit(&fault_failed, 1, memory_order_relaxed);
    errno = ENOMEM;
    return true;
}
#else
/* A macro, not a function: the release build keeps no trace of the switch, not even a
 * name in its debug information. */
#define os_fault() false
#endif

/* ---- refused unmaps --------------------------------------------------------------- */

#define OS_DEFERRED_SLOTS 64 /* refusals outstanding at once before a range is abandoned */

struct os_deferred {
    _Atomic uintptr_t addr; /* 0 while free, being claimed, or being retried */
    _Atomic size_t size;    /* 0 while free */
};

static struct os_deferred os_deferred[OS_DEFERRED_SLOTS];
static _Atomic unsigned os_deferred_count;

static void os_defer_unmap(void *addr, size_t size)
{
    for (unsigned i = 0; i < OS_DEFERRED_SLOTS; i++) {
        size_t expected = 0;
        /* Relaxed claim: the slot's contents are published by the release store below. */
        if (!atomic_compare_exchange_strong_explicit(&os_deferred[i].size, &expected, size,
                                                     memory_order_relaxed, memory_order_relaxed))
            continue;
        atomic_fetch_add_explicit(&os_deferred_count, 1, memory_order_relaxed);
        /* Release: a retrier that takes the address reads this slot's size. */
        atomic_store_explicit(&os_deferred[i].addr, (uintptr_t)addr, memory_order_release);
        return;
    }
    /* Every slot taken: the range stays reserved for good, but its pages go back. */
    os_count(STATS_MADVISE_CALLS, size);
    platform_decommit(addr, size);
}

bool os_protect(void *addr, size_t size, bool accessible)
{
    if (os_fault())
        return false;
    return platform_protect(addr, size, accessible);
}

/* splitmix64's finaliser: every input bit reaches every output bit. */
static uint64_t mix64(uint64_t x)
{
    x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
    return x ^ (x >> 31);
}

uint64_t os_random(uint64_t salt)
{
    uint64_t words[2];
    platform_random_bytes(words);
    return mix64(words[0] ^ mix64(words[1] ^ salt));
}

void os_retry(void)
{
    /* Relaxed: a range deferred after this load is retried by the next call. */
    if (atomic_load_explicit(&os_deferred_count, memory_order_relaxed) == 0)
        return;
    for (unsigned i = 0; i < OS_DEFERRED_SLOTS; i++) {
        /* Acquire pairs with the publishing store: the size is the deferrer's. */
        uintptr_t addr = atomic_exchange_explicit(&os_deferred[i].addr, 0, memory_order_acquire);
        if (!addr)
            continue;
        size_t size = atomic_load_explicit(&os_deferred[i].size, memory_order_relaxed);
        bool refused = os_fault();
        if (!refused)
            os_count(STATS_MUNMAP_CALLS, size);
        if (refused || !platform_unmap((void *)addr, size)) {
            /* Release: the next retrier reads the size again. */
            atomic_store_explicit(&os_deferred[i].addr, addr, memory_order_release);
            continue;
        }
        atomic_fetch_sub_explicit(&os_deferred_count, 1, memory_order_relaxed);
        /* Relaxed: nothing but the slot itself is handed to its next claimer. */
        atomic_store_explicit(&os_deferred[i].size, 0, memory_order_relaxed);
    }
}

/* ---- the calls -------------------------------------------------------------------- */

static void unmap_or_defer(void *addr, size_t size)
{
    os_count(STATS_MUNMAP_CALLS, size);
    if (!platform_unmap(addr, size))
        os_defer_unmap(addr, size);
}

static void *map_at(void *hint, size_t size)
{
    os_count(STATS_MMAP_CALLS, size);
    return platform_map(hint, size);
}

#define MAP_IN_PLACE_TRIES 16

/* An aligned mapping without reserving more than its size: the kernel places an
 * unaligned mapping where it has room (just below the last one, as it fills the address
 * space downward); the aligned address at or below that is then usually free too, and
 * is asked for as a hint, after giving the first mapping back. NULL if the kernel would
 * not map `size` bytes at all, or (rarely: another thread mapped there in between, or
 * something lies just below) put the second mapping elsewhere. Reserving size + align
 * instead needs twice an arena's address space, which a small `ulimit -v` refuses. */
static void *map_aligned_in_place(size_t size, size_t align, bool *refused)
{
    char *p = map_at(NULL, size);
    *refused = p == NULL;
    if (!p || ((uintptr_t)p & (align - 1)) == 0)
        return p;
    unmap_or_defer(p, size);
    uintptr_t hint = (uintptr_t)p & ~(uintptr_t)(align - 1);
    /* A mapping smaller than its alignment (the part of an arena mapped under a tight
     * `ulimit -v`, which has no room for the padded way below) finds the aligned address
     * below the kernel's choice taken by an earlier one; the aligned addresses below that
     * are tried too, as many as MAP_IN_PLACE_TRIES. */
    unsigned tries = size < align ? MAP_IN_PLACE_TRIES : 1;
    for (unsigned i = 0; i < tries && hint >= align; i++, hint -= align) {
        char *q = map_at((void *)hint, size);
        if (q == (char *)hint)
            return q;
        if (q)
            unmap_or_defer(q, size);
    }
    return NULL;
}

static void *map_aligned(size_t size, size_t align)
{
    if (align <= OS_PAGE_SIZE)
        return map_at(NULL, size);
    bool refused;
    void *in_place = map_aligned_in_place(size, align, &refused);
    if (in_place || refused)
        return in_place;
    size_t padded = size + align - OS_PAGE_SIZE;
    if (padded < size)
        return NULL;
    /* Reserved inaccessible, then only the aligned part made read-write: a read-write
     * reservation would be charged in full by the kernel's overcommit accounting, and its
     * default policy refuses a single mapping larger than RAM and swap, so an alignment of
     * that size (posix_memalign of 1 TiB, say) failed whenever the first way did. */
    os_count(STATS_MMAP_CALLS, padded);
    char *raw = platform_reserve(padded);
    if (!raw)
        return NULL;
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)raw;
    size_t tail = padded - head - size;
    if (head)
        unmap_or_defer(raw, head);
    if (tail)
        unmap_or_defer((char *)start + size, tail);
    if (!platform_protect((void *)start, size, true)) {
        unmap_or_defer((void *)start, size);
        return NULL;
    }
    return (void *)start;
}

void *os_map(size_t size, size_t align)
{
    if (os_fault())
        return NULL;
    char *p = map_aligned(size, align);
    /* The kernel's promise os.h relies on (OS_ADDRESS_BITS); should a kernel break it,
     * this allocation fails instead of lfheap losing track of the memory. */
    if (p && (uintptr_t)p + size > OS_ADDRESS_LIMIT) {
        unmap_or_defer(p, size);
        errno = ENOMEM;
        return NULL;
    }
    return p;
}

void os_unmap(void *addr, size_t size)
{
    if (os_fault())
        os_defer_unmap(addr, size);
    else
        unmap_or_defer(addr, size);
}

bool os_room_for(size_t size)
{
    if (os_fault())
        return false;
    /* Read-write, as what the caller will map: an inaccessible probe is not counted by
     * RLIMIT_DATA (`ulimit -d`), which counts every private writable mapping, so with
     * 8-24, 33-40 or 65-72 MiB of room under it, a part or a whole arena took the room
     * the page-map leaf needed and every allocation failed until the limit was raised
     * (and up to 80 MiB, the room a thread's stack needed). */
    os_count(STATS_MMAP_CALLS, size);
    void *probe = platform_probe(size);
    if (!probe)
        return false;
    unmap_or_defer(probe, size);
    return true;
}

/* A decommit longer than this goes to the kernel in pieces of at most this much, aligned
 * on it; a shorter one goes whole (it cannot empty a 2 MiB page-table range). On a VM
 * whose hypervisor shadows the guest's page tables (the project's 2-core machines since
 * 2026-12-04), one call that emptied whole 2 MiB page-table ranges made every later touch
 * of the process's other resident pages slow, as user time: a program touching a word in
 * each page of 400 MiB, with 16 MiB given back per pass, took 6.2 s with one call per
 * pass, 0.64 s with 1 MiB calls and 0.03 s with none (the 1 MiB pieces' faults);
 * `build/bench/large` at one thread took 2.2 s against tcmalloc's 1.45, and 1.4-1.6 s
 * with 1 MiB calls (docs/BENCHMARKS.md, "Decommits in pieces"). Elsewhere the pieces cost
 * a system call (or a vector) per MiB, small against faulting that MiB in again. */
#define DECOMMIT_PIECE ((size_t)1 << 20)

/* The end of the piece of [at, end) that starts at `at`. */
static char *decommit_piece_end(char *at, char *end)
{
    char *stop = (char *)(((uintptr_t)at + DECOMMIT_PIECE) & ~(uintptr_t)(DECOMMIT_PIECE - 1));
    return stop < end ? stop : end;
}

bool os_decommit(void *addr, size_t size)
{
    if (os_fault())
        return false;
    if (size <= DECOMMIT_PIECE) {
        os_count(STATS_MADVISE_CALLS, size);
        return platform_decommit(addr, size);
    }
    bool done = true;
    for (char *at = addr, *end = at + size; at < end; at = decommit_piece_end(at, end)) {
        size_t piece = (size_t)(decommit_piece_end(at, end) - at);
        os_count(STATS_MADVISE_CALLS, piece);
        done &= platform_decommit(at, piece);
    }
    return done;
}

void os_unmap_resident(void *addr, size_t size)
{
    /* A refused decommit leaves the pages to the unmap, which drops them all the same. */
    if (size > DECOMMIT_PIECE)
        os_decommit(addr, size);
    os_unmap(addr, size);
}

/* Set once the kernel refused process_madvise on the process itself for a reason that
 * will not change (an older kernel): from then on every range has its own madvise.
 * Relaxed: threads that raced past it only try once more each. */
static _Atomic bool ranges_refused;

#if OS_FAULT_INJECTION
static _Atomic int fault_ranges_error; /* relaxed, as the other switches */

void os_fault_refuse_ranges(int error)
{
    atomic_store_explicit(&fault_ranges_error, error, memory_order_relaxed);
}
#endif

/* Pieces of one long range that one call passes (a small array: a purge may run in a
 * signal handler on an alternate stack of 8 KiB, docs/GUARANTEES.md, "Signal handlers"). */
#define DECOMMIT_PIECES_CALL 16

static long decommit_call(const struct iovec *ranges, unsigned count)
{
#if OS_FAULT_INJECTION
    int error = atomic_load_explicit(&fault_ranges_error, memory_order_relaxed);
    if (error) {
        errno = error;
        return -1;
    }
#endif
    return platform_decommit_ranges(ranges, count);
}

/* The ranges in as few calls as DECOMMIT_PIECE allows: a row of ranges of at most a piece
 * each goes in one call as it is, a longer range in pieces, DECOMMIT_PIECES_CALL to a
 * call. Returns the bytes dropped from the start, or -1 (errno set) if the first call was
 * refused; a call that drops less than it was given ends it. */
static long decommit_ranges_call(const struct iovec *ranges, unsigned count)
{
    long dropped = 0;
    size_t into = 0; /* bytes of ranges[i] dropped by earlier calls */
    for (unsigned i = 0; i < count;) {
        struct iovec piece[DECOMMIT_PIECES_CALL];
        const struct iovec *batch = ranges + i;
        unsigned n = 0;
        size_t want = 0;
        while (i + n < count && ranges[i + n].iov_len <= DECOMMIT_PIECE)
            want += ranges[i + n++].iov_len;
        if (n > 0) {
            i += n;
        } else {
            char *at = (char *)ranges[i].iov_base + into;
            char *end = (char *)ranges[i].iov_base + ranges[i].iov_len;
            for (; at < end && n < DECOMMIT_PIECES_CALL; at = decommit_piece_end(at, end)) {
                piece[n] = (struct iovec){at, (size_t)(decommit_piece_end(at, end) - at)};
                want += piece[n++].iov_len;
            }
            batch = piece;
            into += want;
            if (at == end) {
                i++;
                into = 0;
            }
        }
        os_count(STATS_MADVISE_CALLS, want);
        long got = decommit_call(batch, n);
        if (got < 0)
            return dropped == 0 ? -1 : dropped;
        dropped += got;
        if ((size_t)got != want)
            break;
    }
    return dropped;
}

/* Ranges from which the one call pays: it saves count - 1 madvise calls, each with its
 * TLB flush (an interrupt to every other CPU that runs the process), and costs the three
 * system calls that read the thread's seccomp mode (about 5 us). */
#define RANGES_MIN 3

/* process_madvise(MADV_DONTNEED) on the calling thread needs Linux 6.15 (6.13 for the
 * advice on the caller's own memory, 6.15 for PIDFD_SELF_THREAD). An older kernel, told
 * by the vDSO without a system call, is never asked, so the seccomp mode is never read
 * either: that read opens a file, which a sandbox may kill the process for. A version it
 * cannot tell is asked once, and its refusal remembered, as on any kernel. */
static bool ranges_kernel_new_enough(void)
{
    uint32_t version = platform_kernel_version();
    if (version == 0 || version >= PLATFORM_KERNEL(6, 15))
        return true;
    /* Relaxed, as every store of the flag: it guards only a choice between two correct
     * ways to decommit, and a thread that does not see it yet reads the version again. */
    atomic_store_explicit(&ranges_refused, true, memory_order_relaxed);
    return false;
}

void os_decommit_ranges(const struct iovec *ranges, unsigned count, bool *clean)
{
    unsigned done = 0;
    /* valgrind 3.19 does not know the system call: it would print a warning and refuse.
     * A seccomp filter may kill the process for it, so a filtered thread never makes it;
     * the mode is read each time, as a filter can come at any moment. */
    if (count >= RANGES_MIN && !atomic_load_explicit(&ranges_refused, memory_order_relaxed) &&
        !vgclient_running() && ranges_kernel_new_enough()) {
        int saved_errno = errno;
        if (platform_thread_seccomp() == 0 && !os_fault()) {
            long dropped = decommit_ranges_call(ranges, count);
            if (dropped < 0) {
                if (errno == ENOSYS || errno == EINVAL || errno == EBADF || errno == EPERM)
                    atomic_store_explicit(&ranges_refused, true, memory_order_relaxed);
                dropped = 0;
            }
            for (size_t left = (size_t)dropped; done < count && ranges[done].iov_len <= left;
                 done++) {
                left -= ranges[done].iov_len;
                clean[done] = true;
            }
        }
        errno = saved_errno; /* the ranges not dropped get their own madvise below */
    }
    for (; done < count; done++)
        clean[done] = os_decommit(ranges[done].iov_base, ranges[done].iov_len);
}

/* Pages whose residency one mincore call reads (4 MiB): its vector lives on the stack,
 * which may be a signal handler's small alternate one. */
#define RESIDENT_BATCH 1024

bool os_mostly_absent(const void *addr, size_t size)
{
    size_t pages = size / OS_PAGE_SIZE, resident = 0;
    unsigned char vec[RESIDENT_BATCH];
    for (size_t done = 0; done < pages;) {
        size_t batch = pages - done < RESIDENT_BATCH ? pages - done : RESIDENT_BATCH;
        if (os_fault() ||
            !platform_resident((const char *)addr + done * OS_PAGE_SIZE, batch * OS_PAGE_SIZE, vec))
            return false;
        for (size_t i = 0; i < batch; i++)
            resident += vec[i] & 1;
        done += batch;
        /* Stop as soon as the answer is settled. */
        if (4 * resident >= pages)
            return false;
        if (4 * (done - resident) > 3 * pages)
            return true;
    }
    return 4 * (pages - resident) > 3 * pages;
}

bool os_any_resident(const void *addr, size_t size)
{
    size_t pages = size / OS_PAGE_SIZE;
    unsigned char vec[RESIDENT_BATCH];
    for (size_t done = 0; done < pages;) {
        size_t batch = pages - done < RESIDENT_BATCH ? pages - done : RESIDENT_BATCH;
        if (os_fault() ||
            !platform_resident((const char *)addr + done * OS_PAGE_SIZE, batch * OS_PAGE_SIZE, vec))
            return true;
        for (size_t i = 0; i < batch; i++)
            if (vec[i] & 1)
                return true;
        done += batch;
    }
    return false;
}

bool os_move(void *old, size_t old_size, void *dest, size_t new_size)
{
    if (os_fault())
        return false;
    os_count(STATS_MREMAP_CALLS, new_size);
    return platform_move(old, old_size, dest, new_size);
}

/* Set once the kernel refused MREMAP_DONTUNMAP (before Linux 5.7): the blocks are
 * copied then, as before the call existed. Relaxed: a stale false costs one more refused
 * call. */
static _Atomic bool move_out_unknown;

static char *move_out(void *old, size_t size, size_t new_size)
{
    /* The kernel clears the lock of the mapping the pages leave, here a whole arena,
     * without a word: a process that locked its memory (mlockall) found every other block
     * of the arena swappable after one move. A block in a locked mapping is copied, as
     * before; the probe of one page costs less than a copy of 2 MiB. A lock taken between
     * the probe and the move is not seen (docs/ARCHITECTURE.md). */
    if (atomic_load_explicit(&move_out_unknown, memory_order_relaxed) || os_fault())
        return NULL;
    os_count(STATS_MADVISE_CALLS, OS_PAGE_SIZE);
    if (platform_mapping_locked(old))
        return NULL;
    os_count(STATS_MREMAP_CALLS, size);
    bool unknown_flag;
    char *moved = platform_move_out(old, size, &unknown_flag);
    if (!moved) {
        if (unknown_flag)
            atomic_store_explicit(&move_out_unknown, true, memory_order_relaxed);
        return NULL;
    }
    if (new_size == size)
        return moved;
    char *grown = NULL;
    if (!os_fault()) {
        os_count(STATS_MREMAP_CALLS, new_size);
        grown = platform_remap(moved, size, new_size);
    }
    if (grown)
        return grown;
    /* The bytes go back by a copy (the old range is mapped and reads as zeros): a move
     * back would put a mapping of its own into the arena's. */
    memcpy(old, moved, size);
    os_unmap(moved, size);
    return NULL;
}

void *os_move_out(void *old, size_t size, size_t new_size)
{
    /* Refused, the block is copied, and the realloc succeeds: errno as it was, also after
     * an injected failure (platform_move_out keeps it too). */
    int saved_errno = errno;
    char *moved = move_out(old, size, new_size);
    errno = saved_errno;
    return moved;
}

bool os_grow(void *addr, size_t old_size, size_t new_size)
{
    if (os_fault())
        return false;
    os_count(STATS_MREMAP_CALLS, new_size);
    return platform_grow(addr, old_size, new_size);
}

#if OS_FAULT_INJECTION
void os_fault_inject(uint64_t nth, bool persistent)
{
    uint64_t now = atomic_load_explicit(&fault_calls, memory_order_relaxed);
    atomic_store_explicit(&fault_persistent, persistent, memory_order_relaxed);
    atomic_store_explicit(&fault_first, nth ? now + nth : 0, memory_order_relaxed);
}

void os_fault_stats(struct os_fault_stats *out)
{
    out->calls = atomic_load_explicit(&fault_calls, memory_order_relaxed);
    out->failed = atomic_load_explicit(&fault_failed, memory_order_relaxed);
    out->pending = atomic_load_explicit(&os_deferred_count, memory_order_relaxed);
    out->threads_started = atomic_load_explicit(&fault_threads_started, memory_order_relaxed);
}
#endif

/* ---- threads ---------------------------------------------------------------------- */

bool os_thread_start(void *(*fn)(void *), void *arg)
{
    if (os_fault() || !platform_thread_start(fn, arg))
        return false;
#if OS_FAULT_INJECTION
    atomic_fetch_add_explicit(&fault_threads_started, 1, memory_order_relaxed);
#endif
    return true;
}

bool os_single_threaded(void)
{
    return platform_single_threaded();
}

/* -1 until the first os_advise_huge reads LFHEAP_HUGEPAGES, then 0 or 1. */
static _Atomic int huge_pages_on = -1;

bool os_huge_pages(void)
{
    /* Relaxed: every thread computes the same value from the environment. */
    int on = atomic_load_explicit(&huge_pages_on, memory_order_relaxed);
    if (on < 0) {
        on = platform_env_switch("LFHEAP_HUGEPAGES");
        atomic_store_explicit(&huge_pages_on, on, memory_order_relaxed);
    }
    return on != 0;
}

bool os_advise_huge(void *addr, size_t size)
{
    if (!os_huge_pages() || os_fault())
        return false;
    os_count(STATS_MADVISE_CALLS, size);
    return platform_advise_huge(addr, size);
}

bool os_wipe_on_fork(void *addr, size_t size)
{
    os_count(STATS_MADVISE_CALLS, size);
    return platform_wipe_on_fork(addr, size);
}
