// PEP 810 lazy imports (3.15): where each lazy binding is declared and where its first use
// resolves it. A `lazy import x` stores a lazy import object under a module global; the
// first use replaces it with what it resolved to. Both are writes to the module's dict,
// seen by a dict watcher on every module dict from the moment the module enters
// sys.modules (before its code runs). A resolution that fails leaves the binding as it
// was: its failed import tells that story (Import records, importer = the first use).
#pragma once

#include "cpython_api.h"

namespace imptrace {

// Registers the watcher (main interpreter, GIL held, once); nothing before 3.15.
void observe_lazy_imports();

// `module` is entering sys.modules (its code has not run yet): its dict is watched.
void watch_lazy_bindings(PyObject* module);

}  // namespace imptrace
