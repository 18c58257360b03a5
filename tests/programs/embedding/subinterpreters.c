/* An embedding host that creates sub-interpreters from C: two with Py_NewInterpreter
   (shared GIL) and, on 3.12+, one with Py_NewInterpreterFromConfig and its own GIL. Each
   imports modules the main interpreter does not; the main interpreter imports before and
   after. */
#include <Python.h>
#include <stdio.h>

static int in_sub(const char* label) {
  char code[256];
  snprintf(code, sizeof code, "import csv, emb_pkg.child\nprint('%s', emb_pkg.child.VALUE)\n", label);
  return PyRun_SimpleString(code);
}

int main(void) {
  Py_Initialize();
  if (PyRun_SimpleString("import fractions\n") != 0) return 1;
  PyThreadState* main_ts = PyThreadState_Get();
  for (int k = 0; k < 2; ++k) {
    PyThreadState* sub = Py_NewInterpreter();
    if (!sub) { fprintf(stderr, "Py_NewInterpreter failed\n"); return 1; }
    if (in_sub(k ? "legacy 2" : "legacy 1") != 0) return 1;
    Py_EndInterpreter(sub);
    PyThreadState_Swap(main_ts);
  }
#if PY_VERSION_HEX >= 0x030C0000
  PyInterpreterConfig config = {
      .use_main_obmalloc = 0,
      .allow_fork = 0,
      .allow_exec = 0,
      .allow_threads = 1,
      .allow_daemon_threads = 0,
      .check_multi_interp_extensions = 1,
      .gil = PyInterpreterConfig_OWN_GIL,
  };
  PyThreadState* own = NULL;
  PyStatus status = Py_NewInterpreterFromConfig(&own, &config);
  if (PyStatus_Exception(status)) Py_ExitStatusException(status);
  if (in_sub("own gil") != 0) return 1;
  Py_EndInterpreter(own);
  PyThreadState_Swap(main_ts);
#endif
  if (PyRun_SimpleString("import statistics\nprint('main')\n") != 0) return 1;
  return Py_FinalizeEx() < 0 ? 2 : 0;
}
