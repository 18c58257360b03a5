// Names of imports in progress on any thread: their sys.modules entries are the import
// system's own, not news for the 3.8-3.11 shadow. Touched with the writer lock held.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cpython_api.h"

namespace imptrace {

// `id`: the name's string id, 0 for a name that is not text; `delta` +1 when an import of
// it begins, -1 when it ends; `name`: the name, kept (main interpreter) for boundaries that
// look other threads' imports up.
void inflight_add(uint32_t id, int delta, PyObject* name = nullptr);

// Whether an import of `id` is in progress; `inserted` receives what the import system put
// under the name, when that is known.
bool name_in_flight(uint32_t id, PyObject** inserted);

// What the import system put under a name in flight (InFlight::inserted; null: forget it).
void inflight_note_inserted(uint32_t id, PyObject* value);

// How many names are in flight, and the one at `active_index` (< inflight_count(), in no
// particular order): false when it was not given as a str the table could keep.
struct InFlightName { uint32_t id; PyObject* name; PyObject* inserted; };
size_t inflight_count();
bool inflight_name_at(size_t active_index, InFlightName* out);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_in_flight();

// Makes the pages of its table now, in one system call (tracer_memory::populate): slots are
// spread by hash, so a few hundred imports touch most of its pages, each first touch a
// fault (10-15 us on CI's virtual machines). Once, at the main interpreter's installation.
void populate_in_flight();

}  // namespace imptrace
