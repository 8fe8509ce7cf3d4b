/*
 * A real out-of-memory run, without any injection: tests/suites/oom.sh runs this plain
 * program with the release library preloaded under `ulimit -v 1048576`. It allocates a
 * mix of block kinds (huge, large, medium, small, calloc'd) in turn until each of them
 * fails, so the kernel's mmap refuses lfheap at every layer; every failure must be NULL
 * with ENOMEM and every block must keep its contents. Then everything is freed and the
 * same fill runs again: memory came back, so every kind of block is had again and the
 * second fill gets nearly as far as the first.
 *
 * First, each in a fresh process (before anything is allocated), two limits set from
 * inside: one with less room than a whole arena (64 MiB) but more than lfheap's least
 * (docs/GUARANTEES.md, about 12 MiB), where lfheap maps parts of arenas and every kind
 * of request up to 4 MiB succeeds; one with less than that least, where every routine
 * fails with ENOMEM, and lfheap works once the limit is raised; and every room from a
 * little above the least to past a whole arena, where small and medium blocks are had,
 * and the program's next thread starts from 32 MiB of room; that sweep runs twice, under
 * RLIMIT_AS (`ulimit -v`) and under RLIMIT_DATA (`ulimit -d`).
 */
#include "testutil.h"
#include <dlfcn.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)
/* Room from which a thread with the default stack (8 MiB) starts after the first blocks:
 * below it, lfheap's least (about 12 MiB) and the stack do not both fit. */
#define THREAD_ROOM_MIB 32

/* The kinds of block, largest first: huge (its own mapping), large (arena chunks),
 * medium and small (superblocks), and calloc'd large blocks. */
static const size_t kinds[] = {100 * MIB, 16 * MIB, MIB, 40 * KIB, KIB, 64};
#define KINDS       (sizeof kinds / sizeof kinds[0])
#define CALLOC_KIND KINDS /* one more kind: calloc(1, 4 MiB) */
#define CALLOC_SIZE (4 * MIB)

/* Each block starts with this header (which chains all blocks) and carries its tag in
 * its last word and in the first word of its middle page: the first, middle and last
 * pages are all that is touched, so huge blocks cost no resident memory. */
struct header {
    struct header *next;
    size_t size;
    uint64_t tag;
};

struct fill {
    struct header *blocks;
    size_t count[KINDS + 1];
    size_t bytes;
    int bad_errno;
    int corrupt;
};

static size_t middle(size_t size)
{
    return size / 2 & ~(size_t)7;
}

static void stamp(struct header *h, size_t size, uint64_t tag)
{
    h->size = size;
    h->tag = tag;
    if (size >= 2 * sizeof(struct header)) {
        memcpy((char *)h + size - 8, &tag, 8);
        if (middle(size) >= sizeof(struct header))
            memcpy((char *)h + middle(size), &tag, 8);
    }
}

static int intact(const struct header *h)
{
    uint64_t end = h->tag, mid = h->tag;
    if (h->size >= 2 * sizeof(struct header)) {
        memcpy(&end, (const char *)h + h->size - 8, 8);
        if (middle(h->size) >= sizeof(struct header))
            memcpy(&mid, (const char *)h + middle(h->size), 8);
    }
    return end == h->tag && mid == h->tag;
}

static int reads_zero(const char *p, size_t size)
{
    static const size_t at[] = {0, 1, 2};
    for (int i = 0; i < 3; i++) {
        const char *page = p + (size - 4 * KIB) / 2 * at[i];
        for (size_t j = 0; j < 4 * KIB; j++)
            if (page[j])
                return 0;
    }
    return 1;
}

/* Allocates one block of each kind still left in turn until every kind has failed. */
static void fill(struct fill *f)
{
    memset(f, 0, sizeof *f);
    int failed[KINDS + 1] = {0};
    int left = KINDS + 1;
    uint64_t tag = 0x5eed;
    while (left > 0) {
        for (size_t k = 0; k <= KINDS; k++) {
            if (failed[k])
                continue;
            size_t size = k == CALLOC_KIND ? CALLOC_SIZE : kinds[k];
            errno = 0;
            struct header *h = k == CALLOC_KIND ? calloc(1, size) : malloc(size);
            if (!h) {
                if (errno != ENOMEM)
                    f->bad_errno++;
                failed[k] = 1;
                left--;
                continue;
            }
            if (k == CALLOC_KIND && !reads_zero((char *)h, size))
                f->corrupt++;
            stamp(h, size, tag++ * 0x9e3779b97f4a7c15u);
            h->next = f->blocks;
            f->blocks = h;
            f->count[k]++;
            f->bytes += size;
        }
    }
}

static void check_and_free(struct fill *f)
{
    while (f->blocks) {
        struct header *h = f->blocks;
        f->blocks = h->next;
        if (!intact(h))
            f->corrupt++;
        free(h);
    }
}

static struct fill first, second;

static void fills_until_enomem_and_recovers(void)
{
    fill(&first);
    check_and_free(&first);
    CHECK(first.bad_errno == 0);
    CHECK(first.corrupt == 0);
    for (size_t k = 0; k <= KINDS; k++)
        CHECK(first.count[k] > 0);
    /* Memory is back: the same fill gets every kind again and nearly as far. */
    fill(&second);
    check_and_free(&second);
    CHECK(second.bad_errno == 0);
    CHECK(second.corrupt == 0);
    for (size_t k = 0; k <= KINDS; k++)
        CHECK(second.count[k] > 0);
    CHECK(second.bytes >= first.bytes / 10 * 9);
    printf("# first fill %zu MiB (%zu huge, %zu large), second %zu MiB (%zu huge, %zu large)\n",
           first.bytes >> 20, first.count[0], first.count[1], second.bytes >> 20, second.count[0],
           second.count[1]);
}

/* The start of a /proc file, read without allocating (stdio would). */
static void read_proc(const char *path, char *text, size_t size)
{
    memset(text, 0, size);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(read(fd, text, size - 1) > 0);
    close(fd);
}

/* The process's address space in KiB. */
static long address_space_kib(void)
{
    char text[64];
    read_proc("/proc/self/statm", text, sizeof text);
    return atol(text) * (sysconf(_SC_PAGESIZE) / 1024);
}

/* The process's private writable memory (what RLIMIT_DATA counts) in KiB. */
static long data_kib(void)
{
    char text[2048];
    read_proc("/proc/self/status", text, sizeof text);
    const char *field = strstr(text, "VmData:");
    REQUIRE(field != NULL);
    return atol(field + strlen("VmData:"));
}

/* Sets `resource` (RLIMIT_AS or RLIMIT_DATA) to what the process uses of it now plus
 * `room_mib` MiB; *old gets the limit it replaced. */
static void limit_room(int resource, size_t room_mib, struct rlimit *old)
{
    REQUIRE(getrlimit(resource, old) == 0);
    long used_kib = resource == RLIMIT_DATA ? data_kib() : address_space_kib();
    rlim_t tight = ((rlim_t)used_kib + (rlim_t)room_mib * 1024) * 1024;
    REQUIRE(old->rlim_cur == RLIM_INFINITY || old->rlim_cur > tight + ((rlim_t)128 << 20));
    struct rlimit limited = {tight, old->rlim_max};
    REQUIRE(setrlimit(resource, &limited) == 0);
}

static const size_t room_sizes[] = {16, 1000, 40 * KIB, MIB, 4 * MIB};
#define ROOM_SIZES (sizeof room_sizes / sizeof *room_sizes)

/* In a fresh process, before stdout's buffer or anything else is allocated: with 40 MiB
 * of room, too little for a whole arena, every kind of request (malloc, calloc, realloc,
 * posix_memalign) of 16 B to 1 MiB, and malloc and calloc of 4 MiB, succeed, all held at
 * once, each block whole and a calloc'd one zeroed, from arenas of fewer than 64 MiB of
 * mapped bytes in all; small blocks then fill at least 2 MiB more before ENOMEM. The room
 * is under `resource` (RLIMIT_AS or RLIMIT_DATA). Returns the number of failed checks. */
static int little_room(int resource)
{
    REQUIRE(mallinfo2().arena == 0); /* nothing allocated yet */
    struct rlimit old;
    limit_room(resource, 40, &old);
    unsigned char *held[ROOM_SIZES][4] = {{0}};
    int missing = 0, dirty = 0;
    for (size_t i = 0; i < ROOM_SIZES; i++) {
        size_t size = room_sizes[i];
        held[i][0] = malloc(size);
        held[i][1] = calloc(1, size);
        int kinds = size < 4 * MIB ? 4 : 2; /* 16 MiB of 4 MiB blocks would not fit */
        if (kinds == 4) {
            held[i][2] = realloc(NULL, size);
            void *aligned = NULL;
            held[i][3] = posix_memalign(&aligned, 64, size) == 0 ? aligned : NULL;
        }
        for (int k = 0; k < kinds; k++) {
            if (!held[i][k]) {
                missing++;
                continue;
            }
            if (k == 1 && (held[i][k][0] != 0 || held[i][k][size - 1] != 0))
                dirty++;
            memset(held[i][k], (int)(i * 4 + (size_t)k + 1), size);
        }
    }
    size_t arena_bytes = mallinfo2().arena;
    size_t small = 0;
    struct header *list = NULL;
    for (struct header *h; (h = malloc(1000)) != NULL; small += 1000) {
        h->next = list;
        list = h;
    }
    int bad_errno = errno != ENOMEM;
    while (list) {
        struct header *h = list;
        list = h->next;
        free(h);
    }
    int damaged = 0;
    for (size_t i = 0; i < ROOM_SIZES; i++)
        for (int k = 0; k < 4; k++) {
            unsigned char *p = held[i][k];
            if (p && (p[0] != (unsigned char)(i * 4 + (size_t)k + 1) ||
                      p[room_sizes[i] - 1] != (unsigned char)(i * 4 + (size_t)k + 1)))
                damaged++;
            free(p);
        }
    REQUIRE(setrlimit(resource, &old) == 0);
    printf("# 40 MiB of room: arenas of %zu KiB, then %zu KiB of small blocks\n", arena_bytes >> 10,
           small >> 10);
    CHECK(missing == 0);
    CHECK(dirty == 0);
    CHECK(damaged == 0);
    CHECK(arena_bytes > 0 && arena_bytes < 64 * MIB);
    CHECK(small >= 2 * MIB);
    CHECK(bad_errno == 0);
    return test_failures;
}

/* In a fresh process, before stdout's buffer or anything else is allocated: with 4 MiB
 * of room, less than lfheap's least, every kind of request fails with ENOMEM rather than
 * crash or hand out a bad block; with the old limit back, every kind succeeds. Returns
 * the number of failed checks. */
static int no_room(void)
{
    REQUIRE(mallinfo2().arena == 0); /* nothing allocated yet */
    struct rlimit old;
    limit_room(RLIMIT_AS, 4, &old);
    int granted = 0, bad_errno = 0;
    for (size_t i = 0; i < ROOM_SIZES; i++) {
        errno = 0;
        void *p = malloc(room_sizes[i]);
        granted += p != NULL;
        bad_errno += !p && errno != ENOMEM;
        free(p);
        errno = 0;
        p = calloc(1, room_sizes[i]);
        granted += p != NULL;
        bad_errno += !p && errno != ENOMEM;
        free(p);
        errno = 0;
        p = realloc(NULL, room_sizes[i]);
        granted += p != NULL;
        bad_errno += !p && errno != ENOMEM;
        free(p);
        p = NULL;
        int refused = posix_memalign(&p, 64, room_sizes[i]);
        granted += refused == 0;
        bad_errno += refused != 0 && refused != ENOMEM;
        free(p);
    }
    REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
    CHECK(granted == 0);
    CHECK(bad_errno == 0);
    for (size_t i = 0; i < ROOM_SIZES; i++) {
        unsigned char *p = malloc(room_sizes[i]);
        unsigned char *z = calloc(1, room_sizes[i]);
        CHECK(p && z);
        if (p && z) {
            memset(p, 0x5A, room_sizes[i]);
            CHECK(z[0] == 0 && z[room_sizes[i] - 1] == 0 && p[room_sizes[i] - 1] == 0x5A);
        }
        free(p);
        free(z);
    }
    return test_failures;
}

/* In a fresh process: with `room_mib` MiB of room under `resource` (RLIMIT_AS, `ulimit
 * -v`, or RLIMIT_DATA, `ulimit -d`), a small, a medium and a calloc'd block are had,
 * whole, and errno is as it was (lfheap's refused mappings on the way, such as a whole
 * arena's before a part's, are not the program's failures); and from THREAD_ROOM_MIB, a
 * thread starts after them. Under RLIMIT_AS, before the arena left room for its page-map
 * leaf, 68-74 MiB of room failed every allocation for the rest of the process; before it
 * left the program room for a thread's stack where it could (ARENA_PROGRAM_ROOM), a
 * thread failed to start with 42-48 and 74-80 MiB of room, as with less than 32. Under
 * RLIMIT_DATA, which does not count inaccessible mappings, while lfheap measured its room
 * with one, every block failed at 14-24, 34-40 and 66-72 MiB of room, and a thread at
 * 32-48 and 74-80. Returns the number of failed checks. */
static void *thread_started(void *arg)
{
    return arg;
}

static int some_room(int resource, size_t room_mib)
{
    REQUIRE(mallinfo2().arena == 0); /* nothing allocated yet */
    struct rlimit old;
    limit_room(resource, room_mib, &old);
    errno = 0;
    unsigned char *small = malloc(16), *medium = malloc(40 * KIB), *zeroed = calloc(1, 1000);
    int saw_errno = errno;
    int missing = !small + !medium + !zeroed;
    if (small)
        memset(small, 0x11, 16);
    if (medium)
        memset(medium, 0x22, 40 * KIB);
    int damaged = (zeroed && (zeroed[0] != 0 || zeroed[999] != 0)) ||
                  (small && small[15] != 0x11) || (medium && medium[40 * KIB - 1] != 0x22);
    /* The program's own next mapping: a thread's stack of the default size. */
    pthread_t thread;
    int thread_error =
        room_mib >= THREAD_ROOM_MIB ? pthread_create(&thread, NULL, thread_started, NULL) : 0;
    if (room_mib >= THREAD_ROOM_MIB && thread_error == 0)
        REQUIRE(pthread_join(thread, NULL) == 0);
    free(small);
    free(medium);
    free(zeroed);
    REQUIRE(setrlimit(resource, &old) == 0);
    if (missing || damaged || saw_errno || thread_error)
        printf("# %s, %zu MiB of room: %d blocks missing, %d damaged, errno %d, thread start %d\n",
               resource == RLIMIT_DATA ? "RLIMIT_DATA" : "RLIMIT_AS", room_mib, missing, damaged,
               saw_errno, thread_error);
    CHECK(thread_error == 0);
    CHECK(missing == 0);
    CHECK(damaged == 0);
    CHECK(saw_errno == 0);
    return test_failures;
}

/* In a fresh process with 300 MiB of address space: a 200 MiB block written and freed
 * stays kept for the next huge block (src/mapcache.h), and then 250 MiB of 16 KiB blocks
 * (superblocks) need new arenas that only its address space can hold. Every one must be
 * had: kept mappings never make a request fail for want of address space. Returns the
 * number of failed checks. */
static int kept_room(void)
{
    struct rlimit old;
    limit_room(RLIMIT_AS, 300, &old);
    size_t huge = 200 * MIB;
    unsigned char *kept = malloc(huge);
    REQUIRE(kept);
    kept[0] = kept[huge - 1] = 1;
    free(kept);
    enum { BLOCK = 16 * 1024, BLOCKS = 250 * 64 };
    static unsigned char *blocks[BLOCKS];
    int missing = 0, damaged = 0;
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(BLOCK);
        if (!blocks[i]) {
            missing++;
            continue;
        }
        memset(blocks[i], i + 1, BLOCK);
    }
    for (int i = 0; i < BLOCKS; i++) {
        if (blocks[i] && (blocks[i][0] != (unsigned char)(i + 1) ||
                          blocks[i][BLOCK - 1] != (unsigned char)(i + 1)))
            damaged++;
        free(blocks[i]);
    }
    REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
    printf("# 16 KiB blocks refused with a 200 MiB block kept: %d of %d; damaged %d\n", missing,
           BLOCKS, damaged);
    CHECK(missing == 0);
    CHECK(damaged == 0);
    return test_failures;
}

/* The calls below, each with errno 0 before it: a call that succeeds leaves it 0, one
 * that fails leaves ENOMEM. Counts the successes that changed errno. */
static int errno_changes;
static int errno_failures;

static void *errno_kept(void *block)
{
    if (block && errno != 0)
        errno_changes++;
    if (!block && errno != ENOMEM)
        errno_failures++;
    return block;
}

#define KEEPS_ERRNO(call) (errno = 0, errno_kept(call))

/* In a fresh process with 512 MiB of `resource` (RLIMIT_AS or RLIMIT_DATA) room: huge
 * blocks kept after their free (src/mapcache.h) take the room that the next requests
 * need, and lfheap's first mapping for them is refused before it unmaps the kept ones and
 * succeeds. That refusal is lfheap's own: every call that succeeds leaves errno as the
 * program had it, as the C standard asks of a call whose result says it worked. Returns
 * the number of failed checks. */
static int errno_room(int resource)
{
    struct rlimit old;
    limit_room(resource, 512, &old);
    char *a = KEEPS_ERRNO(malloc(450 * MIB));
    REQUIRE(a);
    a[0] = 1;
    free(a);
    free(KEEPS_ERRNO(calloc(1, 70 * MIB)));
    free(KEEPS_ERRNO(aligned_alloc(64 * MIB, 450 * MIB)));
    void *m = NULL;
    errno = 0;
    if (posix_memalign(&m, 64 * MIB, 450 * MIB) == 0 && errno != 0)
        errno_changes++;
    free(m);
    free(KEEPS_ERRNO(malloc(70 * MIB)));
    a = KEEPS_ERRNO(malloc(150 * MIB));
    char *b = a ? KEEPS_ERRNO(realloc(a, 300 * MIB)) : NULL;
    a = b ? b : a;
    b = KEEPS_ERRNO(realloc(a, 50 * MIB));
    a = b ? b : a;
    char *c = KEEPS_ERRNO(malloc(250 * MIB));
    b = KEEPS_ERRNO(realloc(a, 175 * MIB));
    a = b ? b : a;
    free(a);
    free(c);
    a = KEEPS_ERRNO(malloc(20 * MIB));
    free(KEEPS_ERRNO(malloc(400 * MIB)));
    b = KEEPS_ERRNO(realloc(a, 30 * MIB));
    a = b ? b : a;
    b = KEEPS_ERRNO(realloc(a, 100 * MIB));
    a = b ? b : a;
    free(a);
    /* Small blocks too: their arenas need the room a kept block holds. */
    free(KEEPS_ERRNO(malloc(450 * MIB)));
    enum { BLOCK = 16 * 1024, BLOCKS = 100 * 64 };
    static char *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++)
        blocks[i] = KEEPS_ERRNO(malloc(BLOCK));
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    REQUIRE(setrlimit(resource, &old) == 0);
    printf("# successes that changed errno: %d; failures without ENOMEM: %d\n", errno_changes,
           errno_failures);
    CHECK(errno_changes == 0);
    CHECK(errno_failures == 0);
    return test_failures;
}

/* In a fresh process whose address space room (256 MiB) is then filled until malloc(16)
 * fails: every shrink of a block that holds its new size where it is succeeds, keeps the
 * block's bytes and leaves errno as it was, as glibc's shrinks do. Shrinks that waste
 * much move to a smaller block when they can; with no room left they once failed with
 * ENOMEM (found by an outside tester), so a program that trims a buffer with
 * `p = realloc(p, smaller)` lost it. Small blocks (plain, from calloc, aligned), large
 * ones, a block mapped on its own, and llheap's resize, which keeps no contents. The
 * mapped block, shrunk to 100 bytes with no room to move to, gives back the address space
 * past them (it once kept its whole 100 MiB). Returns the number of failed checks. */
enum { SHRINK_HELD = 1 << 20 };
static void *shrink_held[SHRINK_HELD];

static int shrinks_when_full(void)
{
    void *(*resize_fn)(void *, size_t) = (void *(*)(void *, size_t))dlsym(RTLD_DEFAULT, "resize");
    struct rlimit old;
    limit_room(RLIMIT_AS, 256, &old);
    struct shrink {
        unsigned char *block;
        size_t from, to;
        bool resize;
    } shrinks[] = {
        {malloc(3000), 3000, 100, false},         {calloc(1, 3000), 3000, 100, false},
        {memalign(4096, 3000), 3000, 100, false}, {malloc(MIB), MIB, 1000, false},
        {malloc(MIB), MIB, 100000, false},        {malloc(100 * MIB), 100 * MIB, 100, false},
        {malloc(3000), 3000, 100, true},          {malloc(MIB), MIB, 1000, true},
    };
    const size_t count = sizeof shrinks / sizeof *shrinks;
    for (size_t i = 0; i < count; i++) {
        REQUIRE(shrinks[i].block);
        memset(shrinks[i].block, (int)(0x40 + i), shrinks[i].from);
    }
    size_t held = 0;
    for (size_t size = 64 * MIB; size >= 16; size /= 2) {
        void *p;
        while (held < SHRINK_HELD && (p = malloc(size)) != NULL)
            shrink_held[held++] = p;
    }
    errno = 0;
    void *more = malloc(16);
    REQUIRE(more == NULL); /* the room is full */
    int failed = 0, errno_changed = 0, damaged = 0, moved_aligned = 0;
    long given_back_kib = 0;
    for (size_t i = 0; i < count; i++) {
        struct shrink *s = &shrinks[i];
        if (s->resize && !resize_fn)
            continue; /* not lfheap */
        long space_before = address_space_kib();
        errno = 0;
        unsigned char *q = s->resize ? resize_fn(s->block, s->to) : realloc(s->block, s->to);
        /* The 100 MiB block, mapped on its own, gives back the pages past its 100 bytes
         * (it kept them all before). Later shrinks may map an arena in the room. */
        if (s->from == 100 * MIB)
            given_back_kib = space_before - address_space_kib();
        if (!q) {
            failed++;
            continue;
        }
        errno_changed += errno != 0;
        /* An aligned block shrunk within its class stays even with room to move. */
        moved_aligned += i == 2 && q != s->block;
        if (!s->resize)
            for (size_t k = 0; k < s->to; k++)
                damaged += q[k] != (unsigned char)(0x40 + i);
        s->block = q;
    }
    for (size_t i = 0; i < held; i++)
        free(shrink_held[i]);
    for (size_t i = 0; i < count; i++)
        free(shrinks[i].block);
    REQUIRE(setrlimit(RLIMIT_AS, &old) == 0);
    printf("# %zu blocks filled the room; of %zu shrinks %d failed, %d changed errno, %d bytes "
           "lost; the 100 MiB block's shrink gave back %ld KiB of address space\n",
           held, count, failed, errno_changed, damaged, given_back_kib);
    CHECK(failed == 0);
    CHECK(errno_changed == 0);
    CHECK(damaged == 0);
    CHECK(moved_aligned == 0);
    if (resize_fn)
        CHECK(given_back_kib >= 99 * 1024);
    return test_failures;
}

/* A check above in a new run of this program, which skips the preload check's
 * allocation before main (TEST_ON_GLIBC: the parent has made that check). */
static void in_fresh_process(const char *mode, const char *arg)
{
    pid_t child = fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        setenv("TEST_ON_GLIBC", "1", 1);
        execl("/proc/self/exe", "test_ulimit", mode, arg, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    REQUIRE(waitpid(child, &status, 0) == child);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void little_room_gets_parts_of_arenas(void)
{
    in_fresh_process("little-room", NULL);
}

static void little_data_room_gets_parts_of_arenas(void)
{
    in_fresh_process("little-data-room", NULL);
}

static void kept_mappings_make_room_for_arenas(void)
{
    in_fresh_process("kept-room", NULL);
}

static void successes_keep_errno_under_address_space_room(void)
{
    in_fresh_process("errno-room", NULL);
}

static void successes_keep_errno_under_data_room(void)
{
    in_fresh_process("errno-data-room", NULL);
}

static void shrinks_succeed_when_memory_is_full(void)
{
    in_fresh_process("shrink-room", NULL);
}

static void no_room_then_recovers(void)
{
    in_fresh_process("no-room", NULL);
}

/* Every room from 14 MiB (a little above lfheap's least) to 100 MiB, past a whole arena
 * and its leaf, in steps of 2 MiB; from 32 MiB a thread starts too. */
static void every_room_above_the_least_serves(const char *mode)
{
    for (int room = 14; room <= 100; room += 2) {
        char arg[16];
        snprintf(arg, sizeof arg, "%d", room);
        in_fresh_process(mode, arg);
    }
}

static void every_address_space_room_serves(void)
{
    every_room_above_the_least_serves("some-room");
}

static void every_data_room_serves(void)
{
    every_room_above_the_least_serves("some-data-room");
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "no-room") == 0)
        return no_room() == 0 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "shrink-room") == 0)
        return shrinks_when_full() == 0 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "kept-room") == 0)
        return kept_room() == 0 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "errno-room") == 0)
        return errno_room(RLIMIT_AS) == 0 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "errno-data-room") == 0)
        return errno_room(RLIMIT_DATA) == 0 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "little-room") == 0)
        return little_room(RLIMIT_AS) == 0 ? 0 : 1;
    if (argc > 1 && strcmp(argv[1], "little-data-room") == 0)
        return little_room(RLIMIT_DATA) == 0 ? 0 : 1;
    if (argc > 2 && strcmp(argv[1], "some-room") == 0)
        return some_room(RLIMIT_AS, (size_t)atoi(argv[2])) == 0 ? 0 : 1;
    if (argc > 2 && strcmp(argv[1], "some-data-room") == 0)
        return some_room(RLIMIT_DATA, (size_t)atoi(argv[2])) == 0 ? 0 : 1;
    RUN(little_room_gets_parts_of_arenas);
    RUN(little_data_room_gets_parts_of_arenas);
    RUN(no_room_then_recovers);
    RUN(shrinks_succeed_when_memory_is_full);
    RUN(kept_mappings_make_room_for_arenas);
    RUN(successes_keep_errno_under_address_space_room);
    RUN(successes_keep_errno_under_data_room);
    RUN(every_address_space_room_serves);
    RUN(every_data_room_serves);
    /* stdout's buffer before memory runs out */
    printf("# filling the address space\n");
    fflush(stdout);
    RUN(fills_until_enomem_and_recovers);
    return test_exit_status();
}
