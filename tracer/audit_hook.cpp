#include "audit_hook.h"

#include <string.h>

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
// in one of them), so os's and posix's two functions are wrapped once os has been
// imported; the wrappers are C functions (no frame, unchanged tracebacks) that call the
// original with the same arguments.
PyObject* exec_wrapper(PyObject* orig, PyObject* args, PyObject* kwargs) {
  before_exec();
  return py.PyObject_Call(orig, args, kwargs);
}

PyMethodDef g_execv_def = {"execv", reinterpret_cast<void*>(exec_wrapper), METH_VARARGS | METH_KEYWORDS,
                           "imptrace: gives back the trace's reserve, then runs os.execv"};
PyMethodDef g_execve_def = {"execve", reinterpret_cast<void*>(exec_wrapper), METH_VARARGS | METH_KEYWORDS,
                            "imptrace: gives back the trace's reserve, then runs os.execve"};

// os._exit ends the process without finalisation or exit handlers: its wrapper writes the
// end record with the status, then calls the original. A status that is not an int is
// left to the original to refuse (the process then goes on).
PyObject* os_exit_wrapper(PyObject* orig, PyObject* args, PyObject* kwargs) {
  PyObject* status = args && py.PyTuple_Size(args) == 1 && !kwargs ? py.PyTuple_GetItem(args, 0) : nullptr;
  // Py_TPFLAGS_LONG_SUBCLASS (the same bit on 3.8-3.13): an int, read without running
  // any __index__ of the program's.
  constexpr unsigned long kLongSubclass = 1UL << 24;
  if (status && (py.PyType_GetFlags(type_of(status)) & kLongSubclass)) {
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
  return py.PyObject_Call(orig, args, kwargs);
}

PyMethodDef g_os_exit_def = {"_exit", reinterpret_cast<void*>(os_exit_wrapper), METH_VARARGS | METH_KEYWORDS,
                             "imptrace: records how the process ends, then runs os._exit"};

// Replaces `name` in os's and posix's dicts (the same builtin in both) by one wrapper.
bool wrap_exec_function(PyObject* os_dict, PyObject* posix_dict, Name& name, PyMethodDef* def) {
  PyObject* orig = dict_get_n(os_dict, name);
  if (!orig || !py.PyCFunction_Type || type_of(orig) != py.PyCFunction_Type) return false;
  Ref wrapper(py.PyCFunction_NewEx(def, orig, nullptr));
  if (!wrapper || py.PyDict_SetItemString(os_dict, name.text, wrapper.get()) < 0) { py.PyErr_Clear(); return false; }
  if (posix_dict && dict_get_n(posix_dict, name) == orig &&
      py.PyDict_SetItemString(posix_dict, name.text, wrapper.get()) < 0)
    py.PyErr_Clear();
  return true;
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
    PyObject* posix = dict_get_n(g_main_interpreter.sys_modules, NAME("posix"));
    PyObject* posix_dict = posix && type_of(posix) == py.PyModule_Type ? py.PyModule_GetDict(posix) : nullptr;
    g_audit_hook.exec_wrapped = os_dict && wrap_exec_function(os_dict, posix_dict, NAME("execv"), &g_execv_def) &&
                                wrap_exec_function(os_dict, posix_dict, NAME("execve"), &g_execve_def);
    if (!g_audit_hook.exec_wrapped) {
      g_audit_hook.needed = true;
      audit_hook_step_in();
    }
    if (os_dict) wrap_exec_function(os_dict, posix_dict, NAME("_exit"), &g_os_exit_def);
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
