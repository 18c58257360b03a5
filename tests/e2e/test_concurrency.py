"""Concurrency and processes.

- 16 threads released by a barrier import 16x8 generated modules (plus shared ones) at
  once, on 3.8 (shadow scans), 3.11 (Debian static and pyenv), 3.12 and 3.13 (dict
  watcher): every module recorded exactly once and ok, nesting stays per thread.
- fork while another thread is inside an import (its module body is blocked on an event
  the forking thread sets after fork), and 40 forks while 4 threads churn imports and
  sys.modules writes (so the tracer's lock is often held at fork time): no hang, each
  child gets its own complete file.
- multiprocessing with fork, spawn and forkserver: every process (parent, forkserver,
  workers) has one trace that decodes, and the workers' imports are in their traces.
- a chain of three os.execv'd interpreters (same pid for all): three files, never one
  overwritten, each with its own imports.
- pid reuse: a file already at the name the process will use (pre-created by the process
  itself before exec / right after fork) is never overwritten; a numbered sibling is used.
Every trace: protoc decodes it, the viewer reads it with no truncation warning.
"""
import os
import subprocess
import sys
import textwrap

import pytest

from e2e_util import LIB, export, protoc_decodes, run, traces

DEBIAN = "/usr/bin/python3"
PYENV = "/root/.pyenv/versions/%s/bin/python"
THREAD_PYS = [p for p in (PYENV % "3.8.18", PYENV % "3.11.7", PYENV % "3.12.1", PYENV % "3.13.0", DEBIAN)
              if os.path.exists(p)]


def ids(p):
    return p.replace("/root/.pyenv/versions/", "").replace("/bin/python", "").replace("/usr/bin/", "debian-")


def all_procs(outdir, expect_files=None):
    files = traces(outdir)
    if expect_files is not None:
        assert len(files) == expect_files, files
    for f in files:
        protoc_decodes(f)
    procs = export(outdir)["processes"]
    for p in procs:
        assert not p["truncated"], (p["trace_file"], p["warnings"])
    return procs


def names(proc):
    return [i["name"] for i in proc["imports"]]


def write_modules(root, prefix, n, body=""):
    root.mkdir(exist_ok=True)
    for i in range(n):
        (root / ("%s%d.py" % (prefix, i))).write_text(body + "VALUE = %d\n" % i)


@pytest.mark.parametrize("py", THREAD_PYS, ids=ids)
def test_sixteen_threads_import_at_once(py, tmp_path):
    mods = tmp_path / "mods"
    mods.mkdir()
    for t in range(16):
        pkg = mods / ("tpkg%d" % t)
        pkg.mkdir()
        (pkg / "__init__.py").write_text("import json\n")
        for i in range(8):
            (pkg / ("m%d.py" % i)).write_text("import time, csv\nfrom . import m%d as prev\n" % (i - 1) if i else "import decimal\n")
    code = textwrap.dedent("""
        import importlib, sys, threading
        sys.path.insert(0, %r)
        barrier = threading.Barrier(16)
        errors = []
        def work(t):
            barrier.wait()
            try:
                for i in range(8):
                    importlib.import_module("tpkg%%d.m%%d" %% (t, i))
                __import__("fractions"); __import__("statistics")
            except Exception as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=work, args=(t,)) for t in range(16)]
        [t.start() for t in ts]; [t.join() for t in ts]
        print("errors", errors)
    """ % str(mods))
    out = tmp_path / "out"
    r = run([py, "-c", code], traced=True, outdir=str(out), timeout=120)
    assert r.returncode == 0 and "errors []" in r.stdout, r.stdout + r.stderr
    (proc,) = all_procs(str(out), 1)
    imports = proc["imports"]
    ok = [i["name"] for i in imports if i["ok"]]
    for t in range(16):
        assert ok.count("tpkg%d" % t) == 1
        for i in range(8):
            assert ok.count("tpkg%d.m%d" % (t, i)) == 1, "tpkg%d.m%d" % (t, i)
    assert len({i["thread"] for i in imports if i["name"].startswith("tpkg")}) == 16
    for imp in imports:
        if imp["parent_import"] is not None:
            parent = imports[imp["parent_import"]]
            assert parent["thread"] == imp["thread"]
            assert parent["begin_ns"] <= imp["begin_ns"] <= imp["end_ns"] <= parent["end_ns"]


@pytest.mark.parametrize("py", [DEBIAN, PYENV % "3.12.1", PYENV % "3.8.18"], ids=ids)
def test_fork_while_other_thread_is_inside_import(py, tmp_path):
    mods = tmp_path / "mods"
    mods.mkdir()
    (mods / "slowmod.py").write_text(
        "import builtins, json\n"
        "builtins.INSIDE.set()\n"
        "builtins.FORKED.wait(30)\n"
        "import csv\n")
    code = textwrap.dedent("""
        import builtins, os, sys, threading, warnings
        warnings.simplefilter("ignore")
        sys.path.insert(0, %r)
        builtins.INSIDE = threading.Event(); builtins.FORKED = threading.Event()
        t = threading.Thread(target=lambda: __import__("slowmod"))
        t.start()
        assert builtins.INSIDE.wait(30)
        pid = os.fork()
        if pid == 0:
            import decimal, fractions
            os._exit(0)
        builtins.FORKED.set()
        t.join()
        _, status = os.waitpid(pid, 0)
        import statistics
        print(pid, status)
    """ % str(mods))
    out = tmp_path / "out"
    r = run([py, "-c", code], traced=True, outdir=str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    child_pid, status = map(int, r.stdout.split())
    assert status == 0
    procs = {p["pid"]: p for p in all_procs(str(out), 2)}
    child = procs.pop(child_pid)
    (parent,) = procs.values()
    assert {"decimal", "fractions"} <= set(names(child))
    assert "slowmod" not in names(child) and "csv" not in names(child)
    slow = [i for i in parent["imports"] if i["name"] == "slowmod"]
    assert len(slow) == 1 and slow[0]["ok"]
    assert {"csv", "statistics"} <= set(names(parent))
    assert child["forked_from_pid"] == parent["pid"]


def test_fork_storm_while_threads_churn(tmp_path):
    """Forks while 4 threads import and write sys.modules non-stop: the tracer's lock is
    held at some of the forks. Each child must start clean (no deadlock on that lock)."""
    code = textwrap.dedent("""
        import importlib, os, sys, threading, types, warnings
        warnings.simplefilter("ignore")
        stop = False
        def churn(k):
            n = 0
            while not stop:
                name = "churn_%d_%d" % (k, n % 50)
                sys.modules[name] = types.ModuleType(name)
                importlib.import_module(name)
                del sys.modules[name]
                try:
                    importlib.import_module("nope_%d" % k)
                except ImportError:
                    pass
                n += 1
        ts = [threading.Thread(target=churn, args=(k,)) for k in range(4)]
        [t.start() for t in ts]
        kids = []
        for i in range(40):
            pid = os.fork()
            if pid == 0:
                importlib.import_module("colorsys")
                os._exit(0)
            kids.append(pid)
        bad = [os.waitpid(p, 0)[1] for p in kids]
        stop = True
        [t.join() for t in ts]
        print(sorted(set(bad)), " ".join(map(str, kids)))
    """)
    out = tmp_path / "out"
    r = run([DEBIAN, "-c", code], traced=True, outdir=str(out), timeout=120)
    assert r.returncode == 0, r.stderr
    status, kids = r.stdout.split("]", 1)
    assert status == "[0"
    kids = set(map(int, kids.split()))
    procs = all_procs(str(out), 41)
    by_pid = {p["pid"]: p for p in procs}
    assert kids <= set(by_pid)
    for k in kids:
        assert "colorsys" in names(by_pid[k]), k


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("py", [DEBIAN, PYENV % "3.13.0"], ids=ids)
def test_multiprocessing(py, method, tmp_path):
    mods = tmp_path / "mods"
    write_modules(mods, "mpwork", 1, "import fractions\n")
    (mods / "mpmain.py").write_text(textwrap.dedent("""
        import multiprocessing as mp, os, sys
        def job(x):
            import mpwork0, colorsys
            return os.getpid()
        if __name__ == "__main__":
            ctx = mp.get_context(sys.argv[1])
            with ctx.Pool(2) as pool:
                pids = set(pool.map(job, range(8)))
            print(" ".join(map(str, sorted(pids))))
    """))
    out = tmp_path / "out"
    r = run([py, str(mods / "mpmain.py"), method], traced=True, outdir=str(out), timeout=120,
            cwd=str(mods))
    assert r.returncode == 0, r.stderr
    workers = set(map(int, r.stdout.split()))
    procs = all_procs(str(out))
    by_pid = {p["pid"]: p for p in procs}
    assert len(by_pid) == len(procs), "two traces for one pid"
    assert workers <= set(by_pid)
    for w in workers:
        assert "mpwork0" in names(by_pid[w]) and "colorsys" in names(by_pid[w])
        if method == "fork":
            assert by_pid[w]["forked_from_pid"]
    if method == "forkserver":
        assert any("forkserver" in " ".join(p["argv"]) for p in procs)


CHAIN = textwrap.dedent("""
    import os, sys
    depth = int(sys.argv[1])
    __import__(["json", "csv", "decimal"][depth])
    if depth < 2:
        sys.stdout.flush()
        os.execv(sys.executable, [sys.executable, sys.argv[0], str(depth + 1)])
    print(os.getpid())
""")


def run_chain(tmp_path):
    script = tmp_path / "chain.py"
    script.write_text(CHAIN)
    out = tmp_path / "out"
    r = run([DEBIAN, str(script), "0"], traced=True, outdir=str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    return int(r.stdout), out


def test_exec_chain_same_pid(tmp_path):
    """A -> os.execv B -> os.execv C: one pid, three processes, three files (the name
    clash is resolved with numbered siblings .1.pb, .2.pb, never an overwrite)."""
    pid, out = run_chain(tmp_path)
    files = traces(str(out))
    assert len(files) == 3, files
    for f in files:
        protoc_decodes(f)
    procs = export(*files)["processes"]
    assert {p["pid"] for p in procs} == {pid}
    by_depth = {p["argv"][-1]: p for p in procs}
    assert set(by_depth) == {"0", "1", "2"}
    for depth, mod in (("0", "json"), ("1", "csv"), ("2", "decimal")):
        assert mod in names(by_depth[depth]), depth
        assert not by_depth[depth]["truncated"]


def test_directory_includes_numbered_siblings(tmp_path):
    pid, out = run_chain(tmp_path)
    assert len(traces(str(out))) == 3
    procs = export(str(out))["processes"]
    assert sorted(p["argv"][-1] for p in procs) == ["0", "1", "2"]


def test_pid_reuse_never_overwrites(tmp_path):
    """The name a process will use (imptrace.<exe>.<pid>.pb) already exists: created by an
    untraced process that then execs into a traced one (same pid), and by a fork child
    for itself before its first import."""
    out = tmp_path / "out"
    out.mkdir()
    code = textwrap.dedent("""
        import os, sys
        out = sys.argv[1]
        exe = os.path.basename(os.path.realpath("/proc/self/exe"))
        def precreate(pid):
            with open(os.path.join(out, "imptrace.%s.%d.pb" % (exe, pid)), "x") as f:
                f.write("precious %d" % pid)
        if sys.argv[2] == "exec":
            precreate(os.getpid())
            env = dict(os.environ, LD_PRELOAD=sys.argv[3], IMPTRACE_OUTPUT=out + "/")
            os.execve(sys.executable, [sys.executable, "-c", "import json"], env)
        else:
            pid = os.fork()
            if pid == 0:
                precreate(os.getpid())
                import csv
                os._exit(0)
            os.waitpid(pid, 0)
            print(pid)
    """)
    r = run([DEBIAN, "-c", code, str(out), "exec", LIB], traced=False, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run([DEBIAN, "-c", code, str(out), "fork"], traced=True, outdir=str(out), timeout=60)
    assert r.returncode == 0, r.stderr
    precious = [f for f in os.listdir(str(out)) if f.endswith(".pb")]
    assert len(precious) >= 2
    for f in os.listdir(str(out)):
        data = open(os.path.join(str(out), f), "rb").read()
        if f.endswith(".pb") and data.startswith(b"precious"):
            assert data == b"precious " + f.split(".")[-2].encode()
    pb = sorted(f for f in os.listdir(str(out)) if not open(os.path.join(str(out), f), "rb").read().startswith(b"precious"))
    # exec'd json process, the fork parent and the fork child: all went to other names.
    assert len(pb) == 3, os.listdir(str(out))
    assert sum(1 for f in pb if f.endswith(".1.pb")) == 2, pb
    for f in pb:
        protoc_decodes(os.path.join(str(out), f))
