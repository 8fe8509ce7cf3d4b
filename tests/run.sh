#!/usr/bin/env bash
# The test runner: runs every suite in tests/suites/ (each a shell script that prints
# "PASS name" or "FAIL name" lines), echoes their output and how long each took, and ends
# with the line "N passed, N failed". Exit status is non-zero when anything failed.
# Arguments, if any, name the suites to run (e.g. `tests/run.sh park signals`); by
# default, all of them.
set -u
cd "$(dirname "$0")/.."
pass=0
fail=0
suites=(tests/suites/*.sh)
if [ "$#" -gt 0 ]; then
    suites=()
    for name in "$@"; do
        suites+=("tests/suites/$name.sh")
    done
fi
for suite in "${suites[@]}"; do
    if [ ! -e "$suite" ]; then
        [ "$#" -eq 0 ] && continue
        echo "FAIL $suite (no such suite)"
        fail=$((fail + 1))
        continue
    fi
    echo "== $(basename "$suite" .sh)"
    started=$SECONDS
    out=$(bash "$suite" 2>&1)
    status=$?
    printf '%s\n' "$out"
    echo "# $(basename "$suite" .sh) took $((SECONDS - started)) s"
    p=$(printf '%s\n' "$out" | grep -c '^PASS ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $(basename "$suite") (suite exited with status $status)"
        f=1
    fi
    pass=$((pass + p))
    fail=$((fail + f))
done
echo "# all suites took $SECONDS s"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
