// `imptrace show PATH... [--all]`: what happened, per process: who it was, counts, failed
// imports (those that propagated listed, those their importer handled counted unless
// --all) and the anomalies worth a look (sys.modules rewritten by non-import code,
// proxies under sys.modules keys, children not bound where expected, failed proxy
// accesses), and what the tracer itself had to say. What normal Python does (repeat
// imports, children bound when their outer import finished, probes answered with
// AttributeError, lookups during failure reporting, lazy modules a package put under its
// own names while it was imported) is counted apart, never an anomaly.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "commands.h"
#include "native_symbols.h"
#include "failure_reporting.h"
#include "import_time.h"
#include "lazy_stories.h"
#include "proxy_decision.h"

namespace imptrace {
namespace {

constexpr size_t kMaxListed = 20;  // per list, so a pathological run stays readable

// Prints at most kMaxListed lines of a list, then how many more there were.
struct Lister {
  std::ostream& out;
  size_t limit = kMaxListed;
  size_t shown = 0, total = 0;
  bool add() { ++total; return shown < limit ? (++shown, true) : false; }
  void finish() {
    if (total > shown) out << "      ... and " << (total - shown) << " more\n";
  }
};

}  // namespace

bool is_expected_access_failure(const model::ProxyAccess& a) {
  if (a.ok) return false;
  const std::string& at = a.attribute;
  bool dunder = at.size() > 4 && at.compare(0, 2, "__") == 0 && at.compare(at.size() - 2, 2, "__") == 0;
  // pytest's plugin, hook and fixture discovery asks every module for these.
  bool pytest_probe = at.compare(0, 7, "_pytest") == 0 || at.compare(0, 7, "pytest_") == 0;
  if ((dunder || pytest_probe) && a.error_type == "AttributeError") return true;
  return model::in_failure_reporting(a.stack);
}

std::vector<bool> bound_later(const model::Process& p) {
  std::vector<bool> out(p.bindings.size(), false);
  // Whether an import of `name` was running at time t (began before, ended after it).
  auto running = [&](const std::string& name, uint64_t t) {
    for (const auto& im : p.imports)
      if (im.name == name && im.begin_ns < t && im.end_ns > t) return true;
    return false;
  };
  for (size_t i = 0; i < p.bindings.size(); ++i) {
    const auto& b = p.bindings[i];
    if (b.status != model::BindingStatus::Missing) continue;
    bool later_bound = false;
    for (size_t j = i + 1; j < p.bindings.size() && !later_bound; ++j) {
      const auto& l = p.bindings[j];
      later_bound = l.parent == b.parent && l.attribute == b.attribute && l.time_ns >= b.time_ns &&
                    l.status == model::BindingStatus::Bound &&
                    (!b.bound_on.present || !l.bound_on.present || l.bound_on.id == b.bound_on.id);
    }
    out[i] = later_bound && (running(b.child_module(), b.time_ns) || running(b.parent, b.time_ns));
  }
  return out;
}

std::vector<bool> repeat_imports(const model::Process& p) {
  std::vector<bool> out(p.imports.size(), false);
  std::set<std::pair<std::string, uint64_t>> returned;  // (name, object) of earlier imports
  for (size_t i = 0; i < p.imports.size(); ++i) {  // in start order
    const auto& im = p.imports[i];
    if (!im.ok || !im.object.present) continue;
    out[i] = !returned.insert({im.name.str(), im.object.id}).second;
  }
  return out;
}

namespace {

// runpy (`python -m`, run_path, run_module with alter_sys) and multiprocessing's spawn
// and forkserver children put the module they run under '__main__' and '__mp_main__' and
// swap it back: how Python runs a main module, not a replacement worth a look.
bool main_module_swap(const model::ModulesChange& c) {
  const std::string& key = c.key.str();
  if ((key != "__main__" && key != "__mp_main__") || c.stack.empty()) return false;
  const std::string& f = c.stack[0].file.str();
  auto ends_with = [&](const char* tail) {
    size_t n = strlen(tail);
    return f.size() >= n && f.compare(f.size() - n, n, tail) == 0;
  };
  return f == "<frozen runpy>" || ends_with("/runpy.py") || f == "runpy.py" ||
         ends_with("multiprocessing/spawn.py");
}

// What packages put under their own names while they were imported
// (model::own_namespace_import): a module replacing itself (`sys.modules[__name__] =
// Wrapper(...)` in pygments.lexers, torch.backends.cudnn, torch._VF) or a lazy-module
// system (apipkg.initpkg, called from py/__init__.py, putting ApiModule proxies under 'py',
// 'py.path', 'py.error', ...). The package's design: that object is the module from then
// on, and children bound on it are bound on their parent.
struct OwnPlacements {
  struct Placed {
    const model::ModulesChange* change;
    const model::Import* by;  // the import whose namespace the key is in
  };
  // The replacements and proxies among them (what would otherwise be anomalies), the first
  // write of each (key, object), in record order.
  std::vector<Placed> listed;
  std::set<std::pair<std::string, uint64_t>> all;  // (key, object) of every such write
  bool has(const std::string& key, uint64_t object) const { return all.count({key, object}) > 0; }
};

OwnPlacements own_placements(const model::Process& p) {
  OwnPlacements o;
  for (const auto& c : p.modules_changes) {
    const model::Import* by = model::own_namespace_import(p, c);
    if (!by || !o.all.insert({c.key.str(), c.new_object.id}).second) continue;
    if ((c.old_object.present && c.old_object.id != c.new_object.id) || c.new_object.is_proxy())
      o.listed.push_back({&c, by});
  }
  return o;
}

// The bindings on an object a package put under its own name, which is their parent.
std::vector<bool> bound_on_own_placement(const model::Process& p, const OwnPlacements& own) {
  std::vector<bool> out(p.bindings.size(), false);
  if (own.all.empty()) return out;
  for (size_t i = 0; i < p.bindings.size(); ++i) {
    const auto& b = p.bindings[i];
    out[i] = b.status == model::BindingStatus::OnProxy && b.bound_on.present && own.has(b.parent.str(), b.bound_on.id);
  }
  return out;
}

}  // namespace

std::vector<Anomaly> find_anomalies(const model::Process& p) {
  const auto roots = p.sys_path_roots();
  auto rel = [&](const model::Location& loc) {
    model::Location l = loc;
    l.file = model::relativize_path(loc.file, roots);
    return l;
  };
  std::vector<Anomaly> out;
  // A module that makes its name an alias of a module already imported under another name,
  // while it is itself imported (3.13's collections/abc.py puts _collections_abc there): the
  // module's design, not a replacement worth a look.
  std::map<uint64_t, std::string> imported_as;
  for (const auto& im : p.imports)
    if (im.ok && im.object.present && im.object.is_plain_module()) imported_as.emplace(im.object.id, im.name.str());
  auto own_alias = [&](const model::ModulesChange& c) {
    if (!c.during_import || !c.new_object.is_plain_module() || !c.old_object.is_plain_module()) return false;
    int64_t in = p.import_position(c.during_import - 1);
    auto other = imported_as.find(c.new_object.id);
    return in >= 0 && p.imports[in].name.str() == c.key.str() && other != imported_as.end() &&
           other->second != c.key.str();
  };
  const OwnPlacements own = own_placements(p);
  for (size_t i = 0; i < p.modules_changes.size(); ++i) {
    const auto& c = p.modules_changes[i];
    if (c.by_import_system || c.op != model::ChangeOp::Set || !c.old_object.present ||
        !c.new_object.present || c.old_object.id == c.new_object.id || own_alias(c) ||
        main_module_swap(c) || own.has(c.key.str(), c.new_object.id))
      continue;
    // The old object under the key again later (mock.patch.dict(sys.modules) and
    // monkeypatch.setitem restore what they replaced): where it was put back.
    std::string back;
    for (size_t j = i + 1; j < p.modules_changes.size() && back.empty(); ++j) {
      const auto& later = p.modules_changes[j];
      if (later.key.str() != c.key.str() || later.op != model::ChangeOp::Set || !later.new_object.present) continue;
      if (later.new_object.id != c.old_object.id) continue;
      back = ", put back later";
      if (!later.stack.empty()) back += " at " + format_location(rel(later.stack[0]));
    }
    out.push_back({"sys_modules_replaced", c.key,
                   "sys.modules['" + c.key + "'] replaced by non-import code: " +
                       describe_object(c.old_object) + " -> " + describe_object(c.new_object) +
                       // Its place is then where that import ran, not where the write was.
                       (c.precision == model::Precision::AtBoundary ? ", seen at the next import" : "") + back,
                   c.stack.empty() ? model::Location() : rel(c.stack[0]), c.test});
  }
  // The key each proxy sat under, so a failed access through it leads to that key's story.
  std::map<uint64_t, std::string> key_of_proxy;
  std::set<std::pair<std::string, uint64_t>> seen_proxy_keys;
  auto proxy_under = [&](const std::string& key, const model::ObjectRef& o) {
    if (!o.present || !o.is_proxy()) return;
    key_of_proxy.emplace(o.id, key);
    if (own.has(key, o.id) || !seen_proxy_keys.insert({key, o.id}).second) return;
    out.push_back({"proxy_in_sys_modules", key, "proxy under sys.modules['" + key + "']: " + describe_object(o),
                   model::Location(), ""});
  };
  for (const auto& c : p.modules_changes) proxy_under(c.key, c.new_object);
  for (const auto& im : p.imports) proxy_under(im.name, im.object);
  const std::vector<bool> later = bound_later(p);
  const std::vector<bool> on_self = bound_on_own_placement(p, own);
  for (size_t i = 0; i < p.bindings.size(); ++i) {
    const auto& b = p.bindings[i];
    if (b.status == model::BindingStatus::Bound || later[i] || on_self[i] || model::shadowed_by_own_attribute(b))
      continue;
    out.push_back({"binding_not_bound", b.parent,
                   "child " + b.child_module() + " not bound on its parent: " +
                       model::binding_status_name(b.status) + " (parent is " + describe_object(b.bound_on) + ")",
                   model::Location(), b.test});
  }
  for (const auto& a : p.proxy_accesses) {
    if (a.ok || is_expected_access_failure(a) || model::import_system_probe(p, a) ||
        model::caught_attribute_error(p, a))
      continue;
    auto k = a.proxy.present ? key_of_proxy.find(a.proxy.id) : key_of_proxy.end();
    std::string key = k != key_of_proxy.end() ? k->second : a.proxy.name.str();
    out.push_back({"proxy_access_failed", key,
                   "." + a.attribute + " on " + describe_object(a.proxy) + " failed: " + a.outcome(),
                   a.stack.empty() ? model::Location() : rel(a.stack[0]), a.test});
  }
  return out;
}

namespace {

// A host embedding Python (a C/C++ program calling Py_Initialize), as opposed to a Python
// interpreter's own executable (python3.11, python3.12d...), whose one lifetime and whose
// static libpython say nothing worth a line.
bool embedding_host(const model::Process& p) {
  std::string exe = p.executable.substr(p.executable.rfind('/') + 1);
  if (exe.empty() && !p.argv.empty()) exe = p.argv[0].substr(p.argv[0].rfind('/') + 1);
  return !exe.empty() && exe.compare(0, 6, "python") != 0;
}

// Each lifetime of the interpreter (Py_Initialize* ... Py_FinalizeEx) with its imports,
// when the host initialised Python more than once; and what the tracer could not see.
void show_lifetimes(const model::Process& p, std::ostream& out) {
  if (p.several_lifetimes()) {
    std::map<uint32_t, std::pair<size_t, size_t>> counts;  // lifetime -> (imports, failed)
    for (size_t i = 0; i < p.imports.size(); ++i) {
      auto& c = counts[p.lifetime_at(p.imports[i].begin_ns)];
      ++c.first;
      c.second += !p.imports[i].ok;
    }
    out << "  interpreter lifetimes: " << p.lifetimes.size()
        << " (Py_Initialize ... Py_FinalizeEx; each has its own sys.modules)\n";
    for (const auto& l : p.lifetimes) {
      const auto& c = counts[l.number];
      out << "    " << l.number << ". from " << format_ms(l.begin_ns) << " ms";
      if (l.ended) out << " to " << format_ms(l.end_ns) << " ms";
      else out << ", not finalised when the trace ends";
      out << ": " << c.first << " imports (" << c.second << " failed)\n";
    }
  }
  bool from_c = false, end_unseen = false, next_unseen = false;
  for (const auto& l : p.lifetimes) {
    from_c |= l.subinterpreters_from_c_unseen;
    end_unseen |= l.end_unseen;
    next_unseen |= l.ended && l.next_unseen;
  }
  if (from_c && embedding_host(p))
    out << "  not seen: sub-interpreters created from C (Py_NewInterpreter*): libpython is linked "
           "statically here (IMPTRACE_AUDIT_HOOK=1 sees them)\n";
  if (end_unseen) out << "  not seen: the interpreter's finalisation, and any later Py_Initialize\n";
  if (next_unseen) out << "  not seen: any Py_Initialize after the last Py_FinalizeEx\n";
}

// PEP 810 (3.15): how many lazy bindings were declared, resolved at first use, failed
// there or never used; the failed ones with both places, then the never-used ones (all of
// them with --all).
template <typename Rel>
void show_lazy_imports(const model::Process& p, std::ostream& out, const Rel& rel, bool all) {
  if (p.lazy_declared.empty()) return;
  const auto stories = model::lazy_stories(p);
  size_t resolved = 0, failed = 0, unused = 0;
  for (const auto& s : stories) {
    if (s.failed_at_use()) ++failed;
    else if (s.resolved) ++resolved;
    else ++unused;
  }
  out << "  lazy imports (PEP 810): " << stories.size() << " declared, " << resolved << " resolved at first use, "
      << failed << " failed at first use, " << unused << " declared and never used\n";
  auto declared = [&](const model::LazyDeclared& d) {
    out << "    " << d.target << " (" << d.module << "." << d.name << ")";
  };
  if (failed) {
    out << "  lazy imports that failed at first use:\n";
    Lister l{out};
    for (const auto& s : stories) {
      if (!s.failed_at_use() || !l.add()) continue;
      declared(*s.declared);
      // The import the use ran failed, or (a `lazy from`) found no such name.
      const model::Import& used = s.failed ? *s.failed : *s.found_nothing;
      out << ": " << model::lazy_failure_text(s) << "\n";
      if (!s.declared->declared_at.empty()) out << "      declared at " << format_location(rel(s.declared->declared_at)) << "\n";
      if (!used.importer.empty()) out << "      first used at " << format_location(rel(used.importer)) << "\n";
      if (!used.test.empty()) out << "      during test " << used.test << "\n";
    }
    l.finish();
  }
  if (unused) {
    // 3.15's own stdlib declares some in every process: a short list unless --all.
    out << "  lazy imports declared and never used:\n";
    Lister l{out, all ? SIZE_MAX : kMaxListed};
    for (const auto& s : stories) {
      if (!s.never_used() || !l.add()) continue;
      declared(*s.declared);
      if (!s.declared->declared_at.empty()) out << " at " << format_location(rel(s.declared->declared_at));
      out << "\n";
    }
    l.finish();
  }
}

// Who the process was: its command line, its interpreter and the trace it was read from.
void show_identity(const model::Process& p, std::ostream& out) {
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
}

// The figures of the summary lines: what looks wrong, and apart from it what normal
// Python does (repeat imports, children bound later, expected failed lookups).
struct ProcessCounts {
  size_t failed = 0;             // failed imports
  size_t repeats = 0;            // imports that found the module already loaded
  size_t proxies = 0;            // distinct proxies put under a key or returned by an import
  size_t not_bound = 0;          // children not bound on their parent...
  size_t not_bound_yet = 0;      // ...and those bound when their outer import finished
  size_t shadowed = 0;           // ...and names the package rebound to its own attribute
  size_t failed_access = 0;      // failed proxy accesses worth a look...
  size_t expected_failures = 0;  // ...and those normal Python makes
  size_t main_swaps = 0;         // runpy's and multiprocessing's '__main__' swaps
  size_t own_placed = 0;         // replacements and proxies packages put under their own names...
  std::map<std::string, size_t> own_by_package;  // ...per top-level package
  size_t bound_on_self = 0;      // ...and children bound on those objects
  uint64_t access_repeats = 0;   // counted by the tracer, not recorded (never failures)
};

ProcessCounts count_process(const model::Process& p, const std::vector<bool>& repeat, const OwnPlacements& own) {
  ProcessCounts n;
  for (const auto& im : p.imports) n.failed += !im.ok;
  for (bool r : repeat) n.repeats += r;
  std::set<uint64_t> proxies;
  for (const auto& c : p.modules_changes)
    if (c.new_object.present && c.new_object.is_proxy()) proxies.insert(c.new_object.id);
  for (const auto& im : p.imports)
    if (im.object.present && im.object.is_proxy()) proxies.insert(im.object.id);
  n.proxies = proxies.size();
  const std::vector<bool> later = bound_later(p);
  const std::vector<bool> on_self = bound_on_own_placement(p, own);
  for (size_t i = 0; i < p.bindings.size(); ++i) {
    if (p.bindings[i].status == model::BindingStatus::Bound) continue;
    if (later[i]) ++n.not_bound_yet;
    else if (on_self[i]) ++n.bound_on_self;
    else if (model::shadowed_by_own_attribute(p.bindings[i])) ++n.shadowed;
    else ++n.not_bound;
  }
  for (const auto& c : p.modules_changes) n.main_swaps += !c.by_import_system && main_module_swap(c);
  n.own_placed = own.listed.size();
  for (const auto& o : own.listed) {
    const std::string& name = o.by->name.str();
    ++n.own_by_package[name.substr(0, name.find('.'))];
  }
  for (const auto& a : p.proxy_accesses) {
    n.access_repeats += a.repeats;
    if (a.ok) continue;
    if (is_expected_access_failure(a) || model::import_system_probe(p, a) || model::caught_attribute_error(p, a))
      ++n.expected_failures;
    else ++n.failed_access;
  }
  return n;
}

void show_counts(const model::Process& p, const ProcessCounts& n, std::ostream& out) {
  // Every import that ran find-and-load, as `run`, `diff`, `report` and `export` count them;
  // those that found the module already loaded (lookups) are said apart, here only.
  out << "  imports: " << p.imports.size() << " (" << n.failed << " failed";
  if (n.repeats) out << "; " << n.repeats << " found the module already loaded";
  out << ")  sys.modules changes: " << p.modules_changes.size()
      << "  proxies: " << n.proxies << "  bindings not bound: " << n.not_bound
      << "  proxy accesses: " << p.proxy_accesses.size() << " (" << n.failed_access << " failed)";
  if (n.access_repeats) out << " + " << n.access_repeats << " repeats counted";
  out << "\n";
  if (n.not_bound_yet || n.shadowed || n.expected_failures || n.main_swaps || n.own_placed || n.bound_on_self) {
    out << "  normal Python, not anomalies:";
    if (n.not_bound_yet) out << "  children bound when their outer import finished: " << n.not_bound_yet;
    if (n.shadowed) out << "  submodule names the package bound to its own attribute: " << n.shadowed;
    if (n.expected_failures)
      out << "  expected failed lookups (dunder probes, caught AttributeErrors, failure reporting): "
          << n.expected_failures;
    if (n.main_swaps) out << "  main module swapped in by runpy or multiprocessing: " << n.main_swaps;
    if (n.own_placed) {
      // Most first, so the package behind most of them is named even when the list is cut.
      std::vector<std::pair<size_t, std::string>> by(n.own_by_package.size());
      std::transform(n.own_by_package.begin(), n.own_by_package.end(), by.begin(),
                     [](const auto& kv) { return std::make_pair(kv.second, kv.first); });
      std::stable_sort(by.begin(), by.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
      out << "  module wrappers and lazy proxies packages put under their own names while imported: "
          << n.own_placed << " (";
      for (size_t k = 0; k < by.size() && k < 5; ++k) out << (k ? ", " : "") << by[k].second << ": " << by[k].first;
      out << (by.size() > 5 ? ", ..." : "") << "; show --all lists them)";
    }
    if (n.bound_on_self) out << "  children bound on what their package put under its own name: " << n.bound_on_self;
    out << "\n";
  }
}

// The failed imports at positions `which` of p.imports, at most `limit` of them.
template <typename Rel>
void list_failed_imports(const model::Process& p, const std::vector<size_t>& which, size_t limit,
                         const Rel& rel, std::ostream& out,
                         const std::map<size_t, std::vector<size_t>>* carriers = nullptr) {
  Lister l{out, limit};
  for (size_t i : which) {
    if (!l.add()) continue;
    const auto& im = p.imports[i];
    out << "    ";
    if (p.several_lifetimes()) out << "[lifetime " << p.lifetime_at(im.begin_ns) << "] ";
    out << im.name << ": " << im.error_text() << "\n";
    if (!im.importer.empty()) out << "      imported at " << format_location(rel(im.importer)) << "\n";
    if (!im.test.empty()) out << "      during test " << im.test << "\n";
    auto c = carriers ? carriers->find(i) : std::map<size_t, std::vector<size_t>>::const_iterator();
    if (carriers && c != carriers->end()) {
      const auto& via = c->second;
      out << "      raised here; " << via.size() << " enclosing import" << (via.size() == 1 ? "" : "s")
          << " failed with it: ";
      for (size_t k = 0; k < via.size() && k < 8; ++k) out << (k ? ", " : "") << p.imports[via[k]].name;
      if (via.size() > 8) out << ", ... (" << via.size() - 8 << " more)";
      out << "\n";
    }
  }
  l.finish();
}

// Failures the importer handled (optional-dependency probes inside try/except
// ImportError) are the normal case; the ones that stopped something come first.
template <typename Rel>
void show_failed_imports(const model::Process& p, std::ostream& out, const Rel& rel, bool all) {
  const auto fate = timing::classify_failures(p);
  std::vector<size_t> propagated, handled;
  for (size_t i = 0; i < p.imports.size(); ++i) {
    if (fate[i] == timing::Fate::Propagated) propagated.push_back(i);
    else if (fate[i] == timing::Fate::Handled) handled.push_back(i);
  }
  if (!propagated.empty()) {
    out << "  failed imports that propagated (the enclosing import, the test or the program stopped): "
        << propagated.size() << "\n";
    // One entry per import where an error was raised, with the enclosing imports that only
    // carried it out (`import pandas` and 17 more failing because `_strptime` raised):
    // listed outermost first, the line to read would come last.
    std::vector<size_t> raised;
    std::map<size_t, std::vector<size_t>> carriers;
    for (size_t i : propagated) {
      const size_t at = static_cast<size_t>(&timing::origin_of_failure(p, p.imports[i]) - p.imports.data());
      if (at != i) carriers[at].push_back(i);
      if (at == i || (fate[at] != timing::Fate::Propagated && carriers[at].size() == 1)) raised.push_back(at);
    }
    std::sort(raised.begin(), raised.end());
    list_failed_imports(p, raised, all ? SIZE_MAX : kMaxListed, rel, out, &carriers);
  }
  if (handled.empty()) return;
  out << "  failed imports handled by their importer: " << handled.size();
  if (all) {
    out << "\n";
    list_failed_imports(p, handled, SIZE_MAX, rel, out);
    return;
  }
  out << " (";
  for (size_t k = 0; k < handled.size() && k < 5; ++k)
    out << (k ? ", " : "") << p.imports[handled[k]].name;
  out << (handled.size() > 5 ? ", ..." : "") << "; show --all lists them)\n";
}

// At most kMaxListed of each kind, in the order find_anomalies gives them.
void show_anomalies(const model::Process& p, std::ostream& out) {
  std::vector<Anomaly> anomalies = find_anomalies(p);
  if (!anomalies.empty()) out << "  anomalies:\n";
  for (size_t k = 0; k < anomalies.size();) {
    Lister l{out};
    const std::string& kind = anomalies[k].kind;
    for (; k < anomalies.size() && anomalies[k].kind == kind; ++k) {
      if (!l.add()) continue;
      const Anomaly& x = anomalies[k];
      out << "    " << x.text << "\n";
      if (!x.at.empty()) out << "      at " << format_location(x.at) << "\n";
      if (!x.test.empty()) out << "      during test " << x.test << "\n";
    }
    l.finish();
  }
}

// show --all: each replacement and proxy a package put under its own name while it was
// imported (counted on the "normal Python" line), with the import and the line that did it.
template <typename Rel>
void show_own_placements(const OwnPlacements& own, std::ostream& out, const Rel& rel) {
  if (own.listed.empty()) return;
  out << "  put under their own names by their package's import (normal Python, not anomalies):\n";
  for (const auto& o : own.listed) {
    const model::ModulesChange& c = *o.change;
    out << "    sys.modules['" << c.key << "']: ";
    if (c.old_object.present) out << describe_object(c.old_object) << " -> ";
    out << describe_object(c.new_object) << ", during the import of " << o.by->name << "\n";
    if (!c.stack.empty()) out << "      at " << format_location(rel(c.stack[0])) << "\n";
  }
}

// IMPTRACE_NATIVE_STACKS=1: the imports an extension's C or C++ code made, each with the
// function that made it and the Python line that called into that code.
template <typename Rel>
void show_native_imports(const model::Process& p, std::ostream& out, const Rel& rel, bool all) {
  size_t native = 0;
  for (const auto& im : p.imports) native += !im.native_caller.empty();
  if (!native) return;
  out << "  imports entered from native code: " << native << "\n";
  Lister l{out, all ? SIZE_MAX : kMaxListed};
  for (const auto& im : p.imports) {
    if (im.native_caller.empty() || !l.add()) continue;
    out << "    " << im.name << " <- " << model::format_native_caller(im.native_caller) << "\n";
    if (!im.importer.empty()) out << "      called from Python at " << format_location(rel(im.importer)) << "\n";
  }
  l.finish();
}

// What the tracer said about its own work, and what the reader found wrong in the file.
void show_notes_and_warnings(const model::Process& p, std::ostream& out) {
  if (!p.notes.empty()) {
    out << "  tracer notes:\n";
    for (const auto& n : p.notes) out << "    " << n.text << "\n";
  }
  if (!p.warnings.empty()) {
    out << "  reader warnings:\n";
    for (const auto& w : p.warnings) out << "    " << w << "\n";
  }
}

void show_process(const model::Process& p, std::ostream& out, bool all_failures) {
  const auto roots = p.sys_path_roots();
  auto rel = [&](const model::Location& loc) { return model::relative_location(loc, roots); };

  show_identity(p, out);
  if (!p.not_traced.empty()) {
    // Nothing else follows in such a trace: no counts, no end, only the reason.
    out << "  " << p.not_traced << "\n";
    return;
  }
  out << "  how it ended: " << model::end_text(p.end)
      << (model::terminated(p.end)         ? "  <- terminated from outside: the trace stops there"
          : model::ended_abnormally(p.end) ? "  <- ended abnormally: the trace stops there"
                                           : "")
      << "\n";

  const std::vector<bool> repeat = repeat_imports(p);
  const OwnPlacements own = own_placements(p);
  const ProcessCounts counts = count_process(p, repeat, own);
  show_lifetimes(p, out);
  show_counts(p, counts, out);
  if (counts.failed) show_failed_imports(p, out, rel, all_failures);
  show_lazy_imports(p, out, rel, all_failures);
  show_anomalies(p, out);
  if (all_failures) show_own_placements(own, out, rel);
  show_native_imports(p, out, rel, all_failures);
  show_notes_and_warnings(p, out);
}

}  // namespace

RunCounts count_run(const std::vector<model::Process>& procs) {
  RunCounts n;
  n.processes = procs.size();
  for (const auto& p : procs) {
    n.imports += p.imports.size();
    for (const auto& im : p.imports) n.failed_imports += !im.ok;
    n.anomalies += find_anomalies(p).size();
  }
  return n;
}

void show_text(const std::vector<model::Process>& procs, std::ostream& out, bool all_failures) {
  out << procs.size() << " process" << (procs.size() == 1 ? "" : "es") << "\n";
  for (const auto& p : procs) {
    out << "\n";
    show_process(p, out, all_failures);
  }
}

int run_show(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {}, {"--all", "--redact"});
  if (a.positional.empty()) throw UsageError("show needs at least one PATH");
  const auto& procs = load_for_command(a.positional);
  if (!a.has("--redact")) {
    show_text(procs, std::cout, a.has("--all"));
    return 0;
  }
  std::ostringstream out;
  show_text(procs, out, a.has("--all"));
  write_redacted(out.str(), {&procs}, std::cout);
  return 0;
}

}  // namespace imptrace
