"""Loaded only through a direct __import__ call."""
DUNDER = "dunder"
