"""Shared pieces of the benchmark runner (run.py) and the fast-path counter
(fastpath.py): which allocators exist and how to preload them, installing the Debian
peers, their versions, and a description of the machine. Standard library only."""

import os
import platform
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD_BENCH = os.path.join(ROOT, "build", "bench")
LIBDIR = "/usr/lib/x86_64-linux-gnu"


class Allocator:
    """One allocator: `preload` is the library to LD_PRELOAD (None for glibc), `package`
    the Debian package that provides it (for installing and for its version)."""

    def __init__(self, name, preload, package, settings=None):
        self.name = name
        self.preload = preload
        self.package = package
        self.settings = settings or {}  # environment variables the allocator runs with
        self.skip_reason = None

    def env(self, base=None):
        env = dict(os.environ if base is None else base)
        env.pop("LD_PRELOAD", None)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        env.update(self.settings)
        return env

    def __repr__(self):
        return "Allocator(%s)" % self.name


PEERS = [
    ("glibc", None, "libc6"),
    ("jemalloc", LIBDIR + "/libjemalloc.so.2", "libjemalloc2"),
    ("tcmalloc", LIBDIR + "/libtcmalloc_minimal.so.4", "libtcmalloc-minimal4"),
    ("mimalloc", LIBDIR + "/libmimalloc.so.2", "libmimalloc2.0"),
    ("tbbmalloc", LIBDIR + "/libtbbmalloc_proxy.so.2", "libtbbmalloc2"),
]
ALL_NAMES = ["lfheap"] + [p[0] for p in PEERS]
# lfheap with a setting, run only when named (--allocators lfheap,lfheap-hugepages,...):
# it enters the tables as one more column, so its ratios read as lfheap's against it.
LFHEAP_SETTINGS = {"lfheap-hugepages": {"LFHEAP_HUGEPAGES": "1"}}


def copy_names(count):
    """The names of `count` copies of lfheap run as its peers (bench/run.py --copies)."""
    return ["lfheap-copy%d" % i for i in range(1, count + 1)]


def is_copy(name):
    return name.startswith("lfheap-copy") and name[len("lfheap-copy"):].isdigit()


def is_peer(name):
    """True for another allocator, the ones lfheap is compared with: not lfheap itself,
    with or without a setting (its copies, bench/run.py --copies, stand in for peers)."""
    return name != "lfheap" and name not in LFHEAP_SETTINGS


def note(msg):
    print(msg, file=sys.stderr, flush=True)


def exports_malloc(path):
    """True if the shared library at `path` defines malloc (nm -D)."""
    try:
        out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True,
                             text=True, check=False).stdout
    except OSError:
        return False
    return any(line.split()[-1:] == ["malloc"] for line in out.splitlines())


def is_debian_root():
    return os.geteuid() == 0 and os.path.exists("/etc/debian_version") and \
        shutil.which("apt-get") is not None


def install_packages(packages):
    """Installs Debian packages with apt-get (caller checked is_debian_root)."""
    if not packages:
        return
    note("installing with apt-get: " + " ".join(packages))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + packages
    if subprocess.run(cmd, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", "update"], env=env, check=False)
        subprocess.run(cmd, env=env, check=False)


def select_allocators(names, lfheap_path, install=True):
    """Returns (usable allocators in `names` order, list of skip lines). lfheap is usable
    when its library exists and exports malloc; a missing peer is installed when we are
    root on Debian, else skipped with a line saying how to install it."""
    wanted = [n for n in names]
    known = ALL_NAMES + list(LFHEAP_SETTINGS)
    unknown = [n for n in wanted if n not in known and not is_copy(n)]
    if unknown:
        raise SystemExit("unknown allocator(s): %s (known: %s)" %
                         (", ".join(unknown), ", ".join(known)))
    peers = {p[0]: Allocator(*p) for p in PEERS}
    missing = [peers[n].package for n in wanted
               if n in peers and peers[n].preload and not os.path.exists(peers[n].preload)]
    if missing and install and is_debian_root():
        install_packages(missing)
    usable, skipped = [], []
    for n in wanted:
        if n == "lfheap" or n in LFHEAP_SETTINGS or is_copy(n):
            path = os.path.abspath(lfheap_path)
            if not os.path.exists(path):
                skipped.append("%s: skipped, %s does not exist (run `make all`)" % (n, path))
            elif not exports_malloc(path):
                skipped.append("%s: skipped, %s does not define malloc yet "
                               "(nm -D shows no malloc)" % (n, path))
            else:
                usable.append(Allocator(n, path, None, LFHEAP_SETTINGS.get(n)))
            continue
        a = peers[n]
        if a.preload and not os.path.exists(a.preload):
            skipped.append("%s: skipped, %s not found (install it: apt-get install %s)" %
                           (n, a.preload, a.package))
            continue
        usable.append(a)
    return usable, skipped


def package_version(package):
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                           capture_output=True, text=True, check=False)
        return r.stdout.strip() or "?"
    except OSError:
        return "?"


def lfheap_version(path):
    """The git commit of the tree the library was built from when it is ours, plus the
    library's modification time, so a result can be traced to a build."""
    desc = "?"
    libdir = os.path.dirname(os.path.dirname(os.path.abspath(path)))
    try:
        r = subprocess.run(["git", "-C", libdir, "describe", "--always", "--dirty"],
                           capture_output=True, text=True, check=False)
        if r.returncode == 0:
            desc = "git " + r.stdout.strip()
    except OSError:
        pass
    try:
        import hashlib
        import time
        mtime = time.strftime("%Y-%m-%d %H:%M", time.localtime(os.path.getmtime(path)))
        with open(path, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
    except OSError:
        mtime, digest = "?", "?"
    return "%s (%s, built %s, sha256 %s)" % (desc, path, mtime, digest)


def allocator_version(alloc):
    if alloc.package is None:
        settings = " ".join("%s=%s" % kv for kv in sorted(alloc.settings.items()))
        return lfheap_version(alloc.preload) + (", with " + settings if settings else "")
    return "%s %s" % (alloc.package, package_version(alloc.package))


def machine_info():
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "host": platform.node().split(".")[0] or "host",
        "nproc": os.cpu_count() or 0,
        "cpu": cpu,
        "kernel": platform.release(),
        "glibc": package_version("libc6"),
    }


def load_average():
    """The 1-minute load average as text ('?' if unknown): how busy the machine was."""
    try:
        with open("/proc/loadavg") as f:
            return f.read().split()[0]
    except (OSError, IndexError):
        return "?"


def run_make(targets):
    """Builds with the top-level Makefile; exits if the build fails."""
    r = subprocess.run(["make", "-s", "-C", ROOT] + targets, check=False)
    if r.returncode != 0:
        raise SystemExit("make %s failed" % " ".join(targets))


def bench_bin(name):
    return os.path.join(BUILD_BENCH, name)
