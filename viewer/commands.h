// The commands of the `imptrace` executable. Each has a `run_*` entry point taking the
// arguments after the command name (main.cpp dispatches), and pure rendering functions
// over the model that the unit tests call directly.
//
// Errors: run_* throw UsageError (bad arguments: main prints the usage line) or
// InputError (unreadable input); main turns both into one stderr line and exit status 2.
#pragma once

#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "import_time.h"
#include "json_writer.h"
#include "model.h"

namespace imptrace {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Command-line parsing shared by the commands: options are `--name VALUE` or
// `--name=VALUE` from `value_options`, or bare `--name` from `flag_options`; "--" ends
// options; anything else starting with '-' is a UsageError.
struct ParsedArgs {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // name (with dashes), value
  // Per positional: how many options came before it (a flag can then name the list of
  // arguments after it, as `diff --good RUN... --bad RUN...` does).
  std::vector<size_t> options_before;
  bool has(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  // The positionals whose last preceding option among `heads` is `head`.
  std::vector<std::string> after(const std::string& head, const std::vector<std::string>& heads) const;
};
ParsedArgs parse_args(const std::vector<std::string>& args,
                      const std::vector<std::string>& value_options,
                      const std::vector<std::string>& flag_options = {});

// Reads PATH arguments (files or directories) into processes; prints reader warnings to
// stderr as "imptrace: <file>: warning: ..."; throws InputError on failure.
std::vector<model::Process> load_or_throw(const std::vector<std::string>& paths);
// The same for a command's `run_*`: the processes stay alive (unfreed) until the program
// exits, which spares the teardown of large models.
const std::vector<model::Process>& load_for_command(const std::vector<std::string>& paths);
// Every warning the loads so far printed to stderr ("<file>: ..."), in order: files of a
// run directory that were skipped or counted once, traces cut short. Outputs other than
// text on a terminal carry them too (a "warnings" array in JSON, a note in markdown and
// HTML), since a reader of a saved report never saw the stderr of the command.
const std::vector<std::string>& input_warnings();

// One run read into `out` and not kept (the many-run diff reads runs one at a time);
// `report`: its warnings are printed and kept as load_run_for_command's are.
void load_run_into(const std::string& path, std::vector<model::Process>& out, bool report);

// One PATH that must be one run (a side of diff or report): load_for_command, refusing a
// bundle of several runs with a line naming them (pick one as BUNDLE#RUN).
const std::vector<model::Process>& load_run_for_command(const std::string& path);

// `--redact`: a command renders its whole output into a string, and this writes it to
// `out` with user, host and install paths replaced (redact.h), learning the names from
// `runs`, the text and the viewing machine. `html`: the placeholders are escaped.
void write_redacted(const std::string& text, const std::vector<const std::vector<model::Process>*>& runs,
                    std::ostream& out, bool html = false);
std::string redacted(const std::string& text, const std::vector<const std::vector<model::Process>*>& runs,
                     bool html = false);

// Colour for `--color auto`: stdout is a terminal, NO_COLOR is unset or empty, and TERM is
// set and not "dumb".
bool colour_terminal();

// Writes a command's whole output to PATH ("-": stdout) and, for a file, says on stderr
// which file was written; throws InputError when it cannot.
void write_output_file(const std::string& path, const std::string& content, const char* what);

// ---- run --------------------------------------------------------------------------------
// `run [-o DIR] [--append] [--] CMD...`: CMD under the tracer; returns CMD's exit status.
int run_run(const std::vector<std::string>& args);
// The tracer `run` preloads: $IMPTRACE_LIB when set (an error when unreadable), else
// EXE_DIR/libimptrace.so (a build tree), else EXE_DIR/../lib/imptrace/libimptrace.so (an
// installed prefix). Throws InputError naming every place it looked.
std::string find_tracer_library(const std::string& exe_dir, const char* env_lib);
// The *.pb files directly in DIR (what the reader reads from a directory).
size_t count_trace_files(const std::string& dir);

// ---- pack -------------------------------------------------------------------------------
// `pack RUN... [--redact] -o FILE.tar.gz`: the runs' traces in one bundle (bundle.h).
int run_pack(const std::vector<std::string>& args);

// ---- show -------------------------------------------------------------------------------

int run_show(const std::vector<std::string>& args);
// The totals `run` prints when the command ends; anomalies are those `show` lists.
struct RunCounts {
  size_t processes = 0, imports = 0, failed_imports = 0, anomalies = 0;
};
RunCounts count_run(const std::vector<model::Process>& procs);
// One identity anomaly as `show` lists it: sys.modules rewritten by non-import code, a
// proxy under a sys.modules key, a child not bound where expected, a failed access through
// a proxy. `module` is the sys.modules key whose `why` story explains it.
struct Anomaly {
  std::string kind;  // sys_modules_replaced, proxy_in_sys_modules, binding_not_bound,
                     // proxy_access_failed
  std::string module;
  std::string text;
  model::Location at;  // relativized; empty when the record has no place
  std::string test;
};
// In show's order: by kind as listed above, then record order.
std::vector<Anomaly> find_anomalies(const model::Process& p);
// What normal Python does that find_anomalies leaves out, counted for show's summary.
// A failed access that is a probe: a dunder (__path__, __file__, ...) or a pytest
// discovery name (_pytest*, pytest_*) answered with AttributeError, which hasattr(),
// inspect, the import system's fromlist handling and pytest's collection expect; or any
// access made while a test runner reported a failure
// (failure_reporting.h).
bool is_expected_access_failure(const model::ProxyAccess& a);
// Per binding of p.bindings: a "missing" child recorded while the child's or the parent's
// own import was still running (a re-entry: the import system binds the child when the
// outermost import of it finishes), with a later record that finds it bound.
std::vector<bool> bound_later(const model::Process& p);
// Per import of p.imports: it found the module already loaded (an earlier import of the
// same name returned the same object), so it is a lookup, not another import.
std::vector<bool> repeat_imports(const model::Process& p);
// `all_failures`: list every failed import (without it, those their importer handled are
// only counted and each list stops at 20).
void show_text(const std::vector<model::Process>& procs, std::ostream& out, bool all_failures = false);

// ---- tree -------------------------------------------------------------------------------
int run_tree(const std::vector<std::string>& args);
void tree_text(const std::vector<model::Process>& procs, std::ostream& out);
// With the options of `tree` (--min-ms, --depth, --sort, --top, --under).
void tree_text(const std::vector<model::Process>& procs, const timing::TreeOptions& opts, std::ostream& out);
timing::TreeOptions parse_tree_options(const ParsedArgs& a);

// ---- report (one run) -------------------------------------------------------------------
// The page of `report RUN -o FILE.html` (report_run_html.cpp); `label` names the run.
void write_run_html(const std::vector<model::Process>& procs, const std::string& label, std::ostream& out);

// ---- export -----------------------------------------------------------------------------
int run_export(const std::vector<std::string>& args);
// The contract's `imptrace.export/1` document.
// JSON is compact (one line) unless `pretty`.
void export_json(const std::vector<model::Process>& procs, std::ostream& out, bool pretty = false);
// Trace Event JSON (Perfetto, chrome://tracing).
void export_chrome(const std::vector<model::Process>& procs, std::ostream& out, bool pretty = false);

// ---- why --------------------------------------------------------------------------------
int run_why(const std::vector<std::string>& args);

// One module name's story, across all processes (the contract's `imptrace.why/1`).
struct WhyEntry {  // one object that sat under sys.modules[M]
  int64_t process = 0;
  model::ObjectRef object;
  std::string origin;                 // import origin or the object's __file__
  bool via_import = false;            // "import" vs "assignment"
  model::Location set_by;             // relativized
  model::Location triggered_at;       // put there by an import whose importer is a
                                      // package's __getattr__: what asked it (relativized)
  model::NativeCaller native_caller;  // put there by an import native code entered: the
                                      // first frame outside the interpreter
  model::ObjectRef replaced_by;       // absent: not replaced (still there, or removed)
  model::Location replaced_at;        // where the replacement happened (relativized)
  bool removed = false;               // a DELETE/CLEAR ended its time under M
  model::Location removed_at;
  // importlib took it out because its own import failed (the half-made module).
  bool removed_by_failed_import = false;
  uint64_t time_ns = 0;               // when it got there
  std::string test;
  std::string loader;
  bool precise = true;                // false when its arrival was seen only at an import boundary
  bool removal_precise = true;        // false when its removal was seen only at an import boundary
  // The import in progress when an assignment put it there (a module replacing itself):
  // its name and importer (relativized); empty name when none.
  std::string during_import;
  model::Location during_importer;
  std::vector<model::Location> reloads;  // where importlib.reload ran it again (relativized)
  struct ClassChange {
    model::ObjectRef object;  // the object with the class it changed to
    model::Location where;    // first frame outside importlib (relativized)
  };
  std::vector<ClassChange> class_changes;
  // The interpreter lifetime it sat there in, when the process initialised Python more
  // than once (0 otherwise), and whether that lifetime's end (Py_FinalizeEx) ended it.
  uint32_t lifetime = 0;
  bool finalized = false;
};
struct WhyChild {
  int64_t process = 0;
  model::Binding binding;             // with locations untouched
};
struct WhyProxyAccess {
  int64_t process = 0;
  model::ProxyAccess access;
  model::Location where;              // stack[0], relativized
};
struct WhyImport {                    // each import of M (failed ones included)
  int64_t process = 0;
  model::Import import;
  model::Location importer;           // relativized
  model::Location trigger;            // relativized; see model::Import::trigger
  bool reentry = false;               // a lookup while an outer import of M initialises it
  uint32_t lifetime = 0;              // as WhyEntry::lifetime
};
struct WhyLazy {                      // a PEP 810 lazy binding of M (lazy_stories.h)
  int64_t process = 0;
  model::LazyDeclared declared;       // declared_at relativized
  enum class Outcome { Resolved, Failed, NeverUsed } outcome = Outcome::NeverUsed;
  model::Location used_at;            // the first use (relativized); empty when never used
  std::string used_test;
  model::ObjectRef object;            // Resolved: what the binding became
  std::string error;                  // Failed: "ExceptionType: message"
  std::string failed_import;          // Failed: the module whose import failed
  std::string failed_lookup;          // Failed, `lazy from`: "pkg.attr", a name pkg lacked
};
struct WhyReport {
  std::string module;
  std::vector<WhyLazy> lazy;
  std::vector<WhyEntry> entries;
  std::vector<WhyChild> children;
  std::vector<WhyProxyAccess> proxy_accesses;
  std::vector<WhyImport> imports;
  // Processes whose story stops early (a fatal signal, no end record): what is not in
  // the story may simply not have been reached.
  std::vector<std::pair<int64_t, model::ProcessEnd>> cut_short;
};
WhyReport build_why(const std::vector<model::Process>& procs, const std::string& module);
void why_json(const WhyReport& report, std::ostream& out, bool pretty = false);
void why_text(const WhyReport& report, std::ostream& out);

// ---- shared rendering helpers (text_format.cpp) ----------------------------------------
std::string format_ms(uint64_t ns);                    // "12.345"
std::string format_location(const model::Location& loc);  // "file:line in function"
std::string describe_object(const model::ObjectRef& o);   // "module 'a' (obj:..)"
std::string join_argv(const std::vector<std::string>& argv);
void write_location_json(JsonWriter& w, const model::Location& loc);  // object or null
void write_object_json(JsonWriter& w, const model::ObjectRef& o);     // {id,type,is_module} or null
// {library, object, offset, function, file, line, unsymbolised} or null (native_symbols.h).
void write_native_caller_json(JsonWriter& w, const model::NativeCaller& c);
// The same, as the value of key `k` of the open object.
void write_location_json(JsonWriter& w, const std::string& k, const model::Location& loc);
void write_object_json(JsonWriter& w, const std::string& k, const model::ObjectRef& o);
void write_native_caller_json(JsonWriter& w, const std::string& k, const model::NativeCaller& c);

}  // namespace imptrace
