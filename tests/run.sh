#!/usr/bin/env bash
# The test runner: runs every suite in tests/suites/ (each a shell script that prints
# "PASS name" or "FAIL name" lines), echoes each suite's output and how long it took as it
# finishes, and ends with the line "N passed, N failed". Exit status is non-zero when
# anything failed. Arguments, if any, name the suites to run (e.g. `tests/run.sh park
# signals`); by default, all of them.
#
# Suites run side by side, as many at once as the machine has CPUs (at most 4;
# LFHEAP_TEST_JOBS=N sets it, 1 runs them one after another). They share nothing but the
# built programs: each works in a directory of its own, and every test asserts on what
# happened, not on how fast, so a busy machine changes only how long they take. The
# longest suites start first, so that they do not end up running alone at the end.
set -u
cd "$(dirname "$0")/.."
# Run by hand rather than by `make test` (which built them first): the suites' programs
# are built here, so that a checkout built with plain `make` can run any suite.
if [ -z "${MAKELEVEL:-}" ] && ! make -s -j"$(nproc 2>/dev/null || echo 1)" test-bins >/dev/null; then
    echo "tests/run.sh: make test-bins failed"
    echo "0 passed, 1 failed"
    exit 1
fi
pass=0
fail=0
longest_first=(memcheck core buddy statsdebug install signals secure oom park)
suites=()
if [ "$#" -gt 0 ]; then
    for name in "$@"; do
        suites+=("tests/suites/$name.sh")
    done
else
    for name in "${longest_first[@]}"; do
        [ -e "tests/suites/$name.sh" ] && suites+=("tests/suites/$name.sh")
    done
    for suite in tests/suites/*.sh; do
        case " ${longest_first[*]} " in
        *" $(basename "$suite" .sh) "*) ;;
        *) suites+=("$suite") ;;
        esac
    done
fi
jobs=${LFHEAP_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ "$jobs" =~ ^[0-9]+$ ]] && [ "$jobs" -ge 1 ] || jobs=1
[ -z "${LFHEAP_TEST_JOBS:-}" ] && [ "$jobs" -gt 4 ] && jobs=4

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
started=() # suites started and not yet reported

# Runs one suite in the background; its output and then "status seconds" land in
# $results, the status file last (by rename), so that a status file means a finished suite.
start_suite() {
    local suite=$1 name
    name=$(basename "$suite" .sh)
    (
        begin=$SECONDS
        bash "$suite" >"$results/$name.out" 2>&1
        echo "$? $((SECONDS - begin))" >"$results/$name.tmp"
        mv "$results/$name.tmp" "$results/$name.status"
    ) &
    started+=("$name")
}

# Reports every started suite that has finished, in the order they were started.
report_finished() {
    local name status seconds p f left=()
    for name in "${started[@]}"; do
        if [ ! -e "$results/$name.status" ]; then
            left+=("$name")
            continue
        fi
        read -r status seconds <"$results/$name.status"
        echo "== $name"
        cat "$results/$name.out"
        echo "# $name took $seconds s"
        p=$(grep -c '^PASS ' "$results/$name.out")
        f=$(grep -c '^FAIL ' "$results/$name.out")
        if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
            echo "FAIL $name.sh (suite exited with status $status)"
            f=1
        fi
        pass=$((pass + p))
        fail=$((fail + f))
    done
    started=("${left[@]+"${left[@]}"}")
}

# Waits for a suite to finish and reports it. A suite whose runner died without leaving its
# status (killed from outside) is a FAIL, not a wait for ever.
wait_and_report() {
    local name none_left=
    wait -n
    # Checked before the report: a runner that ended by then has left its status.
    [ -z "$(jobs -pr)" ] && none_left=1
    report_finished
    if [ "${#started[@]}" -gt 0 ] && [ -n "$none_left" ]; then
        for name in "${started[@]}"; do
            echo "FAIL $name.sh (suite's runner ended without a status)"
            fail=$((fail + 1))
        done
        started=()
    fi
}

for suite in "${suites[@]}"; do
    if [ ! -e "$suite" ]; then
        echo "FAIL $suite (no such suite)"
        fail=$((fail + 1))
        continue
    fi
    while [ "${#started[@]}" -ge "$jobs" ]; do
        wait_and_report
    done
    start_suite "$suite"
done
while [ "${#started[@]}" -gt 0 ]; do
    wait_and_report
done
echo "# all suites took $SECONDS s ($jobs at a time)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
