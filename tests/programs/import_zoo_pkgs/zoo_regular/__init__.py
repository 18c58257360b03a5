"""Regular package whose init pulls its children in with relative imports."""
from . import helpers
from .sub import LEAF

REGULAR = "regular+" + LEAF
