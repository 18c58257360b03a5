// The find-and-load hook: every `import`, `__import__`, C PyImport_* and
// importlib.import_module call goes through find_and_load_hook, and `from ... import`
// through handle_fromlist_hook. importlib._bootstrap._find_and_load and _handle_fromlist
// are observed in place: the C entry point inside each function object
// (PyFunctionObject.vectorcall) is swapped for the hook, which runs CPython's own around
// its work, so the functions in the module dict, their code, names, docs, signatures and
// pickling stay what they are and tracebacks are unchanged. On 3.11, whose interpreter
// runs calls made by Python code without the entry point, _find_and_load in the dict is
// replaced by a C callable instead (python_calls_reach_function_entry).
#pragma once

#include "cpython_api.h"

namespace imptrace {

// Hooks importlib's functions in its bootstrap module's dict `d`. False when
// _find_and_load could not be hooked (nothing is traced in that interpreter).
bool hook_importlib(PyObject* d);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_sys_path();

}  // namespace imptrace
