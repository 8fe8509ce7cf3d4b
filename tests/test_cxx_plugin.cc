/*
 * A C++ plugin for tests/test_cxx_c.c, a C program that loads it with dlopen after
 * start-up (as a C program loads C++ modules: Python's extension modules, say). The
 * plugin's operators are lfheap's, since lfheap is in the program's global scope; but
 * lfheap's weak references to the C++ runtime were bound before the runtime arrived,
 * so out of memory cannot throw std::bad_alloc (docs/API.md, "C++").
 */
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <new>
#include <string>
#include <vector>

struct alignas(128) wide {
    unsigned char bytes[300];
};

static const void *object_of(const void *addr)
{
    Dl_info info;
    return dladdr(addr, &info) ? info.dli_fbase : nullptr;
}

/* Number of operators the plugin does not get from lfheap (the object that defines
 * lfheap_routine), and of allocations that are not lfheap's (usable_size is lfheap's). */
extern "C" int plugin_foreign_allocations(size_t (*usable_size)(void *), const void *lfheap_routine)
{
    const void *lfheap = object_of(lfheap_routine);
    int foreign = lfheap == nullptr;
    foreign += object_of(reinterpret_cast<const void *>(
                   static_cast<void *(*)(size_t)>(&::operator new))) != lfheap;
    foreign += object_of(reinterpret_cast<const void *>(
                   static_cast<void (*)(void *, size_t) noexcept>(&::operator delete))) != lfheap;
    foreign += object_of(reinterpret_cast<const void *>(
                   static_cast<void *(*)(size_t, std::align_val_t)>(&::operator new[]))) != lfheap;
    std::vector<std::string> strings;
    for (int i = 0; i < 100; i++)
        strings.push_back(std::string(static_cast<size_t>(40 + i), 'p'));
    for (const std::string &s : strings)
        foreign += usable_size(const_cast<char *>(s.data())) < s.size();
    std::map<int, int> *map = new std::map<int, int>{{1, 2}, {3, 4}};
    foreign += usable_size(map) < sizeof *map;
    delete map;
    wide *w = new wide;
    foreign += usable_size(w) < sizeof *w || reinterpret_cast<uintptr_t>(w) % 128 != 0;
    delete w;
    void *raw = ::operator new(1000, std::nothrow);
    foreign += usable_size(raw) < 1000;
    ::operator delete(raw, std::nothrow);
    return foreign;
}

/* Asks for memory no allocator has; says whether std::bad_alloc arrived. */
extern "C" void plugin_runs_out_of_memory(void)
{
    static volatile size_t impossible = SIZE_MAX / 2;
    try {
        void *p = ::operator new(impossible);
        std::printf("operator new returned %p\n", p);
    } catch (const std::bad_alloc &) {
        std::printf("caught std::bad_alloc\n");
    }
}
