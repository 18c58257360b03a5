"""Proxy accesses in a hot loop (issue 21): repeats of the same successful access are
counted, not recorded, and every count reaches the trace (at exit, at os._exit, at an
import boundary before a kill); failed lookups and the first access after a change stay
whole records; why, show, export and diff show the counts."""
import json
import os
import signal
import sys

import pytest

from e2e_util import SRC, ident, interpreters, run, traces, viewer

sys.path.insert(0, os.path.join(SRC, "bench"))
from proxy_modules import forwarding_proxy_module, pep562_module  # noqa: E402  (bench/: the benchmark times the same shapes)

# A PEP 562 module, a ModuleType-subclass proxy forwarding to a module it holds, and a
# script reading through both in loops. Line numbers of the reads are fixed (checked).
PKGS = {
    "lazy562.py": pep562_module(42),
    "proxied.py": forwarding_proxy_module("proxied_real", 7),
}

SCRIPT = """\
import os, sys, types
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkgs"))
import lazy562, proxied
N = int(sys.argv[1])
END = sys.argv[2]
def reads(n):
    for _ in range(n):
        lazy562.value
    for _ in range(n):
        proxied.value
reads(N)
for _ in range(5):
    hasattr(lazy562, "missing")
if END == "change":
    other = types.ModuleType("proxied_real2")
    other.value = 8
    proxied._target = other
    reads(N)
    sys.modules["lazy562"] = types.ModuleType("lazy562_stand_in")
    sys.modules["lazy562"] = lazy562
    reads(N)
if END == "os_exit":
    sys.stdout.flush()
    os._exit(0)
if END == "kill":
    import json
    os.kill(os.getpid(), 9)
"""
LAZY_LINE, PROXY_LINE, MISSING_LINE = 8, 10, 13

PYS = [p for p in interpreters() if any(v in p for v in ("3.8", "3.10", "3.12", "3.13", "/usr/bin/"))]


def run_loops(tmp_path, py, n, end="exit", name="run"):
    work = tmp_path / ("w-" + name)
    (work / "pkgs").mkdir(parents=True)
    for f, text in PKGS.items():
        (work / "pkgs" / f).write_text(text)
    (work / "loops.py").write_text(SCRIPT)
    out = tmp_path / name
    r = run([py, "loops.py", str(n), end], traced=True, outdir=str(out), cwd=str(work))
    if end == "kill":
        assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    else:
        assert r.returncode == 0, r.stderr[-2000:]
    return str(out)


def accesses(path):
    r = viewer("export", path, "--format", "json")
    assert r.returncode == 0, r.stderr
    (proc,) = json.loads(r.stdout)["processes"]
    return proc["proxy_accesses"]


def at_line(acc, line, attribute):
    return [a for a in acc if a["where"]["line"] == line and a["attribute"] == attribute
            and a["where"]["file"] == "loops.py"]


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_repeats_are_counted_and_every_count_arrives(py, tmp_path):
    n = 20000
    acc = accesses(run_loops(tmp_path, py, n))
    for line in (LAZY_LINE, PROXY_LINE):
        recs = at_line(acc, line, "value")
        assert recs, "no access recorded at loops.py:%d" % line
        assert all(a["outcome"] == "ok" for a in recs)
        # A few whole records, the rest counted; nothing lost, nothing invented.
        assert 1 <= len(recs) <= 4, [(a["repeats"], a["time_ns"]) for a in recs]
        assert sum(1 + a["repeats"] for a in recs) == n
    # Every failed lookup is a whole record, never counted.
    missing = at_line(acc, MISSING_LINE, "missing")
    assert len(missing) == 5 and all(a["repeats"] == 0 and a["outcome"] != "ok" for a in missing)


@pytest.mark.parametrize("py", PYS[-1:], ids=ident)
def test_trace_does_not_grow_with_repeats(py, tmp_path):
    sizes = []
    for n in (2000, 200000):
        out = run_loops(tmp_path, py, n, name="n%d" % n)
        sizes.append(sum(os.path.getsize(t) for t in traces(out)))
    # The summaries of one more second of looping at most: tens of bytes, not megabytes.
    assert sizes[1] - sizes[0] < 400, sizes


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_first_access_after_a_change_is_recorded(py, tmp_path):
    n = 3000
    acc = accesses(run_loops(tmp_path, py, n, end="change"))
    # The same two reads, three times over: the first few of each recorded whole; then
    # the proxy's new forwarding target (another result) and the key replaced and put
    # back (every site) each make the next access a whole record again.
    proxy = at_line(acc, PROXY_LINE, "value")
    lazy = at_line(acc, LAZY_LINE, "value")
    assert sum(1 + a["repeats"] for a in proxy) == 3 * n
    assert sum(1 + a["repeats"] for a in lazy) == 3 * n
    assert len(proxy) == 5, [(a["repeats"], a["result"]) for a in proxy]
    assert len(lazy) == 4, [(a["repeats"], a["result"]) for a in lazy]


@pytest.mark.parametrize("py", PYS[-1:], ids=ident)
@pytest.mark.parametrize("end", ["os_exit", "kill"])
def test_counts_reach_the_trace_without_a_normal_exit(py, end, tmp_path):
    # os._exit: written with the end record. SIGKILL right after an import: the import
    # boundary wrote them.
    n = 5000
    acc = accesses(run_loops(tmp_path, py, n, end=end))
    for line in (LAZY_LINE, PROXY_LINE):
        assert sum(1 + a["repeats"] for a in at_line(acc, line, "value")) == n


def test_viewer_shows_counts_and_diff_says_only_how_often(tmp_path):
    py = PYS[-1]
    small = run_loops(tmp_path, py, 100, name="small")
    big = run_loops(tmp_path, py, 20000, name="big")
    show = viewer("show", big)
    assert show.returncode == 0
    assert "repeats counted" in show.stdout
    why = viewer("why", big, "lazy562")
    assert "more times the same way" in why.stdout
    whyj = json.loads(viewer("why", big, "lazy562", "--format", "json").stdout)
    reads = [a for a in whyj["proxy_accesses"] if a["attribute"] == "value"]
    assert sum(1 + a["repeats"] for a in reads) == 20000
    chrome = json.loads(viewer("export", big, "--format", "chrome").stdout)
    assert any(e.get("args", {}).get("repeats") for e in chrome["traceEvents"])
    d = viewer("diff", small, big, "--format", "json")
    findings = json.loads(d.stdout)["findings"]
    assert d.returncode == 0, findings
    assert all(f["severity"] == "info" for f in findings), findings
    rep = [f for f in findings if f["kind"] == "proxy_access_repeats"]
    assert {f["module"] for f in rep} == {"lazy562", "proxied"}, findings
    assert any("100 times in the good run and 20000 times in the bad" in f["summary"] for f in rep), rep
    # The same run twice: nothing at all about repeats.
    again = run_loops(tmp_path, py, 20000, name="again")
    same = json.loads(viewer("diff", big, again, "--format", "json").stdout)["findings"]
    assert not [f for f in same if f["kind"] == "proxy_access_repeats"], same


# Loops that change one part of an access's key at a time, in a pattern where each thread's
# memo of its latest site (the hook's first check) sees a near miss at every access: two
# reads on one line (another calling instruction), two instances of one proxy class read
# at one instruction (another object, the same __getattr__ and result), a __getattr__
# answering two results in turn (another result), and one failing every other call
# (another outcome).
FORWARDING = ("import sys, types\n"
              "class Forwarding(types.ModuleType):\n"
              "    def __getattr__(self, name):\n"
              "        return getattr(self._target, name)\n"
              "def install(name):\n"
              "    real = types.ModuleType(name + '_real')\n"
              "    real.value = 1\n"
              "    proxy = Forwarding(name)\n"
              "    proxy._target = real\n"
              "    sys.modules[name] = proxy\n")
NEAR_MISS_PKGS = {
    "lazy562.py": pep562_module(42),
    "forwarding.py": FORWARDING,
    "twin_a.py": "import forwarding\nforwarding.install(__name__)\n",
    "twin_b.py": "import forwarding\nforwarding.install(__name__)\n",
    "turns.py": ("calls = [0]\nRESULTS = (object(), object())\n"
                 "def __getattr__(name):\n    calls[0] += 1\n    return RESULTS[calls[0] % 2]\n"),
    "flaky.py": ("calls = [0]\n"
                 "def __getattr__(name):\n    calls[0] += 1\n"
                 "    if calls[0] % 2:\n        raise AttributeError(name)\n    return 1\n"),
}

NEAR_MISS = """\
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkgs"))
import lazy562, twin_a, twin_b, turns, flaky
N = int(sys.argv[1])
for _ in range(N):
    x = lazy562.value + lazy562.value
for m in [twin_a, twin_b] * N:
    m.value
for _ in range(N):
    turns.value
for _ in range(2 * N):
    getattr(flaky, "value", None)
"""
TWO_SITES_LINE, TWINS_LINE, TURNS_LINE, FLAKY_LINE = 6, 8, 10, 12


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_near_misses_of_the_latest_site_are_not_merged(py, tmp_path):
    n = 3000
    work = tmp_path / "w"
    (work / "pkgs").mkdir(parents=True)
    for f, text in NEAR_MISS_PKGS.items():
        (work / "pkgs" / f).write_text(text)
    (work / "near_miss.py").write_text(NEAR_MISS)
    out = tmp_path / "out"
    r = run([py, "near_miss.py", str(n)], traced=True, outdir=str(out), cwd=str(work))
    assert r.returncode == 0, r.stderr[-2000:]
    acc = [a for a in accesses(str(out)) if a["where"]["file"] == "near_miss.py"]

    def at(line, **match):
        return [a for a in acc if a["where"]["line"] == line
                and all(a["proxy"][k] == v if k == "type" else a[k] == v for k, v in match.items())]

    # Two calling instructions on one line: two sites, each with its own first records.
    two = at(TWO_SITES_LINE)
    assert sum(1 + a["repeats"] for a in two) == 2 * n
    assert 6 <= len(two) <= 8, [(a["repeats"], a["time_ns"]) for a in two]
    # Two objects behind one __getattr__ at one instruction, each counted as itself.
    twins = at(TWINS_LINE)
    ids = {a["proxy"]["id"] for a in twins}
    assert len(ids) == 2, twins
    for i in ids:
        mine = [a for a in twins if a["proxy"]["id"] == i]
        assert sum(1 + a["repeats"] for a in mine) == n
        assert 3 <= len(mine) <= 4, [(a["repeats"], a["time_ns"]) for a in mine]
    # A result that differs from the latest recorded one is a whole record (a few times)
    # before it is counted.
    turns = at(TURNS_LINE)
    assert sum(1 + a["repeats"] for a in turns) == n
    assert len(turns) > 4, [(a["repeats"], a["result"]) for a in turns]
    # Every failure whole; the successes between them counted.
    failed = at(FLAKY_LINE, outcome="AttributeError: value")
    ok = at(FLAKY_LINE, outcome="ok")
    assert len(failed) == n and all(a["repeats"] == 0 for a in failed)
    assert sum(1 + a["repeats"] for a in ok) == n and len(ok) <= 4


# What the hook's memo of its latest site stands for, changed in the middle of a loop: the
# pytest test (PYTEST_CURRENT_TEST, set as pytest sets it), the module's class (a
# `__class__` assignment), and the process (a fork child writes a file of its own).
CHANGES = """\
import os, sys, types
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pkgs"))
import lazy562
N = int(sys.argv[1])
def reads(n):
    for _ in range(n):
        lazy562.value
os.environ["PYTEST_CURRENT_TEST"] = "t.py::first (call)"
reads(N)
os.environ["PYTEST_CURRENT_TEST"] = "t.py::second (call)"
reads(N)
del os.environ["PYTEST_CURRENT_TEST"]
reads(N)
class Lazy(types.ModuleType):
    pass
lazy562.__class__ = Lazy
reads(N)
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    reads(N)
    os._exit(0)
os.waitpid(pid, 0)
reads(N)
"""
CHANGES_LINE = 7


@pytest.mark.parametrize("py", PYS, ids=ident)
def test_memo_follows_test_class_and_fork(py, tmp_path):
    n = 2000
    work = tmp_path / "w"
    (work / "pkgs").mkdir(parents=True)
    (work / "pkgs" / "lazy562.py").write_text(pep562_module(42))
    (work / "changes.py").write_text(CHANGES)
    out = tmp_path / "out"
    r = run([py, "changes.py", str(n)], traced=True, outdir=str(out), cwd=str(work))
    assert r.returncode == 0, r.stderr[-2000:]
    files = traces(str(out))
    assert len(files) == 2, files
    parent = child = None
    for f in files:
        (p,) = json.loads(viewer("export", f, "--format", "json").stdout)["processes"]
        mine = [a for a in p["proxy_accesses"]  # a child's file names the script by its full path
                if os.path.basename(a["where"]["file"]) == "changes.py" and a["where"]["line"] == CHANGES_LINE]
        if p["forked_from_pid"]:
            child = mine
        else:
            parent = mine

    def summary(recs):
        return [(a["test"], a["repeats"], a["time_ns"]) for a in recs]

    # The first test: the first three reads whole, the rest counted under them. The
    # second test: its first read whole, its repeats counted under it, not the first's.
    first = [a for a in parent if a["test"] == "t.py::first"]
    second = [a for a in parent if a["test"] == "t.py::second"]
    assert len(first) == 3 and sum(1 + a["repeats"] for a in first) == n, summary(parent)
    assert len(second) == 1 and second[0]["repeats"] == n - 1, summary(parent)
    # No test any more: one whole read; the class assigned: one more; the parent after the
    # fork: counted under the latter.
    untested = sorted((a for a in parent if not a["test"]), key=lambda a: a["time_ns"])
    assert [a["repeats"] for a in untested] == [n - 1, 2 * n - 1], summary(parent)
    # The child's own file: its first three reads whole again, its repeats counted there.
    assert len(child) == 3 and sum(1 + a["repeats"] for a in child) == n, summary(child)
