// Describing objects: what the trace says about a module, a proxy or a value (its identity,
// type, flags, __name__ and __file__), read without running the program's code where that
// can be avoided.
#pragma once

#include <stdint.h>

#include "cpython_api.h"
#include "record_values.h"

namespace imptrace {

// `as_type`: describe the object as if its class were already this one (a __class__
// assignment seen just before it happens). `dict_out`, when given, receives the instance
// dict the description was read from (callers that read more of it do not look it up
// again), and `file_out` the __file__ found there (borrowed from that dict; null when none)
// whose id is the description's `file`.
ObjectDescription describe(PyObject* o, PyObject* as_type = nullptr, Ref* dict_out = nullptr,
                           PyObject** file_out = nullptr);

// "pkg.mod.QualName" for classes, "module" for plain modules (a string id).
uint32_t type_name(PyObject* type);

// Exception type and message of a fetched error; str() of builtin exceptions only runs
// CPython's own code.
void describe_error(PyObject* et, PyObject* ev, uint32_t* type, uint32_t* msg);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_type_names();

}  // namespace imptrace
