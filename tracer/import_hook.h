// The find-and-load hook: importlib._bootstrap._find_and_load (and _handle_fromlist)
// replaced in the module dict by C callables (no Python frame, so tracebacks are
// unchanged), so that every `import`, `__import__`, C PyImport_* and
// importlib.import_module call goes through find_and_load_hook.
#pragma once

#include "cpython_api.h"

namespace imptrace {

// Replaces importlib's functions in its bootstrap module's dict `d`. False when
// _find_and_load could not be replaced (nothing is traced in that interpreter).
bool hook_importlib(PyObject* d);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_sys_path();

}  // namespace imptrace
