#include "object_description.h"

#include <stdio.h>
#include <string.h>

#include "object_identity.h"
#include "records.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

using namespace fields;

// Types live long and repeat (loader classes, proxy classes): cached like strings, holding
// a reference so that the address keeps meaning the same type.
constexpr size_t kTypeCache = 256;
struct TypeCacheSlot { PyObject* type; uint32_t id; uint32_t generation; };
struct TypeNames {
  TypeCacheSlot slots[kTypeCache];
};
TypeNames g_type_names;

constexpr char kBuiltins[] = "builtins";

uint32_t type_name_uncached(PyObject* type) {
  if (type == py.PyModule_Type) return TraceWriter::intern("module");
  Ref qn(getattr_n(type, NAME("__qualname__")));
  Ref mod(getattr_n(type, NAME("__module__")));
  if (!qn || !mod) py.PyErr_Clear();
  Py_ssize_t nq = 0, nm = 0;
  const char* q = str_utf8(qn.get(), &nq);
  const char* m = str_utf8(mod.get(), &nm);
  if (!q) return TraceWriter::intern("?");
  if (!m || (nm == sizeof kBuiltins - 1 && memcmp(m, kBuiltins, sizeof kBuiltins - 1) == 0))
    return TraceWriter::intern(q, static_cast<size_t>(nq));
  char buf[512];
  int n = snprintf(buf, sizeof buf, "%.*s.%.*s", static_cast<int>(nm), m, static_cast<int>(nq), q);
  return TraceWriter::intern(buf, n > 0 ? static_cast<size_t>(n) < sizeof buf ? n : sizeof buf - 1 : 0);
}

// The instance dict of any object, read without running user code (no __getattr__,
// no properties): modules through PyModule_GetDict, others through the generic slot.
PyObject* instance_dict(PyObject* o, bool is_module) {  // new reference or null
  if (is_module) {
    PyObject* d = py.PyModule_GetDict(o);
    if (d) py.Py_IncRef(d);
    return d;
  }
  PyObject* d = py.PyObject_GenericGetDict(o, nullptr);
  if (!d) { py.PyErr_Clear(); return nullptr; }
  if (!(py.PyType_GetFlags(type_of(d)) & TPFLAGS_DICT_SUBCLASS)) { py.Py_DecRef(d); return nullptr; }
  return d;
}

// A class overrides attribute access when its __getattr__/__getattribute__/__setattr__ is
// not what types.ModuleType has.
bool overrides(PyObject* type, Name& attr) {
  Ref mine(class_attr_n(type, attr));
  if (!mine) return false;
  Ref base(class_attr_n(py.PyModule_Type, attr));
  if (!base) return true;
  return mine.get() != base.get();
}

}  // namespace

uint32_t type_name(PyObject* type) {
  if (!in_main_interpreter()) return type_name_uncached(type);
  TypeCacheSlot& slot = g_type_names.slots[(reinterpret_cast<uintptr_t>(type) >> 4) & (kTypeCache - 1)];
  if (slot.type == type && slot.generation == TraceWriter::strings_epoch() && slot.id) return slot.id;
  uint32_t id = type_name_uncached(type);
  if (id) {
    py.Py_IncRef(type);
    PyObject* old = slot.type;
    slot = TypeCacheSlot{type, id, TraceWriter::strings_epoch()};
    if (old) py.Py_DecRef(old);
  }
  return id;
}

ObjectDescription describe(PyObject* o, PyObject* as_type, Ref* dict_out, PyObject** file_out) {
  ObjectDescription i;
  if (!o) return i;
  PyObject* type = as_type ? as_type : type_of(o);
  bool is_module = false;
  if (type == py.PyModule_Type) {
    i.flags = ObjectFlags::plain_module;
    is_module = true;
  } else {
    if (py.PyType_IsSubtype(type, py.PyModule_Type)) {
      i.flags = ObjectFlags::module_subclass;
      is_module = true;
      if (overrides(type, NAME("__getattr__")) || overrides(type, NAME("__getattribute__")) ||
          overrides(type, NAME("__setattr__")))
        i.flags |= ObjectFlags::proxy;
    } else {
      i.flags = ObjectFlags::proxy;
    }
  }
  // A plain module's type is not written (the flag says it): not looked up either.
  if (!(i.flags & ObjectFlags::plain_module)) i.type = type_name(type);
  // Modules and proxies are what the identity story is about; other objects (attribute
  // values handed out by proxies) keep a plain address.
  i.id = identity(o, is_module || (i.flags & ObjectFlags::proxy));
  Ref d(instance_dict(o, is_module));
  PyObject* file = nullptr;
  if (d) {
    i.name = intern_obj(dict_get_n(d.get(), NAME("__name__")));
    file = dict_get_n(d.get(), NAME("__file__"));
    i.file = intern_obj(file);
  }
  if (file_out) *file_out = dict_out && d ? file : nullptr;
  if (dict_out) dict_out->reset(d.release());
  return i;
}

void describe_error(PyObject* et, PyObject* ev, uint32_t* type, uint32_t* msg) {
  *type = et ? type_name(et) : 0;
  *msg = 0;
  if (!ev) return;
  Ref s(py.PyObject_Str(ev));
  if (!s) { py.PyErr_Clear(); return; }
  *msg = intern_obj(s.get());
}

void forget_lifetime_type_names() { memset(&g_type_names, 0, sizeof g_type_names); }

}  // namespace imptrace
