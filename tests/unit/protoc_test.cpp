// The encoder and proto/imptrace.proto must agree: protoc decodes a builder-made trace and
// every field the builder wrote comes back under the name the .proto gives it.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "scenario.h"

using namespace imptrace::testing;

namespace {
bool have_protoc() { return system("command -v protoc >/dev/null 2>&1") == 0; }
std::string run(const std::string& cmd, int& status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) { status = -1; return out; }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  status = pclose(p);
  return out;
}
}  // namespace

TEST(Protoc, DecodesBuilderTraceWithMatchingFieldNames) {
  if (!have_protoc()) GTEST_SKIP() << "protoc not installed";
  TraceBuilder b;
  build_npugraph_scenario(b);
  std::string path = std::string(IMPTRACE_TEST_TMPDIR) + "/protoc_check.pb";
  ASSERT_TRUE(b.write_file(path));
  int status = 0;
  std::string out = run(std::string("protoc --decode=imptrace.Trace -I '") + IMPTRACE_TEST_PROTO_DIR +
                            "' '" + IMPTRACE_TEST_PROTO_DIR + "/imptrace.proto' < '" + path + "' 2>&1",
                        status);
  ASSERT_EQ(status, 0) << out;
  // Unknown field numbers would show up as bare numbers ("17: 3"); there must be none.
  for (const char* needle :
       {"header {", "schema_major: 1", "pid: 4242", "argv: \"app.py\"", "start_monotonic_ns: 5000000000",
        "env {", "string_def {", "import {", "index: 4", "parent: 2", "duration_ns: 9000",
        "error_type:", "object {", "flags: 1", "search_locations:", "importer {", "line: 3",
        "test:", "modules_change {", "key:", "old {", "new {", "flags: 4", "stack {",
        "during_import: 1", "by_import_system: true", "binding {", "attribute:", "bound_on {",
        "child {", "status: ON_PROXY", "proxy_access {", "proxy {", "error_message:", "forwarded_to {",
        "sys_path {", "entries:", "proxy_class {", "getattr_at {", "defined_in:", "note {",
        "text: \"dict watcher"})
    EXPECT_NE(out.find(needle), std::string::npos) << needle << "\n" << out;
  EXPECT_EQ(out.find("\n  1: "), std::string::npos) << out;
}
