// Run directories: a file that cannot be read as a trace is skipped with a warning (the
// other processes are read), links to one trace count once; a FILE argument that cannot
// be read stays an error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "trace_builder.h"
#include "trace_reader.h"
#include "trace_reading.h"

namespace imptrace {
namespace {

using testing::fresh_dir;
using testing::HeaderSpec;
using testing::ImportSpec;
using testing::load;
using testing::Loaded;
using testing::TraceBuilder;

void write_bytes(const std::string& path, const void* p, size_t n) {
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(fwrite(p, 1, n, f), n);
  fclose(f);
}

bool mentions(const std::vector<std::string>& lines, const std::string& what) {
  for (const auto& l : lines)
    if (l.find(what) != std::string::npos) return true;
  return false;
}

TEST(RunDirectory, BadFilesAreSkippedAndLinksCountOnce) {
  std::string dir = fresh_dir("run_dir_skip");
  HeaderSpec h;
  h.pid = 5151;
  TraceBuilder t(true, h);
  t.add_import(ImportSpec::make(0, "json", 5, 10));
  ASSERT_TRUE(t.write_file(dir + "/imptrace.python3.5151.pb"));
  const char junk[] = "this is not a trace at all";
  write_bytes(dir + "/notes.pb", junk, sizeof junk - 1);
  write_bytes(dir + "/header-cut.pb", t.bytes().data(), 5);
  ASSERT_EQ(symlink((dir + "/imptrace.python3.5151.pb").c_str(), (dir + "/link.pb").c_str()), 0);
  ASSERT_EQ(link((dir + "/imptrace.python3.5151.pb").c_str(), (dir + "/zz-hard.pb").c_str()), 0);

  Loaded run = load({dir});
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_EQ(run.procs.size(), 1u);
  EXPECT_EQ(run.procs[0].pid, 5151);
  EXPECT_TRUE(mentions(run.warnings, "notes.pb: ")) << run.warnings.size();
  EXPECT_TRUE(mentions(run.warnings, "header-cut.pb: "));
  EXPECT_TRUE(mentions(run.warnings, "skipped"));
  EXPECT_TRUE(mentions(run.warnings, "zz-hard.pb: the same file as"));
  EXPECT_EQ(run.warnings.size(), 4u);  // two skipped, two counted once

  // Named on the command line, the same bad file is an error.
  Loaded named = load({dir + "/notes.pb"});
  EXPECT_FALSE(named.ok);
  EXPECT_EQ(named.error.rfind(dir + "/notes.pb: ", 0), 0u) << named.error;

  // A directory where nothing could be read is an error too.
  std::string bad_only = fresh_dir("run_dir_bad_only");
  write_bytes(bad_only + "/notes.pb", junk, sizeof junk - 1);
  Loaded bad = load({bad_only});
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(bad.error.find("no readable trace"), std::string::npos) << bad.error;
}

}  // namespace
}  // namespace imptrace
