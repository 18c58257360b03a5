#include "import_hook.h"

#include <string.h>

#include "access_repeats.h"
#include "audit_hook.h"
#include "bindings.h"
#include "code_location.h"
#include "imports_in_flight.h"
#include "modules_observer.h"
#include "modules_shadow.h"
#include "native_stacks.h"
#include "object_description.h"
#include "process_state.h"
#include "proxies.h"
#include "proxy_observer.h"
#include "pytest_context.h"
#include "record_encoder.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

using namespace fields;

// Import indices, in the order imports begin (on any thread).
uint64_t g_next_import_index = 0;

// importlib's own function as the hook reaches it: the function itself through CPython's
// entry point (`entry`, when the function's entry point is observed in place), or, where
// the function in the dict was replaced, the original function object called through the
// C API.
struct Callee {
  PyObject* fn;
  VectorcallFn entry;
};

// The argument count in a vectorcall's `nargsf` (PY_VECTORCALL_ARGUMENTS_OFFSET is its
// top bit).
Py_ssize_t vectorcall_nargs(size_t nargsf) {
  return static_cast<Py_ssize_t>(nargsf & ~(size_t(1) << (8 * sizeof(size_t) - 1)));
}

// CPython's entry point of Python functions, the one the observed functions had.
VectorcallFn g_function_entry = nullptr;

// Calls importlib's function with the arguments the hook received (`nargsf`: the count,
// with the vectorcall offset flag as received; `kwnames`: the names of the last
// arguments, passed by keyword). A replaced function is called as it was asked (3.9+),
// else up to three positional arguments through CPython's small-stack call (no tuple) and
// anything more with a tuple and a dict.
// Out of line: only 3.8 (no PyObject_Vectorcall) takes it, and inlined its tuple and dict
// building sat among the lines every import runs on the other versions (the rule in
// docs/DESIGN.md, "Code the hot path runs").
__attribute__((noinline)) PyObject* call_original_without_vectorcall(PyObject* orig, PyObject* const* args,
                                                                       size_t nargsf, PyObject* kwnames) {
  Py_ssize_t nargs = vectorcall_nargs(nargsf);
  Py_ssize_t nkw = kwnames ? py.PyTuple_Size(kwnames) : 0;
  if (nkw == 0) {
    if (nargs == 2) return py.PyObject_CallFunctionObjArgs(orig, args[0], args[1], nullptr);
    if (nargs == 1) return py.PyObject_CallFunctionObjArgs(orig, args[0], nullptr);
    if (nargs == 3) return py.PyObject_CallFunctionObjArgs(orig, args[0], args[1], args[2], nullptr);
  }
  Ref tuple(py.PyTuple_New(nargs));
  if (!tuple) return nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    py.Py_IncRef(args[i]);
    py.PyTuple_SetItem(tuple.get(), i, args[i]);
  }
  Ref kwargs(nkw ? py.PyDict_New() : nullptr);
  if (nkw && !kwargs) return nullptr;
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    Py_ssize_t n = 0;
    const char* key = str_utf8(py.PyTuple_GetItem(kwnames, i), &n);
    if (!key || py.PyDict_SetItemString(kwargs.get(), key, args[nargs + i]) < 0) return nullptr;
  }
  return py.PyObject_Call(orig, tuple.get(), kwargs.get());
}

PyObject* call_original(const Callee& c, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (c.entry) return c.entry(c.fn, args, nargsf, kwnames);
  if (py.PyObject_Vectorcall) return py.PyObject_Vectorcall(c.fn, args, nargsf, kwnames);
  return call_original_without_vectorcall(c.fn, args, nargsf, kwnames);
}

// importlib._bootstrap._handle_fromlist, observed like _find_and_load: notes the frame
// that asked for the fromlist, then runs the original.
PyObject* handle_fromlist_hook(const Callee& orig, PyObject* const* args, size_t nargs, PyObject* kwnames) {
  ThreadState& t = ts();
  const void* saved_frame = t.fromlist_frame;
  int saved_depth = t.fromlist_depth;
  const void* f = nullptr;
  if (g_settings.enabled && !t.inside_tracer) {
    FrameWalk w;  // the frame that asked, without a frame object where there is a route
    f = w.point();
  }
  t.fromlist_frame = f;
  t.fromlist_depth = f ? t.depth : -1;
  PyObject* res = call_original(orig, args, nargs, kwnames);
  t.fromlist_frame = saved_frame;
  t.fromlist_depth = saved_depth;
  return res;
}

// An attribute of a module spec, read without running user code: importlib's own
// ModuleSpec keeps these as plain instance attributes, so on 3.11+ a normal lookup is safe
// (and unlike asking for its __dict__, does not make it materialise one); any other spec
// class, and every spec on 3.8-3.10, is read through its instance dict.
PyObject* spec_attr(PyObject* spec, bool plain_spec, PyObject* spec_dict, Name& name) {
  if (plain_spec) {
    PyObject* v = getattr_n(spec, name);
    if (!v) py.PyErr_Clear();
    return v;
  }
  PyObject* v = spec_dict ? dict_get_n(spec_dict, name) : nullptr;
  if (v) py.Py_IncRef(v);
  return v;
}

// What the module's __spec__ says, into `facts` (as SpecFacts() leaves it); `d`: the
// module's instance dict. Filled in place: the facts are a few hundred bytes, which a
// return by value copied at every import. `file`, `file_id`: the module's __file__ (kept
// alive by `d`) and its string id. importlib sets __file__ to the spec's origin, the same
// str object, which CPython has not hashed (so intern_obj's cache does not keep it):
// interning it again would hash and look up the path a second time at every import.
void read_spec(PyObject* d, SpecFacts& facts, PyObject* file, uint32_t file_id) {
  PyObject* spec = dict_get_n(d, NAME("__spec__"));
  if (!spec || spec == py.None) return;
  PyObject* spec_type = g_main_interpreter.module_spec_type;
  bool plain = spec_type && type_of(spec) == spec_type && in_main_interpreter() && !instance_attributes_in_dict();
  Ref sd(plain ? nullptr : py.PyObject_GenericGetDict(spec, nullptr));
  if (!plain && !sd) py.PyErr_Clear();
  if (!plain && !sd) return;
  facts.present = true;
  Ref sname(spec_attr(spec, plain, sd.get(), NAME("name")));
  facts.name = intern_obj(sname.get());
  Ref sorigin(spec_attr(spec, plain, sd.get(), NAME("origin")));
  facts.origin = file && sorigin.get() == file ? file_id : intern_obj(sorigin.get());
  Ref loader(spec_attr(spec, plain, sd.get(), NAME("loader")));
  if (loader && loader.get() != py.None) {
    // A loader may be a class (BuiltinImporter, FrozenImporter) or an instance.
    PyObject* lt = type_of(loader.get());
    bool is_class = py.PyType_IsSubtype(lt, py.PyType_Type) != 0;
    facts.loader = type_name(is_class ? loader.get() : lt);
  }
  Ref locs(spec_attr(spec, plain, sd.get(), NAME("submodule_search_locations")));
  if (locs && (py.PyType_GetFlags(type_of(locs.get())) & TPFLAGS_LIST_SUBCLASS)) {
    Py_ssize_t n = py.PyList_Size(locs.get());
    for (Py_ssize_t i = 0; i < n && i < kMaxSearchLocations; ++i)
      facts.search_locations[facts.search_location_count++] = intern_obj(py.PyList_GetItem(locs.get(), i));
  }
}

// sys.path, written whenever it differs from the last one written.
struct SysPathWatch {
  uint64_t signature;     // (list, size, items) of the last sys.path written
  PyObject* last_path;    // borrowed from sys's dict, while its version tag holds
  uint64_t sys_version;   // that tag (3.8-3.11)
};
SysPathWatch g_sys_path;

// sys.path written: a handful of times per run, against a check at every import. Cold
// and out of line, so the check's lines are all an import runs here.
__attribute__((cold, noinline)) void write_sys_path(PyObject* path, Py_ssize_t n) {
  auto r = TraceWriter::begin_record(Record::sys_path);
  auto& b = TraceWriter::buf();
  for (Py_ssize_t i = 0; i < n; ++i) {
    uint32_t id = intern_obj(py.PyList_GetItem(path, i));
    // An empty entry ('' = the working directory) must keep its place in the list.
    wire::put_tag(b, SysPath::entries, wire::VARINT);
    wire::put_varint(b, id);
  }
  wire::put_uint(b, SysPath::time_ns, TraceWriter::now_ns());
  TraceWriter::end_record(r);
}

void record_sys_path_if_changed() {
  // sys.path is read at every import: in the main interpreter straight from sys's dict with
  // a cached key (PySys_GetObject builds a new str for its name on each call).
  // 3.8-3.11: while sys's dict keeps its version tag, sys.path is the object found last.
  PyObject* path = nullptr;
  PyObject* sys_dict = g_main_interpreter.sys_dict;
  if (sys_dict && in_main_interpreter()) {
    uint64_t v = dict_version(sys_dict);
    if (v && v == g_sys_path.sys_version) {
      path = g_sys_path.last_path;
    } else {
      path = dict_get_n(sys_dict, NAME("path"));
      g_sys_path.last_path = path;
      g_sys_path.sys_version = v;
    }
  } else {
    path = py.PySys_GetObject("path");  // borrowed
  }
  if (!path) return;
  if (!(py.PyType_GetFlags(type_of(path)) & TPFLAGS_LIST_SUBCLASS)) return;
  Py_ssize_t n = 0;
  PyObject* const* items = list_items(path, &n);
  if (!items) n = py.PyList_Size(path);
  uint64_t sig = reinterpret_cast<uintptr_t>(path) * 31 + static_cast<uint64_t>(n);
  for (Py_ssize_t i = 0; i < n; ++i)
    sig = sig * 1000003 + reinterpret_cast<uintptr_t>(items ? items[i] : py.PyList_GetItem(path, i));
  if (sig == g_sys_path.signature) return;
  g_sys_path.signature = sig;
  write_sys_path(path, n);
}

// What one import produced, read once at its end and handed to every consumer (the Import
// record, the Binding record, the sys.modules shadow, proxy instrumentation, the audit
// hook's place).
struct ImportOutcome {
  PyObject* in_modules = nullptr;  // what sys.modules holds under the name (main interpreter)
  PyObject* module = nullptr;      // in_modules, else result
  ObjectDescription described;     // `module` described
  Ref module_dict;                 // the instance dict that description was read from
  ParentPackage parent;            // main interpreter, success only
};

// The import's end, with the writer lock held. `self`: the import as it began.
void record_import_end(ThreadState& t, const InFlight& self, PyObject* name, PyObject* res, PyObject* et,
                       PyObject* ev, ImportRecord& rec, bool main_interp, bool shadowing, void* const* native,
                       int nnative) {
  bool same_epoch = self.name_epoch == TraceWriter::strings_epoch();
  if (same_epoch) inflight_add(self.name_id, -1);
  // Ids taken at the start are another file's strings after a reset: not written.
  if (!same_epoch) rec.importer = rec.trigger = CodeLocation();
  rec.name = same_epoch ? self.name_id : intern_obj(name);
  rec.test = current_test();
  rec.ok = res != nullptr;
  rec.thread = t.main_thread ? 0 : t.tid;

  PyObject* sys_modules = g_main_interpreter.sys_modules;
  ImportOutcome out;
  if (res) {
    out.in_modules = sys_modules && main_interp ? dict_lookup(sys_modules, name) : nullptr;
    out.module = out.in_modules ? out.in_modules : res;
    // 3.15's probe for a submodule named by `lazy from pkg import name` returns None when
    // there is none: an import that found nothing, with no object to describe.
    if (out.module == py.None && !out.in_modules) out.module = nullptr;
    PyObject* file = nullptr;  // borrowed from out.module_dict
    if (out.module) out.described = describe(out.module, nullptr, &out.module_dict, &file);
    rec.object = out.described;
    if (out.module_dict) {
      rec.spec_read = true;
      read_spec(out.module_dict.get(), rec.spec, file, out.described.file);
    }
  } else {
    describe_error(et, ev, &rec.error_type, &rec.error_message);
  }
  if (!main_interp) rec.interpreter = static_cast<uint64_t>(py.PyInterpreterState_GetID(py.PyInterpreterState_Get()));
  uint8_t frames[kNativeDepth * kNativeFrameBytes];
  if (nnative > 0) {
    rec.native_stack = frames;
    rec.native_stack_bytes = resolve_native_stack(native, nnative, t.depth, frames);
  }
  encode_import(rec);
  write_repeat_summaries();  // an import boundary: the proxy accesses counted before it

  if (main_interp && sys_modules) {
    char parent_text[1024];
    if (res && out.module) {
      out.parent = find_parent_package(name, innermost(t), parent_text, sizeof parent_text);
      if (out.parent.module) record_binding(rec.index, out.parent, out.in_modules, out.module);
    }
    if (shadowing) {
      ImportEndView found{};
      found.ok = res != nullptr;
      found.value = out.in_modules;
      found.described = res ? &out.described : nullptr;
      found.inserted = self.inserted;
      found.submodule = out.parent.submodule;
      found.parent_id = out.parent.id;
      found.parent = out.parent.module;
      shadow_at_import_end(t, name, rec.name, t.depth == 0, found);
    }
    if (res && out.module && g_settings.proxies) {
      instrument_if_proxy(out.module, out.described);
      observe_module(out.module);
    }
    if (res && out.module) keep_audit_hook_where_needed(name, out.module);
    // Top-level imports are where a program's phases change (pytest collecting test
    // modules in an xdist worker that has just set PYTEST_XDIST_WORKER): re-read the
    // allow-listed environment there, not at every import.
    if (t.depth == 0) TraceWriter::record_env_changes();
  }
  if (self.inserted && same_epoch) inflight_note_inserted(self.name_id, nullptr);
}

// An import that ends without its record: begun before a fork (the parent's file has it),
// or the writer has stopped. Rare, so cold and out of line (docs/DESIGN.md, "Code the hot
// path runs").
__attribute__((cold, noinline)) void end_unrecorded(const InFlight& self) {
  if (self.generation == TraceWriter::generation()) {  // else: begun before a fork, see above
    WriterLock lock;
    if (self.name_epoch == TraceWriter::strings_epoch()) {
      if (self.inserted) inflight_note_inserted(self.name_id, nullptr);
      inflight_add(self.name_id, -1);
    }
  }
  if (self.inserted) py.Py_DecRef(self.inserted);
}

// The pending exception of a failed import, taken aside while its record is written, and
// put back after. Out of line and cold: most imports succeed.
struct PendingError {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
};
__attribute__((cold, noinline)) void fetch_error(PendingError& e) {
  py.PyErr_Fetch(&e.type, &e.value, &e.tb);
  py.PyErr_NormalizeException(&e.type, &e.value, &e.tb);
}
__attribute__((cold, noinline)) void restore_error(PendingError& e) { py.PyErr_Restore(e.type, e.value, e.tb); }

PyObject* find_and_load_hook(const Callee& orig, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  InterpreterScope scope;
  ThreadState& t = ts();
  if (!g_settings.enabled || t.inside_tracer || !TraceWriter::usable() || vectorcall_nargs(nargsf) < 1 ||
      t.depth >= kMaxDepth || !thread_import_stack(t))
    return call_original(orig, args, nargsf, kwnames);
  PyObject* name = args[0];
  bool main_interp = t.interpreter == HookInterpreter::main;
  bool shadowing = main_interp && !py.has_dict_watchers() && g_main_interpreter.sys_modules && !finalizing();
  ImportRecord rec;
  rec.index = __atomic_fetch_add(&g_next_import_index, 1, __ATOMIC_RELAXED);
  const InFlight* outer = innermost(t);
  rec.parent = outer ? outer->index + 1 : 0;
  uint32_t begin_name_id = 0;  // the in-flight table's key for this import
  uint32_t begin_epoch = 0;    // ... and the strings epoch it belongs to
  {
    ++t.inside_tracer;
    WriterLock lock;
    begin_name_id = intern_obj(name);
    begin_epoch = TraceWriter::strings_epoch();
    PyObject* importer_code = nullptr;
    capture_importer(&rec.importer, &rec.trigger, t.fromlist_frame && t.fromlist_depth == t.depth ? t.fromlist_frame : nullptr,
                     &importer_code);
    // The module being executed (the import in flight around this one) is, as a rule, the
    // importer: its body's code is let go from the cache when that import ends.
    if (importer_code && t.depth > 0 && !t.stack[t.depth - 1].importer_code)
      t.stack[t.depth - 1].importer_code = importer_code;
    if (shadowing) shadow_at_import_start(t, name, begin_name_id, t.depth == 0);
    inflight_add(begin_name_id, +1, name);
    record_sys_path_if_changed();
    // No flush here: what this boundary produced goes out with the import's own record
    // (or an inner one's), one commit per import.
    --t.inside_tracer;
  }
  void* native[kNativeDepth];
  int nnative = g_settings.native_stacks ? capture_native_stack(native) : 0;
  rec.begin_ns = TraceWriter::now_ns();
  t.stack[t.depth++] = InFlight{rec.index, name, begin_name_id, begin_epoch, TraceWriter::generation(), false, nullptr, nullptr};

  PyObject* res = call_original(orig, args, nargsf, kwnames);

  rec.end_ns = TraceWriter::now_ns();
  --t.depth;
  InFlight self = t.stack[t.depth];
  // Begun before a fork, ended in the child: the parent's file has it, not ours.
  if (self.generation != TraceWriter::generation() || !TraceWriter::usable()) {
    end_unrecorded(self);
    return res;
  }

  ++t.inside_tracer;
  PendingError err;
  if (!res) fetch_error(err);
  PyObject* finished_code = nullptr;
  {
    WriterLock lock;
    record_import_end(t, self, name, res, err.type, err.value, rec, main_interp, shadowing, native, nnative);
    TraceWriter::flush();
    if (self.importer_code) finished_code = release_code_if_unused(self.importer_code);
  }
  // Outside the lock, with no error pending: these may be the last references.
  if (self.inserted) py.Py_DecRef(self.inserted);
  if (finished_code) py.Py_DecRef(finished_code);
  if (shadowing) {
    shadow_register_owed_walk_at_exit();
    keep_importlib_stores_seen();
  }
  if (!res) restore_error(err);
  --t.inside_tracer;
  return res;
}

// The entry points observing importlib's functions in place.
PyObject* find_and_load_entry(PyObject* fn, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return find_and_load_hook(Callee{fn, g_function_entry}, args, nargsf, kwnames);
}

PyObject* handle_fromlist_entry(PyObject* fn, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return handle_fromlist_hook(Callee{fn, g_function_entry}, args, nargsf, kwnames);
}

// Where the function must be replaced (3.11, see hook_importlib), a builtin standing in for
// it, holding the original as its `self`.
PyObject* find_and_load_replacement(PyObject* orig, PyObject* const* args, Py_ssize_t nargs) {
  return find_and_load_hook(Callee{orig, nullptr}, args, static_cast<size_t>(nargs), nullptr);
}

PyMethodDef g_find_and_load_def = {
    "_find_and_load", reinterpret_cast<void*>(find_and_load_replacement), METH_FASTCALL,
    "imptrace: records the import, then runs importlib's _find_and_load"};

// Observes `fn` (a Python function) in place through `hook`; false when it is not a
// Python function or its entry point is not CPython's (someone else's: a profiler, a JIT).
bool observe_in_place(PyObject* fn, VectorcallFn hook) {
  VectorcallFn* entry = function_vectorcall(fn);
  if (!entry) return false;
  VectorcallFn cur = __atomic_load_n(entry, __ATOMIC_ACQUIRE);
  if (cur == hook) return true;  // this interpreter's function, seen before
  // CPython's entry point: exported up to 3.12; on 3.13 the first function's (importlib's,
  // at the first import, before any other code could have changed it).
  if (!g_function_entry) g_function_entry = py.PyFunction_Vectorcall ? py.PyFunction_Vectorcall : cur;
  if (cur != g_function_entry) return false;
  set_function_vectorcall(fn, entry, hook);
  return true;
}

}  // namespace

bool hook_importlib(PyObject* d) {
  PyObject* orig = d ? dict_get_n(d, NAME("_find_and_load")) : nullptr;
  if (!orig) { py.PyErr_Clear(); return false; }
  // Observed in place where every call reaches the function's entry point. On 3.11 the
  // calls made by Python code (importlib.import_module -> _gcd_import -> _find_and_load)
  // would not, so there the function in the dict is replaced.
  if (!python_calls_reach_function_entry() || !observe_in_place(orig, find_and_load_entry)) {
    Ref hook(py.PyCFunction_NewEx(&g_find_and_load_def, orig, nullptr));
    if (!hook || py.PyDict_SetItemString(d, "_find_and_load", hook.get()) < 0) {
      py.PyErr_Clear();
      return false;
    }
  }
  // Optional: without it, importers are found by walking the stack. CPython's import calls
  // it from C, which reaches the entry point on every version (on 3.11 the calls made by
  // importlib.__import__, Python code, do not: their importers come from the walk).
  if (PyObject* fromlist = dict_get_n(d, NAME("_handle_fromlist"))) observe_in_place(fromlist, handle_fromlist_entry);
  return true;
}

void forget_lifetime_sys_path() { memset(&g_sys_path, 0, sizeof g_sys_path); }

}  // namespace imptrace
