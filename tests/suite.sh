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

# fixed_directory TOP: creates TOP/dir, whose entries (files of many sizes, some private, a
# symbolic link, a directory) and TOP itself have fixed sizes, modes and times, for
# comparing a listing on lfheap with one on glibc.
fixed_directory() {
    local dir=$1/dir i
    mkdir -p "$dir/subdir"
    for i in $(seq 1 300); do
        head -c $((i * 7919 % 20000)) /dev/zero > "$dir/file-$i"
        [ $((i % 7)) = 0 ] && chmod 600 "$dir/file-$i"
        touch -d "@$((981173106 + i * 3607))" "$dir/file-$i"
    done
    ln -s file-1 "$dir/link"
    touch -h -d @981173106 "$dir/link" "$dir/subdir" "$dir" "$1"
}
