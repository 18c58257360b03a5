"""importlib.util.LazyLoader: the module object sits in sys.modules with type
importlib.util._LazyModule and an unexecuted body until its first attribute
access, which runs the body and turns the object into a plain module."""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "importlib_lazyloader_pkgs"))

EXEC_LOG = []


def lazy_import(name):
    # The recipe from the importlib documentation.
    spec = importlib.util.find_spec(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module


def main():
    mod = lazy_import("lazyloaded_mod")
    entry = sys.modules["lazyloaded_mod"]
    print("in sys.modules, same object: %s" % (entry is mod))
    print("type before first access: %s" % type(mod).__name__)
    print("body executed before access: %s" % EXEC_LOG)
    print("VALUE = %s" % mod.VALUE)
    print("type after first access: %s" % type(mod).__name__)
    print("body executed after access: %s" % EXEC_LOG)
    print("twice(21) = %s" % mod.twice(21))
    print("still the same object: %s" % (sys.modules["lazyloaded_mod"] is mod))
    # A later import statement finds the (now executed) entry; nothing re-runs.
    import lazyloaded_mod
    print("import statement got it: %s, executions: %d" % (lazyloaded_mod is mod, len(EXEC_LOG)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
