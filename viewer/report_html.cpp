// `imptrace report GOOD BAD -o FILE.html`: one self-contained page (inline CSS and JS, no
// network): the diff findings, the why-story of the top finding's module in both runs,
// and a timeline of top-level imports per process. Every string from a trace is escaped.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "commands.h"
#include "diff.h"

namespace imptrace {
namespace diff {
namespace {

std::string esc(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += "?";
        else out += c;
    }
  }
  return out;
}

const char kStyle[] = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
.error{color:#b00020;font-weight:bold}.warning{color:#a06000}.info{color:#00688b}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap}
.rel{margin-left:2em;font-size:.95em}.ev{display:none}.open .ev{display:table-row}
tr.f{cursor:pointer}tr.f:hover{background:#f0f4ff}
.tl{position:relative;height:18px;background:#fafafa;border:1px solid #eee;margin:1px 0}
.tl div{position:absolute;top:1px;height:16px;background:#7aa6d8;border-right:1px solid #fff;overflow:hidden;font-size:10px;color:#fff;white-space:nowrap}
.tl div.hot{background:#d8577a}.muted{color:#777}
)";

const char kScript[] = R"(
document.querySelectorAll('tr.f').forEach(function(r){r.addEventListener('click',function(){
var n=r.nextElementSibling;while(n&&n.classList.contains('ev')){n.style.display=n.style.display==='table-row'?'none':'table-row';n=n.nextElementSibling;}});});
)";

void finding_rows(const Finding& f, size_t n, std::ostream& out, bool related) {
  out << "<tr class=\"f\"><td>" << (related ? "&nbsp;&nbsp;&#8627;" : std::to_string(n)) << "</td><td class=\""
      << severity_name(f.severity) << "\">" << severity_name(f.severity) << "</td><td>" << esc(kind_name(f.kind))
      << "</td><td>" << esc(f.module) << "</td><td>" << esc(f.summary) << "</td></tr>\n";
  std::ostringstream ev;
  if (!f.good.empty()) ev << "good: " << f.good << "\n";
  if (!f.bad.empty()) ev << "bad:  " << f.bad << "\n";
  for (const auto& l : f.where) ev << "where: " << format_location(l) << "\n";
  if (!f.test.empty()) ev << "test: " << f.test << "\n";
  if (f.tests.size() > 1) ev << "in " << f.tests.size() << " tests\n";
  if (!f.process.empty()) ev << "process: " << f.process << "\n";
  out << "<tr class=\"ev\"><td></td><td colspan=\"4\"><pre>" << esc(ev.str()) << "</pre></td></tr>\n";
}

void timeline(const model::Process& p, const std::string& label,
              const std::set<std::string>& hot, std::ostream& out) {
  out << "<h3>" << esc(label) << " — pid " << p.pid << ", " << p.imports.size()
      << " imports</h3>\n";
  uint64_t end = 1;
  for (const auto& im : p.imports) end = std::max(end, im.end_ns);
  // Top-level imports per thread; at most 300 largest per process keep the page small.
  std::vector<const model::Import*> tops;
  for (const auto& im : p.imports)
    if (im.parent_pos < 0) tops.push_back(&im);
  if (tops.size() > 300) {
    std::nth_element(tops.begin(), tops.begin() + 300, tops.end(),
                     [](const model::Import* a, const model::Import* b) { return a->duration_ns() > b->duration_ns(); });
    tops.resize(300);
  }
  // The finding's module is often nested (a submodule imported by a top-level import), so
  // a bar is red when its import or one nested in it is of a module named in findings.
  std::set<const model::Import*> hot_bars;
  for (const auto& im : p.imports) {
    if (!hot.count(im.name)) continue;
    const model::Import* root = &im;
    for (size_t guard = 0; root->parent_pos >= 0 && static_cast<size_t>(root->parent_pos) < p.imports.size() &&
                           guard < p.imports.size(); ++guard)
      root = &p.imports[static_cast<size_t>(root->parent_pos)];
    hot_bars.insert(root);
  }
  std::map<uint64_t, std::vector<const model::Import*>> by_thread;
  for (const auto* im : tops) by_thread[im->thread].push_back(im);
  size_t red = 0;
  for (const auto& kv : by_thread) {
    out << "<div class=\"tl\" title=\"thread " << kv.first << "\">";
    for (const auto* im : kv.second) {
      double left = 100.0 * static_cast<double>(im->begin_ns) / static_cast<double>(end);
      double width = std::max(0.15, 100.0 * static_cast<double>(im->duration_ns()) / static_cast<double>(end));
      char pos[96];
      snprintf(pos, sizeof pos, "left:%.3f%%;width:%.3f%%", left, width);
      bool is_hot = hot_bars.count(im) > 0;
      red += is_hot;
      out << "<div style=\"" << pos << "\"" << (is_hot ? " class=\"hot\"" : "")
          << " title=\"" << esc(im->name) << " " << format_ms(im->duration_ns()) << " ms"
          << (im->ok ? "" : " FAILED") << "\">" << esc(im->name) << "</div>";
    }
    out << "</div>\n";
  }
  // The legend names only what is drawn.
  out << "<p class=\"muted\">0 – " << format_ms(end) << " ms; top-level imports"
      << (tops.size() == 300 ? " (the 300 longest)" : "");
  if (red) out << "; red (" << red << "): the import of a module named in findings, or one that imported it";
  out << ".</p>\n";
}

}  // namespace

void write_html(const Result& r, const std::vector<model::Process>& good,
                const std::vector<model::Process>& bad, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
         "<title>imptrace report</title><style>"
      << kStyle << "</style></head><body>\n";
  out << "<h1>imptrace report</h1>\n<p>good: " << esc(r.good.paths.empty() ? "" : r.good.paths[0]) << " — "
      << r.good.processes.size() << " process(es), " << r.good.imports << " imports<br>bad: "
      << esc(r.bad.paths.empty() ? "" : r.bad.paths[0]) << " — " << r.bad.processes.size()
      << " process(es), " << r.bad.imports << " imports<br><b>" << r.count(Severity::Warning)
      << "</b> finding(s) at warning or above; most likely root cause first. Click a row for evidence.</p>\n";

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
    out << "<h2>Why: sys.modules['" << esc(top) << "']</h2>\n";
    std::ostringstream g, b;
    why_text(build_why(good, top), g);
    why_text(build_why(bad, top), b);
    out << "<h3>good run</h3><pre>" << esc(g.str()) << "</pre>\n<h3>bad run</h3><pre>"
        << esc(b.str()) << "</pre>\n";
  }

  std::set<std::string> hot;
  for (const auto& f : r.findings) {
    hot.insert(f.module);
    for (const auto& rel : f.related) hot.insert(rel.module);
  }
  out << "<h2>First divergence of the import sequence</h2>\n";
  bool any = false;
  for (const auto& p : r.pairs) {
    if (!p.divergence.diverges) continue;
    any = true;
    std::string s = "good:\n";
    for (const auto& x : p.divergence.good_context) s += x + "\n";
    s += "bad:\n";
    for (const auto& x : p.divergence.bad_context) s += x + "\n";
    out << "<h3>" << esc(p.role) << "</h3><pre>" << esc(s) << "</pre>\n";
  }
  if (!any) out << "<p>The import sequences of paired processes are identical.</p>\n";

  out << "<h2>Timeline</h2>\n";
  size_t shown = 0;
  for (const auto& p : good) {
    if (shown++ >= 32) break;
    timeline(p, "good: " + join_argv(p.argv), hot, out);
  }
  shown = 0;
  for (const auto& p : bad) {
    if (shown++ >= 32) break;
    timeline(p, "bad: " + join_argv(p.argv), hot, out);
  }
  out << "<script>" << kScript << "</script>\n</body></html>\n";
}

}  // namespace diff

diff::Options parse_diff_options(const ParsedArgs& a);

int run_report(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"-o", "--output", "--slower-threshold", "--slower-min-ms", "--context"},
                            {"--fail-on-slower", "--redact"});
  if (a.positional.size() != 2) throw UsageError("report needs GOOD BAD -o FILE.html");
  std::string path = a.get("-o", a.get("--output", ""));
  if (path.empty()) throw UsageError("report needs -o FILE.html (or -o - for stdout)");
  diff::Options opts = parse_diff_options(a);
  const auto& good = load_run_for_command(a.positional[0]);
  const auto& bad = load_run_for_command(a.positional[1]);
  diff::Result r = diff::diff_runs(good, bad, opts);
  r.good.paths = {a.positional[0]};
  r.bad.paths = {a.positional[1]};
  std::ostringstream html;
  diff::write_html(r, good, bad, html);
  if (a.has("--redact")) write_output_file(path, redacted(html.str(), {&good, &bad}, true), "report");
  else write_output_file(path, html.str(), "report");
  return r.exit_status();
}

}  // namespace imptrace
