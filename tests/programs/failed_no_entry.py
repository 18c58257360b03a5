"""An import whose module raises during exec: afterwards there is no
sys.modules entry, and importing again runs the body again."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "failed_no_entry_pkgs"))

ATTEMPTS = []


def try_import(name):
    try:
        __import__(name)
    except Exception as exc:  # the module's own exception propagates
        print("import %s: %s: %s" % (name, type(exc).__name__, exc))
    else:
        print("import %s: ok?!" % name)
    print("  %s in sys.modules: %s" % (name, name in sys.modules))


def main():
    try_import("boom_mod")
    try_import("boom_mod")
    print("boom_mod body runs: %d" % ATTEMPTS.count("boom_mod"))
    try_import("boom_pkg")
    print("  boom_pkg.ok_child left in sys.modules: %s" % ("boom_pkg.ok_child" in sys.modules))
    try_import("selfpop_mod")
    return 0


if __name__ == "__main__":
    sys.exit(main())
