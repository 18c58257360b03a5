/* An embedding host that initialises Python, imports, and finalises it, several times in
   one process (argv[1] lifetimes). Each lifetime imports the same modules: `csv` from C,
   the rest from Python code (a package of its own from PYTHONPATH, a submodule, a missing
   module). What it prints does not depend on the tracer. */
#include <Python.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  int lifetimes = argc > 1 ? atoi(argv[1]) : 3;
  for (int i = 1; i <= lifetimes; ++i) {
    Py_Initialize();
    PyObject* csv = PyImport_ImportModule("csv");
    if (!csv) { PyErr_Print(); return 1; }
    Py_DECREF(csv);
    char code[512];
    snprintf(code, sizeof code,
             "import sys, json.decoder, emb_pkg.child\n"
             "try:\n    import emb_missing\nexcept ImportError:\n    pass\n"
             "print('lifetime %d:', emb_pkg.child.VALUE, emb_pkg.child is sys.modules['emb_pkg'].child)\n",
             i);
    if (PyRun_SimpleString(code) != 0) return 1;
    if (Py_FinalizeEx() < 0) return 2;
  }
  return 0;
}
