#include "modules_observer.h"

#include "access_repeats.h"
#include "code_location.h"
#include "imports_in_flight.h"
#include "lazy_imports.h"
#include "modules_shadow.h"
#include "object_description.h"
#include "object_identity.h"
#include "process_state.h"
#include "proxies.h"
#include "pytest_context.h"
#include "record_encoder.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

using namespace fields;

// dict's methods observed on sys.modules (3.8-3.11), with the calling convention each has
// there (the same in every one of those versions).
enum DictMethod { kPop, kPopitem, kClear, kUpdate, kSetdefault, kDictMethods };

struct ModulesObservers {
  ObjObjArgProc orig_ass_subscript;  // dict's store slot (3.8-3.11)
  SetterFn orig_class_setter;        // object's __class__ setter
  void* orig_method[kDictMethods];   // dict's methods' C functions (3.8-3.11)
  BinaryFunc orig_inplace_or;        // dict's `|=` (3.9-3.11)
};
ModulesObservers g_observers;

// A change about to happen (described already), with the stack that makes it.
void record_exact_change(uint32_t key, uint32_t op, const ObjectDescription* old_value,
                         const ObjectDescription* new_value) {
  CodeLocation stack[kStackDepth];
  int ns = capture_stack(stack, kStackDepth, false);
  emit_modules_change(key, op, old_value, new_value, ModulesChange::EXACT, ns > 0 && stack[0].importlib, stack, ns);
}

// ---- sys.modules[k] = v / del sys.modules[k] (3.8-3.11) --------------------------------
// One key of sys.modules changed from `old` to `value` (null: absent) by the code on the
// stack now, which is the caller's (dict's store slot and methods are C and make no frame).
// Writer lock held, inside the tracer, `old` still referenced. `cur`: the import in
// progress on this thread, if it belongs to this file.
void record_store(InFlight* cur, PyObject* key, PyObject* old, PyObject* value) {
  CodeLocation stack[kStackDepth];
  int ns = capture_stack(stack, kStackDepth, false);
  ObjectDescription oi = describe(old), ni = describe(value);
  bool by_import = ns > 0 && stack[0].importlib;
  emit_modules_change(intern_obj(key), value ? ModulesChange::SET : ModulesChange::DELETE, old ? &oi : nullptr,
                      value ? &ni : nullptr, ModulesChange::EXACT, by_import, stack, ns);
  shadow_adopt(key, value, true);
  if (value) instrument_if_proxy(value, ni);
  if (!value && cur && old == cur->inserted) {
    // The import's own insertion, deleted where it was seen: recorded here, so the
    // boundary must not report it again. `old` still holds a reference.
    if (cur->name_epoch == TraceWriter::strings_epoch()) inflight_note_inserted(cur->name_id, nullptr);
    py.Py_DecRef(cur->inserted);
    cur->inserted = nullptr;
  }
}

int dict_ass_subscript_hook(PyObject* mp, PyObject* key, PyObject* value) {
  ObjObjArgProc orig = g_observers.orig_ass_subscript;
  if (mp != sys_modules() || !g_settings.enabled || finalizing()) return orig(mp, key, value);
  InterpreterScope scope;
  ThreadState& t = ts();
  if (t.inside_tracer || !TraceWriter::usable()) return orig(mp, key, value);
  PyObject* old = py.PyDict_GetItem(mp, key);
  InFlight* in = t.depth > 0 && t.depth <= kMaxDepth ? &t.stack[t.depth - 1] : nullptr;
  if (value && !old && in && (!in->inserted || in->inserted == value) &&
      in->generation == TraceWriter::generation() && same_text(key, in->name)) {
    // The import system inserting the module it loads, or putting it back after popping
    // it (to move it to the end): nothing to record (its Import record tells it, as on
    // 3.12+), and the shadow takes it from sys.modules at the next boundary. Here it is
    // only noted, with a reference. No old value is released: the store runs no code.
    uint64_t before = dict_version(mp);
    int rc = orig(mp, key, value);
    if (rc == 0) shadow_note_import_system_change(before, dict_version(mp));
    if (rc == 0 && !in->inserted) {
      py.Py_IncRef(value);
      in->inserted = value;
      if (in->name_epoch == TraceWriter::strings_epoch()) inflight_note_inserted(in->name_id, value);
    }
    return rc;
  }
  if (old) py.Py_IncRef(old);  // described after the store, so kept alive until then
  int rc = orig(mp, key, value);
  if (rc == 0 && old != value) {
    ++t.inside_tracer;
    PyObject *et, *ev, *tb;
    py.PyErr_Fetch(&et, &ev, &tb);
    {
      WriterLock lock;
      InFlight* cur = in && in->generation == TraceWriter::generation() ? in : nullptr;  // as innermost(t)
      bool key_is_import = cur && same_text(key, cur->name);
      if (value && !old && key_is_import) {
        shadow_adopt(key, value, false);  // the import system inserting the module it loads
      } else {
        record_store(cur, key, old, value);
        TraceWriter::flush();
      }
    }
    py.PyErr_Restore(et, ev, tb);
    --t.inside_tracer;
  }
  if (old) py.Py_DecRef(old);
  return rc;
}

// ---- sys.modules.pop(k), popitem(), clear(), update(...), setdefault(k), |= (3.8-3.11) ---
// dict's C functions, swapped in its method table (cpython_api.h, patch_dict_method). Any
// other dict pays one pointer compare before its own function runs.

// What a method call on sys.modules changed, compared after it ran: the value under `key`
// (pop, setdefault), the (key, value) pair it returns (popitem: `popped`), or everything
// (`before`: a copy of sys.modules taken before the call; clear, update, |=).
void record_method_changes(ThreadState& t, PyObject* modules, PyObject* key, PyObject* old, PyObject* before,
                           PyObject* popped) {
  InFlight* cur = t.depth > 0 && t.depth <= kMaxDepth && t.stack[t.depth - 1].generation == TraceWriter::generation()
                      ? &t.stack[t.depth - 1]
                      : nullptr;
  if (key) {
    PyObject* now = py.PyDict_GetItem(modules, key);
    if (now != old) record_store(cur, key, old, now);
  } else if (popped) {
    if ((py.PyType_GetFlags(type_of(popped)) & TPFLAGS_TUPLE_SUBCLASS) && py.PyTuple_Size(popped) == 2) {
      PyObject* k = py.PyTuple_GetItem(popped, 0);
      if (!py.PyDict_GetItem(modules, k)) record_store(cur, k, py.PyTuple_GetItem(popped, 1), nullptr);
    }
  } else if (before) {
    // Both sides as copies: recording (describing objects, instrumenting proxies) must not
    // iterate the live dict.
    Ref after(py.PyDict_Copy(modules));
    if (!after) { py.PyErr_Clear(); return; }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (py.PyDict_Next(before, &pos, &k, &v)) {
      PyObject* now = py.PyDict_GetItem(after.get(), k);
      if (now != v) record_store(cur, k, v, now);
    }
    pos = 0;
    while (py.PyDict_Next(after.get(), &pos, &k, &v))
      if (!py.PyDict_GetItem(before, k)) record_store(cur, k, nullptr, v);
  }
}

// Runs `call` (CPython's own method on sys.modules) and records what it changed. `key`:
// the one key the method can change, if it has one. `whole`: compare all of sys.modules
// (else, without a key, the method is popitem and its result says what it removed).
template <typename Call>
PyObject* observe_method(PyObject* modules, PyObject* key, bool whole, Call call) {
  ThreadState& t = ts();
  if (!g_settings.enabled || t.inside_tracer || finalizing() || !TraceWriter::usable()) return call();
  InterpreterScope scope;
  if (key) {
    // The import system's own pop-and-reinsert of the module it loads (3.8-3.11
    // _load_unlocked): the re-insert is told apart at the store slot, as before.
    const InFlight* in = innermost(t);
    if (in && same_text(key, in->name) && caller_is_importlib()) {
      // pop hands the value to its caller (setdefault keeps it): nothing released, no code run.
      uint64_t before = dict_version(modules);
      PyObject* res = call();
      if (res) shadow_note_import_system_change(before, dict_version(modules));
      return res;
    }
  }
  ++t.inside_tracer;
  PyObject* old = key ? py.PyDict_GetItem(modules, key) : nullptr;
  if (old) py.Py_IncRef(old);
  PyObject* before = whole ? py.PyDict_Copy(modules) : nullptr;
  if (whole && !before) py.PyErr_Clear();
  --t.inside_tracer;
  // The call may run the program's code (update's argument, a key's __eq__): not inside
  // the tracer, and the changes are compared even when it fails part way.
  PyObject* res = call();
  ++t.inside_tracer;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  {
    WriterLock lock;
    record_method_changes(t, modules, key, old, before, key || whole ? nullptr : res);
    TraceWriter::flush();
  }
  py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
  if (old) py.Py_DecRef(old);
  if (before) py.Py_DecRef(before);
  return res;
}

typedef PyObject* (*FastMethod)(PyObject*, PyObject* const*, Py_ssize_t);
typedef PyObject* (*NoArgsMethod)(PyObject*, PyObject*);
typedef PyObject* (*KeywordsMethod)(PyObject*, PyObject*, PyObject*);

// Each hook is a compare and a tail call to CPython's function for any other dict; the
// observing path is out of line so that the hook needs no stack frame of its own.
// pop(key[, default]) and setdefault(key[, default]) take the key first and share one
// hook, instantiated per method so that each reads its own saved function.
template <DictMethod kMethod>
[[gnu::noinline]] PyObject* key_method_observed(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  auto orig = reinterpret_cast<FastMethod>(g_observers.orig_method[kMethod]);
  return observe_method(self, args[0], false, [&] { return orig(self, args, nargs); });
}
template <DictMethod kMethod>
PyObject* dict_key_method_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  if (__builtin_expect(self != sys_modules() || nargs < 1, 1))
    return reinterpret_cast<FastMethod>(g_observers.orig_method[kMethod])(self, args, nargs);
  return key_method_observed<kMethod>(self, args, nargs);
}

// popitem() and clear() take no argument; clear changes every key at once (`whole`).
template <DictMethod kMethod, bool kWhole>
[[gnu::noinline]] PyObject* no_args_method_observed(PyObject* self, PyObject* unused) {
  auto orig = reinterpret_cast<NoArgsMethod>(g_observers.orig_method[kMethod]);
  return observe_method(self, nullptr, kWhole, [&] { return orig(self, unused); });
}
template <DictMethod kMethod, bool kWhole>
PyObject* dict_no_args_method_hook(PyObject* self, PyObject* unused) {
  if (__builtin_expect(self != sys_modules(), 1))
    return reinterpret_cast<NoArgsMethod>(g_observers.orig_method[kMethod])(self, unused);
  return no_args_method_observed<kMethod, kWhole>(self, unused);
}

[[gnu::noinline]] PyObject* update_observed(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto orig = reinterpret_cast<KeywordsMethod>(g_observers.orig_method[kUpdate]);
  return observe_method(self, nullptr, true, [&] { return orig(self, args, kwargs); });
}
PyObject* dict_update_hook(PyObject* self, PyObject* args, PyObject* kwargs) {
  if (__builtin_expect(self != sys_modules(), 1))
    return reinterpret_cast<KeywordsMethod>(g_observers.orig_method[kUpdate])(self, args, kwargs);
  return update_observed(self, args, kwargs);
}

[[gnu::noinline]] PyObject* inplace_or_observed(PyObject* self, PyObject* other) {
  BinaryFunc orig = g_observers.orig_inplace_or;
  return observe_method(self, nullptr, true, [&] { return orig(self, other); });
}
PyObject* dict_inplace_or_hook(PyObject* self, PyObject* other) {
  if (__builtin_expect(self != sys_modules(), 1)) return g_observers.orig_inplace_or(self, other);
  return inplace_or_observed(self, other);
}

void observe_dict_methods() {
  struct Entry { DictMethod which; const char* name; int flags; void* hook; };
  const Entry entries[] = {
      {kPop, "pop", METH_FASTCALL, reinterpret_cast<void*>(dict_key_method_hook<kPop>)},
      {kPopitem, "popitem", METH_NOARGS, reinterpret_cast<void*>(dict_no_args_method_hook<kPopitem, false>)},
      {kClear, "clear", METH_NOARGS, reinterpret_cast<void*>(dict_no_args_method_hook<kClear, true>)},
      {kUpdate, "update", METH_VARARGS | METH_KEYWORDS, reinterpret_cast<void*>(dict_update_hook)},
      {kSetdefault, "setdefault", METH_FASTCALL, reinterpret_cast<void*>(dict_key_method_hook<kSetdefault>)},
  };
  // With the GIL held no call can reach a hook before its original is stored.
  for (const Entry& e : entries)
    if (!g_observers.orig_method[e.which]) g_observers.orig_method[e.which] = patch_dict_method(e.name, e.flags, e.hook);
  if (!g_observers.orig_inplace_or) g_observers.orig_inplace_or = patch_dict_inplace_or(dict_inplace_or_hook);
}

// ---- dict watcher (3.12+) -------------------------------------------------------------
void drop_pending_pop(ThreadState& t) {
  py.Py_DecRef(t.pending_pop_key);
  t.pending_pop_key = nullptr;
  t.pending_pop_value = nullptr;
}

// Whether the code deleting a key is importlib's own (_load_unlocked's pop, which it
// re-inserts at once, or its removal of a module whose execution failed): the running
// frame's globals are importlib._bootstrap's. PyEval_GetGlobals reads them without making
// a frame object (which asking for the frame's code would: hundreds of instructions per
// import). Unknown: taken as importlib's.
bool deleted_by_import_system() {
  PyObject* bootstrap = g_main_interpreter.bootstrap_dict;
  if (!bootstrap || !py.PyEval_GetGlobals) return true;
  return py.PyEval_GetGlobals() == bootstrap;
}

int modules_watcher(int event, PyObject* dict, PyObject* key, PyObject* new_value) {
  if (!g_settings.enabled || dict != sys_modules() || finalizing()) return 0;
  ThreadState& t = ts();
  if (t.inside_tracer) return 0;
  // Two of the three events of every import are the import system's own: inserting the
  // module it loads, and re-inserting it after its pop. Told apart by identity alone, they
  // return before any locking or error juggling.
  if (event == DICT_ADDED && key) {
    if (t.pending_pop_key == key && t.pending_pop_value == new_value) {
      drop_pending_pop(t);
      return 0;
    }
    const InFlight* in = innermost(t);
    if (!t.pending_pop_key && in && in->name == key) {
      watch_lazy_bindings(new_value);  // before the module's code runs
      return 0;
    }
  } else if (event == DICT_DELETED && key && !t.pending_pop_key) {
    // The pop half of the import system's pop-and-reinsert (3.12+ _load_unlocked): held
    // until the re-insert, as below, without the slow path's error juggling. Only
    // importlib's own pop: a module taking itself out during its own import is a removal.
    const InFlight* in = innermost(t);
    if (in && in->name == key && !py.PyErr_Occurred() && deleted_by_import_system()) {
      if (PyObject* old = dict_lookup(dict, key)) {
        py.Py_IncRef(key);
        t.pending_pop_key = key;
        t.pending_pop_value = old;
        return 0;
      }
    }
  }
  InterpreterScope scope;
  ++t.inside_tracer;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  {
    WriterLock lock;
    const InFlight* in = innermost(t);
    bool key_is_import = in && key && same_text(key, in->name);
    if (event == DICT_ADDED && t.pending_pop_key && same_text(key, t.pending_pop_key) &&
        new_value == t.pending_pop_value) {
      drop_pending_pop(t);  // the import system's pop-and-reinsert: no news
    } else {
      if (t.pending_pop_key) {
        // A pop that was not followed by a re-insert: the import system removed the entry
        // (a failed import), or a pop by someone else.
        ObjectDescription oi;
        oi.id = identity(t.pending_pop_value, false);
        emit_modules_change(intern_obj(t.pending_pop_key), ModulesChange::DELETE, &oi, nullptr,
                            ModulesChange::EXACT, true, nullptr, 0);
        drop_pending_pop(t);
      }
      PyObject* old = key && event != DICT_CLONED ? py.PyDict_GetItem(dict, key) : nullptr;
      if (event == DICT_ADDED || event == DICT_MODIFIED) watch_lazy_bindings(new_value);
      if (event == DICT_ADDED && key_is_import) {
        // The import system's own insertion of the module it is loading: the Import
        // record says it; only later replacements are news.
      } else if (event == DICT_DELETED && key_is_import && old && deleted_by_import_system()) {
        py.Py_IncRef(key);
        t.pending_pop_key = key;
        t.pending_pop_value = old;
      } else if (event == DICT_ADDED || event == DICT_MODIFIED) {
        if (old != new_value) {
          CodeLocation stack[kStackDepth];
          int ns = capture_stack(stack, kStackDepth, false);
          ObjectDescription oi = describe(old), ni = describe(new_value);
          bool by_import = ns > 0 && stack[0].importlib;
          emit_modules_change(intern_obj(key), ModulesChange::SET, old ? &oi : nullptr, &ni,
                              ModulesChange::EXACT, by_import, stack, ns);
          instrument_if_proxy(new_value, ni);
        }
      } else if (event == DICT_DELETED) {
        CodeLocation stack[kStackDepth];
        int ns = capture_stack(stack, kStackDepth, false);
        ObjectDescription oi = describe(old);
        bool by_import = ns > 0 && stack[0].importlib;
        emit_modules_change(intern_obj(key), ModulesChange::DELETE, old ? &oi : nullptr, nullptr,
                            ModulesChange::EXACT, by_import, stack, ns);
      } else if (event == DICT_CLONED && key) {
        // `sys.modules.update(d)` (or `|=`) on an emptied sys.modules: CPython copies d's
        // table whole and says so once, with d as `key`. Each of d's keys arrives.
        CodeLocation stack[kStackDepth];
        int ns = capture_stack(stack, kStackDepth, false);
        bool by_import = ns > 0 && stack[0].importlib;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (py.PyDict_Next(key, &pos, &k, &v)) {
          ObjectDescription ni = describe(v);
          emit_modules_change(intern_obj(k), ModulesChange::SET, nullptr, &ni, ModulesChange::EXACT, by_import,
                              stack, ns);
          instrument_if_proxy(v, ni);
        }
      } else if (event == DICT_CLEARED) {
        CodeLocation stack[kStackDepth];
        int ns = capture_stack(stack, kStackDepth, false);
        emit_modules_change(TraceWriter::intern("*"), ModulesChange::CLEAR, nullptr, nullptr,
                            ModulesChange::EXACT, ns > 0 && stack[0].importlib, stack, ns);
      } else if (event == DICT_DEALLOCATED) {
        emit_modules_change(TraceWriter::intern("*"), ModulesChange::CLEAR, nullptr, nullptr,
                            ModulesChange::EXACT, false, nullptr, 0);
      }
    }
    TraceWriter::flush();
  }
  py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
  return 0;
}

// ---- __class__ assignment -----------------------------------------------------------
// `obj.__class__ = T`, seen before it happens. For an object under its own name in
// sys.modules (LazyLoader turning a module into _LazyModule and back, a module making
// itself a ModuleType subclass), that is a change of what sits under the name, recorded
// exactly, as a new entry for the same object.
void class_assignment(PyObject* obj, PyObject* new_type) {
  if (!sys_modules() || !in_main_interpreter() || finalizing()) return;
  if (!py.PyType_IsSubtype(type_of(obj), py.PyModule_Type)) return;
  PyObject* d = py.PyModule_GetDict(obj);
  PyObject* name = d ? dict_get_n(d, NAME("__name__")) : nullptr;
  if (!name || py.PyDict_GetItem(sys_modules(), name) != obj) { py.PyErr_Clear(); return; }
  WriterLock lock;
  ObjectDescription oi = describe(obj), ni = describe(obj, new_type);
  record_exact_change(intern_obj(name), ModulesChange::SET, &oi, &ni);
  TraceWriter::flush();
}

// object's __class__ setter, swapped for this at installation.
int class_setter_hook(PyObject* self, PyObject* value, void* closure) {
  repeats_objects_changed();  // any object's: a proxy need not sit under its own name
  note_class_assignment(self, value);
  return g_observers.orig_class_setter(self, value, closure);
}

}  // namespace

void emit_modules_change(uint32_t key, uint32_t op, const ObjectDescription* old_value,
                         const ObjectDescription* new_value, uint32_t precision, bool by_import,
                         const CodeLocation* stack, int stack_depth) {
  ThreadState& t = ts();
  // A key's object replaced or removed: the next access of every repeated proxy site is
  // recorded in full (an insertion of a new key changes no object an access went to).
  if (old_value || op != ModulesChange::SET) repeats_objects_changed();
  // The parameters are the record's fields, in its order.
  const ModulesChangeRecord r{key, op, old_value, new_value, precision, by_import, stack, stack_depth,
                              context_now(t, t.tid)};
  encode_modules_change(r);
}

namespace {

// ---- 3.11: importlib's own stores into sys.modules, kept where the store hook sees them ----
// (cpython_api.h, keep_stores_generic). Seen, the import system's stores carry sys.modules'
// version tag forward as on 3.8-3.10 (shadow_note_import_system_change), and a top-level
// boundary compares the whole dict only after a change no hook saw. The functions of
// 3.11's importlib that store into sys.modules: at every import, at reload, and for a
// loader with only load_module.
struct ImportlibStores {
  GenericStores fn[3];
  bool pending = false;
};
ImportlibStores g_importlib_stores;

void watch_importlib_stores(PyObject* importlib_dict) {
  ImportlibStores& s = g_importlib_stores;
  PyObject* fns[3] = {dict_get_n(importlib_dict, NAME("_load_unlocked")), dict_get_n(importlib_dict, NAME("_exec")),
                      dict_get_n(importlib_dict, NAME("_load_backward_compatible"))};
  for (int i = 0; i < 3; ++i) s.pending |= find_store_subscripts(fns[i], &s.fn[i]);
  py.PyErr_Clear();
}

}  // namespace

void keep_importlib_stores_seen() {
  ImportlibStores& s = g_importlib_stores;
  if (!s.pending) return;
  bool left = false;
  for (GenericStores& f : s.fn) left |= !keep_stores_generic(f);
  s.pending = left;
}

void forget_lifetime_importlib_stores() {
  g_importlib_stores = ImportlibStores();  // the code objects' references leak with the interpreter
}

void observe_sys_modules(PyObject* modules, PyObject* importlib_dict) {
  if (!g_observers.orig_class_setter) g_observers.orig_class_setter = patch_class_setter(class_setter_hook);
  if (py.has_dict_watchers()) {
    int id = py.PyDict_AddWatcher(modules_watcher);
    if (id < 0 || py.PyDict_Watch(id, modules) < 0) py.PyErr_Clear();
    observe_lazy_imports();
  } else {
    if (!g_observers.orig_ass_subscript) g_observers.orig_ass_subscript = patch_dict_ass_subscript(dict_ass_subscript_hook);
    observe_dict_methods();
    if (g_observers.orig_ass_subscript) watch_importlib_stores(importlib_dict);
  }
}

bool class_setter_observed() { return g_observers.orig_class_setter != nullptr; }

// Runs class_assignment with the program's pending exception (if any) put aside.
void note_class_assignment(PyObject* obj, PyObject* new_type) {
  ThreadState& t = ts();
  if (!g_settings.enabled || t.inside_tracer || !TraceWriter::usable() || !obj || !new_type) return;
  // A value that is not a class: CPython's setter, which runs after this hook, refuses it
  // with a TypeError; nothing was assigned, and a class's fields are not to be read from it.
  if (!(py.PyType_GetFlags(type_of(new_type)) & TPFLAGS_TYPE_SUBCLASS)) return;
  InterpreterScope scope;
  ++t.inside_tracer;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  class_assignment(obj, new_type);
  py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
}

}  // namespace imptrace
