"""A change to sys.modules that no hook sees (C code writing the dict: PyDict_SetItem through
ctypes) is still recorded when sys.modules is large and top-level imports follow each other
closely, so that the whole-dict comparison at top-level boundaries is put off
(tracer/walk_budget.h): the comparison owed is made at a later boundary or, at the latest,
from atexit when the program imported it."""
import os

import pytest

from e2e_util import ident, interpreters, run, traces, why

MODULES = 3000

PROGRAM = '''\
import atexit, ctypes, sys
sys.path.insert(0, {root!r})
for i in range({n}):
    __import__("lw_m%d" % i)

class Replacement:
    pass

ctypes.pythonapi.PyDict_SetItem(ctypes.py_object(sys.modules), ctypes.py_object("lw_m5"),
                                ctypes.py_object(Replacement()))
import lw_last
'''


def write_program(tmp_path, modules, main_text, extra=("lw_last",), **fields):
    """`modules` empty modules lw_m0... and the `extra` ones in tmp_path/src, and the main
    script `main_text` formatted with that directory as `root` (and `fields`)."""
    root = tmp_path / "src"
    root.mkdir()
    for i in range(modules):
        (root / ("lw_m%d.py" % i)).write_text("")
    for name in extra:
        (root / (name + ".py")).write_text("")
    main = root / "lw_main.py"
    main.write_text(main_text.format(root=str(root), **fields))
    return main


def run_traced(py, main, tmp_path):
    out = tmp_path / "traces"
    r = run([py, str(main)], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return r, traces(str(out))


def assert_lw_m5_replaced(files):
    """lw_m5's story: its import, then the Replacement put under its key."""
    entries = why(files, "lw_m5")["entries"]
    assert len(entries) == 2, entries
    assert entries[0]["is_module"] and entries[0]["via"] == "import", entries
    assert entries[1]["type"].endswith("Replacement") and entries[1]["via"] == "assignment", entries


def run_program(py, tmp_path, tail=""):
    return run_traced(py, write_program(tmp_path, MODULES, PROGRAM + tail.replace("{", "{{").replace("}", "}}"),
                                        n=MODULES), tmp_path)


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_unhooked_replacement_found_with_a_large_sys_modules(py, tmp_path):
    r, files = run_program(py, tmp_path)
    assert len(files) == 1
    assert_lw_m5_replaced(files)


# The tracer never imports atexit itself (it registers the owed walk only with an atexit
# the program imported), so a program's own `import atexit` is made and recorded in every
# run, and its callbacks run.
@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_program_import_of_atexit_is_recorded_after_a_walk_is_put_off(py, tmp_path):
    r, files = run_program(py, tmp_path, "import atexit\natexit.register(print, 'program callback')\n")
    assert "program callback" in r.stdout
    entries = why(files, "lw_m5")["entries"]
    assert entries[-1]["type"].endswith("Replacement"), entries
    # Recorded: an import the tracer made itself would not be (and would take its place).
    assert why(files, "atexit")["imports"], "atexit's import is missing from the trace"


# The unseen change made by a module while it is being imported, between the import
# system's insertion of it and its pop-and-reinsert: on 3.8-3.10 those two are carried as
# the import system's own (no walk), and this change between them must stop that.
INSIDE = """\
import ctypes, sys

class Replacement:
    pass

ctypes.pythonapi.PyDict_SetItem(ctypes.py_object(sys.modules), ctypes.py_object("lw_m5"),
                                ctypes.py_object(Replacement()))
"""


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_unhooked_replacement_inside_an_import_is_found(py, tmp_path):
    main = write_program(tmp_path, MODULES, "import atexit, ctypes, sys\nsys.path.insert(0, {root!r})\n"
                         "for i in range({n}):\n    __import__('lw_m%d' % i)\nimport lw_inside\nimport lw_last\n",
                         n=MODULES)
    (main.parent / "lw_inside.py").write_text(INSIDE)
    r, files = run_traced(py, main, tmp_path)
    assert_lw_m5_replaced(files)


# A store into sys.modules that 3.11's specialising interpreter has made a direct dict
# store (STORE_SUBSCR_DICT: a function whose store kept meeting a dict) passes the store
# hook. It is found by the comparison at the next boundary, which the import system's own
# stores, seen by the hook (importlib's are kept generic), do not stand in for.
HOT = '''\
import dis, sys
sys.path.insert(0, {root!r})
for i in range(300):
    __import__("lw_m%d" % i)

class Replacement:
    pass

def put(d, key, value):
    d[key] = value

scratch = {{}}
for i in range(200):
    put(scratch, "k", i)
print([i.opname for i in dis.get_instructions(put, adaptive=True) if "STORE_SUBSCR" in i.opname]
      if sys.version_info[:2] == (3, 11) else [])
put(sys.modules, "lw_m5", Replacement())
import lw_last
'''


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_specialised_store_into_sys_modules_is_found(py, tmp_path):
    r, files = run_traced(py, write_program(tmp_path, 300, HOT), tmp_path)
    if "3.11" in py or py == "/usr/bin/python3":
        assert "STORE_SUBSCR_DICT" in r.stdout, r.stdout  # the store this test is about
    assert_lw_m5_replaced(files)


# 3.11: importlib's own stores into sys.modules stay generic under the tracer, so the store
# hook sees them (cpython_api.h, keep_stores_generic); untraced, CPython specialises them.
# What Python sees of the code without adaptive=True is the same in both runs.
IMPORTLIB_STORES = '''\
import dis, sys, _frozen_importlib as b
sys.path.insert(0, {root!r})
for i in range(300):
    __import__("lw_m%d" % i)
for fn in (b._load_unlocked,):
    print(fn.__name__, [i.opname for i in dis.get_instructions(fn, adaptive=True) if "STORE_SUBSCR" in i.opname],
          fn.__code__.co_code.hex())
'''


@pytest.mark.parametrize("py", [p for p in interpreters() if "3.11" in p or p == "/usr/bin/python3"], ids=ident)
def test_importlib_stores_into_sys_modules_stay_generic_on_311(py, tmp_path):
    main = write_program(tmp_path, 300, IMPORTLIB_STORES, extra=())
    untraced = run([py, str(main)], traced=False)
    traced = run([py, str(main)], traced=True, outdir=str(tmp_path / "traces"))
    assert untraced.returncode == 0 and traced.returncode == 0, (untraced.stderr, traced.stderr)
    assert "['STORE_SUBSCR_DICT', 'STORE_SUBSCR_DICT']" in untraced.stdout, untraced.stdout  # specialised
    assert "['STORE_SUBSCR', 'STORE_SUBSCR']" in traced.stdout, traced.stdout
    assert traced.stdout.split()[-1] == untraced.stdout.split()[-1]  # co_code
