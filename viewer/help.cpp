// The help table (see help.h) and its three renderings: terminal text, one command's
// page, and man(1) roff.
#include "help.h"

#include <algorithm>
#include <sstream>

namespace imptrace::help {

namespace {

const char kPathNote[] =
    "PATH is a trace file (.pb or .pb.gz), a directory of *.pb traces (one run, one file per\n"
    "process), or a bundle made by pack (.tar.gz; BUNDLE#RUN names one of its runs).";
const char kHelpOption[] = "-h, --help";
const char kDiffExit[] =
    "0 no finding of severity warning or above, 1 such findings, 2 usage or input error.";

std::vector<CommandHelp> build() {
  const Option help{kHelpOption, "print this help and exit 0"};
  const Option pretty{"--pretty", "indent the JSON (compact, one line, without it)"};
  const Option slower_threshold{"--slower-threshold FACTOR[,MS]",
                                "import_slower when self time grows FACTOR times and MS more (default 3x,50ms)"};
  const Option slower_min{"--slower-min-ms MS", "the MS part of --slower-threshold alone"};
  const Option fail_on_slower{"--fail-on-slower", "import_slower findings are warnings (exit 1), not info"};
  const Option context{"--context N", "events shown around the first divergence of import order (default 3)"};
  const Option redact{"--redact",
                      "replace homes, user and host names, install paths and directories outside the working directory with ~, <user>, <host>, <site-packages>, <python>, <cwd>, <dir-HASH>"};
  return {
      {"show", "PATH... [options]", "processes, counts, failed imports, anomalies",
       "What happened in a run, per process: who it was, how many imports, the failed imports\n"
       "that propagated (those their importer handled are counted), sys.modules entries\n"
       "replaced by non-import code, proxies under sys.modules keys, children not bound on\n"
       "their parents, failed attribute accesses through proxies. What a package put under its\n"
       "own names while it was imported (a lazy module, a module replacing itself) is counted\n"
       "as normal Python, not listed as an anomaly.",
       {{"--all", "list every failed import, those their importer handled too, every import entered from native code, and every object packages put under their own names while imported, with no cap"}, redact, help},
       "0 success, 2 usage or input error."},
      {"tree", "PATH... [options]", "nested import tree with cumulative and self ms",
       "The nested import tree of each process, with cumulative and self time in ms; a\n"
       "header line per process says which it is.",
       {{"--min-ms X", "hide imports whose cumulative time is under X ms"},
        {"--depth N", "show N levels of nesting (1: top-level imports only)"},
        {"--sort start|cumulative|self", "order of siblings (default start)"},
        {"--top N", "the first N siblings at each level, the rest summed on one line"},
        {"--under MODULE", "only the imports of MODULE and its submodules, with what they imported"},
        redact, help},
       "0 success, 2 usage or input error."},
      {"why", "PATH... MODULE [options]", "one module name's whole story",
       "Everything that sat under sys.modules[MODULE] and who put it there, the bindings of\n"
       "its children, and the attribute accesses through proxies standing in for it.",
       {{"--format text|json", "text (default) or the imptrace.why/1 JSON document"}, pretty, redact, help},
       "0 success, 2 usage or input error."},
      {"export", "PATH... [options]", "all events as JSON, or Trace Event JSON for Perfetto",
       "Every process's imports and events as the imptrace.export/1 JSON document, or as\n"
       "Trace Event JSON that Perfetto and chrome://tracing open.",
       {{"--format json|chrome", "imptrace.export/1 (default) or Trace Event JSON"}, pretty, redact, help},
       "0 success, 2 usage or input error."},
      {"diff", "GOOD BAD [options] | --good RUN... --bad RUN... [options]", "passing and failing runs side by side",
       "A passing (GOOD) and a failing (BAD) run side by side, most likely root cause first.\n"
       "Timing findings (import_slower) are info unless --fail-on-slower.\n"
       "With --good RUN... --bad RUN..., many runs at once: findings ranked by how well they\n"
       "separate the failing runs from the passing ones (in every failing run and no passing\n"
       "run first), each with its support (bad 3/3, good 0/3); for the top stories, which test\n"
       "was running when it happened in each run, relative to the first failing test. Test\n"
       "outcomes come from junit XML in the run's directory (pytest --junitxml), else from\n"
       "the exit status; the output says which.",
       {{"--good RUN...", "passing runs, for the many-run diff (with --bad)"},
        {"--bad RUN...", "failing runs, for the many-run diff (with --good)"},
        {"--format text|json|markdown", "text (default), imptrace.diff/1 JSON, or markdown for an issue (under 60 KB)"},
        {"--color auto|always|never", "colour the text (auto: on a terminal, unless NO_COLOR is set or TERM=dumb)"},
        context, slower_threshold, slower_min, fail_on_slower, pretty, redact, help},
       kDiffExit},
      {"report", "[RUN | GOOD BAD | --good RUN... --bad RUN...] -o FILE.html [options]",
       "one run, or a diff, as one self-contained HTML page",
       "One run (RUN) as one self-contained HTML page: an import-time chart per process and\n"
       "thread (click to zoom, hover for details), the slowest and the failed imports, the\n"
       "anomalies with their why stories. Or the diff of GOOD and BAD (findings, first\n"
       "divergence, both sides' charts with the modules named in findings marked), or of\n"
       "many runs (as diff --good --bad; the charts of the pair the top story is told from).\n"
       "The diff options apply to the diff pages only.",
       {{"-o, --output FILE", "where the page goes (required); - writes it to stdout"},
        {"--good RUN...", "passing runs, for the many-run page (with --bad)"},
        {"--bad RUN...", "failing runs, for the many-run page (with --good)"},
        context, slower_threshold, slower_min, fail_on_slower, redact, help},
       kDiffExit},
      {"run", "[options] [--] CMD ARGS...", "run CMD under the tracer, one directory per run",
       "Runs CMD with libimptrace.so preloaded; every Python process it starts writes its\n"
       "trace into the run's directory: by default a new imptrace-traces/YYYYMMDD-HHMMSS\n"
       "(UTC; imptrace-traces/latest points at the newest). SIGINT, SIGTERM, SIGHUP and\n"
       "SIGQUIT are forwarded to CMD's process group. The tracer is $IMPTRACE_LIB, else\n"
       "libimptrace.so next to imptrace, else ../lib/imptrace/libimptrace.so from it.",
       {{"-o, --output DIR", "the run's directory (created; refused if it already holds traces)"},
        {"--append", "with -o: add to the traces already in DIR"},
        help},
       "CMD's status (128+N when signal N ended it; 127 CMD not found), 2 usage or input error."},
      {"pack", "RUN... [--redact] -o FILE.tar.gz", "runs' traces in one bundle to attach to an issue",
       "Puts runs (directories, trace files, .pb.gz files or bundles) in one .tar.gz that\n"
       "GitHub and GitCode accept as an attachment: a directory per run and a manifest.json.\n"
       "A run's junit XML (*.xml in its directory) goes with it, so diff --good/--bad takes\n"
       "the same test outcomes from BUNDLE#RUN. Every trace is checked first. With --redact\n"
       "the traces themselves are rewritten: their strings (paths, argv, environment)\n"
       "carry placeholders instead of user, host and install paths, and stay valid traces;\n"
       "the junit XML too, and stays well-formed. Prints the bundle's size per import.",
       {{"-o, --output FILE", "the bundle to write (required)"},
        {"--redact", "rewrite the traces' and junit XML's strings: ~, <user>, <host>, <site-packages>, <python>"}, help},
       "0 success, 2 usage or input error."},
      {"help", "[COMMAND]", "this help, or one command's",
       "The general help, or one command's with each of its options.",
       {{"--man", "the page as man(1) roff (imptrace.1, or imptrace-COMMAND.1 with COMMAND)"}, help},
       "0 success, 2 usage error (unknown command)."},
  };
}

std::string option_names(const char* spelling) {
  // "-o, --output FILE" -> "-o, --output"
  std::string s = spelling;
  size_t cut = s.find(' ', s.rfind(", ") == std::string::npos ? 0 : s.rfind(", ") + 2);
  return cut == std::string::npos ? s : s.substr(0, cut);
}

// roff escapes: backslashes and leading dots/quotes, and '-' as a real minus sign.
std::string roff(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '\\') o += "\\e";
    else if (c == '-') o += "\\-";
    else o += c;
  }
  if (!o.empty() && (o[0] == '.' || o[0] == '\'')) o = "\\&" + o;
  return o;
}

}  // namespace

const std::vector<CommandHelp>& commands() {
  static const std::vector<CommandHelp> table = build();
  return table;
}

const CommandHelp* find(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string usage_line() {
  std::string s = "usage: imptrace COMMAND ... (";
  bool first = true;
  for (const auto& c : commands()) {
    s += (first ? "" : ", ") + std::string(c.name);
    first = false;
  }
  return s + "); imptrace help COMMAND for its options";
}

void write_general(std::ostream& out) {
  out << "imptrace: see what CPython's import system did in a traced run.\n\n"
      << "usage: imptrace COMMAND ARGS...   (imptrace help COMMAND, or COMMAND --help: its options)\n"
      << "       imptrace --version\n\n"
      << "Commands:\n";
  for (const auto& c : commands()) {
    std::string head = std::string("  ") + c.name + " " + c.synopsis;
    if (head.size() > 38) out << head << "\n" << std::string(40, ' ');
    else out << head << std::string(40 - head.size(), ' ');
    out << c.summary << "\n";
  }
  out << "\n" << kPathNote << "\n"
      << "\nEnvironment:\n"
      << "  IMPTRACE_LIB                        the libimptrace.so `run` preloads\n"
      << "  NO_COLOR, TERM=dumb                 no colour in `diff` text output\n"
      << "\nExit status:\n"
      << "  0  success; for diff and report: no finding of severity warning or above\n"
      << "  1  diff and report: findings of severity warning or above (the runs differ in a way\n"
      << "     that matters)\n"
      << "  2  usage or input error (one line on stderr says which)\n"
      << "  run exits with CMD's status (128+N when signal N ended it).\n";
}

void write_command(const CommandHelp& c, std::ostream& out) {
  out << "usage: imptrace " << c.name << " " << c.synopsis << "\n\n" << c.description << "\n";
  if (std::string(c.synopsis).find("PATH") != std::string::npos) out << kPathNote << "\n";
  out << "\nOptions:\n";
  size_t width = 0;
  for (const auto& o : c.options) width = std::max(width, std::string(o.spelling).size());
  for (const auto& o : c.options) {
    std::string s = o.spelling;
    out << "  " << s << std::string(width - s.size() + 2, ' ') << o.description << "\n";
  }
  out << "\nExit status: " << c.exit_status << "\n";
}

void write_man(const CommandHelp* c, const std::string& version, std::ostream& out) {
  std::string title = c ? std::string("imptrace-") + c->name : "imptrace";
  std::string upper;
  for (char ch : title) upper += static_cast<char>(ch >= 'a' && ch <= 'z' ? ch - 32 : ch);
  out << ".TH " << roff(upper) << " 1 \"\" \"imptrace " << roff(version) << "\" \"imptrace manual\"\n"
      << ".SH NAME\n" << roff(title) << " \\- "
      << roff(c ? c->summary : "see what CPython's import system did in a traced run") << "\n"
      << ".SH SYNOPSIS\n";
  if (!c) {
    out << ".B imptrace\nCOMMAND ARGS...\n.br\n.B imptrace\n\\-\\-version\n"
        << ".SH COMMANDS\n" << roff(kPathNote) << "\n";
    for (const auto& k : commands())
      out << ".TP\n.B " << roff(k.name) << " " << roff(k.synopsis) << "\n" << roff(k.summary)
          << "; see imptrace\\-" << roff(k.name) << "(1).\n";
    std::ostringstream text;
    write_general(text);
    std::string t = text.str();
    out << ".SH EXIT STATUS\n.nf\n" << roff(t.substr(t.find("Exit status:\n") + 13)) << ".fi\n";
    return;
  }
  out << ".B imptrace " << roff(c->name) << "\n" << roff(c->synopsis) << "\n"
      << ".SH DESCRIPTION\n";
  std::istringstream desc(c->description);
  for (std::string line; std::getline(desc, line);) out << roff(line) << "\n";
  out << ".SH OPTIONS\n";
  for (const auto& o : c->options) {
    std::string s = o.spelling, names = option_names(o.spelling);
    out << ".TP\n.B " << roff(names) << (s.size() > names.size() ? " " + roff(s.substr(names.size() + 1)) : "")
        << "\n" << roff(o.description) << "\n";
  }
  out << ".SH EXIT STATUS\n" << roff(c->exit_status) << "\n.SH SEE ALSO\nimptrace(1)\n";
}

}  // namespace imptrace::help
