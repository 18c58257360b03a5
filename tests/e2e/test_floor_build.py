"""The measurement build (cmake -DIMPTRACE_FLOOR=ON, tracer.cpp floor_find_and_load) that
the benchmark runs as its "floor" contender: it records every import the default build
records, with names, nesting, outcome and module identities, and nothing of the rest
(importers, specs, bindings, sys.modules history, sys.path). If it recorded less than every
import, or more than the floor, the benchmark's floor figure would not mean what it says."""
import os
import subprocess

import pytest

from e2e_util import LIB, PROGRAMS, SRC, clean_env, export, interpreters, ident


@pytest.fixture(scope="module")
def floor_lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("floor") / "build"
    subprocess.run(["cmake", "-S", SRC, "-B", str(build), "-DCMAKE_BUILD_TYPE=Release", "-DIMPTRACE_FLOOR=ON",
                    "-DIMPTRACE_BUILD_VIEWER=OFF", "-DIMPTRACE_BUILD_TESTS=OFF"],
                   check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(build), "-j2", "--target", "imptrace_tracer"], check=True,
                   capture_output=True)
    return str(build / "libimptrace.so")


def trace_of(lib, py, out):
    out.mkdir()
    prog = [py, os.path.join(PROGRAMS, "import_zoo.py")]
    r = subprocess.run(prog, capture_output=True, text=True, timeout=300,
                       env=clean_env(LD_PRELOAD=lib, IMPTRACE_OUTPUT=str(out) + "/"))
    assert r.returncode == 0, r.stderr
    return r.stdout, export(str(out))["processes"]


# One interpreter that hooks sys.modules stores (3.8-3.11) and one with dict watchers
# (3.12+): the floor build installs neither.
PYS = [p for p in interpreters() if "/3.10." in p or "/3.12." in p or p == "/usr/bin/python3"]


@pytest.mark.parametrize("py", PYS, ids=[ident(p) for p in PYS])
def test_floor_records_every_import_and_only_the_floor(floor_lib, py, tmp_path):
    floor_out, floor = trace_of(floor_lib, py, tmp_path / "floor")
    full_out, full = trace_of(LIB, py, tmp_path / "full")
    assert floor_out == full_out  # the program ran the same
    assert len(floor) == len(full) == 1
    f, d = floor[0], full[0]
    names = lambda p: sorted((i["name"], i["ok"]) for i in p["imports"])
    assert names(f) == names(d)
    by_index = {i["index"]: i for i in f["imports"]}
    for i in f["imports"]:
        if i["parent_import"] is not None:
            assert i["parent_import"] in by_index
        if i["ok"]:
            assert i["object"] and i["object"]["id"], i
    # The same module under one name keeps one identity, distinct from every other module.
    ids = {}
    for i in f["imports"]:
        if i["ok"] and i["object"]["is_module"]:
            ids.setdefault(i["object"]["id"], set()).add(i["name"])
    assert len(ids) > 30
    assert not f["modules_changes"] and not f["bindings"] and not f["sys_path"]
    assert all(i["importer"] is None and i["origin"] is None for i in f["imports"])
    # ... where the default build records them.
    assert d["modules_changes"] and d["bindings"] and d["sys_path"]
    assert any(i["importer"] for i in d["imports"]) and any(i["origin"] for i in d["imports"])


def test_default_build_is_not_the_floor():
    syms = subprocess.run(["nm", "-C", LIB], capture_output=True, text=True, check=True).stdout
    assert "floor_find_and_load" not in syms
