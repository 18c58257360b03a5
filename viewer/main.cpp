// `imptrace`: the viewer's entry point. Dispatches to one file per command (cmd_*.cpp);
// every failure becomes one line on stderr and exit status 2, never a crash or a trace.
#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#include <new>
#include <string>
#include <vector>

#include "commands.h"
#include "diff.h"

namespace {

const char kUsage[] =
    "usage: imptrace {show PATH... [--all] | tree PATH... [--min-ms X] [--depth N]"
    " [--sort start|cumulative|self] [--top N] [--under MODULE] | why PATH... MODULE [--format text|json] |"
    " export PATH... --format json|chrome | diff GOOD BAD [--format text|json|markdown] |"
    " report [RUN | GOOD BAD] -o FILE.html | run [-o DIR] -- CMD ARGS... | help | --version}";

const char kHelp[] =
    "imptrace: see what CPython's import system did in a traced run.\n"
    "\n"
    "Commands (PATH is a trace file or a directory of *.pb traces, one per process):\n"
    "  show PATH... [--all]             processes, counts, failed imports that propagated\n"
    "                                   (--all: also those their importer handled), anomalies\n"
    "  tree PATH... [--min-ms X] [--depth N] [--sort start|cumulative|self] [--top N]\n"
    "       [--under MODULE]            nested import tree with cumulative and self ms; hide\n"
    "                                   imports under X ms, below N levels, beyond the N\n"
    "                                   first of each level; only MODULE and its submodules\n"
    "  why PATH... MODULE [--format text|json]\n"
    "                                   everything that sat under sys.modules[MODULE],\n"
    "                                   its children's bindings and proxy accesses\n"
    "  export PATH... [--format json|chrome]\n"
    "                                   all events as JSON (imptrace.export/1) or as\n"
    "                                   Trace Event JSON for Perfetto/chrome://tracing\n"
    "  diff GOOD BAD [--format text|json|markdown] [--slower-threshold 3x,50ms]\n"
    "                [--fail-on-slower]  a passing and a failing run side by side, most\n"
    "                                   likely root cause first; exit 1 when any finding\n"
    "                                   is warning or above (timing findings are info\n"
    "                                   unless --fail-on-slower)\n"
    "  report RUN -o FILE.html          one run as one self-contained HTML page: import-time\n"
    "                                   chart, slowest and failed imports, anomalies\n"
    "  report GOOD BAD -o FILE.html     the diff as one self-contained HTML page\n"
    "  run [-o DIR] -- CMD ARGS...      run CMD with the tracer preloaded, one trace per\n"
    "                                   process in DIR (default ./imptrace-traces)\n"
    "  help                             this text\n"
    "  --version                        the version\n"
    "\n"
    "Exit status: 0 success, 2 usage or input error.\n";

// To add a command (e.g. `diff`): declare run_<name> in commands.h, implement it in
// cmd_<name>.cpp (added to imptrace_analysis in CMakeLists.txt), and list it here.
struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
};

const Command kCommands[] = {
    {"show", imptrace::run_show},
    {"tree", imptrace::run_tree},
    {"why", imptrace::run_why},
    {"export", imptrace::run_export},
    {"diff", imptrace::run_diff},
    {"report", imptrace::run_report},
    {"run", imptrace::run_run},
};

int dispatch(int argc, char** argv) {
  if (argc < 2) throw imptrace::UsageError("no command given");
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "--version" || cmd == "version") {
    if (!args.empty()) throw imptrace::UsageError(cmd + " takes no arguments");
    std::cout << "imptrace " << IMPTRACE_VERSION_STRING << "\n";
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    std::cout << kUsage << "\n\n" << kHelp;
    return 0;
  }
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    for (const auto& a : args)
      if (a == "--help" || a == "-h") {
        std::cout << kUsage << "\n";
        return 0;
      }
    return c.run(args);
  }
  throw imptrace::UsageError("unknown command '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int status = dispatch(argc, argv);
    std::cout.flush();
    if (!std::cout) {
      std::cerr << "imptrace: cannot write output: " << strerror(errno) << "\n";
      return 2;
    }
    return status;
  } catch (const imptrace::UsageError& e) {
    std::cerr << "imptrace: " << e.what() << "\n" << kUsage << "\n";
  } catch (const imptrace::InputError& e) {
    std::cerr << "imptrace: " << e.what() << "\n";
  } catch (const std::bad_alloc&) {
    std::cerr << "imptrace: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "imptrace: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "imptrace: internal error\n";
  }
  return 2;
}
