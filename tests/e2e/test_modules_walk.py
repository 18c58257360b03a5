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


def run_program(py, tmp_path, tail=""):
    root = tmp_path / "src"
    root.mkdir()
    for i in range(MODULES):
        (root / ("lw_m%d.py" % i)).write_text("")
    (root / "lw_last.py").write_text("")
    main = root / "lw_main.py"
    main.write_text(PROGRAM.format(root=str(root), n=MODULES) + tail)
    out = tmp_path / "traces"
    r = run([py, str(main)], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    return r, traces(str(out))


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_unhooked_replacement_found_with_a_large_sys_modules(py, tmp_path):
    r, files = run_program(py, tmp_path)
    assert len(files) == 1
    entries = why(files, "lw_m5")["entries"]
    assert len(entries) == 2, entries
    assert entries[0]["is_module"] and entries[0]["via"] == "import", entries
    assert entries[1]["type"].endswith("Replacement") and entries[1]["via"] == "assignment", entries


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
    root = tmp_path / "src"
    root.mkdir()
    for i in range(MODULES):
        (root / ("lw_m%d.py" % i)).write_text("")
    (root / "lw_inside.py").write_text(INSIDE)
    (root / "lw_last.py").write_text("")
    main = root / "lw_main.py"
    main.write_text("import atexit, ctypes, sys\nsys.path.insert(0, %r)\nfor i in range(%d):\n"
                    "    __import__('lw_m%%d' %% i)\nimport lw_inside\nimport lw_last\n" % (str(root), MODULES))
    out = tmp_path / "traces"
    r = run([py, str(main)], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    entries = why(traces(str(out)), "lw_m5")["entries"]
    assert len(entries) == 2, entries
    assert entries[1]["type"].endswith("Replacement") and entries[1]["via"] == "assignment", entries
