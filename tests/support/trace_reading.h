// Reading what a unit test built (trace_builder.h) or wrote to disk back through the
// viewer's reader, the way the commands read traces; gtest-only (the diff benchmark
// generator does not include it).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "model.h"
#include "trace_builder.h"
#include "trace_reader.h"

namespace imptrace {
namespace testing {

// `b` parsed into `p`; on failure the reader's reason is the assertion's message, so a
// test writes ASSERT_TRUE(parsed(b, p)).
inline ::testing::AssertionResult parsed(const TraceBuilder& b, model::Process& p) {
  std::string why;
  if (reader::parse_trace(b.data(), b.size(), p, why)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << why;
}

// The outcome of reader::load_traces on `paths` (files or run directories).
struct Loaded {
  bool ok = false;
  std::vector<model::Process> procs;
  std::string error;
  std::vector<std::string> warnings;
};
inline Loaded load(const std::vector<std::string>& paths) {
  Loaded l;
  l.ok = reader::load_traces(paths, l.procs, l.error, l.warnings);
  return l;
}

// An empty directory `name` under the unit tests' scratch directory (the build tree).
inline std::string fresh_dir(const std::string& name) {
  std::string d = std::string(IMPTRACE_TEST_TMPDIR) + "/" + name;
  std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
  EXPECT_EQ(system(cmd.c_str()), 0);
  return d;
}

}  // namespace testing
}  // namespace imptrace
