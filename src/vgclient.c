/*
 * vgclient: the one answer vgclient.h caches, whether this process runs under valgrind's
 * memcheck, so that checks on frequent slow paths ask it with a load instead of a client
 * request.
 */
#include "vgclient.h"

#ifdef VGCLIENT_ENABLED

_Atomic int vgclient_state;

int vgclient_state_ask(void)
{
    int state = vgclient_memcheck() ? 2 : 1;
    /* Relaxed: every thread that asks stores the same answer. */
    atomic_store_explicit(&vgclient_state, state, memory_order_relaxed);
    return state;
}

#endif
