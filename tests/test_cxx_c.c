/*
 * C++'s operators without a C++ runtime: a C program that calls them by their mangled
 * names, linked with lfheap and nothing of C++ (src/api_cxx.c, its weak references to
 * the runtime are null here). The operators still hand out and take back lfheap memory,
 * the nothrow forms return NULL when out of memory, and `test_cxx_c throw` makes a
 * throwing form fail: with nothing to throw std::bad_alloc it must write a message and
 * abort (tests/suites/cxx.sh checks the signal and the message).
 */
#include "lfheap.h"
#include "testutil.h"

#include <stdint.h>
#include <string.h>

void *cxx_new(size_t size) __asm__("_Znwm");
void *cxx_new_nothrow(size_t size, const void *tag) __asm__("_ZnwmRKSt9nothrow_t");
void *cxx_new_aligned_nothrow(size_t size, size_t align,
                              const void *tag) __asm__("_ZnamSt11align_val_tRKSt9nothrow_t");
void cxx_delete(void *ptr) __asm__("_ZdlPv");
void cxx_delete_sized(void *ptr, size_t size) __asm__("_ZdaPvm");
void cxx_delete_aligned_sized(void *ptr, size_t size,
                              size_t align) __asm__("_ZdlPvmSt11align_val_t");

static volatile size_t impossible = SIZE_MAX / 2;
static const char nothrow_tag; /* std::nothrow's address, for all the operators care */

static void operators_work_without_a_runtime(void)
{
    char *a = cxx_new(100);
    char *b = cxx_new_nothrow(5000, &nothrow_tag);
    char *c = cxx_new_aligned_nothrow(300, 256, &nothrow_tag);
    REQUIRE(a && b && c);
    CHECK(lfh_malloc_usable_size(a) >= 100 && lfh_malloc_usable_size(b) >= 5000);
    CHECK(lfh_malloc_usable_size(c) >= 300 && ((uintptr_t)c & 255) == 0);
    memset(a, 1, 100);
    memset(b, 2, 5000);
    memset(c, 3, 300);
    CHECK(a[99] == 1 && b[4999] == 2 && c[299] == 3);
    cxx_delete(a);
    cxx_delete_sized(b, 5000);
    cxx_delete_aligned_sized(c, 300, 256);
}

static void nothrow_forms_return_null(void)
{
    CHECK(cxx_new_nothrow(impossible, &nothrow_tag) == NULL);
    CHECK(cxx_new_aligned_nothrow(impossible, 64, &nothrow_tag) == NULL);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "throw") == 0) {
        void *p = cxx_new(impossible);
        printf("operator new(%zu) returned %p\n", (size_t)impossible, p);
        return 0;
    }
    RUN(operators_work_without_a_runtime);
    RUN(nothrow_forms_return_null);
    return test_exit_status();
}
