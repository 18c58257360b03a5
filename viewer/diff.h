// `imptrace diff GOOD BAD` and `imptrace report GOOD BAD -o FILE.html`: a passing and a
// failing run side by side, most likely root cause first.
//
// The engine works on the model only (model.h): per-process facts (diff_facts.*), grouped by
// role (diff_groups.*), compared one finding family at a time (diff_identity.cpp,
// diff_bindings.cpp, diff_modules.cpp, diff_order.cpp), ranked (diff_rank.cpp); diff.cpp
// pairs groups and processes and runs them. Nothing is ever compared by
// address, pid, time of day or install prefix:
// - Processes are paired by role: program name, argv with paths normalised (relative to
//   cwd / sys.path, numbers in paths dropped) and PYTEST_XDIST_WORKER. Processes with the
//   same role minus the xdist worker id form a *group*; module-level facts are compared as
//   the union over a group (xdist hands tests to workers nondeterministically).
// - What sat under each sys.modules key is compared as a structural signature: the
//   sequence of (via import|assignment, type, proxy or not, relativized file/origin,
//   "same object as under X" | "same as entry #i" | "new object").
// - Child bindings by (parent, attribute, status, bound_on is the object under the parent
//   key then and at the end / was later replaced / was not it, bound_on is a proxy).
//   Only anomalous ones (not bound, not on the current object, or on a proxy) make
//   findings; one parent's are one finding, listed in import order, then attribute name
//   (the same import in two xdist workers), then process (group) and record order.
// - Proxy accesses by (proxy type, attribute, outcome, forwarded_to name, relativized
//   file:function of the caller); the tests they happened in are evidence, not identity.
//
// Ranking (most likely root cause first): stories with a warning or an error before
// info-only ones (after grouping, by the story's worst part); within each,
// python_version_changed (the paired processes ran different Python versions: it frames
// the rest, and what each standard library did for itself is part of it),
// process_ended_abnormally (a bad process killed
// or crashed whose good one finished: what follows is compared only up to its end),
// exit_status_changed (info: paired processes exited with different statuses; a bad one
// that exited with an error status where the good one did not is compared the same way),
// sys_modules_replaced, proxy_in_sys_modules,
// binding_on_proxy, binding_mismatch, proxy_forward_failed, import_blocked, import_failed,
// module_reloaded, duplicate_module, process_missing, process_added, module_missing,
// module_added, loader_changed, origin_changed, import_order_changed, import_slower,
// proxy_access_repeats (the same successful proxy access, repeated a different number of
// times: always info, as how often a loop ran is not a cause),
// failure_reporting (the order of
// `Kind`); then severity; then the position of the module's
// first import in the bad run (earlier first). An import_failed its importer handled
// (import_time.h) is one severity level below one that propagated. Findings about the same
// sys.modules key
// (its replacement, children bound on the old object, failed lookups through the proxy
// that replaced it, its failed import) form one story: the highest ranked is the primary
// finding and the others are its `related` entries.
#pragma once

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "model.h"

namespace imptrace {
namespace redact {
class Redactor;
}
namespace diff {

enum class Severity { Info = 0, Warning = 1, Error = 2 };
const char* severity_name(Severity s);  // "info", "warning", "error"

// What a finding is about. Declared in ranking order: the most likely root cause first.
enum class Kind {
  PythonVersionChanged,
  ProcessEndedAbnormally,
  ExitStatusChanged,
  SysModulesReplaced,
  ProxyInSysModules,
  BindingOnProxy,
  BindingMismatch,
  ProxyForwardFailed,
  ImportBlocked,
  ImportFailed,
  ModuleReloaded,
  DuplicateModule,
  ProcessMissing,
  ProcessAdded,
  ModuleMissing,
  ModuleAdded,
  LoaderChanged,
  OriginChanged,
  ImportOrderChanged,
  ImportSlower,
  ProxyAccessRepeats,
  FailureReporting,
};
// The name the text, JSON, markdown and HTML output use: "sys_modules_replaced", ...
const char* kind_name(Kind k);
// A kind compares equal to its name and prints as it.
inline bool operator==(Kind k, std::string_view name) { return name == kind_name(k); }
inline bool operator==(std::string_view name, Kind k) { return name == kind_name(k); }
inline bool operator!=(Kind k, std::string_view name) { return !(k == name); }
inline bool operator!=(std::string_view name, Kind k) { return !(k == name); }
inline std::ostream& operator<<(std::ostream& out, Kind k) { return out << kind_name(k); }

struct Options {
  // import_slower: the bad run's self time of a module's first import must be at least
  // `slower_ratio` times the good run's AND at least `slower_min_ns` more. Below either,
  // no finding at all.
  // Defaults (3x and +50 ms) sit above what a machine with a normal load does to two runs
  // of the same build (GC pauses, cold page cache, scheduler delays of 10-25 ms were seen).
  double slower_ratio = 3.0;
  uint64_t slower_min_ns = 50000000;  // 50 ms
  // Timing findings are info: wall time on a shared runner is not evidence enough to turn
  // a diff red (an overloaded 2-CPU machine once put 90-135 ms of preemption into single
  // imports of the same build). --fail-on-slower makes them warnings.
  bool slower_is_warning = false;
  size_t context = 3;                // events of context around a first divergence
};

// In how many runs of each set a finding's fact was seen (the many-run diff; diff_many.h).
struct Support {
  size_t bad = 0, bad_runs = 0, good = 0, good_runs = 0;
  bool known() const { return bad_runs + good_runs > 0; }
};

struct Finding {
  Kind kind = Kind::SysModulesReplaced;
  Severity severity = Severity::Info;
  std::string module;
  std::string summary;              // one line
  std::string good;                 // evidence from the good run ("" = nothing there)
  std::string bad;                  // evidence from the bad run
  std::vector<model::Location> where;  // relativized
  std::string test;                 // pytest node id, "" none
  std::vector<std::string> tests;   // every test it happened in (aggregated findings)
  std::string process;              // role of the process (group) it was found in
  // The module's first import was entered from native code (IMPTRACE_NATIVE_STACKS=1):
  // the function outside the interpreter that made it, from the bad run, else the good.
  model::NativeCaller native_caller;
  std::vector<Finding> related;     // the rest of the story (primary findings only)
  // Many-run diff only: the runs it was seen in, the story's best separating support
  // (primary findings), which test ran when it happened in each run (diff_many.h), and
  // which pair of runs the text was taken from.
  Support support;
  Support story_support;
  struct RunEvent {
    std::string run;          // the run's path
    bool happened = false;
    std::string test;         // the test running then, "" none
    std::string relative;     // "before_first_failure", "in_first_failure", "after_first_failure",
                              // "before_failing_tests", "after_failing_tests", "among_failing_tests", ""
  };
  std::vector<RunEvent> bad_events, good_events;
  std::vector<std::string> evidence;  // the test-order evidence in sentences
  std::string example;                // "failing run X against passing run Y"

  // Ranking helpers (filled by the engine).
  uint64_t order = 0;               // position of the module's first import in bad
  std::string story;                // grouping key: the sys.modules key the story is about
  std::string brief;                // short clause for the primary's one-line story
};

// The first place where the import sequence of a paired process differs.
struct Divergence {
  bool diverges = false;
  size_t good_pos = 0, bad_pos = 0;                  // index into the main thread's imports
  size_t good_total = 0, bad_total = 0;
  std::vector<std::string> good_context, bad_context;  // names, the divergent one marked
  std::string good_name, bad_name;                   // "" past the end
};

struct ProcessSummary {
  int64_t pid = 0;
  std::string role;
  std::vector<std::string> argv;
  size_t imports = 0;
  std::string python;
  model::ProcessEnd end;
};

struct PairInfo {
  std::string role;
  int good = -1, bad = -1;  // indices into the run's process list, -1 unpaired
  Divergence divergence;
};

struct RunSummary {
  std::vector<std::string> paths;
  std::vector<ProcessSummary> processes;
  size_t imports = 0;
};

// One run of a many-run diff: where it came from and what its outcome was.
struct RunInfo {
  std::string path;
  size_t processes = 0, imports = 0;
  bool failed = false;             // the run's outcome, as `outcome_source` tells it
  std::string outcome_source;      // "junit" (pytest's --junitxml in the run's directory),
                                   // "exit_status", "unknown"
  std::string outcome;             // "4 failed, 1 passed (junit.xml)", "exit status 1"
  std::string first_failing_test;  // "" unknown or none
};

struct Result {
  RunSummary good, bad;
  // Many-run diff (`--good RUN... --bad RUN...`): every run with its outcome.
  bool many = false;
  std::vector<RunInfo> good_runs, bad_runs;
  // The pair of runs the top story's text comes from (the HTML report draws them).
  std::string example_good, example_bad;
  std::vector<PairInfo> pairs;
  std::vector<Finding> findings;  // ranked, grouped
  Options options;
  // What loading the runs warned about ("<file>: ..."): skipped files, traces cut short.
  // Every output format carries them.
  std::vector<std::string> input_warnings;
  // 1 when any finding (related ones included) has severity warning or above, else 0.
  int exit_status() const;
  size_t count(Severity at_least) const;
};

// The engine. `good_paths`/`bad_paths` only label the output.
Result diff_runs(const std::vector<model::Process>& good, const std::vector<model::Process>& bad,
                 const Options& opts = Options());

// A process's role key as used for pairing (exposed for tests).
std::string role_of(const model::Process& p);
// The part a process plays whatever its options: "pytest main" (pytest's own process,
// serial or -n N), "xdist worker" (PYTEST_XDIST_WORKER set), "" (anything else: paired by
// its argv). Groups left unpaired by their key are paired by it.
std::string process_role_class(const model::Process& p);

// Renderers.
// No pair's main thread diverged: that, and whether other threads made another number of
// imports (the divergence compares main threads only; worker threads race).
std::string sequences_alike_text(const Result& r);
void write_text(const Result& r, std::ostream& out, bool color);
void write_json(const Result& r, std::ostream& out, bool pretty = false);
// Markdown for an issue tracker: summary table, details in <details> blocks; the whole
// document stays under `max_bytes` (a note says what was left out).
constexpr size_t kMarkdownMaxBytes = 60 * 1024 - 1024;
void write_markdown(const Result& r, std::ostream& out, size_t max_bytes = kMarkdownMaxBytes);
// One self-contained HTML page: findings, the why-story of the top finding's module in both
// runs, a timeline per process.
void write_html(const Result& r, const std::vector<model::Process>& good,
                const std::vector<model::Process>& bad, std::ostream& out);

}  // namespace diff

// Command entry points (main.cpp dispatches).
int run_diff(const std::vector<std::string>& args);
int run_report(const std::vector<std::string>& args);

// What `diff` and the two-run `report` share: GOOD and BAD (a.positional[0], [1]) read one
// run each and compared with the diff options in `a`; the runs live until exit.
struct ParsedArgs;
struct RunsDiff {
  const std::vector<model::Process>* good;
  const std::vector<model::Process>* bad;
  diff::Result result;
};
RunsDiff diff_command_runs(const ParsedArgs& a);

// What `diff` and `report` share for `--good RUN... --bad RUN...` (diff_many.h): the runs
// read one at a time and freed; with --redact the names they hold learned on the way.
bool many_runs_form(const ParsedArgs& a);
struct ManyRunsDiff {
  diff::Result result;
  std::shared_ptr<redact::Redactor> names;  // --redact only
  // The command's whole output, redacted with --redact.
  std::string finish(const std::string& text) const;
};
ManyRunsDiff diff_command_many(const ParsedArgs& a, bool html);

}  // namespace imptrace
