// The diff engine: per-process facts, grouped by role, compared structurally; findings
// ranked and grouped into stories. See diff.h for the rules. Everything here is linear in
// the size of the traces (hash maps keyed by module name), apart from sorting.
#include "diff.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace imptrace {
namespace diff {

using model::Import;
using model::Location;
using model::ObjectRef;
using model::Process;

const char* severity_name(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Info: return "info";
  }
  return "info";
}

int Result::exit_status() const { return count(Severity::Warning) ? 1 : 0; }

size_t Result::count(Severity at_least) const {
  size_t n = 0;
  for (const auto& f : findings) {
    if (f.severity >= at_least) ++n;
    for (const auto& r : f.related)
      if (r.severity >= at_least) ++n;
  }
  return n;
}

namespace {

// ---- categories (ranking) -------------------------------------------------------------
const char* const kKindOrder[] = {
    "sys_modules_replaced", "proxy_in_sys_modules", "binding_on_proxy", "binding_mismatch",
    "proxy_forward_failed", "import_failed",        "duplicate_module", "process_missing",
    "process_added",        "module_missing",       "module_added",     "loader_changed",
    "origin_changed",       "import_order_changed", "import_slower"};

int category_of(const std::string& kind) {
  int i = 0;
  for (const char* k : kKindOrder) {
    if (kind == k) return i;
    ++i;
  }
  return i;
}

// ---- path normalisation ------------------------------------------------------------------
// Relative to the sys.path entry (contract), else to the cwd, else the last three path
// components: runs from different prefixes compare equal.
class PathNorm {
 public:
  explicit PathNorm(const Process& p) : roots_(p.sys_path_roots()), cwd_(p.cwd) {
    while (cwd_.size() > 1 && cwd_.back() == '/') cwd_.pop_back();
  }
  const std::string& operator()(const std::string& path) {
    auto it = cache_.find(path);
    if (it != cache_.end()) return it->second;
    return cache_.emplace(path, compute(path)).first->second;
  }
  Location loc(const Location& l) {
    Location out = l;
    out.file = (*this)(l.file);
    return out;
  }

 private:
  std::string compute(const std::string& path) const {
    if (path.empty() || path[0] != '/') return path;
    std::string r = model::relativize_path(path, roots_);
    if (r != path) return r;
    if (!cwd_.empty() && cwd_ != "/" && path.size() > cwd_.size() + 1 &&
        path.compare(0, cwd_.size(), cwd_) == 0 && path[cwd_.size()] == '/')
      return path.substr(cwd_.size() + 1);
    size_t cut = path.size();
    for (int i = 0; i < 3 && cut != std::string::npos && cut > 0; ++i)
      cut = path.rfind('/', cut - 1);
    if (cut == std::string::npos || cut == 0) return path;
    return "..." + path.substr(cut);
  }
  std::vector<std::string> roots_;
  std::string cwd_;
  std::unordered_map<std::string, std::string> cache_;
};

std::string basename_of(const std::string& s) {
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

std::string strip_digits(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (isdigit(static_cast<unsigned char>(s[i]))) {
      if (out.empty() || out.back() != '#') out += '#';
    } else {
      out += s[i];
    }
  }
  return out;
}

std::string env_of(const Process& p, const std::string& name) {
  for (const auto& kv : p.env)
    if (kv.first == name) return kv.second;
  return "";
}

std::string group_of(const Process& p) {
  PathNorm norm(p);
  std::string prog = p.argv.empty() ? basename_of(p.executable) : basename_of(p.argv[0]);
  // python3.11 and python3 are the same role.
  if (prog.compare(0, 6, "python") == 0) prog = "python";
  std::string key = prog;
  for (size_t i = 1; i < p.argv.size(); ++i) {
    std::string a = p.argv[i];
    size_t eq = a.find('=');
    std::string head, value = a;
    if (a.size() > 2 && a[0] == '-' && eq != std::string::npos) {
      head = a.substr(0, eq + 1);
      value = a.substr(eq + 1);
    }
    if (value.find('/') != std::string::npos && value.find('\n') == std::string::npos)
      value = strip_digits(norm(value));
    key += " " + head + value;
  }
  if (p.forked_from_pid) key = "fork of " + key;
  return key;
}

std::string worker_of(const Process& p) { return env_of(p, "PYTEST_XDIST_WORKER"); }

std::string normalize_loader(const std::string& l) {
  // "<_frozen_importlib_external.SourceFileLoader object at 0x7f..>" -> without address.
  std::string out;
  for (size_t i = 0; i < l.size(); ++i) {
    if (l[i] == '0' && i + 1 < l.size() && (l[i + 1] == 'x' || l[i + 1] == 'X')) {
      size_t j = i + 2;
      while (j < l.size() && isxdigit(static_cast<unsigned char>(l[j]))) ++j;
      if (j > i + 2) {
        out += "0x?";
        i = j - 1;
        continue;
      }
    }
    out += l[i];
  }
  return out;
}

std::string top_level(const std::string& name) {
  size_t dot = name.find('.');
  return dot == std::string::npos ? name : name.substr(0, dot);
}

std::string obj_kind(const ObjectRef& o) {
  if (!o.present) return "nothing";
  std::string s = o.is_plain_module() ? std::string("module") : (o.type.empty() ? "object" : o.type);
  return s;
}

// "module 'a' (a/__init__.py)" or "pkg.Lazy 'a' [proxy]": structural, no token.
std::string describe(const ObjectRef& o, const std::string& origin) {
  if (!o.present) return "nothing";
  std::string s = obj_kind(o);
  if (!o.name.empty()) s += " '" + o.name + "'";
  if (o.is_proxy()) s += " [proxy]";
  if (!origin.empty()) s += " (" + origin + ")";
  return s;
}

std::string fmt_loc(const Location& l) {
  if (l.empty()) return "<unknown location>";
  std::string s = l.file.empty() ? "<unknown file>" : l.file;
  if (l.line) s += ":" + std::to_string(l.line);
  if (!l.function.empty()) s += " in " + l.function;
  return s;
}

std::string fmt_ms(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

// ---- per-process facts -------------------------------------------------------------------
struct Entry {
  ObjectRef obj;
  bool via_import = true;
  bool before_trace = false;        // seen only as the `old` of a change
  std::string origin;               // relativized file/origin
  std::string relation;             // "new object", "same object as under 'x'", ...
  Location set_by;                  // relativized
  std::vector<Location> stack;      // relativized, a few frames
  uint64_t time_ns = 0;
  std::string test;
  bool removed = false;
  Location removed_at;
};

struct KeyHistory {
  std::vector<Entry> entries;
  int64_t current = -1;
  std::string sig;
  bool has_proxy = false;
};

struct ModFacts {
  bool ok = false;
  const Import* first_ok = nullptr;
  std::vector<const Import*> failed;
  uint64_t self_ns = 0;
  uint64_t pos = 0;  // position of the first import in the process
};

struct BindingFact {
  const model::Binding* b = nullptr;
  std::string rel;   // current | later_replaced | stale | other | unknown
  std::string sig;
  std::string replaced_by;  // description of what replaced the parent, when later_replaced
};

struct AccessFact {
  const model::ProxyAccess* a = nullptr;
  std::string sig;
  std::string story;  // sys.modules key the proxy sat under
  Location where;
};

struct ProcFacts {
  const Process* p = nullptr;
  int index = 0;
  std::string group, worker, role;
  std::unique_ptr<PathNorm> norm;
  std::unordered_map<std::string, KeyHistory> keys;
  std::vector<std::string> key_order;
  std::unordered_map<std::string, ModFacts> mods;
  std::vector<std::string> mod_order;           // first-import order
  std::vector<uint32_t> main_seq;                 // positions in imports, main thread
  std::unordered_map<uint64_t, std::string> first_key_of;
  std::vector<BindingFact> bindings;
  std::vector<AccessFact> accesses;
  std::vector<std::pair<std::string, std::string>> duplicates;  // (sig, module)
};

std::vector<Location> rel_stack(PathNorm& norm, const std::vector<Location>& stack, size_t n) {
  std::vector<Location> out;
  for (size_t i = 0; i < stack.size() && i < n; ++i) out.push_back(norm.loc(stack[i]));
  return out;
}

void build_history(ProcFacts& f) {
  const Process& p = *f.p;
  PathNorm& norm = *f.norm;
  struct Ev {
    uint64_t t;
    int order;
    size_t i;
  };
  std::vector<Ev> evs;
  evs.reserve(p.modules_changes.size() + p.imports.size());
  for (size_t i = 0; i < p.modules_changes.size(); ++i) evs.push_back({p.modules_changes[i].time_ns, 0, i});
  for (size_t i = 0; i < p.imports.size(); ++i)
    if (p.imports[i].ok && p.imports[i].object.present) evs.push_back({p.imports[i].end_ns, 1, i});
  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.t != b.t ? a.t < b.t : a.order < b.order;
  });

  auto history = [&](const std::string& key) -> KeyHistory& {
    auto it = f.keys.find(key);
    if (it != f.keys.end()) return it->second;
    f.key_order.push_back(key);
    return f.keys[key];
  };
  auto push = [&](KeyHistory& h, const std::string& key, const ObjectRef& obj, bool via_import,
                  uint64_t t) -> Entry& {
    Entry e;
    e.obj = obj;
    e.via_import = via_import;
    e.time_ns = t;
    e.origin = obj.file.empty() ? "" : norm(obj.file);
    auto fk = f.first_key_of.find(obj.id);
    if (fk == f.first_key_of.end()) {
      e.relation = "new object";
      f.first_key_of.emplace(obj.id, key);
    } else if (fk->second != key) {
      e.relation = "same object as under '" + fk->second + "'";
    } else {
      e.relation = "the object that was there before";
      for (size_t i = 0; i < h.entries.size(); ++i)
        if (h.entries[i].obj.id == obj.id) {
          e.relation = "same as entry #" + std::to_string(i + 1);
          break;
        }
    }
    if (obj.is_proxy()) h.has_proxy = true;
    h.entries.push_back(std::move(e));
    h.current = static_cast<int64_t>(h.entries.size() - 1);
    return h.entries.back();
  };

  for (const auto& ev : evs) {
    if (ev.order == 0) {
      const auto& c = p.modules_changes[ev.i];
      if (c.op == model::ChangeOp::Clear) {
        for (auto& kv : f.keys)
          if (kv.second.current >= 0) {
            kv.second.entries[kv.second.current].removed = true;
            kv.second.current = -1;
          }
        continue;
      }
      KeyHistory& h = history(c.key);
      if (c.old_object.present &&
          (h.current < 0 || h.entries[h.current].obj.id != c.old_object.id)) {
        Entry& e = push(h, c.key, c.old_object, true, 0);
        e.before_trace = true;
      }
      if (c.op == model::ChangeOp::Set && c.new_object.present) {
        if (h.current >= 0 && h.entries[h.current].obj.id == c.new_object.id) continue;
        Entry& e = push(h, c.key, c.new_object, c.by_import_system, c.time_ns);
        e.stack = rel_stack(norm, c.stack, 4);
        if (!e.stack.empty()) e.set_by = e.stack[0];
        e.test = c.test;
      } else if (c.op == model::ChangeOp::Delete && h.current >= 0) {
        h.entries[h.current].removed = true;
        if (!c.stack.empty()) h.entries[h.current].removed_at = norm.loc(c.stack[0]);
        h.current = -1;
      }
    } else {
      const Import& im = p.imports[ev.i];
      KeyHistory& h = history(im.name);
      Entry* e;
      if (h.current < 0 || h.entries[h.current].obj.id != im.object.id) {
        // Import-system insertions the tracer did not record as changes: the module sat
        // there from the import's start (its children get bound before it returns).
        e = &push(h, im.name, im.object, true, im.begin_ns);
        e->test = im.test;
      } else {
        e = &h.entries[h.current];
      }
      if (e->origin.empty()) e->origin = norm(im.origin.empty() ? im.file : im.origin);
      if (e->set_by.empty()) e->set_by = norm.loc(im.importer);
    }
  }

  // Signatures: structure only. Import-system entries do not carry their origin (that is
  // origin_changed's business); assigned objects do.
  for (auto& kv : f.keys) {
    std::string sig;
    for (const auto& e : kv.second.entries) {
      if (!sig.empty()) sig += " > ";
      sig += e.before_trace ? "before" : (e.via_import ? "import" : "assign");
      sig += "|" + obj_kind(e.obj);
      if (e.obj.is_proxy()) sig += "|proxy";
      if (!e.via_import) sig += "|" + e.origin;
      sig += "|" + e.relation;
      if (e.removed) sig += "|removed";
    }
    kv.second.sig = std::move(sig);
  }
}

void build_facts(ProcFacts& f) {
  const Process& p = *f.p;
  f.norm.reset(new PathNorm(p));
  PathNorm& norm = *f.norm;
  f.group = group_of(p);
  f.worker = worker_of(p);
  f.role = f.group + (f.worker.empty() ? "" : " [xdist " + f.worker + "]");

  // Self time: duration minus direct children.
  std::vector<uint64_t> child_ns(p.imports.size(), 0);
  for (const auto& im : p.imports)
    if (im.parent_pos >= 0 && static_cast<size_t>(im.parent_pos) < child_ns.size())
      child_ns[im.parent_pos] += im.duration_ns();
  uint64_t main_thread = p.imports.empty() ? 0 : p.imports[0].thread;
  for (size_t i = 0; i < p.imports.size(); ++i) {
    const Import& im = p.imports[i];
    if (im.thread == main_thread) f.main_seq.push_back(static_cast<uint32_t>(i));
    auto ins = f.mods.emplace(im.name, ModFacts());
    ModFacts& m = ins.first->second;
    if (ins.second) {
      m.pos = i;
      f.mod_order.push_back(im.name);
    }
    if (im.ok) {
      if (!m.ok) {
        m.ok = true;
        m.first_ok = &im;
        uint64_t d = im.duration_ns();
        m.self_ns = d > child_ns[i] ? d - child_ns[i] : 0;
      }
    } else {
      m.failed.push_back(&im);
    }
  }

  build_history(f);

  // Bindings.
  for (const auto& b : p.bindings) {
    BindingFact bf;
    bf.b = &b;
    auto it = f.keys.find(b.parent);
    if (!b.bound_on.present || it == f.keys.end() || it->second.entries.empty()) {
      bf.rel = "unknown";
    } else {
      const auto& es = it->second.entries;
      int64_t at = -1;
      for (size_t i = 0; i < es.size(); ++i)
        if (es[i].time_ns <= b.time_ns) at = static_cast<int64_t>(i);
      const Entry* last = it->second.current >= 0 ? &es[it->second.current] : nullptr;
      if (at >= 0 && es[at].obj.id == b.bound_on.id) {
        if (last && last->obj.id == b.bound_on.id) {
          bf.rel = "current";
        } else {
          bf.rel = "later_replaced";
          for (size_t i = at + 1; i < es.size(); ++i)
            if (es[i].obj.id != b.bound_on.id) {
              bf.replaced_by = describe(es[i].obj, es[i].origin);
              if (!es[i].set_by.empty()) bf.replaced_by += " at " + fmt_loc(es[i].set_by);
              break;
            }
          if (bf.replaced_by.empty()) bf.replaced_by = "removal from sys.modules";
        }
      } else {
        bf.rel = "other";
        for (const auto& e : es)
          if (e.obj.id == b.bound_on.id) bf.rel = "stale";
      }
    }
    bf.sig = b.parent + "." + b.attribute + "|" + model::binding_status_name(b.status) + "|" +
             bf.rel + (b.bound_on.is_proxy() ? "|proxy" : "");
    f.bindings.push_back(std::move(bf));
  }

  // Proxy accesses.
  for (const auto& a : p.proxy_accesses) {
    AccessFact af;
    af.a = &a;
    if (!a.stack.empty()) af.where = norm.loc(a.stack[0]);
    auto fk = a.proxy.present ? f.first_key_of.find(a.proxy.id) : f.first_key_of.end();
    if (fk != f.first_key_of.end()) af.story = fk->second;
    else if (!a.proxy.name.empty()) af.story = a.proxy.name;
    else af.story = a.forwarded_to.name;
    af.sig = af.story + "|" + a.proxy.type + "|" + model::proxy_access_kind_name(a.kind) + "|" +
             a.attribute + "|" + (a.ok ? std::string("ok") : a.error_type) + "|" +
             a.forwarded_to.name + "|" + af.where.file + ":" + af.where.function;
    f.accesses.push_back(std::move(af));
  }

  // One file, two module objects; one object under two names.
  std::unordered_map<std::string, std::vector<std::pair<uint64_t, std::string>>> by_file;
  for (const auto& im : p.imports) {
    if (!im.ok || !im.object.present || !im.object.is_plain_module()) continue;
    const std::string& file = !im.object.file.empty() ? im.object.file : im.file;
    if (file.empty() || file[0] != '/') continue;
    auto& v = by_file[file];
    bool seen = false;
    for (const auto& x : v) seen |= x.first == im.object.id;
    if (!seen) v.emplace_back(im.object.id, im.name);
  }
  for (auto& kv : by_file) {
    if (kv.second.size() < 2) continue;
    std::vector<std::string> names;
    for (const auto& x : kv.second) names.push_back(x.second);
    std::sort(names.begin(), names.end());
    std::string sig = "file " + norm(kv.first) + " executed as " + std::to_string(names.size()) +
                      " module objects:";
    for (const auto& n : names) sig += " " + n;
    f.duplicates.emplace_back(sig, names[0]);
  }
  for (const auto& key : f.key_order) {
    for (const auto& e : f.keys[key].entries) {
      if (!e.obj.is_plain_module() || e.relation.compare(0, 21, "same object as under ") != 0)
        continue;
      f.duplicates.emplace_back("module object under two names: " + key + " " + e.relation, key);
    }
  }
}

// ---- groups ------------------------------------------------------------------------------
struct Group {
  std::string key;
  std::vector<ProcFacts*> procs;
  // Union over the group, each with a representative.
  std::unordered_map<std::string, std::vector<std::pair<const ProcFacts*, const KeyHistory*>>> key_sigs;
  std::unordered_map<std::string, std::pair<const ProcFacts*, const ModFacts*>> mods_ok;
  std::unordered_map<std::string, std::vector<std::pair<const ProcFacts*, const Import*>>> failed;
  std::unordered_map<std::string, uint64_t> min_self;
  std::unordered_map<std::string, std::vector<std::pair<const ProcFacts*, const BindingFact*>>> binding_sigs;
  std::unordered_map<std::string, std::vector<std::pair<const ProcFacts*, const AccessFact*>>> access_sigs;
  std::unordered_map<std::string, std::pair<const ProcFacts*, std::string>> dup_sigs;
  std::vector<std::string> mod_order;  // first process's order then others'
  std::unordered_map<std::string, uint64_t> first_pos;

  void build() {
    for (const ProcFacts* f : procs) {
      for (const auto& key : f->key_order) {
        const KeyHistory& h = f->keys.at(key);
        auto& v = key_sigs[key];
        bool seen = false;
        for (const auto& x : v) seen |= x.second->sig == h.sig;
        if (!seen) v.emplace_back(f, &h);
      }
      for (const auto& name : f->mod_order) {
        const ModFacts& m = f->mods.at(name);
        if (!first_pos.count(name)) {
          first_pos[name] = m.pos;
          mod_order.push_back(name);
        }
        if (m.ok) {
          mods_ok.emplace(name, std::make_pair(f, &m));
          auto ms = min_self.find(name);
          if (ms == min_self.end()) min_self[name] = m.self_ns;
          else ms->second = std::min(ms->second, m.self_ns);
        }
        for (const Import* im : m.failed) {
          auto& v = failed[name];
          bool seen = false;
          for (const auto& x : v) seen |= x.second->error_type == im->error_type;
          if (!seen) v.emplace_back(f, im);
        }
      }
      for (const auto& bf : f->bindings) binding_sigs[bf.sig].emplace_back(f, &bf);
      for (const auto& af : f->accesses) access_sigs[af.sig].emplace_back(f, &af);
      for (const auto& d : f->duplicates) dup_sigs.emplace(d.first, std::make_pair(f, d.second));
    }
  }
  uint64_t pos_of(const std::string& name) const {
    auto it = first_pos.find(name);
    return it == first_pos.end() ? UINT64_MAX : it->second;
  }
};

std::string history_text(const KeyHistory& h) {
  std::string s;
  size_t n = 0;
  for (const auto& e : h.entries) {
    if (!s.empty()) s += "; then ";
    s += std::to_string(++n) + ". " + describe(e.obj, e.origin);
    if (e.before_trace) s += " already there";
    else s += e.via_import ? " by the import system" : " by assignment";
    if (!e.via_import && !e.set_by.empty()) s += " at " + fmt_loc(e.set_by);
    if (e.relation != "new object") s += " (" + e.relation + ")";
    if (e.removed) s += ", removed";
  }
  return s.empty() ? "nothing" : s;
}

class Engine {
 public:
  Engine(const Options& o, Result& r) : opt_(o), r_(r) {}

  void add(Finding f) {
    f.category = category_of(f.kind);
    r_.findings.push_back(std::move(f));
  }

  void compare(const Group& g, const Group& b) {
    const std::string& role = b.key;
    compare_identity(g, b, role);
    compare_bindings(g, b, role);
    compare_accesses(g, b, role);
    compare_failed(g, b, role);
    compare_duplicates(g, b, role);
    compare_modules(g, b, role);
  }

  void compare_identity(const Group& g, const Group& b, const std::string& role) {
    // Walk keys in the bad group's first-import order, for stable output.
    std::vector<std::string> keys;
    for (const auto& kv : b.key_sigs) keys.push_back(kv.first);
    std::sort(keys.begin(), keys.end(), [&](const std::string& x, const std::string& y) {
      uint64_t px = b.pos_of(x), py = b.pos_of(y);
      return px != py ? px < py : x < y;
    });
    for (const auto& key : keys) {
      const auto& bads = b.key_sigs.at(key);
      auto git = g.key_sigs.find(key);
      for (const auto& bad : bads) {
        const KeyHistory& bh = *bad.second;
        const KeyHistory* gh = nullptr;
        bool known = false;
        if (git != g.key_sigs.end()) {
          gh = git->second.front().second;
          for (const auto& x : git->second) known |= x.second->sig == bh.sig;
        }
        if (known) continue;
        if (!gh) {
          // A key the good run never had: only a proxy is worth an identity finding
          // (plain additions are module_added).
          if (bh.has_proxy) proxy_finding(key, bh, nullptr, *bad.first, role);
          else if (bh.entries.size() > 1) replaced_finding(key, bh, nullptr, *bad.first, role);
          continue;
        }
        bool proxy_new = bh.has_proxy && !gh->has_proxy;
        bool replaced = bh.entries.size() > 1 || gh->entries.size() > 1 ||
                        (!bh.entries.empty() && !gh->entries.empty() &&
                         bh.entries[0].via_import != gh->entries[0].via_import);
        if (replaced) replaced_finding(key, bh, gh, *bad.first, role);
        if (proxy_new) proxy_finding(key, bh, gh, *bad.first, role);
        if (!replaced && !proxy_new) replaced_finding(key, bh, gh, *bad.first, role);
      }
    }
  }

  void replaced_finding(const std::string& key, const KeyHistory& bh, const KeyHistory* gh,
                        const ProcFacts& pf, const std::string& role) {
    Finding f;
    f.kind = "sys_modules_replaced";
    f.module = key;
    f.story = key;
    f.process = role;
    f.order = first_pos(pf, key);
    f.good = gh ? history_text(*gh) : "nothing under this key";
    f.bad = history_text(bh);
    // The first entry of bad that differs from good: that is the change.
    size_t i = 0;
    if (gh) {
      while (i < bh.entries.size() && i < gh->entries.size() &&
             bh.entries[i].via_import == gh->entries[i].via_import &&
             obj_kind(bh.entries[i].obj) == obj_kind(gh->entries[i].obj) &&
             bh.entries[i].obj.is_proxy() == gh->entries[i].obj.is_proxy() &&
             bh.entries[i].relation == gh->entries[i].relation)
        ++i;
    }
    const std::string k = "sys.modules['" + key + "']";
    if (i < bh.entries.size()) {
      const Entry& e = bh.entries[i];
      f.severity = Severity::Error;
      f.where = e.stack;
      if (f.where.empty() && !e.set_by.empty()) f.where.push_back(e.set_by);
      f.test = e.test;
      if (i > 0) {
        const Entry& old = bh.entries[i - 1];
        f.summary = k + " replaced: " + describe(old.obj, old.origin) + " -> " +
                    describe(e.obj, e.origin) +
                    (e.relation != "new object" ? " (" + e.relation + ")" : std::string()) +
                    (e.via_import ? " by the import system" : " by assignment");
      } else {
        f.summary = k + " holds " + describe(e.obj, e.origin) +
                    (e.via_import ? " (from the import system)" : " (by assignment)") +
                    " instead of " +
                    (gh && !gh->entries.empty() ? describe(gh->entries[0].obj, gh->entries[0].origin)
                                                : std::string("nothing"));
      }
      if (!e.set_by.empty()) f.summary += " at " + fmt_loc(e.set_by);
    } else if (gh && i < gh->entries.size()) {
      const Entry& e = gh->entries[i];
      f.severity = Severity::Warning;
      f.summary = k + ": the good run then had " + describe(e.obj, e.origin) +
                  (e.via_import ? " from the import system" : " by assignment") +
                  "; the bad run did not";
      if (!e.set_by.empty()) f.where.push_back(e.set_by);
    } else {
      // Same entries, different relation/removal details.
      f.severity = Severity::Warning;
      f.summary = k + ": what sat under the name differs (" + bh.sig + ")";
    }
    add(std::move(f));
  }

  void proxy_finding(const std::string& key, const KeyHistory& bh, const KeyHistory* gh,
                     const ProcFacts& pf, const std::string& role) {
    for (const auto& e : bh.entries) {
      if (!e.obj.is_proxy()) continue;
      Finding f;
      f.kind = "proxy_in_sys_modules";
      f.severity = Severity::Error;
      f.module = key;
      f.story = key;
      f.process = role;
      f.order = first_pos(pf, key);
      f.summary = "sys.modules['" + key + "'] holds a proxy: " + describe(e.obj, e.origin) +
                  (e.via_import ? " from the import system" : " put there by assignment");
      if (!e.set_by.empty()) f.summary += " at " + fmt_loc(e.set_by);
      f.good = gh ? history_text(*gh) : "nothing under this key";
      f.bad = history_text(bh);
      f.where = e.stack;
      if (f.where.empty() && !e.set_by.empty()) f.where.push_back(e.set_by);
      f.test = e.test;
      add(std::move(f));
      return;
    }
  }

  void compare_bindings(const Group& g, const Group& b, const std::string& role) {
    std::vector<const std::string*> sigs;
    for (const auto& kv : b.binding_sigs) sigs.push_back(&kv.first);
    std::sort(sigs.begin(), sigs.end(), [](const std::string* x, const std::string* y) { return *x < *y; });
    for (const std::string* sig : sigs) {
      if (g.binding_sigs.count(*sig)) continue;
      const auto& rep = b.binding_sigs.at(*sig).front();
      const BindingFact& bf = *rep.second;
      const model::Binding& bd = *bf.b;
      bool anomalous = bd.status != model::BindingStatus::Bound || bf.rel != "current" ||
                       bd.bound_on.is_proxy();
      if (!anomalous) continue;
      Finding f;
      bool on_proxy = bd.status == model::BindingStatus::OnProxy || bd.bound_on.is_proxy();
      f.kind = on_proxy ? "binding_on_proxy" : "binding_mismatch";
      f.severity = Severity::Error;
      f.module = bd.child_module();
      f.story = bd.parent;
      f.process = role;
      f.order = first_pos(*rep.first, bd.child_module());
      f.test = bd.test;
      std::string what = "'" + bd.attribute + "' (" + bd.child_module() + ") bound on " +
                         describe(bd.bound_on, rep.first->norm ? (*rep.first->norm)(bd.bound_on.file) : "");
      if (bf.rel == "later_replaced")
        f.summary = what + ", the object under sys.modules['" + bd.parent +
                    "'] that was later replaced by " + bf.replaced_by;
      else if (bf.rel == "stale")
        f.summary = what + ", an object no longer under sys.modules['" + bd.parent + "']";
      else if (bf.rel == "other")
        f.summary = what + ", not the object under sys.modules['" + bd.parent + "']";
      else
        f.summary = what + ": " + model::binding_status_name(bd.status);
      if (bd.status != model::BindingStatus::Bound && bf.rel != "current")
        f.summary += std::string(" (status ") + model::binding_status_name(bd.status) + ")";
      if (bf.rel == "later_replaced")
        f.brief = bd.child_module() + " was bound on the replaced object";
      else if (on_proxy)
        f.brief = bd.child_module() + " was bound on a proxy";
      else
        f.brief = bd.child_module() + " binding " + bf.rel;
      f.bad = "status " + std::string(model::binding_status_name(bd.status)) + ", bound_on " +
              bf.rel + (bd.bound_on.is_proxy() ? ", a proxy" : "");
      // Good evidence: how the same child was bound there.
      std::string gsig;
      for (const auto& kv : g.binding_sigs)
        if (kv.first.compare(0, bd.parent.size() + bd.attribute.size() + 2,
                             bd.parent + "." + bd.attribute + "|") == 0) {
          const BindingFact& gbf = *kv.second.front().second;
          gsig = "status " + std::string(model::binding_status_name(gbf.b->status)) +
                 ", bound_on " + gbf.rel + (gbf.b->bound_on.is_proxy() ? ", a proxy" : "");
          break;
        }
      f.good = gsig.empty() ? "not bound" : gsig;
      // Where: the import that bound it.
      int64_t pos = rep.first->p->import_position(bd.import_index);
      if (pos >= 0) {
        Location l = rep.first->norm->loc(rep.first->p->imports[pos].importer);
        if (!l.empty()) f.where.push_back(l);
      }
      add(std::move(f));
    }
  }

  void compare_accesses(const Group& g, const Group& b, const std::string& role) {
    std::vector<const std::string*> sigs;
    for (const auto& kv : b.access_sigs) sigs.push_back(&kv.first);
    std::sort(sigs.begin(), sigs.end(), [](const std::string* x, const std::string* y) { return *x < *y; });
    for (const std::string* sig : sigs) {
      if (g.access_sigs.count(*sig)) continue;
      const auto& all = b.access_sigs.at(*sig);
      const AccessFact& af = *all.front().second;
      const model::ProxyAccess& a = *af.a;
      if (a.ok) continue;
      Finding f;
      f.kind = "proxy_forward_failed";
      bool module_getattr = a.kind == model::ProxyAccessKind::ModuleGetattr;
      f.severity = !module_getattr ? Severity::Error
                   : g.mods_ok.count(af.story) ? Severity::Warning : Severity::Info;
      f.module = af.story;
      f.story = af.story;
      f.process = role;
      f.order = first_pos(*all.front().first, af.story);
      std::set<std::string> seen;
      for (const auto& x : all) {
        const std::string& t = x.second->a->test;
        if (!t.empty() && seen.insert(t).second) f.tests.push_back(t);
      }
      f.test = a.test.empty() && !f.tests.empty() ? f.tests[0] : a.test;
      std::string on = a.proxy.present ? describe(a.proxy, "") : "a module";
      f.summary = (a.kind == model::ProxyAccessKind::Setattr ? "setting ." : "lookup of .") +
                  a.attribute + " on " + on + " failed: " + a.outcome();
      if (a.forwarded_to.present)
        f.summary += " (forwarded to '" + (a.forwarded_to.name.empty() ? obj_kind(a.forwarded_to)
                                                                         : a.forwarded_to.name) + "')";
      if (!af.where.empty()) f.summary += " at " + fmt_loc(af.where);
      if (!f.test.empty()) f.summary += " in " + f.test;
      if (f.tests.size() > 1) f.summary += " and " + std::to_string(f.tests.size() - 1) + " more tests";
      f.brief = "." + a.attribute + " through it failed (" + a.error_type + ")" +
                (af.where.empty() ? std::string() : " at " + fmt_loc(af.where)) +
                (f.tests.empty() ? std::string()
                                 : " in " + std::to_string(f.tests.size()) + " test" +
                                       (f.tests.size() == 1 ? "" : "s"));
      f.bad = std::to_string(all.size()) + " failing lookup" + (all.size() == 1 ? "" : "s") +
              " of ." + a.attribute + ": " + a.outcome();
      // Good evidence: the same attribute looked up through a proxy there?
      std::string gev;
      for (const auto& kv : g.access_sigs) {
        const model::ProxyAccess& ga = *kv.second.front().second->a;
        if (ga.attribute == a.attribute && kv.second.front().second->story == af.story) {
          gev = "lookup of ." + ga.attribute + " on " + describe(ga.proxy, "") + ": " + ga.outcome();
          break;
        }
      }
      f.good = gev.empty() ? "no such lookup reached a proxy or module __getattr__" : gev;
      for (size_t i = 0; i < a.stack.size() && i < 4; ++i) f.where.push_back(all.front().first->norm->loc(a.stack[i]));
      add(std::move(f));
    }
  }

  void compare_failed(const Group& g, const Group& b, const std::string& role) {
    for (const auto& name : b.mod_order) {
      auto it = b.failed.find(name);
      if (it == b.failed.end()) continue;
      auto git = g.failed.find(name);
      for (const auto& x : it->second) {
        bool known = false;
        if (git != g.failed.end())
          for (const auto& y : git->second) known |= y.second->error_type == x.second->error_type;
        if (known) continue;
        const Import& im = *x.second;
        Finding f;
        f.kind = "import_failed";
        bool was_ok = g.mods_ok.count(name) > 0;
        f.severity = was_ok ? Severity::Error : Severity::Warning;
        f.module = name;
        f.story = name;
        f.process = role;
        f.order = b.pos_of(name);
        f.test = im.test;
        f.summary = "import " + name + " failed: " + im.error_text();
        f.brief = "import " + name + " failed (" + im.error_type + ")";
        Location l = x.first->norm->loc(im.importer);
        if (!l.empty()) {
          f.summary += " (imported at " + fmt_loc(l) + ")";
          f.where.push_back(l);
        }
        f.bad = im.error_text();
        f.good = was_ok ? "imported fine" : (git != g.failed.end() ? "failed with " + git->second.front().second->error_text()
                                                                   : "not imported");
        add(std::move(f));
      }
    }
  }

  void compare_duplicates(const Group& g, const Group& b, const std::string& role) {
    std::vector<const std::string*> sigs;
    for (const auto& kv : b.dup_sigs) sigs.push_back(&kv.first);
    std::sort(sigs.begin(), sigs.end(), [](const std::string* x, const std::string* y) { return *x < *y; });
    for (const std::string* sig : sigs) {
      if (g.dup_sigs.count(*sig)) continue;
      Finding f;
      f.kind = "duplicate_module";
      f.severity = Severity::Warning;
      f.module = b.dup_sigs.at(*sig).second;
      f.process = role;
      f.order = b.pos_of(f.module);
      f.summary = *sig;
      f.bad = *sig;
      f.good = "not so";
      add(std::move(f));
    }
  }

  void compare_modules(const Group& g, const Group& b, const std::string& role) {
    // Added / missing, aggregated per top-level package.
    auto aggregate = [&](const Group& from, const Group& other, const char* kind, bool in_bad) {
      std::map<std::string, std::vector<std::string>> by_top;
      std::vector<std::string> tops;
      for (const auto& name : from.mod_order) {
        if (!from.mods_ok.count(name) || other.mods_ok.count(name)) continue;
        if (other.failed.count(name)) continue;  // import_failed tells that story
        std::string t = top_level(name);
        if (!by_top.count(t)) tops.push_back(t);
        by_top[t].push_back(name);
      }
      for (const auto& t : tops) {
        const auto& names = by_top[t];
        Finding f;
        f.kind = kind;
        f.severity = Severity::Warning;
        f.module = names[0];
        for (const auto& n : names)
          if (n.size() < f.module.size()) f.module = n;
        f.process = role;
        f.order = in_bad ? b.pos_of(names[0]) : UINT64_MAX - 1;
        const auto& rep = from.mods_ok.at(names[0]);
        const Import& im = *rep.second->first_ok;
        Location l = rep.first->norm->loc(im.importer);
        if (!l.empty()) f.where.push_back(l);
        f.test = im.test;
        std::string list;
        for (size_t i = 0; i < names.size() && i < 20; ++i) list += (i ? ", " : "") + names[i];
        if (names.size() > 20) list += ", ... (" + std::to_string(names.size() - 20) + " more)";
        std::string count = names.size() == 1 ? "" : " and " + std::to_string(names.size() - 1) + " more under " + t;
        if (in_bad) {
          f.summary = "imported only in the bad run: " + names[0] + count;
          f.bad = list;
          f.good = "not imported";
        } else {
          f.summary = "imported only in the good run: " + names[0] + count;
          f.good = list;
          f.bad = "not imported";
        }
        if (!l.empty()) f.summary += " (first imported at " + fmt_loc(l) + ")";
        add(std::move(f));
      }
    };
    aggregate(b, g, "module_added", true);
    aggregate(g, b, "module_missing", false);

    // Origin, loader, timing of modules in both.
    for (const auto& name : b.mod_order) {
      auto bi = b.mods_ok.find(name);
      if (bi == b.mods_ok.end()) continue;
      auto gi = g.mods_ok.find(name);
      if (gi == g.mods_ok.end()) continue;
      const Import& bim = *bi->second.second->first_ok;
      const Import& gim = *gi->second.second->first_ok;
      PathNorm& bn = *bi->second.first->norm;
      PathNorm& gn = *gi->second.first->norm;
      std::string bo = bn(bim.origin), go = gn(gim.origin);
      if (bo != go) {
        Finding f;
        f.kind = "origin_changed";
        f.severity = Severity::Warning;
        f.module = name;
        f.process = role;
        f.order = b.pos_of(name);
        f.summary = name + " now comes from " + (bo.empty() ? "<no origin>" : bo) + " (was " +
                    (go.empty() ? "<no origin>" : go) + ")";
        f.good = go;
        f.bad = bo;
        f.test = bim.test;
        Location l = bn.loc(bim.importer);
        if (!l.empty()) f.where.push_back(l);
        add(std::move(f));
      }
      std::string bl = normalize_loader(bim.loader), gl = normalize_loader(gim.loader);
      if (bl != gl) {
        Finding f;
        f.kind = "loader_changed";
        f.severity = Severity::Warning;
        f.module = name;
        f.process = role;
        f.order = b.pos_of(name);
        f.summary = name + " loaded by " + (bl.empty() ? "<none>" : bl) + " (was " +
                    (gl.empty() ? "<none>" : gl) + ")";
        f.good = gl;
        f.bad = bl;
        f.test = bim.test;
        add(std::move(f));
      }
      uint64_t bs = b.min_self.at(name), gs = g.min_self.at(name);
      if (bs >= gs + opt_.slower_min_ns &&
          static_cast<double>(bs) >= opt_.slower_ratio * static_cast<double>(gs)) {
        Finding f;
        f.kind = "import_slower";
        f.severity = Severity::Warning;
        f.module = name;
        f.process = role;
        f.order = b.pos_of(name);
        char ratio[32];
        snprintf(ratio, sizeof ratio, "%.1fx", gs ? static_cast<double>(bs) / gs : 0.0);
        f.summary = name + " import (self time) " + fmt_ms(bs) + " vs " + fmt_ms(gs) +
                    (gs ? std::string(" (") + ratio + ")" : std::string());
        f.good = fmt_ms(gs) + " self";
        f.bad = fmt_ms(bs) + " self";
        add(std::move(f));
      }
    }
  }

  static uint64_t first_pos(const ProcFacts& pf, const std::string& name) {
    auto it = pf.mods.find(name);
    return it == pf.mods.end() ? UINT64_MAX - 2 : it->second.pos;
  }

  // First divergence of the main-thread import sequences, and an order finding.
  void compare_order(const ProcFacts& g, const ProcFacts& b, PairInfo& pair) {
    Divergence& d = pair.divergence;
    const auto& gs = g.main_seq;
    const auto& bs = b.main_seq;
    auto gname = [&](size_t i) -> const std::string& { return g.p->imports[gs[i]].name; };
    auto bname = [&](size_t i) -> const std::string& { return b.p->imports[bs[i]].name; };
    d.good_total = gs.size();
    d.bad_total = bs.size();
    size_t k = 0;
    while (k < gs.size() && k < bs.size() && gname(k) == bname(k)) ++k;
    if (k == gs.size() && k == bs.size()) return;
    d.diverges = true;
    d.good_pos = d.bad_pos = k;
    d.good_name = k < gs.size() ? gname(k) : "";
    d.bad_name = k < bs.size() ? bname(k) : "";
    size_t from = k > opt_.context ? k - opt_.context : 0;
    auto ctx = [&](const ProcFacts& f, const std::vector<uint32_t>& seq, std::vector<std::string>& out) {
      for (size_t i = from; i < seq.size() && i <= k + opt_.context; ++i) {
        const Import& im = f.p->imports[seq[i]];
        std::string s = (i == k ? "> " : "  ") + std::to_string(i) + " " + im.name;
        if (!im.ok) s += " (failed: " + im.error_text() + ")";
        out.push_back(s);
      }
    };
    ctx(g, gs, d.good_context);
    ctx(b, bs, d.bad_context);

    // Order of the modules both import: compare the filtered sequences.
    std::unordered_set<std::string> in_g, in_b;
    for (uint32_t i : gs) in_g.insert(g.p->imports[i].name);
    for (uint32_t i : bs) in_b.insert(b.p->imports[i].name);
    std::vector<const std::string*> fg, fb;
    std::unordered_set<std::string> seen;
    for (uint32_t i : gs) {
      const std::string& n = g.p->imports[i].name;
      if (in_b.count(n) && seen.insert(n).second) fg.push_back(&n);
    }
    seen.clear();
    for (uint32_t i : bs) {
      const std::string& n = b.p->imports[i].name;
      if (in_g.count(n) && seen.insert(n).second) fb.push_back(&n);
    }
    for (size_t i = 0; i < fg.size() && i < fb.size(); ++i) {
      if (*fg[i] == *fb[i]) continue;
      Finding f;
      f.kind = "import_order_changed";
      f.severity = Severity::Info;
      f.module = *fb[i];
      f.process = pair.role;
      f.order = first_pos(b, *fb[i]);
      f.summary = "import order changed: the bad run imports " + *fb[i] + " where the good run imports " +
                  *fg[i] + " (position " + std::to_string(i) + " among modules both import)";
      f.good = *fg[i];
      f.bad = *fb[i];
      add(std::move(f));
      break;
    }
  }

 private:
  const Options& opt_;
  Result& r_;
};

// Groups findings into stories and ranks them.
void rank_and_group(std::vector<Finding>& fs) {
  auto better = [](const Finding& a, const Finding& b) {
    if (a.category != b.category) return a.category < b.category;
    if (a.severity != b.severity) return a.severity > b.severity;
    if (a.order != b.order) return a.order < b.order;
    if (a.module != b.module) return a.module < b.module;
    return a.summary < b.summary;
  };
  std::stable_sort(fs.begin(), fs.end(), better);
  std::vector<Finding> out;
  std::unordered_map<std::string, size_t> primary_of;  // story -> index in out
  for (auto& f : fs) {
    if (!f.story.empty()) {
      std::string key = f.process + "\n" + f.story;
      auto it = primary_of.find(key);
      if (it != primary_of.end()) {
        out[it->second].related.push_back(std::move(f));
        continue;
      }
      primary_of[key] = out.size();
    }
    out.push_back(std::move(f));
  }
  // A story's severity is its worst part, so an error story is never ranked as a warning.
  for (auto& f : out) {
    if (f.related.empty()) continue;
    std::string tail;
    size_t bind = 0, lookups = 0, other = 0;
    for (const auto& r : f.related) {
      if (r.severity > f.severity) f.severity = r.severity;
      if (r.kind == "binding_mismatch" || r.kind == "binding_on_proxy") ++bind;
      else if (r.kind == "proxy_forward_failed") lookups += std::max<size_t>(1, r.tests.size());
      else if (r.brief.empty() && r.kind != "proxy_in_sys_modules") ++other;
      if (f.test.empty() && !r.test.empty()) f.test = r.test;
    }
    for (const auto& r : f.related)
      if (!r.brief.empty()) tail += "; " + r.brief;
    (void)bind;
    (void)lookups;
    f.summary += tail;
  }
  fs = std::move(out);
}

}  // namespace

std::string role_of(const Process& p) {
  std::string w = worker_of(p);
  return group_of(p) + (w.empty() ? "" : " [xdist " + w + "]");
}

Result diff_runs(const std::vector<Process>& good, const std::vector<Process>& bad,
                 const Options& opts) {
  Result r;
  r.options = opts;
  std::vector<ProcFacts> gf(good.size()), bf(bad.size());
  auto facts = [](const std::vector<Process>& ps, std::vector<ProcFacts>& fs, RunSummary& sum) {
    for (size_t i = 0; i < ps.size(); ++i) {
      fs[i].p = &ps[i];
      fs[i].index = static_cast<int>(i);
      build_facts(fs[i]);
      sum.processes.push_back({ps[i].pid, fs[i].role, ps[i].argv, ps[i].imports.size(), ps[i].python_version});
      sum.imports += ps[i].imports.size();
      if (std::find(sum.paths.begin(), sum.paths.end(), ps[i].source_file) == sum.paths.end())
        sum.paths.push_back(ps[i].source_file);
    }
  };
  facts(good, gf, r.good);
  facts(bad, bf, r.bad);

  auto make_groups = [](std::vector<ProcFacts>& fs) {
    std::vector<Group> groups;
    std::unordered_map<std::string, size_t> idx;
    for (auto& f : fs) {
      auto it = idx.find(f.group);
      if (it == idx.end()) {
        idx[f.group] = groups.size();
        groups.emplace_back();
        groups.back().key = f.group;
        it = idx.find(f.group);
      }
      groups[it->second].procs.push_back(&f);
    }
    for (auto& g : groups) {
      std::stable_sort(g.procs.begin(), g.procs.end(), [](const ProcFacts* a, const ProcFacts* b) {
        if (a->worker != b->worker) return a->worker < b->worker;
        return a->p->start_time_unix_ns < b->p->start_time_unix_ns;
      });
      g.build();
    }
    return groups;
  };
  std::vector<Group> gg = make_groups(gf), bg = make_groups(bf);

  // Pair groups: by key, then leftovers by program, then the last one of each side.
  std::vector<int> match_of_bad(bg.size(), -1);
  std::vector<bool> good_used(gg.size(), false);
  for (size_t i = 0; i < bg.size(); ++i)
    for (size_t j = 0; j < gg.size(); ++j)
      if (!good_used[j] && gg[j].key == bg[i].key) {
        match_of_bad[i] = static_cast<int>(j);
        good_used[j] = true;
        break;
      }
  auto program = [](const Group& g) { return g.key.substr(0, g.key.find(' ')); };
  auto script = [](const Group& g) {
    const auto& argv = g.procs.front()->p->argv;
    for (size_t i = 1; i < argv.size(); ++i)
      if (!argv[i].empty() && argv[i][0] != '-') return basename_of(argv[i]);
    return std::string();
  };
  for (int pass = 0; pass < 2; ++pass)
    for (size_t i = 0; i < bg.size(); ++i) {
      if (match_of_bad[i] >= 0) continue;
      for (size_t j = 0; j < gg.size(); ++j)
        if (!good_used[j] && program(gg[j]) == program(bg[i]) &&
            (pass == 1 || script(gg[j]) == script(bg[i]))) {
          match_of_bad[i] = static_cast<int>(j);
          good_used[j] = true;
          break;
        }
    }

  Engine eng(opts, r);
  for (size_t i = 0; i < bg.size(); ++i) {
    if (match_of_bad[i] < 0) {
      Finding f;
      f.kind = "process_added";
      f.severity = Severity::Warning;
      f.module = "";
      f.process = bg[i].key;
      f.summary = "process only in the bad run: " + bg[i].key;
      f.bad = std::to_string(bg[i].procs.size()) + " process(es)";
      f.good = "none";
      eng.add(std::move(f));
      for (const ProcFacts* p : bg[i].procs) r.pairs.push_back({p->role, -1, p->index, {}});
      continue;
    }
    const Group& g = gg[match_of_bad[i]];
    eng.compare(g, bg[i]);
    // Pair processes: by worker id, then in order.
    std::vector<bool> used(g.procs.size(), false);
    for (const ProcFacts* bp : bg[i].procs) {
      int found = -1;
      for (size_t j = 0; j < g.procs.size() && found < 0; ++j)
        if (!used[j] && g.procs[j]->worker == bp->worker) found = static_cast<int>(j);
      for (size_t j = 0; j < g.procs.size() && found < 0; ++j)
        if (!used[j]) found = static_cast<int>(j);
      PairInfo pi;
      pi.role = bp->role;
      pi.bad = bp->index;
      if (found >= 0) {
        used[found] = true;
        pi.good = g.procs[found]->index;
        eng.compare_order(*g.procs[found], *bp, pi);
      }
      r.pairs.push_back(std::move(pi));
    }
    for (size_t j = 0; j < g.procs.size(); ++j)
      if (!used[j]) r.pairs.push_back({g.procs[j]->role, g.procs[j]->index, -1, {}});
  }
  for (size_t j = 0; j < gg.size(); ++j) {
    if (good_used[j]) continue;
    Finding f;
    f.kind = "process_missing";
    f.severity = Severity::Warning;
    f.process = gg[j].key;
    f.summary = "process only in the good run: " + gg[j].key;
    f.good = std::to_string(gg[j].procs.size()) + " process(es)";
    f.bad = "none";
    eng.add(std::move(f));
    for (const ProcFacts* p : gg[j].procs) r.pairs.push_back({p->role, p->index, -1, {}});
  }

  rank_and_group(r.findings);
  return r;
}

}  // namespace diff
}  // namespace imptrace
