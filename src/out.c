/*
 * out: see out.h. write(2) is the only call; errno is saved and restored, so a report
 * leaves the program's errno as it was. It is made as a raw system call (platform_write),
 * not through libc's write(), which is a cancellation point: a thread with a cancellation
 * pending would be cancelled in the middle of malloc_stats (or of a debug report) and
 * never return from it, where glibc's malloc_stats completes.
 */
#include "out.h"

#include "platform.h"

#include <errno.h>
#include <unistd.h>

void out_init(struct out *o, int fd, char *buf, size_t size)
{
    o->fd = fd;
    o->sink = NULL;
    o->len = 0;
    o->size = size;
    o->buf = buf;
}

void out_init_sink(struct out *o, void (*sink)(void *sink_arg, const char *text, size_t len),
                   void *sink_arg, char *buf, size_t size)
{
    out_init(o, -1, buf, size);
    o->sink = sink;
    o->sink_arg = sink_arg;
}

void out_flush(struct out *o)
{
    int saved = errno;
    if (o->sink) {
        o->sink(o->sink_arg, o->buf, o->len);
        o->len = 0;
        errno = saved;
        return;
    }
    size_t done = 0;
    while (done < o->len) {
        long n = platform_write(o->fd, o->buf + done, o->len - done);
        if (n > 0)
            done += (size_t)n;
        else if (n < 0 && errno == EINTR)
            continue;
        else
            break;
    }
    o->len = 0;
    errno = saved;
}

static void out_char(struct out *o, char c)
{
    if (o->len == o->size)
        out_flush(o);
    o->buf[o->len++] = c;
}

void out_str(struct out *o, const char *s)
{
    while (*s)
        out_char(o, *s++);
}

/* Digits of `value` in `base`, most significant first, a separator every three digits
 * if `separator` is not 0. */
static void out_digits(struct out *o, uint64_t value, unsigned base, char separator)
{
    char digits[32];
    unsigned n = 0;
    do {
        if (separator && n % 4 == 3)
            digits[n++] = separator;
        digits[n++] = "0123456789abcdef"[value % base];
        value /= base;
    } while (value);
    while (n)
        out_char(o, digits[--n]);
}

void out_dec(struct out *o, uint64_t value)
{
    out_digits(o, value, 10, 0);
}

void out_num(struct out *o, uint64_t value)
{
    out_digits(o, value, 10, ',');
}

void out_hex(struct out *o, uintptr_t value)
{
    out_str(o, "0x");
    out_digits(o, value, 16, 0);
}

void out_report_begin(struct out *o, char (*line)[OUT_LINE], const char *kind)
{
    out_init(o, STDERR_FILENO, *line, sizeof *line);
    out_str(o, "lfheap: ");
    out_str(o, kind);
    out_str(o, ": ");
}

void out_report_call(struct out *o, const char *routine, const void *ptr)
{
    out_str(o, routine);
    out_str(o, "(");
    out_hex(o, (uintptr_t)ptr);
}
