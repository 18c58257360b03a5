// Renderers of a diff::Result: text (aligned, ANSI colour on a terminal), JSON
// (imptrace.diff/1) and markdown (capped in size), plus the `diff` command itself.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "char_escaper.h"
#include "diff.h"
#include "bundle.h"
#include "diff_many.h"
#include "enum_names.h"
#include "redact.h"
#include "trace_reader.h"

namespace imptrace {
namespace diff {
namespace {

std::string loc_text(const model::Location& l) { return format_location(l); }

const char* colour_of(Severity s) {
  static constexpr const char* kColours[] = {"\x1b[36m", "\x1b[33m", "\x1b[1;31m"};
  return name_of<Severity::Error>(kColours, s, "");
}

std::string pad(const std::string& s, size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

// Control characters from traced processes must not reach a terminal.
std::string clean(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return out;
}

void text_finding(const Finding& f, std::ostream& out, bool color, const std::string& indent,
                  const std::string& label) {
  const char* on = color ? colour_of(f.severity) : "";
  const char* off = color ? "\x1b[0m" : "";
  out << indent << label << on << pad(severity_name(f.severity), 8) << off
      << pad(kind_name(f.kind), 22) << " " << clean(f.module.empty() ? "-" : f.module) << "\n";
  std::string in = indent + std::string(label.size(), ' ') + "  ";
  out << in << clean(f.summary) << "\n";
  if (f.support.known()) out << in << "support: " << support_text(f.support) << "\n";
  if (f.story_support.known() && f.story_support.bad * f.support.bad_runs + f.story_support.good != f.support.bad * f.support.bad_runs + f.support.good)
    out << in << "story support: " << support_text(f.story_support) << " (its best separating part)\n";
  if (!f.good.empty()) out << in << "good: " << clean(f.good) << "\n";
  if (!f.bad.empty()) out << in << "bad:  " << clean(f.bad) << "\n";
  for (size_t i = 0; i < f.where.size(); ++i)
    out << in << (i == 0 ? "where: " : "       ") << clean(loc_text(f.where[i])) << "\n";
  if (!f.native_caller.empty())
    out << in << "entered from native code: " << clean(model::format_native_caller(f.native_caller)) << "\n";
  if (!f.test.empty()) out << in << "test: " << clean(f.test) << "\n";
  if (f.tests.size() > 1) out << in << "in " << f.tests.size() << " tests\n";
  if (!f.process.empty()) out << in << "process: " << clean(f.process) << "\n";
  for (size_t i = 0; i < f.evidence.size(); ++i)
    out << in << (i == 0 ? "order: " : "       ") << clean(f.evidence[i]) << "\n";
  if (!f.example.empty()) out << in << "text from: " << clean(f.example) << "\n";
}

void support_json(JsonWriter& w, const char* key, const Support& s) {
  w.key(key);
  w.begin_object();
  w.key("good");
  w.begin_array();
  w.value(s.good);
  w.value(s.good_runs);
  w.end_array();
  w.key("bad");
  w.begin_array();
  w.value(s.bad);
  w.value(s.bad_runs);
  w.end_array();
  w.end_object();
}

void events_json(JsonWriter& w, const char* key, const std::vector<Finding::RunEvent>& es) {
  w.object_array(key, es, [&](const Finding::RunEvent& e) {
    w.field("run", e.run);
    w.field("happened", e.happened);
    w.field_or_null("test", e.test);
    w.field_or_null("relative", e.relative);
  });
}

void runs_json(JsonWriter& w, const std::vector<RunInfo>& runs) {
  w.object_array("runs", runs, [&](const RunInfo& r) {
    w.field("path", r.path);
    w.field("processes", r.processes);
    w.field("imports", r.imports);
    w.field("failed", r.failed);
    w.field("outcome_source", r.outcome_source);
    w.field("outcome", r.outcome);
    w.field_or_null("first_failing_test", r.first_failing_test);
  });
}

// The runs of a many-run diff, one line each, with their outcomes and where they came from.
void runs_text(const Result& r, std::ostream& out) {
  for (int side = 0; side < 2; ++side) {
    const auto& runs = side == 0 ? r.bad_runs : r.good_runs;
    out << (side == 0 ? "failing runs (--bad):\n" : "passing runs (--good):\n");
    for (size_t i = 0; i < runs.size(); ++i) {
      const RunInfo& x = runs[i];
      out << "  " << pad(std::to_string(i + 1) + ".", 4) << clean(x.path) << ": " << x.processes << " process"
          << (x.processes == 1 ? "" : "es") << ", " << x.imports << " imports; "
          << (x.outcome_source == "junit" ? "junit: " : x.outcome_source == "exit_status" ? "exit status: " : "outcome ")
          << clean(x.outcome);
      if (!x.first_failing_test.empty()) out << "; first failing test " << clean(x.first_failing_test);
      out << "\n";
    }
  }
}

void runs_json(JsonWriter& w, const std::vector<RunInfo>& runs);

void run_json(JsonWriter& w, const RunSummary& s, const std::vector<RunInfo>* runs = nullptr) {
  w.begin_object();
  if (runs) runs_json(w, *runs);
  w.string_array("paths", s.paths);
  w.field("imports", s.imports);
  w.object_array("processes", s.processes, [&](const ProcessSummary& p) {
    w.field("pid", p.pid);
    w.field("role", p.role);
    w.string_array("argv", p.argv);
    w.field("imports", p.imports);
    w.field_or_null("python", p.python);
    w.field("end", model::end_how_name(p.end.how));
  });
  w.end_object();
}

void finding_json(JsonWriter& w, const Finding& f, bool with_related) {
  w.begin_object();
  w.field("kind", kind_name(f.kind));
  w.field("severity", severity_name(f.severity));
  w.field_or_null("module", f.module);
  w.field("summary", f.summary);
  w.field_or_null("good", f.good);
  w.field_or_null("bad", f.bad);
  w.key("where");
  w.begin_array();
  for (const auto& l : f.where) write_location_json(w, l);
  w.end_array();
  write_native_caller_json(w, "native_caller", f.native_caller);
  w.field_or_null("test", f.test);
  w.string_array("tests", f.tests);
  w.field_or_null("process", f.process);
  if (f.support.known()) support_json(w, "support", f.support);
  if (f.story_support.known()) support_json(w, "story_support", f.story_support);
  if (!f.evidence.empty() || !f.bad_events.empty()) {
    w.key("evidence");
    w.begin_object();
    w.string_array("text", f.evidence);
    events_json(w, "bad", f.bad_events);
    events_json(w, "good", f.good_events);
    w.end_object();
  }
  if (!f.example.empty()) w.field("example", f.example);
  if (with_related) {
    w.key("related");
    w.begin_array();
    for (const auto& r : f.related) finding_json(w, r, false);
    w.end_array();
  }
  w.end_object();
}

// Markdown: table cells must not break the table; HTML inside <details> must not inject.
std::string md_cell(const std::string& s, size_t max = 160) {
  static const CharEscaper kCell({{'|', "\\|"}, {'<', "&lt;"}, {'>', "&gt;"}, {'&', "&amp;"}, {'`', "'"},
                                  {'\n', " "}, {'\r', " "}, {'\t', " "}},
                                 "?");
  return kCell(s, max);
}

// Inside a fenced code block: only the fence itself could end it.
std::string md_code(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out += (c != '\n' && (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)) ? '?' : c;
  size_t p;
  while ((p = out.find("```")) != std::string::npos) out.replace(p, 3, "'''");
  return out;
}

}  // namespace

void write_text(const Result& r, std::ostream& out, bool color) {
  size_t e = 0, w = 0, i = 0;
  for (const auto& f : r.findings) {
    (f.severity == Severity::Error ? e : f.severity == Severity::Warning ? w : i)++;
  }
  if (r.many) {
    out << "imptrace diff: " << r.bad_runs.size() << " failing run" << (r.bad_runs.size() == 1 ? "" : "s") << " / "
        << r.bad.imports << " imports, " << r.good_runs.size() << " passing run" << (r.good_runs.size() == 1 ? "" : "s")
        << " / " << r.good.imports << " imports\n";
    runs_text(r, out);
    out << r.findings.size() << " finding" << (r.findings.size() == 1 ? "" : "s") << " (" << e << " error, " << w
        << " warning, " << i << " info), what separates the failing runs from the passing ones first\n\n";
  } else {
    out << "imptrace diff: good " << r.good.processes.size() << " process"
        << (r.good.processes.size() == 1 ? "" : "es") << " / " << r.good.imports << " imports, bad "
        << r.bad.processes.size() << " process" << (r.bad.processes.size() == 1 ? "" : "es")
        << " / " << r.bad.imports << " imports\n";
    out << r.findings.size() << " finding" << (r.findings.size() == 1 ? "" : "s") << " (" << e
        << " error, " << w << " warning, " << i << " info), most likely root cause first\n\n";
  }
  size_t n = 0;
  for (const auto& f : r.findings) {
    std::string label = pad(std::to_string(++n) + ".", 4);
    text_finding(f, out, color, "", label);
    if (!f.related.empty()) out << "      related (same story):\n";
    for (const auto& rel : f.related) text_finding(rel, out, color, "      ", "- ");
    out << "\n";
  }
  bool any = false;
  for (const auto& p : r.pairs) {
    if (!p.divergence.diverges) continue;
    if (!any) out << "First divergence of the import sequence (main thread):\n";
    any = true;
    const auto& d = p.divergence;
    out << "  " << clean(p.role) << ": at import #" << d.good_pos << " good has "
        << (d.good_name.empty() ? "<end>" : clean(d.good_name)) << ", bad has "
        << (d.bad_name.empty() ? "<end>" : clean(d.bad_name)) << " (" << d.good_total << " vs "
        << d.bad_total << " imports)\n";
    size_t rows = std::max(d.good_context.size(), d.bad_context.size());
    size_t width = 10;
    for (const auto& s : d.good_context) width = std::max(width, s.size());
    width = std::min<size_t>(width, 60);
    out << "    " << pad("good", width) << "  bad\n";
    for (size_t k = 0; k < rows; ++k) {
      std::string gl = k < d.good_context.size() ? clean(d.good_context[k]) : "";
      std::string bl = k < d.bad_context.size() ? clean(d.bad_context[k]) : "";
      out << "    " << pad(gl, width) << "  " << bl << "\n";
    }
  }
  if (!any && !r.pairs.empty()) out << sequences_alike_text(r) << "\n";
  out << (r.exit_status() ? "Result: differences at warning or above.\n"
                          : "Result: no finding at warning or above.\n");
}

std::string sequences_alike_text(const Result& r) {
  size_t other = 0;
  for (const auto& p : r.pairs)
    if (p.good >= 0 && p.bad >= 0 && static_cast<size_t>(p.good) < r.good.processes.size() &&
        static_cast<size_t>(p.bad) < r.bad.processes.size() &&
        r.good.processes[p.good].imports != r.bad.processes[p.bad].imports)
      ++other;
  std::string s = "Import sequences of paired processes' main threads: identical";
  if (other)
    s += "; other threads imported differently in " + std::to_string(other) + " paired process" +
         (other == 1 ? "" : "es") + " (another number of imports)";
  return s + ".";
}

void write_json(const Result& r, std::ostream& out, bool pretty) {
  JsonWriter w(out, pretty);
  w.begin_object();
  w.field("schema", "imptrace.diff/1");
  w.key("good");
  run_json(w, r.good, r.many ? &r.good_runs : nullptr);
  w.key("bad");
  run_json(w, r.bad, r.many ? &r.bad_runs : nullptr);
  w.string_array("warnings", r.input_warnings);
  w.key("findings");
  w.begin_array();
  for (const auto& f : r.findings) finding_json(w, f, true);
  w.end_array();
  w.object_array("pairs", r.pairs, [&](const PairInfo& p) {
    w.field("role", p.role);
    if (p.good >= 0) w.field("good_pid", r.good.processes[p.good].pid); else w.null_field("good_pid");
    if (p.bad >= 0) w.field("bad_pid", r.bad.processes[p.bad].pid); else w.null_field("bad_pid");
    w.key("first_divergence");
    if (!p.divergence.diverges) {
      w.null();
    } else {
      const auto& d = p.divergence;
      w.begin_object();
      w.field("position", d.good_pos);
      w.field_or_null("good", d.good_name);
      w.field_or_null("bad", d.bad_name);
      w.string_array("good_context", d.good_context);
      w.string_array("bad_context", d.bad_context);
      w.end_object();
    }
  });
  w.key("thresholds");
  w.begin_object();
  w.field("slower_ratio", r.options.slower_ratio);
  w.field("slower_min_ms", static_cast<double>(r.options.slower_min_ns) / 1e6);
  w.field("slower_is_warning", r.options.slower_is_warning);
  w.end_object();
  w.field("exit_status", r.exit_status());
  w.end_object();
  w.finish();
}

// The headline counts what the table lists (one row per top-level finding), by severity;
// related findings appear only in the details, so they are counted apart.
static std::string markdown_headline_counts(const Result& r) {
  size_t by[3] = {0, 0, 0}, related = 0;
  for (const auto& f : r.findings) {
    ++by[f.severity == Severity::Error ? 0 : f.severity == Severity::Warning ? 1 : 2];
    related += f.related.size();
  }
  std::string s = "**" + std::to_string(r.findings.size()) + "** finding" + (r.findings.size() == 1 ? "" : "s") +
                  " (" + std::to_string(by[0]) + " error, " + std::to_string(by[1]) + " warning, " +
                  std::to_string(by[2]) + " info), most likely root cause first";
  if (related) s += "; " + std::to_string(related) + " related finding" + (related == 1 ? "" : "s") + " in their details";
  return s + ".";
}

void write_markdown(const Result& r, std::ostream& out, size_t max_bytes) {
  std::string doc;
  doc += "## imptrace diff\n\n";
  if (r.many) {
    doc += std::to_string(r.bad_runs.size()) + " failing run(s), " + std::to_string(r.bad.imports) + " imports; " +
           std::to_string(r.good_runs.size()) + " passing run(s), " + std::to_string(r.good.imports) + " imports. " +
           markdown_headline_counts(r) + " Ranked by how well they separate the failing runs from the passing ones.\n\n";
    std::ostringstream runs;
    runs_text(r, runs);
    std::string rt = runs.str();
    if (rt.size() > 6000) rt = rt.substr(0, 6000) + "... (cut)\n";
    doc += "<details><summary>runs and their outcomes</summary>\n\n```\n" + md_code(rt) + "```\n\n</details>\n\n";
  } else {
    doc += "good: " + std::to_string(r.good.processes.size()) + " process(es), " +
           std::to_string(r.good.imports) + " imports; bad: " +
           std::to_string(r.bad.processes.size()) + " process(es), " +
           std::to_string(r.bad.imports) + " imports. " + markdown_headline_counts(r) + "\n\n";
  }
  for (const auto& w : r.input_warnings) doc += "> **Note:** " + w + "\n";
  if (!r.input_warnings.empty()) doc += "\n";
  const std::string reserve_note =
      "\n> **Truncated** to stay under 60 KB: NNNNNN of NNNNNN findings shown; run "
      "`imptrace diff --format json` for all.\n";
  const size_t budget = max_bytes > reserve_note.size() + 64 ? max_bytes - reserve_note.size() - 64 : 0;

  // Summary table rows first, then details; both count against the budget.
  std::string table = r.many ? "| # | severity | kind | module | support | summary |\n|---|---|---|---|---|---|\n"
                             : "| # | severity | kind | module | summary |\n|---|---|---|---|---|\n";
  std::vector<std::string> rows, details;
  size_t n = 0;
  for (const auto& f : r.findings) {
    ++n;
    rows.push_back("| " + std::to_string(n) + " | " + severity_name(f.severity) + " | " + kind_name(f.kind) +
                   " | " + md_cell(f.module, 80) + " | " +
                   (r.many ? md_cell(support_text(f.support), 120) + " | " : std::string()) + md_cell(f.summary) +
                   " |\n");
    std::ostringstream d;
    d << "<details><summary>" << n << ". " << severity_name(f.severity) << " " << kind_name(f.kind) << ": "
      << md_cell(f.module, 80) << "</summary>\n\n```\n";
    std::ostringstream body;
    text_finding(f, body, false, "", "");
    // One heading for the story's other parts, as the text output has.
    if (!f.related.empty()) body << "related (same story):\n";
    for (const auto& rel : f.related) text_finding(rel, body, false, "  ", "- ");
    std::string b = body.str();
    if (b.size() > 8000) b = b.substr(0, 8000) + "\n... (cut)\n";
    d << md_code(b) << "```\n\n</details>\n\n";
    details.push_back(d.str());
  }
  std::string div;
  for (const auto& p : r.pairs) {
    if (!p.divergence.diverges) continue;
    const auto& d = p.divergence;
    std::string s = "<details><summary>first divergence: " + md_cell(p.role, 100) +
                    "</summary>\n\n```\ngood:\n";
    for (const auto& x : d.good_context) s += md_code(x) + "\n";
    s += "bad:\n";
    for (const auto& x : d.bad_context) s += md_code(x) + "\n";
    s += "```\n\n</details>\n\n";
    div += s;
    if (div.size() > 8000) break;
  }

  size_t shown = 0;
  std::string tbl = table;
  for (const auto& row : rows) {
    if (doc.size() + tbl.size() + row.size() + 2 > budget / 2 && shown > 0) break;
    tbl += row;
    ++shown;
  }
  doc += tbl + "\n";
  size_t detailed = 0;
  for (size_t i = 0; i < shown; ++i) {
    if (doc.size() + details[i].size() > budget) break;
    doc += details[i];
    ++detailed;
  }
  if (doc.size() + div.size() <= budget) doc += div;
  if (shown < r.findings.size() || detailed < shown) {
    doc += "\n> **Truncated** to stay under 60 KB: " + std::to_string(shown) + " of " +
           std::to_string(r.findings.size()) + " findings in the table, " +
           std::to_string(detailed) + " with details; run `imptrace diff --format json` for all.\n";
  }
  if (doc.size() > max_bytes) doc.resize(max_bytes);  // cannot happen; belt and braces
  out << doc;
}

}  // namespace diff

namespace {

bool parse_double(const std::string& s, double& out) {
  std::string t = s;
  if (!t.empty() && (t.back() == 'x' || t.back() == 'X')) t.pop_back();
  if (t.size() > 2 && t.compare(t.size() - 2, 2, "ms") == 0) t.resize(t.size() - 2);
  if (t.empty()) return false;
  char* end = nullptr;
  out = strtod(t.c_str(), &end);
  return end && *end == 0 && out >= 0 && out < 1e12;
}

}  // namespace

// --slower-threshold FACTOR[,MS] (e.g. "2x", "3x,10ms"), --slower-min-ms MS, --fail-on-slower.
diff::Options parse_diff_options(const ParsedArgs& a) {
  diff::Options o;
  if (a.has("--slower-threshold")) {
    std::string v = a.get("--slower-threshold", "");
    std::string ratio = v, ms;
    size_t comma = v.find(',');
    if (comma != std::string::npos) {
      ratio = v.substr(0, comma);
      ms = v.substr(comma + 1);
    }
    double d;
    if (!parse_double(ratio, d) || d < 1.0)
      throw UsageError("--slower-threshold wants FACTOR[,MS] with FACTOR >= 1, e.g. 3x,50ms (the default)");
    o.slower_ratio = d;
    if (!ms.empty()) {
      if (!parse_double(ms, d)) throw UsageError("--slower-threshold: bad milliseconds '" + ms + "'");
      o.slower_min_ns = static_cast<uint64_t>(d * 1e6);
    }
  }
  if (a.has("--slower-min-ms")) {
    double d;
    if (!parse_double(a.get("--slower-min-ms", ""), d)) throw UsageError("--slower-min-ms wants a number");
    o.slower_min_ns = static_cast<uint64_t>(d * 1e6);
  }
  o.slower_is_warning = a.has("--fail-on-slower");
  if (a.has("--context")) {
    double d;
    if (!parse_double(a.get("--context", ""), d) || d > 1000) throw UsageError("--context wants a number");
    o.context = static_cast<size_t>(d);
  }
  return o;
}

RunsDiff diff_command_runs(const ParsedArgs& a) {
  diff::Options opts = parse_diff_options(a);
  const auto& good = load_run_for_command(a.positional[0]);
  const auto& bad = load_run_for_command(a.positional[1]);
  RunsDiff d{&good, &bad, diff::diff_runs(good, bad, opts)};
  d.result.good.paths = {a.positional[0]};
  d.result.bad.paths = {a.positional[1]};
  // The engine's own notes (processes cut to a common reach) after the loading warnings,
  // on stderr as those are.
  std::vector<std::string> own = std::move(d.result.input_warnings);
  for (const auto& w : own) std::cerr << "imptrace: " << w << "\n";
  d.result.input_warnings = input_warnings();
  d.result.input_warnings.insert(d.result.input_warnings.end(), own.begin(), own.end());
  return d;
}

namespace {
const std::vector<std::string> kSides = {"--good", "--bad"};
}  // namespace

bool many_runs_form(const ParsedArgs& a) { return a.has("--good") || a.has("--bad"); }

namespace {

// A bundle holding several runs stands for each of them (BUNDLE#RUN): on a side of the
// many-run diff, `pack fail1 fail2 fail3` is three failing runs.
std::vector<std::string> expand_bundles(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& path : paths) {
    std::vector<std::string> runs;
    std::string why;
    if (path.find('#') == std::string::npos && bundle::is_gzip_file(path))
      bundle::read_file(path, [&](bundle::Member& m, std::string&) {
        if (std::find(runs.begin(), runs.end(), m.run) == runs.end()) runs.push_back(m.run);
        return true;
      }, why);  // an unreadable bundle is reported when the run is read
    bool named = runs.size() > 1 && std::find(runs.begin(), runs.end(), std::string()) == runs.end();
    if (!named) {
      out.push_back(path);
      continue;
    }
    for (const auto& r : runs) out.push_back(path + "#" + r);
  }
  return out;
}

}  // namespace

ManyRunsDiff diff_command_many(const ParsedArgs& a, bool html) {
  std::vector<std::string> good = expand_bundles(a.after("--good", kSides)),
                           bad = expand_bundles(a.after("--bad", kSides));
  if (!a.after("", kSides).empty())
    throw UsageError("with --good and --bad every RUN follows one of them: --good RUN... --bad RUN...");
  if (good.empty() || bad.empty()) throw UsageError("--good RUN... --bad RUN... needs at least one run on each side");
  diff::Options opts = parse_diff_options(a);
  ManyRunsDiff d;
  if (a.has("--redact")) d.names = std::make_shared<redact::Redactor>(html);
  auto load = [&](const std::string& path, std::vector<model::Process>& out, bool again) {
    load_run_into(path, out, !again);
    if (!again && d.names)
      for (const auto& p : out) d.names->learn_process(p);
  };
  d.result = diff::diff_many_runs(good, bad, load, opts);
  // The engine's own warnings (a run whose outcome contradicts its side, unreadable junit
  // XML) go where the loads' went.
  std::vector<std::string> own = std::move(d.result.input_warnings);
  for (const auto& w : own) std::cerr << "imptrace: " << w << "\n";
  d.result.input_warnings = input_warnings();
  d.result.input_warnings.insert(d.result.input_warnings.end(), own.begin(), own.end());
  return d;
}

std::string ManyRunsDiff::finish(const std::string& text) const {
  if (!names) return text;
  names->learn(text);
  names->learn_local_machine();
  return names->apply(text);
}

int run_diff(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"--format", "--slower-threshold", "--slower-min-ms", "--context", "--color"},
                            {"--fail-on-slower", "--pretty", "--redact", "--good", "--bad"});
  bool many = many_runs_form(a);
  if (!many && a.positional.size() != 2)
    throw UsageError("diff needs GOOD BAD, or --good RUN... --bad RUN... (each a trace file, a directory or a bundle)");
  std::string format = a.get("--format", "text");
  if (format != "text" && format != "json" && format != "markdown" && format != "md")
    throw UsageError("unknown diff format '" + format + "' (text, json or markdown)");
  std::string color = a.get("--color", "auto");
  if (color != "auto" && color != "always" && color != "never")
    throw UsageError("--color wants auto, always or never");
  auto render = [&](const diff::Result& r, std::ostream& out) {
    if (format == "json") diff::write_json(r, out, a.has("--pretty"));
    else if (format == "markdown" || format == "md") diff::write_markdown(r, out);
    else diff::write_text(r, out, color == "always" || (color == "auto" && colour_terminal()));
  };
  if (many) {
    const ManyRunsDiff d = diff_command_many(a, false);
    std::ostringstream text;
    render(d.result, text);
    std::cout << d.finish(text.str());
    return d.result.exit_status();
  }
  const RunsDiff d = diff_command_runs(a);
  const auto& good = *d.good;
  const auto& bad = *d.bad;
  const diff::Result& r = d.result;
  std::ostringstream buffer;  // --redact: the whole output, redacted before it is written
  bool redact = a.has("--redact");
  std::ostream& out = redact ? buffer : std::cout;
  if (format == "json") diff::write_json(r, out, a.has("--pretty"));
  else if (format == "markdown" || format == "md") diff::write_markdown(r, out);
  else {
    bool tty = color == "always" || (color == "auto" && colour_terminal());
    diff::write_text(r, out, tty);
  }
  if (redact) write_redacted(buffer.str(), {&good, &bad}, std::cout);
  return r.exit_status();
}

}  // namespace imptrace
