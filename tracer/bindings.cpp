#include "bindings.h"

#include <string.h>

#include "object_description.h"
#include "object_identity.h"
#include "process_state.h"
#include "record_encoder.h"
#include "string_interning.h"
#include "trace_writer.h"

namespace imptrace {

using namespace fields;

ParentPackage find_parent_package(PyObject* name, const InFlight* outer, char* buf, size_t cap) {
  ParentPackage p;
  Py_ssize_t n = 0;
  const char* s = str_utf8(name, &n);
  if (!s) return p;
  const char* dot = static_cast<const char*>(memrchr(s, '.', static_cast<size_t>(n)));
  if (!dot) return p;
  size_t pl = static_cast<size_t>(dot - s);
  if (pl >= cap) return p;
  memcpy(buf, s, pl);
  buf[pl] = 0;
  PyObject* parent_name = nullptr;  // a str of the parent's name, if one is at hand
  if (outer && type_of(outer->name) == py.PyUnicode_Type) {  // a subclass's __eq__ could run code
    Py_ssize_t on = 0;
    const char* os = str_utf8(outer->name, &on);
    if (os && static_cast<size_t>(on) == pl && memcmp(os, s, pl) == 0) parent_name = outer->name;
  }
  PyObject* modules = g_main_interpreter.sys_modules;
  TextStr parent_str = parent_name ? TextStr() : text_str(buf, pl);
  p.submodule = true;
  p.text = buf;
  p.len = pl;
  p.attribute = dot + 1;
  p.attribute_len = static_cast<size_t>(n) - pl - 1;
  p.module = parent_name ? dict_lookup(modules, parent_name) : dict_get_text(modules, parent_str, buf);
  // The id now: parent_str's str may be freed when it goes, or by the next text_str.
  p.id = parent_name ? intern_obj(parent_name) : parent_str.get() ? intern_obj(parent_str.get()) : TraceWriter::intern(buf, pl);
  return p;
}

void record_binding(uint64_t index, const ParentPackage& parent, PyObject* now, PyObject* child) {
  PyObject* parent_obj = parent.module;
  // parent and attribute are the import's name split at its last dot: left out. The
  // parent module's own name and file are left out when it is the plain module named
  // `parent` (its import record has them); then they are not looked up either.
  Ref d;
  ObjectDescription pi;
  if (type_of(parent_obj) == py.PyModule_Type) {
    PyObject* pd = py.PyModule_GetDict(parent_obj);
    Py_ssize_t nn = 0;
    const char* pname = pd ? str_utf8(dict_get_n(pd, NAME("__name__")), &nn) : nullptr;
    if (pname && static_cast<size_t>(nn) == parent.len && memcmp(pname, parent.text, parent.len) == 0) {
      pi.id = identity(parent_obj, true);
      pi.flags = ObjectFlags::plain_module | ObjectFlags::elided_name_file;
      py.Py_IncRef(pd);
      d.reset(pd);
    }
  }
  if (!pi.id) pi = describe(parent_obj, nullptr, &d);  // not such a module: all of it
  PyObject* val =
      d ? dict_get_text(d.get(), text_str(parent.attribute, parent.attribute_len), parent.attribute) : nullptr;
  BindingRecord r;
  r.import_index = index;
  r.bound_on = pi;
  r.status = !val ? Binding::MISSING : val != child ? Binding::MISMATCH
           : (pi.flags & ObjectFlags::proxy) ? Binding::ON_PROXY : Binding::BOUND;
  ObjectDescription child_described, value_described;
  if (child && child != now) {
    child_described = describe(child);
    r.child = &child_described;
  }
  if (val && val != child) {
    value_described = describe(val);
    r.attribute_value = &value_described;
  }
  encode_binding(r);
}

}  // namespace imptrace
