// libimptrace.so's entry: what runs before main and at each interpreter's first import.
//
// How it gets control without linking libpython or changing the program:
//  1. The constructor (before main, before Py_Initialize) looks for the CPython API in the
//     process; if there is none, it returns and the library is inert.
//  2. It registers an audit hook (allowed before Py_Initialize). The first `import` audit
//     event fires inside import.c just before it looks up
//     importlib._bootstrap._find_and_load by attribute; the hook swaps that function's C
//     entry point (3.11: replaces it in the module dict with a C callable; import_hook.h),
//     so the very same import, and every later one, goes through the tracer.
//     (3.15 raises the event inside _find_and_load itself, too late for that import: there
//     the first audit event that finds importlib in place does it.)
//  3. sys.modules writes are seen by a dict watcher (3.12+) or found by comparing a
//     shadow copy at import boundaries (3.8-3.11; modules_observer.cpp, modules_shadow.cpp).
//  4. Proxy classes found under sys.modules keys, and PEP 562 module __getattr__, have
//     their __getattr__/__setattr__ observed at the functions' C entry points
//     (proxy_observer.h).
//  5. An embedding host may finalise the interpreter and initialise it again. Py_AtExit
//     runs the tracer's function once Py_FinalizeEx has finished: it marks the lifetime's
//     end, forgets every object of the finalised interpreter, and puts the audit hook back
//     in the runtime's list (which CPython keeps across a re-initialisation), so that the
//     next lifetime's first import installs the tracer again, as in 2. This works whether
//     libpython is shared or static.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#include "audit_hook.h"
#include "code_location.h"
#include "cpython_api.h"
#include "embedding.h"
#include "import_hook.h"
#include "imports_in_flight.h"
#include "loaded_symbols.h"
#include "modules_observer.h"
#include "modules_shadow.h"
#include "native_stacks.h"
#include "object_description.h"
#include "object_identity.h"
#include "process_end.h"
#include "process_state.h"
#include "proxies.h"
#include "proxy_observer.h"
#include "record_encoder.h"
#include "records.h"
#include "string_interning.h"
#include "thread_state.h"
#include "trace_writer.h"
#include "wire.h"

namespace imptrace {

TracerSettings g_settings = {false, true, false, false};
MainInterpreter g_main_interpreter;
uint32_t g_lifetime = 1;

namespace {

void lifetime_ended();
void run_installation();

// Interpreters are told apart by id, never by address: a new sub-interpreter usually
// gets the memory of one that was destroyed. Ids are never reused.
struct InstalledInterpreters {
  int64_t* ids;  // sub-interpreters (growing array)
  size_t count, capacity;
  bool main;
};
InstalledInterpreters g_installed;

bool installed_in(int64_t id) {
  if (id == 0) return g_installed.main;
  for (size_t i = g_installed.count; i > 0; --i)  // newest first: the common hit
    if (g_installed.ids[i - 1] == id) return true;
  return false;
}

void remember_installed(int64_t id) {
  if (id == 0) { g_installed.main = true; return; }
  if (g_installed.count == g_installed.capacity) {
    size_t cap = g_installed.capacity ? g_installed.capacity * 2 : 16;
    auto* n = static_cast<int64_t*>(realloc(g_installed.ids, cap * sizeof(int64_t)));
    if (!n) return;
    g_installed.ids = n;
    g_installed.capacity = cap;
  }
  g_installed.ids[g_installed.count++] = id;
}

void install_in_current_interpreter() {
  void* interp = py.PyInterpreterState_Get();
  int64_t id = py.PyInterpreterState_GetID(interp);
  if (id < 0) { py.PyErr_Clear(); return; }
  if (installed_in(id)) return;
  PyObject* modules = py.PyImport_GetModuleDict();
  if (!modules) return;
  PyObject* bootstrap = dict_get_n(modules, NAME("_frozen_importlib"));
  if (!bootstrap) return;  // too early: try again at the next event
  PyObject* d = py.PyModule_GetDict(bootstrap);
  if (!hook_importlib(d)) return;
  remember_installed(id);
  if (interp != py.PyInterpreterState_Main()) return;
  MainInterpreter& m = g_main_interpreter;
  m.interp = interp;
  populate_string_caches();
  populate_code_cache();
  populate_in_flight();
  // Registered again in each lifetime: Py_FinalizeEx runs and drops its registrations.
  bool end_watched = py.Py_AtExit && py.Py_AtExit(lifetime_ended) == 0;
  watch_process_end();
  m.module_spec_type = py.PyDict_GetItemString(d, "ModuleSpec");
  m.bootstrap_dict = d;
  PyObject* sys_module = py.PyDict_GetItemString(modules, "sys");
  if (sys_module) m.sys_dict = py.PyModule_GetDict(sys_module);
  if (m.module_spec_type) py.Py_IncRef(m.module_spec_type);  // deliberate: process lifetime
  m.sys_modules = modules;
  py.Py_IncRef(modules);  // deliberate: we compare against it for the process lifetime
  probe_dict_version();
  probe_str_layout();
  observe_sys_modules(modules, d);
  watch_module_deaths();
  audit_hook_step_out();

  namespace LifetimeBegin = fields::LifetimeBegin;
  uint32_t unseen = end_watched ? 0u : static_cast<uint32_t>(LifetimeBegin::LATER_LIFETIMES);
  if (g_audit_hook.stepped_out && !subinterpreter_creation_seen()) unseen |= LifetimeBegin::SUBINTERPRETERS_FROM_C;
  WriterLock lock;
  auto r = TraceWriter::begin_record(fields::Record::lifetime_begin);
  wire::ByteBuf& b = TraceWriter::buf();
  wire::put_uint(b, LifetimeBegin::lifetime, g_lifetime);
  wire::put_uint(b, LifetimeBegin::time_ns, TraceWriter::now_ns());
  wire::put_uint(b, LifetimeBegin::unseen, unseen);
  TraceWriter::end_record(r);
}

// The audit hook entry was allocated with the raw allocator in force before
// Py_Initialize; -X dev / PYTHONMALLOC=debug install a different one later and would
// abort freeing it ("bad ID"). So the entry is allocated with plain malloc (recorded
// below) and, when the hooks are about to be freed, the raw allocator is wrapped for the
// moment it takes to hand exactly that pointer back to free().
PyMemAllocatorEx g_raw_before;  // the allocator to forward to

void* rec_malloc(void*, size_t n) {
  void* p = malloc(n);
  if (!g_audit_hook.entry) g_audit_hook.entry = p;
  return p;
}
void* rec_calloc(void*, size_t a, size_t b) { return calloc(a, b); }
void* rec_realloc(void*, void* p, size_t n) { return realloc(p, n); }
void rec_free(void*, void* p) { free(p); }

void* fwd_malloc(void*, size_t n) { return g_raw_before.malloc(g_raw_before.ctx, n); }
void* fwd_calloc(void*, size_t a, size_t b) { return g_raw_before.calloc(g_raw_before.ctx, a, b); }
void* fwd_realloc(void*, void* p, size_t n) { return g_raw_before.realloc(g_raw_before.ctx, p, n); }
void fwd_free(void*, void* p) {
  if (p && p == g_audit_hook.entry) {
    free(p);
    g_audit_hook.entry = nullptr;
    py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &g_raw_before);  // done: step out of the way
    return;
  }
  g_raw_before.free(g_raw_before.ctx, p);
}

constexpr char kClassAttribute[] = "__class__";

int audit_hook(const char* event, PyObject* args, void*) {
  if (event[0] == 'o' && event[1] == 's' && strcmp(event, "os.exec") == 0) {
    if (!g_audit_hook.exec_wrapped) before_exec();
    return 0;
  }
  if (event[0] == 'o' && strcmp(event, "object.__setattr__") == 0) {
    if (class_setter_observed()) return 0;  // the setter hook records it
    if (py.PyTuple_Size(args) != 3) { py.PyErr_Clear(); return 0; }
    PyObject* attr = py.PyTuple_GetItem(args, 1);
    Py_ssize_t n = 0;
    const char* a = str_utf8(attr, &n);
    if (a && n == sizeof kClassAttribute - 1 && memcmp(a, kClassAttribute, sizeof kClassAttribute - 1) == 0)
      note_class_assignment(py.PyTuple_GetItem(args, 0), py.PyTuple_GetItem(args, 2));
    py.PyErr_Clear();
    return 0;
  }
  bool import_event = event[0] == 'i' && strcmp(event, "import") == 0;
  bool clearing = !import_event && event[0] == 'c' && strcmp(event, "cpython._PySys_ClearAuditHooks") == 0;
  if (import_event || (import_audit_inside_importlib() && !clearing)) {
    if (g_settings.enabled) run_installation();
  } else if (clearing) {
    g_main_interpreter.finalizing = true;
    {
      WriterLock lock;
      TraceWriter::flush();
    }
    if (g_audit_hook.entry) {
      py.PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &g_raw_before);
      PyMemAllocatorEx filter = {nullptr, fwd_malloc, fwd_calloc, fwd_realloc, fwd_free};
      py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &filter);
    }
  }
  return 0;
}

// At an interpreter's import event, or when C code has created a sub-interpreter (then in
// the new interpreter's thread state), GIL held: installs the tracer in the interpreter it
// runs in, with the program's pending exception put aside.
void run_installation() {
  ThreadState& t = ts();
  if (t.inside_tracer) return;
  ++t.inside_tracer;
  PyObject *et, *ev, *tb;
  py.PyErr_Fetch(&et, &ev, &tb);
  install_in_current_interpreter();
  py.PyErr_Restore(et, ev, tb);
  --t.inside_tracer;
}

// Registers the audit hook, before Py_Initialize (the constructor) or between two lifetimes
// (after Py_FinalizeEx), with its node allocated by malloc (see rec_malloc).
bool register_audit_hook() {
  PyMemAllocatorEx before;
  py.PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &before);
  PyMemAllocatorEx recording = {nullptr, rec_malloc, rec_calloc, rec_realloc, rec_free};
  py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &recording);
  int rc = py.PySys_AddAuditHook(audit_hook, nullptr);
  py.PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &before);
  return rc == 0;
}

// Every role drops the finalised interpreter's objects (each says how).
void forget_lifetime() {
  forget_lifetime_strings();
  forget_lifetime_code();
  forget_lifetime_type_names();
  forget_lifetime_identities();
  forget_lifetime_proxy_classes();
  forget_lifetime_observed_functions();
  forget_lifetime_shadow();
  forget_lifetime_importlib_stores();
  forget_lifetime_sys_path();
  forget_lifetime_in_flight();
  g_installed.count = 0;  // sub-interpreter ids start again with the runtime
  g_installed.main = false;
  g_main_interpreter = MainInterpreter();  // its references leak with the interpreter
  g_audit_hook.exec_wrapped = false;  // the next lifetime's os is a new module
  g_audit_hook.needed = false;
  ThreadState& t = ts();  // the thread that finalised; the others ran no Python since
  t.depth = 0;
  t.pending_pop_key = t.pending_pop_value = nullptr;
  t.fromlist_frame = nullptr;
  ++g_lifetime;
}

// Py_AtExit's function: Py_FinalizeEx has finished. No interpreter is left, nor any Python
// object of this lifetime; only the functions CPython allows before Py_Initialize may be
// called.
void lifetime_ended() {
  if (!g_settings.enabled) return;
  forget_lifetime();
  // The hook, listed again, is in the runtime's list when the next Py_Initialize runs. It
  // was either out of the list (its node kept) or in it and freed with the others.
  bool relisted = false;
  if (g_audit_hook.stepped_out) {
    audit_hook_step_in();
    relisted = true;
  } else if (!g_audit_hook.entry) {
    relisted = register_audit_hook();
  }
  WriterLock lock;
  auto r = TraceWriter::begin_record(fields::Record::lifetime_end);
  wire::ByteBuf& b = TraceWriter::buf();
  wire::put_uint(b, fields::LifetimeEnd::lifetime, g_lifetime - 1);
  wire::put_uint(b, fields::LifetimeEnd::time_ns, TraceWriter::now_ns());
  wire::put_bool(b, fields::LifetimeEnd::next_unseen, !relisted);
  TraceWriter::end_record(r);
  TraceWriter::flush();
}

// The trace of a CPython the tracer does not know: its header (version, build) and one
// note saying why nothing else follows.
void record_not_traced(const char* why) {
  char build[32];
  snprintf(build, sizeof build, "%s%s", py.shared ? "shared" : "static", py.debug ? "+debug" : "");
  TraceWriter::init(py.Py_GetVersion(), build);
  char version[32];  // "3.16.0a1", without the build details that follow it
  snprintf(version, sizeof version, "%s", py.Py_GetVersion());
  version[strcspn(version, " ")] = 0;
  char text[192];
  snprintf(text, sizeof text, "CPython %s not traced: %s", version, why);
  WriterLock lock;
  encode_not_traced(text);
  TraceWriter::flush();
}

bool env_true(const char* name) {
  const char* v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

}  // namespace

void subinterpreter_creation_begins() {
  __atomic_add_fetch(&g_audit_hook.creating, 1, __ATOMIC_ACQ_REL);
  audit_hook_step_in();
}

void subinterpreter_creation_ends(bool created) {
  // Its first imports may all have come before importlib was in its sys.modules.
  if (created) run_installation();
  if (__atomic_sub_fetch(&g_audit_hook.creating, 1, __ATOMIC_ACQ_REL) == 0) audit_hook_step_out();
}

}  // namespace imptrace

using namespace imptrace;

// What crtbeginS.o would define (the library links without the C runtime start files;
// tracer/CMakeLists.txt says why): the handle by which libc tells this object's
// registrations apart, here the pthread_atfork handlers (libc_nonshared passes it to
// __register_atfork). The object is never unloaded (-z nodelete), so nothing registered
// under it outlives its code.
extern "C" {
__attribute__((visibility("hidden"))) void* __dso_handle = &__dso_handle;
}

__attribute__((constructor)) static void imptrace_start() {
  // Not a CPython process: the common case, every shell, compiler and git of a CI job that
  // exports LD_PRELOAD. Decided first, by reading the loaded objects' hash tables
  // (loaded_symbols.h), with no other libc call: the library then costs such a process
  // little more than an empty one would. The answer writes nothing, so it may come before
  // the checks below.
  constexpr uint32_t kPyIsInitialized = gnu_symbol_hash("Py_IsInitialized");
  if (!maybe_exported_by_a_loaded_object(kPyIsInitialized)) return;
  // Setuid/secure-execution processes: the loader already drops LD_PRELOAD there, but a
  // library reached another way must not write files on behalf of a privileged process.
  if (getauxval(AT_SECURE)) return;
  if (env_true("IMPTRACE_DISABLE")) return;
  char why[128];
  CPythonSupport support = resolve_cpython_api(why, sizeof why);
  if (support == CPythonSupport::absent) return;
  if (py.Py_IsInitialized()) return;  // loaded late (dlopen into a running interpreter)
  if (support == CPythonSupport::unknown) {
    // A file that says so, rather than silence; nothing is written to the host's streams.
    record_not_traced(why);
    return;
  }
  const char* p = getenv("IMPTRACE_PROXIES");
  g_settings.proxies = !(p && strcmp(p, "0") == 0);
  g_settings.native_stacks = env_true("IMPTRACE_NATIVE_STACKS");
  g_settings.keep_audit_hook = env_true("IMPTRACE_AUDIT_HOOK");
  if (g_settings.native_stacks) prepare_native_stacks();
  char build[32];
  snprintf(build, sizeof build, "%s%s", py.shared ? "shared" : "static", py.debug ? "+debug" : "");
  TraceWriter::init(py.Py_GetVersion(), build);
  pthread_atfork(nullptr, nullptr, forget_thread_id_in_child);

  if (!register_audit_hook()) return;
  g_settings.enabled = true;
}
