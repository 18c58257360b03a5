// The many-run diff (diff_many.h) on hand-built runs (diff_runs.h): ranking by separation,
// support, stories, partial findings, noise; and the test outcomes it reads
// (test_outcomes.h): junit XML, node ids, exit statuses.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "commands.h"
#include "diff_many.h"
#include "diff_runs.h"
#include "test_outcomes.h"

namespace imptrace {
namespace {

using diff::Finding;
using diff::Severity;
using testing::dump;
using testing::npugraph_fill;
using testing::npugraph_run;
using testing::RunBuilder;
using testing::Variation;

Variation machine(int i) {
  Variation v;
  v.pid = 1000 + 37 * i;
  v.id_base = 0x7f0000000000ull + 0x1000000ull * i;
  v.workspace = "/home/ci/build-" + std::to_string(i) + "/torchair";
  v.site = i % 2 ? "/usr/local/lib/python3.10/dist-packages" : "/opt/py/lib/python3.10/site-packages";
  v.t0 = 1000 + 77 * i;
  v.threads_swapped = i % 2;
  return v;
}

// Runs held in memory, handed to the engine by name as a loader reads them from disk.
struct Runs {
  std::map<std::string, std::vector<model::Process>> by_path;
  std::vector<std::string> good, bad;
  size_t loads = 0;
  void add(bool bad_side, model::Process p) {
    std::vector<model::Process> run;
    run.push_back(std::move(p));
    add_run(bad_side, std::move(run));
  }
  void add_run(bool bad_side, std::vector<model::Process> procs) {
    std::string path = (bad_side ? "bad" : "good") + std::to_string(by_path.size());
    by_path[path] = std::move(procs);
    (bad_side ? bad : good).push_back(path);
  }
  diff::Result diff() {
    return diff::diff_many_runs(good, bad, [this](const std::string& path, std::vector<model::Process>& out, bool) {
      ++loads;
      out = by_path.at(path);
    });
  }
};

TEST(DiffMany, StoryInEveryFailingRunAndNoPassingRunComesFirst) {
  Runs runs;
  for (int i = 0; i < 3; ++i) runs.add(false, npugraph_run(false, machine(i)));
  for (int i = 3; i < 6; ++i) runs.add(true, npugraph_run(true, machine(i)));
  diff::Result r = runs.diff();
  ASSERT_FALSE(r.findings.empty()) << dump(r);
  const Finding& top = r.findings[0];
  EXPECT_EQ(top.kind, "sys_modules_replaced");
  EXPECT_EQ(top.module, "npugraph_ex");
  EXPECT_EQ(top.support.bad, 3u);
  EXPECT_EQ(top.support.bad_runs, 3u);
  EXPECT_EQ(top.support.good, 0u);
  EXPECT_EQ(top.support.good_runs, 3u);
  EXPECT_EQ(diff::support_text(top.support), "bad 3/3, good 0/3");
  bool failed_lookup = false;
  for (const auto& rel : top.related) failed_lookup |= rel.kind == "proxy_forward_failed";
  EXPECT_TRUE(failed_lookup) << dump(r);
  EXPECT_EQ(r.exit_status(), 1);
  EXPECT_FALSE(top.evidence.empty());
  EXPECT_NE(top.evidence[0].find("in 3/3 failing runs sys.modules['npugraph_ex'] was replaced"), std::string::npos)
      << top.evidence[0];
  // Every run read once, then the pair the top story is told from once more: streamed.
  EXPECT_EQ(runs.loads, 6u + 2u);
  // Every other finding separates less, or as much with fewer runs.
  for (size_t i = 1; i < r.findings.size(); ++i) EXPECT_LE(r.findings[i].support.bad, 3u);
}

TEST(DiffMany, PartialFindingRanksBelowAndSaysSo) {
  Runs runs;
  for (int i = 0; i < 3; ++i) runs.add(false, npugraph_run(false, machine(i)));
  for (int i = 3; i < 6; ++i) {
    RunBuilder b(machine(i));
    npugraph_fill(b, true, machine(i));
    if (i == 5) b.failed_import("flaky_plugin", 700, "ModuleNotFoundError", "No module named 'flaky_plugin'");
    runs.add(true, b.process());
  }
  diff::Result r = runs.diff();
  size_t story = r.findings.size(), partial = r.findings.size();
  for (size_t i = 0; i < r.findings.size(); ++i) {
    if (r.findings[i].module == "npugraph_ex") story = i;
    if (r.findings[i].module == "flaky_plugin") partial = i;
  }
  ASSERT_LT(story, r.findings.size()) << dump(r);
  ASSERT_LT(partial, r.findings.size()) << dump(r);
  EXPECT_LT(story, partial);
  const Finding& f = r.findings[partial];
  EXPECT_EQ(f.kind, "import_failed");
  EXPECT_EQ(f.support.bad, 1u);
  EXPECT_NE(f.summary.find("[in 1 of 3 failing runs only]"), std::string::npos) << f.summary;
  EXPECT_NE(diff::support_text(f.support).find("not in every failing run"), std::string::npos);
  // Present in a third of the failing runs: not what separates them.
  EXPECT_EQ(f.severity, Severity::Info);
}

TEST(DiffMany, PartialButSeparatingKeepsItsSeverity) {
  Runs runs;
  for (int i = 0; i < 3; ++i) runs.add(false, npugraph_run(false, machine(i)));
  for (int i = 3; i < 6; ++i) runs.add(true, npugraph_run(i != 5, machine(i)));
  diff::Result r = runs.diff();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].module, "npugraph_ex");
  EXPECT_EQ(r.findings[0].support.bad, 2u);
  EXPECT_EQ(r.findings[0].severity, Severity::Error);
  EXPECT_NE(r.findings[0].summary.find("[in 2 of 3 failing runs only]"), std::string::npos);
}

TEST(DiffMany, SameBuildOnBothSidesIsClean) {
  Runs runs;
  for (int i = 0; i < 3; ++i) runs.add(false, npugraph_run(false, machine(i)));
  for (int i = 3; i < 6; ++i) runs.add(true, npugraph_run(false, machine(i)));
  diff::Result r = runs.diff();
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  EXPECT_TRUE(r.findings.empty()) << dump(r);
}

TEST(DiffMany, SeenAsOftenInPassingRunsIsNoise) {
  // The replacement in one of two runs on each side: no separation, at most info.
  Runs runs;
  runs.add(false, npugraph_run(false, machine(0)));
  runs.add(false, npugraph_run(true, machine(1)));
  runs.add(true, npugraph_run(false, machine(2)));
  runs.add(true, npugraph_run(true, machine(3)));
  diff::Result r = runs.diff();
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
}

TEST(DiffMany, OutcomeFromTheExitStatusAndASideThatContradictsIt) {
  Runs runs;
  runs.add(false, npugraph_run(false, machine(0)));
  RunBuilder b(machine(1));
  npugraph_fill(b, true, machine(1));
  b.end(testing::F::ProcessEnd::EXIT, 1);
  runs.add(true, b.process());
  runs.add(true, npugraph_run(true, machine(2)));  // exits 0: given as failing, it passed
  diff::Result r = runs.diff();
  ASSERT_EQ(r.bad_runs.size(), 2u);
  EXPECT_EQ(r.bad_runs[0].outcome_source, "exit_status");
  EXPECT_TRUE(r.bad_runs[0].failed);
  EXPECT_FALSE(r.bad_runs[1].failed);
  bool said = false;
  for (const auto& w : r.input_warnings) said |= w.find("given as a failing run, but it passed") != std::string::npos;
  EXPECT_TRUE(said);
}

// ---- what frames the many-run diff, as it frames the two-run diff (diff_ends.cpp) ----------

Variation script_run(int i, const std::string& script, const std::string& python = "") {
  Variation v = machine(i);
  v.argv = {"/usr/bin/python3", script};
  v.python_version = python;
  return v;
}

// `script` importing `names` in order (user code), then ending as `end(b)` says.
template <class End>
model::Process script_process(int i, const std::string& script, const std::vector<std::string>& names, End&& end) {
  RunBuilder b(script_run(i, script));
  uint64_t t = 10;
  for (const auto& n : names) b.import(n, b.ws(n + ".py"), t += 10, 2);
  end(b);
  return b.process();
}

const Finding* find_kind(const diff::Result& r, const std::string& kind) {
  for (const auto& f : r.findings) {
    if (f.kind == kind) return &f;
    for (const auto& rel : f.related)
      if (rel.kind == kind) return &rel;
  }
  return nullptr;
}

TEST(DiffManyFraming, ErrorExitIsAnExitStatusAndWhatFollowedIsNotReached) {
  Runs runs;
  const std::vector<std::string> all = {"cfg", "loader", "cli", "mailer", "money"};
  for (int i = 0; i < 2; ++i) runs.add(false, script_process(i, "story.py", all, [](RunBuilder&) {}));
  for (int i = 2; i < 4; ++i)
    runs.add(true, script_process(i, "story.py", {"cfg", "loader", "cli"},
                                  [](RunBuilder& b) { b.end(testing::F::ProcessEnd::EXIT, 1); }));
  diff::Result r = runs.diff();
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  ASSERT_FALSE(r.findings.empty());
  const Finding* exit = find_kind(r, "exit_status_changed");
  ASSERT_NE(exit, nullptr) << dump(r);
  EXPECT_EQ(exit->severity, Severity::Info);
  EXPECT_NE(exit->summary.find("exit status changed: 0 -> 1 (python story.py)"), std::string::npos) << exit->summary;
  EXPECT_NE(exit->summary.find("its last import was cli"), std::string::npos) << exit->summary;
  EXPECT_EQ(exit->support.bad, 2u);
  EXPECT_EQ(exit->support.good, 0u);
  size_t missing = 0;
  for (const auto& f : r.findings)
    if (f.kind == "module_missing") {
      ++missing;
      EXPECT_EQ(f.summary.rfind("not reached: 2 module(s)", 0), 0u) << f.summary;
      EXPECT_EQ(f.good, "mailer, money");
      EXPECT_EQ(f.severity, Severity::Info);
    }
  EXPECT_EQ(missing, 1u) << dump(r);
}

TEST(DiffManyFraming, WhatAFailingRunThatWentOnLacksIsStillMissing) {
  // One failing run stopped early, the other finished without `money`: not unreached there.
  Runs runs;
  const std::vector<std::string> all = {"cfg", "loader", "cli", "mailer", "money"};
  for (int i = 0; i < 2; ++i) runs.add(false, script_process(i, "story.py", all, [](RunBuilder&) {}));
  runs.add(true, script_process(2, "story.py", {"cfg", "loader", "cli"},
                                [](RunBuilder& b) { b.end(testing::F::ProcessEnd::EXIT, 1); }));
  runs.add(true, script_process(3, "story.py", {"cfg", "loader", "cli", "mailer"}, [](RunBuilder&) {}));
  diff::Result r = runs.diff();
  bool money_missing = false;
  for (const auto& f : r.findings)
    money_missing |= f.kind == "module_missing" && f.summary.find("imported only in passing runs: money") == 0 &&
                     f.severity == Severity::Warning;
  EXPECT_TRUE(money_missing) << dump(r);
}

TEST(DiffManyFraming, PythonVersionChangeIsFirstAndTheStandardLibrarysDifferencesAreItsParts) {
  Runs runs;
  for (int i = 0; i < 4; ++i) {
    bool bad = i >= 2;
    std::string lib = bad ? "/usr/lib/python3.13" : "/usr/lib/python3.12";
    RunBuilder b(script_run(i, "app.py", bad ? "3.13.0 (main) [GCC 12.2.0]" : "3.12.1 (main) [GCC 12.2.0]"));
    b.import("cfg", b.ws("cfg.py"), 10, 2);
    if (!bad) b.stdlib_import("random", lib, 20);
    if (bad) b.import("fractions_user", b.ws("fractions_user.py"), 30, 2);
    runs.add(bad, b.process());
  }
  diff::Result r = runs.diff();
  ASSERT_FALSE(r.findings.empty());
  const Finding& top = r.findings[0];
  EXPECT_EQ(top.kind, "python_version_changed") << dump(r);
  EXPECT_EQ(top.severity, Severity::Warning);
  EXPECT_EQ(top.good, "Python 3.12.1");
  EXPECT_EQ(top.bad, "Python 3.13.0");
  EXPECT_EQ(top.support.bad, 2u);
  bool stdlib_part = false;
  for (const auto& rel : top.related)
    stdlib_part |= rel.kind == "module_missing" && rel.severity == Severity::Info && rel.module == "random" &&
                   rel.summary.find("standard-library module(s) imported only by the") !=
                       std::string::npos;
  EXPECT_TRUE(stdlib_part) << dump(r);
  // The user's own module is the user's story, not the version's.
  const Finding* added = nullptr;
  for (const auto& f : r.findings)
    if (f.kind == "module_added") added = &f;
  ASSERT_NE(added, nullptr) << dump(r);
  EXPECT_EQ(added->module, "fractions_user");
  EXPECT_EQ(added->severity, Severity::Warning);
  for (const auto& f : r.findings)
    EXPECT_FALSE(f.kind == "module_missing" && f.module == "random") << dump(r);
}

// Runs of a main process and a worker (`worker.py`) whose imports and end are given.
template <class End>
std::vector<model::Process> with_worker(int i, const std::vector<std::string>& worker_imports, End&& end) {
  std::vector<model::Process> run;
  run.push_back(script_process(i, "main.py", {"cfg"}, [](RunBuilder&) {}));
  run.push_back(script_process(i + 100, "worker.py", worker_imports, end));
  return run;
}

void finished(RunBuilder&) {}
void sigterm(RunBuilder& b) { b.end(testing::F::ProcessEnd::SIGNAL, 0, 15); }
void sigsegv(RunBuilder& b) { b.end(testing::F::ProcessEnd::SIGNAL, 0, 11); }

const Finding* ended(const diff::Result& r) { return find_kind(r, "process_ended_abnormally"); }

TEST(DiffManyFraming, TerminatedAfterImportingAllItsPassingCounterpartsDidIsInfo) {
  Runs runs;
  for (int i = 0; i < 2; ++i) runs.add_run(false, with_worker(i, {"colorsys", "json_user"}, finished));
  for (int i = 2; i < 4; ++i) runs.add_run(true, with_worker(i, {"colorsys", "json_user"}, sigterm));
  diff::Result r = runs.diff();
  const Finding* f = ended(r);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->severity, Severity::Info) << f->summary;
  EXPECT_NE(f->summary.find(" after importing all its "), std::string::npos) << f->summary;
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
}

TEST(DiffManyFraming, TerminatedShortOfWhereItsPassingCounterpartsGotIsAnError) {
  Runs runs;
  for (int i = 0; i < 2; ++i) runs.add_run(false, with_worker(i, {"colorsys", "json_user"}, finished));
  for (int i = 2; i < 4; ++i) runs.add_run(true, with_worker(i, {"colorsys"}, sigterm));
  diff::Result r = runs.diff();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "process_ended_abnormally") << dump(r);
  EXPECT_EQ(r.findings[0].severity, Severity::Error);
  EXPECT_EQ(r.exit_status(), 1);
}

TEST(DiffManyFraming, TerminatedWithNoCounterpartIsInfoACrashIsAnError) {
  for (bool crash : {false, true}) {
    Runs runs;
    for (int i = 0; i < 2; ++i) runs.add(false, script_process(i, "main.py", {"cfg"}, finished));
    for (int i = 2; i < 4; ++i) runs.add_run(true, with_worker(i, {"colorsys"}, crash ? sigsegv : sigterm));
    diff::Result r = runs.diff();
    const Finding* f = ended(r);
    ASSERT_NE(f, nullptr) << dump(r);
    EXPECT_EQ(f->severity, crash ? Severity::Error : Severity::Info) << f->summary;
    if (!crash) {
      EXPECT_NE(f->summary.find("with no process of its kind in the "), std::string::npos) << f->summary;
    }
  }
}

TEST(DiffManyFraming, APassingRunsAbnormalEndIsInfo) {
  Runs runs;
  for (int i = 0; i < 2; ++i) runs.add_run(false, with_worker(i, {"colorsys"}, sigterm));
  for (int i = 2; i < 4; ++i) runs.add_run(true, with_worker(i, {"colorsys"}, finished));
  diff::Result r = runs.diff();
  const Finding* f = ended(r);
  ASSERT_NE(f, nullptr) << dump(r);
  EXPECT_EQ(f->severity, Severity::Info) << f->summary;
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
}

TEST(TestOutcomes, JunitCasesInOrderWithFailuresAndErrors) {
  const std::string xml = R"(<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1">
<testcase classname="tests.order.backend_test" name="test_npu_backend_registered" time="0.1" />
<testcase classname="tests.order.stream_test.StreamTest" name="test_a" time="0.0"><failure message="AttributeError: x &amp; y">tb</failure></testcase>
<testcase classname="tests.order.stream_test.StreamTest" name="test_b[a::b]" time="0.0"><error message="e">tb</error></testcase>
<testcase classname="t" name="test_skip"><skipped message="no" /></testcase>
</testsuite></testsuites>)";
  std::vector<outcomes::TestCase> cases;
  ASSERT_TRUE(outcomes::parse_junit(xml, cases));
  ASSERT_EQ(cases.size(), 4u);
  EXPECT_EQ(cases[0].key, "tests.order.backend_test::test_npu_backend_registered");
  EXPECT_FALSE(cases[0].failed);
  EXPECT_TRUE(cases[1].failed);
  EXPECT_TRUE(cases[2].failed);
  EXPECT_EQ(cases[2].key, "tests.order.stream_test.StreamTest::test_b[a::b]");
  EXPECT_TRUE(cases[3].skipped);
  EXPECT_FALSE(outcomes::parse_junit("<testsuite></testsuite>", cases = {}));
}

TEST(TestOutcomes, NodeIdsAsJunitNamesThem) {
  EXPECT_EQ(outcomes::junit_key("tests/order/stream_test.py::StreamTest::test_a (call)"),
            "tests.order.stream_test.StreamTest::test_a");
  EXPECT_EQ(outcomes::junit_key("tests/order/backend_test.py::test_x"), "tests.order.backend_test::test_x");
  EXPECT_EQ(outcomes::junit_key("t.py::A::B::test_p[x::y]"), "t.A.B::test_p[x::y]");
  EXPECT_EQ(outcomes::node_id_of("a.py::t (setup)"), "a.py::t");
}

}  // namespace
}  // namespace imptrace

namespace imptrace {
namespace {

TEST(DiffManyArgs, RunsFollowTheirSideWhateverOptionsComeBetween) {
  ParsedArgs a = parse_args({"--good", "g1", "g2", "--format", "json", "g3", "--bad", "b1", "--pretty", "b2"},
                            {"--format"}, {"--good", "--bad", "--pretty"});
  const std::vector<std::string> sides = {"--good", "--bad"};
  EXPECT_EQ(a.after("--good", sides), (std::vector<std::string>{"g1", "g2", "g3"}));
  EXPECT_EQ(a.after("--bad", sides), (std::vector<std::string>{"b1", "b2"}));
  EXPECT_TRUE(a.after("", sides).empty());
  EXPECT_EQ(a.get("--format", ""), "json");
  ParsedArgs loose = parse_args({"x", "--good", "g"}, {}, {"--good", "--bad"});
  EXPECT_EQ(loose.after("", sides), (std::vector<std::string>{"x"}));
}

}  // namespace
}  // namespace imptrace
