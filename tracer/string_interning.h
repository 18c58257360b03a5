// Strings as the tracer meets them: str objects turned into the trace's string ids (with a
// cache by object), text turned into str objects for dict lookups (with a cache by text),
// and attribute names kept as interned str objects, one per call site.
//
// The caches of str objects the tracer made hold a reference to them (deliberate: a
// bounded number of small objects stay alive); the cache by object holds none and checks
// each hit against the str's own cached hash (string_interning.cpp). Main interpreter
// only: objects must not cross interpreters.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cpython_api.h"
#include "thread_state.h"

namespace imptrace {

// The string id of a str object (0: null, empty or not text). `fill`: false for walks over
// many strings seen once each (all of sys.modules' keys), which would only push out the
// strings that repeat, and incref and decref both.
uint32_t intern_obj(PyObject* s, bool fill = true);

// After Py_FinalizeEx has finished (no interpreter, no GIL, no other thread in the
// tracer): forgets what it kept of the finalised interpreter without touching it (its
// objects may be freed; the references held are deliberately leaked), so that the next
// lifetime starts as the first did.
void forget_lifetime_strings();

// Makes the pages of its table now, in one system call (tracer_memory::populate): slots are
// spread by hash, so a few hundred imports touch most of its pages, each first touch a
// fault (10-15 us on CI's virtual machines). Once, at the main interpreter's installation.
void populate_string_caches();

// Two str objects with the same text (without running a subclass's __eq__).
bool same_text(PyObject* a, PyObject* b);

// A str object for `text`, for lookups in the caller's scope: the text cache's (borrowed)
// when the text has been met before, else a new one this holder frees when it goes out
// of scope. Holds none when the text is too long for the cache or this is not the main
// interpreter (callers fall back to looking up by C string).
class TextStr {
 public:
  TextStr() = default;
  TextStr(PyObject* str, bool owned) : str_(str), owned_(owned) {}
  TextStr(const TextStr&) = delete;
  TextStr& operator=(const TextStr&) = delete;
  ~TextStr() { if (owned_) py.Py_DecRef(str_); }
  PyObject* get() const { return str_; }
 private:
  PyObject* str_ = nullptr;
  bool owned_ = false;
};
TextStr text_str(const char* text, size_t n);
// d[text] (borrowed, no error), through `str` when it holds one.
inline PyObject* dict_get_text(PyObject* d, const TextStr& str, const char* text) {
  return str.get() ? dict_lookup(d, str.get()) : py.PyDict_GetItemString(d, text);
}

// An attribute or key name the tracer looks up with. PyObject_GetAttrString and
// PyDict_GetItemString build and hash a new str on every call; NAME("x") gives each call
// site its own static holding the name's str, made once and interned (lookups hit the
// cached hash and compare by identity). Sub-interpreters use the String variants.
// The str is made again in each lifetime of the main interpreter (g_lifetime): 3.12+
// free interned strings when the interpreter is finalised, references or not.
struct Name { const char* text; PyObject* obj; uint32_t lifetime; };
inline PyObject* name_obj(Name& n) {
  if (!in_main_interpreter()) return nullptr;
  if (n.lifetime != g_lifetime) {
    n.obj = py.PyUnicode_InternFromString(n.text);  // deliberate: kept for the lifetime
    if (!n.obj) py.PyErr_Clear();
    n.lifetime = g_lifetime;
  }
  return n.obj;
}
#define NAME(lit) ([]() -> ::imptrace::Name& { static ::imptrace::Name n{lit, nullptr, 0}; return n; }())

inline PyObject* getattr_n(PyObject* o, Name& name) {  // new reference
  PyObject* n = name_obj(name);
  return n ? py.PyObject_GetAttr(o, n) : py.PyObject_GetAttrString(o, name.text);
}

// `read` (class_lookup or quiet_attribute) with the name's str: the interned one, or in a
// sub-interpreter (no interned names here) a str made for the call, as the type version
// tags those reads keep are shared by every interpreter of the process on 3.8-3.11; through
// getattr where `read` cannot read the class. New reference or null, no error.
inline PyObject* read_without_type_lookup(bool (*read)(PyObject*, PyObject*, PyObject**), PyObject* o,
                                          Name& name) {
  PyObject* n = name_obj(name);
  Ref made(n ? nullptr : py.PyUnicode_FromString(name.text));
  if (!n) n = made.get();
  PyObject* v = nullptr;
  if (n && read(o, n, &v)) return v;
  v = n ? py.PyObject_GetAttr(o, n) : nullptr;
  if (!v) py.PyErr_Clear();
  return v;
}

// What the class `type` or a base holds under `name`, read along its MRO (class_lookup).
inline PyObject* class_attr_n(PyObject* type, Name& name) {
  return read_without_type_lookup(class_lookup, type, name);
}

// `obj.name` for a code, frame or function object's own field (quiet_attribute).
inline PyObject* field_n(PyObject* obj, Name& name) { return read_without_type_lookup(quiet_attribute, obj, name); }

inline PyObject* dict_get_n(PyObject* d, Name& name) {  // borrowed, no error
  PyObject* n = name_obj(name);
  return n ? dict_lookup(d, n) : py.PyDict_GetItemString(d, name.text);
}

}  // namespace imptrace
