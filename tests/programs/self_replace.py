"""A module doing `sys.modules[__name__] = obj` while it is being imported."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "self_replace_pkgs"))


def main():
    import selfrep_mod
    entry = sys.modules["selfrep_mod"]
    print("import returned type: %s" % type(selfrep_mod).__name__)
    print("import returned the sys.modules entry: %s" % (selfrep_mod is entry))
    print("entry is a module: %s" % isinstance(entry, type(sys)))
    print("original module name kept by the object: %s" % entry.original_name())
    # `from X import name` reads the attribute from the replacement too.
    from selfrep_mod import answer
    print("from-import answer: %s, property reads: %s" % (answer, entry.reads))
    # A second import finds the replacement in sys.modules: nothing re-runs.
    import selfrep_mod as again
    print("second import is the same object: %s" % (again is entry))
    # Replaced through dict.update while its import is in progress.
    import selfupd_mod
    print("dict.update replacement: %s, value %s" % (type(sys.modules["selfupd_mod"]).__name__, selfupd_mod.value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
