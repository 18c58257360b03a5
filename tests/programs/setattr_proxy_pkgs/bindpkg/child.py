import sys

sys.modules["__main__"].EVENTS.append("bindpkg.child executed")

CHILD = "child value"
