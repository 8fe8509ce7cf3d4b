#!/usr/bin/env python3
"""What the statistics and debug builds cost: runs benchmark workloads with the release
library and with variant libraries preloaded, interleaved in every repetition (rotating
order), and prints each workload's median time per library and its ratio to the
release build's median from the same run, then the same for the peak resident size.
Tests check correctness; this only measures.

    bench/variants.py                                  # stats-debug vs release, defaults
    bench/variants.py --libs build/liblfheap-stats.so,build/liblfheap-stats-debug.so
    bench/variants.py --workloads larson,churn --threads 1,2 --runs 7
    bench/variants.py --release OLD.so --libs NEW.so --workloads sqlite3,z3 --threads 1

A workload may be a real program of bench/realprogs.py (run at one thread, through
realrun, as the benchmark's `real` group runs it).

Workload parameters are run.py's "quick" profile. larson reports Mops/s; its ratio is
inverted (release throughput / variant throughput) so that every ratio reads as "time
relative to release". The last line of each table is the geometric mean of the ratios.
"""

import argparse
import math
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import realprogs  # noqa: E402
import run  # noqa: E402

DEFAULT_WORKLOADS = "linux-scalability,threadtest,larson,churn,speed,consume,recycle,thread-churn"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--release", default="build/liblfheap.so")
    ap.add_argument("--libs", default="build/liblfheap-stats-debug.so")
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    libs = [args.release] + args.libs.split(",")
    names = [os.path.basename(p) for p in libs]
    knobs = run.PROFILES["quick"]["knobs"]
    cells = [(w, int(t)) for w in args.workloads.split(",") for t in args.threads.split(",")]
    scratch = tempfile.mkdtemp(prefix="lfheap-variants-")
    values = {(c, lib): [] for c in cells for lib in libs}
    rss = {(c, lib): [] for c in cells for lib in libs}
    for rep in range(args.runs):
        for c in cells:
            workload, threads = c
            order = libs[rep % len(libs):] + libs[:rep % len(libs)]
            for lib in order:
                benchlib.note("run %d/%d: %s t=%d %s" % (rep + 1, args.runs, workload, threads,
                                                        os.path.basename(lib)))
                res = run_one(workload, threads, knobs, lib, scratch)
                if res["status"] != "ok":
                    sys.exit("%s with %s: %s" % (workload, lib, res["status"]))
                metric = run.METRIC[workload]
                values[(c, lib)].append(float(res["fields"][metric]))
                rss[(c, lib)].append(float(res["fields"]["peak_rss_kib"]) / 1024)
    table(cells, libs, names, values, "", lambda c, base, med:
          base / med if run.METRIC[c[0]] == "mops" else med / base)
    print()
    table(cells, libs, names, rss, "peak RSS MiB, ", lambda c, base, med: med / base)


def run_one(workload, threads, knobs, lib, scratch):
    """One run of a kernel workload, or of a real program (bench/realprogs.py: one
    thread, its input prepared afresh in `scratch`), with `lib` preloaded."""
    if workload not in realprogs.BY_NAME:
        env = dict(os.environ, LD_PRELOAD=os.path.abspath(lib))
        return run.run_once(run.command_line(workload, knobs[workload], threads), env, 300)
    alloc = benchlib.Allocator(os.path.basename(lib), os.path.abspath(lib), None)
    where = os.path.join(scratch, workload)
    os.makedirs(where, exist_ok=True)
    return run.real_once(realprogs.BY_NAME[workload], dict(knobs[workload]), where, alloc, 600)


def table(cells, libs, names, values, what, ratio_of):
    """One Markdown table: each cell's median per library, with its ratio to the
    release build's median in brackets, and the geometric mean of the ratios."""
    print("| workload | threads | " + " | ".join(what + n for n in names) + " |")
    print("|---|---:|" + "---:|" * len(libs))
    logs = {lib: [] for lib in libs[1:]}
    for c in cells:
        workload, threads = c
        base = statistics.median(values[(c, libs[0])])
        row = ["%.3g" % base]
        for lib in libs[1:]:
            med = statistics.median(values[(c, lib)])
            ratio = ratio_of(c, base, med)
            logs[lib].append(math.log(ratio))
            row.append("%.3g (%.2f)" % (med, ratio))
        print("| %s | %d | %s |" % (workload, threads, " | ".join(row)))
    print("| geometric mean | | 1 | " +
          " | ".join("%.2f" % math.exp(sum(v) / len(v)) for v in logs.values()) + " |")


if __name__ == "__main__":
    main()
