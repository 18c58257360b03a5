from circ_c import LATE
