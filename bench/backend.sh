#!/usr/bin/env bash
# Runs the backend benchmark (bench/backend.c; `make bench-backend` builds and calls
# this) and keeps its table with the machine it ran on in
# build/bench-results/backend-<date>-<host>.md (git ignores build/; a run the docs cite
# is copied into bench/results/) and every measurement in the .csv beside it.
# Arguments are passed to build/bench/backend (e.g. -r 3 -s 50 for a quicker run).
set -eu
cd "$(dirname "$0")/.."
mkdir -p build/bench-results
stamp="$(date +%Y-%m-%d)-$(hostname -s 2>/dev/null || echo host)"
out="build/bench-results/backend-$stamp"
{
    echo "# backend benchmark, $(date '+%Y-%m-%d %H:%M %Z')"
    echo
    echo "Machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')),"
    echo "Linux $(uname -r), $(${CC:-gcc} --version | head -1)."
    echo "Command: build/bench/backend -r 7 $*"
    echo
    build/bench/backend -r 7 -c "$out.csv" "$@"
} | tee "$out.md"
echo "kept: $out.md $out.csv" >&2
