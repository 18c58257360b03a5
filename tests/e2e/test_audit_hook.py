"""The audit hook steps out of the runtime's list once the main interpreter is set up
(CPython builds an argument tuple for every audit event while any C hook is listed), and
back in when a module that can create sub-interpreters is imported;
IMPTRACE_AUDIT_HOOK=1 keeps it listed. What it did there is still recorded: __class__
assignments (object's setter), the reserve given back at exec (os.execv/execve observed)
and sub-interpreters (see test_programs, test_lifecycle, test_subinterpreters, which run
with the hook out)."""
import pytest

from e2e_util import PROGRAMS, export, ident, interpreters, run, traces

PROGRAM = "%s/audit_hook_list.py" % PROGRAMS


def stages(r):
    assert r.returncode == 0, r.stderr
    return dict(line.split() for line in r.stdout.splitlines())


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_hook_steps_out_and_back(py, tmp_path):
    if run([py, "-c", "import _testcapi"], traced=False).returncode != 0:
        pytest.skip("no _testcapi in this interpreter")
    assert stages(run([py, PROGRAM], traced=False)) == {"start": "out", "after-_testcapi": "out"}
    s = stages(run([py, PROGRAM], traced=True, outdir=str(tmp_path / "default")))
    assert s == {"start": "out", "after-_testcapi": "in-list"}, s
    s = stages(run([py, PROGRAM], traced=True, outdir=str(tmp_path / "kept"), env={"IMPTRACE_AUDIT_HOOK": "1"}))
    assert s == {"start": "in-list", "after-_testcapi": "in-list"}, s
    # Traced either way: the imports are there.
    for d in ("default", "kept"):
        (f,) = traces(str(tmp_path / d))
        names = {i["name"] for i in export(f)["processes"][0]["imports"]}
        assert {"ctypes", "_testcapi"} <= names


@pytest.mark.parametrize("keep", ["0", "1"])
def test_class_assignment_recorded_either_way(keep, tmp_path):
    """LazyLoader's __class__ changes, with the hook out (setter) and kept (setter too: the
    audit event is then ignored, so each change is recorded once)."""
    from e2e_util import why
    py = interpreters()[-1]
    r = run([py, "%s/importlib_lazyloader.py" % PROGRAMS], traced=True, outdir=str(tmp_path),
            env={"IMPTRACE_AUDIT_HOOK": keep})
    assert r.returncode == 0, r.stderr
    entries = why(traces(str(tmp_path)), "lazyloaded_mod")["entries"]
    assert len(entries) == 1, entries
    assert [entries[0]["type"]] + [c["type"] for c in entries[0]["class_changes"]] == \
        ["module", "importlib.util._LazyModule", "module"]
