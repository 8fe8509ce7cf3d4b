/*
 * A C++ program may replace any of the global operators new and delete with its own
 * ([replacement.functions]); the forms it leaves to the library then call its
 * replacements where the standard defines them by the base forms ([new.delete]):
 * operator new[] calls operator new, and every delete (array, sized, nothrow) ends in
 * operator delete. This program replaces only operator new (size_t) and operator delete
 * (void *), as a leak counter does, and checks that every new and delete expression of
 * its own reaches them, also those the compiler makes sized deletes (-fsized-deallocation)
 * and the array forms, and that the nothrow forms of new call its operator new and
 * return null where it throws, linked with liblfheap.a (whose operators are weak: Makefile, the
 * archive's rule) and with lfheap preloaded (src/api_cxx.c, the forms the standard
 * defines by others); that the forms with no base of the program's (aligned ones) stay
 * lfheap's; and that malloc stays lfheap's.
 *
 * Built linked with liblfheap.a (g++ and clang++), and as a plain program (TEST_PLAIN;
 * g++, and clang++ with libc++ where installed) that tests/suites/cxx.sh runs with lfheap
 * preloaded (release and debug builds).
 */
#include "testutil.h"

#include <cstddef>
#include <cstdlib>
#include <dlfcn.h>
#include <new>

#ifndef TEST_PLAIN
#include "lfheap.h"
#endif

/* Volatile: clang takes a new or delete expression for one that changes no variable of
 * the program's (it may even leave such calls out), and read the counts from before it. */
static volatile long own_news, own_deletes;
/* A size the program's operator new refuses (throws std::bad_alloc for), if not 0. */
static volatile std::size_t refused_size;

void *operator new(std::size_t size)
{
    own_news = own_news + 1;
    if (refused_size != 0 && size == refused_size)
        throw std::bad_alloc();
    void *block = std::malloc(size ? size : 1);
    if (!block)
        throw std::bad_alloc();
    return block;
}

/* Deliberately without the sized form, which gcc suggests defining too. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsized-deallocation"
#endif
void operator delete(void *ptr) noexcept
{
    own_deletes = own_deletes + (ptr != nullptr);
    std::free(ptr);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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

struct with_destructor {
    long value;
    ~with_destructor() { value = 0; }
};

static void own_operators_serve_new_and_delete(void)
{
    long news = own_news, deletes = own_deletes;
    int *one = new int(7);
    REQUIRE(one != nullptr);
    CHECK(own_news == news + 1 && *one == 7);
    /* The program's new took the block from malloc, which is lfheap's. */
    CHECK(lfheap_size_of(one) >= sizeof(int));
    delete one; /* a sized delete: the library's, which calls the program's */
    CHECK(own_deletes == deletes + 1);
}

static void array_forms_call_the_programs_operators(void)
{
    long news = own_news, deletes = own_deletes;
    char *array = new char[1000];
    REQUIRE(array != nullptr);
    for (int i = 0; i < 1000; i++)
        array[i] = (char)i;
    CHECK(own_news == news + 1 && lfheap_size_of(array) >= 1000 && array[999] == (char)999);
    delete[] array;
    CHECK(own_deletes == deletes + 1);
    /* With a destructor: a cookie before the elements, and a sized delete[]. */
    with_destructor *objects = new with_destructor[10];
    REQUIRE(objects != nullptr);
    objects[9].value = 9;
    CHECK(own_news == news + 2);
    delete[] objects;
    CHECK(own_deletes == deletes + 2);
}

static void nothrow_forms_call_the_programs_new(void)
{
    long news = own_news, deletes = own_deletes;
    int *one = new (std::nothrow) int(5);
    REQUIRE(one != nullptr);
    CHECK(own_news == news + 1 && *one == 5 && lfheap_size_of(one) >= sizeof(int));
    delete one;
    CHECK(own_deletes == deletes + 1);
    char *array = new (std::nothrow) char[300];
    REQUIRE(array != nullptr);
    array[299] = 1;
    CHECK(own_news == news + 2 && lfheap_size_of(array) >= 300 && array[299] == 1);
    delete[] array;
    CHECK(own_deletes == deletes + 2);
    /* Where the program's operator new throws std::bad_alloc, they return null. */
    refused_size = 12345;
    CHECK(::operator new(12345, std::nothrow) == nullptr);
    CHECK(::operator new[](12345, std::nothrow) == nullptr);
    CHECK(own_news == news + 4);
    /* ...and an exception of its that is not caught there goes on to the caller's catch. */
    bool caught = false;
    try {
        (void)::operator new[](12345);
    } catch (const std::bad_alloc &) {
        caught = true;
    }
    CHECK(caught && own_news == news + 5);
    refused_size = 0;
    void *block = ::operator new(12345, std::nothrow);
    CHECK(block != nullptr && own_news == news + 6);
    ::operator delete(block);
    CHECK(own_deletes == deletes + 3);
    /* The aligned nothrow forms call the aligned operator new, which stays lfheap's. */
    void *aligned = ::operator new(100, std::align_val_t(64), std::nothrow);
    REQUIRE(aligned != nullptr);
    CHECK(((std::size_t)aligned & 63) == 0 && lfheap_size_of(aligned) >= 100 &&
          own_news == news + 6);
    ::operator delete(aligned, std::align_val_t(64));
}

static void forms_without_a_base_of_its_own_stay_lfheaps(void)
{
    long news = own_news, deletes = own_deletes;
    void *aligned = ::operator new(256, std::align_val_t(128));
    REQUIRE(aligned != nullptr);
    CHECK(((std::size_t)aligned & 127) == 0 && lfheap_size_of(aligned) >= 256);
    ::operator delete(aligned, std::align_val_t(128));
    CHECK(own_news == news && own_deletes == deletes);
}

int main(void)
{
    RUN(own_operators_serve_new_and_delete);
    RUN(array_forms_call_the_programs_operators);
    RUN(nothrow_forms_call_the_programs_new);
    RUN(forms_without_a_base_of_its_own_stay_lfheaps);
    return test_exit_status();
}
