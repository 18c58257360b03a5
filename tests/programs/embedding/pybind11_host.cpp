// A C++ program embedding Python with pybind11, twice in one process (pybind11's
// initialize/finalize_interpreter). Modules are imported from C++: csv, a package of its
// own from PYTHONPATH and its submodule (whose binding on the package is part of the
// story), email.mime.text, and a module that does not exist (the error caught in C++).
#include <pybind11/embed.h>

#include <iostream>

namespace py = pybind11;

int main() {
  for (int lifetime = 1; lifetime <= 2; ++lifetime) {
    py::initialize_interpreter();
    {
      py::module_ csv = py::module_::import("csv");
      py::module_ child = py::module_::import("emb_pkg.child");
      py::module_ pkg = py::module_::import("emb_pkg");
      py::module_ text = py::module_::import("email.mime.text");
      bool missing = false;
      try {
        py::module_::import("emb_missing");
      } catch (const py::error_already_set& e) {
        missing = e.matches(PyExc_ImportError);
      }
      std::cout << "lifetime " << lifetime << ": " << child.attr("VALUE").cast<int>() << " "
                << py::hasattr(pkg, "child") << " "
                << text.attr("MIMEText")("hi").attr("get_content_type")().cast<std::string>() << " "
                << csv.attr("QUOTE_ALL").cast<int>() << " " << missing << std::endl;
    }
    py::finalize_interpreter();
  }
  return 0;
}
