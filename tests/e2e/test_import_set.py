"""On every interpreter, the imports the tracer records are exactly
what `-X importtime` lists (failed imports included) plus what the program loaded through
importlib.import_module, which -X importtime does not see on 3.8-3.13."""
import pytest

from e2e_util import PROGRAMS, export, ident, importtime_names, interpreters, protoc_decodes, run, traces


@pytest.mark.parametrize("py", interpreters(), ids=ident)
def test_recorded_imports_equal_importtime_plus_import_module(py, tmp_path):
    out = tmp_path / "traces"
    r = run([py, "-X", "importtime", PROGRAMS + "/import_zoo.py"], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    expected = importtime_names(r.stderr)
    marker = [l for l in r.stdout.splitlines() if l.startswith("loaded-by import_module:")]
    assert marker, r.stdout
    via_import_module = set(marker[0].split(":", 1)[1].split())
    assert via_import_module and "does_not_exist_xyz" in expected
    files = traces(str(out))
    assert len(files) == 1
    protoc_decodes(files[0])
    proc = export(files[0])["processes"][0]
    names = {i["name"] for i in proc["imports"]}
    assert names == expected | via_import_module, (sorted(names - expected - via_import_module),
                                                   sorted((expected | via_import_module) - names))
    failed = [i for i in proc["imports"] if i["name"] == "does_not_exist_xyz"]
    assert failed and not failed[0]["ok"] and failed[0]["error"].startswith("ModuleNotFoundError")
    # Nesting: a parent index always points at an earlier import on the same thread.
    imports = proc["imports"]
    for i, imp in enumerate(imports):
        if imp["parent_import"] is not None:
            parent = imports[imp["parent_import"]]
            assert imp["parent_import"] < i and parent["thread"] == imp["thread"]
            assert parent["begin_ns"] <= imp["begin_ns"] and imp["end_ns"] <= parent["end_ns"]
    # The importer is the user's code, never importlib's.
    dyn = [i for i in imports if i["name"] in via_import_module and i["parent_import"] is None]
    assert dyn and all("importlib" not in (i["importer"] or {}).get("file", "") for i in dyn)
    assert dyn[0]["importer"]["file"].endswith("import_zoo.py")
