#!/usr/bin/env bash
# The misuse runner (docs/HARDENING.md): runs every case of the misuse program
# (tests/misuse.c) in a child process under each allocator given, preloaded, and prints a
# markdown table with one row per case and one column per allocator:
#   ✓ SIG     stopped: killed by SIGABRT, SIGSEGV, SIGBUS, SIGILL or SIGTRAP before the
#             case's end (SIG names the signal)
#   ✓ exit N  stopped: exited with status N before the case's end (an allocator that
#             reports and exits instead of aborting)
#   ·         survived: ran to its end, printed its marker and exited 0
#   hung      still running after the timeout (killed), so neither stopped nor survived
#   error     the program itself failed (status 77, another signal, no marker)
# then a "stopped N of M" row per kind of misuse and in all, and a summary line.
#
# usage: tests/misuse.sh [options] ALLOCATOR...
#   ALLOCATOR  glibc (nothing preloaded), jemalloc, tcmalloc, mimalloc (the Debian
#              packages' libraries), lfheap, lfheap-debug, lfheap-secure (build/
#              liblfheap{,-debug,-secure}.so), NAME=PATH or a PATH to a library to preload
#   --prog P   the misuse program (default build/t-plain/misuse)
#   --cases L  only these cases (comma-separated)
#   --kinds L  only the cases of these kinds (double-free, invalid-free, overflow,
#              use-after-free; comma-separated)
#   --timeout S  seconds per run before it counts as hung (default 20)
#   --tsv      instead of the table, one line per run: case, kind, allocator, outcome
#              (stopped, survived, hung, error), detail, the first line of its stderr
#   --install  install the Debian packages of missing peers (root with apt-get only)
# An allocator whose library does not exist is skipped with a line on stderr. Each run
# gets a clean environment (env -i): every allocator at its defaults, glibc's checks
# included (no MALLOC_CHECK_, no GLIBC_TUNABLES, no LFHEAP_ABORT), and glibc's fatal
# messages on stderr (LIBC_FATAL_STDERR_) rather than the terminal.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LIBDIR=/usr/lib/x86_64-linux-gnu
PROG=$ROOT/build/t-plain/misuse
TIMEOUT=20
FORMAT=table
INSTALL=
ONLY_CASES=
ONLY_KINDS=

usage() {
    sed -n '/^# usage:/,/^#   --install/s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

specs=()
while [ $# -gt 0 ]; do
    case $1 in
    --prog) PROG=$(realpath "$2") && shift ;;
    --cases) ONLY_CASES=$2 && shift ;;
    --kinds) ONLY_KINDS=$2 && shift ;;
    --timeout) TIMEOUT=$2 && shift ;;
    --tsv) FORMAT=tsv ;;
    --install) INSTALL=1 ;;
    -h | --help) usage ;;
    -*) echo "misuse.sh: unknown option $1" >&2 && usage ;;
    *) specs+=("$1") ;;
    esac
    shift || usage
done
[ ${#specs[@]} -gt 0 ] || usage
[ -x "$PROG" ] || { echo "misuse.sh: $PROG not built (make $PROG)" >&2 && exit 2; }

# ---- the allocators ----------------------------------------------------------------
# known NAME -> "library package" (package empty for the lfheap builds)
known() {
    case $1 in
    glibc) echo "- libc6" ;;
    jemalloc) echo "$LIBDIR/libjemalloc.so.2 libjemalloc2" ;;
    tcmalloc) echo "$LIBDIR/libtcmalloc_minimal.so.4 libtcmalloc-minimal4" ;;
    mimalloc) echo "$LIBDIR/libmimalloc.so.2 libmimalloc2.0" ;;
    lfheap) echo "$ROOT/build/liblfheap.so -" ;;
    lfheap-*) echo "$ROOT/build/lib${1}.so -" ;;
    *) return 1 ;;
    esac
}

names=() libs=() packages=()
for spec in "${specs[@]}"; do
    if entry=$(known "$spec"); then
        names+=("$spec")
        libs+=("${entry% *}")
        packages+=("${entry#* }")
    else
        case $spec in
        *=*) name=${spec%%=*} lib=${spec#*=} ;;
        *) name=$(basename "$spec" .so) lib=$spec ;;
        esac
        names+=("$name")
        libs+=("$(realpath -m "$lib")")
        packages+=(-)
    fi
done

# The missing peers' packages, installed when we may (the benchmark runner does the same
# for its peers, bench/benchlib.py).
if [ -n "$INSTALL" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    missing=()
    for i in "${!names[@]}"; do
        [ "${libs[i]}" != - ] && [ "${packages[i]}" != - ] && [ ! -e "${libs[i]}" ] &&
            missing+=("${packages[i]}")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "misuse.sh: installing with apt-get: ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
            { apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2; }
    fi
fi

cols=() col_libs=()
for i in "${!names[@]}"; do
    lib=${libs[i]}
    if [ "$lib" != - ] && [ ! -e "$lib" ]; then
        how="build it"
        [ "${packages[i]}" != - ] && how="apt-get install ${packages[i]}"
        echo "misuse.sh: ${names[i]}: skipped, $lib does not exist ($how)" >&2
        continue
    fi
    cols+=("${names[i]}")
    col_libs+=("$lib")
done
[ ${#cols[@]} -gt 0 ] || { echo "misuse.sh: no allocator to run" >&2 && exit 2; }

# ---- the cases ---------------------------------------------------------------------
case_names=() case_kinds=()
while IFS=$'\t' read -r name kind _; do
    [ -n "$ONLY_CASES" ] && [[ ",$ONLY_CASES," != *",$name,"* ]] && continue
    [ -n "$ONLY_KINDS" ] && [[ ",$ONLY_KINDS," != *",$kind,"* ]] && continue
    case_names+=("$name")
    case_kinds+=("$kind")
done < <("$PROG" --list)
[ ${#case_names[@]} -gt 0 ] || { echo "misuse.sh: no case selected" >&2 && exit 2; }

# run_case CASE LIB: sets OUTCOME (stopped, survived, hung, error), CELL (the table's
# text) and REPORT (the first line the run wrote on stderr).
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
ulimit -c 0 # an abort is an outcome here, not a core file to write
run_case() {
    local case=$1 lib=$2 rc start sig
    local preload=()
    [ "$lib" != - ] && preload=("LD_PRELOAD=$lib")
    start=$SECONDS
    # timeout outside env: only the misuse program runs with the library preloaded; the
    # group's stderr hides bash's own "Aborted" notice of a killed child
    {
        timeout -k 5 "$TIMEOUT" env -i PATH="$PATH" LIBC_FATAL_STDERR_=1 "${preload[@]}" \
            "$PROG" "$case" >"$TMP/out" 2>"$TMP/err"
    } 2>/dev/null
    rc=$?
    REPORT=$(grep -m1 . "$TMP/err" | tr '\t' ' ' | cut -c1-160)
    if [ $rc -eq 0 ] && grep -qx "misuse: survived $case" "$TMP/out"; then
        OUTCOME=survived CELL="·"
    elif [ $rc -eq 124 ] || { [ $rc -eq 137 ] && [ $((SECONDS - start)) -ge "$TIMEOUT" ]; }; then
        OUTCOME=hung CELL=hung
    elif [ $rc -gt 128 ]; then
        sig=$(kill -l $((rc - 128)) 2>/dev/null || echo $((rc - 128)))
        case $sig in
        ABRT | SEGV | BUS | ILL | TRAP) OUTCOME=stopped CELL="✓ $sig" ;;
        *) OUTCOME=error CELL="error ($sig)" ;;
        esac
    elif [ $rc -eq 0 ] || [ $rc -eq 77 ] || [ $rc -ge 126 ]; then
        OUTCOME=error CELL="error ($rc)"
    else
        OUTCOME=stopped CELL="✓ exit $rc"
    fi
}

# ---- the runs and the table ---------------------------------------------------------
declare -A cell stopped total
for c in "${!cols[@]}"; do
    echo "misuse.sh: ${cols[c]} (${col_libs[c]/#-/nothing preloaded}): ${#case_names[@]} cases" >&2
    for k in "${!case_names[@]}"; do
        run_case "${case_names[k]}" "${col_libs[c]}"
        cell[$k,$c]=$CELL
        if [ "$FORMAT" = tsv ]; then
            printf '%s\t%s\t%s\t%s\t%s\t%s\n' "${case_names[k]}" "${case_kinds[k]}" \
                "${cols[c]}" "$OUTCOME" "${CELL#✓ }" "$REPORT"
        fi
        for key in "$c" "$c,${case_kinds[k]}"; do
            total[$key]=$((${total[$key]:-0} + 1))
            [ "$OUTCOME" = stopped ] && stopped[$key]=$((${stopped[$key]:-0} + 1))
        done
    done
done
[ "$FORMAT" = tsv ] && exit 0

header=(case kind "${cols[@]}")
printf '| %s ' "${header[@]}" && echo '|'
printf '|---|---|' && printf -- '---|%.0s' "${cols[@]}" && echo
for k in "${!case_names[@]}"; do
    printf '| %s | %s ' "${case_names[k]}" "${case_kinds[k]}"
    for c in "${!cols[@]}"; do printf '| %s ' "${cell[$k,$c]}"; done
    echo '|'
done
kinds=()
for kind in "${case_kinds[@]}"; do [[ " ${kinds[*]} " == *" $kind "* ]] || kinds+=("$kind"); done
for kind in "${kinds[@]}" ""; do
    printf '| **stopped** | %s ' "${kind:-**all**}"
    for c in "${!cols[@]}"; do
        key=$c${kind:+,$kind}
        printf '| %s of %s ' "${stopped[$key]:-0}" "${total[$key]}"
    done
    echo '|'
done
echo
summary=()
for c in "${!cols[@]}"; do summary+=("${cols[c]} ${stopped[$c]:-0}"); done
echo "Stopped of ${#case_names[@]} misuses: $(IFS=, && echo "${summary[*]}" | sed 's/,/, /g')."
