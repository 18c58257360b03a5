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


FINDER = '''\
import atexit, json, sys
NAMES = set({names!r})
SEEN = {{}}

class LineFinder:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name in NAMES and name not in SEEN:
            f = sys._getframe(1)
            while f and ("importlib" in f.f_code.co_filename):
                f = f.f_back
            SEEN[name] = f.f_lineno
        return None

sys.meta_path.insert(0, LineFinder)

@atexit.register
def _write():
    with open({out!r}, "w") as out:
        json.dump(SEEN, out)
'''


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
