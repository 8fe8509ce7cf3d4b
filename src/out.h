/*
 * out: formatted output for the reports of the statistics and debug builds, without
 * stdio and without allocating (docs/DESIGN.md, property 6): text and numbers are gathered in
 * a buffer on the caller's stack and written with write(2) when it fills or is flushed
 * (or handed to a sink of the caller's: malloc_info's to a stream with no descriptor).
 * Used by malloc_stats, malloc_info, the debug build's error lines and the reports of
 * broken invariants, which may run while the heap is in any state, even inside a failed
 * allocation.
 */
#ifndef LFHEAP_OUT_H
#define LFHEAP_OUT_H

#include <stddef.h>
#include <stdint.h>

/* The buffer of an error report (the debug and secure builds): one report line many
 * times over, on whatever stack the failing call runs on, a signal handler's too. */
#define OUT_LINE 1024

/* The buffer of a statistics report (about 1.6 KB), written in one write(2) when it fits:
 * a write of at most PIPE_BUF (4,096) bytes to a pipe is atomic (POSIX), and one to a
 * file opened with O_APPEND lands at its end in one piece, so that the reports of
 * processes exiting together into one stderr or LFHEAP_STATS_FILE do not interleave.
 * 2 KiB, not PIPE_BUF, because it is on the caller's stack, which may be a small one. */
#define OUT_REPORT 2048

/* Output gathered in the caller's buffer. */
struct out {
    int fd;
    /* If set, what is buffered goes to sink(sink_arg, ...) instead of to fd. */
    void (*sink)(void *sink_arg, const char *text, size_t len);
    void *sink_arg;
    size_t len, size;
    char *buf;
};

/* Output to `fd`, gathered in the caller's `size` bytes at `buf`. */
void out_init(struct out *o, int fd, char *buf, size_t size);
/* For a caller whose output has no file descriptor (malloc_info to an in-memory stream):
 * the text goes to `sink`, which may do what this layer avoids (stdio, allocating). */
void out_init_sink(struct out *o, void (*sink)(void *sink_arg, const char *text, size_t len),
                   void *sink_arg, char *buf, size_t size);
void out_str(struct out *o, const char *s);
/* A decimal number as is (for XML and machine-read text). */
void out_dec(struct out *o, uint64_t value);
/* A decimal number with thousands separators, as llheap prints them: 12,715. */
void out_num(struct out *o, uint64_t value);
/* An address in hex, 0x-prefixed. */
void out_hex(struct out *o, uintptr_t value);
/* The start of an error report on stderr, "lfheap: <kind>: ", gathered in `line`, and
 * the call it names, "<routine>(<address>" (the debug and secure builds' one-line
 * reports). */
void out_report_begin(struct out *o, char (*line)[OUT_LINE], const char *kind);
void out_report_call(struct out *o, const char *routine, const void *ptr);
/* Writes what is buffered; retries partial writes and EINTR, gives up on other errors
 * (a report that cannot be written is dropped, never waited for). */
void out_flush(struct out *o);

#endif
