"""Imported while circ_a is still executing: `import circ_a` gets the partly
initialised module from sys.modules (no second execution); its names are
only read later, at call time."""
import circ_a

A_DEFINED_WHEN_B_RAN = hasattr(circ_a, "A")

B = "B"


def b_and_a():
    return B + circ_a.A
