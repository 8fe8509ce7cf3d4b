/*
 * llheap's own names (aalloc, resize, posix_realloc, malloc_remote, heap_stats, ...)
 * called the way a program written for llheap calls them, by those names: linked with
 * the shared library, with the static one, and (OWN_RESIZE) with a function of its own
 * called resize, which must link with the static library and win over lfheap's (the
 * library exports llheap's names as weak symbols), while the other names still reach
 * lfheap. Each call is checked against what lfheap's lfh_ routines report.
 */
#define LFHEAP_LLHEAP_NAMES
#include "lfheap.h"
#include "testutil.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#ifdef OWN_RESIZE
static int own_resize_calls;

void *resize(void *ptr, size_t size)
{
    (void)size;
    own_resize_calls++;
    return ptr;
}
#endif

static int aligned_to(const void *p, size_t align)
{
    return ((uintptr_t)p & (align - 1)) == 0;
}

static int zeros(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void allocation_names_reach_lfheap(void)
{
    void *a = aalloc(3, 5);
    REQUIRE(a);
    CHECK(malloc_size(a) == 15 && lfh_malloc_size(a) == 15 && malloc_alignment(a) == 16);
    CHECK(!malloc_zero_fill(a));
    void *am = amemalign(256, 2, 8);
    REQUIRE(am);
    CHECK(aligned_to(am, 256) && lfh_malloc_alignment(am) == 256 && lfh_malloc_size(am) == 16);
    unsigned char *cm = cmemalign(64, 4, 4);
    REQUIRE(cm);
    CHECK(aligned_to(cm, 64) && lfh_malloc_zero_fill(cm) && zeros(cm, 16));
#ifdef OWN_RESIZE
    CHECK(resize(a, 1000) == a && own_resize_calls == 1);
    a = lfh_resize(a, 1000);
#else
    a = resize(a, 1000);
#endif
    REQUIRE(a);
    CHECK(lfh_malloc_usable_size(a) >= 1000);
    a = resizearray(a, 10, 300);
    REQUIRE(a);
    CHECK(lfh_malloc_usable_size(a) >= 3000);
    a = aligned_resize(a, 128, 50);
    REQUIRE(a);
    CHECK(aligned_to(a, 128) && lfh_malloc_alignment(a) == 128);
    a = aligned_resizearray(a, 512, 5, 10);
    REQUIRE(a);
    CHECK(aligned_to(a, 512) && lfh_malloc_alignment(a) == 512 && lfh_malloc_size(a) == 50);
    cm = aligned_realloc(cm, 128, 100);
    REQUIRE(cm);
    CHECK(aligned_to(cm, 128) && lfh_malloc_zero_fill(cm) && zeros(cm, 100));
    cm = aligned_reallocarray(cm, 256, 10, 20);
    REQUIRE(cm);
    CHECK(aligned_to(cm, 256) && lfh_malloc_size(cm) == 200 && zeros(cm, 200));
    void *p = NULL;
    CHECK(posix_realloc(&p, 10) == 0 && p != NULL);
    void *was = p;
    CHECK(posix_reallocarray(&p, SIZE_MAX, 2) == ENOMEM && p == was);
    CHECK(posix_aligned_realloc(&p, 64, 100) == 0 && lfh_malloc_alignment(p) == 64);
    CHECK(posix_aligned_reallocarray(&p, 128, 2, 100) == 0 && lfh_malloc_alignment(p) == 128);
    CHECK(lfh_malloc_size(p) == 200 && !malloc_remote(p) && !lfh_malloc_remote(p));
    free(a);
    free(am);
    free(cm);
    free(p);
}

static void control_and_statistics_names_reach_lfheap(void)
{
    CHECK(malloc_mmap_start() == lfh_malloc_mmap_start() && malloc_mmap_start() > 0);
    CHECK(malloc_extend() == lfh_malloc_extend());
    /* llheap's hook, which this program does not define: the library's default. */
    CHECK(malloc_unfreed() == 0 && lfh_malloc_unfreed() == 0);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    int previous = malloc_stats_fd(fds[1]);
    heap_stats();
    malloc_stats_clear();
    CHECK(malloc_stats_fd(previous) == fds[1]);
    close(fds[1]);
    char text[4096];
    ssize_t n = read(fds[0], text, sizeof text - 1);
    close(fds[0]);
    REQUIRE(n > 0);
    text[n] = '\0';
    CHECK(strstr(text, "lfheap statistics") && strstr(text, "this thread's heap"));
}

int main(void)
{
    RUN(allocation_names_reach_lfheap);
    RUN(control_and_statistics_names_reach_lfheap);
    return test_exit_status();
}
