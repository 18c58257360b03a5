// 3.8-3.11 have no way to watch a dict, so the tracer keeps a shadow of sys.modules (key
// -> the object and its description) and compares at import boundaries. A full
// comparison is O(len(sys.modules)); it runs when the size disagrees with the shadow and
// at top-level import boundaries (there, when it would only confirm that nothing changed,
// within the time budget of walk_budget.h), and the keys on the import path are checked at every
// boundary. Changes are therefore found no later than the next such boundary, and carry
// the stack active then (precision AT_BOUNDARY). Everything here runs with the writer lock
// held, in the main interpreter.
#pragma once

#include <stdint.h>

#include "cpython_api.h"
#include "record_values.h"
#include "thread_state.h"

namespace imptrace {

// Adopts key -> value (null: the key is gone) into the shadow without recording: the
// change was recorded exactly where it happened, or is the import system's own insertion
// (`describe_value` false: described later, from the import record).
void shadow_adopt(PyObject* key, PyObject* value, bool describe_value);

// Around a change of sys.modules that a hook saw and that is the import system's own on the
// name it is importing (its insertion, its pop and re-insertion; these run none of the
// program's code), with sys.modules' version tags before and after it. While every change
// since the last full comparison is one of these, a top-level boundary (whose checks of the
// import's own name and of the size found nothing) has nothing left for a walk to confirm:
// any other change, seen or not, moves the version tag without passing here. 3.8-3.10,
// where the import system's stores reach the hooks: no walk at all for a run of top-level
// imports (3.11 specialises importlib's store past the hook: budgeted walks as before).
void shadow_note_import_system_change(uint64_t before, uint64_t after);

// What an import's end found in sys.modules (the boundary does not look it up again).
struct ImportEndView {
  bool ok;                             // the import succeeded: the next two are known
  PyObject* value;                     // sys.modules[name] (null: nothing there)
  const ObjectDescription* described;  // `value` described
  PyObject* inserted;                  // what the import system put under the name, if known
  bool submodule;                      // the name has a parent package: the next two are known
  uint32_t parent_id;                  // the parent's name (a string id)
  PyObject* parent;                    // sys.modules[parent] (null: nothing there)
};

// After an import's end, outside the writer lock, no error pending, inside_tracer held:
// the first time the walk budget (walk_budget.h) has put a comparison off, registers an
// atexit function that makes it if no later boundary did (atexit's own import, when it is
// not loaded yet, is the tracer's: not recorded, and on 3.10+ removed from sys.modules
// again so that the program's own import of it is still made and recorded).
void shadow_register_owed_walk_at_exit();

// An import's start: brings the shadow up to date before `name` (string id `name_id`) is
// imported. `top_level`: no import in progress on this thread (a full comparison is due).
void shadow_at_import_start(ThreadState& t, PyObject* name, uint32_t name_id, bool top_level);
// An import's end: the same, with what the import's end already found.
void shadow_at_import_end(ThreadState& t, PyObject* name, uint32_t name_id, bool top_level,
                          const ImportEndView& found);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_shadow();

}  // namespace imptrace
