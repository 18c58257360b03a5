"""A hand-made PEP 562 (module __getattr__) lazy-submodule package."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "pep562_lazy_pkgs"))


def loaded():
    return sorted(n for n in sys.modules if n.startswith("lazy562."))


def main():
    import lazy562
    print("after import: submodules loaded %s" % loaded())
    print("dir lists lazy names: %s" % all(n in dir(lazy562) for n in ("heavy", "other")))
    print("heavy.VALUE = %s" % lazy562.heavy.VALUE)
    print("heavy again = %s" % lazy562.heavy.VALUE)
    print("after heavy: submodules loaded %s, __getattr__ loads %s" % (loaded(), lazy562.LOADS))
    from lazy562 import other
    print("from-import other: %s" % other.VALUE)
    try:
        lazy562.missing_attr
    except AttributeError as exc:
        print("missing: AttributeError: %s" % exc)
    # getattr with a default swallows the __getattr__ AttributeError.
    print("getattr default: %s" % getattr(lazy562, "nope", "default"))
    print("final: submodules loaded %s, __getattr__ loads %s" % (loaded(), lazy562.LOADS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
