#!/usr/bin/env bash
# Lists the shared libraries under the given directories (default: the system's) that
# export a function by one of llheap's names, which a preloaded lfheap would capture
# (docs/API.md, "llheap's names"). Not part of `make test`: it reads every library, which
# takes minutes. Prints the count of libraries read and any that collide; exits 1 if one
# does.
set -u
names='aalloc|amemalign|cmemalign|resize|resizearray|aligned_resize|aligned_resizearray'
names+='|aligned_realloc|aligned_reallocarray|posix_realloc|posix_reallocarray'
names+='|posix_aligned_realloc|posix_aligned_reallocarray|malloc_remote|malloc_mmap_start'
names+='|malloc_extend|malloc_stats_clear|heap_stats'
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(/usr/lib/x86_64-linux-gnu /usr/local/lib)
read_count=0
collisions=0
while IFS= read -r -d '' lib; do
    read_count=$((read_count + 1))
    hits=$(nm -D --defined-only "$lib" 2>/dev/null | awk '{sub(/@.*/, "", $3); print $3}' |
           grep -xE "$names" | tr '\n' ' ')
    if [ -n "$hits" ]; then
        echo "$lib: $hits"
        collisions=$((collisions + 1))
    fi
done < <(find "${dirs[@]}" -maxdepth 1 -name '*.so*' -type f -print0 2>/dev/null | sort -zu)
echo "$read_count libraries read, $collisions export one of llheap's names"
[ "$collisions" -eq 0 ]
