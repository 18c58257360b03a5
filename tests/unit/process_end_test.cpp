// How processes ended (ProcessEnd) and different process layouts: the reader keeps the
// last end record; diff ranks a bad process cut short first and compares it only up to
// where it stopped; processes pair by role, and unpaired layouts are compared pooled.
#include <gtest/gtest.h>

#include <sstream>

#include "diff.h"
#include "diff_runs.h"
#include "records.h"
#include "trace_reader.h"

// In imptrace::testing: the run builder and dump of diff_runs.h without using-declarations.
namespace imptrace {
namespace testing {
namespace {

using diff::Finding;
using diff::Severity;
namespace End = fields::ProcessEnd;

// A process importing `names` in order (one per tick), then ending as `end` says
// (how < 0: no end record).
model::Process run_of(const std::vector<std::string>& names, int how, int64_t status = 0, int sig = 0,
                      int64_t pid = 1000) {
  Variation v;
  v.pid = pid;
  v.argv = {"/usr/bin/python3", "story.py"};
  RunBuilder b(v);
  uint64_t t = 1;
  for (const auto& n : names) b.import(n, "/usr/lib/python3/" + n + ".py", t++ * 10, 5);
  if (how < 0) b.cut_short();
  else b.end(static_cast<uint32_t>(how), status, sig);
  return b.process();
}

std::vector<const Finding*> all(const diff::Result& r) {
  std::vector<const Finding*> out;
  for (const auto& f : r.findings) {
    out.push_back(&f);
    for (const auto& x : f.related) out.push_back(&x);
  }
  return out;
}

TEST(ProcessEnd, ReaderKeepsTheLastEndRecordAndNoneWithout) {
  model::Process exited = run_of({"os"}, End::EXIT, 3);
  EXPECT_EQ(exited.end.how, model::ProcessEnd::How::Exit);
  EXPECT_EQ(exited.end.status, 3);
  EXPECT_FALSE(model::ended_abnormally(exited.end));

  Variation v;
  RunBuilder b(v);
  b.import("os", "/usr/lib/python3/os.py", 1, 1);
  b.end(End::EXEC);          // an exec that failed...
  b.end(End::SIGNAL, 0, 11);  // ...and the process's real end
  model::Process p = b.process();
  EXPECT_EQ(p.end.how, model::ProcessEnd::How::Signal);
  EXPECT_EQ(p.end.signal, 11);
  EXPECT_TRUE(model::ended_abnormally(p.end));
  EXPECT_EQ(model::end_text(p.end), "killed by SIGSEGV (signal 11)");

  model::Process cut = run_of({"os"}, -1);
  EXPECT_EQ(cut.end.how, model::ProcessEnd::How::None);
  EXPECT_TRUE(model::ended_abnormally(cut.end));
  EXPECT_EQ(std::string(model::end_how_name(cut.end.how)), "none");
}

TEST(ProcessEnd, KilledBadProcessIsFirstAndNothingItNeverReachedIsMissing) {
  std::vector<model::Process> good{run_of({"os", "json", "csv", "decimal", "tarfile"}, End::EXIT, 0)};
  std::vector<model::Process> bad{run_of({"os", "json"}, -1, 0, 0, 2000)};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "process_ended_abnormally") << dump(r);
  EXPECT_EQ(r.findings[0].severity, Severity::Error);
  EXPECT_NE(r.findings[0].summary.find("no end record"), std::string::npos) << r.findings[0].summary;
  EXPECT_EQ(r.exit_status(), 1);
  bool unreached = false;
  for (const Finding* f : all(r)) {
    EXPECT_FALSE(f->kind == "module_missing" && f->severity != Severity::Info) << dump(r);
    if (f->kind == "module_missing" && f->summary.find("not reached") != std::string::npos) {
      unreached = true;
      EXPECT_NE(f->good.find("tarfile"), std::string::npos) << f->good;
    }
  }
  EXPECT_TRUE(unreached) << dump(r);
}

TEST(ProcessEnd, WhatWasSkippedBeforeTheEndIsStillMissing) {
  std::vector<model::Process> good{run_of({"os", "yaml", "json", "csv"}, End::EXIT, 0)};
  std::vector<model::Process> bad{run_of({"os", "json"}, End::SIGNAL, 0, 6, 2000)};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "process_ended_abnormally");
  EXPECT_NE(r.findings[0].summary.find("SIGABRT"), std::string::npos) << r.findings[0].summary;
  bool yaml_missing = false;
  for (const Finding* f : all(r)) {
    if (f->kind == "module_missing" && f->severity == Severity::Warning) {
      EXPECT_EQ(f->module, "yaml") << dump(r);
      yaml_missing = true;
    }
  }
  EXPECT_TRUE(yaml_missing) << dump(r);
}

TEST(ProcessEnd, NonZeroExitOrBothCutShortIsNoAbnormalEnd) {
  std::vector<model::Process> good{run_of({"os", "json"}, End::EXIT, 0)};
  std::vector<model::Process> failed{run_of({"os", "json"}, End::EXIT, 1, 0, 2000)};
  std::vector<model::Process> os_exit{run_of({"os", "json"}, End::OS_EXIT, 0, 0, 2000)};
  for (const auto* bad : {&failed, &os_exit}) {
    diff::Result r = diff::diff_runs(good, *bad);
    EXPECT_EQ(r.exit_status(), 0) << dump(r);
  }
  std::vector<model::Process> g_cut{run_of({"os", "json"}, -1)}, b_cut{run_of({"os"}, -1, 0, 0, 2000)};
  diff::Result r = diff::diff_runs(g_cut, b_cut);
  for (const Finding* f : all(r)) EXPECT_NE(f->kind, "process_ended_abnormally") << dump(r);
}

TEST(ProcessEnd, ErrorExitWhereTheGoodRunWentOnIsOneStatusChangeAndTheRestNotReached) {
  // An uncaught RuntimeError after its first imports: exit status 1, the rest never reached.
  std::vector<model::Process> good{run_of({"os", "json", "csv", "decimal", "tarfile"}, End::EXIT, 0)};
  std::vector<model::Process> bad{run_of({"os", "json"}, End::EXIT, 1, 0, 2000)};
  diff::Result r = diff::diff_runs(good, bad);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "exit_status_changed") << dump(r);
  EXPECT_NE(r.findings[0].summary.find("0 -> 1"), std::string::npos) << r.findings[0].summary;
  EXPECT_EQ(r.findings[0].bad, "exited with status 1");
  size_t unreached = 0;
  for (const Finding* f : all(r)) {
    if (f->kind != "module_missing") continue;
    EXPECT_EQ(f->severity, Severity::Info) << dump(r);
    EXPECT_NE(f->summary.find("not reached: 3 module(s)"), std::string::npos) << f->summary;
    ++unreached;
  }
  EXPECT_EQ(unreached, 1u) << dump(r);
  // Both runs failing alike is no stop to compare against: what is missing stays missing,
  // and the same status is no change.
  std::vector<model::Process> both_failed{run_of({"os", "json", "csv", "decimal", "tarfile"}, End::EXIT, 1)};
  diff::Result same = diff::diff_runs(both_failed, bad);
  EXPECT_EQ(same.exit_status(), 1) << dump(same);
  for (const Finding* f : all(same)) EXPECT_NE(f->kind, "exit_status_changed") << dump(same);
}

TEST(ProcessEnd, BothCutShortByDifferentSignalsIsAnAbnormalEnd) {
  // A worker that crashed where the other run's was terminated (both have end records).
  std::vector<model::Process> good{run_of({"os", "json", "csv", "decimal"}, End::SIGNAL, 0, 15)};
  std::vector<model::Process> crashed{run_of({"os", "json"}, End::SIGNAL, 0, 11, 2000)};
  diff::Result r = diff::diff_runs(good, crashed);
  ASSERT_FALSE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.findings[0].kind, "process_ended_abnormally") << dump(r);
  EXPECT_NE(r.findings[0].summary.find("SIGSEGV"), std::string::npos) << r.findings[0].summary;
  EXPECT_NE(r.findings[0].good.find("SIGTERM"), std::string::npos) << r.findings[0].good;
  // Terminated the same way at different points: no abnormal end to report.
  std::vector<model::Process> terminated{run_of({"os", "json"}, End::SIGNAL, 0, 15, 2000)};
  diff::Result same = diff::diff_runs(good, terminated);
  for (const Finding* f : all(same)) EXPECT_NE(f->kind, "process_ended_abnormally") << dump(same);
  EXPECT_EQ(same.exit_status(), 0) << dump(same);
}

TEST(ProcessEnd, TerminatedAfterReachingAllTheGoodOneDidIsInfoBeforeThatAnError) {
  // Pool.terminate(): an idle worker exits by itself in one run and is SIGTERMed in the
  // other, by chance. Having imported all its good counterpart did, it explains nothing.
  std::vector<model::Process> good{run_of({"os", "json"}, End::OS_EXIT, 0)};
  std::vector<model::Process> idle{run_of({"os", "json"}, End::SIGNAL, 0, 15, 2000)};
  diff::Result r = diff::diff_runs(good, idle);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  ASSERT_FALSE(r.findings.empty()) << dump(r);
  EXPECT_EQ(r.findings[0].kind, "process_ended_abnormally") << dump(r);
  EXPECT_EQ(r.findings[0].severity, Severity::Info) << dump(r);
  EXPECT_TRUE(model::terminated(idle[0].end));
  // Terminated before it got where the good one got (hung in an import): the story.
  std::vector<model::Process> hung{run_of({"os"}, End::SIGNAL, 0, 15, 2000)};
  diff::Result h = diff::diff_runs(good, hung);
  EXPECT_EQ(h.exit_status(), 1) << dump(h);
  EXPECT_EQ(h.findings[0].kind, "process_ended_abnormally") << dump(h);
  EXPECT_EQ(h.findings[0].severity, Severity::Error) << dump(h);
  EXPECT_NE(h.findings[0].summary.find("killed by SIGTERM (signal 15)"), std::string::npos) << h.findings[0].summary;
  // Any other signal is a crash however far the process got.
  std::vector<model::Process> crashed{run_of({"os", "json"}, End::SIGNAL, 0, 11, 2000)};
  EXPECT_FALSE(model::terminated(crashed[0].end));
  EXPECT_EQ(diff::diff_runs(good, crashed).exit_status(), 1);
}

TEST(ProcessEnd, TerminatedWithNoCounterpartIsInfoACrashWithNoneAnError) {
  // A pool's worker that got tasks in the bad run only (in the good run it imported
  // nothing, so left no trace), then was SIGTERMed idle: nothing to compare it with.
  std::vector<model::Process> good{run_of({"os", "json"}, End::OS_EXIT, 0, 0, 1000)};
  std::vector<model::Process> bad{run_of({"os", "json"}, End::OS_EXIT, 0, 0, 2000),
                                  run_of({"os", "json"}, End::SIGNAL, 0, 15, 2001)};
  diff::Result r = diff::diff_runs(good, bad);
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
  size_t ends = 0;
  for (const Finding* f : all(r)) {
    if (f->kind != "process_ended_abnormally") continue;
    EXPECT_EQ(f->severity, Severity::Info) << dump(r);
    EXPECT_EQ(f->good, "no such process");
    ++ends;
  }
  EXPECT_EQ(ends, 1u) << dump(r);
  bad[1] = run_of({"os", "json"}, End::SIGNAL, 0, 11, 2001);
  EXPECT_EQ(diff::diff_runs(good, bad).exit_status(), 1);
}

// pytest run serially against pytest -n 2: the tests (and the replacement) happen in the
// workers of one run and in the main process of the other.
std::vector<model::Process> xdist_run(bool bad) {
  Variation main;
  main.pid = 3000;
  main.argv = {"/usr/bin/python3.10", "-m", "pytest", main.workspace + "/npugraph_ex/tests/smoke/stream_test.py",
               "-p", "xdist", "-n", "2"};
  RunBuilder m(main);
  m.import("os", "/usr/lib/python3.10/os.py", 1, 5);
  m.import("json", "/usr/lib/python3.10/json/__init__.py", 10, 5);
  std::vector<model::Process> run{m.process()};
  for (const char* w : {"gw0", "gw1"}) {
    Variation v;
    v.pid = w[2] == '0' ? 3001 : 3002;
    v.xdist_worker = w;
    v.argv = {"/usr/bin/python3.10", "-c", "import sys;exec(eval(sys.stdin.readline()))"};
    run.push_back(npugraph_run(bad, v));
  }
  return run;
}

TEST(ProcessLayouts, PytestMainPairsWithPytestMainWhateverItsOptions) {
  Variation serial;
  Variation xdist;
  xdist.argv = {"/usr/bin/python3.10", "-m", "pytest", xdist.workspace + "/x.py", "-n", "2"};
  EXPECT_EQ(diff::process_role_class(npugraph_run(false, serial)), "pytest main");
  EXPECT_EQ(diff::process_role_class(npugraph_run(false, xdist)), "pytest main");
  Variation worker;
  worker.xdist_worker = "gw1";
  EXPECT_EQ(diff::process_role_class(npugraph_run(false, worker)), "xdist worker");
  Variation child;
  child.argv = {"/usr/bin/python3", "tools/helper.py", "--pytest"};
  EXPECT_EQ(diff::process_role_class(npugraph_run(false, child)), "");
}

TEST(ProcessLayouts, SerialGoodAgainstXdistBadFindsTheReplacementInAWorker) {
  std::vector<model::Process> good{npugraph_run(false, Variation())};
  std::vector<model::Process> bad = xdist_run(true);
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "sys_modules_replaced") << dump(r);
  EXPECT_EQ(r.findings[0].module, "npugraph_ex");
  // The main processes are paired; the workers are a layout difference, not a warning.
  for (const Finding* f : all(r))
    EXPECT_FALSE((f->kind == "process_added" || f->kind == "process_missing") && f->severity != Severity::Info)
        << dump(r);
}

TEST(ProcessLayouts, XdistGoodAgainstSerialBadFindsTheReplacementInTheMain) {
  std::vector<model::Process> good = xdist_run(false);
  std::vector<model::Process> bad{npugraph_run(true, Variation())};
  diff::Result r = diff::diff_runs(good, bad);
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].kind, "sys_modules_replaced") << dump(r);
  EXPECT_EQ(r.findings[0].module, "npugraph_ex");
}

TEST(ProcessLayouts, SameLayoutIsNotPooledAndStaysClean) {
  diff::Result r = diff::diff_runs(xdist_run(false), xdist_run(false));
  EXPECT_EQ(r.exit_status(), 0) << dump(r);
}

}  // namespace
}  // namespace testing
}  // namespace imptrace
