#!/usr/bin/env bash
# Instructions per new+delete pair of a 16-byte object against malloc(16)+free, counted
# by callgrind (`make fastpath-cxx`): build/bench/fastpath_cxx runs with N1 and N2
# pairs, and the difference of the totals divided by N2 - N1 is one pair, start-up
# cancelled out (bench/fastpath.py does the same for malloc alone). With lfheap
# preloaded, and with glibc's malloc and libstdc++'s operators for comparison. The
# loop's own cost (--mode=empty) is printed on its own line, not subtracted.
#
# usage: bench/fastpath_cxx.sh [N1 N2]   (default 1000000 2000000)
set -eu
cd "$(dirname "$0")/.."
n1=${1:-1000000}
n2=${2:-2000000}
prog=build/bench/fastpath_cxx
lib=$PWD/build/liblfheap.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# ir N MODE [PRELOAD]: total instructions of one run
ir() {
    env ${3:+LD_PRELOAD=$3} valgrind --tool=callgrind --callgrind-out-file="$tmp/out" \
        "$prog" --n="$1" --mode="$2" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    awk '/^(summary|totals):/ { print $2; exit }' "$tmp/out"
}

# per_pair MODE [PRELOAD]: instructions per iteration
per_pair() {
    local a b
    a=$(ir "$n1" "$@")
    b=$(ir "$n2" "$@")
    awk -v a="$a" -v b="$b" -v n1="$n1" -v n2="$n2" 'BEGIN { printf "%.1f", (b - a) / (n2 - n1) }'
}

echo "| allocator | malloc(16) + free | new + delete (16-byte object) |"
echo "|---|---:|---:|"
echo "| lfheap | $(per_pair malloc "$lib") | $(per_pair new "$lib") |"
echo "| glibc, libstdc++ | $(per_pair malloc) | $(per_pair new) |"
echo
echo "Instructions per pair: (Ir(N=$n2) - Ir(N=$n1)) / $((n2 - n1)) under callgrind;" \
     "the loop alone costs $(per_pair empty) per iteration."
