// The native caller's rules (native_symbols.h) on synthetic stacks: which frame is the
// caller, when there is none, and what is said when no file has the traced build-id.
#include <gtest/gtest.h>

#include "model.h"
#include "native_symbols.h"

namespace {

using namespace imptrace::model;

NativeFrame frame(const char* object, uint64_t offset, const char* symbol = "") {
  NativeFrame f;
  f.object = object;
  f.offset = offset;
  f.symbol = symbol;
  return f;
}

// A process with one import whose native stack is `stack`, its native caller named
// (name_native_callers).
Process callers_named(std::vector<NativeFrame> stack) {
  Process p;
  Import im;
  im.name = "m";
  im.native_stack = std::move(stack);
  p.imports.push_back(im);
  LoadedObject exe;
  exe.path = "/usr/bin/python3.11";
  exe.build_id = "aa";
  exe.main_program = true;
  LoadedObject ext;
  ext.path = "/nowhere/ext.so";
  ext.build_id = "0123abcd";
  p.loaded_objects = {exe, ext};
  name_native_callers(p);
  return p;
}

TEST(NativeCaller, FirstFrameOutsideAStaticInterpreter) {
  Process p = callers_named({frame("/usr/bin/python3.11", 10, "PyImport_ImportModuleLevelObject"),
                             frame("/usr/bin/python3.11", 20, "PyImport_ImportModule"),
                             frame("/nowhere/ext.so", 0x1137, "PyInit_ext"),
                             frame("/usr/bin/python3.11", 30, "_PyEval_EvalFrameDefault")});
  const NativeCaller& c = p.imports[0].native_caller;
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.object, "/nowhere/ext.so");
  EXPECT_EQ(c.library(), "ext.so");
  EXPECT_EQ(c.offset, 0x1137u);
  // Not symbolised from a file (there is none), the exported name the tracer saw is kept.
  EXPECT_EQ(c.function, "PyInit_ext");
  EXPECT_NE(c.unsymbolised.find("no file with build-id 0123abcd"), std::string::npos) << c.unsymbolised;
  EXPECT_EQ(format_native_caller(c).rfind("ext.so: PyInit_ext (not symbolised: no file with build-id 0123abcd", 0), 0u)
      << format_native_caller(c);
}

TEST(NativeCaller, BytecodeFirstMeansPythonMadeTheImport) {
  Process p = callers_named({frame("/usr/bin/python3.11", 10, "PyImport_ImportModuleLevelObject"),
                             frame("/usr/bin/python3.11", 30, "_PyEval_EvalFrameDefault"),
                             frame("/nowhere/ext.so", 0x1137, "")});
  EXPECT_TRUE(p.imports[0].native_caller.empty());
}

TEST(NativeCaller, SharedInterpreterStartUpHasNone) {
  // libpython is the interpreter; the launcher's main() calling Py_BytesMain, then libc.
  Process p = callers_named({frame("/py/lib/libpython3.12.so.1.0", 10, "PyImport_ImportModule"),
                             frame("/py/lib/libpython3.12.so.1.0", 20, "Py_BytesMain"),
                             frame("/usr/bin/python3.11", 5, "main"),
                             frame("/lib/x86_64-linux-gnu/libc.so.6", 7, "__libc_start_main")});
  EXPECT_TRUE(p.imports[0].native_caller.empty());
  Process q = callers_named({frame("/py/lib/libpython3.12.so.1.0", 10, "PyImport_ImportModule"),
                             frame("/lib/x86_64-linux-gnu/libc.so.6", 7, "__libc_start_call_main")});
  EXPECT_TRUE(q.imports[0].native_caller.empty());
}

TEST(NativeCaller, NoBuildIdRecordedIsSaid) {
  Process p = callers_named({frame("/usr/bin/python3.11", 10, "PyImport_Import"), frame("/other/lib.so", 64, "")});
  const NativeCaller& c = p.imports[0].native_caller;
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c.function, "");
  EXPECT_NE(c.unsymbolised.find("no build-id"), std::string::npos) << c.unsymbolised;
  EXPECT_EQ(format_native_caller(c).rfind("lib.so+0x40 (not symbolised", 0), 0u) << format_native_caller(c);
}

}  // namespace
