/*
 * The concurrent tests of test_buddy.c with the buddy compiled into this program and a
 * random sched_yield() between the steps of its algorithms (BUDDY_CHAOS in
 * src/buddy.c). On a machine with few CPUs, threads otherwise switch only at time-slice
 * boundaries, so the interleavings inside TRYALLOC, FREENODE and UNMARK that matter
 * would be rare. Usage as test_buddy: test_buddy_chaos [scale].
 */
#include <sched.h>
#include <stdint.h>

static __thread uint64_t chaos_state;

static void chaos_point(void)
{
    if (!chaos_state)
        chaos_state = (uintptr_t)&chaos_state | 1;
    chaos_state ^= chaos_state << 13;
    chaos_state ^= chaos_state >> 7;
    chaos_state ^= chaos_state << 17;
    if ((chaos_state & 3) == 0)
        sched_yield();
}

#define BUDDY_CHAOS() chaos_point()
#include "../src/buddy.c"

#define TEST_BUDDY_CHAOS
#include "test_buddy.c"
