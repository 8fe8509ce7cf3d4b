/*
 * fastpath_cxx: N x { p = new T; delete p; } for a 16-byte T, or the same with
 * malloc(16) and free, in one thread: what C++'s operators cost on top of the malloc
 * family. Run under callgrind with two values of N by bench/fastpath_cxx.sh (`make
 * fastpath-cxx`), like bench/fastpath.c; --mode=empty runs the loop alone.
 */
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

struct object {
    uint64_t a, b;
};
static_assert(sizeof(object) == 16, "a 16-byte object");

/* The pointer escapes: the compiler may not drop or merge the allocations. */
static inline void escape(void *p)
{
    __asm__ volatile("" : : "g"(p) : "memory");
}

__attribute__((noinline)) static void new_pairs(long n)
{
    for (long i = 0; i < n; i++) {
        object *p = new object;
        escape(p);
        delete p; /* the sized delete, operator delete(void *, size_t) */
    }
}

__attribute__((noinline)) static void malloc_pairs(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = malloc(sizeof(object));
        escape(p);
        free(p);
    }
}

__attribute__((noinline)) static void empty_pairs(long n)
{
    for (long i = 0; i < n; i++) {
        void *p = reinterpret_cast<void *>(i);
        escape(p);
        escape(p);
    }
}

int main(int argc, char **argv)
{
    long n = 1000000;
    const char *mode = "new";
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--n=", 4) == 0)
            n = atol(argv[i] + 4);
        else if (strncmp(argv[i], "--mode=", 7) == 0)
            mode = argv[i] + 7;
        else {
            fprintf(stderr, "usage: fastpath_cxx [--n=N] [--mode=new|malloc|empty]\n");
            return 2;
        }
    }
    if (strcmp(mode, "new") == 0)
        new_pairs(n);
    else if (strcmp(mode, "malloc") == 0)
        malloc_pairs(n);
    else if (strcmp(mode, "empty") == 0)
        empty_pairs(n);
    else {
        fprintf(stderr, "fastpath_cxx: unknown mode %s\n", mode);
        return 2;
    }
    printf("result workload=fastpath_cxx mode=%s n=%ld\n", mode, n);
    return 0;
}
