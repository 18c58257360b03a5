// Observing sys.modules where it changes: the dict watcher (3.12+), dict's store slot and
// in-place methods (3.8-3.11: `sys.modules[k] = v`, `del sys.modules[k]`, pop, popitem,
// clear, update, setdefault, `|=`), and object's __class__ setter (a module under its own
// name changing class). What these miss on 3.8-3.11 (a STORE_SUBSCR outside importlib that
// 3.11 has specialised into a direct dict store; C code writing the dict directly) the
// shadow finds at the next import boundary (modules_shadow.h).
#pragma once

#include <stdint.h>

#include "cpython_api.h"
#include "record_values.h"

namespace imptrace {

// Records one change of sys.modules on this thread (writer lock held).
void emit_modules_change(uint32_t key, uint32_t op, const ObjectDescription* old_value,
                         const ObjectDescription* new_value, uint32_t precision, bool by_import,
                         const CodeLocation* stack, int stack_depth);

// Installs the observers on the main interpreter's sys.modules (GIL held, once).
// `importlib_dict`: _frozen_importlib's dict, whose functions store into sys.modules.
void observe_sys_modules(PyObject* modules, PyObject* importlib_dict);

// 3.11: at an import's end in the main interpreter, keeps importlib's stores into
// sys.modules in the form the store hook sees, once CPython has quickened their code
// (cpython_api.h, keep_stores_generic); a flag test once that is done.
void keep_importlib_stores_seen();

// Drops the finalised interpreter's importlib functions.
void forget_lifetime_importlib_stores();

// Whether object's __class__ setter could be replaced; if not, the audit hook's
// object.__setattr__ events stand in (note_class_assignment).
bool class_setter_observed();

// `obj.__class__ = new_type`, about to happen.
void note_class_assignment(PyObject* obj, PyObject* new_type);

}  // namespace imptrace
