// Object identity and death. An address alone is not an identity: a module that dies (a
// failed import, a replaced proxy) frees its address for the next object. Objects the
// story is about (modules and proxies) are watched for their death, which bumps a
// generation for that address.
#pragma once

#include <stdint.h>

#include "cpython_api.h"

namespace imptrace {

// The id of `o` in the trace. Tracked objects (`track`: modules and proxies) get a dense
// serial number, 1 or 2 bytes in the trace instead of an address's 7, which changes when
// the object dies. Others get their address (plus the address's generation), marked so it
// can never equal a serial.
uint64_t identity(PyObject* o, bool track);

// Whether an id is a tracked object's serial (whose death the trace sees), not an address.
inline bool tracked_identity(uint64_t id) { return id && id < (1ull << 62); }

// Bumps whenever a tracked object dies: whoever keeps an address with its id checks the id
// again when this moved.
uint32_t identity_deaths();

// types.ModuleType's dealloc, replaced by the bootstrap: plain modules are watched for
// their death there, with nothing allocated per module.
void watch_module_deaths();

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_identities();

}  // namespace imptrace
