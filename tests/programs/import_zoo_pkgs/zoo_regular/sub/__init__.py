"""Subpackage: a relative import of its own child and one from the parent."""
from .leaf import LEAF
from .. import helpers as _helpers

SUB = _helpers.HELP
