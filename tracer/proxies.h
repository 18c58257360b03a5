// Proxies: classes found under sys.modules keys that override attribute access, and
// PEP 562 module __getattr__, get a C wrapper around their __getattr__/__setattr__ so that
// their forwarding is recorded. Nothing else in the program is touched.
#pragma once

#include "cpython_api.h"
#include "record_values.h"

namespace imptrace {

// Instruments the class of `obj` when its description says it is a proxy (and proxies are
// instrumented in this run).
void instrument_if_proxy(PyObject* obj, const ObjectDescription& described);

// Wraps a module's own PEP 562 __getattr__, if it has one.
void instrument_module_getattr(PyObject* module);

}  // namespace imptrace
