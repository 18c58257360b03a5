// Argument parsing and input loading shared by the commands.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <unistd.h>

#include <memory>

#include "commands.h"
#include "redact.h"
#include "trace_reader.h"

namespace imptrace {

bool ParsedArgs::has(const std::string& name) const {
  for (const auto& o : options)
    if (o.first == name) return true;
  return false;
}

std::string ParsedArgs::get(const std::string& name, const std::string& fallback) const {
  std::string v = fallback;
  for (const auto& o : options)
    if (o.first == name) v = o.second;  // the last one wins, as in most tools
  return v;
}

std::vector<std::string> ParsedArgs::after(const std::string& head, const std::vector<std::string>& heads) const {
  std::vector<std::string> out;
  for (size_t i = 0; i < positional.size(); ++i) {
    std::string last;
    for (size_t k = 0; k < options_before[i]; ++k)
      for (const auto& h : heads)
        if (options[k].first == h) last = h;
    if (last == head) out.push_back(positional[i]);
  }
  return out;
}

ParsedArgs parse_args(const std::vector<std::string>& args,
                      const std::vector<std::string>& value_options,
                      const std::vector<std::string>& flag_options) {
  auto known = [](const std::vector<std::string>& list, const std::string& n) {
    for (const auto& x : list)
      if (x == n) return true;
    return false;
  };
  ParsedArgs out;
  bool options_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (options_done || a.size() < 2 || a[0] != '-') {
      out.positional.push_back(a);
      out.options_before.push_back(out.options.size());
      continue;
    }
    if (a == "--") { options_done = true; continue; }
    std::string name = a, value;
    bool inline_value = false;
    size_t eq = a.find('=');
    if (a.compare(0, 2, "--") == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      value = a.substr(eq + 1);
      inline_value = true;
    }
    if (known(value_options, name)) {
      if (!inline_value) {
        if (i + 1 >= args.size()) throw UsageError("option " + name + " needs a value");
        value = args[++i];
      }
      out.options.emplace_back(name, value);
    } else if (known(flag_options, name) && !inline_value) {
      out.options.emplace_back(name, "");
    } else {
      throw UsageError("unknown option " + a);
    }
  }
  return out;
}

namespace {
std::vector<std::string>& warnings_so_far() {
  static auto* all = new std::vector<std::string>();  // lives until exit, like the models
  return *all;
}
}  // namespace

const std::vector<std::string>& input_warnings() { return warnings_so_far(); }

std::vector<model::Process> load_or_throw(const std::vector<std::string>& paths) {
  std::vector<model::Process> procs;
  std::string error;
  std::vector<std::string> warnings;
  bool ok = reader::load_traces(paths, procs, error, warnings);
  for (const auto& w : warnings) std::cerr << "imptrace: " << w << "\n";
  warnings_so_far().insert(warnings_so_far().end(), warnings.begin(), warnings.end());
  if (!ok) throw InputError(error);
  return procs;
}

const std::vector<model::Process>& load_for_command(const std::vector<std::string>& paths) {
  // Reachable until exit (a static pointer), never destroyed: the command's last act is to
  // print, and tearing down 100,000s of records costs time and frees nothing useful.
  static auto* kept = new std::vector<std::unique_ptr<std::vector<model::Process>>>();
  kept->push_back(std::make_unique<std::vector<model::Process>>(load_or_throw(paths)));
  return *kept->back();
}

void load_run_into(const std::string& path, std::vector<model::Process>& out, bool report) {
  std::string error;
  std::vector<std::string> warnings;
  out.clear();
  bool ok = reader::load_run(path, out, error, warnings);
  if (report) {
    for (const auto& w : warnings) std::cerr << "imptrace: " << w << "\n";
    warnings_so_far().insert(warnings_so_far().end(), warnings.begin(), warnings.end());
  }
  if (!ok) throw InputError(error);
}

const std::vector<model::Process>& load_run_for_command(const std::string& path) {
  static auto* kept = new std::vector<std::unique_ptr<std::vector<model::Process>>>();
  auto procs = std::make_unique<std::vector<model::Process>>();
  std::string error;
  std::vector<std::string> warnings;
  bool ok = reader::load_run(path, *procs, error, warnings);
  for (const auto& w : warnings) std::cerr << "imptrace: " << w << "\n";
  warnings_so_far().insert(warnings_so_far().end(), warnings.begin(), warnings.end());
  if (!ok) throw InputError(error);
  kept->push_back(std::move(procs));
  return *kept->back();
}

std::string redacted(const std::string& text, const std::vector<const std::vector<model::Process>*>& runs,
                     bool html) {
  return redact::redact_output(text, runs, html);
}

void write_redacted(const std::string& text, const std::vector<const std::vector<model::Process>*>& runs,
                    std::ostream& out, bool html) {
  out << redact::redact_output(text, runs, html);
}

bool colour_terminal() {
  if (!isatty(STDOUT_FILENO)) return false;
  if (const char* no = getenv("NO_COLOR"); no && *no) return false;  // no-color.org
  const char* term = getenv("TERM");
  return term && *term && strcmp(term, "dumb") != 0;
}

void write_output_file(const std::string& path, const std::string& content, const char* what) {
  if (path == "-") {
    std::cout << content;
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw InputError("cannot write " + path + ": " + strerror(errno));
  f << content;
  f.close();
  if (!f) throw InputError("cannot write " + path + ": " + strerror(errno));
  std::cerr << "imptrace: " << what << " written to " << path << " (" << content.size() << " bytes)\n";
}

}  // namespace imptrace
