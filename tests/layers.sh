#!/usr/bin/env bash
# The include direction of src/ (run by `make lint`): every `#include "..."` in src/ must
# name a file of a lower layer than the including file's, or the file's own header. The
# layers, bottom first, one line each; files on one line are siblings and may not include
# each other, except the files of one component, written joined by "+": they are one
# layer split over several files and may include each other's headers.
# docs/ARCHITECTURE.md ("Layers") draws the same stack.
#   bash tests/layers.sh [SRCDIR]   exits 1 and names every include that goes up
set -euo pipefail

LAYERS=(
    "config"                             # the switchboard
    "lfheap lfheap_buddy common"         # the public headers and the base macros
    "platform park invariant vgclient"   # the kernel, libc and the CPU; test hooks; checks; valgrind
    "out sizeclass"
    "stats"                              # the counters: a leaf every layer counts into
    "os"
    "buddy+buddy_impl+buddy_flat+buddy_packed secure mapcache"
    "arena heap_types"
    "pagemap"
    "heap"
    "tcache+tcache_store debug"         # the thread caches; the store of their cold parts
    "tcache_hide"                        # the cache hidden from signal handlers
    "sigwrap"
    "api_internal api_exports"           # what the api files share; the export table
    "api api_aligned api_llheap stats_report"
    "api_cxx api_cxx_catch"
)

src=${1:-src}
declare -A level component
for i in "${!LAYERS[@]}"; do
    for group in ${LAYERS[$i]}; do
        for name in ${group//+/ }; do
            level[$name]=$i
            component[$name]=$group
        done
    done
done

status=0
for file in "$src"/*.c "$src"/*.h "$src"/*.S; do
    [ -e "$file" ] || continue
    base=$(basename "$file")
    self=${base%.*}
    if [ -z "${level[$self]+set}" ]; then
        echo "$file: not in any layer of tests/layers.sh" >&2
        status=1
        continue
    fi
    while IFS=: read -r line target; do
        name=${target%.h}
        if [ -z "${level[$name]+set}" ]; then
            echo "$file:$line: includes \"$target\", which is in no layer" >&2
            status=1
        elif [ "${component[$name]}" != "${component[$self]}" ] &&
             [ "${level[$name]}" -ge "${level[$self]}" ]; then
            echo "$file:$line: includes \"$target\" (layer ${level[$name]}) from layer ${level[$self]}: up or sideways" >&2
            status=1
        fi
    done < <(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$file" |
                 sed 's/^\([0-9]*\):[^"]*"\([^"]*\)".*/\1:\2/')
done
exit $status
