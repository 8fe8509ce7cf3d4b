/*
 * The whole allocation API driven by a byte string, against a model of what docs/API.md
 * and docs/GUARANTEES.md promise. Each input is a program: one byte picks a routine, the
 * next pick its slot (64 of them), its size and its alignment, so that a fuzzer that
 * mutates the bytes explores sequences of calls, not only single ones. After every call
 * the harness checks what the model says the call must have done:
 *   - a new block is aligned as asked, holds at least its request, overlaps no other
 *     live block, and reports its size, alignment and zero fill (malloc_size,
 *     malloc_alignment, malloc_zero_fill) as the sticky properties say;
 *   - calloc's and cmemalign's blocks read as zeros over their usable size;
 *   - realloc and its forms keep every usable byte up to the new size, a zero-fill block
 *     reads as zeros over the bytes it gains (its own usable tail included), and an
 *     alignment stays;
 *   - a request that cannot be served fails with the documented errno and leaves the
 *     block it was to replace live and unchanged;
 *   - anything but a live block (an address inside one, a freed block, the stack, a
 *     global, glibc's memory) is ignored by free, refused by realloc with EINVAL and has
 *     a usable size of 0, and every live block's bytes are unchanged afterwards.
 * A second thread, which runs one call at a time when the input says so, frees and
 * reallocates blocks the first one owns (remote frees), and exits and is started again
 * (its cache handed back), so the order of every call stays fixed by the input.
 *
 * Built four ways: build/t/fuzz_api and build/t-asan/fuzz_api run inputs made from fixed
 * seeds (`fuzz_api [inputs [seed]]`) and any files named after `--` (a saved crash);
 * build/t-debug/fuzz_api and build/t-secure/fuzz_api do the same on the debug and secure
 * builds, without the calls on no live block; `make fuzz` links this file with libFuzzer
 * and a library compiled for its coverage (mk/fuzz.mk), where LLVMFuzzerTestOneInput
 * below is the entry point.
 */
#include "lfheap.h"
#include "testutil.h"

#include <errno.h>
#include <semaphore.h>
#include <stdint.h>
#include <string.h>
#include <pthread.h>

/* The debug and secure builds stop the program at a call on no live block, rightly: their
 * harness leaves those calls out. */
#ifndef FUZZ_VALID_ONLY
#define FUZZ_VALID_ONLY 0
#endif

#define SLOTS      64
#define STALE      16
#define MAX_OPS    4000
#define PAGE       4096
#define SMALL_MAX  ((size_t)32 << 10) /* the largest small block (docs/API.md, Blocks) */
#define LIVE_LIMIT ((size_t)384 << 20)
/* Blocks up to this size have every byte written and checked; larger ones a sample. */
#define DENSE 8192

struct slot {
    unsigned char *ptr; /* NULL: empty */
    size_t request;     /* what the routine was asked for */
    size_t align;       /* the alignment it reports (at least 16) */
    bool zero;          /* the zero-fill property */
    bool exact;         /* malloc_size must be the request (not a plain small block) */
    size_t filled;      /* the bytes the pattern was written to: the usable size */
    uint8_t seed;       /* the pattern its sampled bytes hold */
};

static struct slot slots[SLOTS];
static void *stale[STALE]; /* blocks freed recently */
static unsigned stale_next;
static size_t live_bytes;
/* What the inputs made the harness do, for the summary line: blocks allocated, calls that
 * resized one (and of those, how many moved it), frees, calls that failed as they must,
 * calls on addresses that are no live block, and calls on the second thread. */
static struct {
    unsigned long allocated, resized, moved, freed, refused, invalid, remote;
} seen;

/* A failed check stops the input at once: the model no longer says what the heap holds.
 * Under libFuzzer that is a crash, which saves the input. */
#define EXPECT(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* ---- the input ---------------------------------------------------------------------- */

struct input {
    const uint8_t *data;
    size_t size, at;
};

static uint64_t take(struct input *in, unsigned bytes)
{
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; i++)
        value = value << 8 | (in->at < in->size ? in->data[in->at++] : 0);
    return value;
}

/* A request size: mostly small, some medium and large, a few above the mapping threshold
 * (64 MiB) and a few that no allocator can serve. */
static size_t take_size(struct input *in)
{
    unsigned kind = (unsigned)take(in, 1);
    uint64_t r = take(in, 3);
    if (kind < 120)
        return r % 129;
    if (kind < 200)
        return r % 1025;
    if (kind < 230)
        return 1025 + r % (SMALL_MAX * 2);
    if (kind < 250)
        return SMALL_MAX + r % ((size_t)4 << 20);
    if (kind < 252)
        return r & 1 ? ((size_t)64 << 20) - PAGE + r % ((size_t)8 << 20) : r % 300;
    static const size_t absurd[] = {SIZE_MAX, SIZE_MAX - 15, (size_t)PTRDIFF_MAX + 1,
                                    (size_t)1 << 62};
    return absurd[kind % 4];
}

/* A new size for a block of `old` bytes: often near it (a few bytes, or an eighth either
 * way), where realloc may keep the block where it is, else any request size. */
static size_t take_new_size(struct input *in, size_t old)
{
    unsigned kind = (unsigned)take(in, 1);
    if (kind >= 112)
        return take_size(in);
    size_t r = (size_t)take(in, 1);
    if (kind < 64)
        return old + r % 129 >= 64 ? old + r % 129 - 64 : 0;
    size_t eighth = old / 8;
    return kind < 88 ? old + eighth * (r % 3) : old - eighth * (r % 3);
}

/* An alignment: powers of two from 1 to 2 MiB, and now and then one that is not. */
static size_t take_align(struct input *in)
{
    unsigned a = (unsigned)take(in, 1);
    if (a < 232)
        return (size_t)1 << (a % 22);
    static const size_t odd[] = {0, 3, 24, 48, 4097, (size_t)1 << 40, SIZE_MAX / 2 + 1, SIZE_MAX};
    return odd[a % 8];
}

/* ---- contents ----------------------------------------------------------------------- */

static unsigned char pattern(uint8_t seed, size_t i)
{
    return (unsigned char)(seed * 131u + i * 7u + (i >> 8) + 1u);
}

/* The bytes a block's checks look at: all of the first DENSE, then one on every page up to
 * 256 KiB, one every 61 KiB after that, and the last 64 (so that a page lost in a large
 * block is likely seen, and one of 70 MiB costs a thousand page faults, not 18,000). */
static size_t next_sampled(size_t i, size_t n)
{
    if (i < DENSE || i + 64 >= n)
        return i + 1;
    size_t next = i + (i < ((size_t)256 << 10) ? 4093 : 62459);
    return next + 64 < n ? next : n - 64;
}

static void fill(unsigned char *p, size_t n, uint8_t seed)
{
    for (size_t i = 0; i < n; i = next_sampled(i, n))
        p[i] = pattern(seed, i);
}

/* Bytes [0, upto) of a block that held `n` bytes of `seed`'s pattern. */
static bool holds(const unsigned char *p, size_t n, size_t upto, uint8_t seed)
{
    for (size_t i = 0; i < n && i < upto; i = next_sampled(i, n))
        if (p[i] != pattern(seed, i))
            return false;
    return true;
}

static bool zeros(const unsigned char *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i = next_sampled(i, to))
        if (p[i] != 0)
            return false;
    return true;
}

/* ---- the model ---------------------------------------------------------------------- */

static size_t usable(const struct slot *s)
{
    return lfh_malloc_usable_size(s->ptr);
}

/* Whether [p, p + n) overlaps a live block other than slot `self`'s. */
static bool overlaps(const unsigned char *p, size_t n, int self)
{
    for (int i = 0; i < SLOTS; i++) {
        const struct slot *s = &slots[i];
        if (i == self || !s->ptr)
            continue;
        size_t m = usable(s);
        if (p < s->ptr + m && s->ptr < p + n)
            return true;
    }
    return false;
}

/* Checks a block the model holds in slot `i` and writes a new pattern into it. */
static void check_and_refill(int i)
{
    struct slot *s = &slots[i];
    size_t n = usable(s);
    EXPECT(n >= s->request);
    EXPECT(((uintptr_t)s->ptr & (s->align - 1)) == 0);
    EXPECT(lfh_malloc_alignment(s->ptr) == s->align);
    EXPECT((bool)lfh_malloc_zero_fill(s->ptr) == s->zero);
    size_t size = lfh_malloc_size(s->ptr);
    EXPECT(size == s->request || (!s->exact && s->request <= SMALL_MAX && size == n));
    EXPECT(!overlaps(s->ptr, n, i));
    /* Every usable byte is the program's (docs/API.md, malloc_usable_size). */
    s->seed = (uint8_t)(s->seed * 5u + 3u);
    s->filled = n;
    fill(s->ptr, n, s->seed);
}

static void check_contents(int i)
{
    const struct slot *s = &slots[i];
    if (s->ptr)
        EXPECT(holds(s->ptr, s->filled, s->filled, s->seed));
}

static void check_all(void)
{
    for (int i = 0; i < SLOTS; i++)
        check_contents(i);
}

static void forget(int i)
{
    struct slot *s = &slots[i];
    seen.freed++;
    stale[stale_next++ % STALE] = s->ptr;
    live_bytes -= s->request;
    s->ptr = NULL;
}

/* Slot `i` now holds block `p` with these properties: checked, and given a new pattern. */
static void hold(int i, void *p, size_t request, size_t align, bool zero, bool exact)
{
    struct slot *s = &slots[i];
    s->ptr = p;
    s->request = request;
    s->align = align < 16 ? 16 : align;
    s->zero = zero;
    s->exact = exact;
    check_and_refill(i);
}

/* A new block from an allocating routine, of `request` bytes, into slot `i`. */
static void adopt(int i, void *p, size_t request, size_t align, bool zero, bool exact)
{
    seen.allocated++;
    if (zero)
        EXPECT(zeros(p, 0, lfh_malloc_usable_size(p)));
    live_bytes += request;
    hold(i, p, request, align, zero, exact);
}

static bool servable(size_t request, size_t align)
{
    return request <= ((size_t)128 << 20) && align <= ((size_t)1 << 21);
}

static bool power_of_two(size_t a)
{
    return a && (a & (a - 1)) == 0;
}

/* ---- the second thread -------------------------------------------------------------- */

static struct {
    pthread_t thread;
    bool running;
    sem_t go, done;
    void (*job)(void *);
    void *arg;
} helper;

static void *helper_main(void *unused)
{
    (void)unused;
    for (;;) {
        while (sem_wait(&helper.go) != 0)
            continue;
        if (!helper.job) {
            sem_post(&helper.done);
            return NULL;
        }
        helper.job(helper.arg);
        sem_post(&helper.done);
    }
}

/* Runs job(arg) on the second thread and returns when it has. */
static void on_helper(void (*job)(void *), void *arg)
{
    if (!helper.running) {
        REQUIRE(pthread_create(&helper.thread, NULL, helper_main, NULL) == 0);
        helper.running = true;
    }
    seen.remote++;
    helper.job = job;
    helper.arg = arg;
    sem_post(&helper.go);
    while (sem_wait(&helper.done) != 0)
        continue;
}

static void helper_exit(void)
{
    if (!helper.running)
        return;
    helper.job = NULL;
    sem_post(&helper.go);
    while (sem_wait(&helper.done) != 0)
        continue;
    pthread_join(helper.thread, NULL);
    helper.running = false;
}

static void job_free(void *p)
{
    lfh_free(p);
}

struct realloc_job {
    void *ptr, *result;
    size_t size;
    int err; /* the second thread's errno after the call */
};

static void job_realloc(void *arg)
{
    struct realloc_job *j = arg;
    errno = 0;
    j->result = lfh_realloc(j->ptr, j->size);
    j->err = errno;
}

/* ---- the routines ------------------------------------------------------------------- */

static void op_alloc(struct input *in, int i, unsigned routine)
{
    if (slots[i].ptr)
        return;
    size_t size = take_size(in), align = take_align(in);
    size_t dim = (size_t)take(in, 1) + 1, elem = size / dim;
    if (size > LIVE_LIMIT / 4 && live_bytes > LIVE_LIMIT)
        return;
    /* What the call asks for: its bytes, the alignment it must honour, and whether that
     * alignment is one the routine refuses (EINVAL). */
    size_t bytes = routine == 1 || routine >= 7 ? dim * elem : size, need = 16;
    bool refused = false;
    void *p = NULL;
    errno = 0;
    switch (routine) {
    case 0:
        p = lfh_malloc(size);
        break;
    case 1:
        p = lfh_calloc(dim, elem);
        break;
    case 2: /* aligned_alloc: any power of two */
        p = lfh_aligned_alloc(align, size);
        need = align;
        refused = !power_of_two(align);
        break;
    case 3: { /* posix_memalign: a power of two multiple of sizeof(void *) */
        void *out = &slots[i];
        int rc = lfh_posix_memalign(&out, align, size);
        need = align;
        refused = !power_of_two(align) || align % sizeof(void *);
        EXPECT(rc == 0 ? out != &slots[i] : out == &slots[i]);
        EXPECT(rc == 0 || rc == (refused ? EINVAL : ENOMEM));
        p = rc == 0 ? out : NULL;
        /* ENOMEM also in errno, as glibc leaves it (docs/API.md); EINVAL only returned */
        EXPECT(rc != ENOMEM || errno == ENOMEM);
        if (rc)
            errno = rc;
        break;
    }
    case 4: /* memalign rounds an alignment that is no power of two up; glibc refuses one
             * above the largest power of two, which no rounding reaches */
        p = lfh_memalign(align, size);
        need = align;
        refused = align > SIZE_MAX / 2 + 1;
        while (need && !power_of_two(need))
            need &= need - 1; /* its highest bit, doubled below */
        if (need && need != align)
            need <<= 1;
        break;
    case 5:
        p = lfh_valloc(size);
        need = PAGE;
        break;
    case 6: /* pvalloc: whole pages */
        p = lfh_pvalloc(size);
        need = PAGE;
        bytes = size > SIZE_MAX - PAGE ? SIZE_MAX : (size + PAGE - 1) & ~(size_t)(PAGE - 1);
        if (bytes == 0)
            bytes = PAGE;
        break;
    case 7:
        p = lfh_aalloc(dim, elem);
        break;
    default: /* amemalign, cmemalign */
        p = routine == 8 ? lfh_amemalign(align, dim, elem) : lfh_cmemalign(align, dim, elem);
        need = align;
        refused = !power_of_two(align);
        break;
    }
    if (refused) {
        EXPECT(!p && errno == EINVAL);
        seen.refused++;
        return;
    }
    if (!p) {
        /* only what the machine cannot give fails, with ENOMEM */
        EXPECT(!servable(bytes, need) && errno == ENOMEM);
        seen.refused++;
        return;
    }
    bool zero = routine == 1 || routine == 9;
    if (routine == 6) {
        EXPECT(lfh_malloc_usable_size(p) >= bytes);
        size_t reported = lfh_malloc_size(p);
        EXPECT(reported == size || reported == bytes);
        bytes = reported;
    }
    adopt(i, p, bytes, need, zero, routine != 0);
}

/* The block of slot `i` after a realloc-like call that returned `p` for `size` bytes:
 * `keeps` for the realloc forms (the bytes up to the smaller request, the zero fill),
 * `exact` when malloc_size must be the request. */
static void after_resize(int i, void *p, size_t size, size_t align, bool keeps, bool exact)
{
    struct slot *s = &slots[i];
    size_t old = s->request, kept = old < size ? old : size;
    bool zero = keeps && s->zero;
    /* realloc keeps every usable byte up to the new size, but for a zero-fill block,
     * whose gained bytes read as zeros also where its usable tail was written */
    if (keeps)
        EXPECT(holds(p, s->filled, s->zero ? kept : size, s->seed));
    if (zero && size > old)
        EXPECT(zeros(p, old, size));
    if (zero && p != s->ptr) /* moved: zeros past the bytes it kept, to its usable end */
        EXPECT(zeros(p, kept, lfh_malloc_usable_size(p)));
    live_bytes = live_bytes - old + size;
    seen.resized++;
    seen.moved += p != s->ptr;
    hold(i, p, size, align, zero, exact);
}

/* The arguments of a call that resizes slot `i`; false when the slot is empty or the new
 * size could take the live bytes over their limit. */
static bool resize_args(struct input *in, int i, size_t *size, size_t *align)
{
    if (!slots[i].ptr)
        return false;
    *size = take_new_size(in, slots[i].request);
    *align = take_align(in);
    return *size <= LIVE_LIMIT / 4 || live_bytes <= LIVE_LIMIT;
}

/* A resizing call on slot `i` that returned NULL with error `err` must have refused an
 * alignment that is no power of two (EINVAL, checked first: nothing freed, also for 0
 * bytes), freed the block for 0 bytes (as realloc(p, 0) does), or failed with ENOMEM for
 * what the machine cannot give, the block still live and unchanged. */
static void resize_failed(int i, size_t size, size_t align, bool bad_align, int err)
{
    if (!bad_align && size == 0 && err == 0) {
        forget(i);
        return;
    }
    EXPECT(bad_align ? err == EINVAL : !servable(size, align) && err == ENOMEM);
    seen.refused++;
    check_contents(i);
}

/* realloc and its aligned and posix forms on slot `i`. */
static void op_realloc(struct input *in, int i, unsigned form)
{
    struct slot *s = &slots[i];
    size_t size, align;
    if (!resize_args(in, i, &size, &align))
        return;
    void *old = s->ptr, *p;
    bool aligned_form = form == 1 || form == 3;
    int rc = 0;
    errno = 0;
    if (form == 0) {
        p = lfh_realloc(old, size);
    } else if (form == 1) {
        p = lfh_aligned_realloc(old, align, size);
    } else {
        void *ptr = old;
        rc = form == 2 ? lfh_posix_realloc(&ptr, size)
                       : lfh_posix_aligned_realloc(&ptr, align, size);
        EXPECT(rc == 0 || ptr == old); /* never lost */
        EXPECT(errno == 0);            /* never changed */
        p = rc ? NULL : ptr;
    }
    bool bad_align = aligned_form && !power_of_two(align);
    size_t want_align = aligned_form ? align : s->align;
    if (!p || bad_align) {
        EXPECT(!p);
        resize_failed(i, size, want_align, bad_align, form < 2 ? errno : rc);
        return;
    }
    after_resize(i, p, size, want_align, true, s->exact || (aligned_form && align > 16));
}

/* resize and aligned_resize: a block of the new size, no properties, no promised bytes. */
static void op_resize(struct input *in, int i, bool aligned)
{
    size_t size, align;
    if (!resize_args(in, i, &size, &align))
        return;
    void *old = slots[i].ptr;
    errno = 0;
    void *p = aligned ? lfh_aligned_resize(old, align, size) : lfh_resize(old, size);
    bool bad_align = aligned && !power_of_two(align);
    if (!p || bad_align) {
        EXPECT(!p);
        resize_failed(i, size, aligned ? align : 16, bad_align, errno);
        return;
    }
    after_resize(i, p, size, aligned ? align : 16, false, false);
}

/* Frees slot `i` by one of the freeing routines, here or on the second thread. */
static void op_free(struct input *in, int i)
{
    struct slot *s = &slots[i];
    if (!s->ptr)
        return;
    unsigned how = (unsigned)take(in, 1) % 6;
    size_t wrong = (size_t)take(in, 2);
    switch (how) {
    case 0:
        lfh_free(s->ptr);
        break;
    case 1:
        lfh_cfree(s->ptr);
        break;
    case 2: /* any size is accepted, but by the debug build, which reports a wrong one */
        lfh_free_sized(s->ptr, wrong & 1 && !FUZZ_VALID_ONLY ? wrong : s->request);
        break;
    case 3:
        lfh_free_aligned_sized(s->ptr, s->align, s->request);
        break;
    default:
        on_helper(job_free, s->ptr);
        break;
    }
    forget(i);
}

/* realloc of slot `i` on the second thread, which does not own the block. */
static void op_remote_realloc(struct input *in, int i)
{
    struct slot *s = &slots[i];
    size_t size, align;
    if (!resize_args(in, i, &size, &align))
        return;
    struct realloc_job j = {.ptr = s->ptr, .size = size};
    on_helper(job_realloc, &j);
    if (!j.result) {
        resize_failed(i, size, s->align, false, j.err);
        return;
    }
    after_resize(i, j.result, size, s->align, true, s->exact);
}

/* Whether `p` is the start of a block the model holds. */
static bool is_live_start(const void *p)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr == p)
            return true;
    return false;
}

static int global_word;

/* An address that is no live block: inside one, a freed one, the stack, a global,
 * glibc's heap; each routine must leave everything as it was. */
static void op_invalid(struct input *in, int i)
{
    unsigned what = (unsigned)take(in, 1) % 5;
    size_t offset = (size_t)take(in, 3);
    int local = 0;
    void *glibc_block = NULL;
    unsigned char *p;
    switch (what) {
    case 0: {
        struct slot *s = &slots[i];
        size_t n = s->ptr ? usable(s) : 0;
        if (n < 2)
            return;
        p = s->ptr + 1 + offset % (n - 1);
        break;
    }
    case 1:
        p = stale[offset % STALE];
        if (!p || is_live_start(p))
            return; /* handed out again: a live block, which free would free */
        break;
    case 2:
        p = (unsigned char *)&local;
        break;
    case 3:
        p = (unsigned char *)&global_word;
        break;
    default:
        glibc_block = malloc(1 + offset % 4096); /* glibc's: this is the prefix build */
        if (!glibc_block)
            return;
        p = glibc_block;
        break;
    }
    seen.invalid++;
    EXPECT(lfh_malloc_usable_size(p) == 0);
    EXPECT(lfh_malloc_size(p) == 0 && lfh_malloc_alignment(p) == 0 && !lfh_malloc_zero_fill(p));
    unsigned routine = (unsigned)take(in, 1) % 5;
    errno = 0;
    if (routine == 0) {
        lfh_free(p);
    } else if (routine == 1) {
        EXPECT(lfh_realloc(p, offset % 300) == NULL && errno == EINVAL);
    } else if (routine == 2) {
        EXPECT(lfh_realloc(p, 0) == NULL && errno == EINVAL);
    } else if (routine == 3) {
        void *q = p;
        EXPECT(lfh_posix_realloc(&q, offset % 5000) == EINVAL && q == p);
    } else {
        on_helper(job_free, p);
    }
    EXPECT(lfh_malloc_usable_size(p) == 0);
    free(glibc_block);
    check_all();
}

/* ---- one input ---------------------------------------------------------------------- */

static void clear_all(void)
{
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr) {
            check_contents(i);
            lfh_free(slots[i].ptr);
            forget(i);
        }
    memset(stale, 0, sizeof stale);
    live_bytes = 0;
}

static void run_input(const uint8_t *data, size_t size)
{
    struct input in = {data, size, 0};
    for (int ops = 0; in.at < in.size && ops < MAX_OPS; ops++) {
        unsigned op = (unsigned)take(&in, 1);
        int i = (int)(take(&in, 1) % SLOTS);
        if (op < 100)
            op_alloc(&in, i, op % 10);
        else if (op < 150)
            op_realloc(&in, i, op % 4);
        else if (op < 160)
            op_resize(&in, i, op & 1);
        else if (op < 210)
            op_free(&in, i);
        else if (op < 220)
            op_remote_realloc(&in, i);
        else if (op < 245 && !FUZZ_VALID_ONLY)
            op_invalid(&in, i);
        else if (op < 250)
            check_contents(i);
        else if (op < 253)
            lfh_malloc_trim(0);
        else if (op < 255)
            helper_exit();
        else
            check_all();
    }
    clear_all();
}

#ifdef FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sem_init(&helper.go, 0, 0);
    sem_init(&helper.done, 0, 0);
    run_input(data, size);
    helper_exit();
    return 0;
}
#else
/* Inputs of random bytes from a fixed seed, biased as a fuzzer's corpus soon is towards
 * runs of one routine (so that slots fill before they are resized and freed). */
static size_t random_input(uint8_t *buf, size_t cap, uint64_t *state)
{
    uint64_t x = *state;
    size_t n = 64 + (size_t)(x % (cap - 64));
    uint8_t favourite = (uint8_t)(x >> 17);
    for (size_t k = 0; k < n; k++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[k] = (k % 8 == 0 && (x >> 40) % 3 == 0) ? favourite : (uint8_t)(x >> 24);
        if ((x >> 50) % 97 == 0)
            favourite = (uint8_t)(x >> 8);
    }
    *state = x;
    return n;
}

static int replay(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    static uint8_t buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    run_input(buf, n);
    return 0;
}

int main(int argc, char **argv)
{
    sem_init(&helper.go, 0, 0);
    sem_init(&helper.done, 0, 0);
    long inputs = argc > 1 && strcmp(argv[1], "--") ? atol(argv[1]) : 300;
    uint64_t state = argc > 2 && strcmp(argv[2], "--") ? strtoull(argv[2], NULL, 0) : 0x5eed;
    for (int a = 1; a < argc; a++)
        if (!strcmp(argv[a], "--")) {
            for (int f = a + 1; f < argc; f++)
                if (replay(argv[f]))
                    return 1;
            printf("PASS %d files replayed\n", argc - a - 1);
            return 0;
        }
    static uint8_t buf[16384];
    for (long k = 0; k < inputs; k++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t x = state | 1;
        size_t n = random_input(buf, sizeof buf, &x);
        run_input(buf, n);
    }
    helper_exit();
    /* Every failed check aborted: reaching here is the pass. */
    printf("PASS %ld inputs: %lu blocks allocated, %lu resized (%lu moved), %lu freed, "
           "%lu calls refused, %lu on no live block, %lu on the second thread\n",
           inputs, seen.allocated, seen.resized, seen.moved, seen.freed, seen.refused, seen.invalid,
           seen.remote);
    return 0;
}
#endif
