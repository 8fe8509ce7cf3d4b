#!/usr/bin/env bash
# C++ operator new and delete (src/api_cxx.c): tests/test_cxx.cc built with g++ and
# clang++ (libstdc++, and libc++ where installed), linked with the shared and the static
# library and preloaded; the operators without a C++ runtime (tests/test_cxx_c.c); and
# that the library stays C: no C++ runtime in a preloading C program, none in NEEDED,
# every reference to one weak. Prints one PASS/FAIL line per check.
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
lib=$PWD/build/liblfheap.so



run cxx build/t-cxx/test_cxx
run cxx-static build/t-cxx/test_cxx_static
run cxx-clang build/t-cxx/test_cxx_clang
run cxx-preloaded env LD_PRELOAD="$lib" build/t-plain/test_cxx
if [ -x build/t-cxx/test_cxx_libcxx ]; then
    run cxx-libcxx build/t-cxx/test_cxx_libcxx
    run cxx-libcxx-preloaded env LD_PRELOAD="$lib" build/t-plain/test_cxx_libcxx
    run cxx-own-operators-libcxx env LD_PRELOAD="$lib" build/t-plain/test_cxx_own_libcxx
else
    echo "note: libc++ headers not installed (libc++-dev, libc++abi-dev): libc++ not tested"
fi
run cxx-own-operators-static build/t-cxx/test_cxx_own_static
run cxx-own-operators-clang build/t-cxx/test_cxx_own_clang
run cxx-own-operators-preloaded env LD_PRELOAD="$lib" build/t-plain/test_cxx_own
run cxx-own-operators-debug env LFHEAP_UNFREED=0 LD_PRELOAD="$PWD/build/liblfheap-debug.so" \
    build/t-plain/test_cxx_own
run cxx-from-c build/t-cxx/test_cxx_c
plugin=build/t-cxx/libtest_cxx_plugin.so
run cxx-plugin-of-c-program build/t-cxx/test_cxx_c plugin "$plugin"

# Without a C++ runtime that lfheap's weak references could bind to, a throwing operator
# new that runs out of memory writes why and aborts: in a C program, and in a C++ plugin
# that a C program loads later.
for mode in throw plugin-oom; do
    out=$(build/t-cxx/test_cxx_c $mode "$plugin" 2>&1)
    status=$?
    if [ "$status" -eq 134 ] &&
        printf '%s\n' "$out" | grep -q 'no C++ runtime to throw std::bad_alloc'; then
        pass "cxx-no-runtime-aborts-with-message-$mode"
    else
        fail "cxx-no-runtime-aborts-with-message-$mode" "status $status: $out"
    fi
done

# A C program that preloads lfheap maps no C++ runtime (cat reads its own maps); the C++
# test program, preloaded the same way, does (so the pattern would see one).
runtime='libstdc\+\+|libc\+\+'
c_maps=$(LD_PRELOAD=$lib cat /proc/self/maps)
cxx_maps=$(LD_PRELOAD=$lib build/t-plain/test_cxx maps)
if printf '%s\n' "$c_maps" | grep -q liblfheap.so &&
    ! printf '%s\n' "$c_maps" | grep -qE "$runtime" &&
    printf '%s\n' "$cxx_maps" | grep -q liblfheap.so &&
    printf '%s\n' "$cxx_maps" | grep -qE "$runtime"; then
    pass "c-program-loads-no-cxx-runtime"
else
    fail "c-program-loads-no-cxx-runtime" "$(printf '%s\n' "$c_maps" | grep -E "$runtime")"
fi
if ! ldd build/t-cxx/test_cxx_c | grep -qE "$runtime"; then
    pass "c-program-calling-operators-needs-no-cxx-runtime"
else
    fail "c-program-calling-operators-needs-no-cxx-runtime" "$(ldd build/t-cxx/test_cxx_c)"
fi

# The library's dynamic section: no C++ runtime (nor libgcc_s) among the needed objects,
# and every symbol it takes from one is a weak reference.
needed=$(readelf -d "$lib" | grep NEEDED)
if printf '%s\n' "$needed" | grep -q 'libc.so' &&
    ! printf '%s\n' "$needed" | grep -qE "$runtime|libgcc_s"; then
    pass "no-cxx-runtime-needed"
else
    fail "no-cxx-runtime-needed" "$needed"
fi
strong=$(nm -D --undefined-only "$lib" | awk '$1 == "U" && $2 ~ /^(_Z|__cxa_|__gxx_)/')
weak=$(nm -D --undefined-only "$lib" | awk '$1 == "w" && $2 ~ /^(_Z|__cxa_|__gxx_)/' | wc -l)
if [ -z "$strong" ] && [ "$weak" -ge 4 ]; then
    pass "cxx-runtime-references-are-weak"
else
    fail "cxx-runtime-references-are-weak" "strong: $strong; $weak weak"
fi

# Every replaceable form is exported by the release library, none by the prefix variant.
forms="_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t
_ZnamSt11align_val_t _ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
_ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t
_ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t"
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" { print $3 }')
missing=""
for f in $forms; do
    printf '%s\n' "$exported" | grep -qx "$f" || missing="$missing $f"
done
if [ -z "$missing" ] && [ "$(printf '%s\n' $forms | wc -l)" -eq 20 ]; then
    pass "all-20-operators-exported"
else
    fail "all-20-operators-exported" "missing:$missing"
fi
in_prefix=$(nm build/liblfheap-prefix.a 2>/dev/null | awk '$2 == "T" && $3 ~ /^_Z(n[wa]|d[la])/')
if [ -z "$in_prefix" ] && nm build/liblfheap-prefix.a | grep -q ' T lfh_malloc$'; then
    pass "prefix-variant-defines-no-operators"
else
    fail "prefix-variant-defines-no-operators" "$in_prefix"
fi

# `make fastpath-cxx` (bench/fastpath_cxx.sh) measures, at a tiny scale; the numbers
# themselves are not judged.
out=$(bash bench/fastpath_cxx.sh 1000 3000 2>&1)
if printf '%s\n' "$out" | awk -F'|' '$2 ~ /lfheap/ && $3 + 0 > 0 && $4 + 0 > 0 { ok = 1 }
                                     END { exit !ok }'; then
    pass "fastpath-cxx-measures"
else
    fail "fastpath-cxx-measures" "$out"
fi
