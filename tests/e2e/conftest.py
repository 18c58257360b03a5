"""Every e2e run says which interpreters it ran on (in the summary, even with -q)."""
from e2e_util import interpreters


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line("imptrace e2e interpreters: " + " ".join(interpreters()))
