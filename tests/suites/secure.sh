#!/usr/bin/env bash
# The secure build (docs/HARDENING.md, "The secure build"; src/secure.h): its libraries
# exist, import no lock, and run the stress, thread and purge tests and real programs cleanly (no false
# alarm: every check it adds must pass on a correct program). What it stops is
# tests/suites/misuse.sh's part. Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap-secure.so

missing=""
for ext in so a; do
    [ -f "build/liblfheap-secure.$ext" ] || missing="$missing liblfheap-secure.$ext"
done
[ -z "$missing" ] && pass secure-variants || fail secure-variants "missing$missing"

locks=$(nm -D --undefined-only "$lib" | awk '{print $2}' |
        grep -E '^pthread_(mutex|spin|rwlock|cond)_|^sem_(wait|timedwait|post)|^futex' || true)
if [ -z "$locks" ] && nm -D --defined-only "$lib" | grep -q ' T malloc$'; then
    pass secure-no-locks-imported
else
    fail secure-no-locks-imported "$locks"
fi

run stress-secure env LD_PRELOAD="$lib" build/t-plain/test_stress 8 40000
run threads-secure env LD_PRELOAD="$lib" build/t-plain/test_threads
# Huge blocks resized and freed across threads, with guard pages (nothing is kept).
run huge-threads-secure env LD_PRELOAD="$lib" build/t-plain/test_huge_threads 4 60
# The guard budget is read from /proc at the first large block; refused (no descriptor
# left), it leaves errno alone.
run errno-without-descriptors-secure env LD_PRELOAD="$lib" build/t-plain/test_api errno
# The guard budget's /proc read is no cancellation point (nor is the rest of malloc).
run cancel-pending-secure env LD_PRELOAD="$lib" build/t-plain/test_cancel
run guard-budget-secure env LD_PRELOAD="$lib" build/t-plain/test_guard_budget
run guarded-resize-secure env LD_PRELOAD="$lib" build/t-plain/test_guarded_resize guarded
run purge-secure env LD_PRELOAD="$lib" build/t-plain/test_purge
run purge-regrow-secure env LFHEAP_PURGE_MS=0 LD_PRELOAD="$lib" build/t-plain/test_purge regrow
run purge-at-exit-secure env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" build/t-plain/test_purge exit
run purge-phases-secure env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" build/t-plain/test_purge phases
# Its reports: a double free, and an overwritten canary named by the call that found it
# (free, or realloc and reallocarray before they move or keep the block).
run reports-secure env LD_PRELOAD="$lib" build/t-plain/test_debug --secure
# The API fuzzer's model (tests/fuzz_api.c): every usable byte written, canaries intact.
run fuzz-api-secure build/t-secure/fuzz_api 150 0x5ec

# Real programs: the same output as on glibc's allocator.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
seq 200000 | awk '{print ($1 * 7919) % 100003 " line " $1}' > "$tmp/lines"
sort "$tmp/lines" > "$tmp/sorted.glibc"
run sort-secure bash -c "LD_PRELOAD=$lib sort $tmp/lines > $tmp/sorted.secure && cmp -s $tmp/sorted.glibc $tmp/sorted.secure"
py='import json, random
random.seed(7)
d = {str(i): [random.random() for _ in range(i % 50)] for i in range(30000)}
s = json.dumps(d, sort_keys=True)
print(len(s), sum(len(v) for v in json.loads(s).values()))'
expected=$(PYTHONMALLOC=malloc python3 -c "$py")
run python3-secure bash -c '[ "$(PYTHONMALLOC=malloc LD_PRELOAD='"$lib"' python3 -c "$1")" = "$2" ]' _ "$py" "$expected"
