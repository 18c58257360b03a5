"""Loaded only through importlib.import_module (its parent with it)."""
INNER = "inner"
