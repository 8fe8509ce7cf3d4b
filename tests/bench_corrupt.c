/*
 * A deliberately broken allocator for the benchmark suite's tests: an LD_PRELOAD shim
 * over glibc (its __libc_* entry points) that misbehaves the way a buggy allocator
 * would, so the tests can check that every benchmark program notices and fails
 * instead of reporting a time. BENCH_CORRUPT selects the defect:
 *
 *   scribble  every BENCH_CORRUPT_EVERY-th malloc or free overwrites the first bytes of
 *             another block that is still live (a recent one the program owns);
 *   overlap   every BENCH_CORRUPT_EVERY-th malloc returns a block that is still live
 *             (the most recent one that is large enough) instead of a fresh one.
 *
 * Only blocks requested by the main executable are tracked and misused, never glibc's
 * own (stdio buffers, thread control blocks), so the program's own checks are what
 * catches the damage. A mutex guards the bookkeeping: this is a test tool, not an
 * allocator. Duplicated blocks are reference-counted so that freeing them twice does
 * not reach glibc.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);

#define TRACKED 256

struct tracked {
    void *block;
    size_t size;
    unsigned refs; /* 0: slot unused; > 1: handed out more than once */
};

enum mode { MODE_OFF, MODE_SCRIBBLE, MODE_OVERLAP };

static struct {
    pthread_mutex_t lock;
    struct tracked live[TRACKED];
    unsigned next; /* round-robin slot to (re)use */
    unsigned long events;
    unsigned long every;
    enum mode mode;
    uintptr_t exe_lo, exe_hi; /* the main executable's loaded range */
    int ready;
} shim = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int find_exe(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (start < lo)
            lo = start;
        if (start + ph->p_memsz > hi)
            hi = start + ph->p_memsz;
    }
    shim.exe_lo = lo;
    shim.exe_hi = hi;
    return 1; /* the first object is the main program */
}

__attribute__((constructor)) static void shim_init(void)
{
    const char *m = getenv("BENCH_CORRUPT");
    const char *e = getenv("BENCH_CORRUPT_EVERY");
    shim.mode = !m                           ? MODE_OFF
                : strcmp(m, "scribble") == 0 ? MODE_SCRIBBLE
                : strcmp(m, "overlap") == 0  ? MODE_OVERLAP
                                             : MODE_OFF;
    shim.every = e ? strtoul(e, NULL, 10) : 100;
    if (shim.every == 0)
        shim.every = 1;
    dl_iterate_phdr(find_exe, NULL);
    shim.ready = 1;
}

static int from_exe(const void *caller)
{
    uintptr_t c = (uintptr_t)caller;
    return shim.ready && shim.mode != MODE_OFF && c >= shim.exe_lo && c < shim.exe_hi;
}

static struct tracked *lookup(const void *p)
{
    for (unsigned i = 0; i < TRACKED; i++)
        if (shim.live[i].refs && shim.live[i].block == p)
            return &shim.live[i];
    return NULL;
}

/* Records a block the program owns; overwrites the oldest single-owner entry. */
static void remember(void *p, size_t size)
{
    for (unsigned n = 0; n < TRACKED; n++) {
        struct tracked *t = &shim.live[shim.next];
        shim.next = (shim.next + 1) % TRACKED;
        if (t->refs <= 1) {
            *t = (struct tracked){.block = p, .size = size, .refs = 1};
            return;
        }
    }
}

/* The most recently remembered live block of at least `size` bytes, other than p. */
static struct tracked *recent(size_t size, const void *p)
{
    for (unsigned n = 1; n <= TRACKED; n++) {
        struct tracked *t = &shim.live[(shim.next + TRACKED - n) % TRACKED];
        if (t->refs && t->size >= size && t->block != p)
            return t;
    }
    return NULL;
}

static int misbehave_now(void)
{
    return ++shim.events % shim.every == 0;
}

static void maybe_scribble(const void *except)
{
    if (shim.mode != MODE_SCRIBBLE || !misbehave_now())
        return;
    struct tracked *t = recent(1, except);
    if (t)
        memset(t->block, 0xa5, t->size < 8 ? t->size : 8);
}

static void *shim_malloc(size_t size, const void *caller)
{
    if (!from_exe(caller))
        return __libc_malloc(size);
    pthread_mutex_lock(&shim.lock);
    void *p = NULL;
    if (shim.mode == MODE_OVERLAP && misbehave_now()) {
        struct tracked *t = recent(size ? size : 1, NULL);
        if (t) {
            t->refs++;
            p = t->block;
        }
    }
    if (!p) {
        p = __libc_malloc(size);
        if (p) {
            maybe_scribble(p);
            remember(p, size);
        }
    }
    pthread_mutex_unlock(&shim.lock);
    return p;
}

void *malloc(size_t size)
{
    return shim_malloc(size, __builtin_return_address(0));
}

void *calloc(size_t count, size_t size)
{
    void *p = __libc_calloc(count, size);
    if (p && from_exe(__builtin_return_address(0))) {
        pthread_mutex_lock(&shim.lock);
        maybe_scribble(p);
        remember(p, count * size);
        pthread_mutex_unlock(&shim.lock);
    }
    return p;
}

void free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&shim.lock);
    struct tracked *t = lookup(p);
    if (t && t->refs > 1) {
        t->refs--; /* a duplicate: someone else still holds it */
        pthread_mutex_unlock(&shim.lock);
        return;
    }
    if (t)
        t->refs = 0;
    if (shim.mode != MODE_OFF && from_exe(__builtin_return_address(0)))
        maybe_scribble(p);
    pthread_mutex_unlock(&shim.lock);
    __libc_free(p);
}

void *realloc(void *p, size_t size)
{
    if (!p)
        return shim_malloc(size, __builtin_return_address(0));
    pthread_mutex_lock(&shim.lock);
    struct tracked *t = lookup(p);
    if (t && t->refs > 1) {
        /* a duplicate: give this holder a copy and leave the block to the other */
        size_t keep = t->size < size ? t->size : size;
        t->refs--;
        pthread_mutex_unlock(&shim.lock);
        void *q = __libc_malloc(size);
        if (q)
            memcpy(q, p, keep);
        return q;
    }
    if (t)
        t->refs = 0;
    pthread_mutex_unlock(&shim.lock);
    void *q = __libc_realloc(p, size);
    if (q && from_exe(__builtin_return_address(0))) {
        pthread_mutex_lock(&shim.lock);
        remember(q, size);
        pthread_mutex_unlock(&shim.lock);
    }
    return q;
}
