// The help of the `imptrace` executable, one table for all of it: `imptrace help`,
// `help COMMAND`, `COMMAND --help` and the man pages (`help --man`) are all printed from
// here, so they cannot disagree. Each command's options are listed as its parser accepts
// them (tests/e2e/test_help.py checks that against the sources and the documentation).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace imptrace::help {

struct Option {
  const char* spelling;     // "-o, --output FILE" (every name, then the value's name)
  const char* description;  // one line
};

struct CommandHelp {
  const char* name;         // "diff"
  const char* synopsis;     // "GOOD BAD [options]"
  const char* summary;      // one line, for the command list
  const char* description;  // a paragraph (may hold newlines)
  std::vector<Option> options;
  const char* exit_status;  // one line
};

const std::vector<CommandHelp>& commands();
const CommandHelp* find(const std::string& name);  // nullptr: no such command

// The one-line usage printed after a usage error.
std::string usage_line();
// `imptrace help`: every command, the environment, every exit status.
void write_general(std::ostream& out);
// `imptrace help COMMAND` / `imptrace COMMAND --help`.
void write_command(const CommandHelp& c, std::ostream& out);
// roff for man(1): imptrace.1 (c == nullptr) or imptrace-COMMAND.1.
void write_man(const CommandHelp* c, const std::string& version, std::ostream& out);

}  // namespace imptrace::help
