// `imptrace diff --good RUN... --bad RUN...`: what separates every failing run from every
// passing one. Built on the two-run diff's facts, not beside them:
//
// 1. Streamed, one run at a time: the run is read, the per-process facts of the two-run
//    diff are built (diff_facts.h), and each becomes a *fact key*: a hash of what the two-run
//    comparisons compare (a sys.modules key's structural signature, an anomalous binding's
//    or a failing proxy lookup's signature, a failed import's name and error type, a module
//    imported, its origin and loader, a duplicate module, a process that ended abnormally).
//    The run keeps only its keys' counts, the time and test of each anomaly's first
//    occurrence, the order its tests ran in and its outcome (test_outcomes.h); the model
//    is freed before the next run is read.
// 2. Each fact is counted in the failing and the passing runs: its support. A fact seen
//    in more failing runs (as a fraction) than passing ones is a finding about the failing
//    side, the other way round one about the passing side (module_missing, a sys.modules
//    story only the passing runs have). Its separation is the difference of the two
//    fractions: 1 for "in every failing run and no passing run".
// 3. Findings are ranked by separation, then by how many runs of their side show them,
//    then as the two-run diff ranks them (kind, severity, position). Findings about one
//    sys.modules key are one story; the story ranks by its best separating part, and its
//    primary is the root-cause kind (the two-run order of kinds) among the parts that
//    separate. A finding that separates less than half-way (seen in both sets alike) is
//    info, whatever its kind: differences that come and go in passing and failing runs
//    alike are noise (hash seeds, working directories, timing).
// 4. The top stories' text is the two-run diff's, of one failing run that shows the fact
//    against one passing run that does not (read again for that); the rest keep the text
//    of the run they were first seen in. For the top stories the test-order evidence:
//    in each run, whether the event happened, during which test, and where that test ran
//    relative to the run's first failing test (failing runs) or to the tests that failed
//    in the failing runs (passing runs).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "diff.h"

namespace imptrace {
namespace diff {

// Reads one run (a directory, a trace or a bundle's run) into `out`, or throws. `again`:
// the run was read before (the top stories' pair): its warnings were already reported.
using RunLoader = std::function<void(const std::string& path, std::vector<model::Process>& out, bool again)>;

// How many of the top stories get the two-run text and the test-order evidence.
constexpr size_t kStoriesExplained = 5;

Result diff_many_runs(const std::vector<std::string>& good, const std::vector<std::string>& bad,
                      const RunLoader& load, const Options& opts = Options());

// "bad 3/3, good 0/3", with what it means when not a clean separation.
std::string support_text(const Support& s);

}  // namespace diff
}  // namespace imptrace
