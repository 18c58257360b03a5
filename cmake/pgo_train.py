"""The tracer's profile training (tracer/CMakeLists.txt, IMPTRACE_PGO).

Runs a generated program under the instrumented library (libimptrace-training.so) on each
interpreter given, whose counts the product's compilation then reads. The program is what the tracer meets in real runs, in
the proportions that matter for cost: mostly plain imports (a package tree whose
`__init__` files import their children, one long importer file, `from . import`), and
once each the paths that stories are made of (a lazy proxy module, a PEP 562 module
`__getattr__`, a failing import, a program's own `sys.modules` changes, threads importing
at once, a child process).

Never fails the build for want of an interpreter: one that cannot run the program is
skipped with a line saying why; with none, there are no counts and the library is built
without a profile. Written for any Python 3.6+ (the first interpreter named runs it).
"""
import argparse
import os
import shutil
import subprocess
import sys

TREE_PACKAGES = 12
TREE_MODULES = 25
LONG_IMPORTS = 1500

PROXY_MODULE = '''\
import importlib, sys, types

class LazyProxy(types.ModuleType):
    """A module standing in for another until first use (torch_npu's kind)."""
    def __getattr__(self, attr):
        real = importlib.import_module("pgo_app.lazy_target")
        return getattr(real, attr)

sys.modules["pgo_lazy"] = LazyProxy("pgo_lazy")
'''

PEP562_MODULE = '''\
import importlib

def __getattr__(name):
    if name == "heavy":
        return importlib.import_module("pgo_app.heavy")
    raise AttributeError(name)
'''

DRIVER = '''\
import importlib, os, subprocess, sys, threading
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pgo_long                                   # one long importer file
import pgo_tree                                   # packages importing their children
from pgo_tree import p0                           # from-imports of a loaded package
from pgo_tree.p1 import m0, m1
import pgo_app.proxy, pgo_lazy                    # a lazy proxy in sys.modules
pgo_lazy.VALUE
import pgo_app.pep562 as lazy_mod                 # a PEP 562 module __getattr__
lazy_mod.heavy
hasattr(lazy_mod, "absent")
try:
    import pgo_app.missing                        # an import that fails
except ImportError:
    pass
sys.modules["pgo_alias"] = pgo_tree.p2            # the program's own sys.modules changes
sys.modules.pop("pgo_alias")
sys.modules.setdefault("pgo_alias", pgo_tree.p3)
del sys.modules["pgo_alias"]
for i in range(4):
    importlib.import_module("pgo_app.dynamic%d" % i)

def worker(k):
    for i in range(TREE_MODULES):
        importlib.import_module("pgo_threads.t%d.m%d" % (k, i))

threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
if len(sys.argv) < 2:                             # a child process, traced too
    subprocess.run([sys.executable, os.path.abspath(__file__), "child"], check=False)
'''.replace("TREE_MODULES", str(TREE_MODULES))


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def generate(root):
    for p in range(TREE_PACKAGES):
        pkg = os.path.join(root, "pgo_tree", "p%d" % p)
        write(os.path.join(pkg, "__init__.py"),
              "".join("from . import m%d\n" % m for m in range(TREE_MODULES)))
        for m in range(TREE_MODULES):
            write(os.path.join(pkg, "m%d.py" % m), "import os\nVALUE = %d\n" % m)
    write(os.path.join(root, "pgo_tree", "__init__.py"),
          "".join("import pgo_tree.p%d\n" % p for p in range(TREE_PACKAGES)))
    write(os.path.join(root, "pgo_long", "__init__.py"),
          "".join("import pgo_long.l%d\n" % i for i in range(LONG_IMPORTS)))
    for i in range(LONG_IMPORTS):
        write(os.path.join(root, "pgo_long", "l%d.py" % i), "VALUE = %d\n" % i)
    app = os.path.join(root, "pgo_app")
    write(os.path.join(app, "__init__.py"), "")
    write(os.path.join(app, "proxy.py"), PROXY_MODULE)
    write(os.path.join(app, "lazy_target.py"), "VALUE = 1\n")
    write(os.path.join(app, "pep562.py"), PEP562_MODULE)
    write(os.path.join(app, "heavy.py"), "VALUE = 2\n")
    for i in range(4):
        write(os.path.join(app, "dynamic%d.py" % i), "VALUE = %d\n" % i)
    write(os.path.join(root, "pgo_threads", "__init__.py"), "")
    for k in range(3):
        write(os.path.join(root, "pgo_threads", "t%d" % k, "__init__.py"), "")
        for i in range(TREE_MODULES):
            write(os.path.join(root, "pgo_threads", "t%d" % k, "m%d.py" % i), "VALUE = %d\n" % i)
    write(os.path.join(root, "pgo_driver.py"), DRIVER)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--library", required=True, help="the instrumented libimptrace-training.so")
    ap.add_argument("--counts", required=True,
                    help="the .gcda file the instrumented library writes and the product's compilation reads")
    ap.add_argument("--report", required=True, help="a line per interpreter: trained or why not")
    ap.add_argument("--workdir", required=True, help="scratch directory (emptied first)")
    ap.add_argument("pythons", nargs="*")
    args = ap.parse_args()

    shutil.rmtree(args.workdir, ignore_errors=True)
    src = os.path.join(args.workdir, "program")
    generate(src)
    # Counts accumulate across runs into one file: a previous build's would be merged in,
    # or, from other code, refused.
    if os.path.exists(args.counts):
        os.remove(args.counts)
    lines = []
    for n, py in enumerate(p for p in args.pythons if p):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "IMPTRACE_")) and k != "LD_PRELOAD"}
        env.update(LD_PRELOAD=args.library, IMPTRACE_OUTPUT=os.path.join(args.workdir, "traces%d" % n) + "/")
        try:
            # Real runs mostly load cached bytecode: compiled first, untraced.
            subprocess.run([py, "-m", "compileall", "-q", src], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=300)
            rc = subprocess.run([py, os.path.join(src, "pgo_driver.py")], env=env, cwd=src,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            lines.append("skipped %s: %s" % (py, e))
            continue
        if rc.returncode != 0:
            last = rc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
            lines.append("skipped %s: exit status %d (%s)" % (py, rc.returncode, last[0]))
            continue
        lines.append("trained on %s" % py)
    if os.path.exists(args.counts):
        lines.append("profile: %s (%d bytes)" % (args.counts, os.path.getsize(args.counts)))
    else:
        lines.append("no profile: no interpreter ran the training; the tracer is built without one")
    for line in lines:
        print("imptrace pgo: " + line)
    write(args.report, "".join(line + "\n" for line in lines))
    shutil.rmtree(args.workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
