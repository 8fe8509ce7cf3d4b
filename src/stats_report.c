/*
 * stats_report: the reports over the counters (stats.h) and what every build knows
 * without them (the arenas): malloc_stats, heap_stats, malloc_info, mallinfo, mallinfo2,
 * lfh_stats_get. They exist in every build; without counters they give what is known and
 * say so. A top layer, beside the API: it reads the layers below and nothing calls it.
 */
#include "stats.h"

#include "api_exports.h"
#include "common.h"
#include "arena.h"
#include "heap.h"
#include "lfheap.h"
#include "out.h"
#include "platform.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- queries ---------------------------------------------------------------------- */

#if STATS_COUNTING
/* A live figure: what came in less what went out, 0 if more went out. Each sum is exact,
 * but the two are read one block after the other while threads run, and a block freed
 * between the reads counts out and not in: bytes_in_use read as 2^64 less 291 MB (found by
 * an outside tester: 4 of 200,000 reads while 3 threads allocated and freed). A thread's
 * own block (heap_stats) also counts the frees of blocks other threads allocated. */
static uint64_t live(uint64_t in, uint64_t out)
{
    return in > out ? in - out : 0;
}
#endif

/* Fills `s` from every thread's counters, or from `only`'s (heap_stats): the counts
 * since malloc_stats_clear, and the live figures as differences of whole counts (at
 * least 0: live). */
static void stats_fill(struct lfh_stats *s, struct stats_block *only)
{
    memset(s, 0, sizeof *s);
    s->counters = STATS_ENABLED;
#if DEBUG_ENABLED
    s->debug = 1;
#endif
    s->arenas = arena_mapped();
    s->arena_bytes = arena_mapped_bytes();
#if STATS_COUNTING
    uint64_t whole[STATS_COUNTERS], c[STATS_COUNTERS];
    if (only) {
        memset(whole, 0, sizeof whole);
        memset(c, 0, sizeof c);
        stats_block_sum(whole, only, false);
        stats_block_sum(c, only, true);
    } else {
        stats_sum_all(whole, false);
        stats_sum_all(c, true);
    }
    s->request_in_use = live(whole[STATS_REQUEST_IN], whole[STATS_REQUEST_OUT]);
#if STATS_ENABLED
    for (unsigned r = 0; r < LFH_STATS_ROUTINES; r++) {
        struct lfh_stats_calls *calls = &s->routine[r];
        calls->calls = c[STATS_ROUTINE(r, STATS_CALLS)];
        calls->zero_calls = c[STATS_ROUTINE(r, STATS_ZERO_CALLS)];
        calls->failures = c[STATS_ROUTINE(r, STATS_FAILURES)];
        calls->request_bytes = c[STATS_ROUTINE(r, STATS_REQUEST_BYTES)];
        calls->alloc_bytes = c[STATS_ROUTINE(r, STATS_ALLOC_BYTES)];
    }
    s->free.calls = c[STATS_FREE_CALLS];
    s->free.null_calls = c[STATS_FREE_NULL];
    s->free.invalid_calls = c[STATS_FREE_INVALID];
    s->free.request_bytes = c[STATS_FREE_REQUEST_BYTES];
    s->free.alloc_bytes = c[STATS_FREE_ALLOC_BYTES];
    s->remote_frees = c[STATS_REMOTE_FREES];
    s->remote_bytes = c[STATS_REMOTE_BYTES];
    s->mmap = (struct lfh_stats_os){c[STATS_MMAP_CALLS], c[STATS_MMAP_BYTES]};
    s->munmap = (struct lfh_stats_os){c[STATS_MUNMAP_CALLS], c[STATS_MUNMAP_BYTES]};
    s->madvise = (struct lfh_stats_os){c[STATS_MADVISE_CALLS], c[STATS_MADVISE_BYTES]};
    s->mremap = (struct lfh_stats_os){c[STATS_MREMAP_CALLS], c[STATS_MREMAP_BYTES]};
    s->caches_new = c[STATS_CACHES_NEW];
    s->caches_adopted = c[STATS_CACHES_ADOPTED];
    s->caches_orphaned = c[STATS_CACHES_ORPHANED];
    s->caches_flushed = c[STATS_CACHES_FLUSHED];
    s->threads_started = s->caches_new + s->caches_adopted;
    s->threads_exited = s->caches_orphaned + s->caches_flushed;
    s->superblocks_created = c[STATS_SUPERBLOCKS_CREATED];
    s->superblocks_released = c[STATS_SUPERBLOCKS_RELEASED];
    s->superblocks_live = live(whole[STATS_SUPERBLOCKS_CREATED], whole[STATS_SUPERBLOCKS_RELEASED]);
    s->large_allocated = c[STATS_LARGE_ALLOCATED];
    s->large_freed = c[STATS_LARGE_FREED];
    s->large_live = live(whole[STATS_LARGE_ALLOCATED], whole[STATS_LARGE_FREED]);
    s->large_live_bytes = live(whole[STATS_LARGE_BYTES_IN], whole[STATS_LARGE_BYTES_OUT]);
    s->huge_allocated = c[STATS_HUGE_ALLOCATED];
    s->huge_freed = c[STATS_HUGE_FREED];
    s->huge_live = live(whole[STATS_HUGE_ALLOCATED], whole[STATS_HUGE_FREED]);
    s->huge_live_bytes = live(whole[STATS_HUGE_BYTES_IN], whole[STATS_HUGE_BYTES_OUT]);
    /* Every block handed out is some routine's alloc_bytes; every block taken back is
     * free's or a resizing routine's. */
    uint64_t handed_out = 0;
    for (unsigned r = 0; r < LFH_STATS_ROUTINES; r++)
        handed_out += whole[STATS_ROUTINE(r, STATS_ALLOC_BYTES)];
    s->bytes_in_use = live(handed_out, whole[STATS_FREE_ALLOC_BYTES] + whole[STATS_RESIZED_OUT]);
#endif
#else
    (void)only;
#endif
}

LFH_EXPORT int lfh_stats_get(struct lfh_stats *out)
{
    if (!out) {
        errno = EINVAL;
        return -1;
    }
    stats_fill(out, NULL);
    return out->counters;
}

/* ---- malloc_stats ----------------------------------------------------------------- */

static _Atomic int stats_fd = STDERR_FILENO;

LFH_EXPORT int lfh_malloc_stats_fd(int fd)
{
    /* Relaxed: a setting, not a hand-off of data. */
    return atomic_exchange_explicit(&stats_fd, fd, memory_order_relaxed);
}

static const char *const routine_names[LFH_STATS_ROUTINES] = {
    "malloc",         "aalloc",         "calloc",  "memalign",        "aligned_alloc",
    "posix_memalign", "valloc",         "pvalloc", "amemalign",       "cmemalign",
    "resize",         "aligned_resize", "realloc", "aligned_realloc",
};

/* A row: its label, then "name value" for each field, separated by "; ". The caller
 * ends the line. */
#define OUT_ROW(o, label, ...)                                                                     \
    out_row(o, label, (const struct field[]){__VA_ARGS__},                                         \
            sizeof((const struct field[]){__VA_ARGS__}) / sizeof(struct field))

struct field {
    const char *name;
    uint64_t value;
};

static void out_row(struct out *o, const char *label, const struct field *fields, size_t count)
{
    out_str(o, "  ");
    out_str(o, label);
    for (size_t n = strlen(label); n < 16; n++)
        out_str(o, " ");
    for (size_t i = 0; i < count; i++) {
        if (i)
            out_str(o, "; ");
        if (fields[i].name[0]) {
            out_str(o, fields[i].name);
            out_str(o, " ");
        }
        out_num(o, fields[i].value);
    }
}

/* "; storage request / alloc bytes" and the end of the line. */
static void out_storage(struct out *o, uint64_t request, uint64_t alloc)
{
    out_str(o, "; storage ");
    out_num(o, request);
    out_str(o, " / ");
    out_num(o, alloc);
    out_str(o, " bytes\n");
}

/* A count and its bytes: " count, bytes bytes" and the end of the line. */
static void out_live(struct out *o, uint64_t bytes)
{
    out_str(o, ", ");
    out_num(o, bytes);
    out_str(o, " bytes\n");
}

/* malloc_stats, or for heap_stats (`thread_only`) the calls counted in the calling
 * thread's block, without the process's live figures, which no single block holds. */
static void stats_print(int fd, bool thread_only)
{
    struct stats_block *only = NULL;
#if STATS_COUNTING
    if (thread_only)
        only = stats_attach();
#endif
    struct lfh_stats s;
    stats_fill(&s, only);
    struct out o;
    char report[OUT_REPORT];
    out_init(&o, fd, report, sizeof report);
    out_str(&o, "lfheap statistics, pid ");
    out_dec(&o, platform_pid());
    if (thread_only) {
        out_str(&o, ", this thread's heap");
        if (s.counters && !only) {
            out_str(&o, ": no counters (out of memory)\n");
            out_flush(&o);
            return;
        }
    }
    if (!s.counters) {
        out_str(&o, ": this build keeps no counters (liblfheap-stats does)\n");
    } else {
        out_str(&o, " (storage request / allocation)\n");
        for (unsigned r = 0; r < LFH_STATS_ROUTINES; r++) {
            const struct lfh_stats_calls *c = &s.routine[r];
            OUT_ROW(&o, routine_names[r], {"calls", c->calls}, {"0-byte", c->zero_calls},
                    {"failed", c->failures});
            out_storage(&o, c->request_bytes, c->alloc_bytes);
        }
        OUT_ROW(&o, "free", {"calls", s.free.calls}, {"null", s.free.null_calls},
                {"invalid", s.free.invalid_calls});
        out_storage(&o, s.free.request_bytes, s.free.alloc_bytes);
        OUT_ROW(&o, "remote frees", {"blocks", s.remote_frees}, {"storage", s.remote_bytes});
        out_str(&o, " bytes\n");
        if (!thread_only) {
            OUT_ROW(&o, "in use", {"", s.bytes_in_use});
            out_str(&o, " bytes in blocks\n");
        }
        const struct {
            const char *name;
            const struct lfh_stats_os *os;
        } os_rows[] = {{"mmap", &s.mmap},
                       {"munmap", &s.munmap},
                       {"madvise", &s.madvise},
                       {"mremap", &s.mremap}};
        for (unsigned i = 0; i < sizeof os_rows / sizeof os_rows[0]; i++) {
            OUT_ROW(&o, os_rows[i].name, {"calls", os_rows[i].os->calls},
                    {"storage", os_rows[i].os->bytes});
            out_str(&o, " bytes\n");
        }
        if (thread_only) {
            out_flush(&o);
            return;
        }
        OUT_ROW(&o, "threads", {"started", s.threads_started}, {"exited", s.threads_exited});
        out_str(&o, "\n");
        OUT_ROW(&o, "caches", {"new", s.caches_new}, {"adopted", s.caches_adopted},
                {"orphaned", s.caches_orphaned}, {"flushed", s.caches_flushed});
        out_str(&o, "\n");
        OUT_ROW(&o, "superblocks", {"created", s.superblocks_created},
                {"released", s.superblocks_released}, {"live", s.superblocks_live});
        out_str(&o, "\n");
        OUT_ROW(&o, "large blocks", {"allocated", s.large_allocated}, {"freed", s.large_freed},
                {"live", s.large_live});
        out_live(&o, s.large_live_bytes);
        OUT_ROW(&o, "huge blocks", {"allocated", s.huge_allocated}, {"freed", s.huge_freed},
                {"live", s.huge_live});
        out_live(&o, s.huge_live_bytes);
    }
    OUT_ROW(&o, "arenas", {"", s.arenas}, {"storage", s.arena_bytes});
    out_str(&o, " bytes\n");
    if (s.debug) {
        OUT_ROW(&o, "requested", {"", s.request_in_use});
        out_str(&o, " bytes in live blocks\n");
    }
    out_flush(&o);
}

LFH_EXPORT void lfh_malloc_stats(void)
{
    stats_print(atomic_load_explicit(&stats_fd, memory_order_relaxed), false);
}

/* llheap's heap_stats. A thread's block also holds the counts of the threads that used
 * it before (stats.h): llheap's heaps, too, outlive their threads with their counts. */
LFH_EXPORT void lfh_heap_stats(void)
{
    stats_print(atomic_load_explicit(&stats_fd, memory_order_relaxed), true);
}

LFH_EXPORT void lfh_malloc_stats_clear(void)
{
#if STATS_COUNTING
    stats_clear();
#endif
}

/* ---- malloc_info ------------------------------------------------------------------ */

static void xml_attr(struct out *o, const char *name, uint64_t value)
{
    out_str(o, " ");
    out_str(o, name);
    out_str(o, "=\"");
    out_dec(o, value);
    out_str(o, "\"");
}

static void xml_calls(struct out *o, const char *tag, const char *name,
                      const struct lfh_stats_calls *c)
{
    out_str(o, "  <");
    out_str(o, tag);
    out_str(o, " name=\"");
    out_str(o, name);
    out_str(o, "\"");
    xml_attr(o, "calls", c->calls);
    xml_attr(o, "zero_calls", c->zero_calls);
    xml_attr(o, "failures", c->failures);
    xml_attr(o, "request_bytes", c->request_bytes);
    xml_attr(o, "alloc_bytes", c->alloc_bytes);
    out_str(o, "/>\n");
}

static void xml_os(struct out *o, const char *name, const struct lfh_stats_os *os)
{
    out_str(o, "  <system call=\"");
    out_str(o, name);
    out_str(o, "\"");
    xml_attr(o, "calls", os->calls);
    xml_attr(o, "bytes", os->bytes);
    out_str(o, "/>\n");
}

static void xml_element(struct out *o, const char *tag, const char *const names[],
                        const uint64_t values[], unsigned count)
{
    out_str(o, "  <");
    out_str(o, tag);
    for (unsigned i = 0; i < count; i++)
        xml_attr(o, names[i], values[i]);
    out_str(o, "/>\n");
}

static void stats_xml(struct out *o)
{
    struct lfh_stats s;
    stats_fill(&s, NULL);
    out_str(o, "<malloc version=\"lfheap-1\"");
    xml_attr(o, "counters", (uint64_t)s.counters);
    xml_attr(o, "debug", (uint64_t)s.debug);
    out_str(o, ">\n");
    if (s.counters) {
        for (unsigned r = 0; r < LFH_STATS_ROUTINES; r++)
            xml_calls(o, "routine", routine_names[r], &s.routine[r]);
        static const char *const free_names[] = {"calls", "null_calls", "invalid_calls",
                                                 "request_bytes", "alloc_bytes"};
        xml_element(o, "free", free_names,
                    (const uint64_t[]){s.free.calls, s.free.null_calls, s.free.invalid_calls,
                                       s.free.request_bytes, s.free.alloc_bytes},
                    5);
        static const char *const remote_names[] = {"blocks", "bytes"};
        xml_element(o, "remote_frees", remote_names,
                    (const uint64_t[]){s.remote_frees, s.remote_bytes}, 2);
        xml_os(o, "mmap", &s.mmap);
        xml_os(o, "munmap", &s.munmap);
        xml_os(o, "madvise", &s.madvise);
        xml_os(o, "mremap", &s.mremap);
        static const char *const thread_names[] = {"started",         "exited",
                                                   "caches_new",      "caches_adopted",
                                                   "caches_orphaned", "caches_flushed"};
        xml_element(o, "threads", thread_names,
                    (const uint64_t[]){s.threads_started, s.threads_exited, s.caches_new,
                                       s.caches_adopted, s.caches_orphaned, s.caches_flushed},
                    6);
        static const char *const sb_names[] = {"created", "released", "live"};
        xml_element(
            o, "superblocks", sb_names,
            (const uint64_t[]){s.superblocks_created, s.superblocks_released, s.superblocks_live},
            3);
        static const char *const large_names[] = {"allocated", "freed", "live", "live_bytes"};
        xml_element(
            o, "large", large_names,
            (const uint64_t[]){s.large_allocated, s.large_freed, s.large_live, s.large_live_bytes},
            4);
        xml_element(
            o, "huge", large_names,
            (const uint64_t[]){s.huge_allocated, s.huge_freed, s.huge_live, s.huge_live_bytes}, 4);
        static const char *const use_names[] = {"bytes"};
        xml_element(o, "in_use", use_names, (const uint64_t[]){s.bytes_in_use}, 1);
    }
    static const char *const arena_names[] = {"count", "bytes"};
    xml_element(o, "arenas", arena_names, (const uint64_t[]){s.arenas, s.arena_bytes}, 2);
    if (s.debug) {
        static const char *const req_names[] = {"bytes"};
        xml_element(o, "requested", req_names, (const uint64_t[]){s.request_in_use}, 1);
    }
    out_str(o, "</malloc>\n");
    out_flush(o);
}

/* malloc_info's output to a stream with no file descriptor (open_memstream, fmemopen). */
static void stream_sink(void *fp, const char *text, size_t len)
{
    fwrite(text, 1, len, (FILE *)fp);
}

LFH_EXPORT int lfh_malloc_info(int options, FILE *fp)
{
    /* As glibc: the error number itself, errno untouched (its manual page says -1 and
     * errno; a program checking for non-zero works with both). */
    if (options != 0 || !fp)
        return EINVAL;
    struct out o;
    char line[OUT_LINE];
    int saved = errno; /* fileno of an in-memory stream sets EBADF */
    int fd = fileno(fp);
    errno = saved;
    if (fd >= 0) {
        /* What the program wrote to the stream before comes first. fflush takes the
         * stream's own lock, on the program's behalf, as its own stdio calls would; no
         * allocator structure is held meanwhile. */
        fflush(fp);
        out_init(&o, fd, line, sizeof line);
    } else {
        /* An in-memory stream: written through stdio, which may allocate (a memstream
         * grows), as the program's own writes to it do; lfheap holds nothing here. */
        out_init_sink(&o, stream_sink, fp, line, sizeof line);
    }
    stats_xml(&o);
    return 0;
}

/* ---- glibc's summaries ------------------------------------------------------------ */

LFH_EXPORT struct mallinfo2 lfh_mallinfo2(void)
{
    struct lfh_stats s;
    stats_fill(&s, NULL);
    struct mallinfo2 info = {0};
    /* glibc's fields: uordblks and fordblks are the arenas' bytes in use and free,
     * hblks and hblkhd the blocks in mappings of their own and their bytes, which
     * uordblks does not count again (programs add uordblks and hblkhd). The counts of
     * running threads may be summed mid-call: no difference goes below 0. Without
     * counters the heap's descriptors tell, counting the blocks thread caches hold as in
     * use (as glibc counts those of its tcache). */
    size_t in_arenas = s.bytes_in_use > s.huge_live_bytes ? s.bytes_in_use - s.huge_live_bytes : 0;
    info.arena = s.arena_bytes;
    info.hblks = s.huge_live;
    info.hblkhd = s.huge_live_bytes;
    if (!s.counters) {
        struct heap_usage usage;
        heap_usage_get(&usage);
        in_arenas = usage.arena_in_use < s.arena_bytes ? usage.arena_in_use : s.arena_bytes;
        info.hblks = usage.mapped_blocks;
        info.hblkhd = usage.mapped_bytes;
    }
    info.uordblks = in_arenas;
    info.fordblks = s.arena_bytes > in_arenas ? s.arena_bytes - in_arenas : 0;
    return info;
}

static int clamp_int(size_t value)
{
    return value > (size_t)INT32_MAX ? INT32_MAX : (int)value;
}

LFH_EXPORT struct mallinfo lfh_mallinfo(void)
{
    struct mallinfo2 wide = lfh_mallinfo2();
    struct mallinfo info = {0};
    info.arena = clamp_int(wide.arena);
    info.hblks = clamp_int(wide.hblks);
    info.hblkhd = clamp_int(wide.hblkhd);
    info.uordblks = clamp_int(wide.uordblks);
    info.fordblks = clamp_int(wide.fordblks);
    return info;
}

/* ---- LFHEAP_STATS ----------------------------------------------------------------- */

/* Read when the library is loaded (getenv does not allocate), so that a program that
 * clears its environment still gets its report; the file's name is copied, as the
 * program may change the string it came in, and made absolute, as it may change its
 * directory. */
static bool stats_at_exit;
static char stats_path[4096];

LFH_LOAD_CONSTRUCTOR static void stats_config(void)
{
    stats_at_exit = platform_env_switch("LFHEAP_STATS");
    const char *path = platform_getenv("LFHEAP_STATS_FILE");
    if (path && path[0])
        platform_absolute_path(path, stats_path, sizeof stats_path);
}

/* To stderr (or the descriptor lfh_malloc_stats_fd set), or appended to the file that
 * LFHEAP_STATS_FILE names: a program that closes its stderr before it exits (coreutils'
 * close_stdout does) or has none (a daemon) still gets its report there. A file that
 * cannot be opened leaves the report to stderr. */
LFH_EXIT_DESTRUCTOR static void stats_exit_report(void)
{
    if (!stats_at_exit)
        return;
    int fd = stats_path[0] ? platform_open_report(stats_path) : -1;
    if (fd < 0) {
        lfh_malloc_stats();
        return;
    }
    stats_print(fd, false);
    platform_close(fd);
}

/* ---- the standard names ----------------------------------------------------------- */

API_EXPORTS(API_EXPORTS_STATS_REPORT)
