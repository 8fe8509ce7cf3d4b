/*
 * platform: the system calls and libc services lfheap uses, see platform.h. Thin: each
 * function is one call and its result, so that the layers above keep every decision.
 */
#include "platform.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- memory ----------------------------------------------------------------------- */

void *platform_map(void *hint, size_t size)
{
    void *p = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *platform_reserve(size_t size)
{
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void *platform_probe(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The calls whose failure the caller gets over (a deferred unmap, pages left resident, a
 * block moved instead of grown) leave errno as it was: a call that then succeeds must not
 * show the program an error (glibc's realloc of a mapped block that moves leaves it so). */
bool platform_unmap(void *addr, size_t size)
{
    int saved_errno = errno;
    bool done = munmap(addr, size) == 0;
    errno = saved_errno;
    return done;
}

bool platform_decommit(void *addr, size_t size)
{
    int saved_errno = errno; /* as platform_unmap */
    bool done = madvise(addr, size, MADV_DONTNEED) == 0;
    errno = saved_errno;
    return done;
}

/* The calling thread as a pidfd (linux/pidfd.h since Linux 6.15). Not the process
 * (PIDFD_SELF_THREAD_GROUP): that names the thread-group leader, and once the main thread
 * has called pthread_exit the kernel answers ESRCH for it; the thread's memory is the
 * process's all the same. */
#define PIDFD_SELF_THREAD (-10000)

long platform_decommit_ranges(const struct iovec *ranges, unsigned count)
{
#ifdef SYS_process_madvise
    return syscall(SYS_process_madvise, PIDFD_SELF_THREAD, ranges, (size_t)count, MADV_DONTNEED,
                   0U);
#else
    (void)ranges;
    (void)count;
    errno = ENOSYS;
    return -1;
#endif
}

/* The files lfheap reads and writes are opened, read and closed with the system calls
 * themselves: the C library's open, read and close are cancellation points (pthreads(7)),
 * so a thread with a cancellation pending would be cancelled inside malloc, which POSIX
 * does not make one, and the block it was making would be lost. */
static int file_open(const char *path, int flags, unsigned mode)
{
    return (int)syscall(SYS_openat, AT_FDCWD, path, flags, mode);
}

static long file_read(int fd, void *buf, size_t size)
{
    return syscall(SYS_read, fd, buf, size);
}

static void file_close(int fd)
{
    syscall(SYS_close, fd);
}

/* The number after `key` (which starts with its only newline) in a /proc status file:
 * -1 if the file or the key is missing, -2 if no digit follows it. Read 256 bytes at a
 * time: the caller may run on a small stack (a signal handler's alternate one). */
static long status_number(const char *path, const char *key, size_t key_length)
{
    int fd = file_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    char buf[256];
    size_t matched = 0;
    long number = -1;
    bool digits = false, done = false;
    long got;
    while (!done && (got = file_read(fd, buf, sizeof buf)) > 0)
        for (long i = 0; i < got && !done; i++) {
            if (matched < key_length) {
                /* A mismatch restarts the match at a newline, or before the key. */
                matched = buf[i] == key[matched] ? matched + 1 : buf[i] == '\n';
                continue;
            }
            if (buf[i] >= '0' && buf[i] <= '9') {
                number = (digits ? number * 10 : 0) + (buf[i] - '0');
                digits = true;
            } else if (digits || (buf[i] != ' ' && buf[i] != '\t')) {
                done = true;
                number = digits ? number : -2;
            }
        }
    file_close(fd);
    return number;
}

uint32_t platform_kernel_version(void)
{
    const unsigned char *base = (const unsigned char *)getauxval(AT_SYSINFO_EHDR);
    if (!base || memcmp(base, ELFMAG, SELFMAG) != 0)
        return 0;
    const ElfW(Ehdr) *header = (const ElfW(Ehdr) *)(const void *)base;
    const ElfW(Phdr) *segments = (const ElfW(Phdr) *)(const void *)(base + header->e_phoff);
    for (unsigned i = 0; i < header->e_phnum; i++) {
        if (segments[i].p_type != PT_NOTE)
            continue;
        /* The vDSO is mapped whole, from its first byte: offsets are from base. */
        const unsigned char *note = base + segments[i].p_offset;
        const unsigned char *end = note + segments[i].p_filesz;
        while ((size_t)(end - note) >= sizeof(ElfW(Nhdr))) {
            const ElfW(Nhdr) *entry = (const ElfW(Nhdr) *)(const void *)note;
            const unsigned char *name = note + sizeof *entry;
            const unsigned char *desc = name + ((entry->n_namesz + 3u) & ~3u);
            const unsigned char *next = desc + ((entry->n_descsz + 3u) & ~3u);
            if (next > end)
                break;
            if (entry->n_type == 0 && entry->n_namesz == sizeof "Linux" &&
                memcmp(name, "Linux", sizeof "Linux") == 0 && entry->n_descsz >= 4) {
                uint32_t version;
                memcpy(&version, desc, sizeof version);
                return version;
            }
            note = next;
        }
    }
    return 0;
}

int platform_thread_seccomp(void)
{
    static const char key[] = "\nSeccomp:\t";
    long mode = status_number("/proc/thread-self/status", key, sizeof key - 1);
    return mode == -1 ? -1 : mode < 0 || mode > 9 ? 9 : (int)mode;
}

#ifndef MADV_COLD
#define MADV_COLD 20 /* Linux 5.4; older kernels refuse it, which counts as locked */
#endif

bool platform_mapping_locked(const void *addr)
{
    int saved_errno = errno;
    bool refused = madvise((void *)addr, PLATFORM_PAGE_SIZE, MADV_COLD) != 0;
    errno = saved_errno;
    return refused;
}

bool platform_resident(const void *addr, size_t size, unsigned char *vec)
{
    return mincore((void *)addr, size, vec) == 0;
}

bool platform_wipe_on_fork(void *addr, size_t size)
{
    return madvise(addr, size, MADV_WIPEONFORK) == 0;
}

bool platform_advise_huge(void *addr, size_t size)
{
    return madvise(addr, size, MADV_HUGEPAGE) == 0;
}

bool platform_move(void *old, size_t old_size, void *dest, size_t new_size)
{
    return mremap(old, old_size, new_size, MREMAP_MAYMOVE | MREMAP_FIXED, dest) != MAP_FAILED;
}

void *platform_move_out(void *addr, size_t size, bool *unknown_flag)
{
    int saved_errno = errno; /* as platform_unmap: refused, the block is copied */
    /* glibc reads the fifth argument only with MREMAP_FIXED: pass it anyway. */
    void *moved = mremap(addr, size, size, MREMAP_MAYMOVE | MREMAP_DONTUNMAP, NULL);
    *unknown_flag = moved == MAP_FAILED && errno == EINVAL;
    errno = saved_errno;
    return moved == MAP_FAILED ? NULL : moved;
}

void *platform_remap(void *addr, size_t old_size, size_t new_size)
{
    int saved_errno = errno; /* as platform_move_out */
    void *moved = mremap(addr, old_size, new_size, MREMAP_MAYMOVE);
    errno = saved_errno;
    return moved == MAP_FAILED ? NULL : moved;
}

bool platform_grow(void *addr, size_t old_size, size_t new_size)
{
    int saved_errno = errno; /* as platform_unmap: refused, the block moves */
    bool done = mremap(addr, old_size, new_size, 0) != MAP_FAILED;
    errno = saved_errno;
    return done;
}

bool platform_protect(void *addr, size_t size, bool accessible)
{
    return mprotect(addr, size, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) == 0;
}

/* ---- threads ---------------------------------------------------------------------- */

unsigned platform_thread_key(_Atomic unsigned *key_plus_one, void (*destructor)(void *))
{
    /* Acquire load, acq_rel CAS: only the key's value is shared, and pthread orders its
     * own key table. Losers of the race to create the key delete their own: nobody
     * waits. */
    unsigned current = atomic_load_explicit(key_plus_one, memory_order_acquire);
    if (current == 0) {
        pthread_key_t key;
        if (pthread_key_create(&key, destructor) != 0)
            return 0;
        unsigned expected = 0;
        if (atomic_compare_exchange_strong_explicit(key_plus_one, &expected, (unsigned)key + 1,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            current = (unsigned)key + 1;
        } else {
            pthread_key_delete(key);
            current = expected;
        }
    }
    return current;
}

/* glibc keeps the values of the first 32 keys (PTHREAD_KEY_2NDLEVEL_SIZE) in the thread's
 * descriptor and those of the others in tables of 32 it allocates on first use. */
#define PLATFORM_KEYS_IN_PLACE 32

static bool platform_thread_key_allocates(unsigned key_plus_one)
{
    return key_plus_one > PLATFORM_KEYS_IN_PLACE;
}

bool platform_thread_key_late(_Atomic unsigned *key_plus_one, void (*destructor)(void *))
{
    return platform_thread_key_allocates(platform_thread_key(key_plus_one, destructor));
}

/* Set while this thread is inside pthread_setspecific for platform_at_thread_exit: the
 * allocation glibc may make there comes back to lfheap, and a registration of a key that
 * allocates made from it would install its own table for the keys of the same range,
 * which the outer call then replaces (platform_thread_key). A key kept in place is set
 * without allocating, also from inside another registration (a signal handler's). */
static __thread bool platform_registering;

bool platform_at_thread_exit(_Atomic unsigned *key_plus_one, void (*destructor)(void *),
                             void *value)
{
    unsigned key_plus = platform_thread_key(key_plus_one, destructor);
    if (key_plus == 0 || (platform_registering && platform_thread_key_allocates(key_plus)))
        return false;
    /* The fences keep the flag's stores around the call: the compiler sees no reader (the
     * one that reads it is reached through libc), and it must read true inside. Signal
     * fences: only this thread reads it. */
    platform_registering = true;
    atomic_signal_fence(memory_order_seq_cst);
    bool set = pthread_setspecific((pthread_key_t)(key_plus - 1), value) == 0;
    atomic_signal_fence(memory_order_seq_cst);
    platform_registering = false;
    return set;
}

void platform_thread_exit_rearm(_Atomic unsigned *key_plus_one, void (*destructor)(void *),
                                void *value)
{
    /* Acquire: as in platform_thread_key. */
    unsigned key_plus = atomic_load_explicit(key_plus_one, memory_order_acquire);
    if (key_plus == 0 || pthread_getspecific((pthread_key_t)(key_plus - 1)) != value)
        platform_at_thread_exit(key_plus_one, destructor, value);
}

bool platform_thread_start(void *(*fn)(void *), void *arg)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return false;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The new thread inherits the mask in force while it is created: all blocked. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t thread;
    int refused = pthread_create(&thread, &attr, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return refused == 0;
}

/* glibc 2.32 and later; weak, so that another C library leaves it NULL. */
extern char __libc_single_threaded __attribute__((weak));

bool platform_single_threaded(void)
{
    return &__libc_single_threaded != NULL && __libc_single_threaded != 0;
}

bool platform_at_fork_child(void (*fn)(void))
{
    return pthread_atfork(NULL, NULL, fn) == 0;
}

void platform_thread_name(const char *name)
{
    prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0);
}

void platform_sleep_ms(uint32_t ms)
{
    struct timespec pause = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
    nanosleep(&pause, NULL);
}

/* Reads the start of a small kernel file (/proc) into `text` (`size` bytes, NUL-ended),
 * on the caller's stack: no allocation. False if it cannot be read or is empty. errno
 * stays the program's: a malloc in the secure build reads one, and an open refused
 * (no /proc in a chroot, every descriptor taken) must not show through its success. */
static bool read_kernel_text(const char *path, char *text, size_t size)
{
    int saved_errno = errno;
    int fd = file_open(path, O_RDONLY | O_CLOEXEC, 0);
    long n = fd < 0 ? -1 : file_read(fd, text, size - 1);
    if (fd >= 0)
        file_close(fd);
    errno = saved_errno;
    if (n <= 0)
        return false;
    text[n] = '\0';
    return true;
}

long platform_max_map_count(void)
{
    char text[32];
    long limit = read_kernel_text("/proc/sys/vm/max_map_count", text, sizeof text)
                     ? strtol(text, NULL, 10)
                     : 0;
    return limit > 0 ? limit : 65530;
}

long platform_live_threads(void)
{
    /* /proc/self/stat is the main thread's line: "pid (name) state ..." with the thread
     * count in field 20. The name may hold spaces and parentheses: fields are counted
     * from the last ')'. */
    char line[1024];
    if (!read_kernel_text("/proc/self/stat", line, sizeof line))
        return -1;
    const char *field = strrchr(line, ')');
    if (!field || field[1] != ' ')
        return -1;
    field += 2; /* field 3: the state */
    char state = *field;
    for (int i = 3; i < 20; i++) {
        field = strchr(field, ' ');
        if (!field)
            return -1;
        field++;
    }
    long threads = strtol(field, NULL, 10);
    if (threads <= 0)
        return -1;
    return state == 'Z' || state == 'X' ? threads - 1 : threads;
}

unsigned platform_cpus(void)
{
    /* The affinity mask rather than the CPUs online: a process pinned to two CPUs runs at
     * most two threads at once. The kernel copies its own mask and returns its size in
     * bytes; a kernel mask wider than ours is EINVAL. */
    unsigned long mask[4096 / (8 * sizeof(unsigned long))];
    long bytes = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    if (bytes <= 0)
        return 0;
    unsigned cpus = 0;
    for (size_t i = 0; i < (size_t)bytes / sizeof mask[0]; i++)
        cpus += (unsigned)__builtin_popcountl(mask[i]);
    return cpus;
}

/* ---- the process ------------------------------------------------------------------ */

uint32_t platform_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint32_t)((uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u);
}

/* secure_getenv: a program running set-user-ID or set-group-ID, or with capabilities its
 * user lacks, got its environment from that less trusted user, and LFHEAP_STATS_FILE
 * would have it create or append to any file the program may write. */
const char *platform_getenv(const char *name)
{
    return secure_getenv(name);
}

bool platform_env_switch(const char *name)
{
    const char *env = platform_getenv(name);
    return env && env[0] != '\0' && !(env[0] == '0' && env[1] == '\0');
}

/* The length of the current directory's name in `out`, with a '/' after it, or 0 if it
 * does not fit in `size` bytes or cannot be read. */
static size_t directory_prefix(char *out, size_t size)
{
    if (!getcwd(out, size))
        return 0;
    size_t used = strlen(out);
    if (out[used - 1] != '/') /* only "/" ends with one */
        out[used++] = '/';    /* at most at out[size - 1]: the caller's check fails then */
    return used;
}

bool platform_absolute_path(const char *path, char *out, size_t size)
{
    size_t used = path[0] == '/' ? 0 : directory_prefix(out, size);
    size_t length = strlen(path);
    if ((path[0] != '/' && used == 0) || used + length >= size) {
        out[0] = '\0';
        return false;
    }
    memcpy(out + used, path, length + 1);
    return true;
}

int platform_open_report(const char *path)
{
    /* Opened without blocking, so that a FIFO nobody reads fails (ENXIO) where the open
     * would wait for a reader forever, at exit; then blocking again, so that a pipe's
     * reader gets the whole report, as from stderr. */
    int fd = file_open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
    if (fd >= 0) {
        int flags = fcntl(fd, F_GETFL);
        if (flags == -1 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
            file_close(fd);
            return -1;
        }
    }
    return fd;
}

void platform_close(int fd)
{
    file_close(fd);
}

uint64_t platform_pid(void)
{
    return (uint64_t)getpid();
}

void platform_random_bytes(uint64_t out[2])
{
    /* AT_RANDOM: 16 bytes the kernel fills at exec for the process's own use (glibc takes
     * its stack and pointer guards from them; reading them takes nothing away). */
    out[0] = out[1] = 0;
    const void *bytes = (const void *)getauxval(AT_RANDOM);
    if (bytes)
        memcpy(out, bytes, 2 * sizeof out[0]);
}

long platform_write(int fd, const void *buf, size_t len)
{
    return syscall(SYS_write, fd, buf, len);
}

uintptr_t platform_context_ip(const void *context)
{
    const ucontext_t *uc = context;
#if defined(__x86_64__)
    return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)uc->uc_mcontext.pc;
#else
#error "platform: read the interrupted instruction pointer from the ucontext here"
#endif
}
