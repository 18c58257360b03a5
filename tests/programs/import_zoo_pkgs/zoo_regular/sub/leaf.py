from ..helpers import HELP

LEAF = "leaf(" + HELP + ")"
