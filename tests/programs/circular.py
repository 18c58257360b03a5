"""A circular import between two modules (works), and the `from X import
name` variant that fails on a partially initialised module (both entries are
removed from sys.modules again)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKGS = os.path.join(HERE, "circular_pkgs")
sys.path.insert(0, PKGS)


def main():
    import circ_a
    import circ_b
    print("circ_a.a_and_b() = %s" % circ_a.a_and_b())
    print("circ_b.b_and_a() = %s" % circ_b.b_and_a())
    print("circ_a.A defined when circ_b ran: %s" % circ_b.A_DEFINED_WHEN_B_RAN)
    print("circ_b.circ_a is circ_a: %s" % (circ_b.circ_a is circ_a))
    try:
        import circ_c  # noqa: F401
    except ImportError as exc:
        # The message ends with the file path; print it relative to this dir.
        message = str(exc).replace(HERE + os.sep, "")
        print("circ_c: %s: %s" % (type(exc).__name__, message))
    print("after failure: circ_c in sys.modules %s, circ_d in sys.modules %s"
          % ("circ_c" in sys.modules, "circ_d" in sys.modules))
    return 0


if __name__ == "__main__":
    sys.exit(main())
