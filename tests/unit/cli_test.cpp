// The `imptrace` executable: exit statuses and one-line errors for bad usage and input.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "scenario.h"

using namespace imptrace::testing;

namespace {
struct Result {
  int status;
  std::string out;  // stdout and stderr together
};
Result run(const std::string& args) {
  std::string cmd = std::string("'") + IMPTRACE_TEST_BINARY + "' " + args + " 2>&1";
  Result r{-1, ""};
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
std::string scenario_file() {
  std::string path = std::string(IMPTRACE_TEST_TMPDIR) + "/cli_scenario.pb";
  TraceBuilder b;
  build_npugraph_scenario(b);
  b.write_file(path);
  return path;
}
}  // namespace

TEST(Cli, VersionAndHelp) {
  EXPECT_EQ(run("--version").status, 0);
  EXPECT_EQ(run("--version").out.rfind("imptrace ", 0), 0u);
  Result h = run("help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("why PATH"), std::string::npos);
}

TEST(Cli, UsageErrorsExitTwo) {
  for (const char* args : {"", "frobnicate", "show", "show --bogus x.pb", "export x.pb --format xml",
                           "why x.pb", "tree", "why x.pb m --format", "tree x.pb --min-ms abc",
                           "tree x.pb --depth 0", "tree x.pb --sort name", "tree x.pb --top -3",
                           "tree x.pb --under ''", "show x.pb --all=yes", "report", "report x.pb",
                           "report a.pb b.pb c.pb -o r.html", "report x.pb -o r.html --fail-on-slower"}) {
    Result r = run(args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.out;
    EXPECT_NE(r.out.find("usage: imptrace"), std::string::npos) << args;
  }
}

TEST(Cli, InputErrorsExitTwoWithOneLine) {
  std::string empty = std::string(IMPTRACE_TEST_TMPDIR) + "/cli_empty.pb";
  TraceBuilder(false).write_file(empty);
  Result r = run("show '" + empty + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "imptrace: " + empty + ": empty file\n");
  r = run("show /nonexistent/trace.pb");
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.out, "imptrace: /nonexistent/trace.pb: No such file or directory\n");
}

TEST(Cli, CommandsRunOnATrace) {
  std::string f = "'" + scenario_file() + "'";
  for (std::string args : {"show " + f, "tree " + f, "export " + f + " --format json",
                           "export " + f + " --format=chrome", "why " + f + " npugraph_ex",
                           "why " + f + " npugraph_ex --format json", "show " + f + " --all",
                           "tree " + f + " " + f + " --min-ms 0.001 --depth 3 --sort self --top 2 --under torch_npu"}) {
    Result r = run(args);
    EXPECT_EQ(r.status, 0) << args << ": " << r.out;
    EXPECT_FALSE(r.out.empty()) << args;
  }
}
