#!/usr/bin/env bash
# The peer tests (docs/PEER_TESTS.md): other allocators' own test programs, run against
# glibc's malloc and against lfheap preloaded. The sources are fetched at run time (the
# Debian source packages glibc, mimalloc and google-perftools) into a work directory;
# nothing of them is kept in this repository. Built from them:
#   glibc       the tests of glibc's malloc/ directory, each built on its own against
#               the installed libc, with glibc's test harness (support/) compiled from
#               the same tree and the stand-ins of tests/peers/glibc/ for the internal
#               headers of glibc's build
#   mimalloc    test/test-stress.c with USE_STD_MALLOC (plain malloc and free), and the
#               checks of test/test-api.c that use only what the standard API has
#               (through tests/peers/mimalloc/std-api.h), one result per check
#   gperftools  src/tests/{realloc,memalign,tcmalloc_large}_unittest.cc, whose calls go
#               to malloc (nothing of tcmalloc is compiled)
# Each test runs under each build: glibc (nothing preloaded), lfheap, lfheap-debug and
# lfheap-secure (build/liblfheap{,-debug,-secure}.so preloaded), at most two processes at
# a time, each with a timeout. The results are compared with tests/peers/expected.txt,
# one line per test and build:
#   PASS T B                      passed, as expected
#   EXPECTED-FAIL T B: reason     failed, as expected.txt says it does (counts as passed)
#   SKIP T B: reason              not run (expected.txt), or glibc's "unsupported" (77)
#   FAIL T B: what                failed; or passed where expected.txt expects a failure
# and the last line is "N passed, N failed". The exit status is 1 when anything failed.
#
# usage: tests/peers/run.sh [options] [SUITE...]
#   SUITE        glibc, mimalloc, gperftools (default: all three)
#   --work DIR   work directory for the sources, builds and logs (default
#                /tmp/lfheap-peers); sources already there are not fetched again
#   --builds L   comma-separated builds to run (default glibc,lfheap,lfheap-debug,
#                lfheap-secure)
#   --only L     comma-separated tests to run, by name (tst-calloc, test-stress, ...)
#   --timeout S  seconds a test may run before it is killed and fails (default 300)
#   --lib-dir D  where liblfheap*.so are (default the repository's build/)
#   --expected F the expectations file (default tests/peers/expected.txt)
#   --fetch-only fetch and unpack the sources, then stop
# Fetching uses apt-get with a private configuration inside the work directory: deb-src
# entries made from the system's deb entries, its own package lists. Nothing under
# /etc/apt or /var/lib/apt changes, and root is not needed, but the network is. Without
# apt-get, put the three packages' orig tarballs in WORK/download/.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/tests/peers
WORK=/tmp/lfheap-peers
BUILDS=glibc,lfheap,lfheap-debug,lfheap-secure
ONLY=
TIMEOUT=300
LIBDIR=$ROOT/build
EXPECTED=$HERE/expected.txt
FETCH_ONLY=
MAXJOBS=2

usage() {
    sed -n '/^# usage:/,/^#   --fetch-only/s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

suites=()
while [ $# -gt 0 ]; do
    case $1 in
    --work) WORK=$2 && shift ;;
    --builds) BUILDS=$2 && shift ;;
    --only) ONLY=$2 && shift ;;
    --timeout) TIMEOUT=$2 && shift ;;
    --lib-dir) LIBDIR=$(realpath "$2") && shift ;;
    --expected) EXPECTED=$(realpath "$2") && shift ;;
    --fetch-only) FETCH_ONLY=1 ;;
    -h | --help) usage ;;
    glibc | mimalloc | gperftools) suites+=("$1") ;;
    *) echo "peers: unknown argument $1" >&2 && usage ;;
    esac
    shift || usage
done
[ ${#suites[@]} -gt 0 ] || suites=(glibc mimalloc gperftools)
mkdir -p "$WORK" && WORK=$(realpath "$WORK")
IFS=, read -r -a builds <<<"$BUILDS"

die() {
    echo "peers: $*" >&2
    exit 2
}

for tool in gcc g++ make tar xz timeout ar setsid pkill; do
    command -v $tool >/dev/null || die "needs $tool"
done

# ---- fetching ---------------------------------------------------------------------------
# Debian source package -> the directory its upstream tarball is unpacked into.
declare -A PACKAGE=([glibc]=glibc [mimalloc]=mimalloc [gperftools]=google-perftools)

apt_private() {
    local apt=$WORK/apt
    apt-get -o Dir::Etc::SourceList="$apt/sources.list" \
        -o Dir::Etc::SourceParts="$apt/sources.list.d" \
        -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" \
        -o Dir::State::Status=/var/lib/dpkg/status \
        -o APT::Sandbox::User="$(id -un)" -q "$@"
}

# A private apt configuration whose sources are deb-src twins of the system's deb
# entries (one-line .list files and deb822 .sources files alike).
apt_setup() {
    local apt=$WORK/apt f
    [ -f "$apt/updated" ] && return 0
    rm -rf "$apt"
    mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial"
    : >"$apt/sources.list"
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] && sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" >>"$apt/sources.list"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && sed 's/^Types:.*/Types: deb-src/' "$f" >"$apt/sources.list.d/${f##*/}"
    done
    echo "peers: apt-get update (private lists in $apt)" >&2
    apt_private update >"$apt/update.log" 2>&1 || { cat "$apt/update.log" >&2 && return 1; }
    touch "$apt/updated"
}

fetch() {
    local suite=$1 package=${PACKAGE[$1]} orig dir=$WORK/src/$1
    [ -d "$dir" ] && return 0
    mkdir -p "$WORK/download"
    orig=$(ls "$WORK/download/${package}_"*.orig.tar.* 2>/dev/null | head -1)
    if [ -z "$orig" ]; then
        command -v apt-get >/dev/null ||
            die "no apt-get: put the orig tarball of the Debian source package $package" \
                "in $WORK/download/"
        apt_setup || die "apt-get update failed (the network is needed to fetch the sources)"
        echo "peers: apt-get source --download-only $package" >&2
        (cd "$WORK/download" && apt_private source --download-only "$package") \
            >"$WORK/download/$package.log" 2>&1 ||
            { cat "$WORK/download/$package.log" >&2 && die "apt-get source $package failed"; }
        orig=$(ls "$WORK/download/${package}_"*.orig.tar.* 2>/dev/null | head -1)
        [ -n "$orig" ] || die "apt-get source $package gave no orig tarball"
    fi
    # The upstream tree as released (Debian's patches are not applied): for glibc only
    # the parts the tests need.
    mkdir -p "$dir.tmp"
    case $suite in
    glibc) tar -xf "$orig" -C "$dir.tmp" --strip-components=1 --wildcards \
        '*/malloc/*' '*/support/*' '*/test-skeleton.c' ;;
    *) tar -xf "$orig" -C "$dir.tmp" --strip-components=1 ;;
    esac || die "cannot unpack $orig"
    # The version: the Debian one when the .dsc is there, else the upstream one.
    ls "$WORK/download/${package}_"*.dsc "$orig" 2>/dev/null | head -1 | xargs basename |
        sed 's/\.orig\.tar\..*//; s/\.dsc$//; s/_/ /' >"$dir.tmp/.peers-version"
    mv "$dir.tmp" "$dir"
}

for suite in "${suites[@]}"; do
    fetch "$suite"
done
[ -n "$FETCH_ONLY" ] && exit 0
echo "peers: lfheap $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '(no git)')," \
    "$(for suite in "${suites[@]}"; do cat "$WORK/src/$suite/.peers-version"; done | paste -sd, | sed "s/,/, /g")," \
    "$(getconf GNU_LIBC_VERSION) installed" >&2

# ---- building ---------------------------------------------------------------------------
# Every test to run: "suite name program-and-arguments" lines, built into $WORK/build.
TESTS=()
BUILD_LOG=$WORK/build.log
: >"$BUILD_LOG"
declare -A BUILD_FAILED

wanted() {
    [ -z "$ONLY" ] && return 0
    case ",$ONLY," in *",$1,"*) return 0 ;; esac
    return 1
}

# Compile, with the command and its output in the build log; status as the compiler's.
compile() {
    echo "+ $*" >>"$BUILD_LOG"
    "$@" >>"$BUILD_LOG" 2>&1
}

# glibc: support/ into an archive (whatever of it compiles outside glibc's build; the
# tests use a small part), then each malloc/tst-*.c that expected.txt does not skip.
GLIBC_CFLAGS=(-std=gnu11 -O1 -g -D_GNU_SOURCE -DMODULE_NAME=testsuite
    -include "$HERE/glibc/prelude.h" -I"$HERE/glibc" -I"$WORK/src/glibc" -I"$WORK/src/glibc/support"
    -DTIMEOUTFACTOR=1 -Wno-deprecated-declarations -fno-builtin-malloc -fno-builtin-calloc
    -fno-builtin-realloc -fno-builtin-free)

build_glibc() {
    local src=$WORK/src/glibc out=$WORK/build/glibc f name
    mkdir -p "$out/support"
    if [ ! -f "$out/libsupport.a" ]; then
        echo "peers: building glibc's test harness (support/)" >&2
        for f in "$src"/support/*.c; do
            name=$(basename "$f" .c)
            # Programs of their own, and the test driver that each test includes.
            case $name in *-container | test-driver | links-dso-program* | tst-*) continue ;; esac
            echo "$f"
        done | xargs -P $MAXJOBS -n 1 bash -c \
            'f=${!#} o=$0/$(basename "${!#}" .c); gcc "${@:1:$#-1}" -c "$f" -o "$o.o" >"$o.log" 2>&1' \
            "$out/support" "${GLIBC_CFLAGS[@]}"
        # Where glibc's build tree and installation are: the system's, for support_paths.c.
        compile gcc "${GLIBC_CFLAGS[@]}" -DSRCDIR_PATH="\"$src\"" -DOBJDIR_PATH="\"$out\"" \
            -DOBJDIR_ELF_LDSO_PATH="\"$(readlink -f /lib64/ld-linux-x86-64.so.2)\"" \
            -DINSTDIR_PATH='"/usr"' -DLIBDIR_PATH='"/usr/lib"' -DBINDIR_PATH='"/usr/bin"' \
            -DSBINDIR_PATH='"/usr/sbin"' -DSLIBDIR_PATH='"/lib"' -DROOTSBINDIR_PATH='"/sbin"' \
            -DCOMPLOCALEDIR_PATH='"/usr/lib/locale"' -c "$src/support/support_paths.c" \
            -o "$out/support/support_paths.o"
        ar rcs "$out/libsupport.a" "$out"/support/*.o || die "no glibc support objects"
    fi
    for f in "$src"/malloc/tst-*.c; do
        name=$(basename "$f" .c)
        wanted "$name" || continue
        TESTS+=("glibc $name $out/$name")
        expect_skip "glibc/$name" && continue
        [ -x "$out/$name" ] && [ "$out/$name" -nt "$f" ] && continue
        compile gcc "${GLIBC_CFLAGS[@]}" "$f" -o "$out/$name" "$out/libsupport.a" \
            -lpthread -lrt || BUILD_FAILED[glibc/$name]=1
    done
}

# The environment glibc's malloc/Makefile gives a test (its tst-*-ENV variables), for
# the build given: glibc's MALLOC_CHECK_ needs its libc_malloc_debug.so preloaded, which
# is left out when lfheap is preloaded instead.
GLIBC_MALLOC_DEBUG=$(ls /lib/*/libc_malloc_debug.so.0 /lib64/libc_malloc_debug.so.0 2>/dev/null |
    head -1)
glibc_env() {
    local name=$1 build=$2
    case $name in
    tst-malloc-check | tst-malloc-usable) echo MALLOC_CHECK_=3 ;;
    tst-malloc-usable-tunables) echo GLIBC_TUNABLES=glibc.malloc.check=3 ;;
    tst-mxfast) echo GLIBC_TUNABLES=glibc.malloc.tcache_count=0:glibc.malloc.mxfast=0 ;;
    *) return ;;
    esac
    case $name in
    tst-malloc-check | tst-malloc-usable*)
        [ "$build" = glibc ] && [ -n "$GLIBC_MALLOC_DEBUG" ] && echo "LD_PRELOAD=$GLIBC_MALLOC_DEBUG"
        ;;
    esac
}

# mimalloc: test-stress on plain malloc/free; test-api's standard-API checks.
build_mimalloc() {
    local src=$WORK/src/mimalloc out=$WORK/build/mimalloc
    mkdir -p "$out"
    if wanted test-stress; then
        # Its defaults: 32 threads, scale 25, 50 rounds of re-creating the threads.
        TESTS+=("mimalloc test-stress $out/test-stress")
        [ -x "$out/test-stress" ] ||
            compile gcc -std=gnu11 -O2 -g -DUSE_STD_MALLOC "$src/test/test-stress.c" \
                -o "$out/test-stress" -lpthread || BUILD_FAILED[mimalloc/test-stress]=1
    fi
    if wanted test-api; then
        TESTS+=("mimalloc test-api $out/test-api-std")
        if [ ! -x "$out/test-api-std" ]; then
            std_api_checks "$src/test/test-api.c" >"$out/test-api-std.c" &&
                compile gcc -std=gnu11 -O1 -g -fno-builtin -I"$src/include" -I"$src/test" \
                    -I"$HERE/mimalloc" "$out/test-api-std.c" -o "$out/test-api-std" ||
                BUILD_FAILED[mimalloc/test-api]=1
        fi
    fi
}

# The checks (CHECK_BODY blocks of main) of mimalloc's test-api.c whose mi_ names all
# have a standard counterpart in std-api.h, as a program of their own.
std_api_checks() {
    local mapped
    mapped=$(sed -n 's/^#define \(mi_[a-z_]*\).*/\1/p' "$HERE/mimalloc/std-api.h" | paste -sd' ')
    printf '#include %s\n' '<stdbool.h>' '<stdint.h>' '"mimalloc.h"' '"mimalloc-types.h"' \
        '"std-api.h"' '"testhelper.h"'
    echo 'int main(void) {'
    awk -v mapped="$mapped" '
        BEGIN { n = split(mapped, m, " "); for (i = 1; i <= n; i++) ok[m[i]] = 1 }
        function flush(   rest, name, keep) {
            if (block == "") return
            keep = 1; rest = block
            while (match(rest, /mi_[a-z_0-9]+/)) {
                name = substr(rest, RSTART, RLENGTH)
                if (!(name in ok)) keep = 0
                rest = substr(rest, RSTART + RLENGTH)
            }
            if (keep) printf "%s", block
            block = ""
        }
        /^int main/ { inmain = 1; next }
        !inmain { next }
        /^[[:space:]]*CHECK_BODY\(/ { flush(); depth = 0; inblock = 1 }
        inblock {
            block = block $0 "\n"
            depth += gsub(/\{/, "{") - gsub(/\}/, "}")
            if (depth == 0 && /\}/) { inblock = 0; flush() }
            next
        }
        /^}/ { exit }
    ' "$1"
    printf '%s\n' '  return print_test_summary();' '}'
}

# gperftools: the three tests, with tests/testutil.cc and the one flag they refer to.
build_gperftools() {
    local src=$WORK/src/gperftools out=$WORK/build/gperftools name
    mkdir -p "$out/include/gperftools"
    # The public header from its template, as configure would make it.
    sed -e 's/@TC_VERSION_MAJOR@/0/; s/@TC_VERSION_MINOR@/0/; s/@TC_VERSION_PATCH@//' \
        -e 's/@ac_cv_have_struct_mallinfo@/1/; s/@ac_cv_have_std_align_val_t@/1/' \
        -e 's/@ac_cv_have_struct_mallinfo2@/1/' \
        "$src/src/gperftools/tcmalloc.h.in" >"$out/include/gperftools/tcmalloc.h"
    cp "$out/include/gperftools/tcmalloc.h" "$out/include/tcmalloc.h"
    for name in realloc_unittest memalign_unittest tcmalloc_large_unittest; do
        wanted "$name" || continue
        TESTS+=("gperftools $name $out/$name")
        [ -x "$out/$name" ] && continue
        compile g++ -O1 -g -fno-builtin -I"$HERE/gperftools" -I"$out/include" -I"$src/src" \
            "$src/src/tests/$name.cc" "$src/src/tests/testutil.cc" "$HERE/gperftools/flags.cc" \
            -o "$out/$name" -lpthread || BUILD_FAILED[gperftools/$name]=1
    done
}

# ---- expectations -----------------------------------------------------------------------
# expected.txt: "TEST BUILDS RESULT REASON..." lines; TEST is suite/name (a glob),
# BUILDS a comma-separated list of build names or globs, RESULT fail or skip.
# EXPECT_RESULT and EXPECT_REASON are set by expectation().
expectation() {
    local test=$1 build=$2 pattern builds result reason b list
    EXPECT_RESULT=pass EXPECT_REASON=
    while read -r pattern builds result reason; do
        case $pattern in '' | '#'*) continue ;; esac
        # shellcheck disable=SC2254
        case $test in $pattern) ;; *) continue ;; esac
        IFS=, read -r -a list <<<"$builds"
        for b in "${list[@]}"; do
            # shellcheck disable=SC2254
            case $build in $b)
                EXPECT_RESULT=$result EXPECT_REASON=$reason
                return
                ;;
            esac
        done
    done <"$EXPECTED"
}

# Whether every build skips the test (then it is not even built).
expect_skip() {
    local b
    for b in "${builds[@]}"; do
        expectation "$1" "$b"
        [ "$EXPECT_RESULT" = skip ] || return 1
    done
    return 0
}

[ -f "$EXPECTED" ] || die "no expectations file $EXPECTED"
for suite in "${suites[@]}"; do
    "build_$suite"
done

# ---- running ----------------------------------------------------------------------------
library() {
    case $1 in
    glibc) echo "" ;;
    lfheap) echo "$LIBDIR/liblfheap.so" ;;
    lfheap-*) echo "$LIBDIR/lib$1.so" ;;
    *) die "unknown build $1" ;;
    esac
}
for b in "${builds[@]}"; do
    lib=$(library "$b")
    [ -z "$lib" ] || [ -f "$lib" ] || die "$lib not built (make variants)"
done

LOGS=$WORK/logs
rm -rf "$LOGS" && mkdir -p "$LOGS"

# One run in the background: its output in LOGS/ID.log, its status in LOGS/ID.status.
start() {
    local id=$1 suite=$2 name=$3 build=$4 lib env=() extra=()
    shift 4
    lib=$(library "$build")
    [ -n "$lib" ] && env+=("LD_PRELOAD=$lib")
    # The debug build's report of unfreed storage at exit: the tests do not free all.
    [ "$build" = lfheap-debug ] && env+=(LFHEAP_UNFREED=0)
    # glibc's harness kills a test after its own timeout times TIMEOUTFACTOR.
    if [ "$suite" = glibc ]; then
        mapfile -t extra < <(glibc_env "$name" "$build")
        env+=(TIMEOUTFACTOR=10 "${extra[@]}")
    fi
    # Each run is a session of its own (setsid), whose id it writes to LOGS/ID.sid: glibc's
    # test driver puts the test in a process group of its own, out of reach of timeout's
    # kill, and a test left running would load every later one. So whatever of the
    # session outlives the run is killed by the session's id.
    (
        cd "$WORK/build/$suite" &&
            setsid --wait sh -c 'echo $$ >"$0" && exec "$@"' "$LOGS/$id.sid" \
                timeout -k 10 "$TIMEOUT" env "${env[@]}" "$@" >"$LOGS/$id.log" 2>&1
        echo $? >"$LOGS/$id.status.tmp"
        sid=$(cat "$LOGS/$id.sid" 2>/dev/null)
        [ -n "$sid" ] && pkill -KILL -s "$sid"
        mv "$LOGS/$id.status.tmp" "$LOGS/$id.status"
    ) &
}

pass=0
fail=0
report() {
    local status=$1 test=$2 build=$3 detail=${4:-}
    case $status in
    PASS | EXPECTED-FAIL) pass=$((pass + 1)) ;;
    FAIL) fail=$((fail + 1)) ;;
    esac
    echo "$status $test $build${detail:+: $detail}"
}

# What a finished run means against the expectations.
judge() {
    local test=$1 build=$2 status=$3 log=$4 what=${5:-}
    expectation "$test" "$build"
    if [ "$status" = 0 ]; then
        if [ "$EXPECT_RESULT" = fail ]; then
            report FAIL "$test" "$build" "unexpected pass: update expected.txt"
        else
            report PASS "$test" "$build"
        fi
        return
    fi
    [ -n "$what" ] || case $status in
    124 | 137) what="timed out after ${TIMEOUT}s" ;;
    13[0-9] | 1[4-9][0-9]) what="killed by signal $((status - 128))" ;;
    *) what="exit status $status" ;;
    esac
    if [ "$EXPECT_RESULT" = fail ]; then
        report EXPECTED-FAIL "$test" "$build" "$EXPECT_REASON"
    else
        report FAIL "$test" "$build" "$what (log: $log)"
    fi
}

# A finished run, reported: mimalloc's test-api as one line per check. Its program exits
# with the number of failed checks, after a summary; a check that crashed it is the last
# one it started.
finish() {
    local id=$1 suite=$2 name=$3 build=$4 status log check last
    log=$LOGS/$id.log
    status=$(cat "$LOGS/$id.status")
    if [ "$suite" = glibc ] && [ "$status" = 77 ]; then
        report SKIP "$suite/$name" "$build" "unsupported: $(grep -v '^$' "$log" | tail -1)"
        return
    fi
    if [ "$suite/$name" != mimalloc/test-api ]; then
        judge "$suite/$name" "$build" "$status" "$log"
        return
    fi
    last=$(sed -n 's/.*test: \(.*\)\.\.\. .*/\1/p' "$log" | tail -1)
    grep -q '^succeeded:' "$log" && last=
    for check in $(sed -n 's/.*CHECK_BODY("\([^"]*\)").*/\1/p' "$WORK/build/mimalloc/test-api-std.c"); do
        if grep -q "FAILED: $check:" "$log"; then
            judge "$suite/$name:$check" "$build" 1 "$log" "check failed"
        elif [ "$check" = "$last" ]; then
            judge "$suite/$name:$check" "$build" "$status" "$log"
        elif grep -q "test: $check\.\.\." "$log"; then
            judge "$suite/$name:$check" "$build" 0 "$log"
        else
            report FAIL "$suite/$name:$check" "$build" "not run: the program stopped at $last"
        fi
    done
}

# The runs, in order; each is started when fewer than MAXJOBS are running, and reported
# in order once it and every run before it have finished.
runs=()
for entry in "${TESTS[@]}"; do
    read -r suite name cmd <<<"$entry"
    for build in "${builds[@]}"; do
        runs+=("$suite $name $build $cmd")
    done
done

# Whether a run is started at all, and how many started runs have not finished.
runnable() {
    expectation "$1/$2" "$3"
    [ "$EXPECT_RESULT" != skip ] && [ -z "${BUILD_FAILED[$1/$2]:-}" ]
}
unfinished() {
    local i n=0 suite name build cmd
    for ((i = next_report; i < next_start; i++)); do
        read -r suite name build cmd <<<"${runs[i]}"
        runnable "$suite" "$name" "$build" && [ ! -f "$LOGS/$suite.$name.$build.status" ] &&
            n=$((n + 1))
    done
    echo $n
}

next_start=0
next_report=0
while [ $next_report -lt ${#runs[@]} ]; do
    running=$(unfinished)
    while [ "$running" -lt $MAXJOBS ] && [ $next_start -lt ${#runs[@]} ]; do
        read -r suite name build cmd <<<"${runs[next_start]}"
        if runnable "$suite" "$name" "$build"; then
            # shellcheck disable=SC2086
            start "$suite.$name.$build" "$suite" "$name" "$build" $cmd
            running=$((running + 1))
        fi
        next_start=$((next_start + 1))
    done
    read -r suite name build cmd <<<"${runs[next_report]}"
    expectation "$suite/$name" "$build"
    if [ "$EXPECT_RESULT" = skip ]; then
        report SKIP "$suite/$name" "$build" "$EXPECT_REASON"
    elif [ -n "${BUILD_FAILED[$suite/$name]:-}" ]; then
        report FAIL "$suite/$name" "$build" "did not build (log: $BUILD_LOG)"
    elif [ -f "$LOGS/$suite.$name.$build.status" ]; then
        finish "$suite.$name.$build" "$suite" "$name" "$build"
    else
        sleep 0.2
        continue
    fi
    next_report=$((next_report + 1))
done
wait

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
