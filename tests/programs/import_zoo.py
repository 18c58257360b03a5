"""Every way a module gets imported, in one program.

Each step is run with a snapshot of sys.modules around it, so the summary
says which step first loaded which module (computed, not written down here).
The `loaded-by import_module` line names the modules that went through
importlib's Python-level find-and-load only (importlib.import_module and the
parents it loads): `python -X importtime` does not list those on 3.8-3.13,
every other module in the summary it does.
"""
import importlib
import importlib.machinery
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Helper packages live beside this script; put them first on the path.
sys.path.insert(0, os.path.join(HERE, "import_zoo_pkgs"))

# The C extension module imported by do_extension: a shared-library extension
# on all of the pyenv builds and on Debian's python3.11 (where many others,
# _csv and array among them, are built in), and not imported at start-up.
EXTENSION = "_json"

loaded_by = {}
results = []


def step(label, action):
    before = set(sys.modules)
    try:
        value = action()
    except ImportError as exc:
        value = "%s: %s" % (type(exc).__name__, exc)
    for name in set(sys.modules) - before:
        loaded_by.setdefault(name, label)
    results.append((label, value))


def do_import():
    import zoo_plain
    return zoo_plain.PLAIN


def do_from_import():
    from zoo_regular import helpers
    import zoo_regular
    return "%s %s %s" % (helpers.HELP, zoo_regular.REGULAR, zoo_regular.sub.SUB)


def do_namespace():
    import zoo_ns.ns_mod
    from zoo_ns import ns_mod
    return ns_mod.NS


def do_import_module():
    dyn = importlib.import_module("zoo_regular.dyn_only")
    inner = importlib.import_module("zoo_dynpkg.inner")
    return dyn.DYN + " " + inner.INNER


def do_dunder_import():
    return __import__("zoo_dunder").DUNDER


def do_failing_import():
    import does_not_exist_xyz  # noqa: F401  (must fail)
    return "imported?!"


def do_extension():
    import _json as ext
    return "has scanstring: %s" % hasattr(ext, "scanstring")


def kind(module):
    spec = getattr(module, "__spec__", None)
    if spec is not None and spec.origin is not None and spec.origin.endswith(
            tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return "extension"
    if hasattr(module, "__path__"):
        # A namespace package has no file of its own (no __init__.py).
        return "package" if getattr(module, "__file__", None) else "namespace package"
    return "module"


def main():
    step("import", do_import)
    step("from-import", do_from_import)
    step("namespace", do_namespace)
    step("import_module", do_import_module)
    step("__import__", do_dunder_import)
    step("failing", do_failing_import)
    step("extension", do_extension)

    for label, value in results:
        print("step %-14s -> %s" % (label, value))
    print("does_not_exist_xyz in sys.modules: %s" % ("does_not_exist_xyz" in sys.modules))

    ours = sorted(n for n in loaded_by if n.startswith("zoo_") or n == EXTENSION)
    for name in ours:
        print("module %-24s %-18s loaded-by %s"
              % (name, kind(sys.modules[name]), loaded_by[name]))
    print("loaded-by import_module: %s" % " ".join(
        n for n in ours if loaded_by[n] == "import_module"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
