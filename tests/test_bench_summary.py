#!/usr/bin/env python3
"""The benchmark summary's best-peer part (bench/run.py: best_peer, best_peer_summary,
best_peer_lines, write_best_peer_csv, across_runs_lines) on runs made up here, whose
answers are known: the peer chosen in each cell, the ratios (inverted for larson's
Mops/s), the paired ratios (paired_ratio) and their medians across runs, the geometric
means, the cells above the 5% margin worst first, and the cells without a ratio (no
peer result; no lfheap result); and, on seeded noise around one true value, that the
paired ratio has none of the best-peer ratio's bias. Prints one PASS or FAIL line per
check (tests/suites/bench.sh runs it)."""

import csv
import math
import os
import random
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import run  # noqa: E402


def check(name, ok, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok or not why else ": " + why))


def close(a, b):
    return a is not None and b is not None and abs(a - b) < 1e-9


# (workload, threads, allocator, run, value, peak RSS KiB); value None: the run failed
ROWS = [
    # churn, 1 thread: lfheap median 1.1 s; mimalloc's failed run is left out, so its
    # median is 1.0 s (the fastest) and its RSS 4 MiB (not 1 MiB); glibc's RSS is the
    # smallest: time 1.1 (listed), RSS 2.0 (listed, worst)
    ("churn", 1, "lfheap", 1, 1.0, 1024), ("churn", 1, "lfheap", 2, 1.2, 2048),
    ("churn", 1, "lfheap", 3, 1.1, 3072),
    ("churn", 1, "glibc", 1, 2.0, 1024), ("churn", 1, "glibc", 2, 2.0, 1024),
    ("churn", 1, "glibc", 3, 2.0, 1024),
    ("churn", 1, "mimalloc", 1, 1.0, 4096), ("churn", 1, "mimalloc", 2, None, 1),
    ("churn", 1, "mimalloc", 3, 1.0, 4096),
    # larson reports Mops/s: the best peer is the highest (jemalloc, 80), and the ratio
    # is 80 / 100 = 0.8; RSS 1 MiB against glibc's 2: 0.5
    ("larson", 2, "lfheap", 1, 100.0, 1024), ("larson", 2, "glibc", 1, 50.0, 2048),
    ("larson", 2, "jemalloc", 1, 80.0, 4096),
    # every peer run failed: no ratio, "no peer result"
    ("churn", 2, "lfheap", 1, 1.0, 1024), ("churn", 2, "glibc", 1, None, 1024),
    # 4% behind in time (under the margin, not listed), 10% in RSS (listed)
    ("speed", 1, "lfheap", 1, 1.04, 1100), ("speed", 1, "tcmalloc", 1, 1.0, 1000),
    # lfheap failed: no ratio, "no lfheap result"
    ("memory", 1, "lfheap", 1, None, 1024), ("memory", 1, "glibc", 1, 1.0, 1024),
    # three times slower than glibc: first in the time list; same RSS
    ("threadtest", 1, "lfheap", 1, 3.0, 1024), ("threadtest", 1, "glibc", 1, 1.0, 1024),
]

cells = run.best_peer(ROWS)
by = {(c["workload"], c["threads"]): c for c in cells}
check("best-peer-cells-in-order", [(c["workload"], c["threads"]) for c in cells] ==
      [("churn", 1), ("larson", 2), ("churn", 2), ("speed", 1), ("memory", 1),
       ("threadtest", 1)], "%s" % list(by))

c = by[("churn", 1)]
check("best-peer-fastest-peer", c["time_peer"] == "mimalloc" and close(c["time_peer_value"], 1.0)
      and close(c["lfheap"], 1.1) and close(c["time_ratio"], 1.1), "%s" % c)
check("best-peer-smallest-rss-peer", c["rss_peer"] == "glibc" and close(c["rss_peer_mib"], 1.0)
      and close(c["lfheap_rss"], 2.0) and close(c["rss_ratio"], 2.0), "%s" % c)

# paired: repetition 1 against mimalloc's run 1 (its other run, 1.0 s, beats glibc's
# 2.0), 1.0; repetition 2 against glibc (mimalloc has no run 2), 0.6; repetition 3
# against mimalloc, 1.1: median 1.0. RSS against glibc each time: 1, 2, 3 MiB over 1.
check("best-peer-paired", close(c["paired_time_ratio"], 1.0) and
      close(c["paired_rss_ratio"], 2.0), "%s" % c)
check("best-peer-lfheap-range", c["lfheap_range"] == (1.0, 1.2), "%s" % c)

c = by[("larson", 2)]
check("best-peer-single-run-unpaired", c["paired_time_ratio"] is None and
      c["paired_rss_ratio"] is None, "%s" % c)
check("best-peer-throughput-inverted", c["metric"] == "mops" and c["time_peer"] == "jemalloc"
      and close(c["time_ratio"], 0.8) and c["rss_peer"] == "glibc"
      and close(c["rss_ratio"], 0.5), "%s" % c)

c = by[("churn", 2)]
check("best-peer-no-peer-result", c["time_ratio"] is None and c["rss_ratio"] is None and
      c["time_peer"] is None and c["missing"] == "no peer result", "%s" % c)
c = by[("memory", 1)]
check("best-peer-no-lfheap-result", c["time_ratio"] is None and c["time_peer"] == "glibc"
      and c["missing"] == "no lfheap result", "%s" % c)

s = run.best_peer_summary(cells)
g_time = (1.1 * 0.8 * 1.04 * 3.0) ** 0.25
g_rss = (2.0 * 0.5 * 1.1 * 1.0) ** 0.25
check("best-peer-geomean", close(s["time_geomean"], g_time) and s["time_cells"] == 4 and
      close(s["rss_geomean"], g_rss) and s["rss_cells"] == 4,
      "%s %s, want %s %s" % (s["time_geomean"], s["rss_geomean"], g_time, g_rss))
listed = [(c["workload"], c["threads"], c["time_peer"], round(c["time_ratio"], 6))
          for c in s["time_behind"]]
check("best-peer-time-behind-list", listed == [("threadtest", 1, "glibc", 3.0),
                                               ("churn", 1, "mimalloc", 1.1)], "%s" % listed)
listed = [(c["workload"], c["threads"], c["rss_peer"], round(c["rss_ratio"], 6))
          for c in s["rss_behind"]]
check("best-peer-rss-behind-list", listed == [("churn", 1, "glibc", 2.0),
                                              ("speed", 1, "tcmalloc", 1.1)], "%s" % listed)
check("best-peer-no-ratio-list", [(c["workload"], c["threads"]) for c in s["no_ratio"]] ==
      [("churn", 2), ("memory", 1)])

md = "\n".join(run.best_peer_lines(cells))
want = ["time **%.2f** (4 cells), peak RSS **%.2f** (4 cells)" % (g_time, g_rss),
        "- threadtest, 1 thread: **3.00**, glibc (1.00 s against lfheap's 3.00 s)\n"
        "- churn, 1 thread: **1.10**, mimalloc (1.00 s against lfheap's 1.10 s; lfheap's "
        "runs 1.00 s to 1.20 s; paired 1.00)\n",
        "- churn, 1 thread: **2.00**, glibc (1.0 MiB against lfheap's 2.0 MiB)\n"
        "- speed, 1 thread: **1.10**, tcmalloc (1.0 MiB against lfheap's 1.1 MiB)\n",
        "- churn, 2 threads: no peer result\n- memory, 1 thread: no lfheap result\n",
        "| larson | 2 | 100 Mops/s | jemalloc 80.0 Mops/s | 0.80 | 1.0 | glibc 2.0 | 0.50 | — | — |",
        "| churn | 1 | 1.10 s | mimalloc 1.00 s | 1.10 | 2.0 | glibc 1.0 | 2.00 | 1.00 | 2.00 |",
        "| churn | 2 | 1.00 s | — | — | 1.0 | — | — | — | — |",
        "| memory | 1 | — | glibc 1.00 s | — | — | glibc 1.0 | — | — | — |",
        "Paired, against the run of the same repetition of the peer that is best in the "
        "other repetitions (the median over repetitions; the last two columns of the table): "
        "time **1.00** (1 cells, 0 above 1.05), peak RSS **2.00** (1 cells, 1 above 1.05)."]
missing = [w for w in want if w not in md]
check("best-peer-markdown", not missing, "missing %r in\n%s" % (missing, md))

# An A/A comparison: lfheap and five peers whose runs all scatter around the same true
# time and RSS (seeded, so the same numbers every time). The best of six noisy medians
# is biased low, so lfheap looks behind the best peer; the paired ratio is not.
rng = random.Random(20261201)
noisy = []
for cell in range(300):
    for rep in range(1, 4):
        for alloc in ["lfheap"] + ["copy%d" % i for i in range(5)]:
            noisy.append(("speed", cell + 1, alloc, rep, math.exp(rng.gauss(0, 0.1)),
                          1024 * math.exp(rng.gauss(0, 0.05))))
s = run.best_peer_summary(run.best_peer(noisy))
check("best-peer-aa-bias", s["time_geomean"] > 1.05 and s["rss_geomean"] > 1.02 and
      abs(math.log(s["paired_time_geomean"])) < 0.02 and
      abs(math.log(s["paired_rss_geomean"])) < 0.01 and s["paired_time_cells"] == 300,
      "%s" % {k: v for k, v in s.items() if "geomean" in k})

# across runs (bench/run.py --best-peer-of A.csv,B.csv): each cell's paired ratios, the
# median first; churn is 1.2 in one run and 1.0 in the other, speed 0.9 in both
def two_reps(workload, mine, theirs):
    return [(workload, 1, a, rep, v, 1024) for a, v in (("lfheap", mine), ("glibc", theirs))
            for rep in (1, 2)]
runs_cells = [run.best_peer(two_reps("churn", 1.2, 1.0) + two_reps("speed", 0.9, 1.0)),
              run.best_peer(two_reps("churn", 1.0, 1.0) + two_reps("speed", 0.9, 1.0))]
md = "\n".join(run.across_runs_lines(runs_cells))
want = ["across 2 runs: geometric mean of the cells' medians **0.99**; 1 cells with a median "
        "above 1.05.",
        "| churn | 1 | 2 | 1.10 | 1.00 | 1.20 | glibc (2) |\n"
        "| speed | 1 | 2 | 0.90 | 0.90 | 0.90 | glibc (2) |"]
missing = [w for w in want if w not in md]
check("best-peer-across-runs", not missing, "missing %r in\n%s" % (missing, md))

# a cell of nothing but failed runs, and no cells at all, do not break anything
cells2 = run.best_peer([("large", 8, "lfheap", 1, None, 0), ("large", 8, "glibc", 1, None, 0)])
check("best-peer-all-failed", cells2[0]["missing"] == "no lfheap result and no peer result"
      and "- large, 8 threads: no lfheap result and no peer result" in
      "\n".join(run.best_peer_lines(cells2)), "%s" % cells2)
s = run.best_peer_summary([])
check("best-peer-empty", s["time_geomean"] is None and "time **—** (0 cells)" in
      "\n".join(run.best_peer_lines([])))

# the runner's own rows reach best_peer() as the tuples above
res = run.Results(["larson"], ["lfheap", "glibc"], {"larson": [1]})
for alloc, value, status in (("lfheap", "10.0", "ok"), ("glibc", "20.0", "ok"),
                             ("glibc", "", "failed(2)")):
    res.add({"workload": "larson", "allocator": alloc, "threads": 1, "run": 1,
             "status": status, "value": value, "peak_rss_kib": "2048"})
c = run.best_peer(res.run_rows())[0]
check("best-peer-from-results", c["time_peer"] == "glibc" and close(c["time_ratio"], 2.0) and
      close(c["rss_ratio"], 1.0), "%s" % c)

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "best-peer.csv")
    run.write_best_peer_csv(path, cells)
    rows = list(csv.DictReader(open(path)))
ok = len(rows) == len(cells) and list(rows[0]) == run.BEST_PEER_FIELDS and \
    rows[1]["time_peer"] == "jemalloc" and math.isclose(float(rows[1]["time_ratio"]), 0.8) \
    and rows[2]["time_ratio"] == "" and rows[2]["missing"] == "no peer result" \
    and math.isclose(float(rows[0]["paired_rss_ratio"]), 2.0) and \
    rows[1]["paired_time_ratio"] == ""
check("best-peer-csv", ok, "%s" % rows[:3])
