"""Embedded Python: C and C++ hosts, built here from tests/programs/embedding/.

- Re-initialisation (reinit.c, against every pyenv 3.8-3.13 shared libpython): three
  lifetimes of Py_Initialize ... Py_FinalizeEx in one process. Traced and untraced print the
  same and exit the same; the trace has three lifetimes, each begun and ended, each with
  its own imports of csv (from C), emb_pkg.child (bound on its package), the failed
  emb_missing; `why` tells one object per lifetime, none replacing another; `show` lists
  the lifetimes.
  With PYTHONMALLOC=debug (3.8, 3.13), the audit hook listed or not: the same.
  `diff` compares lifetime with lifetime: the host with three lifetimes against itself and
  against two finds no error, no replacement, no duplicate module; a module put under
  'csv' by assignment within each lifetime is still a sys_modules_replaced error.
  Known CPython bugs in re-initialisation are left out of the modules imported: 3.12.1
  aborts ("double free or corruption") in the second lifetime of a process that imported
  `_datetime` or `_decimal` (datetime, calendar, email.utils, decimal), traced or not.
- Sub-interpreters from C (subinterpreters.c): Py_NewInterpreter twice, and on 3.12+
  Py_NewInterpreterFromConfig with its own GIL; their imports are in the trace with their
  own interpreter ids, with no environment variable.
- A static libpython (Debian's libpython3.11.a linked into the host): every lifetime is
  still traced; sub-interpreters created from C are not, and `show` says so;
  IMPTRACE_AUDIT_HOOK=1 sees them. Debian's python3 (static too) shows no such line.
- pybind11 (Debian pybind11-dev, Debian's shared libpython3.11): two
  initialize/finalize_interpreter lifetimes importing from C++; the imports have no Python
  importer, the child is bound on its package, the failed import caught in C++ counts as
  handled.
"""
import glob
import json
import os
import re
import shutil
import subprocess

import pytest

from e2e_util import PROGRAMS, export, protoc_decodes, run, traces, viewer, why

SOURCES = os.path.join(PROGRAMS, "embedding")
PYENV = sorted(p for p in glob.glob("/root/.pyenv/versions/3.*") if
               re.match(r"3\.(8|9|10|11|12|13)\.", os.path.basename(p)))
DEBIAN_CONFIG = "/usr/bin/python3.11-config"


def short(prefix):
    return os.path.basename(prefix)


@pytest.fixture(scope="module")
def modules(tmp_path_factory):
    root = tmp_path_factory.mktemp("mods")
    (root / "emb_pkg").mkdir()
    (root / "emb_pkg" / "__init__.py").write_text("")
    (root / "emb_pkg" / "child.py").write_text("VALUE = 7\n")
    return str(root)


def build_c(source, prefix, out):
    minor = ".".join(short(prefix).split(".")[:2])
    cmd = ["gcc", "-O0", "-o", out, os.path.join(SOURCES, source),
           "-I%s/include/python%s" % (prefix, minor), "-L%s/lib" % prefix,
           "-Wl,-rpath,%s/lib" % prefix, "-lpython%s" % minor]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def plain_and_traced(exe, tmp_path, env):
    out = str(tmp_path / "out")
    plain = run([exe], traced=False, env=env, timeout=120)
    traced = run([exe], traced=True, outdir=out, env=env, timeout=120)
    assert plain.returncode == 0, plain.stderr
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    files = traces(out)
    assert len(files) == 1, files
    protoc_decodes(files[0])
    return plain.stdout, out


def check_lifetimes(out, n, c_names):
    """n lifetimes, each begun and ended, each importing the same modules once."""
    (proc,) = export(out)["processes"]
    lifetimes = proc["lifetimes"]
    assert [l["lifetime"] for l in lifetimes] == list(range(1, n + 1))
    assert all(l["end_ns"] is not None and l["begin_ns"] < l["end_ns"] for l in lifetimes)
    assert all(a["end_ns"] <= b["begin_ns"] for a, b in zip(lifetimes, lifetimes[1:]))
    assert not any(l["end_unseen"] or l["next_unseen"] for l in lifetimes)
    imports = proc["imports"]
    for name in ("csv", "emb_pkg.child", "emb_missing") + tuple(c_names):
        got = [i["lifetime"] for i in imports if i["name"] == name and i["interpreter"] == 0]
        if name in c_names:  # also found again by later imports in the same lifetime
            got = sorted(set(got))
        assert sorted(got) == list(range(1, n + 1)), (name, got)
    for i in imports:
        assert i["lifetime"] in range(1, n + 1)
        life = lifetimes[i["lifetime"] - 1]
        assert life["begin_ns"] <= i["begin_ns"] and i["end_ns"] <= life["end_ns"], i["name"]
    assert all(not i["ok"] for i in imports if i["name"] == "emb_missing")
    # One object per lifetime under each key, none replacing the one before.
    for key in ("csv", "emb_pkg.child"):
        w = why([out], key)
        assert [e["lifetime"] for e in w["entries"]] == list(range(1, n + 1)), w["entries"]
        assert len({e["object"] for e in w["entries"]}) == n
        assert all(e["replaced_by"] is None and not e["removed"] for e in w["entries"])
        assert [e["finalized"] for e in w["entries"]] == [True] * (n - 1) + [False]
    children = why([out], "emb_pkg")["children"]
    assert children and all(c["status"] == "bound" for c in children)
    show = viewer("show", out).stdout
    assert "interpreter lifetimes: %d" % n in show, show
    assert "not seen" not in show, show
    assert "anomalies" not in show.replace("not anomalies", ""), show
    return proc


@pytest.mark.parametrize("prefix", PYENV, ids=short)
def test_reinitialised_interpreter(prefix, modules, tmp_path):
    exe = build_c("reinit.c", prefix, str(tmp_path / "reinit"))
    stdout, out = plain_and_traced(exe, tmp_path, {"PYTHONPATH": modules})
    assert stdout.splitlines() == ["lifetime %d: 7 True" % k for k in (1, 2, 3)]
    proc = check_lifetimes(out, 3, ["json.decoder"])
    csv = [i for i in proc["imports"] if i["name"] == "csv"]
    assert all(i["importer"] is None for i in csv)  # asked for by C
    print(short(prefix), "imports per lifetime:",
          [sum(1 for i in proc["imports"] if i["lifetime"] == k) for k in (1, 2, 3)])


def diff_findings(good, bad):
    d = viewer("diff", good, bad, "--format", "json")
    return d.returncode, json.loads(d.stdout)["findings"]


def test_diff_compares_lifetime_with_lifetime(modules, tmp_path):
    # The host run with three lifetimes against itself and against two: each lifetime's
    # modules are new objects, not replacements, so nothing is an error. A module replaced
    # in sys.modules within each lifetime still is.
    prefix = PYENV[-1]
    exe = build_c("reinit.c", prefix, str(tmp_path / "reinit"))
    outs = {}
    for name, n, path in (("three", "3", modules), ("three_again", "3", modules), ("two", "2", modules)):
        outs[name] = str(tmp_path / name)
        r = run([exe, n], traced=True, outdir=outs[name], env={"PYTHONPATH": path}, timeout=120)
        assert r.returncode == 0, r.stderr
    for good, bad in (("three", "three_again"), ("two", "three"), ("three", "two")):
        status, findings = diff_findings(outs[good], outs[bad])
        assert not [f for f in findings if f["severity"] == "error"], (good, bad, findings)
        assert not [f for f in findings if f["kind"] in ("sys_modules_replaced", "duplicate_module",
                                                       "binding_mismatch")], (good, bad, findings)
        assert status == (1 if any(f["severity"] == "warning" for f in findings) else 0)
    # emb_pkg/__init__.py puts another module under 'csv' in every lifetime.
    swapped = tmp_path / "swapped"
    shutil.copytree(modules, str(swapped))
    (swapped / "emb_pkg" / "__init__.py").write_text("import sys, json\nsys.modules['csv'] = json\n")
    outs["swapped"] = str(tmp_path / "swapped_run")
    r = run([exe, "2"], traced=True, outdir=outs["swapped"], env={"PYTHONPATH": str(swapped)}, timeout=120)
    assert r.returncode == 0, r.stderr
    status, findings = diff_findings(outs["three"], outs["swapped"])
    assert status == 1
    replaced = [f for f in findings if f["kind"] == "sys_modules_replaced"]
    assert [(f["module"], f["severity"]) for f in replaced] == [("csv", "error")], findings
    assert "module 'csv'" in replaced[0]["summary"] and "-> module 'json'" in replaced[0]["summary"], replaced


@pytest.mark.parametrize("prefix", [p for p in PYENV if re.match(r"3\.(8|13)\.", short(p))], ids=short)
@pytest.mark.parametrize("mode", [{"PYTHONMALLOC": "debug"}, {"PYTHONMALLOC": "debug", "IMPTRACE_AUDIT_HOOK": "1"}],
                         ids=["debug-alloc", "debug-alloc-hook-kept"])
def test_reinitialised_with_debug_allocator(prefix, mode, modules, tmp_path):
    # The audit hook's node, freed with CPython's list at each finalisation when it stayed
    # listed, and registered again, must match the allocator in force then.
    exe = build_c("reinit.c", prefix, str(tmp_path / "reinit"))
    stdout, out = plain_and_traced(exe, tmp_path, dict(mode, PYTHONPATH=modules))
    assert stdout.splitlines() == ["lifetime %d: 7 True" % k for k in (1, 2, 3)]
    (proc,) = export(out)["processes"]
    assert [l["lifetime"] for l in proc["lifetimes"] if l["end_ns"] is not None] == [1, 2, 3]


@pytest.mark.parametrize("prefix", PYENV, ids=short)
def test_subinterpreters_from_c(prefix, modules, tmp_path):
    exe = build_c("subinterpreters.c", prefix, str(tmp_path / "subinterpreters"))
    stdout, out = plain_and_traced(exe, tmp_path, {"PYTHONPATH": modules})
    own_gil = tuple(int(x) for x in short(prefix).split(".")[:2]) >= (3, 12)
    subs = ["legacy 1 7", "legacy 2 7"] + (["own gil 7"] if own_gil else [])
    assert stdout.splitlines() == subs + ["main"]
    (proc,) = export(out)["processes"]
    imports = proc["imports"]
    for name in ("csv", "emb_pkg.child", "emb_pkg"):
        ids = [i["interpreter"] for i in imports if i["name"] == name]
        assert len(ids) == len(subs) and 0 not in ids and len(set(ids)) == len(subs), (name, ids)
    main = [i for i in imports if i["name"] in ("fractions", "statistics")]
    assert sorted(i["name"] for i in main) == ["fractions", "statistics"]
    assert all(i["interpreter"] == 0 for i in main)
    assert [l["subinterpreters_from_c_unseen"] for l in proc["lifetimes"]] == [False]


def static_host(source, out):
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/libpython3.11.a"):
        pytest.skip("Debian's libpython3.11.a is not installed")
    includes = subprocess.run([DEBIAN_CONFIG, "--includes"], capture_output=True, text=True).stdout.split()
    # -Wl,-E: the host exports the C API, as Debian's python3 does (the tracer looks it up).
    cmd = (["gcc", "-O0", "-no-pie", "-Wl,-E", "-o", out, os.path.join(SOURCES, source)] + includes +
           ["/usr/lib/x86_64-linux-gnu/libpython3.11.a", "-lexpat", "-lz", "-lm", "-ldl", "-lpthread", "-lutil"])
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def test_static_libpython_host(modules, tmp_path):
    exe = static_host("reinit.c", str(tmp_path / "reinit"))
    stdout, out = plain_and_traced(exe, tmp_path / "reinit_run", {"PYTHONPATH": modules})
    assert stdout.splitlines() == ["lifetime %d: 7 True" % k for k in (1, 2, 3)]
    (proc,) = export(out)["processes"]
    assert proc["python_build"].startswith("static")
    assert [i["lifetime"] for i in proc["imports"] if i["name"] == "emb_pkg.child"] == [1, 2, 3]

    exe = static_host("subinterpreters.c", str(tmp_path / "subinterpreters"))
    stdout, out = plain_and_traced(exe, tmp_path / "sub_run", {"PYTHONPATH": modules})
    (proc,) = export(out)["processes"]
    assert [l["subinterpreters_from_c_unseen"] for l in proc["lifetimes"]] == [True]
    assert not [i for i in proc["imports"] if i["name"] == "emb_pkg.child"]
    assert "not seen: sub-interpreters created from C" in viewer("show", out).stdout
    kept = str(tmp_path / "kept")
    r = run([exe], traced=True, outdir=kept, env={"PYTHONPATH": modules, "IMPTRACE_AUDIT_HOOK": "1"}, timeout=120)
    assert r.stdout == stdout
    (proc,) = export(kept)["processes"]
    assert not proc["lifetimes"][0]["subinterpreters_from_c_unseen"]
    assert sorted(i["interpreter"] for i in proc["imports"] if i["name"] == "emb_pkg.child") == [1, 2]
    assert "not seen" not in viewer("show", kept).stdout

    # Debian's python3 is a static libpython too, but no embedding: nothing to say.
    plain = str(tmp_path / "python3")
    r = run(["/usr/bin/python3", "-c", "import csv"], traced=True, outdir=plain)
    assert r.returncode == 0, r.stderr
    show = viewer("show", plain).stdout
    assert "not seen" not in show and "interpreter lifetimes" not in show, show


def test_pybind11_embedded(modules, tmp_path):
    if not os.path.exists("/usr/include/pybind11/embed.h"):
        pytest.skip("Debian pybind11-dev is not installed")
    includes = subprocess.run([DEBIAN_CONFIG, "--includes"], capture_output=True, text=True).stdout.split()
    exe = str(tmp_path / "pybind11_host")
    r = subprocess.run(["g++", "-O0", "-o", exe, os.path.join(SOURCES, "pybind11_host.cpp")] + includes +
                       ["-lpython3.11"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    stdout, out = plain_and_traced(exe, tmp_path, {"PYTHONPATH": modules})
    assert stdout.splitlines() == ["lifetime %d: 7 1 text/plain 1 1" % k for k in (1, 2)]
    proc = check_lifetimes(out, 2, ["email.mime.text"])
    assert proc["python_build"].startswith("shared")
    for i in proc["imports"]:
        if i["name"] in ("csv", "emb_pkg.child", "email.mime.text", "emb_missing"):
            assert i["importer"] is None and i["parent_import"] is None, i  # from C++
    w = why([out], "email.mime.text")
    assert [e["via"] for e in w["entries"]] == ["import", "import"]
    assert all(e["origin"].endswith("email/mime/text.py") for e in w["entries"])
    show = viewer("show", out).stdout
    # Caught in C++, which went on: handled, not a failure that stopped the program.
    assert "propagated" not in show, show
