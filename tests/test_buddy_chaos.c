/*
 * The concurrent tests of test_buddy.c with the buddy compiled into this program and a
 * random switch to another thread between the steps of its algorithms (BUDDY_CHAOS in
 * src/buddy_impl.h). On a machine with few CPUs, threads otherwise switch only at time-slice
 * boundaries, so the interleavings inside TRYALLOC, FREENODE and UNMARK that matter
 * would be rare. Usage as test_buddy: test_buddy_chaos [scale].
 */
#include <stdint.h>
#include <sys/prctl.h>
#include <time.h>

static __thread uint64_t chaos_state;

/* The switch is a sleep of a nanosecond: the thread blocks, so another one runs. Not
 * sched_yield: the EEVDF scheduler (Linux 6.6 on) pushes a yielding thread's deadline back
 * by a whole slice per call, so beside busy processes the test's threads got a fraction
 * of a percent of a CPU and the run took the better part of an hour; a thread that
 * sleeps keeps its place. */
static void chaos_point(void)
{
    if (!chaos_state)
        chaos_state = (uintptr_t)&chaos_state | 1;
    chaos_state ^= chaos_state << 13;
    chaos_state ^= chaos_state >> 7;
    chaos_state ^= chaos_state << 17;
    if ((chaos_state & 3) == 0)
        nanosleep(&(struct timespec){0, 1}, NULL);
}

/* Timer slack, which would stretch each sleep to 50 us, cut to a nanosecond; the threads
 * the tests create inherit it. */
__attribute__((constructor)) static void chaos_no_slack(void)
{
    prctl(PR_SET_TIMERSLACK, 1UL);
}

#define BUDDY_CHAOS() chaos_point()
/* With the tree's invariant checks (src/invariant.h), as in the tests' library. */
#define LFHEAP_CHECKS
#include "../src/buddy.c"
#include "../src/buddy_flat.c"
#include "../src/buddy_packed.c"

#define TEST_BUDDY_CHAOS
#include "test_buddy.c"
