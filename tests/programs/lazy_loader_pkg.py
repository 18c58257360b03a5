"""PEP 562 lazy submodules built by Debian's lazy_loader (python3-lazy-loader)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "lazy_loader_pkgs"))
# Debian's pure-Python packages; the pyenv interpreters don't search it.
from _debian import import_debian_package  # noqa: E402  (sibling helper)


def loaded():
    return sorted(n for n in sys.modules if n.startswith("llpkg."))


def main():
    if import_debian_package("lazy_loader") is None:
        print("SKIP: lazy_loader not installed (Debian package python3-lazy-loader)")
        return 0
    # lazy_loader imports everything at once when EAGER_IMPORT is set; this
    # program is about the lazy path.
    os.environ.pop("EAGER_IMPORT", None)

    import llpkg
    print("after import: submodules loaded %s" % loaded())
    print("__all__: %s" % sorted(llpkg.__all__))
    print("linalg.dot = %s" % llpkg.linalg.dot([1, 2, 3], [4, 5, 6]))
    print("after linalg: %s" % loaded())
    print("gaussian = %s" % llpkg.gaussian([1, 2, 3]))
    from llpkg import median
    print("median = %s" % median([5, 1, 3]))
    print("after filters: %s" % loaded())
    try:
        llpkg.not_there
    except AttributeError as exc:
        print("missing: AttributeError: %s" % exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
