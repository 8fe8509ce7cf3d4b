/*
 * Implementation of the helpers in common.h. Nothing here calls malloc: messages are
 * formatted into stack buffers and written with write(2), bookkeeping memory comes from
 * mmap, so the allocator under test sees only the workload's own requests.
 */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const char *bench_workload = "bench";

static void write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        buf += n;
        len -= (size_t)n;
    }
}

void bench_fail(const char *fmt, ...)
{
    char buf[512];
    int len = snprintf(buf, sizeof buf, "%s: FAILED: ", bench_workload);
    va_list ap;
    va_start(ap, fmt);
    len += vsnprintf(buf + len, sizeof buf - (size_t)len, fmt, ap);
    va_end(ap);
    if (len > (int)sizeof buf - 2)
        len = (int)sizeof buf - 2;
    buf[len++] = '\n';
    write_all(2, buf, (size_t)len);
    _exit(BENCH_EXIT_CORRUPT);
}

/* The process's peak resident set (VmHWM in /proc/self/status) in KiB. Unlike the
 * rusage maximum a parent sees, it starts afresh at exec, so it does not include the
 * memory of whatever launched us. */
static long peak_rss_kib(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *p = strstr(buf, "VmHWM:");
    return p ? strtol(p + 6, NULL, 10) : -1;
}

void bench_result(int threads, const char *fmt, ...)
{
    char buf[1024];
    int len = snprintf(buf, sizeof buf, "result workload=%s threads=%d ", bench_workload, threads);
    va_list ap;
    va_start(ap, fmt);
    len += vsnprintf(buf + len, sizeof buf - (size_t)len, fmt, ap);
    va_end(ap);
    if (len < (int)sizeof buf - 40)
        len += snprintf(buf + len, sizeof buf - (size_t)len, " peak_rss_kib=%ld", peak_rss_kib());
    if (len > (int)sizeof buf - 2)
        len = (int)sizeof buf - 2;
    buf[len++] = '\n';
    write_all(1, buf, (size_t)len);
}

static bool parse_value(const char *text, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text)
        return false;
    long scale = 1;
    switch (*end) {
    case 'k':
    case 'K':
        scale = 1000L;
        end++;
        break;
    case 'm':
    case 'M':
        scale = 1000L * 1000;
        end++;
        break;
    case 'g':
    case 'G':
        scale = 1000L * 1000 * 1000;
        end++;
        break;
    default:
        break;
    }
    if (*end != '\0')
        return false;
    *out = v * scale;
    return true;
}

static void usage(const char *workload, const char *what, const struct bench_opt *opts, int fd)
{
    char buf[256];
    int len =
        snprintf(buf, sizeof buf, "usage: %s [--knob=value ...]\n%s\nknobs:\n", workload, what);
    write_all(fd, buf, (size_t)len);
    for (const struct bench_opt *o = opts; o->name; o++) {
        if (o->text)
            len = snprintf(buf, sizeof buf, "  --%-12s %-44s (default %s)\n", o->name, o->help,
                           *o->text ? *o->text : "none");
        else
            len = snprintf(buf, sizeof buf, "  --%-12s %-44s (default %ld)\n", o->name, o->help,
                           *o->value);
        write_all(fd, buf, (size_t)len);
    }
}

void bench_parse(int argc, char **argv, const char *workload, const char *what,
                 struct bench_opt *opts)
{
    bench_workload = workload;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(workload, what, opts, 1);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0)
            goto bad;
        arg += 2;
        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        struct bench_opt *o;
        for (o = opts; o->name; o++)
            if (strlen(o->name) == name_len && strncmp(o->name, arg, name_len) == 0)
                break;
        if (!o->name)
            goto bad;
        const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
        if (!value)
            goto bad;
        if (o->text)
            *o->text = value;
        else if (!parse_value(value, o->value))
            goto bad;
        continue;
    bad:
        usage(workload, what, opts, 2);
        char buf[256];
        int len = snprintf(buf, sizeof buf, "%s: bad argument '%s'\n", workload, argv[i]);
        write_all(2, buf, (size_t)len);
        exit(BENCH_EXIT_USAGE);
    }
}

struct thread_start {
    pthread_t thread;
    int tid;
    void (*fn)(int tid, void *ctx);
    void *ctx;
    pthread_barrier_t *start;
    double began, ended; /* this thread's clock around fn */
};

static void *thread_main(void *arg)
{
    struct thread_start *ts = arg;
    pthread_barrier_wait(ts->start);
    ts->began = bench_now();
    ts->fn(ts->tid, ts->ctx);
    ts->ended = bench_now();
    return NULL;
}

double bench_run_threads(int threads, void (*fn)(int tid, void *ctx), void *ctx)
{
    if (threads < 1)
        bench_fail("need at least one thread");
    size_t bytes = (size_t)threads * sizeof(struct thread_start);
    struct thread_start *ts = bench_map(bytes);
    pthread_barrier_t start;
    /* The threads time themselves, from the first one's start to the last one's end: main
     * would read its clock only when it next gets a core, which with as many threads as
     * cores can be a scheduler slice after they started or stopped. */
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int i = 0; i < threads; i++) {
        ts[i] = (struct thread_start){.tid = i, .fn = fn, .ctx = ctx, .start = &start};
        bench_thread_create(&ts[i].thread, NULL, thread_main, &ts[i]);
    }
    for (int i = 0; i < threads; i++)
        pthread_join(ts[i].thread, NULL);
    double t0 = ts[0].began, t1 = ts[0].ended;
    for (int i = 1; i < threads; i++) {
        if (ts[i].began < t0)
            t0 = ts[i].began;
        if (ts[i].ended > t1)
            t1 = ts[i].ended;
    }
    pthread_barrier_destroy(&start);
    bench_unmap(ts, bytes);
    return t1 - t0;
}

void bench_thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                         void *arg)
{
    int err = 0;
    for (int attempt = 0; attempt < 1000; attempt++) {
        err = pthread_create(thread, attr, fn, arg);
        if (err != EAGAIN)
            break;
        bench_sleep_us(1000);
    }
    if (err != 0)
        bench_fail("pthread_create: %s", strerror(err));
}

void bench_sleep_us(long usec)
{
    struct timespec ts = {.tv_sec = usec / 1000000, .tv_nsec = (usec % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

size_t bench_rss(void)
{
    char buf[128];
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* Fields: size resident shared text lib data dt (pages). */
    const char *p = strchr(buf, ' ');
    if (!p)
        return 0;
    return (size_t)strtoul(p + 1, NULL, 10) * (size_t)sysconf(_SC_PAGESIZE);
}

void bench_rng_seed(struct bench_rng *rng, uint64_t seed)
{
    /* splitmix64 step so that small consecutive seeds give unrelated streams */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    rng->state = z ? z : 1;
}

uint64_t bench_rng_next(struct bench_rng *rng)
{
    uint64_t x = rng->state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng->state = x;
    return x * 0x2545f4914f6cdd1dull;
}

void *bench_map(size_t bytes)
{
    if (bytes == 0)
        bytes = 1;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        bench_fail("mmap of %zu bytes for bookkeeping failed", bytes);
    return p;
}

void bench_unmap(void *p, size_t bytes)
{
    if (p)
        munmap(p, bytes ? bytes : 1);
}

uint32_t *bench_sizes_fisher(size_t count, uint32_t min, uint32_t max, uint32_t step,
                             struct bench_rng *rng)
{
    if (step == 0 || max < min)
        bench_fail("bad size range %u..%u step %u", min, max, step);
    uint32_t *sizes = bench_map(count * sizeof *sizes);
    uint32_t kinds = (max - min) / step + 1;
    for (size_t i = 0; i < count; i++)
        sizes[i] = min + (uint32_t)(i % kinds) * step;
    for (size_t i = count; i > 1; i--) {
        size_t j = (size_t)bench_rng_below(rng, i);
        uint32_t t = sizes[i - 1];
        sizes[i - 1] = sizes[j];
        sizes[j] = t;
    }
    return sizes;
}

void bench_sizes_release(uint32_t *sizes, size_t count)
{
    bench_unmap(sizes, count * sizeof *sizes);
}

void bench_tag_write(void *block, size_t size, uint64_t tag)
{
    unsigned char *b = block;
    memcpy(b, &tag, size < 8 ? size : 8);
    if (size >= 16) {
        uint64_t tail = ~tag;
        memcpy(b + size - 8, &tail, 8);
    }
}

bool bench_tag_ok(const void *block, size_t size, uint64_t tag)
{
    const unsigned char *b = block;
    if (memcmp(b, &tag, size < 8 ? size : 8) != 0)
        return false;
    if (size >= 16) {
        uint64_t tail = ~tag;
        if (memcmp(b + size - 8, &tail, 8) != 0)
            return false;
    }
    return true;
}

void bench_tag_check(const void *block, size_t size, uint64_t tag, const char *what)
{
    if (!bench_tag_ok(block, size, tag)) {
        uint64_t head = 0;
        memcpy(&head, block, size < 8 ? size : 8);
        bench_fail("%s: block %p (%zu bytes) was overwritten while live: "
                   "expected tag %016llx, found %016llx",
                   what, block, size, (unsigned long long)tag, (unsigned long long)head);
    }
}

void bench_check_ptr(const void *p, size_t size, const char *what)
{
    if (!p)
        bench_fail("%s: malloc(%zu) returned NULL", what, size);
    if (size >= 8 && ((uintptr_t)p & 7) != 0)
        bench_fail("%s: malloc(%zu) returned misaligned %p", what, size, p);
}
