#!/usr/bin/env bash
# Idle programs (issue 13, part 2): with LFHEAP_BACKGROUND=1 a program that frees its
# memory and stops calling lfheap gets its RSS back (the issue's scenario: 1 GiB in mixed
# sizes across 4 threads, freed, the threads left idle); the purger is one thread, started
# once, that never allocates; a forked child gets its own; a process whose main thread
# left by pthread_exit ends with its last thread; a thread whose handler left by
# siglongjmp still starts it; a refused thread start leaves lfheap
# working and is tried again. Without the switch lfheap starts no thread.
# Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap.so

run idle env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" build/t-plain/test_idle idle
run idle-off env -u LFHEAP_BACKGROUND LD_PRELOAD="$lib" build/t-plain/test_idle off
run idle-off-0 env LFHEAP_BACKGROUND=0 LD_PRELOAD="$lib" build/t-plain/test_idle off
run idle-once env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" build/t-plain/test_idle once
run idle-once-stats env LFHEAP_BACKGROUND=1 build/t-stats/test_idle once
run idle-fork env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" build/t-plain/test_idle fork
run idle-fork-fast-paths env LFHEAP_BACKGROUND=1 LFHEAP_PURGE_MS=3000 LD_PRELOAD="$lib" \
    build/t-plain/test_idle forkfast
run idle-fork-join env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" build/t-plain/test_idle forkjoin
run idle-last-thread env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" build/t-plain/test_idle last
run idle-last-thread-no-proc env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" \
    build/t-plain/test_idle last-no-proc
run idle-after-siglongjmp env LFHEAP_BACKGROUND=1 LD_PRELOAD="$lib" build/t-plain/test_idle jump
run idle-fault build/t-fault/test_idle fault
