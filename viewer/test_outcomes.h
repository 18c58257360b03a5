// Which tests of a run failed, taken from the run itself: the junit XML pytest writes with
// `--junitxml` when the run's directory holds one, else the exit status of the run's first
// process. The many-run diff (diff_many.h) uses it to check each run's side, to find each
// run's first failing test and to say where an event happened relative to it; the output
// says which of the two sources each run's outcome came from.
#pragma once

#include <string>
#include <vector>

#include "model.h"

namespace imptrace {
namespace outcomes {

struct TestCase {
  std::string key;      // "tests.smoke.stream_test.StreamTest::test_a": junit's classname::name
  std::string name;     // as shown: the pytest node id when the trace names it, else key
  bool failed = false;  // a <failure> or <error> in it
  bool skipped = false;
};

struct RunOutcome {
  enum class Source { Junit, ExitStatus, Unknown };
  Source source = Source::Unknown;
  bool failed = false;
  std::string text;                 // "4 failed, 1 passed (junit.xml)", "exit status 1 (python -m pytest ...)"
  std::vector<TestCase> tests;      // junit only: in the file's order (pytest's run order when serial)
  int first_failing = -1;           // index in `tests`, -1 none or unknown
};
const char* source_name(RunOutcome::Source s);  // "junit", "exit_status", "unknown"

// The key a pytest node id has in junit XML: "tests/smoke/stream_test.py::StreamTest::test_a"
// -> "tests.smoke.stream_test.StreamTest::test_a" (pytest's classname is the module path
// with dots, then the classes). A trailing " (call)", " (setup)" or " (teardown)" is dropped.
std::string junit_key(const std::string& node_id);
// A pytest node id without the phase PYTEST_CURRENT_TEST appends.
std::string node_id_of(const std::string& test);

// The <testcase> elements of a junit XML document, in order. False when it holds none.
bool parse_junit(const std::string& xml, std::vector<TestCase>& out);
// Is `xml` junit XML outcome_of reads (a <testsuite> with <testcase> elements)?
bool is_junit(const std::string& xml);

// The outcome of one run: junit XML files directly in `run_path` when it is a directory
// (every *.xml holding <testcase> elements, by name), or the junit XML members packed with
// the run when it is a bundle (BUNDLE#RUN, or a bundle of one run: bundle.h), else the exit
// status of the run's first process (the one no other process of the run started).
// Unreadable XML in a directory is skipped with a line in `warnings`; a bundle that cannot
// be read throws InputError.
RunOutcome outcome_of(const std::string& run_path, const std::vector<model::Process>& procs,
                      std::vector<std::string>& warnings);

}  // namespace outcomes
}  // namespace imptrace
