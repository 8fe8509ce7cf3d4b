/*
 * The debug build (docs/DEBUGGING.md): every error it detects, made on purpose in
 * a child process (this program run again with the case's name), whose exit status and
 * stderr are checked: by default the child aborts (SIGABRT) after one line naming the
 * error and the address; with LFHEAP_ABORT=0 it goes on and reaches the end of the case.
 * With --secure (liblfheap-secure preloaded), the secure build's reports instead.
 * Also: correct calls report nothing, malloc_usable_size is the request size, and the
 * requested bytes left allocated are reported at exit less what malloc_unfreed()
 * declares.
 *
 * A plain program: linked with liblfheap-debug.a (build/t-debug) or run with a debug
 * library preloaded (build/t-plain, linked with -rdynamic so that the library finds
 * malloc_unfreed). It writes with write(2) in the child cases, so that stdio's own
 * buffers are not among the unfreed bytes.
 */
#include "testutil.h"

#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* C23's, which this libc's headers may not declare yet; lfheap defines them. */
void free_sized(void *ptr, size_t size) __attribute__((weak));
void free_aligned_sized(void *ptr, size_t alignment, size_t size) __attribute__((weak));
/* llheap's queries, which lfheap defines. */
size_t malloc_size(void *ptr) __attribute__((weak));
size_t malloc_alignment(void *ptr) __attribute__((weak));

/* llheap's hook: the bytes this program leaves allocated on purpose (TEST_UNFREED). */
size_t malloc_unfreed(void)
{
    const char *declared = getenv("TEST_UNFREED");
    return declared ? strtoul(declared, NULL, 10) : 0;
}

/* Keeps the compiler from seeing through the deliberate misuse below. */
static void *opaque(void *ptr)
{
    __asm__ volatile("" : "+r"(ptr));
    return ptr;
}

static void say(const char *text)
{
    if (write(STDOUT_FILENO, text, strlen(text)) < 0)
        _exit(3);
}

static char global_buffer[64];

/* ---- the cases (run in the child) -------------------------------------------------- */

static void case_double_free(void)
{
    char *p = malloc(32), *again = opaque(p);
    free(p);
    free(again);
    /* ignored with LFHEAP_ABORT=0: the block is on the free list once, not twice */
    char *a = malloc(32), *b = malloc(32);
    if (a == b)
        say("same block twice\n");
    free(a);
    free(b);
}

static void case_free_stack(void)
{
    int on_stack = 0;
    free(opaque(&on_stack));
}

static void case_free_global(void)
{
    free(opaque(global_buffer));
}

static void case_free_interior(void)
{
    char *p = malloc(100);
    free(opaque(p + 16));
    free(p);
}

static void case_free_foreign(void)
{
    void *other = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    void *alias = opaque(other);
    free(alias);
    munmap(other, 4096);
}

static void case_realloc_stack(void)
{
    int on_stack = 0;
    if (realloc(opaque(&on_stack), 10) != NULL)
        say("realloc of a stack address returned a block\n");
}

static void case_usable_size_interior(void)
{
    char *p = malloc(64);
    if (malloc_usable_size(opaque(p + 8)) != 0)
        say("usable size of an interior pointer\n");
    free(p);
}

static void case_overflow_free(void)
{
    char *p = malloc(24);
    ((volatile char *)p)[24] = 'x'; /* volatile: not a dead store before free */
    free(p);
}

static void case_overflow_realloc(void)
{
    char *p = opaque(malloc(300));
    memset(p, 1, 301);
    p = realloc(p, 600);
    free(p);
}

static void case_overflow_large(void)
{
    char *p = malloc(100000);
    ((volatile char *)p)[100000] = 1;
    free(p);
}

static void case_write_after_free(void)
{
    char *p = malloc(40), *stale = opaque(p);
    free(p);
    ((volatile char *)stale)[16] = 1;
    char *q = malloc(40); /* the same block again (the thread's list is LIFO) */
    if (q != stale)
        say("not the same block\n");
    free(q);
}

static void case_realloc_freed(void)
{
    char *p = malloc(40), *stale = opaque(p);
    free(p);
    p = realloc(stale, 80);
    if (p)
        say("realloc of a freed block returned a block\n");
}

/* The queries check their pointer as malloc_usable_size does: the debug build keeps no
 * free mark, and they once read a freed block's stale record (100 and 64 here). */
static void case_query_freed(void)
{
    char *p = memalign(64, 100), *stale = opaque(p);
    free(p);
    if (!malloc_size || !malloc_alignment)
        say("no malloc_size or malloc_alignment\n");
    else if (malloc_size(stale) != 0 || malloc_alignment(stale) != 0)
        say("a query of a freed block answered for it\n");
}

/* A query of memory lfheap never handed out is reported too (the release build answers
 * 0: docs/API.md). */
static int not_a_heap_block;
static void case_query_foreign(void)
{
    if (!malloc_size)
        say("no malloc_size\n");
    else if (malloc_size(opaque(&not_a_heap_block)) != 0)
        say("a query of a global answered for it\n");
}

static void case_free_sized_wrong(void)
{
    char *p = malloc(100);
    free_sized(p, 50);
}

static void case_free_aligned_sized_wrong(void)
{
    char *p = aligned_alloc(64, 128);
    free_aligned_sized(p, 32, 128);
}

/* C++'s sized delete, by its mangled name (operator delete(void *, size_t)), on a block
 * of operator new(size_t): the report names the operator, not free_sized. Weak: a plain
 * C program finds them in the preloaded library, not at link time. */
void *_Znwm(size_t size) __attribute__((weak));
void _ZdlPvm(void *ptr, size_t size) __attribute__((weak));

static void case_delete_sized_wrong(void)
{
    REQUIRE(_Znwm && _ZdlPvm);
    void *p = _Znwm(100);
    _ZdlPvm(p, 50);
}

/* The unsized aligned deletes (operator delete(void *, std::align_val_t) and its nothrow
 * array form) check the alignment as the sized one does; the reports name the array
 * forms operator delete[]. */
void *_ZnwmSt11align_val_t(size_t size, size_t align) __attribute__((weak));
void _ZdlPvSt11align_val_t(void *ptr, size_t align) __attribute__((weak));
void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *ptr, size_t align, const void *tag)
    __attribute__((weak));

static void case_delete_aligned_wrong(void)
{
    REQUIRE(_ZnwmSt11align_val_t && _ZdlPvSt11align_val_t);
    void *p = _ZnwmSt11align_val_t(100, 128);
    _ZdlPvSt11align_val_t(p, 64);
}

static void case_delete_aligned_nothrow_wrong(void)
{
    REQUIRE(_Znwm && _ZdaPvSt11align_val_tRKSt9nothrow_t);
    char tag = 0;
    void *p = _Znwm(100);
    _ZdaPvSt11align_val_tRKSt9nothrow_t(p, 256, &tag);
}

static void case_unfreed(void)
{
    char *p = opaque(malloc(1000));
    p[0] = 1;
}

/* Everything right: nothing may be reported. */
static void case_clean(void)
{
    char *p = malloc(100);
    if (malloc_usable_size(p) != 100)
        say("usable size is not the request size\n");
    memset(p, 7, malloc_usable_size(p));
    p = realloc(p, 1000);
    p = realloc(p, 10);
    free_sized(p, 10);
    char *a = aligned_alloc(64, 128);
    free_aligned_sized(a, 64, 128);
    REQUIRE(_ZnwmSt11align_val_t && _ZdlPvSt11align_val_t);
    _ZdlPvSt11align_val_t(_ZnwmSt11align_val_t(100, 128), 128);
    void *zero = malloc(0);
    memset(zero, 1, malloc_usable_size(zero));
    free(zero);
    char *c = calloc(10, 10);
    free_sized(c, 100);
    char *big = malloc(200000);
    memset(big, 2, 200000);
    big = realloc(big, 400000);
    free(big);
    free(NULL);
    /* blocks freed, reused and freed again, by this thread and with canaries intact */
    for (int round = 0; round < 3; round++) {
        char *blocks[200];
        for (int i = 0; i < 200; i++) {
            blocks[i] = malloc((size_t)(i * 37) % 3000);
            memset(blocks[i], i, (size_t)(i * 37) % 3000);
        }
        for (int i = 0; i < 200; i++)
            free(blocks[i]);
    }
}

/* ---- the secure build's reports (--secure, run with liblfheap-secure preloaded) ----- */

/* A small block whose 8 bytes after its usable size, its tail canary, were overwritten. */
static char *overflowed_block(void)
{
    char *p = opaque(malloc(24));
    size_t usable = malloc_usable_size(p);
    for (size_t i = 0; i < 8; i++)
        ((volatile char *)p)[usable + i] = 'x';
    return p;
}

static void case_secure_overflow_free(void)
{
    free(overflowed_block());
}

static void case_secure_overflow_realloc_moves(void)
{
    free(realloc(overflowed_block(), 4000));
}

static void case_secure_overflow_realloc_stays(void)
{
    free(realloc(overflowed_block(), 20));
}

static void case_secure_overflow_realloc_zero(void)
{
    free(realloc(overflowed_block(), 0));
}

static void case_secure_overflow_reallocarray(void)
{
    free(reallocarray(overflowed_block(), 2, 2000));
}

struct test_case {
    const char *name;
    void (*run)(void);
    const char *message; /* what stderr must contain; NULL: stderr must be empty */
    int aborts;          /* by default, the child dies of SIGABRT */
};

static const struct test_case cases[] = {
    {"double_free", case_double_free, "lfheap: double free: free(0x", 1},
    {"free_stack", case_free_stack, "lfheap: invalid pointer: free(0x", 1},
    {"free_global", case_free_global, "lfheap: invalid pointer: free(0x", 1},
    {"free_interior", case_free_interior, "lfheap: invalid pointer: free(0x", 1},
    {"free_foreign", case_free_foreign, "lfheap: invalid pointer: free(0x", 1},
    {"realloc_stack", case_realloc_stack, "lfheap: invalid pointer: realloc(0x", 1},
    {"usable_size_interior", case_usable_size_interior,
     "lfheap: invalid pointer: malloc_usable_size(0x", 1},
    {"overflow_free", case_overflow_free, "bytes was written past its end (found by free)", 1},
    {"overflow_realloc", case_overflow_realloc, "lfheap: heap overflow: block 0x", 1},
    {"overflow_large", case_overflow_large, "of 100,000 bytes was written past its end", 1},
    {"write_after_free", case_write_after_free, "was written at offset 16 while it was free", 1},
    {"realloc_freed", case_realloc_freed, "lfheap: use after free: realloc(0x", 1},
    {"query_freed", case_query_freed, "lfheap: use after free: malloc_size(0x", 1},
    {"query_foreign", case_query_foreign, "lfheap: invalid pointer: malloc_size(0x", 1},
    {"free_sized_wrong", case_free_sized_wrong, ", 50): the block was allocated with 100 bytes", 1},
    {"free_aligned_sized_wrong", case_free_aligned_sized_wrong,
     "lfheap: wrong alignment: free_aligned_sized(0x", 1},
    {"delete_sized_wrong", case_delete_sized_wrong, "lfheap: wrong size: operator delete(0x", 1},
    {"delete_aligned_wrong", case_delete_aligned_wrong,
     ", alignment 64): the block was allocated aligned to 128", 1},
    {"delete_aligned_nothrow_wrong", case_delete_aligned_nothrow_wrong,
     "lfheap: wrong alignment: operator delete[](0x", 1},
    {"unfreed", case_unfreed, "lfheap: unfreed storage: 1,000 bytes requested and not freed", 0},
    {"clean", case_clean, NULL, 0},
};
enum { CASES = sizeof cases / sizeof cases[0] };

/* The secure build stops the program at the call that finds the overwritten canary, and
 * names that call: a resize checks the block before it moves or keeps it. */
static const struct test_case secure_cases[] = {
    {"secure_double_free", case_double_free, "lfheap: double free: free(0x", 1},
    {"secure_overflow_free", case_secure_overflow_free, "lfheap: heap overflow: free(0x", 1},
    {"secure_overflow_realloc_moves", case_secure_overflow_realloc_moves,
     "lfheap: heap overflow: realloc(0x", 1},
    {"secure_overflow_realloc_stays", case_secure_overflow_realloc_stays,
     "lfheap: heap overflow: realloc(0x", 1},
    {"secure_overflow_realloc_zero", case_secure_overflow_realloc_zero,
     "lfheap: heap overflow: realloc(0x", 1},
    {"secure_overflow_reallocarray", case_secure_overflow_reallocarray,
     "lfheap: heap overflow: reallocarray(0x", 1},
};
enum { SECURE_CASES = sizeof secure_cases / sizeof secure_cases[0] };

/* ---- the parent -------------------------------------------------------------------- */

struct outcome {
    int status;
    char out[4096];
    char err[4096];
};

static void read_all(int fd, char *buf, size_t size)
{
    size_t len = 0;
    ssize_t n;
    while (len + 1 < size && (n = read(fd, buf + len, size - 1 - len)) > 0)
        len += (size_t)n;
    buf[len] = '\0';
}

/* Runs this program on `name` with `env` added to the environment. */
static void run_child(const char *name, const char *const env[], struct outcome *o)
{
    int out[2], err[2];
    REQUIRE(pipe(out) == 0 && pipe(err) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]);
        close(err[0]);
        for (int i = 0; env[i]; i += 2)
            setenv(env[i], env[i + 1], 1);
        execl("/proc/self/exe", "test_debug", name, (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    read_all(out[0], o->out, sizeof o->out); /* small outputs: no deadlock on the pipes */
    read_all(err[0], o->err, sizeof o->err);
    close(out[0]);
    close(err[0]);
    REQUIRE(waitpid(pid, &o->status, 0) == pid);
}

static int lfheap_lines(const char *text)
{
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "lfheap: ")) != NULL; p++)
        lines++;
    return lines;
}

/* `abort_optional`: the debug build's LFHEAP_ABORT=0 lets an aborting case go on; the
 * secure build always aborts (run with --secure). */
static void check_case(const struct test_case *c, bool abort_optional)
{
    int before = test_failures;
    struct outcome o;
    run_child(c->name, (const char *const[]){"TEST_UNFREED", "0", NULL}, &o);
    if (c->aborts) {
        CHECK(WIFSIGNALED(o.status) && WTERMSIG(o.status) == SIGABRT);
        CHECK(strstr(o.out, "continued") == NULL);
    } else {
        CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
    }
    if (c->message) {
        CHECK(strstr(o.err, c->message) != NULL);
        CHECK(lfheap_lines(o.err) == 1); /* one line, then the abort */
    } else {
        CHECK(o.err[0] == '\0');
    }
    if (c->aborts && abort_optional) {
        /* LFHEAP_ABORT=0: reported the same way, and the program goes on */
        run_child(c->name, (const char *const[]){"LFHEAP_ABORT", "0", "TEST_UNFREED", "0", NULL},
                  &o);
        CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
        CHECK(strcmp(o.out, "continued\n") == 0); /* and nothing went wrong after it */
        CHECK(strstr(o.err, c->message) != NULL);
    }
    if (test_failures != before)
        fprintf(stderr, "case %s: status %#x\nstdout: %s\nstderr: %s\n", c->name, o.status, o.out,
                o.err);
    printf("%s %s\n", test_failures == before ? "PASS" : "FAIL", c->name);
    fflush(stdout);
}

static void unfreed_bytes_less_malloc_unfreed(void)
{
    struct outcome o;
    run_child("unfreed", (const char *const[]){"TEST_UNFREED", "200", NULL}, &o);
    CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0);
    CHECK(strstr(o.err, "unfreed storage: 800 bytes requested and not freed at exit (1,000 "
                        "unfreed, 200 declared by malloc_unfreed)") != NULL);
    run_child("unfreed", (const char *const[]){"TEST_UNFREED", "1000", NULL}, &o);
    CHECK(WIFEXITED(o.status) && o.err[0] == '\0');
    /* LFHEAP_UNFREED=0 silences the report; any other value keeps it */
    run_child("unfreed", (const char *const[]){"TEST_UNFREED", "0", "LFHEAP_UNFREED", "0", NULL},
              &o);
    CHECK(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0 && o.err[0] == '\0');
    run_child("unfreed", (const char *const[]){"TEST_UNFREED", "0", "LFHEAP_UNFREED", "1", NULL},
              &o);
    CHECK(strstr(o.err, "unfreed storage: 1,000 bytes requested and not freed") != NULL);
}

static const struct test_case *find_case(const char *name)
{
    for (int i = 0; i < CASES; i++)
        if (strcmp(name, cases[i].name) == 0)
            return &cases[i];
    for (int i = 0; i < SECURE_CASES; i++)
        if (strcmp(name, secure_cases[i].name) == 0)
            return &secure_cases[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--secure") == 0) {
        for (int i = 0; i < SECURE_CASES; i++)
            check_case(&secure_cases[i], false);
        return test_exit_status();
    }
    if (argc == 2) {
        const struct test_case *c = find_case(argv[1]);
        if (!c)
            return 2;
        c->run();
        say("continued\n");
        return 0;
    }
    for (int i = 0; i < CASES; i++)
        check_case(&cases[i], true);
    RUN(unfreed_bytes_less_malloc_unfreed);
    return test_exit_status();
}
