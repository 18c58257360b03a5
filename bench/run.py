#!/usr/bin/python3
"""imptrace benchmark: tracer overhead side by side with the peers, and viewer speed.

One command, standard library only (run with /usr/bin/python3):

    bench/run.py [--rounds 7] [--torch-rounds 5] [--callgrind] [--workloads tree,torch,pytest,storm]

See bench/README.md for what is measured and how to read the table. This is not part of
the pass/fail test suite: it only reports (exit status 0 unless a run itself failed).
"""

import argparse
import datetime
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

from proxy_modules import forwarding_proxy_module, pep562_module

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PY = "/usr/bin/python3"

# ----------------------------------------------------------------------------------------
# Workload generation


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


LEAF = textwrap.dedent('''\
    """Generated leaf module {name}."""
    VALUE = {i}
    NAME = {name!r}

    def f(x):
        return x + VALUE

    class C:
        def m(self):
            return NAME
    ''')


# Tracer entry points that run CPython's own work inside them (their inclusive cost is
# mostly not the tracer's).
WRAPPING_HOOKS = ("find_and_load_hook", "handle_fromlist_hook", "call_original", "dict_ass_subscript_hook",
                  "module_dealloc_hook", "class_setter_hook", "exec_wrapper", "observed_entry")


def gen_tree(root, total=5000, top="bt_root", window=None):
    """A package tree of exactly `total` modules: top -> 10 packages -> 10 subpackages each
    -> leaves. Every __init__ imports its children, so `import bt_root` loads them all.
    `window`: the package a{window} is imported inside a callgrind window; returns then the
    number of imports in it too."""
    n_a, n_b = 10, 10
    packages = 1 + n_a + n_a * n_b
    leaves = total - packages
    per_b = [leaves // (n_a * n_b) + (1 if k < leaves % (n_a * n_b) else 0)
             for k in range(n_a * n_b)]
    base = os.path.join(root, top)
    if window is None:
        write(os.path.join(base, "__init__.py"),
              "".join(f"from . import a{a}\n" for a in range(n_a)))
    else:  # --callgrind-windows: package a{window}'s imports (a sixth of the run on) counted
        write(os.path.join(base, "__init__.py"),
              WINDOW_PRELUDE.replace("__file__", "os.path.dirname(__file__)")
              + "".join(("_window.imptrace_bench_window_open()\n" if a == window else "")
                        + f"from . import a{a}\n"
                        + ("_window.imptrace_bench_window_close()\n" if a == window else "")
                        for a in range(n_a)))
    k = 0
    for a in range(n_a):
        write(os.path.join(base, f"a{a}", "__init__.py"),
              "".join(f"from . import b{b}\n" for b in range(n_b)))
        for b in range(n_b):
            d = os.path.join(base, f"a{a}", f"b{b}")
            write(os.path.join(d, "__init__.py"),
                  "".join(f"from . import m{m}\n" for m in range(per_b[k])))
            for m in range(per_b[k]):
                write(os.path.join(d, f"m{m}.py"), LEAF.format(name=f"{top}.a{a}.b{b}.m{m}", i=m))
            k += 1
    if window is not None:
        return total, 1 + n_b + sum(per_b[window * n_b:(window + 1) * n_b])
    return total


def gen_storm(root, threads=8, per=300):
    for t in range(threads):
        base = os.path.join(root, f"storm_p{t}")
        write(os.path.join(base, "__init__.py"),
              "".join(f"from . import m{m}\n" for m in range(per - 1)))
        for m in range(per - 1):
            write(os.path.join(base, f"m{m}.py"), LEAF.format(name=f"storm_p{t}.m{m}", i=m))
    write(os.path.join(root, "storm_main.py"), textwrap.dedent(f'''\
        import threading
        N = {threads}
        barrier = threading.Barrier(N)
        def work(i):
            barrier.wait()
            __import__("storm_p%d" % i)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(N)]
        for t in ts: t.start()
        for t in ts: t.join()
        import sys
        assert all(("storm_p%d.m%d" % (i, {per - 2})) in sys.modules for i in range(N))
        '''))


# Issue 21's two hot loops: one attribute read 300,000 times through a PEP 562 module
# __getattr__, and through a ModuleType-subclass proxy that forwards to a module it holds.
HOT_READS = 300000


def gen_hot(root, reads=HOT_READS):
    write(os.path.join(root, "hot_lazy.py"), pep562_module(42))
    write(os.path.join(root, "hot_proxied.py"), forwarding_proxy_module("hot_real", 42))
    for name, module in (("hotgetattr", "hot_lazy"), ("hotproxy", "hot_proxied")):
        write(os.path.join(root, f"{name}_main.py"), textwrap.dedent(f'''\
            import {module}
            for _ in range({reads}):
                {module}.value
            '''))


def gen_pytest(root, files=200, tests=10, helpers=50):
    """200 test files x 10 tests; each file imports three generated helper modules (shared
    between files, so most are cached) and a few stdlib modules."""
    suite = os.path.join(root, "psuite")
    write(os.path.join(suite, "helpers", "__init__.py"), "")
    for h in range(helpers):
        write(os.path.join(suite, "helpers", f"h{h}.py"), LEAF.format(name=f"helpers.h{h}", i=h))
    write(os.path.join(suite, "pytest.ini"), "[pytest]\naddopts = -p no:cacheprovider\n")
    write(os.path.join(suite, "tests", "__init__.py"), "")
    for fi in range(files):
        hs = sorted({fi % helpers, (fi * 7 + 3) % helpers, (fi * 13 + 5) % helpers})
        body = ["import json, collections, functools\n"]
        body += [f"from helpers import h{h}\n" for h in hs]
        for t in range(tests):
            body.append(f"\n\ndef test_{t}():\n    assert h{hs[0]}.f({t}) == {t} + h{hs[0]}.VALUE\n")
        write(os.path.join(suite, "tests", f"test_f{fi:03d}.py"), "".join(body))
    return suite


WRAPPER = textwrap.dedent('''\
    """The "hand-written Python wrapper" contender: wraps importlib._bootstrap._find_and_load
    and records (name, begin, end, id(sys.modules.get(name))) into a list; then runs the
    workload with runpy, as `python3 SCRIPT` or `python3 -m MODULE` would."""
    import sys, os, time, runpy
    import importlib._bootstrap as _bootstrap

    RECORDS = []
    _orig = _bootstrap._find_and_load
    _append = RECORDS.append
    _now = time.perf_counter_ns
    _modules = sys.modules

    def _find_and_load(name, import_):
        t0 = _now()
        try:
            return _orig(name, import_)
        finally:
            _append((name, t0, _now(), id(_modules.get(name))))

    _bootstrap._find_and_load = _find_and_load

    args = sys.argv[1:]
    if args[0] == "-m":
        sys.argv = [args[1]] + args[2:]
        sys.path[0] = os.getcwd()
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
        runpy.run_path(args[0], run_name="__main__")
    ''')


LONG_LENGTHS = (5000, 20000)
TREE_WINDOW_IMPORTS = 0  # set by generate()


def gen_long(root, total=20000, lengths=LONG_LENGTHS):
    """Issue 17's importer: `total` one-line modules in package `lm`, and for each length N a
    driver `longN_main.py` with N lines `import lm.mI`, one module each (all top-level
    imports from one frame). Any per-import cost that grows with the importer's length or
    with the number of imports made so far shows as growth between the two lengths."""
    write(os.path.join(root, "lm", "__init__.py"), "")
    for i in range(total):
        write(os.path.join(root, "lm", f"m{i}.py"), f"VALUE = {i}\n")
    for n in lengths:
        write(os.path.join(root, f"long{n}_main.py"), "".join(f"import lm.m{i}\n" for i in range(n)))
        # The same driver with callgrind windows (--callgrind-windows): the last
        # WINDOW_IMPORTS imports of every length up to n, so that the longest driver counts
        # the same imports as the shorter one (cost against the file's length) and its own
        # last ones (cost against the number of imports made before).
        starts = {m - WINDOW_IMPORTS for m in lengths if m <= n}
        lines = [WINDOW_PRELUDE]
        for i in range(n):
            if i in starts:
                lines.append("_window.imptrace_bench_window_open()\n")
            lines.append(f"import lm.m{i}\n")
            if i + 1 in {a + WINDOW_IMPORTS for a in starts}:
                lines.append("_window.imptrace_bench_window_close()\n")
        write(os.path.join(root, f"long{n}_window_main.py"), "".join(lines))


# Callgrind windows (--callgrind-windows): the run goes under valgrind uninstrumented
# (--instr-atstart=no, several times faster) but for the windows a driver opens and closes
# through this library, each dumped to its own file. Untraced and traced runs count the
# same imports, so the difference is the tracer's cost per import at that point of the run,
# without start-up and without instrumenting the rest (a 20,000-line run whole takes an
# hour of callgrind on a loaded machine).
WINDOW_IMPORTS = 1000
WINDOW_C = """/* bench/run.py's callgrind windows: instructions counted between open and close only. */
#include <valgrind/callgrind.h>
void imptrace_bench_window_open(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void imptrace_bench_window_close(void) { CALLGRIND_DUMP_STATS_AT("window"); CALLGRIND_STOP_INSTRUMENTATION; }
"""
WINDOW_LIB = "imptrace_bench_window.so"
WINDOW_PRELUDE = ("import ctypes, os\n"
                  f"_window = ctypes.CDLL(os.path.join(os.path.dirname(os.path.abspath(__file__)), {WINDOW_LIB!r}))\n")


def build_window_lib(d):
    write(os.path.join(d, "imptrace_bench_window.c"), WINDOW_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", os.path.join(d, WINDOW_LIB),
                    os.path.join(d, "imptrace_bench_window.c")], check=True)


# Interpreters a workload can name after "@" (long5000@3.10): the long importer is measured
# on each. Without "@", workloads run on PY (Debian's static 3.11).
PYENV = "/root/.pyenv/versions"


def interpreter(tag):
    if tag in ("", "debian"):
        return PY
    if tag.startswith("sid"):  # "sid3.14": Debian sid's, in scripts/sid.sh's chroot (torch 2.x)
        wrapper = os.path.join(REPO, "build", "sid", "python" + tag[3:])
        if not os.path.exists(wrapper):
            raise SystemExit(f"bench: no {wrapper} (scripts/sid.sh, then any e2e test on sid writes it)")
        return wrapper
    found = sorted(d for d in (os.listdir(PYENV) if os.path.isdir(PYENV) else [])
                   if d.startswith(tag + ".") and os.path.exists(os.path.join(PYENV, d, "bin", "python")))
    if not found:
        raise SystemExit(f"bench: no interpreter {tag} under {PYENV}")
    return os.path.join(PYENV, found[-1], "bin", "python")


def split_workload(w):
    """'long20000@3.10' -> ('long20000', '/root/.pyenv/versions/3.10.x/bin/python');
    'torch@sid3.14' -> Debian sid's 3.14 with its torch 2.x."""
    base, _, tag = w.partition("@")
    return base, interpreter(tag)


# A real suite for pytest's collection: Debian's sympy ships its tests.
REAL_SUITE = "/usr/lib/python3/dist-packages/sympy/core/tests"


def generate(work, workloads=(), windows=False):
    if os.path.exists(work):
        shutil.rmtree(work)
    os.makedirs(work)
    src = os.path.join(work, "src")
    os.makedirs(src)
    gen_tree(src)
    write(os.path.join(src, "tree_main.py"), "import bt_root\n")
    if windows:  # valgrind's headers needed only here
        build_window_lib(src)
        global TREE_WINDOW_IMPORTS
        TREE_WINDOW_IMPORTS = gen_tree(src, top="btw_root", window=5)[1]
        write(os.path.join(src, "tree_window_main.py"), "import btw_root\n")
    write(os.path.join(src, "torch_main.py"), "import torch\n")
    gen_storm(src)
    gen_hot(src, HOT_READS)
    suite = gen_pytest(work)
    write(os.path.join(src, "wrapper_launch.py"), WRAPPER)
    write(os.path.join(src, "scipy_main.py"), "import scipy, sympy\n")
    # Bytecode compiled beforehand, so every contender reads the same .pyc files.
    for d in (src, suite):
        subprocess.run([PY, "-m", "compileall", "-q", "-j0", d], check=True,
                       stdout=subprocess.DEVNULL)
    # The other interpreters named (tree@3.8) read bytecode of their own, made here too.
    for py in sorted(p for p in {split_workload(w)[1] for w in workloads if not w.startswith("long")}
                     if p.startswith(PYENV)):
        subprocess.run([py, "-m", "compileall", "-q", "-j0", src], check=True, stdout=subprocess.DEVNULL)
    longs = {split_workload(w)[1] for w in workloads if w.startswith("long")}
    if longs:
        gen_long(os.path.join(work, "long"))
        if windows:
            build_window_lib(os.path.join(work, "long"))
        for py in sorted(longs):  # each interpreter its own .pyc (the drivers are scripts)
            subprocess.run([py, "-m", "compileall", "-q", "-j0", os.path.join(work, "long", "lm")],
                           check=True, stdout=subprocess.DEVNULL)
    return src, suite


# ----------------------------------------------------------------------------------------
# Running


def base_env():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "IMPTRACE_", "PYTEST_")) and k != "LD_PRELOAD"}
    return env


class Run:
    __slots__ = ("wall", "cpu", "user", "sys", "rss_kib", "minflt", "trace_bytes", "rc")


TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def spawn_measured(argv, env=None, cwd=None, stderr_devnull=False):
    """Runs argv; returns (exit code, wall s, user s, sys s, peak RSS KiB, minor page faults,
    stderr text).

    Peak RSS: on Linux a child's ru_maxrss starts from the high-water mark of the process it
    was forked (or vforked) from, so a child of this (large) Python process would report at
    least this process's RSS. The command is therefore started by /usr/bin/time (a small
    process), whose own child's ru_maxrss (%M) is the command's, and so are its minor page
    faults (%R: pages the kernel made, whether on a fault or made ahead by madvise). CPU
    comes from wait4 on /usr/bin/time, which includes its child (time's own share is
    negligible)."""
    errf = tempfile.TemporaryFile()
    rssf = tempfile.NamedTemporaryFile(prefix="imptrace-bench-rss-", delete=False)
    rssf.close()
    full = ([TIME, "-f", "%M %R", "-o", rssf.name] + argv) if TIME else argv
    t0 = time.perf_counter()
    p = subprocess.Popen(full, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL if stderr_devnull else errf)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = rc = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    rss, minflt = ru.ru_maxrss, ru.ru_minflt
    if TIME:
        with open(rssf.name) as f:
            numbers = [w for w in f.read().split() if w.isdigit()]
        if len(numbers) >= 2:
            rss, minflt = int(numbers[-2]), int(numbers[-1])
    os.unlink(rssf.name)
    errf.seek(0)
    err = errf.read().decode(errors="replace")
    errf.close()
    return rc, wall, ru.ru_utime, ru.ru_stime, rss, minflt, err


def run_once(argv, env, cwd, stderr_devnull=False):
    rc, wall, user, sys_, rss, minflt, err = spawn_measured(argv, env, cwd, stderr_devnull)
    if rc != 0:
        raise SystemExit(f"run failed (exit {rc}): {' '.join(argv)}\n{err[-3000:]}")
    r = Run()
    r.wall, r.user, r.sys, r.cpu = wall, user, sys_, user + sys_
    r.rss_kib, r.minflt, r.rc, r.trace_bytes = rss, minflt, rc, 0
    return r


# Round order. "inert" is a control: imptrace's command with IMPTRACE_DISABLE=1, so the
# library is loaded and does nothing; its ratio to untraced is what "no added cost"
# measures as on this machine in this run (noise plus the cost of the preload itself).
# "imptrace+native" unwinds with libunwind (the tracer's choice), "imptrace+native-bt" with
# glibc's backtrace() (IMPTRACE_NATIVE_UNWINDER=backtrace), for the README's comparison.
CONTENDERS = ["untraced", "inert", "imptrace", "imptrace+native", "imptrace+native-bt", "importtime", "pywrapper"]
# The contenders that write a trace (trace bytes, composition, import count).
TRACING = ("imptrace", "imptrace+native", "imptrace+native-bt")


def command(workload, contender, src, suite, lib, tracedir, window=False, layout=0):
    """argv, env, cwd for one workload under one contender. `window`: the driver with
    callgrind windows (tree and long*). `layout`: the length of BENCH_LAYOUT (below)."""
    env = base_env()
    if layout:
        env["BENCH_LAYOUT"] = "x" * layout
    workload, py = split_workload(workload)  # the interpreter of this run
    if window:
        workload += "_window"
    if workload == "pytest":
        target, cwd = ["-m", "pytest", "--collect-only", "-q", "tests"], suite
    elif workload == "realpytest":
        target, cwd = ["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", REAL_SUITE], src
    elif workload.startswith("long"):
        long_dir = os.path.join(os.path.dirname(src), "long")
        target, cwd = [os.path.join(long_dir, f"{workload}_main.py")], long_dir
    else:
        target, cwd = [os.path.join(src, f"{workload}_main.py")], src
    if contender == "untraced":
        argv = [py] + target
    elif contender in ("imptrace", "imptrace+native", "imptrace+native-bt", "inert"):
        argv = [py] + target
        env["LD_PRELOAD"] = lib
        env["IMPTRACE_OUTPUT"] = tracedir + "/"
        if contender in ("imptrace+native", "imptrace+native-bt"):
            env["IMPTRACE_NATIVE_STACKS"] = "1"
        if contender == "imptrace+native-bt":
            env["IMPTRACE_NATIVE_UNWINDER"] = "backtrace"
        elif contender == "inert":
            env["IMPTRACE_DISABLE"] = "1"
    elif contender == "importtime":
        argv = [py, "-X", "importtime"] + target
    elif contender == "pywrapper":
        argv = [py, os.path.join(src, "wrapper_launch.py")] + target
    else:
        raise ValueError(contender)
    return argv, env, cwd


def dir_bytes(d):
    total = 0
    for name in os.listdir(d) if os.path.isdir(d) else []:
        total += os.path.getsize(os.path.join(d, name))
    return total


def record_kind_names():
    """Record.<kind> field number -> name, read from the .proto (the one source of the
    trace's vocabulary), so a kind added there is named here without a second list."""
    with open(os.path.join(REPO, "proto", "imptrace.proto")) as f:
        text = f.read()
    body = re.search(r"message Record \{\s*oneof kind \{(.*?)\}", text, re.S).group(1)
    return {int(num): name for name, num in re.findall(r"^\s*\w+\s+(\w+)\s*=\s*(\d+);", body, re.M)}


KIND_NAMES = record_kind_names()


def read_varint(buf, i):
    v = shift = 0
    while True:
        c = buf[i]
        i += 1
        v |= (c & 0x7F) << shift
        if not c & 0x80:
            return v, i
        shift += 7


def trace_composition(tracedir):
    """Bytes and record counts per record kind over the trace files in tracedir (framing
    bytes included, counted with the record they frame)."""
    out = {}
    for name in os.listdir(tracedir) if os.path.isdir(tracedir) else []:
        if ".pb" not in name:
            continue
        with open(os.path.join(tracedir, name), "rb") as f:
            buf = f.read()
        i = 0
        while i < len(buf):
            start = i
            _, i = read_varint(buf, i)          # Trace.record tag
            ln, i = read_varint(buf, i)
            end = i + ln
            tag, _ = read_varint(buf, i)        # Record.<kind> tag
            kind = KIND_NAMES.get(tag >> 3, str(tag >> 3))
            n, b = out.get(kind, (0, 0))
            out[kind] = (n + 1, b + end - start)
            i = end
    return out


def count_imports(viewer, tracedir):
    out = subprocess.run([viewer, "export", tracedir, "--format", "json"], check=True,
                         stdout=subprocess.PIPE).stdout
    data = json.loads(out)
    return sum(len(p["imports"]) for p in data["processes"]), len(data["processes"])


def bench_workload(workload, rounds, src, suite, lib, viewer, scratch, log):
    results = {c: [] for c in CONTENDERS}
    imports = nproc_traced = composition = None
    # Each round runs every contender with BENCH_LAYOUT set to a string of a length drawn
    # for that round (the same for all of them): the size of the environment moves where the
    # interpreter's objects land, and with it the collisions in its type-attribute cache
    # (indexed by an attribute name's address and the type's version tag on 3.8-3.12), which
    # decide a workload's cost by whole percents (bench/README.md). Drawn, not fixed, so that
    # no contender's ratio rests on one lucky or unlucky layout of its own.
    layouts = random.Random(f"layout-{workload}")
    for rnd in range(rounds + 1):  # round 0 warms caches and is discarded
        layout = layouts.randrange(1, 4096)
        # Each round starts one contender later than the one before, so that no contender
        # always runs right after the same other one (or first, on a machine still busy
        # with the last round): a place in the round is not a cost of the contender.
        k = rnd % len(CONTENDERS)
        for c in CONTENDERS[k:] + CONTENDERS[:k]:
            tracedir = os.path.join(scratch, f"trace-{workload}-{rnd}-{c}")
            argv, env, cwd = command(workload, c, src, suite, lib, tracedir, layout=layout)
            r = run_once(argv, env, cwd, stderr_devnull=(c == "importtime"))
            # dir_bytes is 0 for a directory never made (inert writes nothing; a non-zero
            # figure there means IMPTRACE_DISABLE was not honoured, and the report says so).
            r.trace_bytes = dir_bytes(tracedir)
            if c == "imptrace" and imports is None:
                if not r.trace_bytes:
                    raise SystemExit(f"bench: imptrace wrote no trace for {workload} in {tracedir}")
                imports, nproc_traced = count_imports(viewer, tracedir)
                composition = trace_composition(tracedir)
            if c == "inert" and r.trace_bytes:
                log(f"  WARNING: inert run wrote {r.trace_bytes:,} bytes of trace")
            shutil.rmtree(tracedir, ignore_errors=True)
            if rnd > 0:
                results[c].append(r)
            log(f"  {workload:7s} round {rnd}{' (warm-up)' if rnd == 0 else '':10s} {c:10s} "
                f"wall {r.wall:7.3f}s cpu {r.cpu:7.3f}s rss {r.rss_kib / 1024:7.1f}MiB")
    return results, imports, nproc_traced, composition


def med(xs):
    return statistics.median(xs)


# ----------------------------------------------------------------------------------------
# The inert library outside Python


def bench_spawns(lib, scratch, n, rounds, log):
    """n sequential spawns of /bin/true, with libimptrace.so preloaded, with an empty
    preloaded library (what any preload costs: the dynamic linker opens and maps it), and
    with nothing; rounds alternate the three. Returns {contender: [(cpu s, wall s)...]},
    and under "faults" / "instructions" each contender's page faults per spawn (median) and
    the instructions of one spawn counted by callgrind (the steady figures on a busy
    machine; None without valgrind)."""
    empty_c = os.path.join(scratch, "empty.c")
    empty = os.path.join(scratch, "libempty.so")
    write(empty_c, "/* an empty preload: the control of the inert library's cost */\nint imptrace_bench_empty;\n")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", empty, empty_c], check=True)
    out = {"none": [], "empty": [], "imptrace": []}
    faults = {c: [] for c in out}
    for rnd in range(rounds + 1):  # round 0 warms caches and is discarded
        for c, pre in (("none", None), ("empty", empty), ("imptrace", lib)):
            env = base_env()
            if pre:
                env["LD_PRELOAD"] = pre
            cpu = 0.0
            t0 = time.perf_counter()
            for _ in range(n):
                p = subprocess.Popen(["/bin/true"], env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                _, status, ru = os.wait4(p.pid, 0)
                p.returncode = os.waitstatus_to_exitcode(status)
                cpu += ru.ru_utime + ru.ru_stime
                faults[c].append(ru.ru_minflt)
            wall = time.perf_counter() - t0
            if rnd > 0:
                out[c].append((cpu, wall))
            log(f"  spawns round {rnd}{' (warm-up)' if rnd == 0 else '':10s} {c:8s} cpu {cpu:.3f}s wall {wall:.3f}s")
    out["faults"] = {c: med(v) for c, v in faults.items()}
    out["instructions"] = None
    if shutil.which("valgrind"):
        out["instructions"] = {}
        for c, pre in (("none", None), ("empty", empty), ("imptrace", lib)):
            env = base_env()
            if pre:
                env["LD_PRELOAD"] = pre
            cg = os.path.join(scratch, f"spawn.{c}.callgrind")
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={cg}", "/bin/true"],
                           env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out["instructions"][c] = callgrind_totals(cg)["Ir"]
    return out


def spawn_report(res, n):
    L = [f"## The inert library outside Python: {n} spawns of /bin/true, {len(res['none'])} rounds", ""]
    L.append("| preload | CPU s (median) | wall s (median) | CPU vs empty, paired [min, max] "
             "| wall vs empty, paired [min, max] | +µs/spawn vs empty (wall) | page faults/spawn "
             "| instructions/spawn (callgrind) |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    ins = res.get("instructions") or {}
    e_cpu = med([c for c, _ in res["empty"]])
    e_wall = med([w for _, w in res["empty"]])
    for c in ("none", "empty", "imptrace"):
        cpu = med([x for x, _ in res[c]])
        wall = med([w for _, w in res[c]])
        rc = sorted(a[0] / b[0] for a, b in zip(res[c], res["empty"]) if b[0])
        rw = sorted(a[1] / b[1] for a, b in zip(res[c], res["empty"]))
        counted = f"{ins[c]:,}" if c in ins else "–"
        L.append(f"| {c} | {cpu:.3f} | {wall:.3f} | {med(rc):.3f} [{rc[0]:.3f}, {rc[-1]:.3f}] "
                 f"| {med(rw):.3f} [{rw[0]:.3f}, {rw[-1]:.3f}] | {(wall - e_wall) / n * 1e6:+.1f} "
                 f"| {res['faults'][c]:.0f} | {counted} |")
    L.append("")
    L.append("CPU is the children's user + system time (wait4); a spawn of /bin/true is mostly "
             "the kernel's fork/exec and the dynamic linker, so the wall column, which also "
             "holds the parent's side of each spawn, is the steadier one. Target: libimptrace.so "
             "within 3-5 % of the empty library.")
    L.append("")
    return L


BOOT_RESAMPLES = 2000


def paired_stats(pairs, imports):
    """Per-round paired figures over (contender run, untraced run) pairs of the same round:
    median ratio and median difference per import (µs), by CPU and by wall time."""
    return {
        "cpu_paired": med([r.cpu / b.cpu for r, b in pairs]),
        "us_cpu_paired": med([r.cpu - b.cpu for r, b in pairs]) / imports * 1e6,
        "wall_paired": med([r.wall / b.wall for r, b in pairs]),
        "us_wall_paired": med([r.wall - b.wall for r, b in pairs]) / imports * 1e6,
    }


def bootstrap_ci(pairs, imports, seed, resamples=BOOT_RESAMPLES):
    """95 % percentile bootstrap intervals of paired_stats: the rounds (each a pair of
    contender and untraced runs) are resampled with replacement. Seeded (a str seed hashes
    the same in every process), so the same measurements give the same intervals."""
    rng = random.Random(seed)
    n = len(pairs)
    draws = {}
    for _ in range(resamples):
        sample = [pairs[rng.randrange(n)] for _ in range(n)]
        for k, v in paired_stats(sample, imports).items():
            draws.setdefault(k, []).append(v)
    out = {}
    for k, vs in draws.items():
        q = statistics.quantiles(vs, n=40, method="inclusive")  # cut points every 2.5 %
        out[k] = (q[0], q[-1])
    return out


def summarize(workload, results, imports):
    base = results["untraced"]
    bw, bc, br = med([r.wall for r in base]), med([r.cpu for r in base]), med([r.rss_kib for r in base])
    rows = []
    for c in CONTENDERS:
        rs = results[c]
        pairs = list(zip(rs, base))
        w, cpu, rss = med([r.wall for r in rs]), med([r.cpu for r in rs]), med([r.rss_kib for r in rs])
        row = {
            "contender": c, "wall": w, "wall_ratio": w / bw,
            "cpu": cpu, "cpu_ratio": cpu / bc,
            # Best of the rounds against best of the rounds: this VM's interference only
            # ever adds time, so the fastest run of each is the least disturbed one.
            "cpu_best_ratio": min(r.cpu for r in rs) / min(b.cpu for b in base),
            "minflt_added": med([r.minflt for r in rs]) - med([b.minflt for b in base]),
            "us_wall": (w - bw) / imports * 1e6, "us_cpu": (cpu - bc) / imports * 1e6,
            "rss": rss / 1024, "rss_added": (rss - br) / 1024,
            "bytes_per_import": (med([r.trace_bytes for r in rs]) / imports) if c in TRACING else None,
            "trace_bytes": med([r.trace_bytes for r in rs]) if c in TRACING else None,
            "stray_trace_bytes": max(r.trace_bytes for r in rs) if c not in TRACING else 0,
        }
        row.update(paired_stats(pairs, imports))
        row["ci"] = (bootstrap_ci(pairs, imports, f"imptrace-bench/{workload}/{c}")
                     if c != "untraced" else {})
        rows.append(row)
    return rows


def fmt_ci(value, ci, point="{:.3f}", bound="{:.3f}"):
    """'1.031 [1.012, 1.049]'; the value alone when there is no interval."""
    if not ci:
        return point.format(value)
    lo, hi = ci
    return f"{point.format(value)} [{bound.format(lo)}, {bound.format(hi)}]"


def verdict(ci, target, shown):
    """A target 'value <= target' judged on the 95 % interval, not the point estimate."""
    lo, hi = ci
    if hi <= target:
        v = "met"
    elif lo > target:
        v = "**NOT met**"
    else:
        v = "not resolved"
    return f"{v} ({shown})"


# ----------------------------------------------------------------------------------------
# Instruction counts (callgrind)


def callgrind_totals(path):
    """{event: count} from a callgrind output file: Ir, and with the cache simulation
    I1mr (first-level instruction cache misses), D1mr/D1mw (data) and the rest."""
    events = None
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                return dict(zip(events or ["Ir"], (int(v) for v in line.split()[1:])))
    raise SystemExit(f"no totals in {path}")


def simulated_caches():
    """valgrind's cache options for this machine's first-level caches and its last level:
    from sysfs, or where this VM's sysfs has no cache description, from the C library's
    report of CPUID (`getconf -a`). valgrind's own guess here is a last level of 256 MiB
    direct-mapped or 512 MiB two-way (it cannot read the host's), which turns every
    last-level miss into a hit. A level is passed only when fully described with a set
    count valgrind can simulate (a power of two); the last level is the largest such
    unified one (with CPUID's report on this VM, which gives the level 3 no
    associativity, the level 2). Options valgrind is not given it guesses itself."""
    found = {}
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in sorted(os.listdir(base)):
            if not d.startswith("index"):
                continue
            def field(name, d=d):
                with open(os.path.join(base, d, name)) as f:
                    return f.read().strip()
            size = int(field("size").rstrip("K")) * 1024
            level, kind = int(field("level")), field("type")
            geometry = (size, int(field("ways_of_associativity")), int(field("coherency_line_size")))
            if level == 1 and kind in ("Data", "Instruction"):
                found["D1" if kind == "Data" else "I1"] = geometry
            elif kind == "Unified" and level >= found.get("LL_level", 0):
                found["LL"], found["LL_level"] = geometry, level
    except (OSError, ValueError):
        found = {}
    if not found:
        try:
            conf = dict(line.split(None, 1) for line in subprocess.run(
                ["getconf", "-a"], stdout=subprocess.PIPE, universal_newlines=True).stdout.splitlines()
                if len(line.split(None, 1)) == 2)
        except OSError:
            conf = {}
        def level(prefix):
            try:
                return tuple(int(conf[f"{prefix}_{k}"]) for k in ("SIZE", "ASSOC", "LINESIZE"))
            except (KeyError, ValueError):
                return None
        found = {"I1": level("LEVEL1_ICACHE"), "D1": level("LEVEL1_DCACHE")}
        for n in (2, 3, 4):
            g = level(f"LEVEL{n}_CACHE")
            if g and usable(g):
                found["LL"] = g
    return [f"--{k}={','.join(str(x) for x in found[k])}" for k in ("I1", "D1", "LL")
            if found.get(k) and usable(found[k])]


def usable(geometry):
    """A cache valgrind can simulate: size, associativity and line all known, and a number
    of sets that is a power of two."""
    size, assoc, line = geometry
    if size <= 0 or assoc <= 0 or line <= 0 or size % (assoc * line):
        return False
    sets = size // (assoc * line)
    return sets & (sets - 1) == 0


def estimated_cycles(t):
    """Cycles a run would take on a machine with callgrind's simulated caches, from the
    cache simulation's counts, or None without them: every memory access (instruction fetch,
    data read or write) that hits the first level costs 1, one served by the last level 5,
    one that goes to memory 35 (Itamar Turner-Trauring's weights, which `iai` and
    `cachegrind`-based CI benchmarks use). A model, not this machine's clock: it makes the
    tracer's cache misses, and those it causes the interpreter, count in a figure that does
    not move from run to run, where CPU time here moves by 10-20 %. Its added cycles per
    import match the clock's; its untraced cycles do not (the interpreter runs at about two
    instructions per cycle, and the model charges every access at least one), so its ratios
    understate the clock's."""
    if "D1mr" not in t:
        return None
    ram = t.get("ILmr", 0) + t.get("DLmr", 0) + t.get("DLmw", 0)
    l1_misses = t.get("I1mr", 0) + t.get("D1mr", 0) + t.get("D1mw", 0)
    accesses = t.get("Ir", 0) + t.get("Dr", 0) + t.get("Dw", 0)
    return (accesses - l1_misses) + 5 * (l1_misses - ram) + 35 * ram


def window_imports(workload):
    """The imports each callgrind window of a workload's windowed driver holds, in order."""
    base = split_workload(workload)[0]
    if base == "tree":
        return [TREE_WINDOW_IMPORTS]
    n = int(base[len("long"):])
    return [WINDOW_IMPORTS] * len([m for m in LONG_LENGTHS if m <= n])


def window_labels(workload):
    base = split_workload(workload)[0]
    if base == "tree":
        return ["imports of one of the 10 packages"]
    n = int(base[len("long"):])
    return [f"imports {m - WINDOW_IMPORTS:,}-{m - 1:,}" for m in LONG_LENGTHS if m <= n]


def run_callgrind_windows(workload, src, suite, lib, scratch, log, cache_sim=True):
    """Counts in each window of the workload's windowed driver, untraced and traced:
    {contender: [callgrind totals per window]} (Ir, and with the cache simulation the
    misses), and the seconds each run took."""
    out, secs = {}, {}
    # imptrace, and native stacks when they are among the contenders (libunwind's; the
    # backtrace() variant is only a comparison of unwinders).
    for c in ["untraced"] + [c for c in CONTENDERS if c in ("imptrace", "imptrace+native")]:
        tracedir = os.path.join(scratch, f"trace-cgw-{workload}-{c}")
        argv, env, cwd = command(workload, c, src, suite, lib, tracedir, window=True)
        env["PYTHONHASHSEED"] = "0"
        cg = os.path.join(scratch, f"callgrind.{workload}.window.{c}.out")
        t0 = time.perf_counter()
        # The cache simulation runs only while a window is open: the caches a window
        # starts with are those the previous one left (the same for both contenders).
        rc = subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                             f"--cache-sim={'yes' if cache_sim else 'no'}"]
                            + (simulated_caches() if cache_sim else [])
                            + [f"--callgrind-out-file={cg}"] + argv,
                            env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        secs[c] = time.perf_counter() - t0
        shutil.rmtree(tracedir, ignore_errors=True)
        n = len(window_imports(workload))
        dumps = [f"{cg}.{k}" for k in range(1, n + 1)]
        if rc != 0 or not all(os.path.exists(d) for d in dumps):
            log(f"  callgrind windows {workload} {c}: failed (status {rc})")
            return None
        out[c] = [callgrind_totals(d) for d in dumps]
        if c != "untraced" and shutil.which("callgrind_annotate"):
            # The budgeted whole-sys.modules walk (3.8-3.11, walk_budget.h) is paced by
            # the clock to 1/256 of the run's time; under valgrind its tight loop runs
            # several times faster than the interpreter around it, so in counts it weighs
            # more than it does in time: counted apart, to be read apart.
            for d, t in zip(dumps, out[c]):
                rows = parse_annotate(subprocess.run(
                    ["callgrind_annotate", "--show=Ir", "--inclusive=yes", "--threshold=100", d],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True).stdout)
                t["walk_Ir"] = sum(v for (fn, _), v in rows.items() if fn == "shadow_full_sync")
                t["own"] = object_totals(d, "libimptrace")
        log(f"  callgrind windows {workload} {c}: {', '.join(format(x['Ir'], ',') for x in out[c])} "
            f"instructions in {secs[c]:.0f}s")
    return out, secs


def run_callgrind(workload, src, suite, lib, viewer, scratch, imports, log, profile=True, quick=False):
    """`quick`: instructions only (no cache simulation, no inert run), about half the time:
    what the long importer's growth check needs on six interpreters."""
    if not shutil.which("valgrind"):
        return None
    out = {}
    notes = []
    # inert: the library preloaded and disabled. What it adds is the preload's own cost,
    # which every contender that preloads pays: the dynamic linker searches the preloaded
    # library first for every symbol of every library loaded later (torch's are many).
    for c in (("untraced", "imptrace") if quick else ("untraced", "inert", "imptrace")):
        tracedir = os.path.join(scratch, f"trace-cg-{workload}-{c}")
        argv, env, cwd = command(workload, c, src, suite, lib, tracedir)
        # Fixed str hashes: with randomised ones, dict probe lengths (and so the counts)
        # move by about 1 % from run to run.
        env["PYTHONHASHSEED"] = "0"
        cg = os.path.join(scratch, f"callgrind.{workload}.{c}.out")
        t0 = time.perf_counter()
        # The cache simulation: on the CI machine the tracer's added CPU time is about
        # twice what its instructions explain, and first-level instruction cache misses
        # (its code evicting the interpreter's between imports, and back) are the rest.
        rc = subprocess.run(["valgrind", "--tool=callgrind", f"--cache-sim={'no' if quick else 'yes'}"]
                            + ([] if quick else simulated_caches())
                            + [f"--callgrind-out-file={cg}"] + argv,
                            env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL).returncode
        secs = time.perf_counter() - t0
        if c == "imptrace" and rc != 0 and os.path.isdir(tracedir):
            # Stopped early: per-import figures are over the imports it got to.
            reached = count_imports(viewer, tracedir)[0]
            notes.append(f"valgrind stopped {workload} after {reached:,} of its {imports:,} imports; "
                         f"the per-import columns divide by {reached:,}")
            imports = reached
        shutil.rmtree(tracedir, ignore_errors=True)
        if rc != 0:
            # Valgrind cannot run some instructions (torch's libraries may execute RDTSCP,
            # which it turns into SIGILL); callgrind still writes what it counted up to there.
            if not os.path.exists(cg):
                log(f"  callgrind {workload} {c}: failed (status {rc}), no counts")
                return None
            notes.append(f"{workload}/{c} ended with status {rc} under valgrind (an instruction "
                         f"valgrind cannot run); counts are up to that point")
        totals = callgrind_totals(cg)
        out[c] = (totals["Ir"], secs, cg, totals)
        log(f"  callgrind {workload} {c}: {out[c][0]:,} instructions, "
            f"{totals.get('I1mr', 0):,} I1 misses in {secs:.1f}s"
            + (f" (status {rc})" if rc else ""))
    top = []
    if profile and shutil.which("callgrind_annotate"):
        def annotate(path, inclusive):
            return parse_annotate(subprocess.run(
                ["callgrind_annotate", "--show=Ir", f"--inclusive={'yes' if inclusive else 'no'}",
                 "--threshold=100", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                universal_newlines=True).stdout)
        incl = annotate(out["imptrace"][2], True)
        self_imp = annotate(out["imptrace"][2], False)
        self_un = annotate(out["untraced"][2], False)
        top = (incl, self_imp, self_un)
    return out, top, imports, notes


def window_report(cgw):
    L = ["## Cost per import in callgrind windows (the same imports untraced and traced)", ""]
    L.append("| workload | interpreter | window | imports | untraced Ir/import | +instructions/import "
             "| instructions ratio | untraced est. cycles/import | +est. cycles/import | est. cycles ratio "
             "| +L1 misses/import | +LL misses/import | of the added: sys.modules walk Ir/import "
             "| instructions ratio without the walk | of the added: the tracer's own Ir/import "
             "| the tracer's own est. cycles/import | callgrind wall s |")
    L.append("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [(w, c, counts, secs) for w, (counts, secs) in cgw.items() for c in counts if c != "untraced"]
    for w, c, counts, secs in rows:
        base, py = split_workload(w)
        label_c = "" if c == "imptrace" else f", {c}"
        for label, n, un, im in zip(window_labels(w), window_imports(w), counts["untraced"], counts[c]):
            ecu, eci = estimated_cycles(un), estimated_cycles(im)

            def added(*events):
                if "D1mr" not in un:
                    return ""
                return f"{(sum(im.get(e, 0) for e in events) - sum(un.get(e, 0) for e in events)) / n:+,.0f}"
            cycles = f"{ecu / n:,.0f} | {(eci - ecu) / n:+,.0f} | {eci / ecu:.3f}" if ecu else " | | "
            walk = f"{im['walk_Ir'] / n:,.0f}" if "walk_Ir" in im else ""
            without = f"{(im['Ir'] - im['walk_Ir']) / un['Ir']:.3f}" if "walk_Ir" in im else ""
            own = im.get("own") or {}
            own_ir = f"{own['Ir'] / n:,.0f}" if "Ir" in own else ""
            own_cycles = f"{estimated_cycles(own) / n:,.0f}" if "D1mr" in own else ""
            L.append(f"| {base}{label_c} | {py} | {label} | {n:,} | {un['Ir'] / n:,.0f} | {(im['Ir'] - un['Ir']) / n:+,.0f} "
                     f"| {im['Ir'] / un['Ir']:.3f} | {cycles} | {added('I1mr', 'D1mr', 'D1mw')} "
                     f"| {added('ILmr', 'DLmr', 'DLmw')} | {walk} | {without} | {own_ir} | {own_cycles} "
                     f"| {secs['untraced']:.0f} + {secs[c]:.0f} |")
    L.append("")
    L.append("A window counts only what runs between its open and close (valgrind "
             "`--instr-atstart=no`, callgrind's client requests from a small library the driver loads "
             "with ctypes); `PYTHONHASHSEED=0`. \"est. cycles\" weighs the cache simulation's counts "
             f"(caches simulated: {' '.join(simulated_caches()) or 'as valgrind guesses them'}, "
             "this machine's first level and last level from sysfs): 1 per memory access served by the "
             "first level, 5 per one served by the last level, 35 per one that goes to memory "
             "(instruction fetches included). It counts the cache misses the tracer causes, its own and "
             "the interpreter's around it, and gives the same figure at every run; it charges every "
             "access at least one cycle, so it overstates an interpreter that runs at two instructions "
             "per cycle and its ratios understate the clock's: read it for the added cycles per "
             "import. The whole-`sys.modules` walk of 3.11 (and of 3.8-3.10 "
             "after a change no hook saw) runs on a time budget, so a window holds a varying number "
             "of walks: its figure moves by up to a few thousand instructions per import from run "
             "to run there. \"The tracer's own\" is the self cost of libimptrace.so's functions "
             "(the rest of the added is the interpreter's and the C library's work on the tracer's "
             "behalf, and the interpreter's own misses: the interpreter's part also moves with the "
             "memory layout, bench/README.md).")
    L.append("")
    return L

def short_fn(fn):
    """'???:imptrace::(anonymous namespace)::describe(imptrace::PyObject*)'2 [/x/lib.so]'
    -> ('describe', 'libimptrace.so')"""
    m = re.match(r"(.*?)(?: \[([^\]]*)\])?$", fn)
    name, obj = m.group(1), os.path.basename(m.group(2) or "")
    name = name.split(":", 1)[1] if ":" in name and not name.startswith("imptrace") else name
    name = re.sub(r"'\d+$", "", name)
    name = name.replace("imptrace::(anonymous namespace)::", "").replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in name:  # drop argument lists
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    name = "".join(out).replace(".lto_priv.0", "").replace(" [clone .part.0]", "").strip()
    return name, obj


CACHE_EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def object_totals(path, obj):
    """{event: count} of the functions of one object (a path containing `obj`), self costs:
    what the tracer's own code did in a window, apart from what it made the interpreter
    do. Empty without callgrind_annotate or the cache simulation's events."""
    txt = subprocess.run(["callgrind_annotate", "--show=" + ",".join(CACHE_EVENTS), "--inclusive=no",
                          "--threshold=100", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         universal_newlines=True).stdout
    total = {}
    for line in txt.splitlines():
        if obj not in line or "PROGRAM TOTALS" in line:
            continue
        fields = re.sub(r"\([^)]*\)", " ", line).split()
        nums = []
        for f in fields:
            if not re.fullmatch(r"[\d,]+|\.", f):
                break
            nums.append(0 if f == "." else int(f.replace(",", "")))
        if len(nums) == len(CACHE_EVENTS):
            for e, v in zip(CACHE_EVENTS, nums):
                total[e] = total.get(e, 0) + v
    return total


def parse_annotate(txt):
    """{(function, object): Ir}, recursion levels (name'2) folded into the largest."""
    rows = {}
    for line in txt.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if not m or ":" not in m.group(2) or "PROGRAM TOTALS" in line:
            continue
        key = short_fn(m.group(2).strip())
        rows[key] = max(rows.get(key, 0), int(m.group(1).replace(",", "")))
    return rows


# ----------------------------------------------------------------------------------------
# Viewer speed: two runs of 100,000 imports each, written by diff_bench_gen
# (tests/unit/diff_bench_gen.cpp, through the tests' TraceBuilder and the field numbers
# generated from proto/imptrace.proto): 1,000 packages of n/1,000 modules, an import-system
# sys.modules insertion and a parent binding per import; the failing run also has the
# npugraph_ex-like replacement and one more import, so that diff has findings.


def bench_viewer(viewer, gen, scratch, n, rounds, log):
    d = os.path.join(scratch, "viewer")
    t0 = time.perf_counter()
    subprocess.run([gen, d, str(n)], check=True, stdout=subprocess.DEVNULL)
    good, bad = os.path.join(d, "good"), os.path.join(d, "bad")
    size = os.path.getsize(os.path.join(good, "run.pb"))
    log(f"  generated 2 runs of {n:,} imports in {time.perf_counter() - t0:.1f}s ({size:,} bytes each)")
    cmds = [
        ("show", [viewer, "show", good]),
        ("tree", [viewer, "tree", good]),
        ("why", [viewer, "why", good, "pkg3.mod5"]),
        ("why --format json", [viewer, "why", good, "pkg3", "--format", "json"]),
        ("diff", [viewer, "diff", good, bad]),
        ("export --format json", [viewer, "export", good, "--format", "json"]),
    ]
    rows = []
    for label, argv in cmds:
        walls, cpus, rss = [], [], []
        for _ in range(rounds):
            rc, wall, user, sys_, kib, _faults, err = spawn_measured(argv)
            walls.append(wall)
            cpus.append(user + sys_)
            rss.append(kib / 1024)
            if rc not in (0, 1) or (rc == 1 and label != "diff"):
                raise SystemExit(f"viewer failed (exit {rc}): {' '.join(argv)}\n{err[-2000:]}")
        rows.append((label, med(walls), med(cpus), max(rss)))
        log(f"  viewer {label:22s} wall {med(walls):6.3f}s cpu {med(cpus):6.3f}s {max(rss):7.1f}MiB")
    return rows, size


# ----------------------------------------------------------------------------------------
# Report


def fingerprint(paths):
    import hashlib
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def machine_info():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return model, os.cpu_count(), platform.platform()


def versions(viewer):
    py = subprocess.run([PY, "-c", "import sys; print(sys.version.split()[0])"],
                        stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    out = {"python": py}
    for mod in ("torch", "pytest"):
        v = subprocess.run([PY, "-c", f"import {mod}; print({mod}.__version__)"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           universal_newlines=True).stdout.strip()
        out[mod] = v or "absent"
    try:
        out["imptrace"] = subprocess.run([viewer, "--version"],
                                         stdout=subprocess.PIPE, universal_newlines=True).stdout.strip()
    except OSError:
        out["imptrace"] = "?"
    try:
        out["commit"] = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       universal_newlines=True).stdout.strip()
    except OSError:
        out["commit"] = "?"
    return out


WORKLOAD_TITLES = {
    "tree": "5,000-module tree (`import bt_root`, bytecode cached)",
    "torch": "`import torch` (Debian python3-torch)",
    "pytest": "`pytest --collect-only -q` of 2,000 tests (200 files x 10)",
    "storm": "import storm: 8 threads x 300-module package",
    "long5000": "one importer file of 5,000 lines `import lm.mI` (5,000 top-level imports)",
    "long20000": "one importer file of 20,000 lines `import lm.mI` (20,000 top-level imports)",
    "scipy": "`import scipy, sympy` (Debian python3-scipy, python3-sympy)",
    "realpytest": f"`pytest --collect-only -q` of a real suite ({REAL_SUITE})",
    # hotgetattr, hotproxy: set in main (their titles name --hot-reads)
}


def workload_title(w):
    base, py = split_workload(w)
    return WORKLOAD_TITLES[base] + ("" if py == PY else f", on {py}")


def report(args, cmdline, per_workload, cg, viewer_rows, viewer_bytes, viewer_n):
    model, ncpu, plat = machine_info()
    v = versions(os.path.join(args.build, "imptrace"))
    L = []
    L.append(f"# imptrace benchmark — {datetime.date.today().isoformat()}")
    L.append("")
    L.append(f"- machine: {ncpu} CPUs, {model}; {plat}")
    L.append(f"- interpreter: {PY} {v['python']}; torch {v['torch']}; pytest {v['pytest']}")
    L.append(f"- imptrace: {v['imptrace']} (checkout at commit {args.commit_at_start} when the run "
             f"started), binaries from `{args.build}` "
             f"(sha256 {args.fingerprint})")
    if args.fingerprint_changed:
        L.append("- **WARNING: libimptrace.so or imptrace changed during the run; figures mix "
                 "builds. Benchmark a private build (`--build`).**")
    L.append(f"- command: `{cmdline}`")
    L.append(f"- procedure: contenders alternate in the order {', '.join(CONTENDERS)}, each round "
             f"starting one contender later than the round before; "
             f"one warm-up round discarded; "
             f"medians over the measured rounds; ratio = median / untraced median; "
             f"\"paired\" = median of per-round ratios; \"best ratio\" = fastest round / fastest "
             f"untraced round (interference on this VM only adds time; a pure-Python loop's CPU time "
             f"moves by 10-20 % from run to run); \"+minor faults\" = pages the kernel made "
             f"for the process (ru_minflt: on a fault or made ahead by madvise), median, minus untraced")
    L.append("- control: \"inert\" is imptrace's command (same `LD_PRELOAD`, `IMPTRACE_OUTPUT`) with "
             "`IMPTRACE_DISABLE=1`: the library loads and does nothing, writes no trace. Its "
             "ratio to untraced is what \"no added cost\" measures as on this machine in this run "
             "(noise, position in the round, and the cost of the preload itself)")
    L.append(f"- intervals: `x [lo, hi]` is a 95 % percentile bootstrap interval ({BOOT_RESAMPLES} "
             f"resamples of the rounds, each round's (contender, untraced) pair kept together, "
             f"fixed seed per workload and contender, so the same measurements give the same "
             f"interval); \"+µs/import (CPU, paired)\" = median of per-round CPU differences / "
             f"imports. With few rounds the interval is coarse (it moves between observed rounds)")
    L.append("")
    for w, (rows, imports, nproc, rounds, comp) in per_workload.items():
        L.append(f"## {workload_title(w)} — {rounds} rounds, {imports:,} imports traced"
                 + (f" in {nproc} processes" if nproc and nproc > 1 else ""))
        L.append("")
        L.append("| contender | wall s | wall ratio | wall paired | CPU s | CPU ratio "
                 "| CPU paired [95 % CI] | CPU best ratio | +µs/import (wall) | +µs/import (CPU) "
                 "| +µs/import (CPU, paired) [95 % CI] | peak RSS MiB | +RSS MiB | +minor faults "
                 "| trace B/import |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            bpi = f"{r['bytes_per_import']:.0f}" if r["bytes_per_import"] is not None else ""
            if r["contender"] == "untraced":
                L.append(f"| untraced | {r['wall']:.3f} | 1.000 | 1.000 | {r['cpu']:.3f} | 1.000 | 1.000 "
                         f"| 1.000 | | | | {r['rss']:.1f} | | | |")
            else:
                cpu_paired = fmt_ci(r["cpu_paired"], r["ci"].get("cpu_paired"))
                us_paired = fmt_ci(r["us_cpu_paired"], r["ci"].get("us_cpu_paired"), "{:+.2f}", "{:+.1f}")
                L.append(f"| {r['contender']} | {r['wall']:.3f} | {r['wall_ratio']:.3f} | "
                         f"{r['wall_paired']:.3f} | {r['cpu']:.3f} | {r['cpu_ratio']:.3f} | "
                         f"{cpu_paired} | {r['cpu_best_ratio']:.3f} | {r['us_wall']:+.2f} | {r['us_cpu']:+.2f} | {us_paired} | "
                         f"{r['rss']:.1f} | {r['rss_added']:+.1f} | {r['minflt_added']:+.0f} | {bpi} |")
        L.append("")
        for r in rows:
            if r["stray_trace_bytes"]:
                L.append(f"**Note: {r['contender']} wrote {r['stray_trace_bytes']:,} bytes of trace "
                         f"in a round; it should write none.**")
                L.append("")
        if comp:
            total = sum(b for _, b in comp.values())
            parts = ", ".join(f"{k} {n:,} x {b / n:.0f} B = {b / imports:.0f} B/import"
                              for k, (n, b) in sorted(comp.items(), key=lambda kv: -kv[1][1]))
            L.append(f"Trace composition (one run, {total:,} bytes): {parts}.")
            L.append("")
    if cg:
        L.append("## Instruction counts (callgrind)")
        L.append("")
        L.append("| workload (imptrace; inert where named) | untraced | traced | ratio | +instructions/import "
                 "| +I1 misses/import (ratio) | +D1 misses/import (ratio) | +est. cycles/import (ratio) "
                 "| callgrind wall s |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for w, (counts, _, imports, _) in cg.items():
            for c in ("imptrace", "inert"):
                if c not in counts:
                    continue
                un, im = counts["untraced"][0], counts[c][0]
                per = f"{(im - un) / imports:,.0f}" if imports else "?"

                def misses(*events):
                    a = sum(counts["untraced"][3].get(e, 0) for e in events)
                    b = sum(counts[c][3].get(e, 0) for e in events)
                    if not a or not imports:
                        return ""
                    return f"{(b - a) / imports:,.0f} ({b / a:.3f})"
                label = w if c == "imptrace" else f"{w}, {c}"
                ecu, eci = estimated_cycles(counts["untraced"][3]), estimated_cycles(counts[c][3])
                cycles = f"{(eci - ecu) / imports:,.0f} ({eci / ecu:.3f})" if ecu and imports else ""
                L.append(f"| {label} | {un:,} | {im:,} | {im / un:.3f} | {per} | {misses('I1mr')} | "
                         f"{misses('D1mr', 'D1mw')} | {cycles} | "
                         f"{counts['untraced'][1]:.1f} + {counts[c][1]:.1f} |")
        L.append("")
        L.append("Callgrind counts user-space instructions only: the kernel side of the "
                 "tracer's system calls (one fallocate per reserved chunk of 16-256 KiB of "
                 "trace and one madvise per 64 KiB written, none per import, plus the page "
                 "faults left) shows in CPU (sys) time above, not here. The miss columns come "
                 "from callgrind's cache simulation (this machine's cache sizes): an L1 "
                 "instruction miss costs about a dozen cycles when L2 has the line. The estimated "
                 "cycles weigh its counts as the windows' table explains (1, 5, 35).")
        L.append("")
        for w, (_, _, _, notes) in cg.items():
            for n in notes:
                L.append(f"Note: {n}.")
                L.append("")
    if cg.get("tree"):
        counts, top, imports, _ = cg["tree"]
        un, im = counts["untraced"][0], counts["imptrace"][0]
        if top:
            incl, self_imp, self_un = top
            L.append("Where the added instructions go: self cost (instructions executed in the "
                     "function itself) in the traced run minus the untraced run, largest first. "
                     "CPython functions here run on the tracer's behalf.")
            L.append("")
            L.append("| +Ir (self) | % of added | per import | function | object |")
            L.append("|---:|---:|---:|---|---|")
            added = im - un
            delta = sorted(((v - self_un.get(k, 0), k) for k, v in self_imp.items()), reverse=True)
            for d, (fn, obj) in delta[:15]:
                L.append(f"| {d:,} | {100 * d / added:.1f} | {d / imports:,.0f} | `{fn}` | {obj} |")
            L.append("")
            L.append("Tracer functions by inclusive cost (left out: the hooks that run CPython's own "
                     "work inside them - the import hooks, whose inclusive cost is the whole import, "
                     "and the wrapped dict store, module deallocator and exec):")
            L.append("")
            L.append("| inclusive Ir | % of added | per import | function |")
            L.append("|---:|---:|---:|---|")
            shown = 0
            for (fn, obj), ir in sorted(incl.items(), key=lambda kv: -kv[1]):
                if obj != "libimptrace.so" or fn in WRAPPING_HOOKS:
                    continue
                L.append(f"| {ir:,} | {100 * ir / added:.1f} | {ir / imports:,.0f} | `{fn}` |")
                shown += 1
                if shown >= 12:
                    break
            L.append("")
    if viewer_rows:
        L.append(f"## Viewer on generated traces of {viewer_n:,} imports "
                 f"({viewer_bytes / viewer_n:.0f} B/import, {viewer_bytes / 2**20:.1f} MiB); "
                 f"target < 1 s and < 300 MiB each")
        L.append("")
        L.append("| command | wall s (median) | CPU s (median) | peak RSS MiB (max) | within target |")
        L.append("|---|---:|---:|---:|---|")
        for label, w, cpu, rss in viewer_rows:
            ok = "yes" if (w < 1.0 and rss < 300) else "NO"
            if label.startswith("export") or label.startswith("why --format"):
                ok += " (informational)"
            L.append(f"| `{label}` | {w:.3f} | {cpu:.3f} | {rss:.1f} | {ok} |")
        L.append("")
    if per_workload and any(w in per_workload for w in ("tree", "torch")):
        L.append("## Targets (issue 6), imptrace default settings")
        L.append("")
        L.append("Timing targets are judged on the 95 % bootstrap interval of the paired figure "
                 "(median of per-round figures): met when its upper bound is within the target, "
                 "NOT met when its lower bound is above it, not resolved when it straddles it. "
                 "The ratio of medians is shown beside it, as before. Instructions, bytes and RSS "
                 "are single figures (the first two barely move from run to run).")
        L.append("")
        L.append("| workload | wall ratio ≤ 1.02 | CPU ratio ≤ 1.02 | instructions ≤ 1.02 "
                 "| ≤ 1.5 µs/import (wall) | ≤ 1.5 µs/import (CPU) | ≤ 120 B/import | ≤ 4 MiB RSS added |")
        L.append("|---|---|---|---|---|---|---|---|")
        for w in ("tree", "torch"):
            if w not in per_workload:
                continue
            r = [x for x in per_workload[w][0] if x["contender"] == "imptrace"][0]
            ci = r["ci"]

            def yn(ok, shown):
                return f"{'yes' if ok else 'NO'} ({shown})"
            if cg.get(w):
                counts, _, reached, _ = cg[w]
                ir = counts["imptrace"][0] / counts["untraced"][0]
                partial = (f"; valgrind stopped after {reached:,} of {per_workload[w][1]:,} imports"
                           if reached < per_workload[w][1] else "")
                ir_cell = yn(ir <= 1.02, f"{ir:.3f}{partial}")
            else:
                ir_cell = "not measured"
            cells = [verdict(ci["wall_paired"], 1.02,
                             f"paired {fmt_ci(r['wall_paired'], ci['wall_paired'])}; "
                             f"ratio {r['wall_ratio']:.3f}"),
                     verdict(ci["cpu_paired"], 1.02,
                             f"paired {fmt_ci(r['cpu_paired'], ci['cpu_paired'])}; "
                             f"ratio {r['cpu_ratio']:.3f}"),
                     ir_cell,
                     verdict(ci["us_wall_paired"], 1.5,
                             f"paired {fmt_ci(r['us_wall_paired'], ci['us_wall_paired'], '{:+.2f}', '{:+.1f}')}; "
                             f"of medians {r['us_wall']:+.2f}"),
                     verdict(ci["us_cpu_paired"], 1.5,
                             f"paired {fmt_ci(r['us_cpu_paired'], ci['us_cpu_paired'], '{:+.2f}', '{:+.1f}')}; "
                             f"of medians {r['us_cpu']:+.2f}"),
                     yn(r["bytes_per_import"] <= 120, f"{r['bytes_per_import']:.0f}"),
                     yn(r["rss_added"] <= 4, f"{r['rss_added']:+.1f}")]
            L.append(f"| {w} | " + " | ".join(cells) + " |")
        L.append("")
        for w in ("tree", "torch"):
            if w not in per_workload:
                continue
            r = {x["contender"]: x for x in per_workload[w][0]}
            im, inert = r["imptrace"], r["inert"]
            L.append(f"- {w}: CPU ratio ≤ 1.02 "
                     f"{verdict(im['ci']['cpu_paired'], 1.02, 'imptrace paired ' + fmt_ci(im['cpu_paired'], im['ci']['cpu_paired']))}; "
                     f"the inert control (library loaded, disabled) measured "
                     f"{fmt_ci(inert['cpu_paired'], inert['ci']['cpu_paired'])} in the same rounds.")
        L.append("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=7, help="measured rounds per workload (default 7)")
    ap.add_argument("--torch-rounds", type=int, default=None, help="rounds for import torch (default: --rounds)")
    ap.add_argument("--workloads", default="tree,torch,pytest,storm,hotgetattr,hotproxy",
                    help="comma-separated subset of tree,torch,pytest,storm,hotgetattr,hotproxy,long5000,"
                         "long20000,scipy,realpytest ('' for none); NAME@3.10 runs NAME on pyenv's 3.10 (also 3.8-3.13; "
                         "@debian: /usr/bin/python3, the default), e.g. long20000@3.10,long20000@3.12")
    ap.add_argument("--callgrind-workloads", default="tree,torch",
                    help="workloads --callgrind counts (default tree,torch; same names as --workloads)")
    ap.add_argument("--callgrind-quick", action="store_true",
                    help="with --callgrind: instructions only, no cache simulation and no inert run")
    ap.add_argument("--callgrind-windows", action="store_true",
                    help="instructions of the same imports untraced and traced, counted in windows of the "
                         "run (tree: one package's imports; longN: the last 1,000 imports of each length up "
                         "to N), the rest of the run uninstrumented; for --callgrind-workloads tree and long*")
    ap.add_argument("--hot-reads", type=int, default=HOT_READS,
                    help=f"reads in each hot loop (default {HOT_READS:,}); more makes each process "
                         "longer, so start-up and run-to-run noise weigh less against the loop")
    ap.add_argument("--contenders", default=",".join(CONTENDERS),
                    help="comma-separated subset of " + ",".join(CONTENDERS) + " (untraced, inert and "
                         "imptrace always run); fewer contenders put each round's runs closer together "
                         "in time, so more rounds fit and the pairs share more of the machine's state")
    ap.add_argument("--spawns", type=int, default=0,
                    help="also time N spawns of /bin/true with libimptrace.so preloaded against an "
                         "empty preloaded library (the inert library's cost outside Python; try 500)")
    ap.add_argument("--callgrind", action="store_true",
                    help="also count instructions under valgrind --tool=callgrind (tree and torch; ~3 min)")
    ap.add_argument("--no-viewer", action="store_true", help="skip the viewer benchmark")
    ap.add_argument("--viewer-imports", type=int, default=100000)
    ap.add_argument("--viewer-rounds", type=int, default=3)
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="directory holding libimptrace.so and imptrace (default: build/)")
    ap.add_argument("--workdir", default=None,
                    help="scratch directory (default: a fresh temporary one, removed afterwards)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    ap.add_argument("--output", default=None,
                    help="results file (default bench/results-<date>.md; '-' for stdout only)")
    args = ap.parse_args()
    globals()["HOT_READS"] = args.hot_reads  # read by generate() and the titles below
    chosen = {c for c in args.contenders.split(",") if c} | {"untraced", "inert", "imptrace"}
    if chosen - set(CONTENDERS):
        raise SystemExit(f"bench: unknown contender(s) {', '.join(sorted(chosen - set(CONTENDERS)))}")
    globals()["CONTENDERS"] = [c for c in CONTENDERS if c in chosen]  # in the canonical order
    for name, what in (("hotgetattr", "a PEP 562 module `__getattr__` attribute"),
                       ("hotproxy", "an attribute through a `ModuleType` subclass proxy")):
        WORKLOAD_TITLES[name] = f"hot loop: {HOT_READS:,} reads of {what}"

    lib = os.path.abspath(os.path.join(args.build, "libimptrace.so"))
    viewer = os.path.abspath(os.path.join(args.build, "imptrace"))
    generator = os.path.abspath(os.path.join(args.build, "tests", "unit", "diff_bench_gen"))
    # Checked before any workload runs, so that a missing binary cannot end a long run at
    # its last section.
    for p in (lib, viewer) + (() if args.no_viewer else (generator,)):
        if not os.path.exists(p):
            raise SystemExit(f"bench: {p} missing; build first: cmake -S . -B build "
                             "-DCMAKE_BUILD_TYPE=Release && cmake --build build -j2")
    cmdline = " ".join(["bench/run.py"] + sys.argv[1:])
    args.fingerprint = fingerprint([lib, viewer])
    args.fingerprint_changed = False
    args.commit_at_start = versions(viewer)["commit"]
    work = args.workdir or tempfile.mkdtemp(prefix="imptrace-bench-")
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    workloads = [w for w in args.workloads.split(",") if w]
    for w in workloads:
        if w.partition("@")[0] not in WORKLOAD_TITLES:
            raise SystemExit(f"bench: unknown workload {w!r}")
        split_workload(w)  # the interpreter named exists
    try:
        log(f"bench: generating workloads in {work}")
        src, suite = generate(work, workloads + [w for w in args.callgrind_workloads.split(",") if w]
                              if args.callgrind or args.callgrind_windows else workloads,
                              windows=args.callgrind_windows)
        scratch = os.path.join(work, "scratch")
        os.makedirs(scratch)
        per = {}
        for w in workloads:
            rounds = args.torch_rounds if (w == "torch" and args.torch_rounds) else args.rounds
            log(f"bench: {w}, {rounds} rounds")
            res, imports, nproc, comp = bench_workload(w, rounds, src, suite, lib, viewer, scratch, log)
            per[w] = (summarize(w, res, imports), imports, nproc, rounds, comp)
        cgw = {}
        if args.callgrind_windows:
            for w in [w for w in args.callgrind_workloads.split(",") if w]:
                if split_workload(w)[0] != "tree" and not w.startswith("long"):
                    raise SystemExit(f"bench: --callgrind-windows: {w} has no windowed driver (tree, long*)")
                log(f"bench: callgrind windows on {w}")
                r = run_callgrind_windows(w, src, suite, lib, scratch, log)
                if r:
                    cgw[w] = r
        cg = {}
        if args.callgrind and not args.callgrind_windows:
            # The two workloads the overhead targets are about; the profile of where the
            # added instructions go is made for the tree (empty modules: all tracer).
            for w in [w for w in args.callgrind_workloads.split(",") if w]:
                log(f"bench: callgrind on {w}")
                if w in per:
                    n = per[w][1]
                else:
                    tracedir = os.path.join(scratch, f"trace-count-{w}")
                    argv, env, cwd = command(w, "imptrace", src, suite, lib, tracedir)
                    run_once(argv, env, cwd)
                    n = count_imports(viewer, tracedir)[0]
                r = run_callgrind(w, src, suite, lib, viewer, scratch, n, log,
                                  profile=(w == "tree" or w.startswith("long")), quick=args.callgrind_quick)
                if r is None:
                    log(f"bench: no instruction counts for {w}")
                    continue
                cg[w] = r
        vrows = vbytes = None
        if not args.no_viewer:
            log("bench: viewer")
            vrows, vbytes = bench_viewer(viewer, generator,
                                          scratch, args.viewer_imports, args.viewer_rounds, log)
        if fingerprint([lib, viewer]) != args.fingerprint:
            args.fingerprint_changed = True
            log("bench: WARNING: the binaries changed during the run")
        spawns = None
        if args.spawns:
            log(f"bench: {args.spawns} spawns of /bin/true, {args.rounds} rounds")
            spawns = bench_spawns(lib, scratch, args.spawns, args.rounds, log)
        text = report(args, cmdline, per, cg, vrows, vbytes, args.viewer_imports)
        if cgw:
            text += "\n" + "\n".join(window_report(cgw))
        if spawns:
            text += "\n" + "\n".join(spawn_report(spawns, args.spawns))
        print(text)
        out = args.output or os.path.join(HERE, f"results-{datetime.date.today().isoformat()}.md")
        if out != "-":
            with open(out, "w") as f:
                f.write(text + "\n")
            log(f"bench: written to {out}")
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
