// The diff engine: per-process facts, grouped by role, compared structurally; findings
// ranked and grouped into stories. See diff.h for the rules. Everything here is linear in
// the size of the traces (hash maps keyed by module name), apart from sorting.
#include "diff.h"
#include "import_time.h"

#include "prefault.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>

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

// The fields every finding starts with; the rest (summary, evidence, where) is per kind.
Finding new_finding(const char* kind, Severity severity, std::string module, const std::string& process,
                    uint64_t order) {
  Finding f;
  f.kind = kind;
  f.severity = severity;
  f.module = std::move(module);
  f.process = process;
  f.order = order;
  return f;
}

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
    for (std::string r : roots_) {
      while (r.size() > 1 && r.back() == '/') r.pop_back();
      if (r.size() > 1 && r[0] == '/') trimmed_.push_back(r);
    }
  }
  const std::string& operator()(const std::string& path) {
    auto it = cache_.find(path);
    if (it != cache_.end()) return it->second;
    return cache_.emplace(path, compute(path)).first->second;
  }
  // The relativized path as a view into `path` (the last-components fallback without its
  // "..." marker): compares like operator() without allocating.
  std::string_view view(const std::string& path) const {
    std::string_view v(path);
    if (path.empty() || path[0] != '/') return v;
    size_t best = 0;
    for (const auto& r : trimmed_)
      if (r.size() > best && path.size() > r.size() + 1 && path.compare(0, r.size(), r) == 0 &&
          path[r.size()] == '/')
        best = r.size() + 1;
    if (best) return v.substr(best);
    if (!cwd_.empty() && cwd_ != "/" && path.size() > cwd_.size() + 1 &&
        path.compare(0, cwd_.size(), cwd_) == 0 && path[cwd_.size()] == '/')
      return v.substr(cwd_.size() + 1);
    size_t cut = path.size();
    for (int i = 0; i < 3 && cut != std::string::npos && cut > 0; ++i) cut = path.rfind('/', cut - 1);
    if (cut == std::string::npos || cut == 0) return v;
    return v.substr(cut);
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
  std::vector<std::string> roots_, trimmed_;
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


std::string obj_kind(const ObjectRef& o) {
  if (!o.present) return "nothing";
  std::string s = o.is_plain_module() ? std::string("module") : (o.type.empty() ? "object" : o.type.str());
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
// Built for 100,000s of imports: keys are string_views into the (outliving) model, entries
// hold pointers into it, signatures are 64-bit hashes; text is made only for findings.
using SV = std::string_view;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
uint64_t hs(SV s) { return std::hash<SV>()(s); }

struct NameHash {
  uint64_t operator()(SV s) const { return hs(s); }
};
// Key equality. Names of one process are mostly the same interned model::Str (an import's
// name, the sys.modules key it went in under, a binding's parent): same characters, so
// equal without comparing them.
inline bool same_key(SV a, SV b) { return (a.data() == b.data() && a.size() == b.size()) || a == b; }
inline bool same_key(uint64_t a, uint64_t b) { return a == b; }
// Object ids are addresses (aligned, close together): spread them over the whole word.
struct IdHash {
  uint64_t operator()(uint64_t x) const {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }
};

// A map whose entries stay in first-insertion order, for the per-process tables of
// 100,000s of names: keys and values live in two vectors (iteration is a walk over an
// array, and its order is deterministic), found through an open-addressing index of
// (hash, position) slots. No node per entry, no pointer chasing on lookup. Values move
// when the table grows: hold positions, not references, across an emplace.
template <class K, class V, class Hash>
class OrderedTable {
 public:
  void reserve(size_t n) {
    keys_.reserve(n);
    values_.reserve(n);
    prefault_capacity(keys_);
    prefault_capacity(values_);
    if (n * 2 > slots_.size()) rehash(n * 2);
  }
  // The value under `key` and whether it was just inserted (value-initialised).
  std::pair<V*, bool> emplace(const K& key) {
    if ((keys_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
    uint64_t h = Hash()(key);
    size_t i = h & (slots_.size() - 1);
    for (;; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (!s.pos) break;
      if (s.tag == static_cast<uint32_t>(h >> 32) && same_key(keys_[s.pos - 1], key)) return {&values_[s.pos - 1], false};
    }
    slots_[i] = {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(keys_.size() + 1)};
    keys_.push_back(key);
    values_.emplace_back();
    return {&values_.back(), true};
  }
  const V* find(const K& key) const {
    if (slots_.empty()) return nullptr;
    uint64_t h = Hash()(key);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (!s.pos) return nullptr;
      if (s.tag == static_cast<uint32_t>(h >> 32) && same_key(keys_[s.pos - 1], key)) return &values_[s.pos - 1];
    }
  }
  V* find(const K& key) { return const_cast<V*>(static_cast<const OrderedTable*>(this)->find(key)); }

  size_t size() const { return keys_.size(); }
  const K& key(size_t i) const { return keys_[i]; }
  const std::vector<K>& keys() const { return keys_; }
  V& value(size_t i) { return values_[i]; }
  const V& value(size_t i) const { return values_[i]; }
  std::vector<V>& values() { return values_; }
  const std::vector<V>& values() const { return values_; }

 private:
  struct Slot {
    uint32_t tag;  // high half of the key's hash
    uint32_t pos;  // position in keys_ + 1; 0 = empty
  };
  void rehash(size_t n) {
    size_t cap = 16;
    while (cap < n) cap *= 2;
    prefaulted_assign(slots_, cap, Slot{0, 0});
    for (size_t k = 0; k < keys_.size(); ++k) {
      uint64_t h = Hash()(keys_[k]);
      size_t i = h & (cap - 1);
      while (slots_[i].pos) i = (i + 1) & (cap - 1);
      slots_[i] = {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(k + 1)};
    }
  }
  std::vector<Slot> slots_;
  std::vector<K> keys_;
  std::vector<V> values_;
};
template <class V> using NameTable = OrderedTable<SV, V, NameHash>;

enum RelKind : uint8_t { kNew = 0, kSameAsKey = 1, kSameAsEntry = 2 };

struct Lean {
  const ObjectRef* obj = nullptr;
  const model::Str* origin_raw = nullptr;   // obj->file or the import's origin
  const Location* set_by_raw = nullptr;
  const std::vector<Location>* stack_raw = nullptr;
  const model::Str* test = nullptr;
  const Location* removed_at_raw = nullptr;
  uint64_t time_ns = 0;
  SV rel_key;
  uint32_t rel_entry = 0;
  uint8_t rel = kNew;
  bool via_import = true;
  bool before_trace = false;
  bool removed = false;
};

// The same, materialised for a finding's text.
struct Entry {
  ObjectRef obj;
  bool via_import = true;
  bool before_trace = false;
  std::string origin;               // relativized file/origin
  std::string relation;             // "new object", "same object as under 'x'", ...
  Location set_by;                  // relativized
  std::vector<Location> stack;      // relativized, a few frames
  std::string test;
  bool removed = false;
};

// A key's entries. Nearly every key holds one object for the whole run: the first entry
// sits inline, so 100,000s of keys cost no allocation each; later ones go to `rest_`.
class LeanList {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  Lean& operator[](size_t i) { return i ? rest_[i - 1] : first_; }
  const Lean& operator[](size_t i) const { return i ? rest_[i - 1] : first_; }
  Lean& back() { return (*this)[n_ - 1]; }
  void push_back(const Lean& e) {
    if (n_) rest_.push_back(e);
    else first_ = e;
    ++n_;
  }
  template <class L, class T> struct Iter {
    L* list;
    size_t i;
    T& operator*() const { return (*list)[i]; }
    Iter& operator++() { ++i; return *this; }
    bool operator!=(const Iter& o) const { return i != o.i; }
  };
  Iter<LeanList, Lean> begin() { return {this, 0}; }
  Iter<LeanList, Lean> end() { return {this, n_}; }
  Iter<const LeanList, const Lean> begin() const { return {this, 0}; }
  Iter<const LeanList, const Lean> end() const { return {this, n_}; }

 private:
  Lean first_;
  std::vector<Lean> rest_;
  size_t n_ = 0;
};

struct KeyHistory {
  LeanList entries;
  int64_t current = -1;
  uint64_t sig = 0;
  bool has_proxy = false;
};

struct ProcFacts;

// One module name's facts in a process; the same struct is a group's union (a group of one
// process uses its process's table as is).
struct ModFacts {
  bool ok = false;
  const Import* first_ok = nullptr;
  uint64_t self_ns = 0;
  uint64_t pos = 0;  // position of the first import in the process (group: first process)
  // Failed imports, one per error type (first seen), with the process they happened in.
  std::vector<std::pair<const ProcFacts*, const Import*>> failed;
  // Union view: the first process where it imported fine, and the least self time.
  const ProcFacts* okp = nullptr;
  const ModFacts* okm = nullptr;
  uint64_t min_self = UINT64_MAX;
};

enum BindRel : uint8_t { kCurrent, kLaterReplaced, kStale, kOther, kUnknown };
const char* bind_rel_name(uint8_t r) {
  switch (r) {
    case kCurrent: return "current";
    case kLaterReplaced: return "later_replaced";
    case kStale: return "stale";
    case kOther: return "other";
  }
  return "unknown";
}

struct BindingFact {
  const model::Binding* b = nullptr;
  uint8_t rel = kUnknown;
  // Structure (parent, attribute, status, rel, proxy); only anomalous bindings have one (0
  // otherwise): they are the only ones compare_bindings looks for in the other run, and
  // a normal binding can never have an anomalous one's signature.
  uint64_t sig = 0;
  int64_t replaced_by = -1;  // entry of the parent key that replaced bound_on
  // Worth a finding by itself: not bound, not on what sys.modules held, or on a proxy.
  bool anomalous() const {
    return b->status != model::BindingStatus::Bound || rel != kCurrent || b->bound_on.is_proxy();
  }
};

struct AccessFact {
  const model::ProxyAccess* a = nullptr;
  uint64_t sig = 0;
  SV story;  // sys.modules key the proxy sat under
};

struct ProcFacts {
  const Process* p = nullptr;
  int index = 0;
  std::string group, worker, role;
  std::unique_ptr<PathNorm> norm;
  NameTable<KeyHistory> keys;                     // in order of first appearance
  NameTable<ModFacts> mods;                       // in first-import order
  std::vector<uint32_t> main_seq;                 // positions in imports, main thread
  std::vector<uint32_t> mod_of;                   // per import: its position in `mods`
  OrderedTable<uint64_t, SV, IdHash> first_key_of;
  std::vector<BindingFact> bindings;
  std::vector<AccessFact> accesses;
  std::vector<std::pair<std::string, std::string>> duplicates;  // (sig, module)
};

// importlib's own frames say nothing about who did it.
bool is_bootstrap(const Location& l) { return l.file.compare(0, 18, "<frozen importlib.") == 0; }

std::string relation_text(const Lean& e) {
  if (e.rel == kSameAsKey) return "same object as under '" + std::string(e.rel_key) + "'";
  if (e.rel == kSameAsEntry) return "same as entry #" + std::to_string(e.rel_entry + 1);
  return "new object";
}

std::string origin_text(PathNorm& norm, const Lean& e) {
  if (!e.obj->file.empty()) return norm(e.obj->file);
  return e.origin_raw ? norm(*e.origin_raw) : std::string();
}

Entry materialize(const ProcFacts& f, const Lean& l) {
  PathNorm& norm = *f.norm;
  Entry e;
  e.obj = *l.obj;
  e.via_import = l.via_import;
  e.before_trace = l.before_trace;
  e.origin = origin_text(norm, l);
  e.relation = relation_text(l);
  if (l.stack_raw)
    for (size_t i = 0; i < l.stack_raw->size() && e.stack.size() < 4; ++i)
      if (!is_bootstrap((*l.stack_raw)[i])) e.stack.push_back(norm.loc((*l.stack_raw)[i]));
  if (!e.stack.empty()) e.set_by = e.stack[0];
  else if (l.set_by_raw) e.set_by = norm.loc(*l.set_by_raw);
  if (l.test) e.test = *l.test;
  e.removed = l.removed;
  return e;
}

std::vector<Entry> materialize(const ProcFacts& f, const KeyHistory& h) {
  std::vector<Entry> out;
  for (const auto& l : h.entries) out.push_back(materialize(f, l));
  return out;
}

void build_history(ProcFacts& f) {
  const Process& p = *f.p;
  PathNorm& norm = *f.norm;
  struct Ev {
    uint64_t t;
    uint32_t i;
    uint8_t order;
  };
  std::vector<Ev> evs;
  evs.reserve(p.modules_changes.size() + p.imports.size());
  prefault_capacity(evs);
  for (size_t i = 0; i < p.modules_changes.size(); ++i)
    evs.push_back({p.modules_changes[i].time_ns, static_cast<uint32_t>(i), 0});
  for (size_t i = 0; i < p.imports.size(); ++i)
    if (p.imports[i].ok && p.imports[i].object.present)
      evs.push_back({p.imports[i].end_ns, static_cast<uint32_t>(i), 1});
  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.t != b.t ? a.t < b.t : a.order < b.order;
  });
  f.keys.reserve(p.imports.size() + 16);
  f.first_key_of.reserve(p.imports.size() + 16);

  auto history = [&](SV key) -> KeyHistory& { return *f.keys.emplace(key).first; };
  auto push = [&](KeyHistory& h, SV key, const ObjectRef& obj, bool via_import,
                  uint64_t t) -> Lean& {
    Lean e;
    e.obj = &obj;
    e.via_import = via_import;
    e.time_ns = t;
    auto fk = f.first_key_of.emplace(obj.id);
    if (fk.second) {
      *fk.first = key;
    } else {
      if (*fk.first != key) {
        e.rel = kSameAsKey;
        e.rel_key = *fk.first;
      } else {
        e.rel = kSameAsEntry;
        for (size_t i = 0; i < h.entries.size(); ++i)
          if (h.entries[i].obj->id == obj.id) {
            e.rel_entry = static_cast<uint32_t>(i);
            break;
          }
      }
    }
    if (obj.is_proxy()) h.has_proxy = true;
    h.entries.push_back(e);
    h.current = static_cast<int64_t>(h.entries.size() - 1);
    return h.entries.back();
  };

  for (const auto& ev : evs) {
    if (ev.order == 0) {
      const auto& c = p.modules_changes[ev.i];
      if (c.op == model::ChangeOp::Clear) {
        for (auto& h : f.keys.values())
          if (h.current >= 0) {
            h.entries[h.current].removed = true;
            h.current = -1;
          }
        continue;
      }
      KeyHistory& h = history(c.key);
      if (c.old_object.present &&
          (h.current < 0 || h.entries[h.current].obj->id != c.old_object.id)) {
        Lean& e = push(h, c.key, c.old_object, true, 0);
        e.before_trace = true;
      }
      if (c.op == model::ChangeOp::Set && c.new_object.present) {
        if (h.current >= 0 && h.entries[h.current].obj->id == c.new_object.id) continue;
        Lean& e = push(h, c.key, c.new_object, c.by_import_system, c.time_ns);
        e.stack_raw = &c.stack;
        e.test = &c.test;
      } else if (c.op == model::ChangeOp::Delete && h.current >= 0) {
        h.entries[h.current].removed = true;
        if (!c.stack.empty()) h.entries[h.current].removed_at_raw = &c.stack[0];
        h.current = -1;
      }
    } else {
      const Import& im = p.imports[ev.i];
      KeyHistory& h = history(im.name);
      Lean* e;
      if (h.current < 0 || h.entries[h.current].obj->id != im.object.id) {
        // Import-system insertions the tracer did not record as changes: the module sat
        // there from the import's start (its children get bound before it returns).
        e = &push(h, im.name, im.object, true, im.begin_ns);
        e->test = &im.test;
      } else {
        e = &h.entries[h.current];
      }
      if (!e->origin_raw) e->origin_raw = im.origin.empty() ? &im.file : &im.origin;
      if (!e->set_by_raw) e->set_by_raw = &im.importer;
    }
  }

  // Signatures: structure only. Import-system entries do not carry their origin (that is
  // origin_changed's business); assigned objects do.
  static const uint64_t kModuleHash = hs("module");
  for (auto& h : f.keys.values()) {
    uint64_t sig = 0x51;
    for (const auto& e : h.entries) {
      sig = mix(sig, e.before_trace ? 3 : e.via_import ? 1 : 2);
      sig = mix(sig, e.obj->is_plain_module() ? kModuleHash : hs(e.obj->type));
      sig = mix(sig, e.obj->is_proxy() ? 7 : 5);
      if (!e.via_import) sig = mix(sig, hs(origin_text(norm, e)));
      sig = mix(sig, e.rel);
      if (e.rel == kSameAsKey) sig = mix(sig, hs(e.rel_key));
      if (e.rel == kSameAsEntry) sig = mix(sig, e.rel_entry);
      sig = mix(sig, e.removed ? 11 : 13);
    }
    h.sig = sig;
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
  std::vector<uint64_t> child_ns;
  prefaulted_assign(child_ns, p.imports.size(), uint64_t(0));
  for (const auto& im : p.imports)
    if (im.parent_pos >= 0 && static_cast<size_t>(im.parent_pos) < child_ns.size())
      child_ns[im.parent_pos] += im.duration_ns();
  uint64_t main_thread = p.imports.empty() ? 0 : p.imports[0].thread;
  f.mods.reserve(p.imports.size());
  prefaulted_assign(f.mod_of, p.imports.size(), 0u);
  f.main_seq.reserve(p.imports.size());
  prefault_capacity(f.main_seq);
  for (size_t i = 0; i < p.imports.size(); ++i) {
    const Import& im = p.imports[i];
    if (im.thread == main_thread) f.main_seq.push_back(static_cast<uint32_t>(i));
    auto ins = f.mods.emplace(im.name);
    ModFacts& m = *ins.first;
    if (ins.second) m.pos = i;
    f.mod_of[i] = static_cast<uint32_t>(ins.first - f.mods.values().data());
    if (im.ok) {
      if (!m.ok) {
        m.ok = true;
        m.first_ok = &im;
        uint64_t d = im.duration_ns();
        m.self_ns = d > child_ns[i] ? d - child_ns[i] : 0;
      }
    } else {
      bool seen = false;
      for (const auto& x : m.failed) seen |= x.second->error_type == im.error_type;
      if (!seen) m.failed.emplace_back(&f, &im);
    }
  }
  for (auto& m : f.mods.values()) {
    if (!m.ok) continue;
    m.okp = &f;
    m.okm = &m;
    m.min_self = m.self_ns;
  }

  build_history(f);

  // Bindings.
  f.bindings.reserve(p.bindings.size());
  for (const auto& b : p.bindings) {
    BindingFact bf;
    bf.b = &b;
    const KeyHistory* parent = f.keys.find(b.parent);
    if (!b.bound_on.present || !parent || parent->entries.empty()) {
      bf.rel = kUnknown;
    } else {
      const auto& es = parent->entries;
      int64_t at = -1;
      for (size_t i = 0; i < es.size(); ++i)
        if (es[i].time_ns <= b.time_ns) at = static_cast<int64_t>(i);
      const Lean* last = parent->current >= 0 ? &es[parent->current] : nullptr;
      if (at >= 0 && es[at].obj->id == b.bound_on.id) {
        if (last && last->obj->id == b.bound_on.id) {
          bf.rel = kCurrent;
        } else {
          bf.rel = kLaterReplaced;
          for (size_t i = at + 1; i < es.size(); ++i)
            if (es[i].obj->id != b.bound_on.id) {
              bf.replaced_by = static_cast<int64_t>(i);
              break;
            }
        }
      } else {
        bf.rel = kOther;
        for (const auto& e : es)
          if (e.obj->id == b.bound_on.id) bf.rel = kStale;
      }
    }
    if (bf.anomalous()) {
      uint64_t sig = mix(hs(b.parent), hs(b.attribute));
      sig = mix(sig, static_cast<uint64_t>(b.status));
      sig = mix(sig, bf.rel);
      sig = mix(sig, b.bound_on.is_proxy() ? 7 : 5);
      bf.sig = sig;
    }
    f.bindings.push_back(bf);
  }

  // Proxy accesses.
  for (const auto& a : p.proxy_accesses) {
    AccessFact af;
    af.a = &a;
    const SV* fk = a.proxy.present ? f.first_key_of.find(a.proxy.id) : nullptr;
    if (fk) af.story = *fk;
    else if (!a.proxy.name.empty()) af.story = a.proxy.name;
    else af.story = a.forwarded_to.name;
    uint64_t sig = mix(hs(af.story), hs(a.proxy.type));
    sig = mix(sig, static_cast<uint64_t>(a.kind));
    sig = mix(sig, hs(a.attribute));
    sig = mix(sig, a.ok ? 1 : hs(a.error_type));
    sig = mix(sig, hs(a.forwarded_to.name));
    if (!a.stack.empty()) {
      sig = mix(sig, hs(norm(a.stack[0].file)));
      sig = mix(sig, hs(a.stack[0].function));
    }
    af.sig = sig;
    f.accesses.push_back(af);
  }

  // One file, two module objects; one object under two names.
  // Imports of module objects grouped by file (each group in import order, chained through
  // `next_use`); only files imported more than once are then sorted, by name.
  struct FileUses {
    uint32_t first = 0, last = 0, count = 0;
  };
  NameTable<FileUses> by_file;
  by_file.reserve(p.imports.size());
  std::vector<uint32_t> next_use;
  prefaulted_assign(next_use, p.imports.size(), uint32_t(UINT32_MAX));
  for (size_t i = 0; i < p.imports.size(); ++i) {
    const Import& im = p.imports[i];
    if (!im.ok || !im.object.present || !im.object.is_plain_module()) continue;
    const std::string& file = !im.object.file.empty() ? im.object.file : im.file;
    if (file.empty() || file[0] != '/') continue;
    FileUses& u = *by_file.emplace(file).first;
    if (u.count++) next_use[u.last] = static_cast<uint32_t>(i);
    else u.first = static_cast<uint32_t>(i);
    u.last = static_cast<uint32_t>(i);
  }
  std::vector<uint32_t> shared;  // positions in by_file
  for (size_t k = 0; k < by_file.size(); ++k)
    if (by_file.value(k).count > 1) shared.push_back(static_cast<uint32_t>(k));
  std::sort(shared.begin(), shared.end(), [&](uint32_t a, uint32_t b) { return by_file.key(a) < by_file.key(b); });
  std::vector<std::pair<uint64_t, SV>> v;
  for (uint32_t k : shared) {
    v.clear();
    for (uint32_t i = by_file.value(k).first; i != UINT32_MAX; i = next_use[i]) {
      const Import& im = p.imports[i];
      bool seen = false;
      for (const auto& x : v) seen |= x.first == im.object.id;
      if (!seen) v.emplace_back(im.object.id, SV(im.name));
    }
    if (v.size() < 2) continue;
    std::vector<std::string> names;
    for (const auto& x : v) names.emplace_back(x.second);
    std::sort(names.begin(), names.end());
    std::string sig = "file " + norm(std::string(by_file.key(k))) + " executed as " +
                      std::to_string(names.size()) + " module objects:";
    for (const auto& n : names) sig += " " + n;
    f.duplicates.emplace_back(sig, names[0]);
  }
  for (size_t k = 0; k < f.keys.size(); ++k) {
    SV key = f.keys.key(k);
    for (const auto& e : f.keys.value(k).entries) {
      if (!e.obj->is_plain_module() || e.rel != kSameAsKey) continue;
      f.duplicates.emplace_back("module object under two names: " + std::string(key) + " " +
                                    relation_text(e),
                                std::string(key));
    }
  }
}

// ---- groups ------------------------------------------------------------------------------
struct Group {
  std::string key;
  std::vector<ProcFacts*> procs;
  // Union over the group, each with a representative. One map entry per module name.
  using KeyRep = std::pair<const ProcFacts*, const KeyHistory*>;
  struct GKey {
    KeyRep first{nullptr, nullptr};
    std::vector<KeyRep> more;  // other signatures, rare (xdist workers, subprocesses)
    template <class Fn> void each(Fn&& fn) const {
      fn(first);
      for (const auto& x : more) fn(x);
    }
    bool has(uint64_t sig) const {
      bool found = first.second->sig == sig;
      for (const auto& x : more) found |= x.second->sig == sig;
      return found;
    }
  };
  using GMod = ModFacts;
  // A group of one process reads its process's tables; larger groups build their union.
  const ProcFacts* solo = nullptr;
  NameTable<GKey> own_keys;
  NameTable<GMod> own_mods;
  const NameTable<GMod>* mods = nullptr;  // set by build(); first process's order then others'
  std::unordered_map<uint64_t, std::vector<std::pair<const ProcFacts*, const AccessFact*>>> access_sigs;
  std::unordered_map<uint64_t, std::pair<const ProcFacts*, const AccessFact*>> access_by_attr;
  std::unordered_map<std::string, std::pair<const ProcFacts*, std::string>> dup_sigs;

  static uint64_t child_key(SV parent, SV attr) { return mix(hs(parent), hs(attr)); }

  // The union's entry for a sys.modules key, or nullptr; `scratch` holds a one-process
  // group's view.
  const GKey* find_key(SV name, GKey& scratch) const {
    if (solo) {
      const KeyHistory* h = solo->keys.find(name);
      if (!h) return nullptr;
      scratch.first = {solo, h};
      return &scratch;
    }
    return own_keys.find(name);
  }
  template <class Fn> void each_key(Fn&& fn) const {
    if (solo) {
      GKey k;
      for (size_t i = 0; i < solo->keys.size(); ++i) {
        k.first = {solo, &solo->keys.value(i)};
        fn(solo->keys.key(i), k);
      }
      return;
    }
    for (size_t i = 0; i < own_keys.size(); ++i) fn(own_keys.key(i), own_keys.value(i));
  }

  void build() {
    mods = &own_mods;
    if (procs.size() == 1) {
      solo = procs.front();
      mods = &solo->mods;
    }
    for (const ProcFacts* f : procs) {
      if (!solo) {
        own_keys.reserve(own_keys.size() + f->keys.size());
        own_mods.reserve(own_mods.size() + f->mods.size());
        for (size_t i = 0; i < f->keys.size(); ++i) {
          const KeyHistory& h = f->keys.value(i);
          GKey& gk = *own_keys.emplace(f->keys.key(i)).first;
          if (!gk.first.first) gk.first = {f, &h};
          else if (!gk.has(h.sig)) gk.more.emplace_back(f, &h);
        }
        for (size_t i = 0; i < f->mods.size(); ++i) {
          const ModFacts& m = f->mods.value(i);
          auto ins = own_mods.emplace(f->mods.key(i));
          GMod& gm = *ins.first;
          if (ins.second) gm.pos = m.pos;
          if (m.ok) {
            if (!gm.okm) {
              gm.okp = f;
              gm.okm = &m;
            }
            gm.min_self = std::min(gm.min_self, m.self_ns);
          }
          for (const auto& x : m.failed) {
            bool seen = false;
            for (const auto& y : gm.failed) seen |= y.second->error_type == x.second->error_type;
            if (!seen) gm.failed.push_back(x);
          }
        }
      }
      for (const auto& af : f->accesses) {
        access_sigs[af.sig].emplace_back(f, &af);
        access_by_attr.emplace(child_key(af.story, af.a->attribute), std::make_pair(f, &af));
      }
      for (const auto& d : f->duplicates) dup_sigs.emplace(d.first, std::make_pair(f, d.second));
    }
  }
  const GMod* mod(SV name) const { return mods->find(name); }
  bool ok(SV name) const {
    const GMod* m = mod(name);
    return m && m->okm;
  }
  uint64_t pos_of(SV name) const {
    const GMod* m = mod(name);
    return m ? m->pos : UINT64_MAX;
  }
};

std::string history_text(const std::vector<Entry>& h) {
  std::string s;
  size_t n = 0;
  for (const auto& e : h) {
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
    std::vector<SV> keys;
    Group::GKey gscratch, bscratch;
    b.each_key([&](SV name, const Group::GKey& bk) {
      const Group::GKey* gk = g.find_key(name, gscratch);
      bool all_known = gk != nullptr;
      if (all_known) bk.each([&](const Group::KeyRep& bad) { all_known &= gk->has(bad.second->sig); });
      if (!all_known) keys.push_back(name);
    });
    // In the bad group's first-import order, for stable output.
    std::sort(keys.begin(), keys.end(), [&](SV x, SV y) {
      uint64_t px = b.pos_of(x), py = b.pos_of(y);
      return px != py ? px < py : x < y;
    });
    for (SV key : keys) {
      const Group::GKey* gk = g.find_key(key, gscratch);
      b.find_key(key, bscratch)->each([&](const Group::KeyRep& bad) {
        const KeyHistory& bh = *bad.second;
        const KeyHistory* gh = nullptr;
        const ProcFacts* gp = nullptr;
        if (gk) {
          if (gk->has(bh.sig)) return;
          gh = gk->first.second;
          gp = gk->first.first;
        }
        std::vector<Entry> be = materialize(*bad.first, bh);
        std::string k(key);
        if (!gh) {
          // A key the good run never had: only a proxy or a replacement is worth an
          // identity finding (plain additions are module_added).
          if (bh.has_proxy) proxy_finding(k, be, nullptr, *bad.first, role);
          else if (be.size() > 1) replaced_finding(k, be, nullptr, *bad.first, role);
          return;
        }
        std::vector<Entry> ge = materialize(*gp, *gh);
        bool proxy_new = bh.has_proxy && !gh->has_proxy;
        bool replaced = be.size() > 1 || ge.size() > 1 ||
                        (!be.empty() && !ge.empty() && be[0].via_import != ge[0].via_import);
        if (replaced) replaced_finding(k, be, &ge, *bad.first, role);
        if (proxy_new) proxy_finding(k, be, &ge, *bad.first, role);
        if (!replaced && !proxy_new) replaced_finding(k, be, &ge, *bad.first, role);
      });
    }
  }

  void replaced_finding(const std::string& key, const std::vector<Entry>& bh,
                        const std::vector<Entry>* gh, const ProcFacts& pf, const std::string& role) {
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
      while (i < bh.size() && i < gh->size() && bh[i].via_import == (*gh)[i].via_import &&
             obj_kind(bh[i].obj) == obj_kind((*gh)[i].obj) &&
             bh[i].obj.is_proxy() == (*gh)[i].obj.is_proxy() && bh[i].relation == (*gh)[i].relation)
        ++i;
    }
    const std::string k = "sys.modules['" + key + "']";
    if (i < bh.size()) {
      const Entry& e = bh[i];
      f.severity = Severity::Error;
      f.where = e.stack;
      if (f.where.empty() && !e.set_by.empty()) f.where.push_back(e.set_by);
      f.test = e.test;
      if (i > 0) {
        const Entry& old = bh[i - 1];
        f.summary = k + " replaced: " + describe(old.obj, old.origin) + " -> " +
                    describe(e.obj, e.origin) +
                    (e.relation != "new object" ? " (" + e.relation + ")" : std::string()) +
                    (e.via_import ? " by the import system" : " by assignment");
      } else {
        f.summary = k + " holds " + describe(e.obj, e.origin) +
                    (e.via_import ? " (from the import system)" : " (by assignment)") +
                    " instead of " +
                    (gh && !gh->empty() ? describe((*gh)[0].obj, (*gh)[0].origin) : std::string("nothing"));
      }
      if (!e.set_by.empty()) f.summary += " at " + fmt_loc(e.set_by);
    } else if (gh && i < gh->size()) {
      const Entry& e = (*gh)[i];
      f.severity = Severity::Warning;
      f.summary = k + ": the good run then had " + describe(e.obj, e.origin) +
                  (e.via_import ? " from the import system" : " by assignment") +
                  "; the bad run did not";
      if (!e.set_by.empty()) f.where.push_back(e.set_by);
    } else {
      // Same entries, different relation/removal details.
      f.severity = Severity::Warning;
      f.summary = k + ": what sat under the name differs";
    }
    add(std::move(f));
  }

  void proxy_finding(const std::string& key, const std::vector<Entry>& bh,
                     const std::vector<Entry>* gh, const ProcFacts& pf, const std::string& role) {
    for (const auto& e : bh) {
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

  // Bindings the good run never had and that are anomalous by themselves; children of one
  // parent bound the same wrong way are one finding.
  void compare_bindings(const Group& g, const Group& b, const std::string& role) {
    using Rep = std::pair<const ProcFacts*, const BindingFact*>;
    // The bad group's anomalous binding signatures, each with its first binding (processes
    // in group order, then record order), in that order. Normal bindings never match one,
    // so neither side needs a table of all its bindings.
    OrderedTable<uint64_t, Rep, IdHash> bad_sigs;
    for (const ProcFacts* f : b.procs)
      for (const auto& bf : f->bindings) {
        if (!bf.anomalous()) continue;
        auto ins = bad_sigs.emplace(bf.sig);
        if (ins.second) *ins.first = {f, &bf};
      }
    if (!bad_sigs.size()) return;
    std::vector<bool> in_good(bad_sigs.size(), false);
    for (const ProcFacts* f : g.procs)
      for (const auto& gbf : f->bindings)
        if (gbf.anomalous())
          if (const Rep* r = bad_sigs.find(gbf.sig)) in_good[r - bad_sigs.values().data()] = true;
    struct Agg {
      std::vector<Rep> items;
    };
    std::map<std::string, Agg> aggs;  // parent|status|rel|proxy
    for (size_t i = 0; i < bad_sigs.size(); ++i) {
      if (in_good[i]) continue;
      const Rep& rep = bad_sigs.value(i);
      const BindingFact& bf = *rep.second;
      const model::Binding& bd = *bf.b;
      std::string k = bd.parent + "|" + model::binding_status_name(bd.status) + "|" +
                      bind_rel_name(bf.rel) + (bd.bound_on.is_proxy() ? "|proxy" : "");
      aggs[k].items.push_back(rep);
    }
    // The good run's first binding of each child those findings name (procs, then record
    // order): one pass over the good group's bindings.
    std::unordered_map<uint64_t, const BindingFact*> good_of;
    for (auto& kv : aggs) {
      auto& items = kv.second.items;
      // In import order. The same import can bind in several processes (xdist workers run
      // the same imports), and one parent's children can share an import: ties go by
      // attribute name, then by process (group order: worker id, start time), then record
      // order. That fixes which binding the finding quotes and the order it lists them in.
      std::stable_sort(items.begin(), items.end(), [](const Rep& x, const Rep& y) {
        const model::Binding& bx = *x.second->b;
        const model::Binding& by = *y.second->b;
        if (bx.import_index != by.import_index) return bx.import_index < by.import_index;
        return bx.attribute.str() < by.attribute.str();
      });
      const model::Binding& bd = *items.front().second->b;
      good_of.emplace(Group::child_key(bd.parent, bd.attribute), nullptr);
    }
    if (!good_of.empty())
      for (const ProcFacts* f : g.procs)
        for (const auto& gbf : f->bindings) {
          auto it = good_of.find(Group::child_key(gbf.b->parent, gbf.b->attribute));
          if (it != good_of.end() && !it->second) it->second = &gbf;
        }
    for (auto& kv : aggs) {
      auto& items = kv.second.items;
      const ProcFacts& pf = *items.front().first;
      const BindingFact& bf = *items.front().second;
      const model::Binding& bd = *bf.b;
      Finding f;
      bool on_proxy = bd.status == model::BindingStatus::OnProxy || bd.bound_on.is_proxy();
      f.kind = on_proxy ? "binding_on_proxy" : "binding_mismatch";
      f.severity = Severity::Error;
      f.module = items.size() == 1 ? bd.child_module() : bd.parent.str();
      f.story = bd.parent;
      f.process = role;
      f.order = first_pos(pf, bd.child_module());
      f.test = bd.test;
      std::string who = items.size() == 1
                            ? "'" + bd.attribute + "' (" + bd.child_module() + ")"
                            : std::to_string(items.size()) + " children of " + bd.parent + " (" +
                                  bd.attribute + ", ...)";
      std::string what = who + " bound on " + describe(bd.bound_on, (*pf.norm)(bd.bound_on.file));
      std::string replaced_by;
      if (bf.rel == kLaterReplaced) {
        const KeyHistory* parent = pf.keys.find(bd.parent);
        if (parent && bf.replaced_by >= 0) {
          Entry e = materialize(pf, parent->entries[bf.replaced_by]);
          replaced_by = describe(e.obj, e.origin);
          if (!e.set_by.empty()) replaced_by += " at " + fmt_loc(e.set_by);
        } else {
          replaced_by = "removal from sys.modules";
        }
      }
      if (bf.rel == kLaterReplaced)
        f.summary = what + ", the object under sys.modules['" + bd.parent +
                    "'] that was later replaced by " + replaced_by;
      else if (bf.rel == kStale)
        f.summary = what + ", an object no longer under sys.modules['" + bd.parent + "']";
      else if (bf.rel == kOther)
        f.summary = what + ", not the object under sys.modules['" + bd.parent + "']";
      else
        f.summary = what + ": " + model::binding_status_name(bd.status);
      if (bd.status != model::BindingStatus::Bound && bf.rel != kCurrent)
        f.summary += std::string(" (status ") + model::binding_status_name(bd.status) + ")";
      std::string subject = items.size() == 1 ? bd.child_module() : who;
      if (bf.rel == kLaterReplaced) f.brief = subject + " bound on the replaced object";
      else if (on_proxy) f.brief = subject + " bound on a proxy";
      else f.brief = subject + " binding " + bind_rel_name(bf.rel);
      f.bad = "status " + std::string(model::binding_status_name(bd.status)) + ", bound_on " +
              bind_rel_name(bf.rel) + (bd.bound_on.is_proxy() ? ", a proxy" : "");
      if (items.size() > 1) {
        f.bad += ": ";
        for (size_t i = 0; i < items.size() && i < 20; ++i)
          f.bad += (i ? ", " : "") + items[i].second->b->attribute;
        if (items.size() > 20) f.bad += ", ... (" + std::to_string(items.size() - 20) + " more)";
      }
      const BindingFact* gbp = good_of.at(Group::child_key(bd.parent, bd.attribute));
      if (gbp) {
        const BindingFact& gbf = *gbp;
        f.good = "status " + std::string(model::binding_status_name(gbf.b->status)) +
                 ", bound_on " + bind_rel_name(gbf.rel) + (gbf.b->bound_on.is_proxy() ? ", a proxy" : "");
      } else {
        f.good = "not bound";
      }
      int64_t pos = pf.p->import_position(bd.import_index);
      if (pos >= 0) {
        Location l = pf.norm->loc(pf.p->imports[pos].importer);
        if (!l.empty()) f.where.push_back(l);
      }
      add(std::move(f));
    }
  }

  void compare_accesses(const Group& g, const Group& b, const std::string& role) {
    std::vector<uint64_t> sigs;
    for (const auto& kv : b.access_sigs)
      if (!g.access_sigs.count(kv.first) && !kv.second.front().second->a->ok) sigs.push_back(kv.first);
    std::sort(sigs.begin(), sigs.end());
    for (uint64_t sig : sigs) {
      const auto& all = b.access_sigs.at(sig);
      const AccessFact& af = *all.front().second;
      const ProcFacts& pf = *all.front().first;
      const model::ProxyAccess& a = *af.a;
      Location where = a.stack.empty() ? Location() : pf.norm->loc(a.stack[0]);
      Finding f;
      f.kind = "proxy_forward_failed";
      bool module_getattr = a.kind == model::ProxyAccessKind::ModuleGetattr;
      // Probes (hasattr/getattr with a default, inspect.getmodule, pytest collection) ask
      // proxies for dunders and pytest markers and expect AttributeError: not a cause.
      const std::string& at = a.attribute;
      bool probe = (at.size() > 4 && at.compare(0, 2, "__") == 0 &&
                    at.compare(at.size() - 2, 2, "__") == 0) ||
                   at.compare(0, 7, "_pytest") == 0;
      f.severity = probe ? Severity::Info
                   : !module_getattr ? Severity::Error
                   : g.ok(af.story) ? Severity::Warning : Severity::Info;
      f.module = std::string(af.story);
      f.story = f.module;
      f.process = role;
      f.order = first_pos(pf, af.story);
      std::set<std::string> seen;
      for (const auto& x : all) {
        const std::string& t = x.second->a->test;
        if (!t.empty() && seen.insert(t).second) f.tests.push_back(t);
      }
      f.test = a.test.empty() && !f.tests.empty() ? f.tests[0] : a.test.str();
      std::string on = a.proxy.present ? describe(a.proxy, "") : "a module";
      f.summary = (a.kind == model::ProxyAccessKind::Setattr ? "setting ." : "lookup of .") +
                  a.attribute + " on " + on + " failed: " + a.outcome();
      if (a.forwarded_to.present)
        f.summary += " (forwarded to '" + (a.forwarded_to.name.empty() ? obj_kind(a.forwarded_to)
                                                                         : a.forwarded_to.name.str()) + "')";
      if (!where.empty()) f.summary += " at " + fmt_loc(where);
      if (!f.test.empty()) f.summary += " in " + f.test;
      if (f.tests.size() > 1) f.summary += " and " + std::to_string(f.tests.size() - 1) + " more tests";
      f.brief = "." + a.attribute + " through it failed (" + a.error_type + ")" +
                (where.empty() ? std::string() : " at " + fmt_loc(where)) +
                (f.tests.empty() ? std::string()
                                 : " in " + std::to_string(f.tests.size()) + " test" +
                                       (f.tests.size() == 1 ? "" : "s"));
      f.bad = std::to_string(all.size()) + " failing lookup" + (all.size() == 1 ? "" : "s") +
              " of ." + a.attribute + ": " + a.outcome();
      auto ga = g.access_by_attr.find(Group::child_key(af.story, a.attribute));
      if (ga != g.access_by_attr.end()) {
        const model::ProxyAccess& x = *ga->second.second->a;
        f.good = "lookup of ." + x.attribute + " on " + describe(x.proxy, "") + ": " + x.outcome();
      } else {
        f.good = "no such lookup reached a proxy or module __getattr__";
      }
      for (size_t i = 0; i < a.stack.size() && f.where.size() < 4; ++i)
        if (!is_bootstrap(a.stack[i])) f.where.push_back(pf.norm->loc(a.stack[i]));
      add(std::move(f));
    }
  }

  // The fate of a failed import, classified once per process when first asked.
  timing::Fate fate_of(const Process& p, const Import& im) {
    auto it = fates_.find(&p);
    if (it == fates_.end()) it = fates_.emplace(&p, timing::classify_failures(p)).first;
    return it->second[static_cast<size_t>(&im - p.imports.data())];
  }
  std::unordered_map<const Process*, std::vector<timing::Fate>> fates_;

  void compare_failed(const Group& g, const Group& b, const std::string& role) {
    for (size_t i = 0; i < b.mods->size(); ++i) {
      const Group::GMod& bm = b.mods->value(i);
      if (bm.failed.empty()) continue;
      SV name = b.mods->key(i);
      const Group::GMod* gm = g.mod(name);
      for (const auto& x : bm.failed) {
        bool known = false;
        if (gm)
          for (const auto& y : gm->failed) known |= y.second->error_type == x.second->error_type;
        if (known) continue;
        const Import& im = *x.second;
        Finding f;
        f.kind = "import_failed";
        bool was_ok = g.ok(name);
        // A failure its importer handled (an optional dependency's probe) is one level
        // below one that propagated: the one that stopped something ranks first.
        bool handled = fate_of(*x.first->p, im) == timing::Fate::Handled;
        f.severity = was_ok ? (handled ? Severity::Warning : Severity::Error)
                            : (handled ? Severity::Info : Severity::Warning);
        f.module = std::string(name);
        f.story = f.module;
        f.process = role;
        f.order = b.pos_of(name);
        f.test = im.test;
        f.summary = "import " + f.module + " failed: " + im.error_text() +
                    (handled ? " (handled by its importer)" : "");
        f.brief = "import " + f.module + " failed (" + im.error_type + ")";
        Location l = x.first->norm->loc(im.importer);
        if (!l.empty()) {
          f.summary += " (imported at " + fmt_loc(l) + ")";
          f.where.push_back(l);
        }
        f.bad = im.error_text();
        f.good = was_ok ? "imported fine"
                        : (gm && !gm->failed.empty() ? "failed with " + gm->failed.front().second->error_text()
                                                 : "not imported");
        add(std::move(f));
      }
    }
  }

  void compare_duplicates(const Group& g, const Group& b, const std::string& role) {
    for (const auto& kv : b.dup_sigs) {
      if (g.dup_sigs.count(kv.first)) continue;
      Finding f = new_finding("duplicate_module", Severity::Warning, kv.second.second, role, b.pos_of(kv.second.second));
      f.summary = kv.first;
      f.bad = kv.first;
      f.good = "not so";
      add(std::move(f));
    }
  }

  void compare_modules(const Group& g, const Group& b, const std::string& role) {
    // Added / missing, aggregated per top-level package.
    auto aggregate = [&](const Group& from, const Group& other, const char* kind, bool in_bad) {
      std::unordered_map<SV, std::vector<SV>> by_top;
      std::vector<SV> tops;
      for (size_t i = 0; i < from.mods->size(); ++i) {
        if (!from.mods->value(i).okm) continue;
        SV name = from.mods->key(i);
        const Group::GMod* o = other.mod(name);
        if (o && (o->okm || !o->failed.empty())) continue;  // import_failed tells that story
        SV t = name.substr(0, name.find('.'));
        auto ins = by_top.emplace(t, std::vector<SV>());
        if (ins.second) tops.push_back(t);
        ins.first->second.push_back(name);
      }
      for (SV t : tops) {
        const auto& names = by_top[t];
        Finding f;
        f.kind = kind;
        f.severity = Severity::Warning;
        SV shortest = names[0];
        for (SV n : names)
          if (n.size() < shortest.size()) shortest = n;
        f.module = std::string(shortest);
        f.process = role;
        f.order = in_bad ? b.pos_of(names[0]) : UINT64_MAX - 1;
        const Group::GMod& rep = *from.mod(names[0]);
        const Import& im = *rep.okm->first_ok;
        Location l = rep.okp->norm->loc(im.importer);
        if (!l.empty()) f.where.push_back(l);
        f.test = im.test;
        std::string list;
        for (size_t i = 0; i < names.size() && i < 20; ++i) list += (i ? ", " : "") + std::string(names[i]);
        if (names.size() > 20) list += ", ... (" + std::to_string(names.size() - 20) + " more)";
        std::string count = names.size() == 1 ? "" : " and " + std::to_string(names.size() - 1) +
                                                         " more under " + std::string(t);
        std::string first(names[0]);
        if (in_bad) {
          f.summary = "imported only in the bad run: " + first + count;
          f.bad = list;
          f.good = "not imported";
        } else {
          f.summary = "imported only in the good run: " + first + count;
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
    for (size_t i = 0; i < b.mods->size(); ++i) {
      const Group::GMod* bi = &b.mods->value(i);
      if (!bi->okm) continue;
      SV name = b.mods->key(i);
      const Group::GMod* gi = g.mod(name);
      if (!gi || !gi->okm) continue;
      const Import& bim = *bi->okm->first_ok;
      const Import& gim = *gi->okm->first_ok;
      PathNorm& bn = *bi->okp->norm;
      PathNorm& gn = *gi->okp->norm;
      if (bn.view(bim.origin) != gn.view(gim.origin)) {
        const std::string& bo = bn(bim.origin);
        const std::string& go = gn(gim.origin);
        Finding f = new_finding("origin_changed", Severity::Warning, std::string(name), role, b.pos_of(name));
        f.summary = f.module + " now comes from " + (bo.empty() ? "<no origin>" : bo) + " (was " +
                    (go.empty() ? "<no origin>" : go) + ")";
        f.good = go;
        f.bad = bo;
        f.test = bim.test;
        Location l = bn.loc(bim.importer);
        if (!l.empty()) f.where.push_back(l);
        add(std::move(f));
      }
      if (bim.loader != gim.loader) {
        std::string bl = normalize_loader(bim.loader), gl = normalize_loader(gim.loader);
        if (bl != gl) {
          Finding f = new_finding("loader_changed", Severity::Warning, std::string(name), role, b.pos_of(name));
          f.summary = f.module + " loaded by " + (bl.empty() ? "<none>" : bl) + " (was " +
                      (gl.empty() ? "<none>" : gl) + ")";
          f.good = gl;
          f.bad = bl;
          f.test = bim.test;
          add(std::move(f));
        }
      }
      uint64_t bs = bi->min_self, gs = gi->min_self;
      if (bs >= gs + opt_.slower_min_ns &&
          static_cast<double>(bs) >= opt_.slower_ratio * static_cast<double>(gs)) {
        Finding f = new_finding("import_slower", opt_.slower_is_warning ? Severity::Warning : Severity::Info,
                                std::string(name), role, b.pos_of(name));
        char ratio[32];
        snprintf(ratio, sizeof ratio, "%.1fx", gs ? static_cast<double>(bs) / gs : 0.0);
        f.summary = f.module + " import (self time) " + fmt_ms(bs) + " vs " + fmt_ms(gs) +
                    (gs ? std::string(" (") + ratio + ")" : std::string());
        f.good = fmt_ms(gs) + " self";
        f.bad = fmt_ms(bs) + " self";
        add(std::move(f));
      }
    }
  }

  static uint64_t first_pos(const ProcFacts& pf, SV name) {
    const ModFacts* m = pf.mods.find(name);
    return m ? m->pos : UINT64_MAX - 2;
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

    // Order of the modules both import: compare the filtered sequences. Names are
    // positions in each process's module table; `other` maps one side's to the other's.
    auto on_main = [](const ProcFacts& f) {
      std::vector<bool> on(f.mods.size(), false);
      for (uint32_t i : f.main_seq) on[f.mod_of[i]] = true;
      return on;
    };
    const std::vector<bool> g_main = on_main(g), b_main = on_main(b);
    auto filtered = [](const ProcFacts& f, const ProcFacts& other, const std::vector<bool>& other_main) {
      std::vector<const std::string*> out;
      std::vector<bool> seen(f.mods.size(), false);
      for (uint32_t i : f.main_seq) {
        uint32_t m = f.mod_of[i];
        if (seen[m]) continue;
        seen[m] = true;
        const ModFacts* o = other.mods.find(f.mods.key(m));
        if (o && other_main[o - other.mods.values().data()]) out.push_back(&f.p->imports[i].name.str());
      }
      return out;
    };
    std::vector<const std::string*> fg = filtered(g, b, b_main), fb = filtered(b, g, g_main);
    for (size_t i = 0; i < fg.size() && i < fb.size(); ++i) {
      if (*fg[i] == *fb[i]) continue;
      Finding f = new_finding("import_order_changed", Severity::Info, *fb[i], pair.role, first_pos(b, *fb[i]));
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
    if (a.tests.size() != b.tests.size()) return a.tests.size() > b.tests.size();
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
    for (const auto& r : f.related) {
      if (r.severity > f.severity) f.severity = r.severity;
      if (f.test.empty() && !r.test.empty()) f.test = r.test;
    }
    // The story in one line: the first clause of each kind, then how many more.
    std::set<std::string> told;
    size_t untold = 0;
    for (const auto& r : f.related) {
      if (r.kind == "proxy_in_sys_modules" && f.kind == "sys_modules_replaced") continue;
      if (!r.brief.empty() && told.insert(r.kind).second) tail += "; " + r.brief;
      else ++untold;
    }
    if (untold) tail += "; +" + std::to_string(untold) + " more related";
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
