#!/usr/bin/env bash
# Out of memory (issue 6): every OS call of a workload failed in turn, once and for good,
# with the failure-injection library (build/t-fault); a real run under `ulimit -v` with
# the release library preloaded; and the release libraries carry no trace of the switch.
# Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap.so


run oom build/t-fault/test_oom
# The same with huge pages: their advice is one more OS call to fail, ignored when it does.
run oom-hugepages env LFHEAP_HUGEPAGES=1 build/t-fault/test_oom
run oom-ulimit bash -c "ulimit -v 1048576 && LD_PRELOAD=$lib build/t-plain/test_ulimit"

# The switch leaves nothing in the release libraries: no symbol, no debug-information
# name (the fault variant, which must have them, shows that the patterns would match).
traces='os_fault|fault_calls|fault_first|descriptors_in_use'
found() { { nm -a "$1"; objdump --dwarf=info "$1"; } 2>/dev/null | grep -cE "$traces"; }
if [ "$(found build/liblfheap.so)" = 0 ] && [ "$(found build/liblfheap.a)" = 0 ] &&
   [ "$(found build/liblfheap-fault.a)" != 0 ]; then
    echo "PASS release-has-no-fault-injection"
else
    echo "FAIL release-has-no-fault-injection"
fi
