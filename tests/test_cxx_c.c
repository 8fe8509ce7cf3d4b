/*
 * C++'s operators without a C++ runtime: a C program that calls them by their mangled
 * names, linked with lfheap and nothing of C++ (src/api_cxx.c, its weak references to
 * the runtime are null here). The operators still hand out and take back lfheap memory,
 * the nothrow forms return NULL when out of memory, and `test_cxx_c throw` makes a
 * throwing form fail: with nothing to throw std::bad_alloc it must write a message and
 * abort (tests/suites/cxx.sh checks the signal and the message).
 *
 * `test_cxx_c plugin PATH` loads tests/test_cxx_plugin.cc with dlopen, as C programs load
 * C++ modules, and checks that its objects come from lfheap; `test_cxx_c plugin-oom PATH`
 * lets the plugin run out of memory (the C++ runtime arrived after lfheap's weak
 * references were bound: the same message and abort).
 */
#include "lfheap.h"
#include "testutil.h"

#include <dlfcn.h>
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

static void *plugin_function(const char *path, const char *name)
{
    void *plugin = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!plugin)
        fprintf(stderr, "%s\n", dlerror());
    REQUIRE(plugin != NULL);
    void *fn = dlsym(plugin, name);
    REQUIRE(fn != NULL);
    return fn;
}

static const char *plugin_path;

static void plugin_objects_come_from_lfheap(void)
{
    typedef int check_fn(size_t(*usable_size)(void *), const void *lfheap_routine);
    check_fn *foreign_allocations =
        (check_fn *)plugin_function(plugin_path, "plugin_foreign_allocations");
    CHECK(foreign_allocations(lfh_malloc_usable_size, (const void *)lfh_malloc) == 0);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "plugin") == 0) {
        plugin_path = argv[2];
        RUN(plugin_objects_come_from_lfheap);
        return test_exit_status();
    }
    if (argc == 3 && strcmp(argv[1], "plugin-oom") == 0) {
        void (*runs_out)(void) =
            (void (*)(void))plugin_function(argv[2], "plugin_runs_out_of_memory");
        runs_out();
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "throw") == 0) {
        void *p = cxx_new(impossible);
        printf("operator new(%zu) returned %p\n", (size_t)impossible, p);
        return 0;
    }
    RUN(operators_work_without_a_runtime);
    RUN(nothrow_forms_return_null);
    return test_exit_status();
}
