// `imptrace show PATH...`: what happened, per process: who it was, counts, failed
// imports and the anomalies worth a look (sys.modules rewritten by non-import code,
// proxies under sys.modules keys, children not bound where expected, failed proxy
// accesses), and what the tracer itself had to say.
#include <iostream>
#include <set>
#include <sstream>

#include "commands.h"

namespace imptrace {
namespace {

constexpr size_t kMaxListed = 20;  // per list, so a pathological run stays readable

// The anomalies `show` lists, one predicate each, so `run`'s closing count agrees with it.
bool replaced_by_foreign_code(const model::ModulesChange& c) {
  return !c.by_import_system && c.op == model::ChangeOp::Set && c.old_object.present &&
         c.new_object.present && c.old_object.id != c.new_object.id;
}
// Each (key, proxy) pair once, over sys.modules changes first, then imports.
std::vector<std::pair<std::string, model::ObjectRef>> proxies_under_keys(const model::Process& p) {
  std::vector<std::pair<std::string, model::ObjectRef>> out;
  std::set<std::pair<std::string, uint64_t>> seen;
  auto add = [&](const std::string& key, const model::ObjectRef& o) {
    if (o.present && o.is_proxy() && seen.insert({key, o.id}).second) out.emplace_back(key, o);
  };
  for (const auto& c : p.modules_changes) add(c.key, c.new_object);
  for (const auto& im : p.imports) add(im.name, im.object);
  return out;
}

// Prints at most kMaxListed lines of a list, then how many more there were.
struct Lister {
  std::ostream& out;
  size_t shown = 0, total = 0;
  bool add() { ++total; return shown < kMaxListed ? (++shown, true) : false; }
  void finish() {
    if (total > shown) out << "      ... and " << (total - shown) << " more\n";
  }
};

void show_process(const model::Process& p, std::ostream& out) {
  const auto roots = p.sys_path_roots();
  auto rel = [&](const model::Location& loc) { return model::relative_location(loc, roots); };

  out << "process " << p.pid << " (ppid " << p.ppid;
  if (p.forked_from_pid) out << ", forked from " << p.forked_from_pid;
  out << "): " << join_argv(p.argv) << "\n";
  std::string version = p.python_version.substr(0, p.python_version.find('\n'));
  out << "  python " << (version.empty() ? "?" : version);
  if (!p.python_build.empty()) out << " [" << p.python_build << "]";
  if (!p.executable.empty()) out << "  " << p.executable;
  out << "\n";
  out << "  trace " << p.source_file << " (schema " << p.schema_major << "." << p.schema_minor;
  if (!p.tracer_version.empty()) out << ", tracer " << p.tracer_version;
  out << ")" << (p.truncated ? " TRUNCATED" : "") << "\n";

  size_t failed = 0;
  for (const auto& im : p.imports) failed += !im.ok;
  std::set<uint64_t> proxies;
  for (const auto& c : p.modules_changes)
    if (c.new_object.present && c.new_object.is_proxy()) proxies.insert(c.new_object.id);
  for (const auto& im : p.imports)
    if (im.object.present && im.object.is_proxy()) proxies.insert(im.object.id);
  size_t not_bound = 0;
  for (const auto& b : p.bindings) not_bound += b.status != model::BindingStatus::Bound;
  size_t failed_access = 0;
  for (const auto& a : p.proxy_accesses) failed_access += !a.ok;

  out << "  imports: " << p.imports.size() << " (" << failed << " failed)"
      << "  sys.modules changes: " << p.modules_changes.size()
      << "  proxies: " << proxies.size() << "  bindings not bound: " << not_bound
      << "  proxy accesses: " << p.proxy_accesses.size() << " (" << failed_access << " failed)\n";

  if (failed) {
    out << "  failed imports:\n";
    Lister l{out};
    for (const auto& im : p.imports) {
      if (im.ok || !l.add()) continue;
      out << "    " << im.name << ": " << im.error_text() << "\n";
      if (!im.importer.empty()) out << "      imported at " << format_location(rel(im.importer)) << "\n";
    }
    l.finish();
  }

  Lister replaced{out}, proxy_keys{out}, bindings{out}, accesses{out};
  bool any = false;
  auto header = [&]() {
    if (!any) out << "  anomalies:\n";
    any = true;
  };
  for (const auto& c : p.modules_changes) {
    if (!replaced_by_foreign_code(c)) continue;
    header();
    if (!replaced.add()) continue;
    out << "    sys.modules['" << c.key << "'] replaced by non-import code: "
        << describe_object(c.old_object) << " -> " << describe_object(c.new_object) << "\n";
    if (!c.stack.empty()) out << "      at " << format_location(rel(c.stack[0])) << "\n";
  }
  replaced.finish();
  for (const auto& [key, o] : proxies_under_keys(p)) {
    header();
    if (!proxy_keys.add()) continue;
    out << "    proxy under sys.modules['" << key << "']: " << describe_object(o) << "\n";
  }
  proxy_keys.finish();
  for (const auto& b : p.bindings) {
    if (b.status == model::BindingStatus::Bound) continue;
    header();
    if (!bindings.add()) continue;
    out << "    child " << b.child_module() << " not bound on its parent: "
        << model::binding_status_name(b.status) << " (parent is " << describe_object(b.bound_on)
        << ")\n";
  }
  bindings.finish();
  for (const auto& a : p.proxy_accesses) {
    if (a.ok) continue;
    header();
    if (!accesses.add()) continue;
    out << "    ." << a.attribute << " on " << describe_object(a.proxy) << " failed: " << a.outcome()
        << "\n";
    if (!a.stack.empty()) out << "      at " << format_location(rel(a.stack[0])) << "\n";
    if (!a.test.empty()) out << "      during test " << a.test << "\n";
  }
  accesses.finish();

  if (!p.notes.empty()) {
    out << "  tracer notes:\n";
    for (const auto& n : p.notes) out << "    " << n.text << "\n";
  }
  if (!p.warnings.empty()) {
    out << "  reader warnings:\n";
    for (const auto& w : p.warnings) out << "    " << w << "\n";
  }
}

}  // namespace

RunCounts count_run(const std::vector<model::Process>& procs) {
  RunCounts n;
  n.processes = procs.size();
  for (const auto& p : procs) {
    n.imports += p.imports.size();
    for (const auto& im : p.imports) n.failed_imports += !im.ok;
    for (const auto& c : p.modules_changes) n.anomalies += replaced_by_foreign_code(c);
    n.anomalies += proxies_under_keys(p).size();
    for (const auto& b : p.bindings) n.anomalies += b.status != model::BindingStatus::Bound;
    for (const auto& a : p.proxy_accesses) n.anomalies += !a.ok;
  }
  return n;
}

void show_text(const std::vector<model::Process>& procs, std::ostream& out) {
  out << procs.size() << " process" << (procs.size() == 1 ? "" : "es") << "\n";
  for (const auto& p : procs) {
    out << "\n";
    show_process(p, out);
  }
}

int run_show(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {}, {"--redact"});
  if (a.positional.empty()) throw UsageError("show needs at least one PATH");
  const auto& procs = load_for_command(a.positional);
  if (!a.has("--redact")) {
    show_text(procs, std::cout);
    return 0;
  }
  std::ostringstream out;
  show_text(procs, out);
  write_redacted(out.str(), {&procs}, std::cout);
  return 0;
}

}  // namespace imptrace
