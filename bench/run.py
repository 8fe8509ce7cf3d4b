#!/usr/bin/env python3
"""The benchmark comparison: lfheap against glibc, jemalloc, tcmalloc, mimalloc and
tbbmalloc on every workload in bench/, at several thread counts, and on real programs
(the `real` group, bench/realprogs.py), several runs each.

    bench/run.py                      # the `make bench` profile (quick, 3 runs)
    bench/run.py --profile full       # published parameters, 5 runs (make bench-full)
    bench/run.py --workloads larson,churn --allocators glibc,jemalloc --threads 1,4
    bench/run.py --workloads oversubscribed --threads 2,32 --runs 5
    bench/run.py --groups real
    bench/run.py --lfheap /tmp/liblfheap.so
    bench/run.py --copies 5           # lfheap against five copies of itself (A/A)

Each run is one process (the allocator preloaded with LD_PRELOAD, glibc without); the
runner records the program's own measured time (or Mops/s for larson), the process's
wall, user and system time and its peak RSS (the program's VmHWM; wait4 rusage if it
reports none). Allocators are interleaved within each repetition, in a rotating order,
so that drift on a busy machine hits all alike. Output (under --out, by default
build/bench-results/, which git ignores): tables on stdout and in <date>-<host>.md,
every run in <date>-<host>.csv, lfheap against the best peer of every cell in
<date>-<host>-best-peer.csv, and PNG plots in <date>-<host>/. A run the documentation
cites is copied into bench/results/. Standard library only.
"""

import argparse
import csv
import math
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
import fastpath  # noqa: E402
import realprogs  # noqa: E402

# Workloads in report order. Each profile gives every workload's knobs; the runner adds
# --threads. "metric" is what the table shows: seconds (lower is better) or Mops/s.
WORKLOADS = ["linux-scalability", "threadtest", "larson", "cache-thrash", "cache-scratch",
             "consume", "recycle", "churn", "speed", "memory", "thread-churn",
             "thread-churn-concurrent", "large", "oversubscribed", "pool-rebuild"]
# The `real` group: real programs from Debian packages (bench/realprogs.py), each run
# once per allocator per repetition like a workload at one thread.
REAL = realprogs.NAMES
GROUPS = {"kernels": WORKLOADS, "real": REAL}
METRIC = {w: "seconds" for w in WORKLOADS + REAL}
METRIC["larson"] = "mops"
METRIC["oversubscribed"] = "mops"

# Thread counts a workload runs at unless --threads says otherwise. oversubscribed is
# about 32 threads on this project's 2 cores against 2 threads (one per core), and its
# over-subscription table divides the throughput at every count above OVERSUB_BASE by
# the throughput at OVERSUB_BASE.
DEFAULT_THREADS = [1, 2, 4, 8]
WORKLOAD_THREADS = {"oversubscribed": [1, 2, 32], "thread-churn-concurrent": [100, 500]}
WORKLOAD_THREADS.update({w: [1] for w in REAL})
OVERSUB_BASE = 2

PROFILES = {
    # The published parameters (the papers' benchmarks, bench/README.md); memory repeats its cycle 10x.
    "full": {
        "runs": 5, "timeout": 900, "fastpath": (1000000, 2000000),
        "knobs": {
            "linux-scalability": {"n": 10000000, "size": 16},
            "threadtest": {"rounds": 100, "n": 100000, "size": 8},
            "larson": {"ms": 5000, "slots": 1000, "ops": 10000, "min": 16, "max": 128},
            "cache-thrash": {"iterations": 1000, "rw": 1000000, "size": 8},
            "cache-scratch": {"iterations": 1000, "rw": 1000000, "size": 8},
            "consume": {"iterations": 5000, "objects": 6000, "size": 4},
            "recycle": {"n": 10000000, "rate": 1000, "min": 8, "max": 8},
            "churn": {"spots": 16, "n": 100000, "min": 50, "max": 500, "step": 50},
            "speed": {"n": 100000, "min": 50, "max": 500, "step": 50},
            "memory": {"consumers": 1, "n": 100000, "round": 100000, "repeat": 10,
                       "min": 50, "max": 500, "step": 50},
            "thread-churn": {"n": 100000, "size": 64, "temp": 32},
            "thread-churn-concurrent": {"rounds": 300, "blocks": 100, "settle_ms": 1250},
            "large": {"iterations": 2000, "slots": 20, "min_mib": 5, "max_mib": 25},
            "oversubscribed": {"ops": 10000000, "slots": 8192, "handoff": 30,
                               "handoff_max": 1024, "realloc": 10, "medium": 20, "large": 500},
            "pool-rebuild": {"rounds": 50, "steps": 20000, "slots": 1000, "large": 10, "share": 4,
                             "max_kib": 4096},
            "python": {"rounds": 10000, "checksum": 339342658},
            "ruby": {"rounds": 4000, "checksum": 281589796},
            "sqlite3": {}, "gcc": {"functions": 1500}, "z3": {}, "db_bench": {"num": 1000000},
            "redis": {"keys": 1000000, "requests": 200000},
        },
    },
    # `make bench`: the same shapes scaled so that most runs take about 0.05-0.5 s (13
    # cells' fastest runs 0.02-0.05 s: bench/README.md) and the whole comparison about 10
    # minutes on 2 cores. churn is *larger* than published (its published run lasts ~3 ms,
    # too short to time reliably).
    "quick": {
        "runs": 3, "timeout": 300, "fastpath": (200000, 400000),
        "knobs": {
            "linux-scalability": {"n": 1000000, "size": 16},
            "threadtest": {"rounds": 60, "n": 100000, "size": 8},
            "larson": {"ms": 500, "slots": 1000, "ops": 10000, "min": 16, "max": 128},
            "cache-thrash": {"iterations": 200, "rw": 300000, "size": 8},
            "cache-scratch": {"iterations": 200, "rw": 300000, "size": 8},
            "consume": {"iterations": 300, "objects": 6000, "size": 4},
            "recycle": {"n": 2000000, "rate": 1000, "min": 8, "max": 8},
            "churn": {"spots": 16, "n": 1000000, "min": 50, "max": 500, "step": 50},
            "speed": {"n": 30000, "min": 50, "max": 500, "step": 50},
            "memory": {"consumers": 1, "n": 50000, "round": 50000, "repeat": 5,
                       "min": 50, "max": 500, "step": 50},
            "thread-churn": {"n": 4000, "size": 64, "temp": 32},
            "thread-churn-concurrent": {"rounds": 30, "blocks": 100, "settle_ms": 1250},
            "large": {"iterations": 100, "slots": 20, "min_mib": 5, "max_mib": 25},
            "oversubscribed": {"ops": 2000000, "slots": 8192, "handoff": 30,
                               "handoff_max": 1024, "realloc": 10, "medium": 20, "large": 500},
            "pool-rebuild": {"rounds": 20, "steps": 20000, "slots": 1000, "large": 10, "share": 4,
                             "max_kib": 4096},
            # each about 1 s of CPU on the project's machine
            "python": {"rounds": 2000, "checksum": 237712233},
            "ruby": {"rounds": 800, "checksum": 884739543},
            "sqlite3": {}, "gcc": {"functions": 600}, "z3": {}, "db_bench": {"num": 200000},
            "redis": {"keys": 100000, "requests": 30000},
        },
    },
    # For the test suite: seconds in all, checks the machinery, not the allocators.
    "test": {
        "runs": 2, "timeout": 60, "fastpath": None,
        "knobs": {
            "linux-scalability": {"n": 20000, "size": 16},
            "threadtest": {"rounds": 2, "n": 10000, "size": 8},
            "larson": {"ms": 50, "slots": 100, "ops": 1000, "min": 16, "max": 128},
            "cache-thrash": {"iterations": 20, "rw": 10000, "size": 8},
            "cache-scratch": {"iterations": 20, "rw": 10000, "size": 8},
            "consume": {"iterations": 10, "objects": 500, "size": 4},
            "recycle": {"n": 20000, "rate": 1000, "min": 8, "max": 8},
            "churn": {"spots": 16, "n": 5000, "min": 50, "max": 500, "step": 50},
            "speed": {"n": 500, "min": 50, "max": 500, "step": 50},
            "memory": {"consumers": 1, "n": 2000, "round": 2000, "repeat": 2,
                       "min": 50, "max": 500, "step": 50, "sample_us": 200},
            "thread-churn": {"n": 100, "size": 64, "temp": 8},
            "thread-churn-concurrent": {"rounds": 2, "blocks": 20, "settle_ms": 0},
            "large": {"iterations": 6, "slots": 4, "min_mib": 1, "max_mib": 2},
            "oversubscribed": {"ops": 20000, "slots": 512, "handoff": 30,
                               "handoff_max": 1024, "realloc": 10, "medium": 20, "large": 500},
            "pool-rebuild": {"rounds": 2, "steps": 500, "slots": 100, "large": 10, "share": 4,
                             "max_kib": 256},
            "python": {"rounds": 50, "checksum": 919471015},
            "ruby": {"rounds": 50, "checksum": 255579351},
            "sqlite3": {}, "gcc": {"functions": 50}, "z3": {}, "db_bench": {"num": 1000},
            "redis": {"keys": 1000, "requests": 1000},
        },
    },
}

CSV_FIELDS = ["date", "host", "profile", "workload", "allocator", "threads", "run", "status",
              "metric", "value", "seconds", "wall_s", "user_s", "sys_s", "peak_rss_kib",
              "maxrss_kib",
              "command", "result"]


def command_line(workload, knobs, threads):
    return [benchlib.bench_bin(workload), "--threads=%d" % threads] + \
        ["--%s=%s" % (k, v) for k, v in knobs.items()]


def parse_result(stdout):
    """The fields of the program's `result ...` line, or None."""
    for line in stdout.splitlines():
        if line.startswith("result "):
            fields = {}
            for item in line.split()[1:]:
                k, _, v = item.partition("=")
                fields[k] = v
            return fields
    return None


def run_once(cmd, env, timeout):
    """Runs one benchmark process. Returns a dict with status, the result fields, wall,
    user and sys seconds and peak RSS (KiB) of the child from wait4."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=out_w, stderr=err_w, stdin=subprocess.DEVNULL)
    os.close(out_w)
    os.close(err_w)
    chunks = {out_r: [], err_r: []}

    def drain(fd):
        while True:
            b = os.read(fd, 65536)
            if not b:
                break
            chunks[fd].append(b)
        os.close(fd)

    readers = [threading.Thread(target=drain, args=(fd,)) for fd in (out_r, err_r)]
    for t in readers:
        t.start()
    timed_out = []

    def kill():
        timed_out.append(True)
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    timer = threading.Timer(timeout, kill)
    timer.start()
    _, status, ru = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    stdout = b"".join(chunks[out_r]).decode(errors="replace")
    stderr = b"".join(chunks[err_r]).decode(errors="replace")
    res = {"wall_s": wall, "user_s": ru.ru_utime, "sys_s": ru.ru_stime,
           "maxrss_kib": ru.ru_maxrss, "fields": parse_result(stdout), "stderr": stderr,
           "stdout": stdout}
    if timed_out:
        res["status"] = "timeout"
    elif proc.returncode != 0:
        first = stderr.strip().splitlines()[:1]
        res["status"] = "failed(%d)%s" % (proc.returncode, (": " + first[0]) if first else "")
    elif res["fields"] is None:
        res["status"] = "failed: no result line"
    else:
        res["status"] = "ok"
    return res


class Progress:
    """One progress line on stderr (rewritten in place on a terminal)."""

    def __init__(self, total):
        self.total = total
        self.done = 0
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()

    def show(self, text):
        self.done += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done) if self.done else 0
        line = "[%d/%d %s, ~%ds left] %s" % (self.done, self.total, fmt_dur(elapsed),
                                            eta, text)
        if self.tty:
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self):
        if self.tty:
            sys.stderr.write("\n")
        sys.stderr.flush()


def threads_text(threads):
    """'1, 2, 4, 8 (oversubscribed: 1, 2, 32)': the most common list, then exceptions."""
    lists = [tuple(ts) for ts in threads.values()]
    common = max(lists, key=lists.count)
    others = ["%s: %s" % (w, ", ".join(map(str, ts))) for w, ts in threads.items()
              if tuple(ts) != common]
    return ", ".join(map(str, common)) + (" (%s)" % "; ".join(others) if others else "")


def fmt_dur(s):
    return "%dm%02ds" % (s // 60, s % 60)


def median(xs):
    return statistics.median(xs) if xs else None


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_value(v, metric):
    if v is None:
        return "—"
    if metric == "mops":
        return "%.2f" % v
    return "%.3f" % v if v < 10 else "%.1f" % v


class Results:
    """Every run, and the medians the tables are made of."""

    def __init__(self, workloads, allocators, threads):
        self.workloads = workloads
        self.allocators = allocators
        self.threads = threads  # workload -> its thread counts
        self.rows = []
        self.by_cell = {}

    def add(self, row):
        self.rows.append(row)
        self.by_cell.setdefault((row["workload"], row["allocator"], row["threads"]),
                                []).append(row)

    def cell(self, workload, alloc, threads):
        """(median value, median peak RSS MiB, number of failed runs)."""
        rows = self.by_cell.get((workload, alloc, threads), [])
        ok = [r for r in rows if r["status"] == "ok"]
        val = median([float(r["value"]) for r in ok])
        rss = median([float(r["peak_rss_kib"]) / 1024.0 for r in ok])
        return val, rss, len(rows) - len(ok)

    def field(self, workload, alloc, threads, name):
        """Median of a field of the programs' result lines over the successful runs."""
        rows = self.by_cell.get((workload, alloc, threads), [])
        vals = []
        for r in rows:
            try:
                if r["status"] == "ok":
                    vals.append(float(r["_fields"][name]))
            except (KeyError, ValueError):
                pass
        return median(vals)

    def run_rows(self):
        """Every run as best_peer() takes it (run_row)."""
        return [run_row(r) for r in self.rows]

    def time_ratio(self, workload, alloc, threads):
        """lfheap's time divided by this allocator's (for throughput: the inverse ratio
        of Mops/s). Below 1 means lfheap is faster."""
        lf, _, _ = self.cell(workload, "lfheap", threads)
        v, _, _ = self.cell(workload, alloc, threads)
        if lf is None or v is None or lf <= 0 or v <= 0:
            return None
        return v / lf if METRIC[workload] == "mops" else lf / v

    def rss_ratio(self, workload, alloc, threads):
        _, lf, _ = self.cell(workload, "lfheap", threads)
        _, v, _ = self.cell(workload, alloc, threads)
        if lf is None or v is None or v <= 0:
            return None
        return lf / v

    def cpu_seconds(self, workload, alloc, threads):
        """Median user + sys seconds of the process over the successful runs."""
        rows = self.by_cell.get((workload, alloc, threads), [])
        return median([float(r["user_s"]) + float(r["sys_s"])
                       for r in rows if r["status"] == "ok"])

    def cpus_busy(self, workload, alloc, threads):
        """Median of (user + sys) / wall over the successful runs: how many CPUs the
        process kept busy. Threads asleep on a lock, or preempted by other work on the
        machine, bring it down."""
        rows = self.by_cell.get((workload, alloc, threads), [])
        return median([(float(r["user_s"]) + float(r["sys_s"])) / float(r["wall_s"])
                       for r in rows if r["status"] == "ok" and float(r["wall_s"]) > 0])

    def per_cpu_second(self, workload, alloc, threads):
        """Median of the program's allocator calls (its `calls` field) per CPU second
        (user + sys) of the process, in millions: the cost of the work whatever share
        of the CPUs the process got."""
        vals = []
        for r in self.by_cell.get((workload, alloc, threads), []):
            try:
                cpu = float(r["user_s"]) + float(r["sys_s"])
                if r["status"] == "ok" and cpu > 0:
                    vals.append(float(r["_fields"]["calls"]) / cpu / 1e6)
            except (KeyError, ValueError):
                pass
        return median(vals)

    def scaling(self, workload, alloc, threads, base):
        """This allocator's throughput at `threads` divided by its own at `base` (the
        medians), and the same ratio for each repetition in which both runs succeeded
        (the spread of these shows the noise)."""
        v, _, _ = self.cell(workload, alloc, threads)
        b, _, _ = self.cell(workload, alloc, base)
        med = v / b if v is not None and b else None
        runs = {}
        for t in (base, threads):
            for r in self.by_cell.get((workload, alloc, t), []):
                if r["status"] == "ok":
                    runs.setdefault(r["run"], {})[t] = float(r["value"])
        per_run = [x[threads] / x[base] for _, x in sorted(runs.items())
                   if len(x) == 2 and x[base] > 0]
        return med, per_run


def workload_tables(res, workload, have_lfheap):
    metric = METRIC[workload]
    threads = res.threads[workload]
    unit = "Mops/s, higher is better" if metric == "mops" else "seconds, lower is better"
    head = "| allocator | " + " | ".join("%d thr" % t for t in threads) + " |"
    sep = "|---|" + "---:|" * len(threads)
    out = ["### %s" % workload, "", "Median %s%s:" %
           (unit, "; in brackets lfheap's time / this allocator's (below 1: lfheap is "
                  "faster)" if have_lfheap else ""), "", head, sep]
    for a in res.allocators:
        cells = []
        for t in threads:
            v, _, failed = res.cell(workload, a, t)
            s = fmt_value(v, metric)
            r = res.time_ratio(workload, a, t) if a != "lfheap" else None
            if r is not None:
                s += " (%.2f)" % r
            if failed:
                s += " !%d failed" % failed
            cells.append(s)
        out.append("| %s | %s |" % (a, " | ".join(cells)))
    out += ["", "Peak RSS, MiB (median)%s:" %
            ("; in brackets lfheap's / this allocator's" if have_lfheap else ""), "", head, sep]
    for a in res.allocators:
        cells = []
        for t in threads:
            _, rss, _ = res.cell(workload, a, t)
            s = "—" if rss is None else "%.1f" % rss
            r = res.rss_ratio(workload, a, t) if a != "lfheap" else None
            if r is not None:
                s += " (%.2f)" % r
            cells.append(s)
        out.append("| %s | %s |" % (a, " | ".join(cells)))
    out.append("")
    for title, fn in EXTRA_TABLES.get(workload, []):
        out += [title + ":", "", head, sep]
        for a in res.allocators:
            out.append("| %s | %s |" % (a, " | ".join(fn(res, workload, a, t)
                                                      for t in threads)))
        out.append("")
    return out


def _overhead_cell(res, workload, alloc, threads):
    """(peak RSS - RSS before the first object) / peak bytes requested."""
    peak = res.field(workload, alloc, threads, "peak_rss_mib")
    base = res.field(workload, alloc, threads, "base_rss_mib")
    req = res.field(workload, alloc, threads, "peak_requested_mib")
    return "—" if None in (peak, base) or not req else "%.2f" % ((peak - base) / req)


def _field_cell(res, workload, alloc, threads, name):
    v = res.field(workload, alloc, threads, name)
    return "—" if v is None else "%.2f" % v


# Further tables for workloads whose programs report more than a time.
EXTRA_TABLES = {
    "memory": [
        ("Memory overhead: (peak RSS - RSS before the first object) / peak bytes requested "
         "(median; 1.00 would be no overhead)", _overhead_cell),
        ("RSS at the end, everything freed, MiB (median): what the allocator kept",
         lambda res, w, a, t: _field_cell(res, w, a, t, "final_rss_mib")),
    ],
    "thread-churn": [
        ("RSS growth from the first tenth of the threads to the end, MiB (median; "
         "should stay near 0)",
         lambda res, w, a, t: _field_cell(res, w, a, t, "growth_mib")),
    ],
    "thread-churn-concurrent": [
        ("RSS at the last round of threads, MiB (median)",
         lambda res, w, a, t: _field_cell(res, w, a, t, "rss_last_round_mib")),
        ("RSS 1.25 s after the churn stopped, no call in between, MiB (median)",
         lambda res, w, a, t: _field_cell(res, w, a, t, "rss_settled_mib")),
    ],
}


def summary_table(res):
    out = ["| peer | lfheap time / peer time (geomean) | lfheap faster in | "
           "lfheap peak RSS / peer (geomean) | cells |", "|---|---:|---:|---:|---:|"]
    for a in res.allocators:
        if a == "lfheap":
            continue
        times, rsss = [], []
        for w in res.workloads:
            for t in res.threads[w]:
                tr = res.time_ratio(w, a, t)
                rr = res.rss_ratio(w, a, t)
                if tr is not None:
                    times.append(tr)
                if rr is not None:
                    rsss.append(rr)
        g, gr = geomean(times), geomean(rsss)
        wins = sum(1 for x in times if x < 1)
        out.append("| %s | %s | %d of %d | %s | %d |" % (
            a, "%.3f" % g if g else "—", wins, len(times), "%.3f" % gr if gr else "—",
            len(times)))
    return out


# A cell goes on the summary's "behind" lists when the best peer beats lfheap by more
# than this factor: the quick profile's medians move by a few percent from run to run
# on a shared machine, so smaller gaps are not told apart from noise.
BEST_PEER_MARGIN = 1.05


def best_peer(rows, metric=None):
    """lfheap against the best peer of every workload x thread-count cell.

    `rows` holds one (workload, threads, allocator, run, value, peak RSS in KiB) tuple
    per run; `value` is the workload's metric (seconds, or Mops/s where `metric`, by
    default METRIC, says "mops"), None or not positive for a run that failed, whose RSS
    is then ignored too. Every allocator other than lfheap is a peer. Returns one dict
    per cell, in the order the cells first appear, with lfheap's medians (`lfheap`,
    `lfheap_rss` in MiB), the fastest peer (`time_peer`: lowest median time, or highest
    median throughput) and its median (`time_peer_value`), the peer with the smallest
    median peak RSS (`rss_peer`, `rss_peer_mib`), and `time_ratio` and `rss_ratio`:
    lfheap's over that peer's, for throughput the peer's over lfheap's, so that both
    read "lfheap relative to the best peer; below 1 is better". A ratio is None when
    lfheap or every peer has no successful run in the cell; `missing` says which.

    `paired_time_ratio` and `paired_rss_ratio` read the same way but carry no bias from
    the choice of the best peer (paired_ratio): the median over lfheap's runs of its
    ratio to the run of the same repetition of the peer that is best in the other
    repetitions; None where no repetition has such a peer (a single run per cell)."""
    metric = METRIC if metric is None else metric
    # cell -> allocator -> repetition -> (value, peak RSS in MiB) of its successful runs
    by_run, order = {}, []
    for workload, threads, alloc, run, value, rss_kib in rows:
        cell = (workload, int(threads))
        if cell not in by_run:
            by_run[cell] = {}
            order.append(cell)
        runs = by_run[cell].setdefault(alloc, {})
        if value is not None and float(value) > 0:
            runs[run] = (float(value), float(rss_kib) / 1024.0)
    cells = []
    for workload, threads in order:
        throughput = metric[workload] == "mops"
        runs = by_run[(workload, threads)]
        meds = {a: (median([v for v, _ in r.values()]), median([m for _, m in r.values()]))
                for a, r in runs.items()}
        lf, lf_rss = meds.pop("lfheap", (None, None))
        peers = [(a, v, r) for a, (v, r) in meds.items()
                 if v is not None and benchlib.is_peer(a)]
        c = {"workload": workload, "threads": threads, "metric": metric[workload],
             "lfheap": lf, "lfheap_rss": lf_rss, "time_peer": None,
             "time_peer_value": None, "time_ratio": None, "rss_peer": None,
             "rss_peer_mib": None, "rss_ratio": None, "paired_time_ratio": None,
             "paired_rss_ratio": None, "missing": None}
        lf_values = [v for v, _ in runs.get("lfheap", {}).values()]
        # how far lfheap's own runs spread: the noise a ratio of the cell sits in
        c["lfheap_range"] = (min(lf_values), max(lf_values)) if lf_values else None
        if peers:
            fastest = (max if throughput else min)(peers, key=lambda p: p[1])
            smallest = min(peers, key=lambda p: p[2])
            c.update(time_peer=fastest[0], time_peer_value=fastest[1],
                     rss_peer=smallest[0], rss_peer_mib=smallest[2])
        if lf is None:
            c["missing"] = "no lfheap result" + ("" if peers else " and no peer result")
        elif not peers:
            c["missing"] = "no peer result"
        else:
            c["time_ratio"] = c["time_peer_value"] / lf if throughput else \
                lf / c["time_peer_value"]
            c["rss_ratio"] = lf_rss / c["rss_peer_mib"] if c["rss_peer_mib"] > 0 else None
            peer_runs = {a: r for a, r in runs.items() if benchlib.is_peer(a)}
            # a throughput's time is its inverse; RSS is read as it is
            c["paired_time_ratio"] = paired_ratio(
                runs.get("lfheap", {}), peer_runs,
                (lambda v: 1.0 / v[0]) if throughput else (lambda v: v[0]))
            c["paired_rss_ratio"] = paired_ratio(runs.get("lfheap", {}), peer_runs,
                                                 lambda v: v[1])
        cells.append(c)
    return cells


def run_row(r):
    """One run, a row of the runs CSV (or the dict it is written from), as best_peer()
    takes it: (workload, threads, allocator, run, value, peak RSS in KiB), value and RSS
    None when the run failed."""
    ok = r["status"] == "ok"
    return (r["workload"], r["threads"], r["allocator"], int(r["run"]),
            float(r["value"]) if ok else None, float(r["peak_rss_kib"]) if ok else None)


def csv_run_rows(path):
    """The runs of a runs CSV the runner wrote, as best_peer() takes them."""
    with open(path, newline="") as f:
        return [run_row(r) for r in csv.DictReader(f)]


def paired_ratio(lfheap_runs, peer_runs, cost):
    """lfheap's cost over the best peer's in one cell, without the bias of choosing the
    best. Each argument maps a repetition to a run's (value, RSS in MiB); `cost` reads
    from it what is to be low (time, or RSS). Taking the lowest of five noisy medians as
    the bar takes one that noise pushed down, so an allocator equal to its peers scores
    above 1 against it (bench/run.py --copies measures how far). Here the peer for
    repetition r is, of the peers with a run in r and in another repetition, the one
    whose median over the other repetitions is lowest, and its run of repetition r, which
    took turns with lfheap's, is the bar: the noise of the run compared is not the noise
    that chose it. Returns the median over the repetitions of lfheap's ratio, or None if
    no repetition has such a peer."""
    ratios = []
    for rep, mine in lfheap_runs.items():
        candidates = [(median([cost(v) for r, v in runs.items() if r != rep]), runs[rep])
                      for runs in peer_runs.values() if rep in runs and len(runs) > 1]
        if not candidates:
            continue
        bar = cost(min(candidates, key=lambda c: c[0])[1])
        if bar > 0:
            ratios.append(cost(mine) / bar)
    return median(ratios)


def best_peer_summary(cells, margin=BEST_PEER_MARGIN):
    """The geometric means of best_peer()'s time and RSS ratios over the cells that have
    one, the cells whose ratio is above `margin` (each list worst first) and the cells
    without a ratio."""
    def behind(key):
        return sorted((c for c in cells if c[key] is not None and c[key] > margin),
                      key=lambda c: c[key], reverse=True)
    def ratios(key):
        return [c[key] for c in cells if c[key] is not None]
    times, rsss = ratios("time_ratio"), ratios("rss_ratio")
    paired_times, paired_rsss = ratios("paired_time_ratio"), ratios("paired_rss_ratio")
    return {"time_geomean": geomean(times), "time_cells": len(times),
            "rss_geomean": geomean(rsss), "rss_cells": len(rsss),
            "paired_time_geomean": geomean(paired_times), "paired_time_cells": len(paired_times),
            "paired_rss_geomean": geomean(paired_rsss), "paired_rss_cells": len(paired_rsss),
            "paired_time_above": sum(r > margin for r in paired_times),
            "paired_rss_above": sum(r > margin for r in paired_rsss),
            "time_behind": behind("time_ratio"), "rss_behind": behind("rss_ratio"),
            "no_ratio": [c for c in cells if c["time_ratio"] is None]}


def _with_unit(v, metric):
    """Three significant digits and the unit: the test profile's runs last microseconds."""
    if v is None:
        return "—"
    return ("%.0f" % v if v >= 100 else "%#.3g" % v) + (" Mops/s" if metric == "mops" else " s")


def _cell_name(c):
    return "%s, %d thread%s" % (c["workload"], c["threads"], "s" if c["threads"] > 1 else "")


def best_peer_lines(cells, margin=BEST_PEER_MARGIN):
    """The summary's best-peer part, as Markdown lines."""
    s = best_peer_summary(cells, margin)
    pct = "%d%%" % round((margin - 1) * 100)

    def ratio(x):
        return "—" if x is None else "%.2f" % x
    out = ["Geometric mean of lfheap's ratio to the best peer of each cell: time **%s** "
           "(%d cells), peak RSS **%s** (%d cells)." % (
               ratio(s["time_geomean"]), s["time_cells"], ratio(s["rss_geomean"]),
               s["rss_cells"]), ""]
    if s["paired_time_cells"] or s["paired_rss_cells"]:
        out += ["The lowest of the peers' noisy medians tends to be one that noise pushed "
                "down, so those means lean against lfheap (`bench/run.py --copies 5` runs "
                "lfheap against five copies of itself to show how far). Paired, against the run "
                "of the same repetition of the peer that is best in the other repetitions "
                "(the median over repetitions; the last two columns of the table): time "
                "**%s** (%d cells, %d above %s), peak RSS **%s** (%d cells, %d above %s)." % (
                    ratio(s["paired_time_geomean"]), s["paired_time_cells"],
                    s["paired_time_above"], "%.2f" % margin, ratio(s["paired_rss_geomean"]),
                    s["paired_rss_cells"], s["paired_rss_above"], "%.2f" % margin), ""]
    out.append("Cells where the fastest peer beats lfheap's time by more than %s, worst "
               "first:" % pct)
    out.append("")
    def runs_and_paired(c):
        lo, hi = c["lfheap_range"]
        spread = "" if lo == hi else "; lfheap's runs %s to %s" % (
            _with_unit(lo, c["metric"]), _with_unit(hi, c["metric"]))
        return spread + ("" if c["paired_time_ratio"] is None else
                         "; paired %.2f" % c["paired_time_ratio"])
    out += ["- %s: **%.2f**, %s (%s against lfheap's %s%s)" % (
        _cell_name(c), c["time_ratio"], c["time_peer"],
        _with_unit(c["time_peer_value"], c["metric"]), _with_unit(c["lfheap"], c["metric"]),
        runs_and_paired(c))
        for c in s["time_behind"]] or ["- none"]
    out += ["", "Cells where the smallest peer's peak RSS is more than %s below lfheap's, "
            "worst first:" % pct, ""]
    out += ["- %s: **%.2f**, %s (%.1f MiB against lfheap's %.1f MiB)" % (
        _cell_name(c), c["rss_ratio"], c["rss_peer"], c["rss_peer_mib"], c["lfheap_rss"])
        for c in s["rss_behind"]] or ["- none"]
    if s["no_ratio"]:
        out += ["", "Cells without a ratio:", ""]
        out += ["- %s: %s" % (_cell_name(c), c["missing"]) for c in s["no_ratio"]]
    out += ["", "| workload | threads | lfheap | fastest peer | lfheap / fastest | "
            "lfheap peak RSS, MiB | smallest peer, MiB | lfheap / smallest | paired time | "
            "paired RSS |",
            "|---|---:|---:|---|---:|---:|---|---:|---:|---:|"]
    for c in cells:
        peer = "—" if c["time_peer"] is None else "%s %s" % (
            c["time_peer"], _with_unit(c["time_peer_value"], c["metric"]))
        rss_peer = "—" if c["rss_peer"] is None else "%s %.1f" % (c["rss_peer"],
                                                                   c["rss_peer_mib"])
        out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            c["workload"], c["threads"], _with_unit(c["lfheap"], c["metric"]), peer,
            ratio(c["time_ratio"]), "—" if c["lfheap_rss"] is None else
            "%.1f" % c["lfheap_rss"], rss_peer, ratio(c["rss_ratio"]),
            ratio(c["paired_time_ratio"]), ratio(c["paired_rss_ratio"])))
    return out


def across_runs_lines(runs_cells, margin=BEST_PEER_MARGIN):
    """Markdown lines: each cell's paired time ratio across several runs (one best_peer()
    result per run), worst median first. A single run's cell moves by a fifth on a shared
    machine; the cells whose median over many runs stays above `margin` are the ones
    where lfheap is behind, not the noise."""
    ratios, peers, order = {}, {}, []
    for cells in runs_cells:
        for c in cells:
            key = (c["workload"], c["threads"])
            if c["paired_time_ratio"] is None:
                continue
            if key not in ratios:
                ratios[key], peers[key] = [], {}
                order.append(key)
            ratios[key].append(c["paired_time_ratio"])
            peers[key][c["time_peer"]] = peers[key].get(c["time_peer"], 0) + 1
    order.sort(key=lambda k: median(ratios[k]), reverse=True)
    behind = [k for k in order if median(ratios[k]) > margin]
    out = ["Paired time ratio of each cell across %d runs: geometric mean of the cells' "
           "medians **%s**; %d cells with a median above %.2f." % (
               len(runs_cells), "—" if not order else "%.2f" % geomean(
                   [median(ratios[k]) for k in order]), len(behind), margin), "",
           "| workload | threads | runs | median | lowest | highest | fastest peer, most often |",
           "|---|---:|---:|---:|---:|---:|---|"]
    for k in order:
        r = ratios[k]
        peer = max(peers[k].items(), key=lambda kv: kv[1])
        out.append("| %s | %d | %d | %.2f | %.2f | %.2f | %s (%d) |" % (
            k[0], k[1], len(r), median(r), min(r), max(r), peer[0], peer[1]))
    return out


BEST_PEER_FIELDS = ["workload", "threads", "metric", "lfheap", "time_peer",
                    "time_peer_value", "time_ratio", "lfheap_rss_mib", "rss_peer",
                    "rss_peer_mib", "rss_ratio", "paired_time_ratio", "paired_rss_ratio",
                    "missing"]


def write_best_peer_csv(path, cells):
    """One row per cell of best_peer(); empty fields where there is no value."""
    def text(v):
        return "" if v is None else "%.6g" % v if isinstance(v, float) else v
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(BEST_PEER_FIELDS)
        for c in cells:
            w.writerow([text(c["lfheap_rss"] if k == "lfheap_rss_mib" else c[k])
                        for k in BEST_PEER_FIELDS])


def oversub_table(res, workload="oversubscribed", base=OVERSUB_BASE):
    """Each allocator's throughput at every thread count above `base` divided by its
    own throughput at `base`, from the same run; [] when those were not measured."""
    threads = res.threads.get(workload, [])
    highs = [t for t in threads if t > base]
    if base not in threads or not highs:
        return []
    out = ["| allocator | %d thr, Mops/s | %s | %s | CPUs busy at %s thr | %s |" % (
               base, " | ".join("%d thr, Mops/s" % t for t in highs),
               " | ".join("%d thr / %d thr (per repetition)" % (t, base) for t in highs),
               " / ".join(str(t) for t in [base] + highs),
               " | ".join("per CPU second, %d thr / %d thr" % (t, base) for t in highs)),
           "|---|" + "---:|" * (2 + 3 * len(highs))]
    for a in res.allocators:
        cells = [fmt_value(res.cell(workload, a, base)[0], "mops")]
        cells += [fmt_value(res.cell(workload, a, t)[0], "mops") for t in highs]
        for t in highs:
            med, per_run = res.scaling(workload, a, t, base)
            s = "—" if med is None else "**%.2f**" % med
            if per_run:
                s += " (%s)" % ", ".join("%.2f" % x for x in per_run)
            cells.append(s)
        busy = [res.cpus_busy(workload, a, t) for t in [base] + highs]
        cells.append(" / ".join("—" if b is None else "%.2f" % b for b in busy))
        b = res.per_cpu_second(workload, a, base)
        for t in highs:
            v = res.per_cpu_second(workload, a, t)
            cells.append("—" if v is None or not b else "%.2f" % (v / b))
        out.append("| %s | %s |" % (a, " | ".join(cells)))
    return out


def write_csv(path, res):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in res.rows:
            w.writerow(r)


def gnuplot_available():
    return subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True,
                          check=False).returncode == 0


def plot(res, plotdir, memory_series):
    """PNG plots with gnuplot: metric vs threads per workload; RSS over time (memory)."""
    made = []
    os.makedirs(plotdir, exist_ok=True)
    for w in res.workloads:
        if w in REAL:
            continue
        threads = res.threads[w]
        dat = os.path.join(plotdir, w + ".dat")
        with open(dat, "w") as f:
            f.write("# threads " + " ".join(res.allocators) + "\n")
            for t in threads:
                vals = []
                for a in res.allocators:
                    v, _, _ = res.cell(w, a, t)
                    vals.append("NaN" if v is None else "%.6g" % v)
                f.write("%d %s\n" % (t, " ".join(vals)))
        png = os.path.join(plotdir, w + ".png")
        ylabel = "Mops/s (higher is better)" if METRIC[w] == "mops" else \
            "seconds (lower is better)"
        plots = ", ".join("'%s' using 1:%d with linespoints lw 2 title '%s'" %
                          (dat, i + 2, a) for i, a in enumerate(res.allocators))
        script = ("set terminal pngcairo size 800,500; set output '%s';"
                  "set title '%s'; set xlabel 'threads'; set ylabel '%s';"
                  "set logscale x 2; set xrange [%g:%g]; set xtics (%s); set key outside right;"
                  "set grid;"
                  "plot %s\n" % (png, w, ylabel, min(threads) / 1.25, max(threads) * 1.25,
                                 ", ".join(str(t) for t in threads), plots))
        if subprocess.run(["gnuplot"], input=script, text=True, check=False,
                          capture_output=True).returncode == 0:
            made.append(png)
    for t, series in sorted(memory_series.items()):
        if not series:
            continue
        png = os.path.join(plotdir, "memory-rss-t%d.png" % t)
        parts = ["'%s' using 1:($2/1048576) with lines lw 2 title '%s RSS'" % (p, a)
                 for a, p in series]
        parts.append("'%s' using 1:($3/1048576) with lines dt 2 lc rgb 'black' "
                     "title 'requested (%s run)'" % (series[0][1], series[0][0]))
        script = ("set terminal pngcairo size 900,500; set output '%s';"
                  "set title 'memory: RSS over time, %d producer(s)'; set xlabel 'seconds';"
                  "set ylabel 'MiB'; set key outside right; set grid; plot %s\n" %
                  (png, t, ", ".join(parts)))
        if subprocess.run(["gnuplot"], input=script, text=True, check=False,
                          capture_output=True).returncode == 0:
            made.append(png)
    return made


def real_checks(names, prof, allocators, scratch, timeout):
    """Before the measured runs: each real program once per allocator with the binding
    trace (realprogs.check_served). Returns ({(program, allocator): None if the
    allocator serves the program's heap, else why not}, {program: the reference output,
    from the run with glibc, or None when that run failed})."""
    served, references = {}, {}
    glibc = benchlib.Allocator("glibc", None, "libc6")
    for w in names:
        prog = realprogs.BY_NAME[w]
        knobs = prof["knobs"][w]
        d = os.path.join(scratch, w)
        os.makedirs(d, exist_ok=True)
        benchlib.note("%s: checking which allocator serves it, and its reference output" % w)
        why, ref, status = realprogs.check_served(prog, knobs, d, glibc, timeout)
        if status != "ok" or why is not None:
            benchlib.note("%s: reference run with glibc: %s" % (w, why or status))
            ref = None
        references[w] = ref
        for a in allocators:
            why, out, status = realprogs.check_served(prog, knobs, d, a, timeout)
            if status != "ok":
                why = "check run %s" % status
            elif why is None:
                why = realprogs.check_output(prog, knobs, out, ref)
            served[(w, a.name)] = why
            if why:
                benchlib.note("%s, %s: not measured: %s" % (w, a.name, why))
    return served, references


def real_once(prog, knobs, scratch, alloc, timeout, reference=None):
    """One run of real program `prog` with allocator `alloc`, its input prepared afresh in
    `scratch`: run_once's result, its status "failed: why" if the output is wrong (not
    the known output, or not `reference`'s when given)."""
    prog.prepare(knobs, scratch)
    r = run_once(realprogs.command(prog, knobs, scratch, alloc),
                 realprogs.environment(prog, alloc), timeout)
    if r["status"] == "ok":
        why = realprogs.check_output(prog, knobs, realprogs.program_output(
            prog, r["stdout"], scratch), reference)
        if why:
            r["status"] = "failed: " + why
    return r


def real_run(res, w, a, rep, runs, knobs, scratch, served, references, timeout, progress,
             failures, stamp):
    """One measured run of real program `w` with allocator `a`, added to `res`."""
    prog = realprogs.BY_NAME[w]
    progress.show("%s, %s, run %d/%d" % (w, a.name, rep + 1, runs))
    d = os.path.join(scratch, w)
    cmd = realprogs.command(prog, knobs, d, a)
    row = dict(stamp, workload=w, allocator=a.name, threads=1, run=rep + 1,
               metric="seconds", command=" ".join(shlex.quote(c) for c in cmd))
    if served.get((w, a.name)):
        row.update(status="not served: " + served[(w, a.name)], value="", seconds="",
                   wall_s="", user_s="", sys_s="", peak_rss_kib="", maxrss_kib="",
                   result="", _fields={})
        res.add(row)
        return
    r = real_once(prog, knobs, d, a, timeout, references.get(w))
    f = r["fields"] or {}
    row.update(status=r["status"], value=f.get("seconds", ""), seconds=f.get("seconds", ""),
               wall_s="%.4f" % r["wall_s"], user_s="%.4f" % r["user_s"],
               sys_s="%.4f" % r["sys_s"], peak_rss_kib=f.get("peak_rss_kib", ""),
               maxrss_kib=r["maxrss_kib"],
               result=" ".join("%s=%s" % kv for kv in f.items()), _fields=f)
    if row["status"] != "ok":
        failures.append("%s / %s / run %d: %s" % (w, a.name, rep + 1, row["status"]))
    res.add(row)


def real_lines(res, names, served, have_lfheap):
    """The summary's real-program part: each program's median time and peak RSS per
    allocator (in brackets lfheap's over this allocator's), the geometric mean of those
    ratios over the programs per peer, and which allocators did not serve a program."""
    peers = [a for a in res.allocators if benchlib.is_peer(a)]
    out = ["Real programs (bench/real/, run by `build/bench/realrun`): median wall "
           "seconds of the whole process, median peak RSS in MiB, and median CPU seconds "
           "(user + sys of the program and its children, which other work on a busy "
           "machine inflates less than the wall time); in brackets lfheap's over this "
           "allocator's (below 1: lfheap is faster or smaller). The geometric means are "
           "over these programs only; the best-peer ones use the wall time, like every "
           "other cell.", "",
           "| program | " + " | ".join(res.allocators) + " |",
           "|---|" + "---:|" * len(res.allocators)]
    def value(kind, w, a):
        v, rss, _ = res.cell(w, a, 1)
        return {"time": v, "rss": rss, "cpu": res.cpu_seconds(w, a, 1)}[kind]

    def ratio(kind, w, a):
        lf, x = value(kind, w, "lfheap"), value(kind, w, a)
        return lf / x if lf and x else None
    fmt = {"time": "%.3f s", "rss": "%.1f", "cpu": "%.3f s"}
    label = {"time": "time", "rss": "peak RSS", "cpu": "CPU"}
    for kind in ("time", "rss", "cpu"):
        for w in names:
            cells = []
            for a in res.allocators:
                x = value(kind, w, a)
                s = "—" if x is None else fmt[kind] % x
                r = ratio(kind, w, a) if have_lfheap and a != "lfheap" else None
                if r is not None:
                    s += " (%.2f)" % r
                failed = res.cell(w, a, 1)[2]
                if failed:
                    s += " !%d failed" % failed
                cells.append(s)
            out.append("| %s %s | %s |" % (w, label[kind], " | ".join(cells)))
        if have_lfheap:
            gm = []
            for a in res.allocators:
                if a == "lfheap":
                    gm.append("")
                    continue
                g = geomean([ratio(kind, w, a) for w in names])
                gm.append("—" if g is None else "**%.3f**" % g)
            out.append("| geomean, lfheap / peer | %s |" % " | ".join(gm))
    if have_lfheap and peers:
        s = best_peer_summary([c for c in best_peer(res.run_rows()) if c["workload"] in names])
        cpu = []
        for w in names:
            best = [value("cpu", w, a) for a in peers if value("cpu", w, a)]
            if best and value("cpu", w, "lfheap"):
                cpu.append(value("cpu", w, "lfheap") / min(best))
        g = geomean(cpu)
        def text(x):
            return "—" if x is None else "%.2f" % x
        paired = "" if not s["paired_time_cells"] else "; paired as in the summary: %s and %s" % (
            text(s["paired_time_geomean"]), text(s["paired_rss_geomean"]))
        out += ["", "Against the best peer of each program: time **%s**, peak RSS **%s** "
                "(geometric means over %d and %d programs%s); CPU seconds against the peer "
                "with the fewest: **%s**." % (
                    text(s["time_geomean"]), text(s["rss_geomean"]), s["time_cells"],
                    s["rss_cells"], paired, text(g))]
    refused = [(w, a, why) for (w, a), why in sorted(served.items()) if why]
    out += ["", "Which allocator serves each program's heap (`LD_DEBUG=bindings`, every "
            "process of the program: malloc, free, calloc and realloc must bind to the "
            "preloaded library, libc.so.6 for glibc): %s" % (
                "every allocator, every program." if not refused else "")]
    out += ["- %s, %s: not measured, %s" % r for r in refused]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    ap.add_argument("--profile", choices=sorted(PROFILES), default="quick",
                    help="quick (make bench), full (make bench-full) or test")
    ap.add_argument("--groups", default="kernels,real",
                    help="workload groups: kernels (the programs in bench/), real (real "
                    "programs, bench/real/); default both")
    ap.add_argument("--workloads", help="workloads to run, from any group (default: every "
                    "workload of --groups)")
    ap.add_argument("--allocators", default=",".join(benchlib.ALL_NAMES))
    ap.add_argument("--threads", help="thread counts for every workload (default: 1,2,4,8; "
                    "1,2,32 for oversubscribed; 100,500 for thread-churn-concurrent)")
    ap.add_argument("--runs", type=int, help="repetitions (profile default: 3/5/2)")
    ap.add_argument("--lfheap", default=os.path.join(benchlib.ROOT, "build", "liblfheap.so"),
                    help="lfheap library to preload (default build/liblfheap.so)")
    ap.add_argument("--out", default=os.path.join(benchlib.ROOT, "build", "bench-results"),
                    help="directory for the CSV, Markdown and plots")
    ap.add_argument("--timeout", type=float, help="seconds before a run is killed")
    ap.add_argument("--no-build", action="store_true", help="do not run make first")
    ap.add_argument("--no-install", action="store_true",
                    help="never apt-get install missing peers")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--no-fastpath", action="store_true",
                    help="skip the callgrind fast-path count")
    ap.add_argument("--copies", type=int, default=0,
                    help="instead of the peers, N copies of the lfheap library under the "
                    "names lfheap-copy1..N (an A/A run: the best-peer figures then show "
                    "what noise alone makes of an allocator equal to its peers); no "
                    "fast-path count")
    ap.add_argument("--best-peer-of", metavar="CSV[,CSV...]",
                    help="print the best-peer part of the summary for the runs CSV of an "
                    "earlier run (its <date>-<host>.csv), then stop; given several, the "
                    "paired time ratio of each cell across them")
    args = ap.parse_args()
    if args.best_peer_of:
        paths = [p for p in args.best_peer_of.split(",") if p]
        runs_cells = [best_peer(csv_run_rows(p)) for p in paths]
        print("\n".join(best_peer_lines(runs_cells[0]) if len(paths) == 1 else
                        across_runs_lines(runs_cells)))
        return
    if args.copies < 0:
        raise SystemExit("--copies needs a count >= 0")
    if args.copies:
        args.allocators = ",".join(["lfheap"] + benchlib.copy_names(args.copies))
        args.no_fastpath = True

    prof = PROFILES[args.profile]
    runs = args.runs or prof["runs"]
    if args.timeout is not None and args.timeout <= 0:
        ap.error("--timeout must be a positive number of seconds")
    timeout = args.timeout if args.timeout is not None else prof["timeout"]
    groups = [g for g in args.groups.split(",") if g]
    for g in groups:
        if g not in GROUPS:
            raise SystemExit("unknown group %s (known: %s)" % (g, ", ".join(GROUPS)))
    if args.workloads is None:
        workloads = [w for g in groups for w in GROUPS[g]]
    else:
        workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w not in WORKLOADS + REAL:
            raise SystemExit("unknown workload %s (known: %s)" %
                             (w, ", ".join(WORKLOADS + REAL)))
    real_skipped = []
    if any(w in REAL for w in workloads):
        usable, real_skipped = realprogs.select([w for w in workloads if w in REAL],
                                                install=not args.no_install)
        for line in real_skipped:
            print(line, file=sys.stderr)
        have = {p.name for p in usable}
        workloads = [w for w in workloads if w not in REAL or w in have]
    if args.threads is not None:
        given = [int(t) for t in args.threads.split(",") if t]
        threads = {w: [1] if w in REAL else given for w in workloads}
    else:
        threads = {w: WORKLOAD_THREADS.get(w, DEFAULT_THREADS) for w in workloads}
    if not workloads:
        raise SystemExit("no workload to run")
    if any(not ts or min(ts) < 1 for ts in threads.values()) or runs < 1:
        raise SystemExit("need at least one thread count >= 1 and runs >= 1")

    if not args.no_build:
        benchlib.run_make(["all", "bench-progs"])
    allocators, skipped = benchlib.select_allocators(
        [a for a in args.allocators.split(",") if a], args.lfheap,
        install=not args.no_install)
    for s in skipped:
        print(s, file=sys.stderr)
    if not allocators:
        raise SystemExit("no allocator to measure")
    names = [a.name for a in allocators]
    have_lfheap = "lfheap" in names
    want_plots = not args.no_plots
    if want_plots and not gnuplot_available():
        if not args.no_install and benchlib.is_debian_root():
            benchlib.install_packages(["gnuplot-nox"])
        if not gnuplot_available():
            print("plots: skipped, gnuplot not found (install it: apt-get install "
                  "gnuplot-nox)", file=sys.stderr)
            want_plots = False

    machine = benchlib.machine_info()
    load_start = benchlib.load_average()
    date = time.strftime("%Y-%m-%d-%H%M")
    stamp = "%s-%s" % (date, machine["host"])
    os.makedirs(args.out, exist_ok=True)
    plotdir = os.path.join(args.out, stamp)
    os.makedirs(plotdir, exist_ok=True)
    res = Results(workloads, names, threads)
    memory_series = {}
    scratch = os.path.join(plotdir, "real-scratch")
    served, references = real_checks([w for w in workloads if w in REAL], prof, allocators,
                                     scratch, timeout)
    total = runs * sum(len(ts) for ts in threads.values()) * len(allocators)
    progress = Progress(total)
    failures = []
    t_start = time.monotonic()

    for rep in range(runs):
        # rotate the allocator order each repetition so none always runs first
        order = allocators[rep % len(allocators):] + allocators[:rep % len(allocators)]
        for w in workloads:
            knobs = dict(prof["knobs"][w])
            # oversubscribed compares each allocator with itself: its thread counts
            # run back to back, so that drift on a busy machine hardly enters the
            # ratio; elsewhere the allocators take turns at each thread count
            if w == "oversubscribed":
                cells = [(t, a) for a in order for t in threads[w]]
            else:
                cells = [(t, a) for t in threads[w] for a in order]
            for t, a in cells:
                if w in REAL:
                    real_run(res, w, a, rep, runs, knobs, scratch, served, references,
                             timeout, progress, failures,
                             {"date": date, "host": machine["host"], "profile": args.profile})
                    continue
                cmd = command_line(w, knobs, t)
                series = None
                if w == "memory" and rep == 0:
                    series = os.path.join(plotdir, "memory-%s-t%d.tsv" % (a.name, t))
                    cmd.append("--series=" + series)
                progress.show("%s, %s, %d thread%s, run %d/%d" %
                              (w, a.name, t, "s" if t > 1 else "", rep + 1, runs))
                r = run_once(cmd, a.env(), timeout)
                f = r["fields"] or {}
                metric = METRIC[w]
                row = {
                    "date": date, "host": machine["host"], "profile": args.profile,
                    "workload": w, "allocator": a.name, "threads": t, "run": rep + 1,
                    "status": r["status"], "metric": metric,
                    "value": f.get(metric, ""), "seconds": f.get("seconds", ""),
                    "wall_s": "%.4f" % r["wall_s"], "user_s": "%.4f" % r["user_s"],
                    "sys_s": "%.4f" % r["sys_s"],
                    "peak_rss_kib": f.get("peak_rss_kib", r["maxrss_kib"]),
                    "maxrss_kib": r["maxrss_kib"],
                    "command": " ".join(shlex.quote(c) for c in cmd),
                    "result": " ".join("%s=%s" % kv for kv in f.items()),
                    "_fields": f,
                }
                if r["status"] == "ok":
                    try:
                        if float(row["value"]) <= 0:
                            raise ValueError
                    except ValueError:
                        row["status"] = "failed: bad %s value" % metric
                if row["status"] != "ok":
                    failures.append("%s / %s / %d threads / run %d: %s" %
                                    (w, a.name, t, rep + 1, row["status"]))
                elif series:
                    memory_series.setdefault(t, []).append((a.name, series))
                res.add(row)
    progress.finish()

    fp = None
    if prof["fastpath"] and not args.no_fastpath:
        n1, n2 = prof["fastpath"]
        try:
            fp = fastpath.measure(allocators, n1, n2)
        except RuntimeError as e:
            print("fastpath: skipped, %s" % e, file=sys.stderr)
    elapsed = time.monotonic() - t_start
    load_end = benchlib.load_average()

    # the real programs' inputs and outputs (a database, an object file) are not results
    shutil.rmtree(scratch, ignore_errors=True)
    plots = plot(res, plotdir, memory_series) if want_plots else []
    best_cells = None

    # ---- report ----
    md = ["# lfheap benchmark results: %s, %s" % (date, machine["host"]), ""]
    md.append("Profile `%s`, %d run%s per cell, threads %s, took %s. "
              "Command: `%s`." % (args.profile, runs, "s" if runs > 1 else "",
                                  threads_text(threads), fmt_dur(elapsed),
                                  " ".join(shlex.quote(x) for x in sys.argv)))
    md += ["", "## Machine", "",
           "- %s, %d CPUs (nproc), kernel %s, glibc %s" % (
               machine["cpu"], machine["nproc"], machine["kernel"], machine["glibc"]),
           "- load average (1 min, all processes on the machine): %s at the start, %s at "
           "the end" % (load_start, load_end),
           "", "## Allocators", ""]
    for a in allocators:
        md.append("- **%s**: %s%s" % (a.name, benchlib.allocator_version(a),
                                      ", preloaded from `%s`" % a.preload
                                      if a.preload and a.package else ""))
    for s in skipped:
        md.append("- %s" % s)
    if real_skipped:
        md += ["", "Real programs not run:", ""] + ["- %s" % s for s in real_skipped]
    md += ["", "## Summary", ""]
    if have_lfheap and len(names) > 1:
        md.append("Geometric means over every workload x thread-count cell. A time ratio "
                  "below 1 means lfheap is faster than the peer; an RSS ratio below 1 means "
                  "lfheap's peak resident memory is smaller.")
        md.append("")
        md += summary_table(res)
        best_cells = best_peer(res.run_rows())
        md += ["", "### Against the best peer in each cell", "",
               "For each workload x thread-count cell, lfheap's median against the best "
               "peer's median in that cell, from this run: the fastest peer (lowest median "
               "time; for the workloads that report Mops/s, the highest throughput, with "
               "the ratio inverted so that it still reads as time) and the peer with the "
               "smallest median peak RSS. Below 1 means lfheap beats every peer in the "
               "cell. Every cell is also in `%s-best-peer.csv`." % stamp, ""]
        md += best_peer_lines(best_cells)
    elif not have_lfheap:
        md.append("lfheap was not measured (%s), so there are no ratios; the tables "
                  "compare the peers only." % "; ".join(s for s in skipped
                                                         if s.startswith("lfheap")))
    else:
        md.append("Only lfheap was measured; no ratios.")
    real_names = [w for w in workloads if w in REAL]
    if real_names:
        md += ["", "### Real programs", ""]
        md += real_lines(res, real_names, served, have_lfheap)
    scaling = oversub_table(res)
    if scaling:
        md += ["", "### Over-subscription", "",
               "`oversubscribed`: the same work split across more threads than this "
               "machine's %d CPUs. Each allocator's median throughput at each thread count "
               "divided by its own at %d threads, measured in this run; in brackets the "
               "same ratio in each repetition (an allocator's runs of one repetition follow "
               "each other). 1.00 would be no loss at all. *CPUs busy*: (user + sys time) "
               "/ wall time of the process, median; threads asleep on a lock lower it, and "
               "so does other work on the machine. *Per CPU second*: allocator calls per "
               "CPU second of the process at each count, divided likewise: what the work "
               "cost, whatever share of the CPUs the process got." %
               (machine["nproc"], OVERSUB_BASE), ""]
        md += scaling
    if fp:
        loop, rows = fp
        md += ["", "## Fast path (instructions per malloc(16)+free pair, callgrind)", ""]
        md.append(fastpath.table(loop, rows, *prof["fastpath"]))
    md += ["", "## Workloads", "",
           "Each cell is the median over the runs of the program's own timed region "
           "(not process start-up). Peak RSS is the process's maximum resident set "
           "(VmHWM, reported by the program at its end). `!N failed` marks runs that failed validation or timed out; they "
           "are listed below and left out of the medians.", ""]
    for w in workloads:
        md += workload_tables(res, w, have_lfheap)
        if os.path.join(plotdir, w + ".png") in plots:
            md += ["![%s](%s/%s.png)" % (w, stamp, w), ""]
    mem_pngs = [p for p in plots if os.path.basename(p).startswith("memory-rss")]
    if mem_pngs:
        md += ["### memory: RSS over time (first run)", ""]
        md += ["![%s](%s/%s)" % (os.path.basename(p), stamp, os.path.basename(p))
               for p in mem_pngs]
        md.append("")
    md += ["## Failures", ""]
    md += ["- " + f for f in failures] if failures else ["None."]
    md += ["", "## Parameters", "",
           "Each workload ran as below with `--threads=T` for T in the counts given "
           "(binaries in build/bench/; `--help` on any of them explains its knobs):", ""]
    for w in workloads:
        if w in REAL:
            prog = realprogs.BY_NAME[w]
            md.append("- %s: `%s`%s" % (w, " ".join(shlex.quote(x) for x in prog.argv(
                prof["knobs"][w], "SCRATCH")), "".join(
                    " with %s=%s" % kv for kv in prog.env.items())))
            continue
        md.append("- `%s %s`, T = %s" % (w, " ".join("--%s=%s" % kv
                                                    for kv in prof["knobs"][w].items()),
                                        ", ".join(map(str, threads[w]))))
    md.append("")

    csv_path = os.path.join(args.out, stamp + ".csv")
    md_path = os.path.join(args.out, stamp + ".md")
    write_csv(csv_path, res)
    written = [csv_path]
    if best_cells is not None:
        written.append(os.path.join(args.out, stamp + "-best-peer.csv"))
        write_best_peer_csv(written[-1], best_cells)
    with open(md_path, "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    print("wrote %s, %s%s" % (", ".join(written), md_path,
                               " and %d plots in %s" % (len(plots), plotdir) if plots else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
