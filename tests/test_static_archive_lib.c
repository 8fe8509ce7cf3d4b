/*
 * The shared library of tests/test_static_archive.c. It calls what the executable never
 * calls itself (posix_memalign and the other aligned routines, realloc, sigaction,
 * signal), so its calls bind to whatever the executable brought in from liblfheap.a, or
 * else to glibc's.
 */
#include "lfheap.h"
#include "test_static_archive.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void *lib_aligned(int kind, size_t alignment, size_t size)
{
    void *p = NULL;
    switch (kind) {
    case 0:
        if (posix_memalign(&p, alignment, size) != 0)
            p = NULL;
        break;
    case 1:
        p = aligned_alloc(alignment, size);
        break;
    case 2:
        p = memalign(alignment, size);
        break;
    default:
        p = valloc(size);
        break;
    }
    return p;
}

void *lib_realloc(void *p, size_t size)
{
    return realloc(p, size);
}

size_t lib_lfheap_usable(void *p)
{
    return lfh_malloc_usable_size(p);
}

static volatile sig_atomic_t handled;
static volatile sig_atomic_t handler_ok;

/* A handler that allocates: from the aligned routine the test is about, and from malloc. */
static void handler(int sig)
{
    (void)sig;
    void *a = NULL;
    int ok = posix_memalign(&a, 256, 3000) == 0 && ((uintptr_t)a & 255) == 0 &&
             lfh_malloc_usable_size(a) >= 3000;
    char *b = malloc(100);
    ok = ok && b && lfh_malloc_usable_size(b) >= 100;
    if (b)
        memset(b, 0x5a, 100);
    free(b);
    free(a);
    handler_ok = ok;
    handled++;
}

/* What the kernel holds as the handler of sig (the wrapper's address when lfheap's
 * sigaction installed it), asked with the raw system call, behind everyone's back. The
 * kernel's struct sigaction begins with the handler, and its signal set is 8 bytes. */
static void *kernel_handler(int sig)
{
    void *k[8] = {0};
    if (syscall(SYS_rt_sigaction, sig, NULL, k, 8))
        return NULL;
    return k[0];
}

struct lib_signal_result lib_signal(int sig, int how)
{
    struct lib_signal_result r = {0};
    handled = 0;
    handler_ok = 0;
    if (how == 0) {
        struct sigaction act;
        memset(&act, 0, sizeof act);
        act.sa_handler = handler;
        sigemptyset(&act.sa_mask);
        if (sigaction(sig, &act, NULL))
            return r;
    } else if (signal(sig, handler) == SIG_ERR) {
        return r;
    }
    struct sigaction old;
    r.reported_own = sigaction(sig, NULL, &old) == 0 && old.sa_handler == handler;
    r.kernel_handler = kernel_handler(sig);
    r.own_handler = (void *)handler;
    raise(sig);
    r.handled = handled;
    r.handler_ok = handler_ok;
    signal(sig, SIG_DFL);
    return r;
}
