#!/usr/bin/env python3
"""The benchmark runner's `real` group (bench/realprogs.py, bench/realrun.c, run.py's
real_run and real_lines): the launcher's result line, exit status and preload; the
binding-trace verdict on made-up traces (a binding to another allocator, a non-PIE
executable's PLT slot, an allocator's own lookup of libc, no malloc at all) and on a
statically linked program; the output checks; the summary's real-program table on
made-up runs; and, when python3 and gcc are installed, a tiny run of the runner with
lfheap and glibc whose CSV rows are all correct. Prints one PASS or FAIL line per
check (tests/suites/bench.sh runs it)."""

import csv
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "bench"))
import benchlib  # noqa: E402
import realprogs  # noqa: E402
import run  # noqa: E402

REALRUN = os.path.join(ROOT, "build", "bench", "realrun")
LFHEAP = os.path.abspath(os.path.join(ROOT, "build", "liblfheap.so"))
LIBC = realprogs.LIBC


def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not why else ": " + why))


# ---- the launcher ----
r = subprocess.run([REALRUN, "--workload=w", "--", "sh", "-c", "echo out; echo $LD_PRELOAD"],
                   capture_output=True, text=True, env=dict(os.environ, LD_PRELOAD=""))
lines = r.stdout.splitlines()
f = run.parse_result(r.stdout) or {}
check("realrun-result-line", r.returncode == 0 and lines[:2] == ["out", ""] and
      f.get("workload") == "w" and float(f.get("seconds", 0)) > 0 and
      int(f.get("peak_rss_kib", 0)) > 0, r.stdout)
r = subprocess.run([REALRUN, "--preload=" + LIBC, "--", "sh", "-c", "echo $LD_PRELOAD"],
                   capture_output=True, text=True)
check("realrun-preloads-the-child", r.stdout.splitlines()[:1] == [LIBC], r.stdout)
r = subprocess.run([REALRUN, "--", "sh", "-c", "echo partial; exit 3"], capture_output=True,
                   text=True)
check("realrun-passes-exit-status", r.returncode == 3 and "result " not in r.stdout,
      "%d %r" % (r.returncode, r.stdout))
r = subprocess.run([REALRUN, "--", "sh", "-c", "kill -9 $$"], capture_output=True, text=True)
check("realrun-signal-status", r.returncode == 128 + 9 and "signal 9" in r.stderr,
      "%d %r" % (r.returncode, r.stderr))
r = subprocess.run([REALRUN, "--bogus"], capture_output=True, text=True)
check("realrun-usage", r.returncode == 64, "%d" % r.returncode)

# ---- the binding verdict, on made-up traces ----
EXE = os.path.realpath(sys.executable)  # an executable that does not define malloc
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
ok = [(EXE, "malloc", LFHEAP), (EXE, "free", LFHEAP), (LIBC, "malloc", LFHEAP)]
check("served-all-to-the-preload", realprogs.served_by(ok, LFHEAP) is None)
why = realprogs.served_by(ok + [(EXE, "free", LIBC)], LFHEAP)
check("served-refuses-another-definer", why is not None and "free -> " + LIBC in why, why)
check("served-ignores-plt-slot", realprogs.served_by(ok + [(LIBC, "free", EXE)], LFHEAP)
      is None)
check("served-ignores-the-allocators-own-lookup",
      realprogs.served_by(ok + [(LFHEAP, "free", LIBC)], LFHEAP) is None)
why = realprogs.served_by([(EXE, "free", LFHEAP)], LFHEAP)
check("served-needs-malloc", why is not None and "statically linked" in why, why)
if os.path.exists(JEMALLOC):
    why = realprogs.served_by(ok + [(EXE, "calloc", JEMALLOC)], LFHEAP)
    check("served-refuses-a-linked-allocator", why is not None and JEMALLOC in why, why)

# a statically linked program: nothing binds malloc, so no allocator is said to serve it
with tempfile.TemporaryDirectory() as tmp:
    src, exe = os.path.join(tmp, "s.c"), os.path.join(tmp, "s")
    with open(src, "w") as fh:
        fh.write("#include <stdio.h>\n#include <stdlib.h>\nint main(void) { char *p = "
                 "malloc(100); puts(p ? \"ok\" : \"no\"); free(p); return 0; }\n")
    if subprocess.run(["gcc", "-static", "-O1", src, "-o", exe], capture_output=True,
                      check=False).returncode == 0:
        prog = realprogs.Program("static", exe, "-", lambda k, s: [exe])
        lf = benchlib.Allocator("lfheap", LFHEAP, None)
        why, out, status = realprogs.check_served(prog, {}, tmp, lf, 60)
        check("served-refuses-static-program", status == "ok" and out == "ok\n" and
              why is not None and "statically linked" in why, "%s %r %s" % (status, out, why))
    else:
        print("SKIP served-refuses-static-program (no static libc)")

# a program that is not installed is skipped with the package to install, never run
realprogs.BY_NAME["absent"] = realprogs.Program("absent", "/nonexistent/absent", "absent-pkg",
                                                lambda k, s: ["/nonexistent/absent"])
usable, skipped = realprogs.select(["python", "absent"], install=False)
check("select-skips-missing-program", [p.name for p in usable] in (["python"], []) and
      skipped[-1:] == ["absent: skipped, /nonexistent/absent not found (install it: "
                       "apt-get install absent-pkg)"], "%s" % skipped)
del realprogs.BY_NAME["absent"]

# ---- the output checks ----
py = realprogs.BY_NAME["python"]
knobs = {"rounds": 5, "checksum": 42}
check("output-known-answer", realprogs.check_output(py, knobs, "checksum 42\n", None) is None
      and realprogs.check_output(py, knobs, "checksum 43\n", None) is not None)
check("output-against-reference",
      realprogs.check_output(py, knobs, "checksum 42\n", "checksum 42\n") is None and
      "reference" in (realprogs.check_output(realprogs.BY_NAME["gcc"], {}, "a\n", "b\n") or ""))
check("output-drops-result-line", realprogs.program_output(
    py, "checksum 1\nresult workload=python seconds=1\n", "/") == "checksum 1\n")

# ---- the summary's real-program part, on made-up runs ----
res = run.Results(["python", "gcc"], ["lfheap", "glibc", "jemalloc"],
                  {"python": [1], "gcc": [1]})
for w, a, v, rss in (("python", "lfheap", 1.0, 2048), ("python", "glibc", 2.0, 1024),
                     ("python", "jemalloc", 0.5, 4096), ("gcc", "lfheap", 3.0, 1024),
                     ("gcc", "glibc", 3.0, 1024), ("gcc", "jemalloc", 1.5, 2048)):
    res.add({"workload": w, "allocator": a, "threads": 1, "run": 1, "status": "ok",
             "value": str(v), "peak_rss_kib": str(rss), "user_s": str(v / 2),
             "sys_s": "0.25", "_fields": {}})
served = {("python", "jemalloc"): None, ("gcc", "glibc"): None,
          ("gcc", "jemalloc"): "not served by X: malloc -> Y"}
md = "\n".join(run.real_lines(res, ["python", "gcc"], served, True))
want = ["| python time | 1.000 s | 2.000 s (0.50) | 0.500 s (2.00) |",
        "| gcc peak RSS | 1.0 | 1.0 (1.00) | 2.0 (0.50) |",
        # time: glibc (0.5 * 1.0) ** 0.5, jemalloc (2.0 * 2.0) ** 0.5
        "| geomean, lfheap / peer |  | **0.707** | **2.000** |",
        # best peer: python jemalloc 2.0, gcc jemalloc 2.0; RSS python glibc 2.0, gcc 1.0
        # CPU: python 0.75 / 0.5 (jemalloc), gcc 1.75 / 1.0 (jemalloc)
        "time **2.00**, peak RSS **1.41** (geometric means over 2 and 2 programs); CPU "
        "seconds against the peer with the fewest: **%.2f**." % (1.5 * 1.75) ** 0.5,
        "- gcc, jemalloc: not measured, not served by X: malloc -> Y",
        # CPU: user (half the time) + 0.25 s
        "| python CPU | 0.750 s | 1.250 s (0.60) | 0.500 s (1.50) |"]
missing = [w for w in want if w not in md]
check("real-summary-table", not missing, "missing %r in\n%s" % (missing, md))

# ---- a tiny real run of the runner ----
if all(os.path.exists(p) for p in ("/usr/bin/python3", "/usr/bin/gcc", LFHEAP)):
    with tempfile.TemporaryDirectory() as tmp:
        r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "run.py"),
                            "--profile", "test", "--no-build", "--no-install",
                            "--allocators", "lfheap,glibc", "--groups", "real",
                            "--workloads", "python,gcc", "--runs", "2", "--no-plots",
                            "--out", tmp], capture_output=True, text=True)
        runs = [p for p in glob.glob(os.path.join(tmp, "*.csv"))
                if not p.endswith("-best-peer.csv")]
        rows = list(csv.DictReader(open(runs[0]))) if runs else []
        got = sorted((x["workload"], x["allocator"], x["run"], x["status"]) for x in rows)
        check("real-runner-rows", r.returncode == 0 and got == sorted(
            (w, a, str(k), "ok") for w in ("python", "gcc") for a in ("lfheap", "glibc")
            for k in (1, 2)), "exit %d %s %s" % (r.returncode, got, r.stderr[-300:]))
        check("real-runner-report", "### Real programs" in r.stdout and
              "every allocator, every program." in r.stdout and
              "| python time |" in r.stdout, r.stdout[-1500:])
else:
    print("SKIP real-runner (python3, gcc or build/liblfheap.so missing)")
