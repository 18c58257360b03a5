"""Raises from a function called at module level, two imports deep."""


def _explode(depth):
    raise ValueError("exploded at depth %d" % depth)


_explode(2)
