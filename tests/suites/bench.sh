#!/usr/bin/env bash
# The benchmark suite's own tests (correctness only, never speed):
#  - every program in build/bench/ runs at tiny scale under the system allocator, passes
#    its self-validation and prints a result line with a positive time;
#  - under tests/bench_corrupt.c (an LD_PRELOAD shim that scribbles over live blocks, or
#    hands out a block that is still live) every program fails with exit status 2 and a
#    FAILED message instead of reporting a time;
#  - bench/fastpath.py counts instructions under callgrind, and without valgrind the
#    runner skips that count with one line and still writes its report;
#  - bench/run.py --profile test (glibc only) writes a CSV and tables that parse, with
#    one row per workload x threads x run, and skips an lfheap without malloc;
#  - the summary's best-peer part: tests/test_bench_summary.py on made-up runs with known
#    answers, and a tiny real run of lfheap and glibc whose best-peer CSV and report
#    agree with the medians in its CSV of runs; --copies runs lfheap against copies of
#    itself in place of the peers;
#  - the real-program group: tests/test_bench_real.py (the launcher, the check that the
#    preloaded allocator serves a program's heap, the output checks, the summary's table,
#    and a tiny run of python and gcc under lfheap and glibc when they are installed).
set -u
cd "$(dirname "$0")/../.."
. tests/suite.sh
B=build/bench
SHIM=$PWD/$B/libbench_corrupt.so
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# name and tiny arguments of every workload program
PROGS=(
    "fastpath --n=2000"
    "linux-scalability --threads=2 --n=20000"
    "threadtest --threads=2 --rounds=5 --n=2000"
    "larson --threads=2 --ms=100 --ops=1000 --slots=100"
    "cache-thrash --threads=2 --iterations=300 --rw=20000"
    "cache-scratch --threads=2 --iterations=300 --rw=20000"
    "consume --threads=2 --iterations=20 --objects=200"
    "recycle --threads=2 --n=20000 --rate=100"
    "churn --threads=2 --n=2000"
    "speed --threads=2 --n=1000"
    "memory --threads=2 --n=1000 --round=1000 --repeat=2"
    "thread-churn --threads=2 --n=200 --temp=8"
    "thread-churn-concurrent --threads=8 --rounds=3 --blocks=30 --settle_ms=0"
    "large --threads=2 --iterations=20 --min_mib=1 --max_mib=2"
    "oversubscribed --threads=4 --ops=20000 --slots=256"
    "pool-rebuild --threads=2 --rounds=3 --steps=500 --slots=100 --max_kib=256"
)

# Runs one program ($1, its arguments after) under the system allocator: it must pass its
# own validation and report a positive time.
validates() {
    local name=$1
    shift
    local out rc secs
    out=$(timeout 120 "$B/$name" "$@" 2>"$TMP/err")
    rc=$?
    secs=$(printf '%s\n' "$out" | sed -n 's/^result .* seconds=\([0-9.]*\).*/\1/p')
    if [ $rc -eq 0 ] && printf '%s\n' "$out" | grep -q "^result workload=$name threads=" &&
        awk -v s="$secs" 'BEGIN { exit !(s + 0 > 0) }'; then
        pass "bench-$name-validates"
    else
        fail "bench-$name-validates" "exit $rc: $(head -c 200 "$TMP/err") $out"
    fi
}

for entry in "${PROGS[@]}"; do
    read -r -a argv <<<"$entry"
    name=${argv[0]}
    validates "$name" "${argv[@]:1}"
    # The shim damages only blocks that are live at that moment. In cache-thrash and
    # cache-scratch a thread holds one object at a time, so the damage reaches a checked
    # object only while two threads' objects are live together, and on a loaded machine
    # the two threads can run one after the other (no damage, nothing to detect: a pass
    # that reports a time is then right). So a program gets up to 10 runs to meet the
    # damage and must detect it in one of them; where one thread holds many blocks the
    # first run does.
    for mode in scribble overlap; do
        detected=no
        for attempt in 1 2 3 4 5 6 7 8 9 10; do
            out=$(BENCH_CORRUPT=$mode BENCH_CORRUPT_EVERY=3 LD_PRELOAD=$SHIM \
                timeout 120 "$B/$name" "${argv[@]:1}" 2>"$TMP/err")
            rc=$?
            if [ $rc -eq 2 ] && grep -q "^$name: FAILED: " "$TMP/err" &&
                ! printf '%s\n' "$out" | grep -q '^result '; then
                detected=yes
                break
            fi
            # anything but a clean, undamaged run is a failure at once
            [ $rc -eq 0 ] || break
        done
        if [ $detected = yes ]; then
            pass "bench-$name-detects-$mode"
        else
            fail "bench-$name-detects-$mode" "exit $rc after $attempt run(s), stderr: $(head -c 200 "$TMP/err")"
        fi
    done
done

# The programs outside the scoreboard hold one block at a time, which the shim's damage
# (to another live block) cannot reach: they are only run. So is realloc-many, whose
# buffers all come from realloc: the shim hands a buffer a live block only at its first
# realloc(NULL), and gives each holder its own copy at the next, which left nothing for
# the program's checks to find in three runs with BENCH_CORRUPT=overlap.
validates realloc-grow --max=1048576
validates realloc-many --buffers=8 --appends=20000
validates calloc-sparse --rounds=5 --max_mib=4
validates strings-grow --steps=200000
validates size-phases --rounds=1 --mib=48
validates thread-footprint --threads=50 --blocks=30

# misuse is told apart from corruption: unknown knob -> exit 64
"$B/churn" --no-such-knob=1 >/dev/null 2>&1
[ $? -eq 64 ] && pass bench-bad-argument || fail bench-bad-argument

# the fast-path count: callgrind difference of two runs, glibc only
if command -v valgrind >/dev/null; then
    out=$(python3 bench/fastpath.py --no-build --allocators glibc --n1 20000 --n2 40000 2>&1)
    ipp=$(printf '%s\n' "$out" | sed -n 's/^| glibc | \([0-9.]*\) | \([0-9.]*\) |$/\1/p')
    if awk -v x="$ipp" 'BEGIN { exit !(x + 0 > 5 && x + 0 < 5000) }'; then
        pass bench-fastpath-callgrind
    else
        fail bench-fastpath-callgrind "$out"
    fi
else
    echo "SKIP bench-fastpath-callgrind (valgrind not installed)"
fi

# the runner, tiny profile, glibc only; an lfheap path that does not exist is skipped
python3 bench/run.py --profile test --no-build --no-install --allocators lfheap,glibc \
    --lfheap "$TMP/missing.so" --groups kernels --threads 1,2 --runs 2 --out "$TMP/res" \
    >"$TMP/run.out" 2>"$TMP/run.err"
rc=$?
[ $rc -eq 0 ] && pass bench-runner-completes ||
    fail bench-runner-completes "exit $rc: $(tail -c 300 "$TMP/run.err")"
grep -q "^lfheap: skipped, .*missing.so does not exist" "$TMP/run.err" &&
    pass bench-runner-skips-missing-lfheap || fail bench-runner-skips-missing-lfheap
grep -q "^\[.*\] larson, glibc, 2 threads, run 2/2" "$TMP/run.err" &&
    pass bench-runner-progress || fail bench-runner-progress

python3 - "$TMP/res" <<'PY'
import csv, glob, os, re, sys
sys.path.insert(0, "bench")
import run
out = sys.argv[1]
csvs = [p for p in glob.glob(os.path.join(out, "*.csv")) if not p.endswith("-best-peer.csv")]
mds = glob.glob(os.path.join(out, "*.md"))
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
check("bench-runner-no-best-peer-without-lfheap",
      not glob.glob(os.path.join(out, "*-best-peer.csv")) and
      "Against the best peer" not in open(mds[0]).read() if mds else False)
check("bench-runner-files", len(csvs) == 1 and len(mds) == 1, "%s %s" % (csvs, mds))
if not csvs or not mds:
    sys.exit(0)
rows = list(csv.DictReader(open(csvs[0])))
need = {"workload", "allocator", "threads", "run", "status", "metric", "value", "seconds",
        "wall_s", "user_s", "sys_s", "peak_rss_kib"}
check("bench-csv-columns", need <= set(rows[0].keys() if rows else []),
      "missing %s" % (need - set(rows[0].keys() if rows else [])))
workloads, threads, runs = run.WORKLOADS, [1, 2], 2
check("bench-csv-row-count", len(rows) == len(workloads) * len(threads) * runs,
      "%d rows" % len(rows))
keys = {(r["workload"], int(r["threads"]), int(r["run"])) for r in rows}
check("bench-csv-every-cell", keys == {(w, t, k) for w in workloads for t in threads
                                        for k in range(1, runs + 1)})
bad = [r for r in rows if r["status"] != "ok" or r["allocator"] != "glibc"]
check("bench-csv-all-ok", not bad, "%s" % bad[:2])
def positive(r, f):
    try:
        return float(r[f]) > 0
    except ValueError:
        return False
bad = [(r["workload"], f) for r in rows for f in ("value", "seconds", "wall_s",
                                                 "peak_rss_kib") if not positive(r, f)]
check("bench-csv-positive", not bad, "%s" % bad[:4])
check("bench-csv-metric", all(r["metric"] == run.METRIC[r["workload"]] for r in rows) and
      run.METRIC["larson"] == run.METRIC["oversubscribed"] == "mops")
md = open(mds[0]).read()
missing = [w for w in workloads if "### " + w not in md]
check("bench-md-table-per-workload", not missing, "missing %s" % missing)
cells = re.findall(r"^\| glibc \| ([^|]+) \| ([^|]+) \|$", md, re.M)
numeric = [c for pair in cells for c in pair if re.match(r"^\s*-?[0-9.]+", c)]
tables = 2 * len(workloads) + sum(len(v) for v in run.EXTRA_TABLES.values())
check("bench-md-table-cells", len(cells) == tables and len(numeric) == 2 * tables,
      "%d rows, %d numbers" % (len(cells), len(numeric)))
check("bench-md-machine-and-versions", "## Machine" in md and "glibc**: libc6" in md and
      "## Parameters" in md)
PY

if command -v gnuplot >/dev/null; then
    n=$(ls "$TMP"/res/*/*.png 2>/dev/null | wc -l)
    [ "$n" -ge 13 ] && pass bench-runner-plots || fail bench-runner-plots "$n PNGs"
fi

# oversubscribed at its own thread counts (1, 2, 32 unless --threads): the report gets
# the over-subscription table, each allocator's throughput at 32 threads over 2
python3 bench/run.py --profile test --no-build --no-install --allocators glibc \
    --workloads oversubscribed --runs 2 --no-plots --out "$TMP/res3" >/dev/null 2>"$TMP/run3.err"
rc=$?
python3 - "$TMP/res3" "$rc" <<'PY'
import csv, glob, os, re, sys
sys.path.insert(0, "bench")
import run
out, rc = sys.argv[1], int(sys.argv[2])
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
csvs = glob.glob(os.path.join(out, "*.csv"))
mds = glob.glob(os.path.join(out, "*.md"))
if rc != 0 or len(csvs) != 1 or len(mds) != 1:
    check("bench-oversub-runner", False, "exit %d, %s %s" % (rc, csvs, mds))
    sys.exit(0)
rows = list(csv.DictReader(open(csvs[0])))
keys = sorted((int(r["threads"]), int(r["run"])) for r in rows if r["status"] == "ok")
check("bench-oversub-thread-counts", keys == [(t, k) for t in (1, 2, 32) for k in (1, 2)],
      "%s" % keys)
md = open(mds[0]).read()
m = re.search(r"^\| glibc \| ([0-9.]+) \| ([0-9.]+) \| \*\*([0-9.]+)\*\* "
              r"\(([0-9.]+), ([0-9.]+)\) \| [0-9.]+ / [0-9.]+ \| [0-9.]+ \|$", md, re.M)
val = {(int(r["threads"]), int(r["run"])): float(r["value"]) for r in rows}
med = lambda t: (val[(t, 1)] + val[(t, 2)]) / 2
ok = m is not None and "### Over-subscription" in md and \
    abs(float(m.group(3)) - med(32) / med(2)) < 0.01 and \
    abs(float(m.group(4)) - val[(32, 1)] / val[(2, 1)]) < 0.01
check("bench-oversub-ratio-table", ok, m.group(0) if m else "no glibc row")
PY

# the best-peer summary: known answers on made-up runs, then a tiny real run of lfheap
# and glibc (one seconds workload, one Mops/s workload) checked against its own CSV
run bench-summary python3 tests/test_bench_summary.py
if [ -e build/liblfheap.so ]; then
    python3 bench/run.py --profile test --no-build --no-install --allocators lfheap,glibc \
        --workloads churn,larson --threads 1 --runs 1 --no-plots --out "$TMP/res4" \
        >/dev/null 2>"$TMP/run4.err"
    rc=$?
    python3 - "$TMP/res4" "$rc" <<'PY'
import csv, glob, os, re, statistics, subprocess, sys
out, rc = sys.argv[1], int(sys.argv[2])
def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
best = glob.glob(os.path.join(out, "*-best-peer.csv"))
runs = [p for p in glob.glob(os.path.join(out, "*.csv")) if p not in best]
mds = glob.glob(os.path.join(out, "*.md"))
if rc != 0 or len(best) != 1 or len(runs) != 1 or len(mds) != 1:
    check("bench-runner-best-peer", False, "exit %d, %s %s %s" % (rc, best, runs, mds))
    sys.exit(0)
med = {}
for r in csv.DictReader(open(runs[0])):
    med.setdefault((r["workload"], r["allocator"]), []).append(float(r["value"]))
cells = {r["workload"]: r for r in csv.DictReader(open(best[0]))}
want = {"churn": statistics.median(med[("churn", "lfheap")]) /
                 statistics.median(med[("churn", "glibc")]),
        "larson": statistics.median(med[("larson", "glibc")]) /
                  statistics.median(med[("larson", "lfheap")])}
ok = sorted(cells) == ["churn", "larson"] and all(
    cells[w]["time_peer"] == "glibc" and cells[w]["rss_peer"] == "glibc" and
    abs(float(cells[w]["time_ratio"]) / want[w] - 1) < 1e-4 for w in want)
check("bench-runner-best-peer-csv", ok, "%s, want %s" % (cells, want))
md = open(mds[0]).read()
ok = "### Against the best peer in each cell" in md and re.search(
    r"^Geometric mean of lfheap's ratio to the best peer of each cell: time \*\*[0-9.]+\*\* "
    r"\(2 cells\), peak RSS \*\*[0-9.]+\*\* \(2 cells\)\.$", md, re.M) and re.search(
    r"^\| larson \| 1 \| [0-9.]+ Mops/s \| glibc [0-9.]+ Mops/s \| %.2f \|" % want["larson"],
    md, re.M)
check("bench-runner-best-peer-report", bool(ok),
      md[md.find("### Against"):md.find("### Against") + 1500])
# --best-peer-of rebuilds the same part from the CSV of runs alone
again = subprocess.run([sys.executable, "bench/run.py", "--best-peer-of", runs[0]],
                       capture_output=True, text=True)
part = again.stdout.strip()
check("bench-runner-best-peer-of", again.returncode == 0 and part.startswith(
    "Geometric mean of lfheap's ratio") and part in md, again.stdout + again.stderr)
PY
else
    fail bench-runner-best-peer "build/liblfheap.so missing (make all)"
fi

run bench-real python3 tests/test_bench_real.py

# an lfheap library that does not define malloc is skipped with a reason
python3 bench/run.py --profile test --no-build --no-install --allocators lfheap,glibc \
    --lfheap "$(gcc -print-file-name=libm.so.6)" --workloads churn --threads 1 --runs 1 \
    --no-plots --out "$TMP/res2" >/dev/null 2>"$TMP/run2.err"
grep -q "^lfheap: skipped, .* does not define malloc" "$TMP/run2.err" &&
    pass bench-runner-skips-lfheap-without-malloc ||
    fail bench-runner-skips-lfheap-without-malloc "$(cat "$TMP/run2.err")"

# --copies: lfheap against copies of itself, which stand in for the peers: every run of
# the three is there, a copy is the best peer of each cell, and the paired figures are
# computed (two repetitions), with no fast-path count
if [ -e build/liblfheap.so ]; then
    python3 bench/run.py --profile test --no-build --no-install --copies 2 --workloads churn \
        --threads 1,2 --runs 2 --no-plots --out "$TMP/res5" >"$TMP/run5.out" 2>"$TMP/run5.err"
    rc=$?
    python3 - "$TMP/res5" "$rc" "$TMP/run5.out" <<'PY'
import csv, glob, os, sys
out, rc, stdout = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
best = glob.glob(os.path.join(out, "*-best-peer.csv"))
runs = [p for p in glob.glob(os.path.join(out, "*.csv")) if p not in best]
ok = rc == 0 and len(best) == 1 and len(runs) == 1
if ok:
    seen = sorted((r["allocator"], r["threads"], r["run"]) for r in csv.DictReader(open(runs[0]))
                  if r["status"] == "ok")
    cells = list(csv.DictReader(open(best[0])))
    ok = seen == sorted((a, t, k) for a in ("lfheap", "lfheap-copy1", "lfheap-copy2")
                        for t in ("1", "2") for k in ("1", "2")) and len(cells) == 2 and \
        all(c["time_peer"].startswith("lfheap-copy") and float(c["paired_time_ratio"]) > 0
            and float(c["paired_rss_ratio"]) > 0 for c in cells) and \
        "Fast path" not in stdout and "**lfheap-copy2**" in stdout
print(("PASS " if ok else "FAIL ") + "bench-runner-copies" +
      ("" if ok else ": exit %d, %s" % (rc, stdout[-1500:])))
PY
else
    fail bench-runner-copies "build/liblfheap.so missing (make all)"
fi

# Without valgrind the fast-path count is skipped with one line and the report is
# written all the same (before, the run ended in a traceback and kept nothing).
mkdir -p "$TMP/novg"
IFS=: read -ra path_dirs <<<"$PATH"
for dir in "${path_dirs[@]}"; do
    for tool in "$dir"/*; do
        name=${tool##*/}
        case $name in valgrind*) continue ;; esac
        [ -x "$tool" ] && [ ! -e "$TMP/novg/$name" ] && ln -s "$tool" "$TMP/novg/$name"
    done
done
PATH="$TMP/novg" python3 bench/run.py --profile quick --no-build --no-install --allocators glibc \
    --workloads larson --threads 1 --runs 1 --no-plots --out "$TMP/res3" \
    >/dev/null 2>"$TMP/run3.err"
if grep -q "^fastpath: skipped, valgrind not found" "$TMP/run3.err" &&
   ls "$TMP"/res3/*.md >/dev/null 2>&1; then
    pass bench-runner-without-valgrind
else
    fail bench-runner-without-valgrind "$(tail -3 "$TMP/run3.err")"
fi
