/*
 * The invariant checks (src/invariant.h) fire: each family — the descriptor's anchor, the
 * page map's contract as free sees it, the page map's registrations, the buddy tree's
 * nodes (both layouts) and its index — is broken on purpose, through the internals this
 * statically linked program can reach, in a child process, which must then abort with
 * one line naming the invariant ("lfheap: broken invariant: <name>: ..."). The cases
 * call lfh_malloc and lfh_free, so the program runs on any library that has the checks:
 * build/t (the tests' prefixed library) and build/t-debug (the debug build).
 */
#include "buddy.h"
#include "heap.h"
#include "lfheap.h"
#include "pagemap.h"
#include "testutil.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Broken anchors are made with the anchor's own layout (src/heap_types.h, anchor_make). */

static char *page_of(void *ptr)
{
    return (char *)((uintptr_t)ptr & ~(uintptr_t)(OS_PAGE_SIZE - 1));
}

/* ---- the cases (run in the child) -------------------------------------------------- */

/* A count past the superblock's blocks, found by the next give-back's load. */
static void case_anchor_count(void)
{
    void *block = lfh_malloc(64);
    struct descriptor *desc = pagemap_desc_or_foreign(block);
    atomic_store(&desc->anchor, anchor_make(ANCHOR_PARTIAL, ANCHOR_AVAIL_NONE, desc->max_count + 1,
                                            desc->max_count));
    heap_give_back(desc, block, block, 1, NULL);
}

/* PARTIAL with no free block. */
static void case_anchor_state(void)
{
    void *block = lfh_malloc(64);
    struct descriptor *desc = pagemap_desc_or_foreign(block);
    atomic_store(&desc->anchor, anchor_make(ANCHOR_PARTIAL, ANCHOR_AVAIL_NONE, 0, desc->max_count));
    heap_give_back(desc, block, block, 1, NULL);
}

/* A chain that starts inside a block. */
static void case_anchor_avail(void)
{
    void *block = lfh_malloc(64);
    struct descriptor *desc = pagemap_desc_or_foreign(block);
    atomic_store(&desc->anchor, anchor_make(ANCHOR_PARTIAL, 1, 1, desc->max_count));
    heap_give_back(desc, block, block, 1, NULL);
}

/* The descriptor the page map gives for a block does not cover it. */
static void case_free_uncovered(void)
{
    char *first = lfh_malloc(64);
    char *second = lfh_malloc(64);
    struct descriptor *desc = pagemap_desc_or_foreign(second);
    REQUIRE(desc == pagemap_desc_or_foreign(first) && second > desc->start);
    desc->size = (size_t)(second - desc->start);
    lfh_free(second);
}

/* The block-start test lets through an address that is no block's start. */
static void case_free_index(void)
{
    char *block = lfh_malloc(64);
    struct descriptor *desc = pagemap_desc_or_foreign(block);
    atomic_store_explicit(&desc->carved_limit, UINT64_MAX, memory_order_relaxed);
    lfh_free(block + 16);
}

/* A page registered twice. */
static void case_pagemap_set_twice(void)
{
    char *block = lfh_malloc(100000);
    pagemap_set(page_of(block), OS_PAGE_SIZE, pagemap_desc_or_foreign(block));
}

/* A clear of pages nobody registered. */
static void case_pagemap_clear_unset(void)
{
    void *page = mmap(NULL, OS_PAGE_SIZE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(page != MAP_FAILED);
    pagemap_set(page, OS_PAGE_SIZE, NULL);
}

/* A range that does not start at a page. */
static void case_pagemap_partial_page(void)
{
    char *block = lfh_malloc(100000);
    pagemap_set(block + 16, OS_PAGE_SIZE, NULL);
}

/* A live chunk whose node reads free. */
static void case_buddy_node(unsigned flags)
{
    struct buddy *b = buddy_create(NULL, (size_t)1 << 20, 4096, 0, flags);
    REQUIRE(b);
    void *chunk = buddy_alloc(b, 4096);
    REQUIRE(chunk);
    if (flags & BUDDY_PACKED) {
        size_t words = 0;
        for (unsigned k = 0; k < b->bunch_levels; k++)
            words += (size_t)1 << buddy_bunch_root_level(b, k);
        for (size_t i = 0; i < words; i++)
            atomic_store(&b->words[i], 0);
    } else {
        size_t leaf = (size_t)((char *)chunk - (char *)b->base) >> b->min_shift;
        atomic_store(&b->tree[((size_t)1 << b->depth) + leaf], 0);
    }
    buddy_free(b, chunk);
}

static void case_buddy_node_flat(void)
{
    case_buddy_node(0);
}

static void case_buddy_node_packed(void)
{
    case_buddy_node(BUDDY_PACKED);
}

/* A live chunk whose parent does not say that side is occupied (1-level tree). */
static void case_buddy_ancestor(void)
{
    struct buddy *b = buddy_create(NULL, (size_t)1 << 20, 4096, 0, 0);
    REQUIRE(b);
    void *chunk = buddy_alloc(b, 4096);
    REQUIRE(chunk);
    size_t leaf = (size_t)((char *)chunk - (char *)b->base) >> b->min_shift;
    atomic_store(&b->tree[(((size_t)1 << b->depth) + leaf) >> 1], 0);
    buddy_free(b, chunk);
}

/* index[] names a level below the leaves. */
static void case_buddy_index(void)
{
    struct buddy *b = buddy_create(NULL, (size_t)1 << 20, 4096, 0, BUDDY_PACKED);
    REQUIRE(b);
    void *chunk = buddy_alloc(b, 4096);
    REQUIRE(chunk);
    size_t leaf = (size_t)((char *)chunk - (char *)b->base) >> b->min_shift;
    atomic_store(&b->index[leaf], (uint8_t)(b->depth + 2));
    buddy_free(b, chunk);
}

/* The same operations on intact structures: no report. */
static void case_intact(void)
{
    void *small = lfh_malloc(64), *large = lfh_malloc(100000);
    lfh_free(small);
    lfh_free(large);
    for (unsigned flags = 0; flags <= BUDDY_PACKED; flags += BUDDY_PACKED) {
        struct buddy *b = buddy_create(NULL, (size_t)1 << 20, 4096, 0, flags);
        REQUIRE(b);
        void *chunk = buddy_alloc(b, 4096);
        REQUIRE(chunk && buddy_free(b, chunk));
        buddy_destroy(b);
    }
}

struct test_case {
    const char *name;
    void (*run)(void);
    const char *invariant; /* NULL: the child must exit cleanly, silently */
};

static const struct test_case cases[] = {
    {"anchor_count", case_anchor_count, "anchor count"},
    {"anchor_state", case_anchor_state, "anchor state"},
    {"anchor_avail", case_anchor_avail, "anchor avail"},
    {"free_uncovered", case_free_uncovered, "page map covers the block"},
    {"free_index", case_free_index, "block index in range"},
    {"pagemap_set_twice", case_pagemap_set_twice, "page map set over an empty page"},
    {"pagemap_clear_unset", case_pagemap_clear_unset, "page map clear of one registration"},
    {"pagemap_partial_page", case_pagemap_partial_page, "page map range is whole pages"},
    {"buddy_node_flat", case_buddy_node_flat, "buddy live chunk's node is taken"},
    {"buddy_node_packed", case_buddy_node_packed, "buddy live chunk's node is taken"},
    {"buddy_ancestor", case_buddy_ancestor, "buddy ancestor occupied on the chunk's side"},
    {"buddy_index", case_buddy_index, "buddy index holds a chunk's level"},
    {"intact", case_intact, NULL},
};
enum { CASES = sizeof cases / sizeof cases[0] };

/* ---- the parent -------------------------------------------------------------------- */

/* Runs `c` in a child; its stderr into err (NUL-terminated), its wait status returned. */
static int run_child(const struct test_case *c, char *err, size_t size)
{
    int pipe_fds[2];
    REQUIRE(pipe(pipe_fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        dup2(pipe_fds[1], STDERR_FILENO);
        close(pipe_fds[0]);
        c->run();
        _exit(0);
    }
    close(pipe_fds[1]);
    size_t len = 0;
    ssize_t n;
    while (len + 1 < size && (n = read(pipe_fds[0], err + len, size - 1 - len)) > 0)
        len += (size_t)n;
    err[len] = '\0';
    close(pipe_fds[0]);
    int status;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    return status;
}

int main(void)
{
    for (int i = 0; i < CASES; i++) {
        const struct test_case *c = &cases[i];
        int before = test_failures;
        char err[4096], expected[256];
        int status = run_child(c, err, sizeof err);
        if (c->invariant) {
            snprintf(expected, sizeof expected, "lfheap: broken invariant: %s: ", c->invariant);
            CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
            CHECK(strncmp(err, expected, strlen(expected)) == 0);
            CHECK(strstr(err, " at src/") != NULL);            /* where it was checked */
            CHECK(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
        } else {
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            CHECK(err[0] == '\0');
        }
        if (test_failures != before)
            fprintf(stderr, "case %s: status %d, stderr: %s\n", c->name, status, err);
        printf("%s %s\n", test_failures == before ? "PASS" : "FAIL", c->name);
        fflush(stdout);
    }
    return test_exit_status();
}
