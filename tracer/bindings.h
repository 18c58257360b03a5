// Bindings: after `import a.b.c`, whether `a.b` (as sys.modules has it) has `c` bound to
// the module the import produced. The parent package is found once at the import's end
// and handed both to the Binding record and to the sys.modules shadow.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cpython_api.h"
#include "thread_state.h"

namespace imptrace {

// The parent package of an import's name, as sys.modules holds it.
struct ParentPackage {
  bool submodule = false;       // the name has a parent (and it fits the buffer)
  const char* text = nullptr;   // the parent's name (in the caller's buffer)
  size_t len = 0;
  const char* attribute = nullptr;  // the last part of the name, which binds on the parent
  size_t attribute_len = 0;
  uint32_t id = 0;              // the parent's name as a string id
  PyObject* module = nullptr;   // sys.modules[parent] (borrowed; null: nothing there)
};

// `outer`: the import in progress around this one on this thread, if any: usually the
// parent package, whose __init__ imports its children, and then its name is the parent's
// name as a str already. `buf` receives the parent's name.
ParentPackage find_parent_package(PyObject* name, const InFlight* outer, char* buf, size_t cap);

// The Binding record of import `index` for a parent package that is in sys.modules.
// `now`: what sys.modules holds under the name (null: nothing); `child`: what the Import
// record just said the import produced (`now` when there is one). The record leaves the
// child (and the time and test, which are the import's) out when they agree.
void record_binding(uint64_t index, const ParentPackage& parent, PyObject* now, PyObject* child);

}  // namespace imptrace
