/*
 * A program linked with build/liblfheap.a that calls only malloc and free itself, and
 * links a shared library (tests/test_static_archive_lib.c) that calls posix_memalign and
 * the other aligned routines, realloc, sigaction and signal. Whatever lfheap entry point
 * the program references, the archive must bring all of them into the executable: else
 * the library's aligned blocks come from glibc's heap (and lfheap's free and realloc
 * cannot take them back) and its signal handlers are installed unwrapped. Checked: every
 * name of the malloc family and of the signal calls that glibc defines resolves, for
 * the whole process (dlsym(RTLD_DEFAULT)), to code in lfheap's section of the executable;
 * the library's aligned blocks are lfheap's and realloc keeps their contents; its handlers
 * reach the kernel through lfheap's wrapper, and may allocate.
 */
#include "test_static_archive.h"
#include "testutil.h"

#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

/* All of lfheap's code (the release objects' one section, see the Makefile). */
extern const char __start_lfheap_text[], __stop_lfheap_text[];

static int in_lfheap(const void *p)
{
    return (const char *)p >= __start_lfheap_text && (const char *)p < __stop_lfheap_text;
}

static void own_malloc_free(void)
{
    char *p = malloc(100);
    REQUIRE(p);
    memset(p, 1, 100);
    CHECK(lib_lfheap_usable(p) >= 100);
    free(p);
}

/* The names the executable's own calls do not reference. A name glibc does not define
 * (in this version) has nothing to escape to and is left out. */
static const char *const names[] = {
    "malloc",           "free",
    "calloc",           "realloc",
    "reallocarray",     "malloc_usable_size",
    "posix_memalign",   "aligned_alloc",
    "memalign",         "valloc",
    "pvalloc",          "__libc_malloc",
    "__libc_free",      "__libc_calloc",
    "__libc_realloc",   "__libc_memalign",
    "__libc_valloc",    "__libc_pvalloc",
    "__posix_memalign", "cfree",
    "mallinfo",         "mallinfo2",
    "malloc_stats",     "malloc_info",
    "malloc_trim",      "mallopt",
    "free_sized",       "free_aligned_sized",
    "sigaction",        "signal",
    "bsd_signal",       "ssignal",
    "sysv_signal",      "__sysv_signal",
    "sigset",           "sigignore",
    "siginterrupt",
};

static void names_resolve_to_lfheap(void)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    REQUIRE(libc);
    int glibc_defines = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *in_glibc = dlsym(libc, names[i]);
        if (!in_glibc)
            continue;
        glibc_defines++;
        void *bound = dlsym(RTLD_DEFAULT, names[i]);
        if (!in_lfheap(bound)) {
            fprintf(stderr, "%s resolves to %p (glibc's: %p), outside lfheap's code\n", names[i],
                    bound, in_glibc);
            test_failures++;
        }
    }
    /* The check would pass vacuously if glibc were not found by these names. */
    CHECK(glibc_defines >= 20);
    dlclose(libc);
}

static void aligned_blocks_are_lfheap(void)
{
    static const size_t alignments[] = {64, 4096, 64, 4096};
    for (int kind = 0; kind < 4; kind++) {
        size_t size = 1000 + 300 * (size_t)kind;
        unsigned char *p = lib_aligned(kind, alignments[kind], size);
        REQUIRE(p);
        CHECK(((uintptr_t)p & (alignments[kind] - 1)) == 0);
        CHECK(lib_lfheap_usable(p) >= size);
        for (size_t i = 0; i < size; i++)
            p[i] = (unsigned char)(i * 7 + (size_t)kind);
        unsigned char *q = lib_realloc(p, 5 * size);
        CHECK(q);
        if (!q)
            continue; /* realloc refused a block lfheap did not hand out */
        CHECK(lib_lfheap_usable(q) >= 5 * size);
        int kept = 1;
        for (size_t i = 0; i < size; i++)
            kept &= q[i] == (unsigned char)(i * 7 + (size_t)kind);
        CHECK(kept);
        free(q);
    }
}

static void handlers_are_wrapped(void)
{
    static const int signals[] = {SIGUSR1, SIGUSR2};
    for (int how = 0; how < 2; how++) {
        struct lib_signal_result r = lib_signal(signals[how], how);
        CHECK(r.kernel_handler != NULL);
        CHECK(r.kernel_handler != r.own_handler);
        CHECK(in_lfheap(r.kernel_handler));
        CHECK(r.reported_own);
        CHECK(r.handled == 1);
        CHECK(r.handler_ok);
    }
}

int main(void)
{
    RUN(own_malloc_free);
    RUN(names_resolve_to_lfheap);
    RUN(aligned_blocks_are_lfheap);
    RUN(handlers_are_wrapped);
    return test_exit_status();
}
