/*
 * An allocation that bypasses the caches (a signal handler's, with its thread's cache
 * hidden; a thread-exit destructor's) takes every free block of a superblock whose
 * uncarved tail another cache holds, and is stopped (parking point heap.give_back_cas)
 * before it gives the rest back. Meanwhile that cache gives its tail back (malloc_trim).
 * The stopped give-back, when it goes on, must leave the tail in the anchor: it once
 * passed on its empty range's end, the superblock's end, which set the anchor's tail to
 * none and lost the uncarved blocks (docs/ARCHITECTURE.md, "Carve frontier and free
 * mark"). Linked with the parking variant (src/park.h), whose hook this test installs.
 */
#include "heap.h"
#include "lfheap.h"
#include "pagemap.h"
#include "park.h"
#include "tcache.h"
#include "testutil.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { BLOCK = 5000 }; /* a medium class, the only one this program uses */

static char *held[3]; /* the holder's blocks, carved in a row */
static sem_t holder_go, holder_done, parked, release;
static __thread bool stop_at_give_back; /* set in the uncached thread only */
static _Atomic bool stopped;

/* Waits for `sem`; a step that never comes (the scenario went another way) is a FAIL
 * after two minutes, not a hang. */
static void wait_for(sem_t *sem, const char *what)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 120;
    int got;
    while ((got = sem_timedwait(sem, &deadline)) != 0 && errno == EINTR) {
    }
    if (got != 0) {
        printf("FAIL give_back_keeps_a_tail_given_meanwhile: no %s\n", what);
        exit(1);
    }
}

static void park_here(enum park_point point)
{
    if (point != PARK_HEAP_GIVE_BACK_CAS || !stop_at_give_back)
        return;
    stop_at_give_back = false;
    atomic_store(&stopped, true);
    sem_post(&parked);
    wait_for(&release, "release of the stopped give-back");
}

static void *holder(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++)
        held[i] = lfh_malloc(BLOCK);
    sem_post(&holder_done);
    wait_for(&holder_go, "go for the trim");
    lfh_malloc_trim(0); /* gives the bump range back */
    sem_post(&holder_done);
    wait_for(&holder_go, "go for the last free");
    lfh_free(held[2]);
    return NULL;
}

static void *uncached(void *arg)
{
    (void)arg;
    struct tcache_hidden frame;
    struct tcache_hidden *nested = tcache_hide_outermost() ? NULL : &frame;
    tcache_hide(nested); /* as lfheap's signal wrapper does for a handler */
    lfh_free(held[0]);   /* the superblock goes on a partial stack */
    lfh_free(held[1]);   /* two free blocks: one to hand out, one to give back */
    stop_at_give_back = true;
    void *taken = lfh_malloc(BLOCK);
    stop_at_give_back = false;
    tcache_unhide(nested);
    CHECK(atomic_load(&stopped));
    CHECK(taken == held[1]); /* it took that superblock's free blocks */
    return taken;
}

static void give_back_keeps_a_tail_given_meanwhile(void)
{
    pthread_t h, u;
    REQUIRE(pthread_create(&h, NULL, holder, NULL) == 0);
    wait_for(&holder_done, "blocks from the holder");
    struct descriptor *desc = pagemap_desc_or_foreign(held[0]);
    size_t size = desc->block_size;
    uint32_t next = (uint32_t)((size_t)(held[2] - desc->start) / size) + 1;
    /* A fresh superblock's first blocks, its bump range still the holder's. */
    REQUIRE(held[0] == desc->start && held[1] == held[0] + size && held[2] == held[1] + size &&
            next < desc->max_count);
    CHECK(anchor_tail(atomic_load(&desc->anchor)) == desc->max_count);

    /* The uncached malloc's fill holds no range: the anchor said none. */
    REQUIRE(pthread_create(&u, NULL, uncached, NULL) == 0);
    wait_for(&parked, "stop at heap.give_back_cas");
    sem_post(&holder_go);
    wait_for(&holder_done, "trim by the holder");
    uint64_t given = atomic_load(&desc->anchor);
    CHECK(anchor_tail(given) == next); /* the holder's tail is in the anchor */
    sem_post(&release);
    void *taken;
    pthread_join(u, &taken);

    uint64_t after = atomic_load(&desc->anchor);
    CHECK(anchor_tail(after) == next);
    CHECK(anchor_count(after) == anchor_count(given) + 1); /* the rest went back */
    CHECK(atomic_load(&desc->carved_limit) == heap_block_key(desc, desc->start + next * size));
    lfh_free(taken);
    sem_post(&holder_go);
    pthread_join(h, NULL);
}

int main(void)
{
    REQUIRE(sem_init(&holder_go, 0, 0) == 0 && sem_init(&holder_done, 0, 0) == 0 &&
            sem_init(&parked, 0, 0) == 0 && sem_init(&release, 0, 0) == 0);
    atomic_store_explicit(&park_hook, park_here, memory_order_release);
    RUN(give_back_keeps_a_tail_given_meanwhile);
    atomic_store_explicit(&park_hook, NULL, memory_order_release);
    return test_exit_status();
}
