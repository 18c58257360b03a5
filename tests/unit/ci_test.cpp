// The CI-facing parts that are pure logic: where `run` finds the tracer, the help table and
// its renderings, `run`'s closing counts against `show`, the markdown headline against its
// table.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "commands.h"
#include "diff.h"
#include "diff_runs.h"
#include "help.h"

using namespace imptrace;

namespace {
std::string scratch(const std::string& name) {
  std::string d = std::string(IMPTRACE_TEST_TMPDIR) + "/ci_" + name;
  std::string cmd = "rm -rf '" + d + "' && mkdir -p '" + d + "'";
  EXPECT_EQ(system(cmd.c_str()), 0);
  return d;
}
void touch(const std::string& path) { std::ofstream(path) << "x"; }
std::string thrown(const std::string& exe_dir, const char* env) {
  try {
    find_tracer_library(exe_dir, env);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(RunLibrary, BuildTreeThenInstallPrefixThenError) {
  std::string root = scratch("lib");
  std::string bin = root + "/bin";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  std::string err = thrown(bin, nullptr);
  EXPECT_NE(err.find(bin + "/libimptrace.so"), std::string::npos) << err;
  EXPECT_NE(err.find(bin + "/../lib/imptrace/libimptrace.so"), std::string::npos) << err;
  EXPECT_NE(err.find("IMPTRACE_LIB"), std::string::npos) << err;

  ASSERT_EQ(system(("mkdir -p '" + root + "/lib/imptrace'").c_str()), 0);
  touch(root + "/lib/imptrace/libimptrace.so");
  EXPECT_EQ(find_tracer_library(bin, ""), bin + "/../lib/imptrace/libimptrace.so");
  touch(bin + "/libimptrace.so");
  EXPECT_EQ(find_tracer_library(bin, nullptr), bin + "/libimptrace.so");
}

TEST(RunLibrary, EnvironmentWinsAndIsNeverSecondGuessed) {
  std::string root = scratch("env");
  touch(root + "/libimptrace.so");
  touch(root + "/mine.so");
  EXPECT_EQ(find_tracer_library(root, (root + "/mine.so").c_str()), root + "/mine.so");
  std::string err = thrown(root, (root + "/missing.so").c_str());
  EXPECT_NE(err.find("IMPTRACE_LIB=" + root + "/missing.so"), std::string::npos) << err;
}

TEST(RunLibrary, CountsOnlyTraceFiles) {
  std::string d = scratch("count");
  touch(d + "/a.pb");
  touch(d + "/b.pb");
  touch(d + "/notes.txt");
  touch(d + "/c.pb.tmp");
  EXPECT_EQ(count_trace_files(d), 2u);
  EXPECT_EQ(count_trace_files(d + "/nope"), 0u);
}

TEST(Help, EveryCommandListsItsOptionsOneLineEach) {
  ASSERT_FALSE(help::commands().empty());
  for (const auto& c : help::commands()) {
    std::ostringstream page;
    help::write_command(c, page);
    std::string text = page.str();
    EXPECT_EQ(text.rfind(std::string("usage: imptrace ") + c.name + " ", 0), 0u) << text;
    bool has_help = false;
    for (const auto& o : c.options) {
      std::string s = o.spelling, d = o.description;
      ASSERT_FALSE(s.empty());
      EXPECT_EQ(s[0], '-') << c.name << ": " << s;
      EXPECT_FALSE(d.empty()) << c.name << ": " << s;
      EXPECT_EQ(d.find('\n'), std::string::npos) << c.name << ": " << s;
      has_help |= s == "-h, --help";
      // one line of the page holds the spelling and the description
      std::regex line("\n  " + std::regex_replace(s, std::regex(R"([\[\]|().*+?^$\\])"), R"(\$&)") +
                      " +" + std::regex_replace(d, std::regex(R"([\[\]|().*+?^$\\{}])"), R"(\$&)") + "\n");
      EXPECT_TRUE(std::regex_search(text, line)) << c.name << ": " << s << "\n" << text;
    }
    EXPECT_TRUE(has_help) << c.name;
    EXPECT_EQ(help::find(c.name), &c);
  }
  EXPECT_EQ(help::find("frobnicate"), nullptr);
}

TEST(Help, GeneralHelpStatesEveryExitStatus) {
  std::ostringstream out;
  help::write_general(out);
  std::string t = out.str();
  for (const char* line : {"\n  0  ", "\n  1  ", "\n  2  "}) EXPECT_NE(t.find(line), std::string::npos) << line;
  for (const auto& c : help::commands())
    EXPECT_NE(t.find(std::string("\n  ") + c.name + " "), std::string::npos) << c.name;
}

TEST(Help, ManPagesHaveEveryOption) {
  for (const auto& c : help::commands()) {
    std::ostringstream man;
    help::write_man(&c, "9.9.9", man);
    std::string t = man.str();
    EXPECT_EQ(t.rfind(".TH IMPTRACE\\-", 0), 0u) << t.substr(0, 80);
    size_t tp = 0;
    for (size_t at = t.find("\n.TP\n"); at != std::string::npos; at = t.find("\n.TP\n", at + 1)) ++tp;
    EXPECT_EQ(tp, c.options.size()) << c.name;
  }
  std::ostringstream top;
  help::write_man(nullptr, "9.9.9", top);
  EXPECT_NE(top.str().find(".SH EXIT STATUS"), std::string::npos);
}

TEST(RunSummary, AnomaliesAreThoseShowLists) {
  std::vector<model::Process> procs{imptrace::testing::npugraph_run(true, imptrace::testing::Variation())};
  RunCounts n = count_run(procs);
  EXPECT_EQ(n.processes, 1u);
  EXPECT_EQ(n.imports, procs[0].imports.size());
  std::ostringstream out;
  show_text(procs, out);
  // `show` lists each anomaly on a line of its own under "anomalies:", details indented deeper
  std::string text = out.str();
  size_t at = text.find("  anomalies:\n");
  ASSERT_NE(at, std::string::npos) << text;
  std::istringstream rest(text.substr(at + 13));
  size_t listed = 0;
  for (std::string line; std::getline(rest, line);) {
    if (line.rfind("    ", 0) != 0) break;
    listed += line.rfind("      ", 0) != 0;
  }
  EXPECT_GT(n.anomalies, 0u);
  EXPECT_EQ(n.anomalies, listed) << text;
  std::vector<model::Process> clean{imptrace::testing::npugraph_run(false, imptrace::testing::Variation())};
  EXPECT_EQ(count_run(clean).anomalies, 0u);
}

TEST(DiffMarkdown, HeadlineCountsTheTableRows) {
  std::vector<model::Process> good{imptrace::testing::npugraph_run(false, imptrace::testing::Variation())};
  std::vector<model::Process> bad{imptrace::testing::npugraph_run(true, imptrace::testing::Variation())};
  diff::Result r = diff::diff_runs(good, bad, diff::Options());
  std::ostringstream md;
  diff::write_markdown(r, md);
  std::string t = md.str();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(t, m, std::regex(R"(\*\*(\d+)\*\* findings? \((\d+) error, (\d+) warning, (\d+) info\))")))
      << t.substr(0, 400);
  size_t rows = 0;
  std::istringstream lines(t);
  for (std::string line; std::getline(lines, line);) rows += std::regex_search(line, std::regex(R"(^\| \d+ \| )"));
  EXPECT_EQ(std::stoul(m[1]), rows);
  EXPECT_EQ(std::stoul(m[2]) + std::stoul(m[3]) + std::stoul(m[4]), rows);
  EXPECT_EQ(rows, r.findings.size());
}
