// `imptrace report RUN -o FILE.html`: one run as one self-contained page (inline CSS and
// JS, no network): import time per process and thread as an interactive chart, the slowest
// imports, the failed imports (those that propagated apart from those their importer
// handled), and the identity anomalies `show` lists, each linked to its `why` story on the
// page. Every string from a trace is escaped.
#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include "commands.h"
#include "flame_html.h"
#include "import_time.h"

namespace imptrace {
namespace {

using html::escape;

constexpr size_t kMaxCharts = 64;      // processes drawn; a big pytest-xdist run has more
constexpr size_t kSlowest = 30;        // rows of each "slowest" table
constexpr size_t kMaxFailedRows = 500;
constexpr size_t kMaxStories = 100;    // why stories rendered on the page

const char kStyle[] = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1400px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ccc}h3{font-size:1em;margin:1em 0 .2em}
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top;text-align:left}
td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;white-space:pre-wrap}.muted{color:#777}
)";

std::string anchor_of(const std::string& module) {
  std::string a = "why-";
  for (unsigned char c : module) a += (isalnum(c) || c == '.' || c == '_' || c == '-') ? static_cast<char>(c) : '_';
  return a;
}

std::string process_label(const model::Process& p) {
  return "pid " + std::to_string(p.pid) + ": " + join_argv(p.argv);
}

struct Row {
  const model::Process* p;
  size_t i;
  uint64_t self_ns;
};

// Where the row's import was imported, relative to its sys.path entry ("" not known).
std::string importer_text(const Row& r) {
  const model::Location& at = r.p->imports[r.i].importer;
  return at.empty() ? std::string() : format_location(r.p->relative(at));
}

void slowest_table(const std::vector<Row>& rows, bool by_self, std::ostream& out) {
  std::vector<Row> r = rows;
  auto key = [&](const Row& x) { return by_self ? x.self_ns : x.p->imports[x.i].duration_ns(); };
  size_t n = std::min(kSlowest, r.size());
  std::partial_sort(r.begin(), r.begin() + n, r.end(), [&](const Row& a, const Row& b) { return key(a) > key(b); });
  out << "<table class=\"slowest\"><tr><th>module</th><th>self ms</th><th>cumulative ms</th><th>imported at</th>"
         "<th>test</th><th>process</th></tr>\n";
  for (size_t k = 0; k < n; ++k) {
    const auto& im = r[k].p->imports[r[k].i];
    out << "<tr><td>" << escape(im.name) << (im.ok ? "" : " <b>FAILED</b>") << "</td><td class=\"n\">"
        << format_ms(r[k].self_ns) << "</td><td class=\"n\">" << format_ms(im.duration_ns()) << "</td><td>"
        << escape(importer_text(r[k])) << "</td><td>"
        << escape(im.test) << "</td><td>" << r[k].p->pid << "</td></tr>\n";
  }
  out << "</table>\n";
}

void failed_table(const std::vector<Row>& rows, const char* cls, std::ostream& out) {
  out << "<table class=\"" << cls << "\"><tr><th>module</th><th>error</th><th>imported at</th><th>inside</th>"
         "<th>test</th><th>process</th></tr>\n";
  html::first_of(
      rows, kMaxFailedRows,
      [&](const Row& r) {
        const auto& im = r.p->imports[r.i];
        std::string inside =
            im.parent_pos >= 0 ? r.p->imports[im.parent_pos].name.str() : std::string("(top level)");
        out << "<tr><td>" << escape(im.name) << "</td><td>" << escape(im.error_text()) << "</td><td>"
            << escape(importer_text(r)) << "</td><td>" << escape(inside) << "</td><td>" << escape(im.test)
            << "</td><td>" << r.p->pid << "</td></tr>\n";
      },
      [&](size_t rest) { out << "<tr><td colspan=\"6\">… " << rest << " more (imptrace show --all)</td></tr>\n"; });
  out << "</table>\n";
}

}  // namespace

void write_run_html(const std::vector<model::Process>& procs, const std::string& label, std::ostream& out) {
  out << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">"
         "<title>imptrace report: "
      << escape(label) << "</title><style>" << kStyle << html::kFlameStyle << "</style></head><body>\n";

  std::vector<Row> all, propagated, handled;
  size_t imports = 0;
  for (const auto& p : procs) {
    imports += p.imports.size();
    const auto t = timing::build_tree(p);
    const auto fate = timing::classify_failures(p);
    for (size_t i = 0; i < p.imports.size(); ++i) {
      all.push_back({&p, i, t.self_ns[i]});
      if (fate[i] == timing::Fate::Propagated) propagated.push_back({&p, i, t.self_ns[i]});
      if (fate[i] == timing::Fate::Handled) handled.push_back({&p, i, t.self_ns[i]});
    }
  }
  std::vector<std::pair<const model::Process*, Anomaly>> anomalies;
  for (const auto& p : procs)
    for (auto& a : find_anomalies(p)) anomalies.emplace_back(&p, std::move(a));

  out << "<h1>imptrace report</h1>\n<p>" << escape(label) << " — " << procs.size() << " process(es), " << imports
      << " imports, <a href=\"#failed\">" << propagated.size() << " failed import(s) that propagated</a>, "
      << handled.size() << " handled by their importer, <a href=\"#anomalies\">" << anomalies.size()
      << " identity anomal" << (anomalies.size() == 1 ? "y" : "ies") << "</a>.</p>\n";
  for (const auto& w : input_warnings()) out << "<p class=\"note\"><b>Note:</b> " << escape(w) << "</p>\n";

  out << "<h2 id=\"processes\">Processes</h2>\n<table><tr><th>pid</th><th>ppid</th><th>command</th><th>python</th>"
         "<th>imports</th><th>top-level import ms</th><th>how it ended</th><th>trace</th></tr>\n";
  for (const auto& p : procs) {
    uint64_t total = 0;
    for (const auto& th : timing::build_tree(p).threads) total += th.total_ns;
    std::string version = p.python_version.substr(0, p.python_version.find(' '));
    out << "<tr><td><a href=\"#proc-" << p.pid << "\">" << p.pid << "</a></td><td>" << p.ppid << "</td><td>"
        << escape(join_argv(p.argv)) << "</td><td>" << escape(version) << " " << escape(p.python_build)
        << "</td><td class=\"n\">" << p.imports.size() << "</td><td class=\"n\">" << format_ms(total) << "</td><td>"
        << (model::ended_abnormally(p.end) ? "<b>" : "") << escape(model::end_text(p.end))
        << (model::ended_abnormally(p.end) ? "</b>" : "") << "</td><td>" << escape(p.source_file) << (p.truncated ? " (truncated)" : "") << "</td></tr>\n";
  }
  out << "</table>\n";

  out << "<h2 id=\"chart\">Import time</h2>\n<p class=\"muted\">Per process and thread, each import is a bar "
         "spanning its time; what it imported sits below it, inside its span, so the gaps are its self "
         "time. Red: a failed import that propagated; grey: one its importer handled. Click a bar to zoom "
         "to it, the path above the chart to zoom out.</p>\n";
  size_t drawn = 0;
  html::first_of(
      procs, kMaxCharts,
      [&](const model::Process& p) {
        ++drawn;
        out << "<h3 id=\"proc-" << p.pid << "\">" << escape(process_label(p)) << "</h3>\n";
        if (p.imports.empty()) out << "<p class=\"muted\">No imports recorded.</p>\n";
        else html::write_flame(p, "flame-" + std::to_string(drawn), {}, out);
      },
      [&](size_t rest) { out << "<p>… " << rest << " more processes not drawn (imptrace tree lists them).</p>\n"; });

  out << "<h2 id=\"slowest\">Slowest imports</h2>\n<h3>by self time (the module's own code)</h3>\n";
  slowest_table(all, true, out);
  out << "<h3>by cumulative time (with what it imported)</h3>\n";
  slowest_table(all, false, out);

  out << "<h2 id=\"failed\">Failed imports</h2>\n<h3>that propagated: the enclosing import failed too, or the "
         "program stopped</h3>\n";
  if (propagated.empty()) out << "<p>None.</p>\n";
  else failed_table(propagated, "propagated", out);
  out << "<details><summary>" << handled.size()
      << " handled by their importer (optional dependencies probed inside try/except ImportError)</summary>\n";
  failed_table(handled, "handled", out);
  out << "</details>\n";

  out << "<h2 id=\"anomalies\">Identity anomalies</h2>\n";
  std::vector<std::string> stories;
  if (anomalies.empty()) {
    out << "<p>None: every sys.modules key held what the import system, or the package's own import under its own name, put there.</p>\n";
  } else {
    out << "<table class=\"anomalies\"><tr><th>anomaly</th><th>at</th><th>test</th><th>process</th><th>story</th></tr>\n";
    for (const auto& pa : anomalies) {
      const Anomaly& a = pa.second;
      bool linked = !a.module.empty();
      if (linked && std::find(stories.begin(), stories.end(), a.module) == stories.end()) {
        if (stories.size() < kMaxStories) stories.push_back(a.module);
        else linked = false;
      }
      out << "<tr><td>" << escape(a.text) << "</td><td>" << escape(a.at.empty() ? "" : format_location(a.at))
          << "</td><td>" << escape(a.test) << "</td><td>" << pa.first->pid << "</td><td>";
      if (linked) out << "<a href=\"#" << escape(anchor_of(a.module)) << "\">why " << escape(a.module) << "</a>";
      out << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  for (const auto& m : stories) {
    std::ostringstream why;
    why_text(build_why(procs, m), why);
    out << "<h3 id=\"" << escape(anchor_of(m)) << "\">Why: sys.modules['" << escape(m) << "']</h3>\n<pre>"
        << escape(why.str()) << "</pre>\n";
  }
  out << "<script>" << html::kFlameScript << "</script>\n</body></html>\n";
}

}  // namespace imptrace
