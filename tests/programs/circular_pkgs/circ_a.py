"""circ_a imports circ_b at the top, and circ_b imports circ_a back."""
import circ_b

A = "A"


def a_and_b():
    return A + circ_b.B
