#include "audit_hook.h"

#include <string.h>

#include "access_repeats.h"
#include "process_state.h"
#include "modules_observer.h"
#include "process_end.h"
#include "string_interning.h"
#include "trace_writer.h"

namespace imptrace {

AuditHookPlace g_audit_hook;

void audit_hook_step_in() {
  if (!g_audit_hook.stepped_out) return;
  // Back at the head, in front of whatever was registered meanwhile.
  *static_cast<void**>(g_audit_hook.entry) = *g_audit_hook.head;
  __atomic_store_n(g_audit_hook.head, g_audit_hook.entry, __ATOMIC_RELEASE);
  g_audit_hook.stepped_out = false;
}

namespace {

// os.execv and os.execve are the only ways Python code execs (every os.exec* variant ends
// in one of them), and os._exit ends the process without finalisation or exit handlers.
// All three are posix's builtins; the tracer swaps the C function in their PyMethodDef
// entries (patch_builtin_function) for one of the same calling convention that does its
// work and then calls CPython's. The function objects in os and posix stay the very
// objects they were, with their names, docs and signatures; a call keeps its frames and
// traceback. The entries are shared by every interpreter's posix module: an exec or
// _exit in a sub-interpreter ends the process too, and is recorded the same way.
//
// os.putenv and os.unsetenv are posix's builtins too, through which Python code changes the
// environment (os.environ's writes and deletions call them): swapped the same way, they
// tell the repeated proxy-access path that PYTEST_CURRENT_TEST may have changed
// (access_repeats.h).
struct PosixOriginals {
  PyCFunctionFast execv;  // METH_FASTCALL (3.8-3.13)
  PyCFunctionFast putenv;                          // METH_FASTCALL (3.8-3.13)
  PyObject* (*unsetenv)(PyObject*, PyObject*);     // METH_O
  PyObject* (*execve)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);  // METH_FASTCALL | METH_KEYWORDS
  PyObject* (*exit)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);    // same
};
PosixOriginals g_posix;

PyObject* execv_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  before_exec();
  return g_posix.execv(self, args, nargs);
}

PyObject* execve_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  before_exec();
  return g_posix.execve(self, args, nargs, kwnames);
}

PyObject* putenv_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  PyObject* r = g_posix.putenv(self, args, nargs);
  repeats_environment_changed();
  return r;
}

PyObject* unsetenv_hook(PyObject* self, PyObject* name) {
  PyObject* r = g_posix.unsetenv(self, name);
  repeats_environment_changed();
  return r;
}

// Writes the end record with the status, then calls the original. A status that is not an
// int is left to the original to refuse (the process then goes on).
PyObject* os_exit_hook(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  PyObject* status = nargs == 1 && !kwnames ? args[0] : nullptr;
  // Py_TPFLAGS_LONG_SUBCLASS (the same bit on 3.8-3.13): an int, read without running
  // any __index__ of the program's.
  if (g_settings.enabled && status && (py.PyType_GetFlags(type_of(status)) & TPFLAGS_LONG_SUBCLASS)) {
    long n = py.PyLong_AsLong(status);
    if (n == -1 && py.PyErr_Occurred()) {
      py.PyErr_Clear();
    } else {
      // The reserve is left as it is (a valid trailing field): _exit is a few instructions
      // away and the file is whole either way.
      WriterLock lock;
      record_os_exit(n);
    }
  }
  return g_posix.exit(self, args, nargs, kwnames);
}

// Swaps the entry of os's function `name` (null when absent or not the builtin expected).
void* observe_posix_function(PyObject* os_dict, Name& name, int flags, void* hook) {
  PyObject* fn = dict_get_n(os_dict, name);
  return fn ? patch_builtin_function(fn, name.text, flags, hook) : nullptr;
}

// Modules whose import means sub-interpreters may be created.
const char* const kInterpreterCreators[] = {"_testcapi", "_testinternalcapi", "_xxsubinterpreters", "_interpreters"};
// The names the check below can match: "os" and the creators (2 to 18 characters, starting
// with 'o' or '_'), so that other imports return after a look at their length and first
// character.
constexpr Py_ssize_t kShortestWatched = 2;
constexpr Py_ssize_t kLongestWatched = sizeof "_xxsubinterpreters" - 1;

}  // namespace

void audit_hook_step_out() {
  if (g_settings.keep_audit_hook || g_audit_hook.stepped_out || g_audit_hook.needed ||
      __atomic_load_n(&g_audit_hook.creating, __ATOMIC_ACQUIRE) || !class_setter_observed())
    return;
  if (!g_audit_hook.head) g_audit_hook.head = find_audit_hook_head(g_audit_hook.entry);
  // Only while our node is the head (nothing registered before us) and alone in moving.
  if (!g_audit_hook.head || *g_audit_hook.head != g_audit_hook.entry) return;
  __atomic_store_n(g_audit_hook.head, *static_cast<void**>(g_audit_hook.entry), __ATOMIC_RELEASE);
  g_audit_hook.stepped_out = true;
}

void keep_audit_hook_where_needed(PyObject* name, PyObject* module) {
  Py_ssize_t n = 0;
  const char* s = str_utf8(name, &n);
  if (!s || n < kShortestWatched || n > kLongestWatched || (s[0] != '_' && s[0] != 'o')) return;
  if (n == 2 && s[0] == 'o' && s[1] == 's' && !g_audit_hook.exec_wrapped) {
    PyObject* os_dict = type_of(module) == py.PyModule_Type ? py.PyModule_GetDict(module) : nullptr;
    if (os_dict && !g_posix.execv)
      g_posix.execv = reinterpret_cast<PyCFunctionFast>(
          observe_posix_function(os_dict, NAME("execv"), METH_FASTCALL, reinterpret_cast<void*>(execv_hook)));
    if (os_dict && !g_posix.execve)
      g_posix.execve = reinterpret_cast<decltype(g_posix.execve)>(observe_posix_function(
          os_dict, NAME("execve"), METH_FASTCALL | METH_KEYWORDS, reinterpret_cast<void*>(execve_hook)));
    g_audit_hook.exec_wrapped = g_posix.execv && g_posix.execve;
    if (!g_audit_hook.exec_wrapped) {
      g_audit_hook.needed = true;
      audit_hook_step_in();
    }
    if (os_dict && !g_posix.exit)
      g_posix.exit = reinterpret_cast<decltype(g_posix.exit)>(observe_posix_function(
          os_dict, NAME("_exit"), METH_FASTCALL | METH_KEYWORDS, reinterpret_cast<void*>(os_exit_hook)));
    if (os_dict && !g_posix.putenv)
      g_posix.putenv = reinterpret_cast<PyCFunctionFast>(
          observe_posix_function(os_dict, NAME("putenv"), METH_FASTCALL, reinterpret_cast<void*>(putenv_hook)));
    if (os_dict && !g_posix.unsetenv)
      g_posix.unsetenv = reinterpret_cast<decltype(g_posix.unsetenv)>(
          observe_posix_function(os_dict, NAME("unsetenv"), METH_O, reinterpret_cast<void*>(unsetenv_hook)));
    if (g_posix.putenv && g_posix.unsetenv) repeats_environment_watched();
    watch_fatal_signals();
    return;
  }
  for (const char* c : kInterpreterCreators) {
    if (strlen(c) == static_cast<size_t>(n) && memcmp(c, s, static_cast<size_t>(n)) == 0) {
      g_audit_hook.needed = true;
      audit_hook_step_in();
      return;
    }
  }
}

void before_exec() {
  WriterLock lock;
  record_exec();
  TraceWriter::flush();
  TraceWriter::finish();
}

}  // namespace imptrace
