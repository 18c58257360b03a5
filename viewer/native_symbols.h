// The native caller of each import (IMPTRACE_NATIVE_STACKS=1): which C or C++ function
// outside the interpreter entered the import system, named from the files on this machine.
//
// Rules (name_native_callers):
// - The interpreter is every libpython*.so frame of the stack; in a process without one
//   (a static interpreter such as Debian's /usr/bin/python3), the main program.
// - Walking the stack innermost first, past the interpreter's frames: a bytecode
//   evaluation frame (_PyEval_EvalFrame*, PyEval_EvalCode) first means Python code made the
//   import (an import statement, importlib.import_module) - no native caller; so does the C
//   runtime (libc, ld.so) or the launcher's main() calling Py_BytesMain first (the
//   interpreter starting up or finalising by itself); any other object first is the
//   native caller (an extension's init function, or any function of
//   it calling PyImport_ImportModule, PyImport_Import, PyImport_ImportModuleLevelObject...).
// - A frame is symbolised only against a file whose build-id is the one the trace recorded
//   (LoadedObject): the path as recorded, under each directory of IMPTRACE_SYMBOL_PATH
//   (colon-separated roots, e.g. a sysroot) first; separate debug information is found by
//   build-id (/usr/lib/debug/.build-id/). Otherwise the caller keeps object and offset and
//   says why it is not named (NativeCaller::unsymbolised).
// - Names come from the ELF symbol tables (static functions included when not stripped),
//   C++ names demangled; file:line from DWARF where the file has it. elfutils (libdwfl).
#pragma once

#include "model.h"

namespace imptrace {
namespace model {

// Fills Import::native_caller of every import of `p` that has a native stack.
void name_native_callers(Process& p);

}  // namespace model
}  // namespace imptrace
