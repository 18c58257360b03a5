"""Loaded only through importlib.import_module, never by an import statement."""
DYN = "dyn_only"
