# Sourced by every suite in tests/suites/ (from the repository's root): the helpers that
# print the "PASS name" / "FAIL name" lines tests/run.sh counts.

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; }

# run NAME COMMAND...: runs the command, killed after RUN_TIMEOUT seconds (15 minutes, 2
# hours for the long variants of `make test-long`), so that a hang is a FAIL, not a
# stalled run. The command's PASS/FAIL lines are passed through with NAME in front,
# followed by up to 20 of its other lines (those matching RUN_HIDE left out); a command
# that prints none is judged by its exit status, and one that fails without a FAIL line
# is a FAIL.
run() {
    local name=$1 out status limit=${RUN_TIMEOUT:-900}
    shift
    [ -n "${LFHEAP_TEST_LONG:-}" ] && limit=${RUN_TIMEOUT:-7200}
    out=$(timeout "$limit" "$@" 2>&1)
    status=$?
    if printf '%s\n' "$out" | grep -qE '^(PASS|FAIL) '; then
        printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | sed -E "s/^(PASS|FAIL) /\1 $name: /"
        printf '%s\n' "$out" | grep -vE '^(PASS|FAIL) ' | grep -vE "${RUN_HIDE:-^\$^}" | head -20
        if [ "$status" -ne 0 ] && ! printf '%s\n' "$out" | grep -q '^FAIL '; then
            fail "$name" "exit status $status"
        fi
    elif [ "$status" -eq 0 ]; then
        pass "$name"
    else
        printf '%s\n' "$out" | tail -20
        fail "$name" "exit status $status"
    fi
}
