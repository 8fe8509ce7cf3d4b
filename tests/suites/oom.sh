#!/usr/bin/env bash
# Out of memory (issue 6): every OS call of a workload failed in turn, once and for good,
# with the failure-injection library (build/t-fault); a real run under `ulimit -v` with
# the release library preloaded; and the release libraries carry no trace of the switch.
# Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
lib=$PWD/build/liblfheap.so

# run NAME COMMAND...: the command's output is passed through, with NAME in front of its
# PASS/FAIL lines; a command that prints none is judged by its exit status.
run() {
    local name=$1
    shift
    local out status
    out=$("$@" 2>&1)
    status=$?
    if printf '%s\n' "$out" | grep -qE '^(PASS|FAIL) '; then
        printf '%s\n' "$out" | sed -E "s/^(PASS|FAIL) /\1 $name: /"
        if [ "$status" -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL '; then
            echo "FAIL $name (exit status $status)"
        fi
    elif [ "$status" -eq 0 ]; then
        echo "PASS $name"
    else
        printf '%s\n' "$out" | tail -20
        echo "FAIL $name (exit status $status)"
    fi
}

run oom build/t-fault/test_oom
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
