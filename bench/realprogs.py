"""The `real` group of bench/run.py: real programs from Debian packages, each on an input
kept in bench/real/, run through build/bench/realrun (bench/realrun.c) with the
allocator preloaded, and checked: every run's output must equal the reference run's
(the program with no preload, run once before the measured runs), and where the answer
is known in advance (a checksum, a query result, sat) it must be that answer too.

Before the measured runs, check_served() runs every program once per allocator with the
dynamic linker's binding trace (LD_DEBUG=bindings) and refuses a program in which
malloc or free of any process binds anywhere but the preloaded library (libc.so.6 for
glibc): a statically linked program, or one that brings its own allocator, would be
measured with that allocator whatever we preload. Standard library only.
"""

import glob
import hashlib
import os
import re
import shutil
import subprocess

import benchlib

REAL_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "real")
# glibc in the real group is its libc.so.6, preloaded like the others: a program that
# links another allocator (redis links libjemalloc) then still gets glibc's malloc.
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
# the functions whose binding decides who serves the heap
HEAP_SYMBOLS = ("malloc", "free", "calloc", "realloc")


class Program:
    """One real program. `argv(knobs, scratch)` is its command line, `prepare(knobs,
    scratch)` makes its input in the scratch directory before each run, `output(stdout,
    scratch)` the text every run must reproduce, `known(knobs)` the answer that text
    must hold when known in advance (a regular expression), `env` extra variables."""

    def __init__(self, name, binary, package, argv, output=None, prepare=None,
                 known=None, env=None, about=""):
        self.name = name
        self.binary = binary
        self.package = package
        self.argv = argv
        self.output = output or (lambda stdout, scratch: stdout)
        self.prepare = prepare or (lambda knobs, scratch: None)
        self.known = known or (lambda knobs: None)
        self.env = env or {}
        self.about = about


def _script(name):
    return os.path.join(REAL_DIR, name)


def _gcc_prepare(knobs, scratch):
    src = os.path.join(scratch, "big.c")
    if not os.path.exists(src):
        subprocess.run(["python3", _script("gen_c.py"), str(knobs["functions"]), src],
                       check=True)
    obj = os.path.join(scratch, "big.o")
    if os.path.exists(obj):
        os.unlink(obj)


def _gcc_output(stdout, scratch):
    """The object file's digest: the same source and flags must give the same bytes."""
    try:
        with open(os.path.join(scratch, "big.o"), "rb") as f:
            return stdout + "big.o sha256 %s\n" % hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return stdout + "big.o missing\n"


def _db_prepare(knobs, scratch):
    shutil.rmtree(os.path.join(scratch, "db"), ignore_errors=True)


def _db_output(stdout, scratch):
    """The lines that do not depend on timing: how many keys readrandom found."""
    return "".join("%s\n" % m for m in re.findall(r"\(\d+ of \d+ found\)", stdout))


PROGRAMS = [
    Program("python", "/usr/bin/python3", "python3-minimal",
            lambda k, s: ["/usr/bin/python3", _script("python.py"), str(k["rounds"])],
            known=lambda k: r"^checksum %d\n$" % k["checksum"],
            env={"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0",
                 "PYTHONDONTWRITEBYTECODE": "1"},
            about="bench/real/python.py with PYTHONMALLOC=malloc: objects, dicts, lists, "
                  "strings churned through a sliding window; checks its checksum"),
    Program("ruby", "/usr/bin/ruby", "ruby",
            lambda k, s: ["/usr/bin/ruby", _script("ruby.rb"), str(k["rounds"])],
            known=lambda k: r"^checksum %d\n$" % k["checksum"],
            about="bench/real/ruby.rb: the same churn in Ruby (structs, hashes, arrays, "
                  "strings); checks its checksum"),
    Program("sqlite3", "/usr/bin/sqlite3", "sqlite3",
            lambda k, s: ["/usr/bin/sqlite3", ":memory:", ".read " + _script("sqlite.sql")],
            known=lambda k: "^" + re.escape(open(_script("sqlite.expected")).read()) + "$",
            about="bench/real/sqlite.sql: 200,000 rows inserted, two indexes, updates, "
                  "deletes, queries; checks the results against bench/real/sqlite.expected"),
    Program("gcc", "/usr/bin/gcc", "gcc",
            lambda k, s: ["/usr/bin/gcc", "-O2", "-pipe", "-w", "-c",
                          os.path.join(s, "big.c"), "-o", os.path.join(s, "big.o")],
            output=_gcc_output, prepare=_gcc_prepare,
            about="gcc -O2 -c on a C file of N generated functions (bench/real/gen_c.py); "
                  "checks the object file is byte for byte the reference run's"),
    Program("z3", "/usr/bin/z3", "z3",
            lambda k, s: ["/usr/bin/z3", _script("z3.smt2")],
            known=lambda k: r"^sat\n$",
            about="bench/real/z3.smt2: factor a 48-bit number over bit-vectors; checks sat"),
    Program("db_bench", "/usr/bin/db_bench", "rocksdb-tools",
            lambda k, s: ["/usr/bin/db_bench", "--benchmarks=fillrandom,readrandom",
                          "--num=%d" % k["num"], "--db=" + os.path.join(s, "db"),
                          "--value_size=100", "--compression_type=none", "--seed=42",
                          "--threads=1", "--disable_wal=1", "--statistics=0"],
            output=_db_output, prepare=_db_prepare,
            known=lambda k: r"^\(\d+ of %d found\)\n$" % k["num"],
            about="RocksDB's db_bench fillrandom then readrandom over N keys; checks "
                  "readrandom looked up N keys and found as many as the reference run"),
    Program("redis", "/usr/bin/redis-server", "redis-server",
            lambda k, s: ["/bin/sh", _script("redis.sh"), s, str(k["keys"]),
                          str(k["requests"])],
            known=lambda k: r"^intact %d of %d\n$" % (k["keys"], k["keys"]),
            about="redis-server filled by DEBUG POPULATE with K keys, then driven by "
                  "redis-benchmark (R requests of each of 7 commands, random keys, "
                  "pipelined; the client runs without the preload); checks every "
                  "populated key is intact"),
]
BY_NAME = {p.name: p for p in PROGRAMS}
NAMES = [p.name for p in PROGRAMS]


def select(names, install=True):
    """Returns (programs whose binary exists, skip lines). A missing program's package is
    installed when we are root on Debian (and `install`), else skipped with a line
    saying which package to install."""
    progs = [BY_NAME[n] for n in names]
    missing = [p.package for p in progs if not os.path.exists(p.binary)]
    if missing and install and benchlib.is_debian_root():
        benchlib.install_packages(sorted(set(missing)))
    usable, skipped = [], []
    for p in progs:
        if os.path.exists(p.binary):
            usable.append(p)
        else:
            skipped.append("%s: skipped, %s not found (install it: apt-get install %s)" %
                           (p.name, p.binary, p.package))
    return usable, skipped


def preload_of(alloc):
    """What the real group preloads for an allocator: its library, or libc for glibc."""
    return alloc.preload or LIBC


def command(prog, knobs, scratch, alloc):
    """The measured command line: realrun with the allocator, then the program."""
    return [benchlib.bench_bin("realrun"), "--preload=" + preload_of(alloc),
            "--workload=" + prog.name, "--"] + prog.argv(knobs, scratch)


def environment(prog, alloc=None):
    """The environment of a run (realrun sets LD_PRELOAD in the program only), with the
    allocator's own settings (lfheap-hugepages: LFHEAP_HUGEPAGES=1)."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(prog.env)
    if alloc is not None:
        env.update(alloc.settings)
    return env


def program_output(prog, stdout, scratch):
    """What the run printed (without realrun's result line), as prog.output sees it."""
    lines = [ln for ln in stdout.splitlines(True) if not ln.startswith("result ")]
    return prog.output("".join(lines), scratch)


def check_output(prog, knobs, text, reference):
    """None when `text` is right, else why not."""
    want = prog.known(knobs)
    if want is not None and not re.search(want, text):
        return "wrong output %r (want %s)" % (text[:120], want)
    if reference is not None and text != reference:
        return "output differs from the reference run's: %r, not %r" % (text[:120],
                                                                         reference[:120])
    return None


def parse_bindings(paths):
    """[(file, symbol, file it binds to)] of the heap symbols in LD_DEBUG=bindings
    traces."""
    pat = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")
    found = set()
    for path in paths:
        with open(path, errors="replace") as f:
            for line in f:
                m = pat.search(line)
                if m and m.group(3) in HEAP_SYMBOLS:
                    found.add((m.group(1), m.group(3), m.group(2)))
    return sorted(found)


_defined = {}


def defines(path, symbol):
    """True if the object at `path` defines `symbol` (nm -D --defined-only)."""
    if path not in _defined:
        try:
            out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                                 text=True, check=False).stdout
        except OSError:
            out = ""
        _defined[path] = {ln.split()[-1].split("@")[0] for ln in out.splitlines() if ln.strip()}
    return symbol in _defined[path]


def served_by(bindings, library):
    """None when every heap symbol of the trace binds to `library`, else why not. Two
    kinds of binding are not calls into another allocator and are left out: those made
    by `library` itself (an allocator looking up libc's functions, as tbbmalloc's proxy
    does to free blocks from before it started), and those to an object that does not
    define the symbol (a non-PIE executable that takes malloc's address: every object
    then binds to its PLT slot, which binds on to the real one, traced too)."""
    want = os.path.realpath(library)
    calls = [(f, s, t) for f, s, t in bindings if os.path.realpath(f) != want and
             defines(t, s)]
    if not any(s == "malloc" for _, s, _ in calls):
        return "no process binds malloc dynamically (statically linked?)"
    other = sorted({"%s -> %s" % (s, t) for f, s, t in calls if os.path.realpath(t) != want})
    if other:
        return "not served by %s: %s" % (library, "; ".join(other))
    return None


def check_served(prog, knobs, scratch, alloc, timeout):
    """Runs the program once with the allocator and the binding trace. Returns (None or
    why the allocator does not serve it, the output, status)."""
    trace = os.path.join(scratch, "ld-trace")
    for old in glob.glob(trace + ".*"):
        os.unlink(old)
    prog.prepare(knobs, scratch)
    env = environment(prog, alloc)
    env.update(LD_DEBUG="bindings", LD_DEBUG_OUTPUT=trace)
    cmd = command(prog, knobs, scratch, alloc)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return None, None, "timeout"
    if proc.returncode != 0:
        return None, None, "failed(%d): %s" % (proc.returncode, stderr.strip()[-200:])
    # realrun's own trace (its pid) is left out: it runs without the preload
    paths = [p for p in glob.glob(trace + ".*") if p != "%s.%d" % (trace, proc.pid)]
    why = served_by(parse_bindings(paths), preload_of(alloc))
    return why, program_output(prog, stdout, scratch), "ok"
