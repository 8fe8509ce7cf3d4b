#!/usr/bin/env bash
# Parking points (issue 6): a thread stopped at any of the named points inside lfheap's
# slow paths (src/park.h) never blocks the others: tests/test_parking.c, linked with the
# parking variant, parks a thread at each point in turn while other threads complete a
# million operations of every kind (one PASS/FAIL line per point), and again under
# ThreadSanitizer with fewer operations. Then the check that the release libraries carry
# no trace of the points. With LFHEAP_TEST_LONG set (make test-long) it also runs the
# long variants: ten times the operations per point.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh


export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
run park build/t-park/test_parking 1000000
run park-tsan build/t-park-tsan/test_parking 30000
# An uncached allocation stopped before its give-back while another cache gives back the
# tail of the same superblock: the tail stays in the anchor.
run park-uncached-tail build/t-park/test_uncached_tail
# A dirty stack's pop stopped while one run is popped and pushed 2^27 times: nothing is
# handed out twice (a minute's purge delay, so that no purge reorders the stack).
run park-dirty-pop-wrap env LFHEAP_PURGE_MS=60000 build/t-park/test_parking 0 arena.dirty_pop_wrap
# A buddy UNMARK stopped before its CAS while one chunk below is allocated and freed 2^24
# times (the old 24-bit version's period): no chunk is handed out over a live one.
run park-buddy-unmark-wrap build/t-park/test_parking 0 buddy.unmark_wrap
# A purge stopped after it found a block's tail due, while the block's run is freed and
# registered again by a new block: the new block's tail stays (a second's delay).
run park-tail-reregistered env LFHEAP_PURGE_MS=1000 build/t-park/test_parking 0 \
    arena.tail_reregistered
# The background purger's start (arena.purger_claimed) needs the switch, and a process
# where no purger ran yet.
run park-purger env LFHEAP_BACKGROUND=1 build/t-park/test_parking 1000000 arena.purger_claimed
run park-purger-tsan env LFHEAP_BACKGROUND=1 build/t-park-tsan/test_parking 30000 \
    arena.purger_claimed
# malloc_trim's release of free huge pages (arena.trim_taken) needs LFHEAP_HUGEPAGES.
run park-trim-huge env LFHEAP_HUGEPAGES=1 build/t-park/test_parking 1000000 arena.trim_taken
run park-trim-huge-tsan env LFHEAP_HUGEPAGES=1 build/t-park-tsan/test_parking 30000 \
    arena.trim_taken
if [ -n "${LFHEAP_TEST_LONG:-}" ]; then
    run park-long build/t-park/test_parking 10000000
    run park-tsan-long build/t-park-tsan/test_parking 300000
fi

# The release libraries (and the prefix one) have no symbol of the parking points; the
# parking variant has them, which shows the pattern would find them.
pattern='(^| )park_(hook|point_names|reach)$'
traces=$(nm build/liblfheap.so build/liblfheap.a build/liblfheap-prefix.a 2>/dev/null |
         grep -E "$pattern" || true)
if [ -z "$traces" ] && nm build/liblfheap-parking.a | grep -qE "$pattern"; then
    echo "PASS park-release-has-no-trace"
else
    echo "FAIL park-release-has-no-trace: $traces"
fi
