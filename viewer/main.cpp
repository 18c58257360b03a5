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
#include "help.h"
#include "imptrace_git.h"

namespace {

// To add a command (e.g. `diff`): declare run_<name> in commands.h, implement it in
// cmd_<name>.cpp (added to imptrace_analysis in CMakeLists.txt), list it here and give it
// its help in help.cpp.
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
    {"pack", imptrace::run_pack},
    {"run", imptrace::run_run},
};

// The command being run, for the usage line after a usage error.
const imptrace::help::CommandHelp* g_current = nullptr;

std::string version_text() {
  return std::string("imptrace ") + IMPTRACE_VERSION_STRING + " (" + IMPTRACE_GIT_DESCRIPTION + ")";
}

// `help [--man] [COMMAND]`.
int run_help(const std::vector<std::string>& args) {
  g_current = imptrace::help::find("help");
  bool man = false;
  const imptrace::help::CommandHelp* which = nullptr;
  for (const auto& a : args) {
    if (a == "--man") man = true;
    else if (a == "--help" || a == "-h") which = imptrace::help::find("help");
    else if (!a.empty() && a[0] == '-') throw imptrace::UsageError("help: unknown option " + a);
    else if (which) throw imptrace::UsageError("help takes one COMMAND");
    else if (!(which = imptrace::help::find(a))) throw imptrace::UsageError("help: no command '" + a + "'");
  }
  if (man) imptrace::help::write_man(which, version_text().substr(9), std::cout);
  else if (which) imptrace::help::write_command(*which, std::cout);
  else imptrace::help::write_general(std::cout);
  return 0;
}

// Does ARGS ask for the command's help? Options end at "--" and, for `run`, where CMD
// starts (`imptrace run python --help` is python's help).
bool asks_for_help(const std::string& cmd, const std::vector<std::string>& args) {
  for (const auto& a : args) {
    if (a == "--") return false;
    if (a == "--help" || a == "-h") return true;
    if (cmd == "run" && (a.empty() || a[0] != '-')) return false;
  }
  return false;
}

int dispatch(int argc, char** argv) {
  if (argc < 2) throw imptrace::UsageError("no command given");
  std::string cmd = argv[1];
  std::vector<std::string> args(argv + 2, argv + argc);
  if (cmd == "--version" || cmd == "version") {
    if (!args.empty()) throw imptrace::UsageError(cmd + " takes no arguments");
    std::cout << version_text() << "\n";
    return 0;
  }
  if (cmd == "help" || cmd == "--help" || cmd == "-h") return run_help(args);
  for (const auto& c : kCommands) {
    if (cmd != c.name) continue;
    g_current = imptrace::help::find(cmd);
    if (asks_for_help(cmd, args)) {
      imptrace::help::write_command(*g_current, std::cout);
      return 0;
    }
    return c.run(args);
  }
  throw imptrace::UsageError("unknown command '" + cmd + "'");
}

std::string usage() {
  if (g_current)
    return std::string("usage: imptrace ") + g_current->name + " " + g_current->synopsis +
           "   (imptrace help " + g_current->name + ")";
  return imptrace::help::usage_line();
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
    std::cerr << "imptrace: " << e.what() << "\n" << usage() << "\n";
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
