#!/usr/bin/env bash
# valgrind's memcheck over the test programs with lfheap preloaded (issue 6). memcheck
# 3.19 replaces malloc in every object by default (its "somalloc" synonym matches any
# soname), which would test memcheck's allocator instead of lfheap's; a synonym that
# matches nothing keeps lfheap's. lfheap sees valgrind, runs every thread uncached and
# reports each block with client requests (src/vgclient.h). Each program must run clean
# (no error of any kind, no suppression file), and tests/test_memcheck.c's deliberate
# errors must each be reported, in blocks that lfheap's own code handed out.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap.so
vg=(valgrind --tool=memcheck -q --soname-synonyms=somalloc=nouse --error-exitcode=99
    --leak-check=full --errors-for-leak-kinds=definite)

if ! echo "#include <valgrind/memcheck.h>" | ${CC:-cc} -E -x c - >/dev/null 2>&1; then
    echo "FAIL memcheck: <valgrind/memcheck.h> missing, so lfheap was built without its client requests"
    exit 0
fi

# clean NAME LEAKS COMMAND...: memcheck finds no error in the run; LEAKS says whether
# definitely lost blocks count as errors.
clean() {
    local name=$1 leaks=$2 out status
    shift 2
    out=$(LD_PRELOAD=$lib "${vg[@]}" --leak-check="$leaks" "$@" 2>&1)
    status=$?
    if [ "$status" -eq 0 ]; then
        echo "PASS memcheck-$name"
    else
        printf '%s\n' "$out" | grep -v '^PASS ' | head -40
        echo "FAIL memcheck-$name (exit status $status)"
    fi
}

clean api full build/t-plain/test_api
clean stress full build/t-plain/test_stress 4 2000
# The debug and secure builds too: under memcheck they leave the checks of a freed block's
# fill to memcheck, which watches freed blocks itself (to it they are no memory of the
# program's). Their tracked superblocks' records are lfheap's, addressable and written.
for build in debug secure; do
    lib=$PWD/build/liblfheap-$build.so clean "stress-$build" full build/t-plain/test_stress 4 2000
    lib=$PWD/build/liblfheap-$build.so clean "threads-$build" no build/t-plain/test_threads 200
done
# No leak check: its fork test's children inherit blocks that threads of the parent hold.
clean threads no build/t-plain/test_threads 200
# The API fuzzer's harness calls the lfh_ names of the prefix library it links: no preload.
lib="" clean fuzz-api full build/t/fuzz_api 20 9
# No leak check: a thread killed inside malloc loses the block it was being handed.
clean signals no build/t-plain/test_signals 3000 6

out=$(LD_PRELOAD=$lib "${vg[@]}" build/t-plain/test_memcheck 2>&1)
status=$?
missing=""
for want in "Invalid read of size 1" "Invalid write of size 1" \
            "Conditional jump or move depends on uninitialised value" \
            "decide_on_fresh_run" "decide_on_fresh_mapping" \
            "80 bytes in 1 blocks are definitely lost" "tcache_alloc_slow" "heap_large_alloc"; do
    printf '%s\n' "$out" | grep -qF "$want" || missing="$missing [$want]"
done
if [ "$status" -eq 99 ] && [ -z "$missing" ]; then
    echo "PASS memcheck-finds-errors-in-lfheap-blocks"
else
    printf '%s\n' "$out" | head -60
    echo "FAIL memcheck-finds-errors-in-lfheap-blocks (status $status, missing:$missing)"
fi
