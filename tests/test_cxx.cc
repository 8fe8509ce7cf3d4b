/*
 * C++ operator new and delete (src/api_cxx.c): every replaceable form hands out lfheap
 * memory with the alignment asked for, delete gives it back to lfheap, arrays of objects
 * are constructed and destroyed, the new-handler loop and std::bad_alloc follow the
 * standard, the nothrow forms return null, and the standard containers live on lfheap.
 *
 * Built with g++ and clang++ (libstdc++, and libc++ where installed), linked with
 * -llfheap, with liblfheap.a, and as a plain program (TEST_PLAIN) that
 * tests/suites/cxx.sh runs with lfheap preloaded. `test_cxx maps` prints the process's
 * /proc/self/maps instead (the suite's check that the C++ runtime shows up there).
 */
#include "testutil.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#ifndef TEST_PLAIN
#include "lfheap.h"
#endif

/* ---- helpers ------------------------------------------------------------------------ */

#ifdef TEST_PLAIN
/* The plain program finds lfheap's own names in the preloaded library. */
static void *lfheap_symbol(const char *name)
{
    void *sym = dlsym(RTLD_DEFAULT, name);
    REQUIRE(sym != nullptr); /* lfheap is not preloaded */
    return sym;
}
#endif

/* lfheap's usable size of p: 0 for memory lfheap did not hand out. */
static size_t lfheap_usable_size(void *p)
{
#ifdef TEST_PLAIN
    static size_t (*usable)(void *) =
        reinterpret_cast<size_t (*)(void *)>(lfheap_symbol("lfh_malloc_usable_size"));
    return usable(p);
#else
    return lfh_malloc_usable_size(p);
#endif
}

/* lfheap's malloc_trim(0): gives back what lfheap keeps freed (a huge block among it). */
static void lfheap_trim(void)
{
#ifdef TEST_PLAIN
    static int (*trim)(size_t) =
        reinterpret_cast<int (*)(size_t)>(lfheap_symbol("lfh_malloc_trim"));
    trim(0);
#else
    lfh_malloc_trim(0);
#endif
}

static bool aligned(const void *p, size_t align)
{
    return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0;
}

/* Keeps the compiler from eliding or merging allocations (C++14 lets it). */
static void escape(void *p)
{
    __asm__ volatile("" : : "g"(p) : "memory");
}

static unsigned char tag_of(size_t seed, size_t i)
{
    return static_cast<unsigned char>((seed * 131 + i * 7 + 1) & 0xff);
}

static void fill(void *p, size_t size, size_t seed)
{
    unsigned char *bytes = static_cast<unsigned char *>(p);
    for (size_t i = 0; i < size; i++)
        bytes[i] = tag_of(seed, i);
}

static bool intact(const void *p, size_t size, size_t seed)
{
    const unsigned char *bytes = static_cast<const unsigned char *>(p);
    for (size_t i = 0; i < size; i++)
        if (bytes[i] != tag_of(seed, i))
            return false;
    return true;
}

/* Requests no allocator can meet; volatile, so that they reach the operators. */
static volatile size_t impossible = SIZE_MAX / 2;
static volatile size_t zero = 0;

/* ---- the operators are lfheap's ------------------------------------------------------- */

/* The object (shared library, or the program itself when linked with liblfheap.a) that
 * defines the code at addr. */
static const void *object_of(const void *addr)
{
    Dl_info info;
    REQUIRE(dladdr(addr, &info) != 0);
    return info.dli_fbase;
}

static void every_operator_is_lfheaps(void)
{
#ifdef TEST_PLAIN
    const void *lfheap = object_of(lfheap_symbol("lfh_malloc"));
#else
    const void *lfheap = object_of(reinterpret_cast<const void *>(&lfh_malloc));
#endif
    using std::align_val_t;
    using std::nothrow_t;
    const void *operators[] = {
        reinterpret_cast<const void *>(static_cast<void *(*)(size_t)>(&::operator new)),
        reinterpret_cast<const void *>(static_cast<void *(*)(size_t)>(&::operator new[])),
        reinterpret_cast<const void *>(
            static_cast<void *(*)(size_t, const nothrow_t &) noexcept>(&::operator new)),
        reinterpret_cast<const void *>(
            static_cast<void *(*)(size_t, const nothrow_t &) noexcept>(&::operator new[])),
        reinterpret_cast<const void *>(
            static_cast<void *(*)(size_t, align_val_t)>(&::operator new)),
        reinterpret_cast<const void *>(
            static_cast<void *(*)(size_t, align_val_t)>(&::operator new[])),
        reinterpret_cast<const void *>(
            static_cast<void *(*)(size_t, align_val_t, const nothrow_t &) noexcept>(
                &::operator new)),
        reinterpret_cast<const void *>(
            static_cast<void *(*)(size_t, align_val_t, const nothrow_t &) noexcept>(
                &::operator new[])),
        reinterpret_cast<const void *>(static_cast<void (*)(void *) noexcept>(&::operator delete)),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *) noexcept>(&::operator delete[])),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, size_t) noexcept>(&::operator delete)),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, size_t) noexcept>(&::operator delete[])),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, align_val_t) noexcept>(&::operator delete)),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, align_val_t) noexcept>(&::operator delete[])),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, size_t, align_val_t) noexcept>(&::operator delete)),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, size_t, align_val_t) noexcept>(&::operator delete[])),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, const nothrow_t &) noexcept>(&::operator delete)),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, const nothrow_t &) noexcept>(&::operator delete[])),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, align_val_t, const nothrow_t &) noexcept>(
                &::operator delete)),
        reinterpret_cast<const void *>(
            static_cast<void (*)(void *, align_val_t, const nothrow_t &) noexcept>(
                &::operator delete[])),
    };
    for (const void *op : operators)
        CHECK(object_of(op) == lfheap);
}

/* ---- every form hands out lfheap memory ------------------------------------------- */

static const size_t sizes[] = {0,    1,    8,     16,    24,     100,    1000,
                               1025, 5000, 32768, 40000, 100000, 1 << 20};
static const size_t alignments[] = {1, 8, 16, 32, 64, 256, 4096, 8192, 65536, 1 << 21};

enum new_form { PLAIN, ARRAY, NOTHROW, ARRAY_NOTHROW, FORM_COUNT };

static void *allocate(new_form form, size_t size)
{
    switch (form) {
    case PLAIN:
        return ::operator new(size);
    case ARRAY:
        return ::operator new[](size);
    case NOTHROW:
        return ::operator new(size, std::nothrow);
    case ARRAY_NOTHROW:
        return ::operator new[](size, std::nothrow);
    default:
        return nullptr;
    }
}

static void *allocate_aligned(new_form form, size_t size, std::align_val_t align)
{
    switch (form) {
    case PLAIN:
        return ::operator new(size, align);
    case ARRAY:
        return ::operator new[](size, align);
    case NOTHROW:
        return ::operator new(size, align, std::nothrow);
    case ARRAY_NOTHROW:
        return ::operator new[](size, align, std::nothrow);
    default:
        return nullptr;
    }
}

/* Each delete form in turn, for the kind of block (array or not) it was made as. (Not
 * with `array ? ::operator delete[](p) : ::operator delete(p)`: clang 14 calls both.) */
static void release(void *p, size_t size, bool array, unsigned which)
{
    switch (which % 3) {
    case 0:
        if (array)
            ::operator delete[](p);
        else
            ::operator delete(p);
        break;
    case 1:
        if (array)
            ::operator delete[](p, size);
        else
            ::operator delete(p, size);
        break;
    default:
        if (array)
            ::operator delete[](p, std::nothrow);
        else
            ::operator delete(p, std::nothrow);
        break;
    }
}

static void release_aligned(void *p, size_t size, std::align_val_t align, bool array,
                            unsigned which)
{
    switch (which % 3) {
    case 0:
        if (array)
            ::operator delete[](p, align);
        else
            ::operator delete(p, align);
        break;
    case 1:
        if (array)
            ::operator delete[](p, size, align);
        else
            ::operator delete(p, size, align);
        break;
    default:
        if (array)
            ::operator delete[](p, align, std::nothrow);
        else
            ::operator delete(p, align, std::nothrow);
        break;
    }
}

struct block {
    void *p;
    size_t size;
};

static void every_form_hands_out_lfheap_memory(void)
{
    std::vector<block> live;
    unsigned which = 0;
    for (int f = 0; f < FORM_COUNT; f++) {
        for (size_t size : sizes) {
            void *p = allocate(static_cast<new_form>(f), size);
            REQUIRE(p != nullptr);
            CHECK(lfheap_usable_size(p) >= (size ? size : 1));
            CHECK(aligned(p, __STDCPP_DEFAULT_NEW_ALIGNMENT__));
            fill(p, size, live.size());
            live.push_back({p, size});
        }
    }
    for (size_t i = 0; i < live.size(); i++)
        CHECK(intact(live[i].p, live[i].size, i));
    for (size_t i = 0; i < live.size(); i++) {
        int form = static_cast<int>(i / (sizeof sizes / sizeof sizes[0]));
        release(live[i].p, live[i].size, form == ARRAY || form == ARRAY_NOTHROW, which++);
    }
}

static void every_aligned_form_hands_out_aligned_lfheap_memory(void)
{
    struct aligned_block {
        void *p;
        size_t size;
        size_t align;
        bool array;
    };
    std::vector<aligned_block> live;
    for (int f = 0; f < FORM_COUNT; f++) {
        for (size_t align : alignments) {
            for (size_t size : sizes) {
                void *p = allocate_aligned(static_cast<new_form>(f), size, std::align_val_t(align));
                REQUIRE(p != nullptr);
                CHECK(lfheap_usable_size(p) >= (size ? size : 1));
                CHECK(aligned(p, align));
                fill(p, size < 4096 ? size : 4096, live.size());
                live.push_back({p, size, align, f == ARRAY || f == ARRAY_NOTHROW});
            }
        }
    }
    unsigned which = 0;
    for (size_t i = 0; i < live.size(); i++) {
        const aligned_block &b = live[i];
        CHECK(intact(b.p, b.size < 4096 ? b.size : 4096, i));
        release_aligned(b.p, b.size, std::align_val_t(b.align), b.array, which++);
    }
    /* Beyond an arena (64 MiB). */
    for (int f = 0; f < FORM_COUNT; f++) {
        auto align = std::align_val_t(size_t(1) << 27);
        void *p = allocate_aligned(static_cast<new_form>(f), 100, align);
        REQUIRE(p != nullptr);
        CHECK(aligned(p, size_t(1) << 27) && lfheap_usable_size(p) >= 100);
        release_aligned(p, 100, align, f == ARRAY || f == ARRAY_NOTHROW, which++);
    }
}

/* lfheap's thread caches are LIFO: a block that delete gave back to lfheap is the next
 * one of its size class. So each delete form is seen to reach lfheap's free. */
static void every_delete_gives_the_block_back(void)
{
    for (unsigned which = 0; which < 3; which++) {
        for (size_t size : {16, 100, 3000}) {
            void *p = ::operator new(size);
            release(p, size, false, which);
            void *q = ::operator new[](size);
            CHECK(q == p);
            release(q, size, true, which);
            void *r = ::operator new(size);
            CHECK(r == q);
            ::operator delete(r);
        }
        for (size_t align : {32, 64, 1024}) {
            auto al = std::align_val_t(align);
            void *p = ::operator new(align, al);
            release_aligned(p, align, al, false, which);
            void *q = ::operator new[](align, al);
            CHECK(q == p);
            release_aligned(q, align, al, true, which);
            void *r = ::operator new(align, al);
            CHECK(r == q);
            ::operator delete(r, al);
        }
    }
}

/* A sized delete with a size that is not the block's still frees that block. */
static void sized_delete_takes_any_size(void)
{
    static const size_t wrong[] = {0, 1, 17, 4096, 1 << 20, SIZE_MAX};
    for (size_t size : {16, 100, 3000}) {
        for (size_t w : wrong) {
            void *p = ::operator new(size);
            ::operator delete(p, w);
            void *q = ::operator new[](size);
            CHECK(q == p);
            ::operator delete[](q, w);
            void *r = ::operator new(size);
            CHECK(r == q);
            ::operator delete(r);

            auto align = std::align_val_t(64);
            p = ::operator new(size, align);
            ::operator delete(p, w, align);
            q = ::operator new[](size, align);
            CHECK(q == p);
            ::operator delete[](q, w, align);
            r = ::operator new(size, align);
            CHECK(r == q);
            ::operator delete(r, align);
        }
    }
}

static void new_of_zero_bytes_is_unique(void)
{
    void *a = ::operator new(zero), *b = ::operator new(zero);
    void *c = ::operator new[](zero), *d = ::operator new(zero, std::nothrow);
    void *e = ::operator new(zero, std::align_val_t(64));
    void *f = ::operator new(zero, std::align_val_t(64));
    void *all[] = {a, b, c, d, e, f};
    for (size_t i = 0; i < 6; i++) {
        CHECK(all[i] != nullptr && lfheap_usable_size(all[i]) >= 1);
        for (size_t j = 0; j < i; j++)
            CHECK(all[i] != all[j]);
    }
    CHECK(aligned(e, 64) && aligned(f, 64));
    ::operator delete(a);
    ::operator delete(b, zero);
    ::operator delete[](c);
    ::operator delete(d, std::nothrow);
    ::operator delete(e, std::align_val_t(64));
    ::operator delete(f, zero, std::align_val_t(64));
}

/* ---- objects ------------------------------------------------------------------------ */

static long live_objects;

struct counted {
    uint64_t canary;
    uint64_t value;
    counted() : canary(0x5eed5eed5eed5eedull), value(static_cast<uint64_t>(live_objects))
    {
        live_objects++;
    }
    ~counted()
    {
        CHECK(canary == 0x5eed5eed5eed5eedull);
        canary = 0;
        live_objects--;
    }
};

/* Over-aligned: new and delete of these use the aligned forms. */
struct alignas(64) line {
    counted c;
    char pad[40];
};
struct alignas(4096) page {
    counted c;
};

struct base {
    virtual ~base() = default;
    uint64_t x = 1;
};
/* Deleted through base *: the deleting destructor passes the derived size. */
struct derived : base {
    char payload[200] = {};
    counted c;
};

template <typename T> static void array_round_trip(size_t n)
{
    static_assert(!std::is_trivially_destructible<T>::value, "has an array cookie");
    long before = live_objects;
    T *objects = new T[n];
    escape(objects);
    CHECK(live_objects == before + static_cast<long>(n));
    /* The objects follow the array cookie (Itanium C++ ABI: the element count, padded
     * to the type's alignment), which starts the block lfheap handed out. */
    size_t cookie = sizeof(size_t) > alignof(T) ? sizeof(size_t) : alignof(T);
    char *block = reinterpret_cast<char *>(objects) - cookie;
    CHECK(lfheap_usable_size(block) >= cookie + n * sizeof(T));
    CHECK(aligned(objects, alignof(T)));
    for (size_t i = 0; i < n; i++)
        CHECK(objects[i].c.canary == 0x5eed5eed5eed5eedull);
    delete[] objects;
    CHECK(live_objects == before);
}

struct plain_counted {
    counted c;
};

static void arrays_of_objects_are_built_and_destroyed(void)
{
    for (size_t n : {1, 7, 1000, 100000}) {
        array_round_trip<plain_counted>(n);
        array_round_trip<line>(n);
    }
    array_round_trip<page>(3);
    array_round_trip<page>(40);

    line *one = new line;
    escape(one);
    CHECK(aligned(one, 64) && lfheap_usable_size(one) >= sizeof(line));
    delete one;
    page *big = new page;
    escape(big);
    CHECK(aligned(big, 4096) && lfheap_usable_size(big) >= sizeof(page));
    delete big;

    std::vector<base *> many;
    for (int i = 0; i < 1000; i++) {
        many.push_back(i % 2 ? new derived : new base);
        CHECK(lfheap_usable_size(many.back()) >= (i % 2 ? sizeof(derived) : sizeof(base)));
    }
    for (base *b : many)
        delete b;
    CHECK(live_objects == 0);
}

/* The standard containers, with blocks that move between threads: a producer builds
 * them, a consumer checks and destroys them. (Strings of 32 bytes or more: shorter ones
 * may live inside the string object.) */
static void containers_live_on_lfheap(void)
{
    const int rounds = 200;
    std::vector<std::unique_ptr<std::map<int, std::string>>> made(rounds);
    std::thread producer([&made] {
        for (int r = 0; r < rounds; r++) {
            auto m = std::make_unique<std::map<int, std::string>>();
            for (int i = 0; i < 50; i++)
                (*m)[i] = std::string(static_cast<size_t>(32 + i * r % 300),
                                      static_cast<char>('a' + (i + r) % 26));
            made[static_cast<size_t>(r)] = std::move(m);
        }
    });
    producer.join();
    std::thread consumer([&made] {
        for (int r = 0; r < rounds; r++) {
            auto &m = made[static_cast<size_t>(r)];
            CHECK(lfheap_usable_size(m.get()) >= sizeof *m);
            for (int i = 0; i < 50; i++) {
                const std::string &s = m->at(i);
                CHECK(s.size() == static_cast<size_t>(32 + i * r % 300));
                CHECK(s.find_first_not_of(static_cast<char>('a' + (i + r) % 26)) ==
                      std::string::npos);
                CHECK(lfheap_usable_size(const_cast<char *>(s.data())) >= s.size());
            }
            m.reset();
        }
    });
    consumer.join();

    std::vector<int> v(100000, 7);
    CHECK(lfheap_usable_size(v.data()) >= v.size() * sizeof(int));
    auto shared = std::make_shared<std::string>(1000, 'x');
    CHECK(lfheap_usable_size(shared->data()) >= 1000);
}

/* ---- out of memory ------------------------------------------------------------------ */

static int handler_calls;

/* Counts its calls and uninstalls itself on the third. */
static void counting_handler()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

static void throwing_handler()
{
    handler_calls++;
    throw std::bad_alloc();
}

/* A type of its own, to see that the handler's very exception reaches the caller. */
struct own_bad_alloc : std::bad_alloc {
    int tag = 42;
};
static void own_throwing_handler()
{
    handler_calls++;
    throw own_bad_alloc();
}

static void derived_throwing_handler()
{
    handler_calls++;
    throw std::bad_array_new_length();
}

/* Outcome of one call of a throwing form: 0 returned, 1 std::bad_alloc, 2 own_bad_alloc. */
static int outcome(void *(*call)())
{
    try {
        void *p = call();
        ::operator delete(p);
        return 0;
    } catch (const own_bad_alloc &e) {
        return e.tag == 42 ? 2 : -1;
    } catch (const std::bad_alloc &) {
        return 1;
    }
}

static void *(*const throwing_forms[])() = {
    [] { return ::operator new(impossible); },
    [] { return ::operator new[](impossible); },
    [] { return ::operator new(impossible, std::align_val_t(64)); },
    [] { return ::operator new[](impossible, std::align_val_t(8192)); },
};
static void *(*const nothrow_forms[])() = {
    [] { return ::operator new(impossible, std::nothrow); },
    [] { return ::operator new[](impossible, std::nothrow); },
    [] { return ::operator new(impossible, std::align_val_t(64), std::nothrow); },
    [] { return ::operator new[](impossible, std::align_val_t(8192), std::nothrow); },
};

static void new_handler_is_called_until_it_uninstalls_itself(void)
{
    for (auto call : throwing_forms) {
        handler_calls = 0;
        std::set_new_handler(counting_handler);
        CHECK(outcome(call) == 1);
        CHECK(handler_calls == 3);
        CHECK(std::get_new_handler() == nullptr);
    }
}

static void without_a_handler_bad_alloc_is_thrown(void)
{
    std::set_new_handler(nullptr);
    for (auto call : throwing_forms)
        CHECK(outcome(call) == 1);
    /* From a new-expression too. */
    bool caught = false;
    try {
        char *p = new char[impossible];
        escape(p);
        delete[] p;
    } catch (const std::bad_alloc &) {
        caught = true;
    }
    CHECK(caught);
}

static void a_handlers_exception_reaches_the_caller(void)
{
    for (auto call : throwing_forms) {
        handler_calls = 0;
        std::set_new_handler(own_throwing_handler);
        CHECK(outcome(call) == 2);
        CHECK(handler_calls == 1);
    }
    std::set_new_handler(nullptr);
}

static void nothrow_forms_return_null(void)
{
    std::set_new_handler(nullptr);
    for (auto call : nothrow_forms)
        CHECK(call() == nullptr);
    for (auto call : nothrow_forms) {
        handler_calls = 0;
        std::set_new_handler(counting_handler);
        CHECK(call() == nullptr);
        CHECK(handler_calls == 3);
    }
    /* As if they called the throwing form and caught its exception. */
    for (void (*handler)() : {throwing_handler, derived_throwing_handler}) {
        for (auto call : nothrow_forms) {
            handler_calls = 0;
            std::set_new_handler(handler);
            CHECK(call() == nullptr);
            CHECK(handler_calls == 1);
        }
    }
    std::set_new_handler(nullptr);
    char *p = new (std::nothrow) char[impossible];
    escape(p); /* else clang may omit the allocation, and so its failure */
    CHECK(p == nullptr);
}

/* An alignment that is no power of two fails at once (libstdc++ does the same). */
static volatile size_t not_a_power_of_two = 48;

static void a_bad_alignment_fails_without_the_handler(void)
{
    handler_calls = 0;
    std::set_new_handler(throwing_handler);
    CHECK(outcome([] { return ::operator new(64, std::align_val_t(not_a_power_of_two)); }) == 1);
    CHECK(::operator new(64, std::align_val_t(not_a_power_of_two), std::nothrow) == nullptr);
    CHECK(handler_calls == 0);
    std::set_new_handler(nullptr);
}

/* A handler that makes room: the allocation is tried again and succeeds. The room is
 * address space: RLIMIT_AS is lowered until the handler raises it again. */
static struct rlimit saved_limit;
static void *room_block;

static void room_making_handler()
{
    handler_calls++;
    setrlimit(RLIMIT_AS, &saved_limit);
}

static void a_handler_that_makes_room_gets_the_block(void)
{
    static volatile size_t big = (size_t)512 << 20;
    REQUIRE(getrlimit(RLIMIT_AS, &saved_limit) == 0);
    long pages = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    REQUIRE(statm && fscanf(statm, "%ld", &pages) == 1);
    fclose(statm);
    struct rlimit low = saved_limit;
    low.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) +
                   ((rlim_t)64 << 20);
    if (saved_limit.rlim_cur != RLIM_INFINITY && saved_limit.rlim_cur < low.rlim_cur + big) {
        printf("note: RLIMIT_AS already low, a_handler_that_makes_room_gets_the_block not run\n");
        return;
    }
    for (int nothrow = 0; nothrow < 2; nothrow++) {
        handler_calls = 0;
        std::set_new_handler(room_making_handler);
        REQUIRE(setrlimit(RLIMIT_AS, &low) == 0);
        void *probe = mmap(nullptr, big, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (probe != MAP_FAILED) { /* the limit does not bite (qemu-user, say) */
            munmap(probe, big);
            setrlimit(RLIMIT_AS, &saved_limit);
            std::set_new_handler(nullptr);
            printf("note: RLIMIT_AS not enforced, a_handler_that_makes_room_gets_the_block "
                   "not run\n");
            return;
        }
        room_block = nothrow ? ::operator new(big, std::nothrow) : ::operator new(big);
        setrlimit(RLIMIT_AS, &saved_limit);
        std::set_new_handler(nullptr);
        CHECK(room_block != nullptr && handler_calls == 1);
        CHECK(lfheap_usable_size(room_block) >= big);
        ::operator delete(room_block, big);
        /* The freed block is kept for the next huge one (src/mapcache.h), which would
         * then need no room: the next round starts with nothing kept. */
        lfheap_trim();
    }
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "maps") == 0) {
        FILE *maps = fopen("/proc/self/maps", "r");
        REQUIRE(maps != nullptr);
        for (int c; (c = fgetc(maps)) != EOF;)
            putchar(c);
        return 0;
    }
    RUN(every_operator_is_lfheaps);
    RUN(every_form_hands_out_lfheap_memory);
    RUN(every_aligned_form_hands_out_aligned_lfheap_memory);
    RUN(every_delete_gives_the_block_back);
    RUN(sized_delete_takes_any_size);
    RUN(new_of_zero_bytes_is_unique);
    RUN(arrays_of_objects_are_built_and_destroyed);
    RUN(containers_live_on_lfheap);
    RUN(new_handler_is_called_until_it_uninstalls_itself);
    RUN(without_a_handler_bad_alloc_is_thrown);
    RUN(a_handlers_exception_reaches_the_caller);
    RUN(nothrow_forms_return_null);
    RUN(a_bad_alignment_fails_without_the_handler);
    RUN(a_handler_that_makes_room_gets_the_block);
    return test_exit_status();
}
