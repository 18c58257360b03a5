"""Package loaded implicitly, as the parent of an importlib.import_module target."""
