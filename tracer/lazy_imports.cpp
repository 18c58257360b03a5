#include "lazy_imports.h"

#include <string.h>

#include "code_location.h"
#include "object_description.h"
#include "process_state.h"
#include "pytest_context.h"
#include "record_encoder.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

int g_watcher = -1;
// Bindings recorded as lazy and not yet seen resolved, in any module: while there are
// none, a rebinding of a global needs no look at what it replaces.
uint64_t g_unresolved = 0;

// What the lazy object will import, as its repr names it ("<lazy_import 'pkg.mod'>"; a
// `lazy from pkg import attr` reads "pkg.attr"). The repr is C code of CPython's: no user
// code runs.
uint32_t lazy_target(PyObject* lazy) {
  Ref r(py.PyObject_Repr(lazy));
  if (!r) { py.PyErr_Clear(); return 0; }
  Py_ssize_t n = 0;
  const char* s = str_utf8(r.get(), &n);
  if (!s) return 0;
  const char* a = static_cast<const char*>(memchr(s, '\'', static_cast<size_t>(n)));
  const char* b = static_cast<const char*>(memrchr(s, '\'', static_cast<size_t>(n)));
  if (!a || !b || b <= a) return TraceWriter::intern(s, static_cast<size_t>(n));
  return TraceWriter::intern(a + 1, static_cast<size_t>(b - a - 1));
}

// The code that is running now: for a declaration the statement itself (importlib's own
// package declares lazy bindings too), for a first use the code beyond importlib (a
// `from m import name` reaches the binding through importlib's _handle_fromlist).
CodeLocation running_code(bool skip_importlib) {
  CodeLocation at[1];
  return capture_stack(at, 1, skip_importlib) > 0 ? at[0] : CodeLocation();
}

void record(PyObject* dict, PyObject* key, PyObject* value, bool declared) {
  ThreadState& t = ts();
  LazyBindingRecord r;
  r.declared = declared;
  PyObject* module_name = dict_get_n(dict, NAME("__name__"));
  r.module = module_name ? intern_obj(module_name) : 0;
  r.name = intern_obj(key);
  CodeLocation at = running_code(!declared);
  r.at = &at;
  ObjectDescription object;
  if (declared) {
    r.target = lazy_target(value);
  } else {
    object = describe(value);
    r.object = &object;
  }
  r.context = context_now(t, t.main_thread ? 0 : t.tid);
  encode_lazy_binding(r);
}

// Called before the dict changes. A lazy object stored: a declaration; a lazy object
// replaced by something else: its resolution at first use.
int lazy_watcher(int event, PyObject* dict, PyObject* key, PyObject* new_value) {
  if ((event != DICT_ADDED && event != DICT_MODIFIED) || !key || !new_value) return 0;
  bool declared = type_of(new_value) == py.PyLazyImport_Type;
  if (!declared && (event != DICT_MODIFIED || !g_unresolved)) return 0;
  if (!g_settings.enabled || finalizing() || !TraceWriter::usable()) return 0;
  ThreadState& t = ts();
  if (t.inside_tracer) return 0;
  if (!declared) {
    PyObject* old = dict_lookup(dict, key);
    if (!old || type_of(old) != py.PyLazyImport_Type) return 0;
  }
  InterpreterScope scope;
  ++t.inside_tracer;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  {
    WriterLock lock;
    record(dict, key, new_value, declared);
    TraceWriter::flush();
  }
  if (declared) ++g_unresolved;
  else if (g_unresolved) --g_unresolved;
  py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
  return 0;
}

}  // namespace

void observe_lazy_imports() {
  if (g_watcher >= 0 || !py.has_lazy_imports()) return;
  g_watcher = py.PyDict_AddWatcher(lazy_watcher);
  if (g_watcher < 0) py.PyErr_Clear();
}

void watch_lazy_bindings(PyObject* module) {
  if (g_watcher < 0 || !module) return;
  PyObject* type = type_of(module);
  if (type != py.PyModule_Type && !py.PyType_IsSubtype(type, py.PyModule_Type)) return;
  PyObject* d = py.PyModule_GetDict(module);  // borrowed; the module's own dict
  if (d && py.PyDict_Watch(g_watcher, d) < 0) py.PyErr_Clear();
}

}  // namespace imptrace
