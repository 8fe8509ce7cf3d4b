#!/usr/bin/env python3
"""Instructions per malloc(16)+free pair, per allocator, counted by callgrind.

For each allocator, build/bench/fastpath runs under `valgrind --tool=callgrind` with
N1 and N2 pairs (the allocator preloaded); the difference of the total instruction
counts (Ir) divided by N2 - N1 is the cost of one pair, so start-up, the allocator's
initialisation and the validation batches cancel out. The loop's own instructions
(measured the same way with --empty=1) are reported separately and subtracted in the
"net" column. Callgrind counts instructions, so the figure does not depend on how busy
the machine is.

usage: bench/fastpath.py [--allocators a,b] [--lfheap PATH] [--n1 N] [--n2 N]
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402


NO_VALGRIND = "valgrind not found (install it: apt-get install valgrind)"


def callgrind_ir(args, env):
    """Total Ir of one run of build/bench/fastpath under callgrind."""
    if shutil.which("valgrind") is None:
        raise RuntimeError(NO_VALGRIND)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
               benchlib.bench_bin("fastpath")] + args
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError("callgrind run failed (%d): %s" %
                               (r.returncode, r.stderr.strip().splitlines()[-3:]))
        with open(out) as f:
            for line in f:
                if line.startswith("summary:") or line.startswith("totals:"):
                    return int(line.split()[1])
    raise RuntimeError("no totals in callgrind output")


def per_pair(env, n1, n2, empty=False):
    extra = ["--empty=1"] if empty else []
    ir1 = callgrind_ir(["--n=%d" % n1] + extra, env)
    ir2 = callgrind_ir(["--n=%d" % n2] + extra, env)
    return (ir2 - ir1) / float(n2 - n1)


def measure(allocators, n1, n2, progress=True):
    """Returns (loop overhead, [(allocator, instructions per pair or None, error)])."""
    base_env = benchlib.Allocator("glibc", None, None).env()
    loop = per_pair(base_env, n1, n2, empty=True)
    rows = []
    for i, a in enumerate(allocators, 1):
        if progress:
            benchlib.note("fastpath: %s (%d/%d)" % (a.name, i, len(allocators)))
        try:
            rows.append((a, per_pair(a.env(), n1, n2), None))
        except RuntimeError as e:
            rows.append((a, None, str(e)))
    return loop, rows


def table(loop, rows, n1, n2):
    """Markdown table of the measurement."""
    lines = ["| allocator | instructions / pair | net of loop |",
             "|---|---:|---:|"]
    for a, ipp, err in rows:
        if ipp is None:
            lines.append("| %s | failed: %s | |" % (a.name, err))
        else:
            lines.append("| %s | %.1f | %.1f |" % (a.name, ipp, ipp - loop))
    lines.append("")
    lines.append("malloc(16)+free pairs; Ir(N=%d) - Ir(N=%d) over callgrind, divided by %d; "
                 "the loop itself costs %.1f instructions per iteration (net column "
                 "subtracts it)." % (n2, n1, n2 - n1, loop))
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--allocators", default=",".join(benchlib.ALL_NAMES),
                    help="comma-separated list (default: all)")
    ap.add_argument("--lfheap", default=os.path.join(benchlib.ROOT, "build", "liblfheap.so"),
                    help="lfheap library to preload (default build/liblfheap.so)")
    ap.add_argument("--n1", type=int, default=1000000)
    ap.add_argument("--n2", type=int, default=2000000)
    ap.add_argument("--no-build", action="store_true", help="do not run make first")
    args = ap.parse_args()
    if args.n2 <= args.n1:
        raise SystemExit("--n2 must be larger than --n1")
    if not args.no_build:
        benchlib.run_make(["all", "bench-progs"])
    allocators, skipped = benchlib.select_allocators(args.allocators.split(","), args.lfheap)
    for s in skipped:
        print(s)
    try:
        loop, rows = measure(allocators, args.n1, args.n2)
    except RuntimeError as e:
        print("fastpath: %s" % e, file=sys.stderr)
        return 1
    print(table(loop, rows, args.n1, args.n2))
    return 1 if any(r[1] is None for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
