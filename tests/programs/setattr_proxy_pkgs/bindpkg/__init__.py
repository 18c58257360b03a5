"""The real package behind the proxy: its body runs only when the proxy
decides to load it (here: when the import system binds a child onto it)."""
import sys

sys.modules["__main__"].EVENTS.append("bindpkg/__init__ executed")

GREETING = "hello from the real bindpkg"
