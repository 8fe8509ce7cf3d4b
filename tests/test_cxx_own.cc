/*
 * A C++ program may replace any of the global operators new and delete with its own
 * ([replacement.functions]): linked with liblfheap.a (whose operators are weak for this:
 * Makefile, the archive's rule) or with lfheap preloaded, the program's own operators
 * serve its new and delete expressions, and the forms it does not define (here the
 * array forms) are lfheap's; malloc stays lfheap's.
 *
 * Built linked with liblfheap.a, and as a plain program (TEST_PLAIN) that
 * tests/suites/cxx.sh runs with lfheap preloaded.
 */
#include "testutil.h"

#include <cstddef>
#include <cstdlib>
#include <dlfcn.h>
#include <new>

#ifndef TEST_PLAIN
#include "lfheap.h"
#endif

static long own_news, own_deletes;

void *operator new(std::size_t size)
{
    own_news++;
    void *block = std::malloc(size ? size : 1);
    if (!block)
        throw std::bad_alloc();
    return block;
}

void operator delete(void *ptr) noexcept
{
    own_deletes += ptr != nullptr;
    std::free(ptr);
}

void operator delete(void *ptr, std::size_t) noexcept
{
    own_deletes += ptr != nullptr;
    std::free(ptr);
}

#ifdef TEST_PLAIN
/* lfheap's malloc_size, which glibc does not have: found in the preloaded library. */
static std::size_t lfheap_size_of(void *ptr)
{
    auto size_of = reinterpret_cast<std::size_t (*)(void *)>(dlsym(RTLD_DEFAULT, "malloc_size"));
    REQUIRE(size_of != nullptr);
    return size_of(ptr);
}
#else
static std::size_t lfheap_size_of(void *ptr)
{
    return malloc_size(ptr);
}
#endif

static void own_operators_serve_new_and_delete(void)
{
    long news = own_news, deletes = own_deletes;
    int *one = new int(7);
    REQUIRE(one != nullptr);
    CHECK(own_news == news + 1 && *one == 7);
    /* The program's new took the block from malloc, which is lfheap's. */
    CHECK(lfheap_size_of(one) >= sizeof(int));
    delete one;
    CHECK(own_deletes == deletes + 1);
}

static void forms_it_does_not_define_stay_lfheaps(void)
{
    long news = own_news, deletes = own_deletes;
    char *array = new char[1000];
    REQUIRE(array != nullptr);
    for (int i = 0; i < 1000; i++)
        array[i] = (char)i;
    CHECK(lfheap_size_of(array) >= 1000 && array[999] == (char)999);
    delete[] array;
    CHECK(own_news == news && own_deletes == deletes);
}

int main(void)
{
    RUN(own_operators_serve_new_and_delete);
    RUN(forms_it_does_not_define_stay_lfheaps);
    return test_exit_status();
}
