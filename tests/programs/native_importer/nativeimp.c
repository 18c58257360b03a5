/* An extension that imports from native code, for test_native_callers: from its init
 * function, from a static function, (nativeimp_loaders.cpp) from a C++ function in a
 * namespace, and from deep in a C recursion. Each imports a module named after where it is
 * called from. */
#include <Python.h>

PyObject* nativeimp_load_from_cpp(const char* name); /* nativeimp_loaders.cpp */

/* Static: only the file's symbol table names it. */
static PyObject* import_from_static(PyObject* self, PyObject* unused) {
  PyObject* name = PyUnicode_FromString("ni_from_static");
  PyObject* globals = PyEval_GetGlobals();
  PyObject* m = name ? PyImport_ImportModuleLevelObject(name, globals, NULL, NULL, 0) : NULL;
  Py_XDECREF(name);
  return m;
}

/* The import twenty C frames below the call from Python (built -O0: no call is folded):
 * deeper than the tracer's first, short unwind of a native stack. */
static PyObject* import_from_deep_frames(int levels) {
  if (levels > 0) {
    PyObject* m = import_from_deep_frames(levels - 1);
    return m;
  }
  return PyImport_ImportModule("ni_from_deep");
}

static PyObject* import_from_deep(PyObject* self, PyObject* unused) { return import_from_deep_frames(20); }

static PyObject* import_from_cpp(PyObject* self, PyObject* unused) {
  return nativeimp_load_from_cpp("ni_from_cpp");
}

static PyMethodDef methods[] = {
  {"from_static", import_from_static, METH_NOARGS, "imports ni_from_static from a static C function"},
  {"from_cpp", import_from_cpp, METH_NOARGS, "imports ni_from_cpp from a C++ function in a namespace"},
  {"from_deep", import_from_deep, METH_NOARGS, "imports ni_from_deep twenty C frames below the call"},
  {NULL, NULL, 0, NULL},
};

#ifdef NATIVEIMP_OTHER_BUILD
/* Another build of the same source (test_native_callers: a file whose build-id differs). */
int nativeimp_other_build = 1;
#endif

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "nativeimp", NULL, -1, methods};

PyMODINIT_FUNC PyInit_nativeimp(void) {
  PyObject* dep = PyImport_ImportModule("ni_from_init");
  if (!dep) return NULL;
  Py_DECREF(dep);
  return PyModule_Create(&module);
}
