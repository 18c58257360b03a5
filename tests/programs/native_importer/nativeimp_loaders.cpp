// The C++ half of nativeimp: an import from a function in a namespace.
#include <Python.h>

namespace nativeimp {
namespace loaders {

__attribute__((noinline)) PyObject* load_module(const char* name) {
  PyObject* n = PyUnicode_FromString(name);
  if (!n) return nullptr;
  PyObject* m = PyImport_Import(n);
  Py_DECREF(n);
  return m;
}

}  // namespace loaders
}  // namespace nativeimp

extern "C" PyObject* nativeimp_load_from_cpp(const char* name) { return nativeimp::loaders::load_module(name); }
