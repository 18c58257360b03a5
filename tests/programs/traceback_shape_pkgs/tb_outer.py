"""Imports tb_inner, which fails while executing."""
import tb_inner  # noqa: F401

NEVER = "not reached"
