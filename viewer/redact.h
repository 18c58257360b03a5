// Redaction: what a trace or an output says about the person and the machine behind a run,
// replaced with stable placeholders before it is shared (`--redact`, `pack --redact`).
//
// Rules, applied to every absolute path found in a string (a run of path characters that
// starts with '/'):
//   .../site-packages/REST, .../dist-packages/REST  -> <site-packages>/REST
//   PREFIX/lib/pythonX.Y/REST (the standard library) -> <python>/REST
//   .../home/NAME/REST, .../Users/NAME/REST, /root/REST, and $HOME/REST -> ~/REST
//   a directory above a home seen (/srv/ci/home/)                        -> ~/../
//   under a working directory of the run (not a home, not /)             -> <cwd>/REST
//   the system's own trees (/usr, /lib, /bin, /etc, /proc, ...)          -> kept
//   under a sys.path entry of the run                                    -> <dir-HASH>/REST
//   any other path of two components or more: its directory             -> <dir-HASH>/NAME
// where HASH is six hex digits of a hash of the directory replaced (the sys.path entry, or
// the file's directory): the same directory always gets the same placeholder, and paths
// outside the run's working directory (/opt/vendor/..., /tmp/job-1234/...) say nothing
// about where they were.
// then, anywhere in the string, every user name and host name learned (as a whole word)
// -> <user>, <host>. User names come from the paths themselves (/home/NAME, /Users/NAME)
// and, in addition, from the viewing machine ($USER, $LOGNAME, the passwd entry); host
// names from gethostname() and $HOSTNAME. The rules depend only on the text, so one value
// always gets the same placeholder, in every output and every trace redacted with the same
// names and the same working directories and sys.path entries learned; paths inside the
// run's working directory keep their shape below `~` or `<cwd>`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model.h"

namespace imptrace {
namespace redact {

class Redactor {
 public:
  // In HTML the placeholders are written escaped (&lt;user&gt;), as any other text.
  explicit Redactor(bool html = false) : html_(html) {}

  // User names from the path tokens of `s` (/home/NAME, /Users/NAME).
  void learn(const std::string& s);
  // learn() over a process's header, environment, sys.path and import origins.
  void learn_process(const model::Process& p);
  // The viewing machine's user, home and host names: an addition to what the traces say,
  // for names that reach a trace by other ways (a temporary directory named after the user).
  void learn_local_machine();
  void add_user(const std::string& name);
  void add_host(const std::string& name);
  void add_home(const std::string& path);  // a home directory not under /home or /Users
  void add_cwd(const std::string& path);   // a working directory of the run
  void add_root(const std::string& path);  // a sys.path entry of the run

  std::string apply(const std::string& s) const;

  const std::set<std::string>& users() const { return users_; }
  const std::set<std::string>& hosts() const { return hosts_; }

 private:
  std::string placeholder(const char* name) const;
  std::string rewrite_path(const std::string& path) const;
  std::string replace_words(const std::string& s) const;

  bool html_;
  std::set<std::string> users_, hosts_;
  std::vector<std::string> homes_;
  std::set<std::string> home_dirs_;  // every home seen, for the directories above them
  std::vector<std::string> cwds_, roots_;  // longest first
};

// Learns from every string a trace holds (string table, header, notes, environment).
// Stops quietly at the first malformed record.
void learn_trace(const uint8_t* data, size_t size, Redactor& r);

// The trace re-encoded with every string redacted: each StringDef's text is resolved
// through its prefix and redacted, and written against the same prefix when the redacted
// prefix still starts it (else whole); the header's argv,
// executable, cwd and environment values, Note texts and environment updates are redacted;
// every other record is copied byte for byte, and the zero tail a live or killed process
// leaves is dropped. The result is a valid trace of the same records. False with `why`
// when the input is not a trace.
bool redact_trace(const uint8_t* data, size_t size, const Redactor& r, std::vector<uint8_t>& out,
                  std::string& why);

// A junit XML document with the text of its attribute values, character data, CDATA
// sections and comments redacted (test names and failure messages hold paths); markup is
// kept, and the placeholders are written escaped (&lt;user&gt;) where XML needs it, so a
// well-formed document stays well-formed and parses to the redacted text.
std::string redact_xml(const std::string& xml, const Redactor& r);

// A command's whole output redacted: names learned from the runs it was made from, the
// output itself and the viewing machine.
std::string redact_output(const std::string& text,
                          const std::vector<const std::vector<model::Process>*>& runs, bool html);

}  // namespace redact
}  // namespace imptrace
