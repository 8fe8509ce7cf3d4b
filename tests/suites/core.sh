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
run stress build/t/test_stress 8 40000
run stress-preloaded env LD_PRELOAD="$lib" build/t-plain/test_stress 8 40000
run stress-tsan build/t-tsan/test_stress 4 10000
run stress-asan build/t-asan/test_stress 8 10000
run units-tsan build/t-tsan/test_units
run arena build/t/test_arena
run arena-tsan build/t-tsan/test_arena
run threads build/t/test_threads
run threads-preloaded env LD_PRELOAD="$lib" build/t-plain/test_threads
run purge-preloaded env LD_PRELOAD="$lib" build/t-plain/test_purge
# Every plain test program fails when lfheap is not its allocator (tests/testutil.h): a
# preload that does not load only makes the dynamic linker warn, and the program would
# otherwise pass on glibc's malloc.
for prog in build/t-plain/*; do
    out=$(LD_PRELOAD=/nonexistent timeout 60 "$prog" 2>&1)
    status=$?
    if [ "$status" -ne 0 ] && printf '%s\n' "$out" | grep -q '^FAIL lfheap-is-the-allocator: '; then
        pass "without-lfheap-fails-$(basename "$prog")"
    else
        fail "without-lfheap-fails-$(basename "$prog")" "exit status $status: $(printf '%s\n' "$out" | head -3)"
    fi
done


# Real programs: their output must match the output they give on glibc's allocator.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py='import json, random
random.seed(7)
d = {str(i): [random.random() for _ in range(i % 50)] for i in range(30000)}
s = json.dumps(d, sort_keys=True)
print(len(s), sum(len(v) for v in json.loads(s).values()))'
expected=$(PYTHONMALLOC=malloc python3 -c "$py")
run python3-preloaded bash -c '[ "$(PYTHONMALLOC=malloc LD_PRELOAD='"$lib"' python3 -c "$1")" = "$2" ]' _ "$py" "$expected"
seq 200000 | awk '{print ($1 * 7919) % 100003 " line " $1}' > "$tmp/lines"
sort "$tmp/lines" > "$tmp/sorted.glibc"
run sort-preloaded bash -c "LD_PRELOAD=$lib sort $tmp/lines > $tmp/sorted.lfheap && cmp -s $tmp/sorted.glibc $tmp/sorted.lfheap"
run ls-preloaded bash -c "[ \"\$(LD_PRELOAD=$lib ls -la /usr/lib | wc -l)\" = \"\$(ls -la /usr/lib | wc -l)\" ]"
printf 'int main(void){return 42;}\n' > "$tmp/prog.c"
run cc-preloaded bash -c "LD_PRELOAD=$lib cc -O2 -o $tmp/prog $tmp/prog.c; $tmp/prog; [ \$? = 42 ]"
# A small program under a 1 GiB address-space limit: no absurd reservations.
run ulimit-v bash -c "ulimit -v 1048576 && LD_PRELOAD=$lib build/t-plain/test_api"
# ...and under 128 MiB: an arena (64 MiB, aligned to its size) is mapped where the kernel
# puts it, not over-reserved by its alignment (which needed about 150 MiB here).
run ulimit-v-128m bash -c "ulimit -v 131072 && LD_PRELOAD=$lib build/t-plain/test_api"
# lfheap's code under valgrind's JIT (the "none" tool does not replace malloc, so the
# program really runs on lfheap; memcheck would substitute its own allocator).
run valgrind env LD_PRELOAD="$lib" valgrind -q --tool=none build/t-plain/test_api
# llheap's names: a program written for llheap links with either library by those names,
# and a program with a function of the same name keeps its own (weak symbols).
run llheap-names build/t-llheap/test_llheap_names
run llheap-names-static build/t-llheap/test_llheap_names_static
run llheap-names-own-resize build/t-llheap/test_llheap_names_own_resize
llheap_names="aalloc amemalign cmemalign resize resizearray aligned_resize aligned_resizearray
    aligned_realloc aligned_reallocarray posix_realloc posix_reallocarray posix_aligned_realloc
    posix_aligned_reallocarray malloc_size malloc_alignment malloc_zero_fill malloc_remote
    malloc_mmap_start malloc_extend malloc_stats_fd malloc_stats_clear heap_stats"
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
# The release library must not import any lock (DESIGN.md, property 1).
locks=$(nm -D --undefined-only "$lib" | awk '{print $2}' |
        grep -E '^pthread_(mutex|spin|rwlock|cond)_|^sem_(wait|timedwait|post)|^futex' || true)
if [ -z "$locks" ] && nm -D --defined-only "$lib" | grep -q ' T malloc$'; then
    echo "PASS no-locks-imported"
else
    echo "FAIL no-locks-imported: $locks"
fi
