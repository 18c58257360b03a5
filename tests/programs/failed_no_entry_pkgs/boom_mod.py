"""Raises while executing: the import system removes its sys.modules entry."""
import sys

sys.modules["__main__"].ATTEMPTS.append("boom_mod")
PARTIAL = "defined before the error"
raise RuntimeError("boom during exec of boom_mod")
