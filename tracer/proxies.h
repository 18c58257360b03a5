// Proxies: classes found under sys.modules keys that override attribute access, and
// PEP 562 module __getattr__. Each proxy class is recorded once (where its hooks are
// defined); its forwarding, and a module's __getattr__, is observed at the forwarding
// functions' C entry points (proxy_observer.h), which call back here to record each
// forward. No object Python code can reach is replaced or added.
#pragma once

#include "cpython_api.h"
#include "record_values.h"

namespace imptrace {

// Records the class of `obj` and observes its forwarding when its description says it is
// a proxy (and proxies are observed in this run).
void instrument_if_proxy(PyObject* obj, const ObjectDescription& described);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_proxy_classes();

}  // namespace imptrace
