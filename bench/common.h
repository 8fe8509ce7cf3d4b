/*
 * Helpers shared by the benchmark programs in bench/: command-line knobs, a clock, a
 * small random generator, tags written into blocks and checked before they are freed,
 * the one machine-readable result line, and resident-set sampling.
 *
 * Every program calls only the standard malloc API, so any allocator can be swapped in
 * with LD_PRELOAD. Every program validates its own work and ends through bench_fail()
 * (exit status 2, one line on stderr) when a block does not hold what was written into
 * it, so that a broken allocator can never look fast. The helpers here never call
 * malloc themselves.
 */
#ifndef LFHEAP_BENCH_COMMON_H
#define LFHEAP_BENCH_COMMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of a program whose self-validation failed (2) or whose arguments were
 * wrong (64, EX_USAGE), so that a runner can tell corruption from misuse. */
enum { BENCH_EXIT_CORRUPT = 2, BENCH_EXIT_USAGE = 64 };

/* One command-line knob: `--name=value` or `--name value`. Integer knobs (`value`)
 * accept a k, m or g suffix (powers of 1000), so `--n=10m` means ten million; a knob
 * with `text` set instead takes a string (a path). */
struct bench_opt {
    const char *name;
    long *value;
    const char *help;
    const char **text;
};
#define BENCH_INT(knob, var, about)                                                                \
    {                                                                                              \
        .name = (knob), .value = &(var), .help = (about)                                           \
    }
#define BENCH_TEXT(knob, var, about)                                                               \
    {                                                                                              \
        .name = (knob), .text = &(var), .help = (about)                                            \
    }
#define BENCH_END                                                                                  \
    {                                                                                              \
        .name = NULL                                                                               \
    }

/* Parses argv into the knobs (a NULL-named entry ends the table); `--help` prints them
 * with their current (default) values and exits. `what` is the one-line description. */
void bench_parse(int argc, char **argv, const char *workload, const char *what,
                 struct bench_opt *opts);

/* Fails the run: prints "WORKLOAD: FAILED: message" on stderr and exits with
 * BENCH_EXIT_CORRUPT. Safe to call from any thread. */
void bench_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

/* Prints the result line "result workload=W threads=T k=v ... peak_rss_kib=N" on
 * stdout; `fmt` gives the workload-specific fields, peak_rss_kib is the process's peak
 * resident set so far (VmHWM). */
void bench_result(int threads, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Runs fn(tid, ctx) for tid = 0..threads-1 on new threads that wait for each other
 * and start together; returns the seconds from the first one's start until the last
 * one has finished, as the threads' own clocks read them. */
double bench_run_threads(int threads, void (*fn)(int tid, void *ctx), void *ctx);

/* Creates a thread, retrying while the system is momentarily out of threads (EAGAIN);
 * fails the run if it cannot. */
void bench_thread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *),
                         void *arg);

/* Sleeps for the given number of microseconds. */
void bench_sleep_us(long usec);

/* Seconds on the monotonic clock. */
double bench_now(void);

/* Resident set size of this process in bytes, from /proc/self/statm (no malloc). */
size_t bench_rss(void);

/* xorshift64* generator: fast, good enough for picking slots and sizes. */
struct bench_rng {
    uint64_t state;
};
void bench_rng_seed(struct bench_rng *rng, uint64_t seed);
uint64_t bench_rng_next(struct bench_rng *rng);
/* Uniform in [0, bound). */
static inline uint64_t bench_rng_below(struct bench_rng *rng, uint64_t bound)
{
    return bench_rng_next(rng) % bound;
}

/* Sizes min, min+step, ..., max repeated to fill `count` entries, then shuffled by
 * Fisher-Yates: llheap's "fisher" distribution (every size equally often, random
 * order). The array is an mmap'd region so that it costs the allocator nothing. */
uint32_t *bench_sizes_fisher(size_t count, uint32_t min, uint32_t max, uint32_t step,
                             struct bench_rng *rng);
void bench_sizes_release(uint32_t *sizes, size_t count);

/* Memory for the programs' own bookkeeping (slot arrays, queues) taken straight from the
 * OS, zeroed, so that the allocator under test sees only the workload's requests. */
void *bench_map(size_t bytes);
void bench_unmap(void *p, size_t bytes);

/* A tag identifies one allocation (which thread, which sequence number). It is written
 * into the first min(size, 8) bytes of a block and, in blocks of 16 bytes or more, its
 * complement into the last 8 bytes, so that overlapping blocks, stale reuse and
 * scribbling over a live block are all seen when the block is checked before free. */
static inline uint64_t bench_tag(uint64_t owner, uint64_t seq)
{
    uint64_t x = (owner << 40) ^ seq ^ 0x5bd1e9955bd1e995ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return x | 1; /* never zero: a zeroed block must not pass */
}
void bench_tag_write(void *block, size_t size, uint64_t tag);
/* Returns true if the block still holds the tag. */
bool bench_tag_ok(const void *block, size_t size, uint64_t tag);
/* Checks the tag and fails the run (naming `what`) if it was overwritten. */
void bench_tag_check(const void *block, size_t size, uint64_t tag, const char *what);

/* Fails the run if malloc returned NULL or a pointer not aligned to 8 bytes (every
 * block of 8 bytes or more must be, by the C standard's fundamental alignment). */
/* Only the pointer's value is examined, never the memory behind it (GCC would otherwise
 * take a fresh block passed here for a read of uninitialised memory). */
#if defined(__GNUC__) && !defined(__clang__)
__attribute__((access(none, 1)))
#endif
void bench_check_ptr(const void *p, size_t size, const char *what);

/* Stops the compiler from optimising away an allocation whose result is unused. */
static inline void bench_escape(void *p)
{
    __asm__ volatile("" : : "r"(p) : "memory");
}

#endif
