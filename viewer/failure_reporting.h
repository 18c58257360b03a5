// What happens inside a test runner's failure reporting. When a test fails, pytest and
// unittest format the failure: they import modules (typing, importlib.abc, ...), read
// source through linecache, and inspect.getmodule reads __file__ from every object in
// sys.modules, so every proxy there is asked for it. Those imports and lookups are
// consequences of the failure, never its cause: the diff folds them into one entry below
// the causes, and show counts them apart from its anomalies.
#pragma once

#include <vector>

#include "model.h"

namespace imptrace {
namespace model {

// One frame of failure reporting: pytest's traceback and report formatting
// (_pytest/_code/, _pytest/reports.py, _pytest/terminal.py, repr_failure), unittest's
// (unittest/result.py) and the stdlib's traceback and linecache modules (traceback imports
// ast and unicodedata to draw its carets, 3.13's linecache imports tokenize).
bool is_failure_reporting_frame(const Location& loc);
// Some frame of `stack` (innermost first) is one of the above.
bool in_failure_reporting(const std::vector<Location>& stack);
// An import of `p` made inside failure reporting: its importer or trigger is such a frame
// (in a function: a reporting module's top-level imports are its own import), or that of
// an import enclosing it (what `import ast` in traceback.py imports in turn).
bool import_in_failure_reporting(const Process& p, const Import& im);

}  // namespace model
}  // namespace imptrace
