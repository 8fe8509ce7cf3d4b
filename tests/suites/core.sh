#!/usr/bin/env bash
# The core allocator: unit tests, API conformance, stress (also under TSan and ASan+UBSan),
# thread churn and fork, real programs with lfheap preloaded, and the no-locks check.
# Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap.so



run units build/t/test_units
run api build/t/test_api
run api-preloaded env LD_PRELOAD="$lib" build/t-plain/test_api
run api-asan build/t-asan/test_api
run sticky build/t/test_sticky
run sticky-asan build/t-asan/test_sticky
# The API fuzzer's harness on inputs from fixed seeds (make fuzz runs it under libFuzzer).
run fuzz-api build/t/fuzz_api 300
run fuzz-api-asan build/t-asan/fuzz_api 120 0x2bad
run stress build/t/test_stress 8 40000
run stress-preloaded env LD_PRELOAD="$lib" build/t-plain/test_stress 8 40000
run stress-tsan build/t-tsan/test_stress 4 10000
run stress-asan build/t-asan/test_stress 8 10000
run units-tsan build/t-tsan/test_units
run arena build/t/test_arena
run arena-tsan build/t-tsan/test_arena
# malloc_trim's huge-page pass decommits merged pages that mincore says are absent (swapped).
run arena-hugetrim env LFHEAP_HUGEPAGES=1 build/t/test_arena hugetrim
run threads build/t/test_threads
run threads-preloaded env LD_PRELOAD="$lib" build/t-plain/test_threads
# A thread's first allocation from its third round of key destructors, with lfheap's
# exit key among glibc's first 32 (the run above makes 33 keys first).
run threads-late-round-preloaded env LD_PRELOAD="$lib" TEST_THREADS_NO_KEYS_FIRST=1 \
    build/t-plain/test_threads --late-round
# malloc and free with a cancellation pending come back (tests/test_cancel.c).
run cancel-pending-preloaded env LD_PRELOAD="$lib" build/t-plain/test_cancel
# Linked with the static archives, whose exit keys come after the test's 33 keys: the
# cache's setup and the statistics block wait for a call outside glibc's key table.
run threads-static build/t-static/test_threads
run threads-static-stats build/t-static/test_threads_stats
run purge-preloaded env LD_PRELOAD="$lib" build/t-plain/test_purge
# A minute's purge delay: only the workers' exits can give the memory back in time.
run purge-at-exit-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" build/t-plain/test_purge exit
run purge-at-large-only-exit-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" \
    build/t-plain/test_purge exitlarge
# Freed large runs piled up: new superblocks take them (a minute's delay: none is purged).
run purge-superblocks-take-runs-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" \
    build/t-plain/test_purge superruns
# A freed buffer, a fifth of what the heap holds, serves the next superblocks (a minute's
# delay: the pressure purge, after 1/16 of it, is the only one that can run).
run purge-buffer-serves-superblocks-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" \
    build/t-plain/test_purge buffer
# A pool rebuilt again and again keeps its memory for the next pool, until the delay (1 s).
run purge-pool-rebuild-preloaded env LFHEAP_PURGE_MS=1000 LD_PRELOAD="$lib" build/t-plain/test_purge rebuild
# A buffer grown by copying under a delay of 0 reuses its freed runs (test_purge.c explains).
run purge-regrow-preloaded env LFHEAP_PURGE_MS=0 LD_PRELOAD="$lib" build/t-plain/test_purge regrow
# Freed runs serve bigger sizes, still resident, before clean room (test_purge.c).
run purge-phases-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" build/t-plain/test_purge phases
# Huge blocks (their own mappings) are kept for the next one, and malloc_trim unmaps them.
run purge-huge-kept-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" build/t-plain/test_purge huge
# A kept mapping goes back once it has waited the delay (200 ms).
run purge-huge-delay-preloaded env LFHEAP_PURGE_MS=200 LD_PRELOAD="$lib" build/t-plain/test_purge hugedelay
# Threads race through the kept mappings' slots: put, take, trim, grow, release, trim all.
run huge-threads build/t/test_huge_threads 4 120
run huge-threads-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" \
    build/t-plain/test_huge_threads 4 120 reuse
run huge-threads-nodelay-preloaded env LFHEAP_PURGE_MS=0 LD_PRELOAD="$lib" \
    build/t-plain/test_huge_threads 4 120
run huge-threads-tsan build/t-tsan/test_huge_threads 4 60
# Freed runs a program's new sizes cannot use go back early (after 1/16 of a 3.2 s delay).
run purge-on-shift-preloaded env LFHEAP_PURGE_MS=3200 LD_PRELOAD="$lib" build/t-plain/test_purge shift
# Freed runs go back before a huge block maps fresh pages, however young (a minute's delay).
run purge-before-huge-preloaded env LFHEAP_PURGE_MS=60000 LD_PRELOAD="$lib" \
    build/t-plain/test_purge shifthuge
# One freed huge block is kept, and it yields to fresh runs after 1/16 of a 3.2 s delay.
run purge-kept-yields-preloaded env LFHEAP_PURGE_MS=3200 LD_PRELOAD="$lib" \
    build/t-plain/test_purge keptyield
# That release stops while the huge blocks it gave back are mapped again (its score).
run purge-kept-regretted-preloaded env LFHEAP_PURGE_MS=3200 LD_PRELOAD="$lib" \
    build/t-plain/test_purge keptregret
# A purge of superblocks' chunks alone is not regretted (test_purge.c explains).
run purge-superblocks-unscored-preloaded env LFHEAP_PURGE_MS=3200 LD_PRELOAD="$lib" \
    build/t-plain/test_purge superblocks
# A purge delay that is no number of milliseconds leaves the default (it was read as 0).
for setting in empty:"" word:soon negative:-5 unit:250ms; do
    run "purge-setting-ignored-${setting%%:*}" env LFHEAP_PURGE_MS="${setting#*:}" \
        LD_PRELOAD="$lib" build/t-plain/test_purge keeps
done
# The malloc that reads a purge delay past LONG_MAX leaves errno alone (strtol's ERANGE
# once showed through).
run purge-setting-overflow-keeps-errno env LFHEAP_PURGE_MS=99999999999999999999 \
    LD_PRELOAD="$lib" build/t-plain/test_api errno
# Transparent huge pages: advised on every heap mapping with LFHEAP_HUGEPAGES=1 (where the
# kernel takes the advice), on none without; contents and zeros survive either way. The
# stress test's contents checks, and the threads test's, with huge pages too.
run hugepages-off env LD_PRELOAD="$lib" build/t-plain/test_hugepages
run hugepages-on env LFHEAP_HUGEPAGES=1 LD_PRELOAD="$lib" build/t-plain/test_hugepages
run stress-hugepages env LFHEAP_HUGEPAGES=1 LD_PRELOAD="$lib" build/t-plain/test_stress 8 40000
run threads-hugepages env LFHEAP_HUGEPAGES=1 LD_PRELOAD="$lib" build/t-plain/test_threads
# Where realloc keeps a large block (the secure build: tests/suites/secure.sh).
run guarded-resize env LD_PRELOAD="$lib" build/t-plain/test_guarded_resize
# Beyond 256 GiB of arenas (288 GiB reserved, a few pages touched, ~36 MB of page map):
# needs an unlimited address space and an overcommit policy that maps untouched memory.
if [ "$(ulimit -v)" = unlimited ] && [ "$(cat /proc/sys/vm/overcommit_memory)" != 2 ]; then
    run address-space build/t/test_address_space
    run address-space-preloaded env LD_PRELOAD="$lib" build/t-plain/test_address_space
else
    echo "SKIP address-space: needs ulimit -v unlimited and vm.overcommit_memory 0 or 1"
fi
# Every plain test program fails when lfheap is not its allocator (tests/testutil.h): a
# preload that does not load only makes the dynamic linker warn, and the program would
# otherwise pass on glibc's malloc.
for prog in build/t-plain/*; do
    # The misuse collection runs under every allocator on purpose (tests/misuse.sh).
    [ "$(basename "$prog")" = misuse ] && continue
    out=$(LD_PRELOAD=/nonexistent timeout 60 "$prog" 2>&1)
    status=$?
    if [ "$status" -ne 0 ] && printf '%s\n' "$out" | grep -q '^FAIL lfheap-is-the-allocator: '; then
        pass "without-lfheap-fails-$(basename "$prog")"
    else
        fail "without-lfheap-fails-$(basename "$prog")" "exit status $status: $(printf '%s\n' "$out" | head -3)"
    fi
done

# Real programs: their output must be byte for byte the one they give on glibc's
# allocator. A preload that does not load only makes the dynamic linker warn, so the
# linker's record of the symbols it bound (LD_DEBUG=bindings) must show that the
# programs' malloc was lfheap's.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# on_lfheap NAME PROCESSES COMMAND...: runs the command with lfheap preloaded, its output
# in $tmp/NAME.lfheap; a FAIL unless malloc was bound to lfheap in at least PROCESSES of
# the run's processes.
on_lfheap() {
    local name=$1 processes=$2 bound
    shift 2
    mkdir "$tmp/$name.ld"
    timeout 300 env LD_DEBUG=bindings LD_DEBUG_OUTPUT="$tmp/$name.ld/pid" LD_PRELOAD="$lib" \
        "$@" > "$tmp/$name.lfheap" 2> "$tmp/$name.err"
    bound=$(grep -l "to $lib \[0\]: normal symbol \`malloc'" "$tmp/$name.ld"/pid.* | wc -l)
    if [ "$bound" -lt "$processes" ]; then
        fail "$name" "malloc bound to lfheap in $bound of $processes processes: $(head -c 300 "$tmp/$name.err")"
        return 1
    fi
}
# same NAME GLIBC LFHEAP: the two files are identical.
same() {
    if cmp -s "$2" "$3"; then
        pass "$1"
    else
        fail "$1" "$(cmp "$2" "$3" 2>&1 | head -1)"
    fi
}
py='import json, random
random.seed(7)
d = {str(i): [random.random() for _ in range(i % 50)] for i in range(30000)}
s = json.dumps(d, sort_keys=True)
print(len(s), sum(len(v) for v in json.loads(s).values()))
print(s[:20000])'
PYTHONMALLOC=malloc python3 -c "$py" > "$tmp/python3.glibc"
on_lfheap python3-preloaded 1 env PYTHONMALLOC=malloc python3 -c "$py" &&
    same python3-preloaded "$tmp/python3.glibc" "$tmp/python3-preloaded.lfheap"
seq 200000 | awk '{print ($1 * 7919) % 100003 " line " $1}' > "$tmp/lines"
sort "$tmp/lines" > "$tmp/sort.glibc"
on_lfheap sort-preloaded 1 sort "$tmp/lines" &&
    same sort-preloaded "$tmp/sort.glibc" "$tmp/sort-preloaded.lfheap"
fixed_directory "$tmp/ls"
LC_ALL=C TZ=UTC ls -la "$tmp/ls/dir" > "$tmp/ls.glibc"
on_lfheap ls-preloaded 1 env LC_ALL=C TZ=UTC ls -la "$tmp/ls/dir" &&
    same ls-preloaded "$tmp/ls.glibc" "$tmp/ls-preloaded.lfheap"
# The compiler: one of lfheap's own sources compiled with -O2 to an object file (gcc, cc1
# and as on lfheap), and a program linked (collect2 and ld too): without -g nothing in
# their output depends on the run, so each must be identical to glibc's.
mkdir "$tmp/glibc" "$tmp/lfheap"
cflags=(-std=gnu11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -c src/heap.c)
cc "${cflags[@]}" -o "$tmp/glibc/heap.o"
on_lfheap cc-preloaded 3 cc "${cflags[@]}" -o "$tmp/lfheap/heap.o" &&
    same cc-preloaded "$tmp/glibc/heap.o" "$tmp/lfheap/heap.o"
printf 'int main(void){return 42;}\n' > "$tmp/prog.c"
cc -O2 -o "$tmp/glibc/prog" "$tmp/prog.c"
on_lfheap cc-link-preloaded 5 cc -O2 -o "$tmp/lfheap/prog" "$tmp/prog.c" &&
    same cc-link-preloaded "$tmp/glibc/prog" "$tmp/lfheap/prog"
# A small program under a 1 GiB address-space limit: no absurd reservations.
run ulimit-v bash -c "ulimit -v 1048576 && LD_PRELOAD=$lib build/t-plain/test_api"
# ...and under 128 MiB: an arena (64 MiB, aligned to its size) is mapped where the kernel
# puts it, not over-reserved by its alignment (which needed about 150 MiB here).
run ulimit-v-128m bash -c "ulimit -v 131072 && LD_PRELOAD=$lib build/t-plain/test_api"
# ...and under a data limit of 128 MiB (`ulimit -d`), which counts the arenas, parts and
# page-map leaves (read-write) but not what lfheap only reserves.
run ulimit-d-128m bash -c "ulimit -d 131072 && LD_PRELOAD=$lib build/t-plain/test_api"
# lfheap's code under valgrind's JIT (the "none" tool does not replace malloc, so the
# program really runs on lfheap; memcheck would substitute its own allocator).
run valgrind env LD_PRELOAD="$lib" valgrind -q --tool=none build/t-plain/test_api
# llheap's names: a program written for llheap links with either library by those names,
# and a program with a function of the same name keeps its own (weak symbols).
run llheap-names build/t-llheap/test_llheap_names
run llheap-names-static build/t-llheap/test_llheap_names_static
run llheap-names-own-resize build/t-llheap/test_llheap_names_own_resize
# The static library is one object: a program that calls only malloc and free gets all of
# lfheap, so that a shared library it links finds lfheap's posix_memalign and sigaction,
# not glibc's. And it defines the names the shared library exports (those the linker
# makes for the shared library, __start_lfheap_text and __stop_lfheap_text, aside).
run static-archive build/t-static/test_static_archive
archive_names=$(readelf -sW build/liblfheap.a |
                awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $6 == "DEFAULT" {print $8}' |
                sort -u)
so_names=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^__st[a-z]*_lfheap_text$' |
           sort -u)
if [ "$archive_names" = "$so_names" ] && [ "$(ar t build/liblfheap.a)" = lfheap.o ]; then
    pass static-archive-names
else
    fail static-archive-names "members: $(ar t build/liblfheap.a | tr '\n' ' ') differences: $(diff \
        <(printf '%s\n' "$archive_names") <(printf '%s\n' "$so_names") | grep '^[<>]' | head -5 |
        tr '\n' ' ')"
fi
# Its internal names are local to its object: a program may define its own buddy_alloc.
run static-archive-own-names build/t-static/test_static_own_names
hidden_names=$(readelf -sW build/liblfheap.a |
               awk '$7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") && $6 != "DEFAULT" {print $8}')
if [ -z "$hidden_names" ]; then
    pass static-archive-no-internal-names
else
    fail static-archive-no-internal-names "global but hidden: $(printf '%s\n' "$hidden_names" |
        head -5 | tr '\n' ' ')"
fi
llheap_names="aalloc amemalign cmemalign resize resizearray aligned_resize aligned_resizearray
    aligned_realloc aligned_reallocarray posix_realloc posix_reallocarray posix_aligned_realloc
    posix_aligned_reallocarray malloc_size malloc_alignment malloc_zero_fill malloc_remote
    malloc_mmap_start malloc_extend malloc_unfreed malloc_stats_fd malloc_stats_clear heap_stats"
weak=$(nm -D --defined-only "$lib" | awk '$2 == "W" {print $3}')
not_weak=""
for sym in $llheap_names; do
    printf '%s\n' "$weak" | grep -qx "$sym" || not_weak="$not_weak $sym"
done
if [ -z "$not_weak" ]; then
    echo "PASS llheap-symbols-weak"
else
    echo "FAIL llheap-symbols-weak: not exported as weak:$not_weak"
fi
# The release library must not import any lock (docs/DESIGN.md, property 1).
locks=$(nm -D --undefined-only "$lib" | awk '{print $2}' |
        grep -E '^pthread_(mutex|spin|rwlock|cond)_|^sem_(wait|timedwait|post)|^futex' || true)
if [ -z "$locks" ] && nm -D --defined-only "$lib" | grep -q ' T malloc$'; then
    echo "PASS no-locks-imported"
else
    echo "FAIL no-locks-imported: $locks"
fi
