"""Imports entered from native code (IMPTRACE_NATIVE_STACKS=1): the first frame outside the
interpreter named by the viewer from the files (elfutils), checked against the build-id the
trace recorded. The extension (tests/programs/native_importer) is built here, with debug
information, for each interpreter: it imports from its init function, from a static C
function and from a C++ function in a namespace."""
import json
import os
import shutil
import subprocess

import pytest

from e2e_util import PROGRAMS, VIEWER, export, run, traces, viewer

SOURCES = os.path.join(PROGRAMS, "native_importer")
# Debian's (static libpython: the interpreter is the main program) and pyenv's (libpython).
PYS = [p for p in ["/usr/bin/python3", "/root/.pyenv/versions/3.12.1/bin/python",
                   "/root/.pyenv/versions/3.8.18/bin/python"] if os.path.exists(p)]

PROGRAM = """import sys
sys.path.insert(0, {dir!r})
import nativeimp
nativeimp.from_static()
nativeimp.from_cpp()
import json
"""


def line_of(source, text):
    with open(os.path.join(SOURCES, source)) as f:
        for n, line in enumerate(f, 1):
            if text in line:
                return n
    raise AssertionError("%s not in %s" % (text, source))


def build_extension(py, out, *defines):
    """nativeimp<EXT_SUFFIX> in `out`, -O0 -g, from the C and the C++ source."""
    info = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['include']);"
                           "print(sysconfig.get_config_var('EXT_SUFFIX'))"], capture_output=True, text=True)
    include, suffix = info.stdout.split()
    objs = []
    for src, cc in (("nativeimp.c", "gcc"), ("nativeimp_loaders.cpp", "g++")):
        obj = os.path.join(out, src + ".o")
        subprocess.run([cc, "-O0", "-g", "-fPIC", "-I" + include] + list(defines) +
                       ["-c", os.path.join(SOURCES, src), "-o", obj], check=True)
        objs.append(obj)
    so = os.path.join(out, "nativeimp" + suffix)
    subprocess.run(["g++", "-shared", "-Wl,--build-id", "-o", so] + objs, check=True)
    return so


_BUILT = {}


@pytest.fixture(scope="session", autouse=True)
def build_root(tmp_path_factory):
    _BUILT["root"] = tmp_path_factory.mktemp("nativeimp")


def built_extension(py):
    """The extension for `py`, built once per test session (compiling is most of the time)."""
    if py not in _BUILT:
        out = os.path.join(str(_BUILT["root"]), str(len(_BUILT)))
        os.mkdir(out)
        _BUILT[py] = build_extension(py, out)
    return _BUILT[py]


def traced_run(py, tmp_path, broken=False):
    """The program under the tracer with native stacks on. `broken`: ni_from_cpp raises
    ImportError, and the program goes on without it."""
    d = tmp_path / "mods"
    d.mkdir()
    for name in ("ni_from_init", "ni_from_static", "ni_from_cpp"):
        (d / (name + ".py")).write_text("VALUE = %r\n" % name)
    if broken:
        (d / "ni_from_cpp.py").write_text("raise ImportError('ni_from_cpp is broken')\n")
    so = str(d / os.path.basename(built_extension(py)))
    shutil.copy(built_extension(py), so)
    prog = tmp_path / "prog.py"
    code = PROGRAM.format(dir=str(d))
    if broken:
        code = code.replace("nativeimp.from_cpp()\n", "try:\n    nativeimp.from_cpp()\nexcept ImportError:\n    pass\n")
    prog.write_text(code)
    out = tmp_path / "trace"
    r = run([py, str(prog)], traced=True, outdir=str(out), env={"IMPTRACE_NATIVE_STACKS": "1"})
    assert r.returncode == 0, r.stderr
    return so, traces(str(out))[0]


def callers(trace):
    imports = export(trace)["processes"][0]["imports"]
    return {i["name"]: i for i in imports}


def expected_callers():
    """Module -> (function, source file, line) of the import that names it."""
    return {
        "ni_from_init": ("PyInit_nativeimp", "nativeimp.c", line_of("nativeimp.c", 'PyImport_ImportModule("ni_from_init")')),
        "ni_from_static": ("import_from_static", "nativeimp.c", line_of("nativeimp.c", "PyImport_ImportModuleLevelObject(")),
        "ni_from_cpp": ("nativeimp::loaders::load_module(char const*)", "nativeimp_loaders.cpp",
                        line_of("nativeimp_loaders.cpp", "PyImport_Import(n)")),
    }


@pytest.mark.parametrize("py", PYS)
def test_each_native_caller_named(py, tmp_path):
    so, trace = traced_run(py, tmp_path)
    by_name = callers(trace)
    expected = expected_callers()
    for name, (function, source, line) in expected.items():
        c = by_name[name]["native_caller"]
        assert c is not None, name
        assert c["library"] == os.path.basename(so) and c["object"] == so
        assert c["function"] == function and c["unsymbolised"] is None, c
        assert c["file"].endswith("/native_importer/" + source) and c["line"] == line, c
    # Beside it, the Python frame that called into the extension.
    assert by_name["ni_from_init"]["importer"]["line"] == 3
    assert by_name["ni_from_static"]["importer"]["line"] == 4
    assert by_name["ni_from_cpp"]["importer"]["line"] == 5
    # Imports Python code made have none, nor those of the interpreter's own start-up
    # (encodings, site: reached from main() through Py_BytesMain, or libc's start).
    assert by_name["json"]["native_caller"] is None
    assert by_name["nativeimp"]["native_caller"] is None
    assert [n for n, i in by_name.items() if i["native_caller"]] == list(expected)

    text = viewer("why", trace, "ni_from_cpp").stdout
    assert "entered from native code: %s: nativeimp::loaders::load_module(char const*) (" % os.path.basename(so) in text
    assert "nativeimp_loaders.cpp:%d)" % expected["ni_from_cpp"][2] in text
    why = viewer("why", trace, "ni_from_static", "--format", "json").stdout
    assert '"function":"import_from_static"' in why.replace(" ", "")
    show = viewer("show", trace).stdout
    assert "imports entered from native code: 3" in show
    for name, (function, _, _) in expected.items():
        assert any(l.startswith("    %s <- " % name) and function in l for l in show.splitlines()), (name, show)


def evaluation_frame(frame):
    return frame["symbol"] == "_PyEval_EvalFrameDefault"


@pytest.mark.parametrize("py", PYS)
def test_stack_ends_at_the_bytecode_evaluation(py, tmp_path):
    """A native stack runs from the import to the first frame of the interpreter's bytecode
    evaluation, whether that frame is among the tracer's first, short unwind (an import
    statement's) or deeper (twenty C frames of recursion in the extension); the frames past
    it are the Python code's own C stack."""
    d = tmp_path / "mods"
    d.mkdir()
    for name in ("ni_from_init", "ni_from_deep"):
        (d / (name + ".py")).write_text("VALUE = %r\n" % name)
    shutil.copy(built_extension(py), str(d / os.path.basename(built_extension(py))))
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nsys.path.insert(0, %r)\nimport nativeimp\nnativeimp.from_deep()\nimport json\n" % str(d))
    out = tmp_path / "trace"
    r = run([py, str(prog)], traced=True, outdir=str(out), env={"IMPTRACE_NATIVE_STACKS": "1"})
    assert r.returncode == 0, r.stderr
    by_name = callers(traces(str(out))[0])
    for name in ("json", "nativeimp", "ni_from_deep"):
        stack = by_name[name]["native_stack"]
        assert evaluation_frame(stack[-1]), (name, stack)
        assert not any(evaluation_frame(f) for f in stack[:-1]), (name, stack)
    # An import statement's: a few frames (the tracer's own left out).
    assert len(by_name["json"]["native_stack"]) <= 8, by_name["json"]["native_stack"]
    deep = by_name["ni_from_deep"]
    assert len(deep["native_stack"]) > 21, deep["native_stack"]
    assert deep["native_caller"]["function"] == "import_from_deep_frames", deep["native_caller"]


def test_other_build_not_named_and_symbol_path(tmp_path):
    """A file with another build-id at the recorded path is not used; a copy of the traced
    file under an IMPTRACE_SYMBOL_PATH root is."""
    py = PYS[0]
    so, trace = traced_run(py, tmp_path)
    root = tmp_path / "root"
    os.makedirs(str(root) + os.path.dirname(so))
    shutil.copy(so, str(root) + so)
    build_extension(py, os.path.dirname(so), "-DNATIVEIMP_OTHER_BUILD=1")
    c = callers(trace)["ni_from_static"]["native_caller"]
    assert c["function"] is None and c["file"] is None
    assert c["unsymbolised"].startswith("no file with build-id ") and "%s has build-id" % so in c["unsymbolised"], c
    # An exported function keeps the name the traced process's loader gave it.
    c = callers(trace)["ni_from_init"]["native_caller"]
    assert c["function"] == "PyInit_nativeimp" and c["file"] is None and c["unsymbolised"]
    assert "not symbolised: no file with build-id" in viewer("why", trace, "ni_from_static").stdout
    env = dict(os.environ, IMPTRACE_SYMBOL_PATH=str(root))
    out = subprocess.run([VIEWER, "export", trace, "--format", "json"], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    c = {i["name"]: i for i in json.loads(out.stdout)["processes"][0]["imports"]}["ni_from_static"]["native_caller"]
    assert c["function"] == "import_from_static" and c["unsymbolised"] is None and c["file"].endswith("nativeimp.c")


def test_diff_and_report_name_the_caller(tmp_path):
    """A failed import that C++ code made: diff (text, JSON, markdown) and report name the
    C++ function beside the Python line."""
    py = PYS[0]
    runs = {}
    for side in ("good", "bad"):
        d = tmp_path / side
        d.mkdir()
        runs[side] = traced_run(py, d, broken=side == "bad")[1]
    doc = json.loads(viewer("diff", runs["good"], runs["bad"], "--format", "json").stdout)
    findings = doc["findings"] + [r for f in doc["findings"] for r in f["related"]]
    failed = [f for f in findings if f["kind"] == "import_failed" and f["module"] == "ni_from_cpp"]
    assert failed, findings
    assert failed[0]["native_caller"]["function"] == "nativeimp::loaders::load_module(char const*)"
    assert all(f["native_caller"] is None for f in findings if f["module"] != "ni_from_cpp")
    text = viewer("diff", runs["good"], runs["bad"]).stdout
    assert "entered from native code: nativeimp" in text and "nativeimp::loaders::load_module(char const*)" in text
    md = viewer("diff", runs["good"], runs["bad"], "--format", "markdown").stdout
    assert "nativeimp::loaders::load_module(char const*)" in md
    html = tmp_path / "r.html"
    viewer("report", runs["good"], runs["bad"], "-o", str(html))
    assert "entered from native code: nativeimp" in html.read_text()
