/*
 * The misuse collection (docs/HARDENING.md): one program, one case per run, named by its
 * argument (`misuse CASE`; `misuse --list` prints "name<TAB>kind<TAB>what it does" for
 * every case). Each case makes one mistake with the heap -- a double or invalid free, a
 * write outside a block or into a freed one -- and then keeps the allocator busy with a
 * few hundred malloc/free of the same size, reusing the damaged block, so that an
 * allocator that checks at free, at reuse or at exit gets its chance. A case that runs to
 * its end prints "misuse: survived CASE" on stdout and exits 0; anything else (a signal,
 * another exit status, no marker) is the allocator stopping it, which tests/misuse.sh
 * classifies. Exit status 77 means this program itself went wrong (a failed malloc
 * outside the misuse), never a verdict on the allocator.
 *
 * A plain program, run with the allocator under test preloaded. Built with -O0
 * -fno-builtin (mk/misuse.mk), and every misused pointer goes through opaque(), so that
 * the compiler neither removes the mistakes nor warns about the ones it can see.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* The sizes of the collection: a small-class block, medium ones below and above a page
 * or two, a large one that most allocators map on its own, and a huge one. */
#define SMALL  ((size_t)24)
#define MEDIUM ((size_t)3000)
#define M20K   (20 * KIB)
#define LARGE  MIB
#define HUGE   (100 * MIB)

#define EXIT_BROKEN 77 /* this program failed, not the allocator's check */

/* Hides where a pointer came from, so the compiler cannot reason about the misuse: a
 * copy taken before the free is, to the compiler, another pointer. */
static void *opaque(void *ptr)
{
    __asm__ volatile("" : "+r"(ptr));
    return ptr;
}

static void say(const char *text)
{
    if (write(STDOUT_FILENO, text, strlen(text)) < 0)
        _exit(EXIT_BROKEN);
}

static void *must_malloc(size_t size)
{
    void *p = malloc(size);
    if (!p) {
        say("misuse: malloc failed outside the misuse\n");
        _exit(EXIT_BROKEN);
    }
    return p;
}

/* Writes the block where a program would: every byte of a small or medium one, one byte
 * per page of a larger one (touching 100 MiB on every round would only cost time). */
static void touch(char *p, size_t size, char value)
{
    if (size <= 64 * KIB) {
        memset(p, value, size);
        return;
    }
    for (size_t i = 0; i < size; i += 4 * KIB)
        ((volatile char *)p)[i] = value;
    ((volatile char *)p)[size - 1] = value;
}

/* The allocator activity after the mistake: rounds of up to 100 blocks of `size`, all
 * written, then all freed, `total` blocks in all. Most allocators reuse freed blocks
 * last-in-first-out, so the first malloc takes back the damaged block; one that delays
 * reuse (mimalloc collects a page's freed blocks only when its free list runs dry)
 * still has its size's blocks come and go a few hundred times around it. */
static void churn(size_t size, int total)
{
    char *blocks[100];
    while (total > 0) {
        int n = total < 100 ? total : 100;
        for (int i = 0; i < n; i++) {
            blocks[i] = must_malloc(size);
            touch(blocks[i], size, (char)i);
        }
        for (int i = 0; i < n; i++)
            free(blocks[i]);
        total -= n;
    }
}

/* A few hundred operations for blocks up to 20 KiB, a few dozen of 1 MiB, a few of
 * 100 MiB: each a mapping of its own in most allocators, so more adds only time. */
static void churn_size(size_t size)
{
    churn(size, size <= M20K ? 300 : size <= LARGE ? 20 : 4);
}

static char global_buffer[256];

/* ---- double frees ------------------------------------------------------------------ */

static void double_free(size_t size)
{
    char *p = must_malloc(size), *again = opaque(p);
    touch(p, size, 1);
    free(p);
    free(again);
    churn_size(size);
}

static void double_free_small(void)
{
    double_free(SMALL);
}
static void double_free_medium(void)
{
    double_free(MEDIUM);
}
static void double_free_20k(void)
{
    double_free(M20K);
}
static void double_free_large(void)
{
    double_free(LARGE);
}
static void double_free_huge(void)
{
    double_free(HUGE);
}

/* The block is no longer the last one freed, and blocks of other sizes came and went in
 * between: a check that looks only at the top of a free list misses it. */
static void double_free_later(size_t size)
{
    char *p = must_malloc(size), *other = must_malloc(size), *again = opaque(p);
    char *between[10];
    free(p);
    free(other);
    for (int i = 0; i < 10; i++) {
        between[i] = must_malloc(size * 2 + 64 * (size_t)i);
        touch(between[i], size * 2, 2);
    }
    for (int i = 0; i < 10; i++)
        free(between[i]);
    free(again);
    churn_size(size);
}

static void double_free_small_later(void)
{
    double_free_later(SMALL);
}
static void double_free_medium_later(void)
{
    double_free_later(MEDIUM);
}

static void double_free_calloc(void)
{
    char *p = calloc(3, 8), *again = opaque(p);
    if (!p)
        _exit(EXIT_BROKEN);
    free(p);
    free(again);
    churn_size(SMALL);
}

static void double_free_memalign(void)
{
    char *p = memalign(64, 200), *again = opaque(p);
    if (!p)
        _exit(EXIT_BROKEN);
    free(p);
    free(again);
    churn_size(200);
}

static void double_free_aligned_4k(void)
{
    char *p = aligned_alloc(4 * KIB, 8 * KIB), *again = opaque(p);
    if (!p)
        _exit(EXIT_BROKEN);
    free(p);
    free(again);
    churn_size(8 * KIB);
}

static void *free_in_thread(void *p)
{
    free(opaque(p));
    return NULL;
}

/* Freed by one thread, then again by another: the second free reaches the allocator
 * through another thread's cache or a remote-free path. */
static void double_free_threads(size_t size)
{
    char *p = must_malloc(size);
    pthread_t first, second;
    touch(p, size, 3);
    if (pthread_create(&first, NULL, free_in_thread, p) || pthread_join(first, NULL))
        _exit(EXIT_BROKEN);
    if (pthread_create(&second, NULL, free_in_thread, p) || pthread_join(second, NULL))
        _exit(EXIT_BROKEN);
    churn_size(size);
}

static void double_free_threads_small(void)
{
    double_free_threads(SMALL);
}
static void double_free_threads_medium(void)
{
    double_free_threads(MEDIUM);
}

/* realloc of a freed block frees it a second time (or copies from freed memory). */
static void realloc_freed(size_t size)
{
    char *p = must_malloc(size), *again = opaque(p);
    free(p);
    char *q = realloc(again, size * 2);
    (void)opaque(q);
    churn_size(size);
}

static void realloc_freed_small(void)
{
    realloc_freed(SMALL);
}
static void realloc_freed_large(void)
{
    realloc_freed(LARGE);
}

/* ---- invalid frees ----------------------------------------------------------------- */

static void free_interior(size_t size, size_t offset)
{
    char *p = must_malloc(size);
    touch(p, size, 4);
    free(opaque(p + offset));
    churn_size(size);
}

static void free_interior_8(void)
{
    free_interior(SMALL, 8);
}
static void free_interior_16(void)
{
    free_interior(MEDIUM, 16);
}
static void free_interior_middle_medium(void)
{
    free_interior(MEDIUM, MEDIUM / 2 + 4);
}
static void free_interior_middle_large(void)
{
    free_interior(LARGE, LARGE / 2);
}
static void free_interior_middle_huge(void)
{
    free_interior(HUGE, HUGE / 2);
}

static void free_stack(void)
{
    char on_stack[64];
    memset(on_stack, 5, sizeof on_stack);
    free(opaque(on_stack + 16));
    churn_size(SMALL);
}

static void free_global(void)
{
    free(opaque(global_buffer + 16));
    churn_size(SMALL);
}

/* An address the heap owns but never handed out: the next block after two consecutive
 * small ones, at the distance between them (the slot size), where no block is live yet
 * in a fresh process. */
static void free_unallocated_neighbour(void)
{
    char *a = must_malloc(SMALL), *b = must_malloc(SMALL);
    uintptr_t stride = b > a ? (uintptr_t)(b - a) : (uintptr_t)(a - b);
    if (stride == 0 || stride > 256)
        stride = 32; /* not consecutive: the next 32-byte slot after b is as good a guess */
    char *next = b > a ? b + stride : b - stride;
    free(opaque(next));
    churn_size(SMALL);
    free(a);
    free(b);
}

/* Memory no allocator owns: the second page of an anonymous mapping. */
static void free_mmap(void)
{
    char *map = mmap(NULL, 8 * KIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED)
        _exit(EXIT_BROKEN);
    free(opaque(map + 4 * KIB));
    churn_size(SMALL);
}

static void realloc_interior(size_t size, size_t offset)
{
    char *p = must_malloc(size);
    touch(p, size, 6);
    char *q = realloc(opaque(p + offset), size * 2);
    (void)opaque(q);
    churn_size(size);
}

static void realloc_interior_small(void)
{
    realloc_interior(SMALL, 8);
}
static void realloc_interior_large(void)
{
    realloc_interior(LARGE, 4 * KIB);
}

static void realloc_stack(void)
{
    char on_stack[64];
    memset(on_stack, 7, sizeof on_stack);
    char *q = realloc(opaque(on_stack), 128);
    (void)opaque(q);
    churn_size(SMALL);
}

/* An aligned block freed at the next multiple of its alignment (the pointer a program
 * that aligned a plain block by hand would have): free(p + alignment). */
static void free_aligned_interior(size_t alignment, size_t size)
{
    char *p = memalign(alignment, size);
    if (!p)
        _exit(EXIT_BROKEN);
    touch(p, size, 8);
    free(opaque(p + alignment));
    churn_size(size);
}

static void free_memalign_interior(void)
{
    free_aligned_interior(64, 256);
}
static void free_aligned_4k_interior(void)
{
    free_aligned_interior(4 * KIB, 16 * KIB);
}

/* ---- writes outside a block -------------------------------------------------------- */

/* Writes `count` bytes right after the request (`count` < 0: right before it), between
 * two blocks of the same size allocated just before and after it (where a real overflow
 * lands: in a neighbour, rather than off the start of a fresh mapping), then frees the
 * three, so that a check of the neighbours' edges at free gets its chance too, and
 * churns their size. */
static void write_outside(size_t size, int count)
{
    char *below = must_malloc(size), *p = must_malloc(size), *above = must_malloc(size);
    touch(p, size, 9);
    volatile char *at = opaque(count > 0 ? p + size : p + count);
    for (int i = 0; i < abs(count); i++)
        at[i] = 'A';
    free(p);
    free(below);
    free(above);
    churn_size(size);
}

static void overflow_small_1(void)
{
    write_outside(SMALL, 1);
}
static void overflow_small_8(void)
{
    write_outside(SMALL, 8);
}
static void overflow_small_64(void)
{
    write_outside(SMALL, 64);
}
static void underflow_small_1(void)
{
    write_outside(SMALL, -1);
}
static void underflow_small_8(void)
{
    write_outside(SMALL, -8);
}
static void underflow_small_64(void)
{
    write_outside(SMALL, -64);
}
static void overflow_medium_8(void)
{
    write_outside(MEDIUM, 8);
}
static void underflow_medium_8(void)
{
    write_outside(MEDIUM, -8);
}
static void overflow_large_64(void)
{
    write_outside(LARGE, 64);
}
static void underflow_large_8(void)
{
    write_outside(LARGE, -8);
}

/* ---- use after free ---------------------------------------------------------------- */

/* Writes `count` bytes at `offset` of a freed block, then takes blocks of its size back
 * (the first of them is the freed one where reuse is last-in-first-out). */
static void write_after_free(size_t size, size_t offset, size_t count)
{
    char *p = must_malloc(size), *stale = opaque(p);
    touch(p, size, 10);
    free(p);
    memset(stale + offset, 'A', count);
    churn_size(size);
}

static void write_after_free_small(void)
{
    write_after_free(SMALL, 0, SMALL);
}
static void write_after_free_small_16(void)
{
    write_after_free(SMALL, 16, 8);
}
static void write_after_free_medium(void)
{
    write_after_free(MEDIUM, 16, 64);
}
static void write_after_free_large(void)
{
    write_after_free(LARGE, 0, 64);
}

static void usable_size_freed(void)
{
    char *p = must_malloc(SMALL), *stale = opaque(p);
    free(p);
    volatile size_t size = malloc_usable_size(stale);
    (void)size;
    churn_size(SMALL);
}

/* ---- the table --------------------------------------------------------------------- */

struct misuse_case {
    const char *name;
    const char *kind; /* double-free, invalid-free, overflow or use-after-free */
    const char *what;
    void (*run)(void);
};

static const struct misuse_case cases[] = {
    {"double-free-small", "double-free", "free(p) twice, 24 B", double_free_small},
    {"double-free-small-later", "double-free",
     "free(p), free(q), other sizes malloc'd/freed, free(p) again, 24 B", double_free_small_later},
    {"double-free-medium", "double-free", "free(p) twice, 3000 B", double_free_medium},
    {"double-free-medium-later", "double-free",
     "free(p), free(q), other sizes malloc'd/freed, free(p) again, 3000 B",
     double_free_medium_later},
    {"double-free-20k", "double-free", "free(p) twice, 20 KiB", double_free_20k},
    {"double-free-large", "double-free", "free(p) twice, 1 MiB", double_free_large},
    {"double-free-huge", "double-free", "free(p) twice, 100 MiB", double_free_huge},
    {"double-free-calloc", "double-free", "calloc(3, 8) freed twice", double_free_calloc},
    {"double-free-memalign", "double-free", "memalign(64, 200) freed twice", double_free_memalign},
    {"double-free-aligned-4k", "double-free", "aligned_alloc(4096, 8 KiB) freed twice",
     double_free_aligned_4k},
    {"double-free-threads-small", "double-free", "freed by one thread, again by another, 24 B",
     double_free_threads_small},
    {"double-free-threads-medium", "double-free", "freed by one thread, again by another, 3000 B",
     double_free_threads_medium},
    {"realloc-freed-small", "double-free", "realloc of a freed 24 B block", realloc_freed_small},
    {"realloc-freed-large", "double-free", "realloc of a freed 1 MiB block", realloc_freed_large},
    {"free-interior-8", "invalid-free", "free(p + 8), 24 B", free_interior_8},
    {"free-interior-16", "invalid-free", "free(p + 16), 3000 B", free_interior_16},
    {"free-interior-middle-medium", "invalid-free", "free(p + 1504), 3000 B",
     free_interior_middle_medium},
    {"free-interior-middle-large", "invalid-free", "free(p + 512 KiB), 1 MiB",
     free_interior_middle_large},
    {"free-interior-middle-huge", "invalid-free", "free(p + 50 MiB), 100 MiB",
     free_interior_middle_huge},
    {"free-stack", "invalid-free", "free of a stack address", free_stack},
    {"free-global", "invalid-free", "free of a global's address", free_global},
    {"free-unallocated-neighbour", "invalid-free",
     "free of the never-allocated slot after two 24 B blocks", free_unallocated_neighbour},
    {"free-mmap", "invalid-free", "free of a page from mmap", free_mmap},
    {"free-memalign-interior", "invalid-free", "memalign(64, 256), free(p + 64)",
     free_memalign_interior},
    {"free-aligned-4k-interior", "invalid-free", "memalign(4096, 16 KiB), free(p + 4096)",
     free_aligned_4k_interior},
    {"realloc-interior-small", "invalid-free", "realloc(p + 8), 24 B", realloc_interior_small},
    {"realloc-interior-large", "invalid-free", "realloc(p + 4096), 1 MiB", realloc_interior_large},
    {"realloc-stack", "invalid-free", "realloc of a stack address", realloc_stack},
    {"overflow-small-1", "overflow", "1 byte written after a 24 B block", overflow_small_1},
    {"overflow-small-8", "overflow", "8 bytes written after a 24 B block", overflow_small_8},
    {"overflow-small-64", "overflow", "64 bytes written after a 24 B block", overflow_small_64},
    {"underflow-small-1", "overflow", "1 byte written before a 24 B block", underflow_small_1},
    {"underflow-small-8", "overflow", "8 bytes written before a 24 B block", underflow_small_8},
    {"underflow-small-64", "overflow", "64 bytes written before a 24 B block", underflow_small_64},
    {"overflow-medium-8", "overflow", "8 bytes written after a 3000 B block", overflow_medium_8},
    {"underflow-medium-8", "overflow", "8 bytes written before a 3000 B block", underflow_medium_8},
    {"overflow-large-64", "overflow", "64 bytes written after a 1 MiB block", overflow_large_64},
    {"underflow-large-8", "overflow", "8 bytes written before a 1 MiB block", underflow_large_8},
    {"write-after-free-small", "use-after-free", "all 24 bytes of a freed block written",
     write_after_free_small},
    {"write-after-free-small-16", "use-after-free", "bytes 16-23 of a freed 24 B block written",
     write_after_free_small_16},
    {"write-after-free-medium", "use-after-free",
     "64 bytes at offset 16 of a freed 3000 B block written", write_after_free_medium},
    {"write-after-free-large", "use-after-free", "first 64 bytes of a freed 1 MiB block written",
     write_after_free_large},
    {"usable-size-freed", "use-after-free", "malloc_usable_size of a freed 24 B block",
     usable_size_freed},
};

int main(int argc, char **argv)
{
    const size_t count = sizeof cases / sizeof cases[0];
    if (argc == 2 && strcmp(argv[1], "--list") == 0) {
        for (size_t i = 0; i < count; i++) {
            say(cases[i].name);
            say("\t");
            say(cases[i].kind);
            say("\t");
            say(cases[i].what);
            say("\n");
        }
        return 0;
    }
    for (size_t i = 0; argc == 2 && i < count; i++) {
        if (strcmp(argv[1], cases[i].name) != 0)
            continue;
        cases[i].run();
        say("misuse: survived ");
        say(cases[i].name);
        say("\n");
        return 0;
    }
    say("usage: misuse CASE | misuse --list\n");
    return EXIT_BROKEN;
}
