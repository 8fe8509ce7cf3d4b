#!/usr/bin/env bash
# buddy suite: the back-end's tests (tests/test_buddy.c) - model check, exhaustion,
# concurrent stamping with full-coalescing check, for both tree layouts - plain, with
# random yields inside the algorithms (test_buddy_chaos), under AddressSanitizer+UBSan,
# and both concurrent builds under ThreadSanitizer; and the schedule explorer
# (test_buddy_sched: 30,000 seeded interleavings of simulated threads). The argument is
# the work in percent of the default (about a minute in all on a 2-core machine). Prints
# one PASS/FAIL line per case, prefixed with the build it ran in.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh


export TSAN_OPTIONS="halt_on_error=1 exitcode=66 ${TSAN_OPTIONS:-}"
run buddy build/t/test_buddy 400
run buddy-chaos build/t/test_buddy_chaos 400
run buddy-sched build/t/test_buddy_sched 100
run buddy-asan build/t-asan/test_buddy 100
run buddy-tsan build/t-tsan/test_buddy 60
run buddy-chaos-tsan build/t-tsan/test_buddy_chaos 60
