"""The importer's line number in every Import record is the line CPython itself gives for
the importing frame, in a module long enough that the tracer's line-table cursor has to
carry across thousands of entries: lines past 65,535, line gaps larger than one table
entry can express, imports inside functions, lambdas, comprehensions, loops (the cursor
runs backwards) and try blocks, and an expression whose code runs its lines out of order.

The reference is taken in the same run by a finder at the front of sys.meta_path: for
each generated module it reads f_lineno (CPython's own line computation) of the first
frame outside importlib, and returns None so the import goes on as usual."""
import json
import os

import pytest

from e2e_util import export, ident, interpreters, run, sid_interpreters, traces

PAD = "# padding\n"


def generate(root):
    """Writes the leaf modules and the long importer. Returns {module name: the line of its
    import statement} for the imports written on one line (the others are checked against
    the finder's reference only)."""
    lines = []
    expected = {}
    names = []

    def leaf(name):
        names.append(name)
        with open(os.path.join(root, name + ".py"), "w") as f:
            f.write("VALUE = %r\n" % name)
        return name

    def emit(text, name=None):
        lines.append(text)
        if name:
            expected[name] = len(lines)

    emit("import sys")
    emit("sys.path.insert(0, %r)" % root)
    emit("import lt_finder")
    # A run of top-level imports, one statement per line, with gaps of every size between
    # them: a few lines, over 127 and 254 lines (split table entries), thousands of lines.
    gaps = [0, 1, 3, 130, 260, 2, 1000, 5, 40000, 1, 7, 300, 24000, 2]
    for i, gap in enumerate(gaps):
        for _ in range(gap):
            emit(PAD if i % 2 else "_pad = %d" % i)
        name = leaf("lt_top%d" % i)
        emit("import %s" % name, name)
    assert len(lines) > 65535
    # Functions defined and called past line 65,535.
    f1 = leaf("lt_func_a")
    f2 = leaf("lt_func_b")
    emit("def lt_function():")
    emit("    x = 1")
    emit("    import %s" % f1, f1)
    for _ in range(200):
        emit("    x += 1")
    emit("    import %s" % f2, f2)
    emit("    return x")
    emit("lt_function()")
    # The same function again: its second call starts behind where the first left the
    # cursor.
    twice = [leaf("lt_twice_%s%d" % (s, i)) for i in range(2) for s in "ab"]
    emit("def lt_twice(first, second):")
    emit("    __import__(first)")
    for n in twice[0::2]:
        expected[n] = len(lines)
    for _ in range(300):
        emit("    " + PAD)
    emit("    __import__(second)")
    for n in twice[1::2]:
        expected[n] = len(lines)
    emit("lt_twice(%r, %r)" % tuple(twice[0:2]))
    emit("lt_twice(%r, %r)" % tuple(twice[2:4]))
    # A lambda, a comprehension (their own code objects up to 3.11; inlined from 3.12).
    lam = leaf("lt_lambda")
    emit("(lambda: __import__(%r))()" % lam, lam)
    comp = [leaf("lt_comp%d" % i) for i in range(3)]
    emit("[__import__(n) for n in %r]" % (comp,))
    for n in comp:
        expected[n] = len(lines)
    # A loop: the same instruction imports again, behind where the cursor stands.
    loop = [leaf("lt_loop%d" % i) for i in range(3)]
    emit("for _n in %r:" % (loop,))
    emit("    __import__(_n)")
    for n in loop:
        expected[n] = len(lines)
    # try / except / finally, one of them a failed import.
    tb = leaf("lt_try_b")
    tf = leaf("lt_try_f")
    emit("try:")
    emit("    import lt_missing_module_xyz", "lt_missing_module_xyz")
    emit("except ImportError:")
    emit("    import %s" % tb, tb)
    emit("finally:")
    emit("    import %s" % tf, tf)
    # Lines out of order: the condition (written second) runs first.
    na = leaf("lt_order_a")
    nb = leaf("lt_order_b")
    emit("_v = (")
    emit("    __import__(%r)" % na)
    emit("    if __import__(%r)" % nb)
    emit("    else None")
    emit(")")
    # After all of that, the module frame again, far below.
    for _ in range(3000):
        emit("_pad = 0")
    last = leaf("lt_last")
    emit("import %s" % last, last)
    with open(os.path.join(root, "lt_main.py"), "w") as f:
        f.write("\n".join(l.rstrip("\n") for l in lines) + "\n")
    with open(os.path.join(root, "lt_finder.py"), "w") as f:
        f.write(FINDER.format(names=sorted(names + ["lt_missing_module_xyz"]),
                              out=os.path.join(root, "reference.json")))
    return expected


# CPython's own answer, for reference: a meta path finder that, for each module it is
# asked about (`wanted`), records `record(f)` of the first frame outside importlib, and
# writes what it saw at exit. The two tests fill in which modules and what to record.
REFERENCE_FINDER = '''\
import atexit, json, os, sys
SEEN = {{}}

class ReferenceFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if %(wanted)s and name not in SEEN:
            f = sys._getframe(1)
            while f and ("importlib" in f.f_code.co_filename):
                f = f.f_back
            SEEN[name] = %(record)s
        return None

sys.meta_path.insert(0, ReferenceFinder)

@atexit.register
def _write():
    with open({out!r}, "w") as out:
        json.dump(SEEN, out)
'''

FINDER = "NAMES = set({names!r})\n" + REFERENCE_FINDER % {"wanted": "name in NAMES", "record": "f.f_lineno"}


@pytest.mark.parametrize("py", interpreters() + sid_interpreters(), ids=ident)
def test_importer_lines_exact_in_a_long_module(py, tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    expected = generate(str(root))
    out = tmp_path / "traces"
    r = run([py, str(root / "lt_main.py")], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    with open(root / "reference.json") as f:
        reference = json.load(f)
    # The reference agrees with the generator wherever the statement is on one line.
    assert {k: reference.get(k) for k in expected} == expected
    files = traces(str(out))
    assert len(files) == 1
    imports = export(files[0])["processes"][0]["imports"]
    recorded = {}
    for imp in imports:
        if imp["name"] in reference and imp["name"] not in recorded:
            loc = imp["importer"] or {}
            assert loc.get("file", "").endswith("lt_main.py"), imp
            recorded[imp["name"]] = loc.get("line")
    assert recorded == reference
    assert max(reference.values()) > 65535
    # The out-of-order expression did run its lines backwards.
    assert reference["lt_order_b"] > reference["lt_order_a"], reference


# Importers reached through every kind of frame the tracer's stack walk passes: generators
# (resumed by next(), by `yield from`, by list() from C), coroutines, Python called back
# from C (sorted's key, map), importlib.import_module (importlib's own frames, passed
# over), __import__, exec'd code, a class body, a `from package import submodule` (the
# fromlist frame), a thread, an __init__ called often enough for 3.13 to specialise the
# call (a shim frame under it), a profile function's "call" event (its frame sits on a
# frame that has not started yet), both of those again with the importer beyond them,
# and code run under a trace function (frame objects with f_lineno set). The reference is the same finder as above: the first frame outside
# importlib, its file, function and f_lineno.
WALK_MAIN = '''\
import sys, threading
sys.path.insert(0, {root!r})
import wk_finder

def gen():
    import wk_gen
    yield 1
next(gen())

def inner_gen():
    import wk_yield_from
    yield 1
def outer_gen():
    yield from inner_gen()
list(outer_gen())

async def coro():
    import wk_coro
async def outer_coro():
    await coro()
try:
    outer_coro().send(None)
except StopIteration:
    pass

sorted([1, 2], key=lambda i: (__import__("wk_sorted%d" % i), i)[1])
list(map(lambda n: __import__(n), ["wk_map"]))
list(__import__(n) for n in ["wk_genexp"])
import importlib
importlib.import_module("wk_import_module")
__import__("wk_dunder")
exec("import wk_exec")
exec(compile("def f():\\n    x = 1\\n    import wk_exec_func\\nf()\\n", "<wk>", "exec"))
class Body:
    import wk_class
from wk_pkg import wk_sub

def in_thread():
    import wk_thread
t = threading.Thread(target=in_thread)
t.start()
t.join()

class Made:
    def __init__(self, i):
        __import__("wk_init%d" % i)
for i in range(12):
    Made(i)

def profiled():
    return 1
def profile(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "profiled":
        import wk_profile
sys.setprofile(profile)
profiled()
sys.setprofile(None)

# Functions the walk passes over as importlib's (their file is in an importlib directory),
# so that the importer is found beyond what CPython's own walk skips: the shim frame of a
# C function calling Python (3.12+), and a profiled frame whose "call" event comes before
# its first instruction (3.11).
HOOKS = {{}}
exec(compile("def key(i):\\n    return (__import__('wk_sorted_c%d' % i), i)[1]\\n"
             "def profile(frame, event, arg):\\n"
             "    if event == 'call' and frame.f_code.co_name == 'profiled':\\n"
             "        import wk_profile_c\\n", "/wk/importlib/wk_hooks.py", "exec"), HOOKS)
sorted([1, 2], key=HOOKS["key"])
sys.setprofile(HOOKS["profile"])
profiled()
sys.setprofile(None)

def traced():
    x = 1
    import wk_traced
    return x
def tracer(frame, event, arg):
    return tracer
sys.settrace(tracer)
traced()
sys.settrace(None)
'''

WALK_FINDER = REFERENCE_FINDER % {
    "wanted": 'name.startswith(("wk_", "wk_pkg."))',
    "record": '[os.path.basename(f.f_code.co_filename), getattr(f.f_code, "co_qualname", f.f_code.co_name), f.f_lineno]'}

WALK_LEAVES = (["wk_gen", "wk_yield_from", "wk_coro", "wk_sorted1", "wk_sorted2", "wk_map", "wk_genexp",
                "wk_import_module", "wk_dunder", "wk_exec", "wk_exec_func", "wk_class", "wk_thread",
                "wk_profile", "wk_traced", "wk_sorted_c1", "wk_sorted_c2", "wk_profile_c"] + ["wk_init%d" % i for i in range(12)])


@pytest.mark.parametrize("py", interpreters() + sid_interpreters(), ids=ident)
def test_importers_through_every_kind_of_frame(py, tmp_path):
    root = tmp_path / "src"
    (root / "wk_pkg").mkdir(parents=True)
    for name in WALK_LEAVES:
        (root / (name + ".py")).write_text("VALUE = 1\n")
    (root / "wk_pkg" / "__init__.py").write_text("")
    (root / "wk_pkg" / "wk_sub.py").write_text("VALUE = 1\n")
    (root / "wk_main.py").write_text(WALK_MAIN.format(root=str(root)))
    (root / "wk_finder.py").write_text(WALK_FINDER.format(out=str(root / "reference.json")))
    out = tmp_path / "traces"
    r = run([py, str(root / "wk_main.py")], traced=True, outdir=str(out))
    assert r.returncode == 0, r.stderr[-2000:]
    with open(root / "reference.json") as f:
        reference = json.load(f)
    assert sorted(reference) == sorted(WALK_LEAVES + ["wk_pkg", "wk_pkg.wk_sub"])
    files = traces(str(out))
    assert len(files) == 1
    recorded = {}
    for imp in export(files[0])["processes"][0]["imports"]:
        if imp["name"] in reference and imp["name"] not in recorded:
            loc = imp["importer"] or {}
            file, function, line = reference[imp["name"]]
            recorded[imp["name"]] = [file if loc.get("file", "").endswith(file) else loc.get("file"),
                                     loc.get("function"), loc.get("line")]
    assert recorded == reference
    # The cases the walk must get right are the ones asked for.
    assert reference["wk_sorted1"][1] == "<lambda>" and reference["wk_exec_func"][:2] == ["<wk>", "f"]
    assert reference["wk_pkg.wk_sub"][0] == "wk_main.py" and reference["wk_profile"][1] == "profile"
    assert reference["wk_sorted_c1"][:2] == ["wk_main.py", "<module>"]
    assert reference["wk_profile_c"][:2] == ["wk_main.py", "profiled"]
