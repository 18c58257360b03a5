// `imptrace report GOOD BAD -o FILE.html`: one self-contained page (inline CSS and JS, no
// network): the diff findings, the why-story of the top finding's module in both runs,
// and the import-time chart of each side's processes with the modules named in findings
// marked. Every string from a trace is escaped. With one RUN, the one-run report
// (report_run_html.cpp).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "commands.h"
#include "diff.h"
#include "diff_many.h"
#include "flame_html.h"

namespace imptrace {
namespace diff {
namespace {

using html::escape;

const char kStyle[] = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
.error{color:#b00020;font-weight:bold}.warning{color:#a06000}.info{color:#00688b}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap}
.rel{margin-left:2em;font-size:.95em}.ev{display:none}.open .ev{display:table-row}
tr.f{cursor:pointer}tr.f:hover{background:#f0f4ff}
.muted{color:#777}
)";

const char kScript[] = R"(
document.querySelectorAll('tr.f').forEach(function(r){r.addEventListener('click',function(){
var n=r.nextElementSibling;while(n&&n.classList.contains('ev')){n.style.display=n.style.display==='table-row'?'none':'table-row';n=n.nextElementSibling;}});});
)";

void finding_rows(const Finding& f, size_t n, std::ostream& out, bool related) {
  out << "<tr class=\"f\"><td>" << (related ? "&nbsp;&nbsp;&#8627;" : std::to_string(n)) << "</td><td class=\""
      << severity_name(f.severity) << "\">" << severity_name(f.severity) << "</td><td>" << escape(kind_name(f.kind))
      << "</td><td>" << escape(f.module) << "</td><td>" << escape(f.summary)
      << (f.support.known() ? "<br><span class=\"muted\">support: " + escape(support_text(f.support)) + "</span>" : std::string())
      << "</td></tr>\n";
  std::ostringstream ev;
  if (f.story_support.known()) ev << "story support: " << support_text(f.story_support) << "\n";
  if (!f.good.empty()) ev << "good: " << f.good << "\n";
  if (!f.bad.empty()) ev << "bad:  " << f.bad << "\n";
  for (const auto& l : f.where) ev << "where: " << format_location(l) << "\n";
  if (!f.native_caller.empty()) ev << "entered from native code: " << model::format_native_caller(f.native_caller) << "\n";
  if (!f.test.empty()) ev << "test: " << f.test << "\n";
  if (f.tests.size() > 1) ev << "in " << f.tests.size() << " tests\n";
  if (!f.process.empty()) ev << "process: " << f.process << "\n";
  for (const auto& line : f.evidence) ev << "order: " << line << "\n";
  if (!f.example.empty()) ev << "text from: " << f.example << "\n";
  out << "<tr class=\"ev\"><td></td><td colspan=\"4\"><pre>" << escape(ev.str()) << "</pre></td></tr>\n";
}

}  // namespace

void write_html(const Result& r, const std::vector<model::Process>& good,
                const std::vector<model::Process>& bad, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
         "<title>imptrace report</title><style>"
      << kStyle << html::kFlameStyle << "</style></head><body>\n";
  if (r.many) {
    out << "<h1>imptrace report</h1>\n<p>" << r.bad_runs.size() << " failing run(s), " << r.good_runs.size()
        << " passing run(s). <b>" << r.count(Severity::Warning)
        << "</b> finding(s) at warning or above; what separates the failing runs from the passing ones first. "
           "Click a row for evidence.</p>\n<table><tr><th>side</th><th>run</th><th>imports</th><th>outcome</th>"
           "<th>first failing test</th></tr>\n";
    for (int side = 0; side < 2; ++side)
      for (const auto& x : side == 0 ? r.bad_runs : r.good_runs)
        out << "<tr><td>" << (side == 0 ? "failing" : "passing") << "</td><td>" << escape(x.path) << "</td><td>"
            << x.imports << "</td><td>" << escape(x.outcome_source) << ": " << escape(x.outcome) << "</td><td>"
            << escape(x.first_failing_test) << "</td></tr>\n";
    out << "</table>\n";
    if (!r.example_bad.empty())
      out << "<p class=\"muted\">The why story and the charts below are of failing run " << escape(r.example_bad)
          << " and passing run " << escape(r.example_good) << ".</p>\n";
  } else {
    out << "<h1>imptrace report</h1>\n<p>good: " << escape(r.good.paths.empty() ? "" : r.good.paths[0]) << " — "
        << r.good.processes.size() << " process(es), " << r.good.imports << " imports<br>bad: "
        << escape(r.bad.paths.empty() ? "" : r.bad.paths[0]) << " — " << r.bad.processes.size()
        << " process(es), " << r.bad.imports << " imports<br><b>" << r.count(Severity::Warning)
        << "</b> finding(s) at warning or above; most likely root cause first. Click a row for evidence.</p>\n";
  }

  for (const auto& w : r.input_warnings) out << "<p class=\"note\"><b>Note:</b> " << escape(w) << "</p>\n";
  out << "<h2>Findings</h2>\n";
  if (r.findings.empty()) {
    out << "<p>No differences.</p>\n";
  } else {
    out << "<table><tr><th>#</th><th>severity</th><th>kind</th><th>module</th><th>summary</th></tr>\n";
    size_t n = 0;
    for (const auto& f : r.findings) {
      if (n >= 500) {
        out << "<tr><td colspan=\"5\">… " << (r.findings.size() - n) << " more (see imptrace diff --format json)</td></tr>\n";
        break;
      }
      finding_rows(f, ++n, out, false);
      for (const auto& rel : f.related) finding_rows(rel, n, out, true);
    }
    out << "</table>\n";
  }

  std::string top;
  for (const auto& f : r.findings)
    if (!f.module.empty()) {
      top = f.story.empty() ? f.module : f.story;
      break;
    }
  if (!top.empty()) {
    out << "<h2>Why: sys.modules['" << escape(top) << "']</h2>\n";
    std::ostringstream g, b;
    why_text(build_why(good, top), g);
    why_text(build_why(bad, top), b);
    out << "<h3>good run</h3><pre>" << escape(g.str()) << "</pre>\n<h3>bad run</h3><pre>"
        << escape(b.str()) << "</pre>\n";
  }

  std::set<std::string> hot;
  for (const auto& f : r.findings) {
    hot.insert(f.module);
    for (const auto& rel : f.related) hot.insert(rel.module);
  }
  if (!r.many) out << "<h2>First divergence of the import sequence</h2>\n";
  bool any = r.many;
  for (const auto& p : r.pairs) {
    if (!p.divergence.diverges) continue;
    any = true;
    std::string s = "good:\n";
    for (const auto& x : p.divergence.good_context) s += x + "\n";
    s += "bad:\n";
    for (const auto& x : p.divergence.bad_context) s += x + "\n";
    out << "<h3>" << escape(p.role) << "</h3><pre>" << escape(s) << "</pre>\n";
  }
  if (!any) out << "<p>" << escape(sequences_alike_text(r)) << "</p>\n";

  // The legend names only what is drawn: the pink outline when some import is marked.
  size_t marked = 0;
  for (const auto* side : {&good, &bad})
    for (const auto& p : *side)
      for (const auto& im : p.imports) marked += hot.count(im.name.str()) > 0;
  out << "<h2>Import time</h2>\n<p class=\"muted\">Per process and thread, each import spans its time, what "
         "it imported below it";
  if (marked) out << "; outlined in pink (" << marked << "): imports of modules named in findings";
  out << ". Click a bar to zoom, hover for times, importer and test.</p>\n";
  size_t shown = 0;
  auto charts = [&](const std::vector<model::Process>& procs, const char* side) {
    html::first_of(
        procs, 32,
        [&](const model::Process& p) {
          out << "<h3>" << side << ": pid " << p.pid << ", " << escape(join_argv(p.argv)) << " — "
              << p.imports.size() << " imports</h3>\n";
          if (!p.imports.empty()) html::write_flame(p, "flame-" + std::to_string(++shown), hot, out);
        },
        [&](size_t rest) { out << "<p>… " << rest << " more " << side << " processes not drawn.</p>\n"; });
  };
  charts(good, "good");
  charts(bad, "bad");
  out << "<script>" << kScript << html::kFlameScript << "</script>\n</body></html>\n";
}

}  // namespace diff


int run_report(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"-o", "--output", "--slower-threshold", "--slower-min-ms", "--context"},
                            {"--fail-on-slower", "--redact", "--good", "--bad"});
  bool many = many_runs_form(a);
  if (!many && (a.positional.empty() || a.positional.size() > 2))
    throw UsageError("report needs RUN, GOOD BAD or --good RUN... --bad RUN..., and -o FILE.html");
  std::string path = a.get("-o", a.get("--output", ""));
  if (path.empty()) throw UsageError("report needs -o FILE.html (or -o - for stdout)");
  if (many) {
    const ManyRunsDiff d = diff_command_many(a, true);
    // The page draws the pair of runs the top story was told from, read once more.
    static auto* pair = new std::vector<model::Process>[2];  // lives until exit, like every model
    if (!d.result.example_good.empty()) {
      load_run_into(d.result.example_good, pair[0], false);
      load_run_into(d.result.example_bad, pair[1], false);
    }
    std::ostringstream page;
    diff::write_html(d.result, pair[0], pair[1], page);
    write_output_file(path, d.finish(page.str()), "report");
    return d.result.exit_status();
  }
  std::ostringstream html;
  int status = 0;
  std::vector<const std::vector<model::Process>*> shown;  // what --redact learns names from
  if (a.positional.size() == 1) {
    for (const char* o : {"--slower-threshold", "--slower-min-ms", "--context", "--fail-on-slower"})
      if (a.has(o)) throw UsageError(std::string(o) + " is for the two-run report (GOOD BAD)");
    const auto& run = load_for_command({a.positional[0]});
    write_run_html(run, a.positional[0], html);
    shown = {&run};
  } else {
    const RunsDiff d = diff_command_runs(a);
    diff::write_html(d.result, *d.good, *d.bad, html);
    status = d.result.exit_status();
    shown = {d.good, d.bad};
  }
  if (a.has("--redact")) write_output_file(path, redacted(html.str(), shown, true), "report");
  else write_output_file(path, html.str(), "report");
  return status;
}

}  // namespace imptrace
