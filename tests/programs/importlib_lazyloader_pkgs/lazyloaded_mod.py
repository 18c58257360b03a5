"""Body runs only when an attribute of the lazily loaded module is first read."""
import sys

# Proof of when the body ran: the importer's log (a plain list in __main__).
sys.modules["__main__"].EXEC_LOG.append("lazyloaded_mod body executed")

VALUE = 7


def twice(x):
    return 2 * x
