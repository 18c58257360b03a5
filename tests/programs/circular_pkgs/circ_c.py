"""The failing shape: circ_d does `from circ_c import LATE` before LATE exists."""
import circ_d

LATE = "late"
