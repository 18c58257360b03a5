// Test outcomes of a run (test_outcomes.h): junit XML, else the exit status.
#include "test_outcomes.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "bundle.h"
#include "commands.h"
#include "enum_names.h"

namespace imptrace {
namespace outcomes {

const char* source_name(RunOutcome::Source s) {
  static constexpr const char* kNames[] = {"junit", "exit_status", "unknown"};
  return name_of<RunOutcome::Source::Unknown>(kNames, s, "unknown");
}

std::string node_id_of(const std::string& test) {
  for (const char* phase : {" (setup)", " (call)", " (teardown)"}) {
    size_t n = std::char_traits<char>::length(phase);
    if (test.size() > n && test.compare(test.size() - n, n, phase) == 0) return test.substr(0, test.size() - n);
  }
  return test;
}

std::string junit_key(const std::string& test) {
  std::string id = node_id_of(test);
  size_t sep = id.find("::");
  if (sep == std::string::npos) return id;
  std::string path = id.substr(0, sep);
  if (path.size() > 3 && path.compare(path.size() - 3, 3, ".py") == 0) path.resize(path.size() - 3);
  std::replace(path.begin(), path.end(), '/', '.');
  // The last part is the test's name (parameters included); the parts between are classes.
  std::string rest = id.substr(sep + 2);
  size_t last = std::string::npos;
  // A parametrized name may hold "::" inside its brackets: split before the first '['.
  size_t bracket = rest.find('[');
  size_t search_end = bracket == std::string::npos ? rest.size() : bracket;
  for (size_t p = rest.find("::"); p != std::string::npos && p < search_end; p = rest.find("::", p + 2)) last = p;
  if (last == std::string::npos) return path + "::" + rest;
  std::string classes = rest.substr(0, last);
  for (size_t p; (p = classes.find("::")) != std::string::npos;) classes.replace(p, 2, ".");
  return path + "." + classes + "::" + rest.substr(last + 2);
}

namespace {

std::string unescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t end = s.find(';', i);
    if (end == std::string::npos || end - i > 10) {
      out += s[i];
      continue;
    }
    std::string ent = s.substr(i + 1, end - i - 1);
    if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "amp") out += '&';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (!ent.empty() && ent[0] == '#') {
      unsigned long c = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X') ? strtoul(ent.c_str() + 2, nullptr, 16)
                                                                             : strtoul(ent.c_str() + 1, nullptr, 10);
      out += c > 0 && c < 0x80 ? static_cast<char>(c) : '?';
    } else {
      out += s.substr(i, end - i + 1);
    }
    i = end;
  }
  return out;
}

// The value of attribute `name` in a start tag's text ("" when absent).
std::string attribute(const std::string& tag, const char* name) {
  std::string want = std::string(" ") + name + "=";
  size_t at = 0;
  while ((at = tag.find(want, at)) != std::string::npos) {
    size_t q = at + want.size();
    if (q < tag.size() && (tag[q] == '"' || tag[q] == '\'')) {
      size_t end = tag.find(tag[q], q + 1);
      if (end == std::string::npos) return "";
      return unescape(tag.substr(q + 1, end - q - 1));
    }
    at = q;
  }
  return "";
}

// The end of the start tag opening at `from` ('>' outside quotes), or npos.
size_t tag_end(const std::string& xml, size_t from) {
  char quote = 0;
  for (size_t i = from; i < xml.size(); ++i) {
    char c = xml[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      return i;
    }
  }
  return std::string::npos;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream s;
  s << f.rdbuf();
  out = s.str();
  return static_cast<bool>(f) || f.eof();
}

}  // namespace

bool parse_junit(const std::string& xml, std::vector<TestCase>& out) {
  bool any = false;
  for (size_t at = xml.find("<testcase"); at != std::string::npos; at = xml.find("<testcase", at + 1)) {
    char next = at + 9 < xml.size() ? xml[at + 9] : 0;
    if (next != ' ' && next != '\t' && next != '\n' && next != '\r' && next != '>' && next != '/') continue;
    size_t end = tag_end(xml, at);
    if (end == std::string::npos) break;
    std::string tag = xml.substr(at, end - at + 1);
    for (char& c : tag)
      if (c == '\n' || c == '\t' || c == '\r') c = ' ';
    TestCase t;
    std::string cls = attribute(tag, "classname"), name = attribute(tag, "name");
    t.key = cls.empty() ? name : cls + "::" + name;
    t.name = t.key;
    if (tag.size() < 2 || tag[tag.size() - 2] != '/') {
      size_t close = xml.find("</testcase>", end);
      std::string body = xml.substr(end, close == std::string::npos ? std::string::npos : close - end);
      t.failed = body.find("<failure") != std::string::npos || body.find("<error") != std::string::npos;
      t.skipped = body.find("<skipped") != std::string::npos;
    }
    out.push_back(std::move(t));
    any = true;
  }
  return any;
}

bool is_junit(const std::string& xml) {
  if (xml.find("<testsuite") == std::string::npos) return false;
  std::vector<TestCase> tests;
  return parse_junit(xml, tests);
}

namespace {

// The process no other process of the run started (the earliest such): the command the
// user ran, whose exit status is the run's.
const model::Process* first_process(const std::vector<model::Process>& procs) {
  std::unordered_set<int64_t> pids;
  for (const auto& p : procs) pids.insert(p.pid);
  const model::Process* best = nullptr;
  for (const auto& p : procs) {
    if (p.forked_from_pid || pids.count(p.ppid)) continue;
    if (!best || p.start_time_unix_ns < best->start_time_unix_ns) best = &p;
  }
  return best;
}

}  // namespace

RunOutcome outcome_of(const std::string& run_path, const std::vector<model::Process>& procs,
                      std::vector<std::string>& warnings) {
  RunOutcome r;
  // (file name, text) of every junit candidate, by name.
  std::vector<std::pair<std::string, std::string>> files;
  struct stat st;
  if (stat(run_path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::vector<std::string> names;
    if (DIR* d = opendir(run_path.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string n = e->d_name;
        if (n.size() > 4 && n.compare(n.size() - 4, 4, ".xml") == 0) names.push_back(n);
      }
      closedir(d);
    }
    for (const auto& n : names) {
      std::string path = run_path + (run_path.back() == '/' ? "" : "/") + n, xml;
      if (!read_file(path, xml)) {
        warnings.push_back(path + ": cannot be read; the run's test outcomes are taken without it");
        continue;
      }
      files.emplace_back(n, std::move(xml));
    }
  } else {
    // A bundle: BUNDLE#RUN names one of its runs; a bundle named alone holds one run.
    std::string file = run_path, run;
    bool named = false;
    if (stat(file.c_str(), &st) != 0) {
      size_t hash = run_path.rfind('#');
      if (hash != std::string::npos) {
        file = run_path.substr(0, hash);
        run = run_path.substr(hash + 1);
        named = true;
      }
    }
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && bundle::is_gzip_file(file)) {
      std::string why;
      bool ok = bundle::read_file(
          file, bundle::MemberFn(), why,
          [&](bundle::Member& m, std::string&) {
            if (named && m.run != run) return true;
            files.emplace_back(m.name.substr(m.name.rfind('/') + 1),
                               std::string(m.bytes.begin(), m.bytes.end()));
            return true;
          });
      if (!ok) throw InputError(file + ": " + why);
    }
  }
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  {
    std::vector<std::string> read;
    for (const auto& f : files) {
      if (f.second.find("<testsuite") == std::string::npos) continue;  // not junit
      if (parse_junit(f.second, r.tests)) read.push_back(f.first);
    }
    if (!read.empty()) {
      r.source = RunOutcome::Source::Junit;
      size_t failed = 0, passed = 0, skipped = 0;
      for (size_t i = 0; i < r.tests.size(); ++i) {
        const TestCase& t = r.tests[i];
        if (t.failed) {
          ++failed;
          if (r.first_failing < 0) r.first_failing = static_cast<int>(i);
        } else if (t.skipped) {
          ++skipped;
        } else {
          ++passed;
        }
      }
      r.failed = failed > 0;
      r.text = std::to_string(failed) + " failed, " + std::to_string(passed) + " passed";
      if (skipped) r.text += ", " + std::to_string(skipped) + " skipped";
      std::string shown;
      for (const auto& n : read) shown += (shown.empty() ? "" : ", ") + n;
      r.text += " (" + shown + ")";
      return r;
    }
  }
  const model::Process* first = first_process(procs);
  if (!first || first->end.how == model::ProcessEnd::How::None || first->end.how == model::ProcessEnd::How::Exec) {
    r.source = RunOutcome::Source::Unknown;
    r.text = first ? "unknown: " + model::end_text(first->end) : "unknown: no process";
    // A run that did not end on its own did not pass.
    r.failed = first && model::ended_abnormally(first->end);
    return r;
  }
  r.source = RunOutcome::Source::ExitStatus;
  r.failed = first->end.how == model::ProcessEnd::How::Signal || first->end.status != 0;
  r.text = model::end_text(first->end) + " (" + join_argv(first->argv) + ")";
  return r;
}

}  // namespace outcomes
}  // namespace imptrace
