/*
 * platform: the system calls and libc services lfheap uses, see platform.h.
 */
#include "platform.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

void *platform_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

bool platform_at_thread_exit(_Atomic unsigned *key_plus_one, void (*destructor)(void *),
                             void *value)
{
    /* Acquire load, acq_rel CAS: only the key's value is shared, and pthread orders its
     * own key table. Losers of the race to create the key delete their own: nobody
     * waits. */
    unsigned current = atomic_load_explicit(key_plus_one, memory_order_acquire);
    if (current == 0) {
        pthread_key_t key;
        if (pthread_key_create(&key, destructor) != 0)
            return false;
        unsigned expected = 0;
        if (atomic_compare_exchange_strong_explicit(key_plus_one, &expected, (unsigned)key + 1,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            current = (unsigned)key + 1;
        } else {
            pthread_key_delete(key);
            current = expected;
        }
    }
    return pthread_setspecific((pthread_key_t)(current - 1), value) == 0;
}
