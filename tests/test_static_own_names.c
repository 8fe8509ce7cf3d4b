/*
 * A program linked with build/liblfheap.a that defines, for its own purposes, names that
 * lfheap's sources use inside the library (buddy_alloc, out_str, pagemap, heap_fill,
 * os_map). The archive's object keeps those names local, as the shared library does, so
 * the program links and each name means the program's own thing, while malloc and free
 * are still lfheap's. Before, the link failed with "multiple definition of `buddy_alloc'".
 * (tests/suites/core.sh also checks that the archive defines no hidden global name.)
 */
#include "lfheap.h"
#include "testutil.h"

#include <malloc.h>
#include <string.h>

int buddy_alloc = 3;
long pagemap[4] = {1, 2, 3, 4};

int out_str(const char *s)
{
    return (int)strlen(s);
}

int heap_fill(int x)
{
    return x * 2;
}

void *os_map(void)
{
    return pagemap;
}

static void own_names_are_the_programs(void)
{
    CHECK(buddy_alloc == 3);
    CHECK(pagemap[3] == 4);
    CHECK(out_str("four") == 4);
    CHECK(heap_fill(21) == 42);
    CHECK(os_map() == (void *)pagemap);
    char *p = malloc(100);
    REQUIRE(p);
    memset(p, 7, 100);
    /* lfheap's block: its usable size is lfheap's class size, at least the request */
    CHECK(malloc_usable_size(p) >= 100);
    CHECK(lfh_malloc_usable_size(p) == malloc_usable_size(p));
    free(p);
}

int main(void)
{
    RUN(own_names_are_the_programs);
    return test_exit_status();
}
