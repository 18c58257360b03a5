"""A change to sys.modules that no hook sees (dict.update replacing an entry in place) is
still recorded when sys.modules is large and top-level imports follow each other closely,
so that the whole-dict comparison at top-level boundaries is put off (tracer/walk_budget.h):
the comparison owed is made at a later boundary or, at the latest, at finalisation."""
import os

import pytest

from e2e_util import ident, interpreters, run, traces, why

MODULES = 3000

PROGRAM = '''\
import sys
sys.path.insert(0, {root!r})
for i in range({n}):
    __import__("lw_m%d" % i)

class Replacement:
    pass

sys.modules.update({{"lw_m5": Replacement()}})
import lw_last
'''


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_unhooked_replacement_found_with_a_large_sys_modules(py, tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    for i in range(MODULES):
        (root / ("lw_m%d.py" % i)).write_text("")
    (root / "lw_last.py").write_text("")
    main = root / "lw_main.py"
    main.write_text(PROGRAM.format(root=str(root), n=MODULES))
    out = tmp_path / "traces"
    r = run([py, str(main)], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    files = traces(str(out))
    assert len(files) == 1
    entries = why(files, "lw_m5")["entries"]
    assert len(entries) == 2, entries
    assert entries[0]["is_module"] and entries[0]["via"] == "import", entries
    assert entries[1]["type"].endswith("Replacement") and entries[1]["via"] == "assignment", entries
