// The per-process facts the diff compares (see diff_facts.h).
#include "diff_facts.h"

#include <algorithm>
#include <cctype>

#include "prefault.h"

namespace imptrace {
namespace diff {

const char* bound_on_place_name(uint8_t r) {
  switch (r) {
    case kCurrent: return "current";
    case kLaterReplaced: return "later_replaced";
    case kStale: return "stale";
    case kOther: return "other";
  }
  return "unknown";
}

// ---- roles ---------------------------------------------------------------------------------

std::string basename_of(const std::string& s) {
  size_t slash = s.rfind('/');
  return slash == std::string::npos ? s : s.substr(slash + 1);
}

namespace {

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

}  // namespace

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


// ---- sys.modules histories -------------------------------------------------------------
std::string relation_text(const KeyEntry& e) {
  if (e.relation == model::Relation::SameAsKey) return "same object as under '" + std::string(e.same_as_key) + "'";
  if (e.relation == model::Relation::SameAsEntry) return "same as entry #" + std::to_string(e.same_as_entry + 1);
  return "new object";
}

std::string origin_text(PathNorm& norm, const KeyEntry& e) {
  if (!e.object->file.empty()) return norm(e.object->file);
  if (!e.import) return std::string();
  return norm(e.import->origin.empty() ? e.import->file : e.import->origin);
}

EntryText materialize(const ProcFacts& f, const KeyEntry& l) {
  PathNorm& norm = *f.norm;
  EntryText e;
  e.obj = *l.object;
  e.via_import = l.via_import;
  e.before_trace = l.before_trace;
  e.origin = origin_text(norm, l);
  e.relation = relation_text(l);
  if (const std::vector<Location>* stack = l.stack())
    for (size_t i = 0; i < stack->size() && e.stack.size() < 4; ++i)
      if (!model::is_importlib_frame((*stack)[i])) e.stack.push_back(norm.loc((*stack)[i]));
  if (!e.stack.empty()) e.set_by = e.stack[0];
  else if (l.import) e.set_by = norm.loc(l.import->importer);
  if (const model::Str* test = l.test()) e.test = *test;
  e.removed = l.removed;
  e.precise = !l.change || l.change->precision == model::Precision::Exact;
  if (l.removal) {
    e.removal_precise = l.removal->precision == model::Precision::Exact;
    if (!l.removal->stack.empty()) e.removed_at = norm.loc(l.removal->stack[0]);
    if (l.removal->by_import_system && l.removal->op == model::ChangeOp::Delete) {
      int64_t in = l.removal->during_import ? f.p->import_position(l.removal->during_import - 1) : -1;
      e.removed_by_failed_import =
          in >= 0 && !f.p->imports[in].ok && f.p->imports[in].name == l.removal->key;
    }
  }
  for (const model::ModulesChange* c : l.reloads) {
    const Location* at = model::outside_importlib(c->stack);
    e.reloads.push_back(at ? norm.loc(*at) : Location());
  }
  for (const model::ModulesChange* c : l.class_changes) {
    const Location* at = model::outside_importlib(c->stack);
    e.class_changes.push_back({c->new_object.type, at ? norm.loc(*at) : Location()});
  }
  return e;
}

std::vector<EntryText> materialize(const ProcFacts& f, const KeyHistory& h) {
  return materialize(f, h, 0, h.entries.size());
}

std::vector<EntryText> materialize(const ProcFacts& f, const KeyHistory& h, size_t begin, size_t end) {
  std::vector<EntryText> out;
  for (size_t i = begin; i < end && i < h.entries.size(); ++i) {
    out.push_back(materialize(f, h.entries[i]));
    // Entry numbers count from the part's start, as the text lists the part alone.
    const KeyEntry& l = h.entries[i];
    if (begin && l.relation == model::Relation::SameAsEntry && l.same_as_entry >= begin)
      out.back().relation = "same as entry #" + std::to_string(l.same_as_entry - begin + 1);
  }
  return out;
}

std::vector<LifetimePart> lifetime_parts(const KeyHistory& h) {
  std::vector<LifetimePart> parts;
  for (size_t i = 0; i < h.entries.size(); ++i) {
    // An entry still there when its lifetime ended closes the part; so does a change of
    // lifetime number (an entry removed before its lifetime ended).
    if (parts.empty() || h.entries[i].lifetime != parts.back().lifetime ||
        (i > 0 && h.entries[i - 1].finalized))
      parts.push_back({i, i, h.entries[i].lifetime});
    parts.back().end = i + 1;
  }
  return parts;
}

uint64_t part_sig(const ProcFacts& f, const KeyHistory& h, const LifetimePart& part) {
  PathNorm& norm = *f.norm;
  static const uint64_t kModuleHash = hash_text("module");
  uint64_t sig = 0x51;
  for (size_t i = part.begin; i < part.end; ++i) {
    const KeyEntry& e = h.entries[i];
    sig = mix(sig, e.before_trace ? 3 : e.via_import ? 1 : 2);
    sig = mix(sig, e.object->is_plain_module() ? kModuleHash : hash_text(e.object->type));
    sig = mix(sig, e.object->is_proxy() ? 7 : 5);
    if (!e.before_trace && !e.via_import) sig = mix(sig, hash_text(origin_text(norm, e)));
    sig = mix(sig, static_cast<uint64_t>(e.relation));
    if (e.relation == model::Relation::SameAsKey) sig = mix(sig, hash_text(e.same_as_key));
    if (e.relation == model::Relation::SameAsEntry) sig = mix(sig, e.same_as_entry - part.begin);
    sig = mix(sig, e.removed ? 11 : 13);
    sig = mix(sig, 17 + e.reloads.size());
    for (const model::ModulesChange* c : e.class_changes) {
      sig = mix(sig, c->new_object.is_plain_module() ? kModuleHash : hash_text(c->new_object.type));
      sig = mix(sig, c->new_object.is_proxy() ? 19 : 23);
    }
  }
  return sig;
}

namespace {

// The process's sys.modules histories (key_history.h) and each key's structural signature.
// Import-system entries do not carry their origin in it (that is origin_changed's
// business); assigned objects do.
void build_key_facts(ProcFacts& f) {
  f.history.reset(new model::ModulesHistory(*f.p));
  f.key_sig.resize(f.history->size());
  std::vector<uint64_t> sigs;
  for (size_t k = 0; k < f.history->size(); ++k) {
    const KeyHistory& h = f.history->history(k);
    if (h.entries.size() < 2 || !f.p->several_lifetimes()) {
      f.key_sig[k] = part_sig(f, h, {0, h.entries.size(), 0});
      continue;
    }
    // The distinct structures of the lifetimes' parts, as a set: how many lifetimes did
    // the same is no difference.
    sigs.clear();
    for (const LifetimePart& part : lifetime_parts(h)) sigs.push_back(part_sig(f, h, part));
    std::sort(sigs.begin(), sigs.end());
    sigs.erase(std::unique(sigs.begin(), sigs.end()), sigs.end());
    uint64_t sig = sigs[0];
    for (size_t i = 1; i < sigs.size(); ++i) sig = mix(sig, sigs[i]);
    f.key_sig[k] = sig;
  }
}

// Per module name: first successful import, its self time (duration minus direct children),
// failed imports by error type; and the main thread's import sequence.
void build_module_facts(ProcFacts& f) {
  const Process& p = *f.p;
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
    m.ok_process = &f;
    m.ok_facts = &m;
    m.min_self = m.self_ns;
  }

}

namespace {

// The import system took the entry out because the import of that very key failed.
bool removed_by_its_failed_import(const Process& p, const KeyEntry& e) {
  const model::ModulesChange* r = e.removal;
  if (!r || !r->by_import_system || r->op != model::ChangeOp::Delete || !r->during_import) return false;
  int64_t in = p.import_position(r->during_import - 1);
  return in >= 0 && !p.imports[in].ok && p.imports[in].name == r->key;
}

}  // namespace

// Where each binding's bound_on stood in its parent key's history.
void build_binding_facts(ProcFacts& f) {
  const Process& p = *f.p;
  f.bindings.reserve(p.bindings.size());
  for (const auto& b : p.bindings) {
    BindingFact bf;
    bf.b = &b;
    const KeyHistory* parent = f.history->find(b.parent);
    if (!b.bound_on.present || !parent || parent->entries.empty()) {
      bf.bound_on_place = kUnknown;
    } else {
      const auto& es = parent->entries;
      int64_t at = -1;
      for (size_t i = 0; i < es.size(); ++i)
        if (es[i].time_ns <= b.time_ns) at = static_cast<int64_t>(i);
      // What sat under the parent at the end of the binding's lifetime: its last entry
      // there, unless removed (the next lifetime's objects are not replacements).
      const KeyEntry* last = nullptr;
      if (at >= 0) {
        size_t end = at;
        while (end + 1 < es.size() && es[end + 1].lifetime == es[at].lifetime && !es[end].finalized) ++end;
        if (static_cast<int64_t>(end) == parent->current || es[end].finalized) last = &es[end];
      } else if (parent->current >= 0) {
        last = &es[parent->current];
      }
      if (at >= 0 && es[at].object->id == b.bound_on.id) {
        if (last && last->object->id == b.bound_on.id) {
          bf.bound_on_place = kCurrent;
        } else if (removed_by_its_failed_import(p, es[at]) &&
                   (static_cast<size_t>(at) + 1 == es.size() || es[at + 1].lifetime != es[at].lifetime)) {
          // The parent's own import failed and importlib took the half-made module out
          // again: its children were bound on what was the module then. That failure is
          // the story (import_failed); nothing was put in its place. (A parent imported
          // again later lacks the children bound on the first: that stays an anomaly.)
          bf.bound_on_place = kCurrent;
        } else {
          bf.bound_on_place = kLaterReplaced;
          for (size_t i = at + 1; i < es.size() && es[i].lifetime == es[at].lifetime; ++i)
            if (es[i].object->id != b.bound_on.id) {
              bf.replaced_by = static_cast<int64_t>(i);
              break;
            }
        }
      } else {
        bf.bound_on_place = kOther;
        for (const auto& e : es)
          if (e.object->id == b.bound_on.id) bf.bound_on_place = kStale;
      }
    }
    if (bf.anomalous()) {
      uint64_t sig = mix(hash_text(b.parent), hash_text(b.attribute));
      sig = mix(sig, static_cast<uint64_t>(b.status));
      sig = mix(sig, bf.bound_on_place);
      sig = mix(sig, b.bound_on.is_proxy() ? 7 : 5);
      bf.sig = sig;
    }
    f.bindings.push_back(bf);
  }

}

// Each proxy access with the key of the story it belongs to and its structural signature.
void build_access_facts(ProcFacts& f) {
  const Process& p = *f.p;
  PathNorm& norm = *f.norm;
  for (const auto& a : p.proxy_accesses) {
    AccessFact af;
    af.a = &a;
    const std::string_view* fk = a.proxy.present ? f.history->first_key_of(a.proxy.id) : nullptr;
    if (fk) af.story = *fk;
    else if (!a.proxy.name.empty()) af.story = a.proxy.name;
    else af.story = a.forwarded_to.name;
    uint64_t sig = mix(hash_text(af.story), hash_text(a.proxy.type));
    sig = mix(sig, static_cast<uint64_t>(a.kind));
    sig = mix(sig, hash_text(a.attribute));
    sig = mix(sig, a.ok ? 1 : hash_text(a.error_type));
    sig = mix(sig, hash_text(a.forwarded_to.name));
    if (!a.stack.empty()) {
      sig = mix(sig, hash_text(norm(a.stack[0].file)));
      sig = mix(sig, hash_text(a.stack[0].function));
    }
    af.sig = sig;
    f.accesses.push_back(af);
  }

}

// One file, two module objects; one object under two names.
void build_duplicate_facts(ProcFacts& f) {
  const Process& p = *f.p;
  PathNorm& norm = *f.norm;
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
  // Each interpreter lifetime executes its modules again as new objects: a file is two
  // module objects only within one lifetime.
  std::vector<std::pair<uint64_t, std::string_view>> v;
  std::vector<uint32_t> lifetimes;
  for (uint32_t k : shared) {
    lifetimes.clear();
    for (uint32_t i = by_file.value(k).first; i != UINT32_MAX; i = next_use[i])
      lifetimes.push_back(p.lifetime_at(p.imports[i].begin_ns));
    std::vector<uint32_t> distinct(lifetimes);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    for (uint32_t life : distinct) {
      v.clear();
      size_t use = 0;
      for (uint32_t i = by_file.value(k).first; i != UINT32_MAX; i = next_use[i], ++use) {
        if (lifetimes[use] != life) continue;
        const Import& im = p.imports[i];
        bool seen = false;
        for (const auto& x : v) seen |= x.first == im.object.id;
        if (!seen) v.emplace_back(im.object.id, std::string_view(im.name));
      }
      if (v.size() < 2) continue;
      std::vector<std::string> names;
      for (const auto& x : v) names.emplace_back(x.second);
      std::sort(names.begin(), names.end());
      std::string sig = "file " + norm(std::string(by_file.key(k))) + " executed as " +
                        std::to_string(names.size()) + " module objects:";
      for (const auto& n : names) sig += " " + n;
      bool told = false;  // the same in an earlier lifetime
      for (const auto& d : f.duplicates) told |= d.first == sig;
      if (!told) f.duplicates.emplace_back(sig, names[0]);
    }
  }
  for (size_t k = 0; k < f.history->size(); ++k) {
    std::string_view key = f.history->key(k);
    for (const auto& e : f.history->history(k).entries) {
      if (!e.object->is_plain_module() || e.relation != model::Relation::SameAsKey) continue;
      if (e.alias_made_by_own_import(key)) continue;
      f.duplicates.emplace_back("module object under two names: " + std::string(key) + " " +
                                    relation_text(e),
                                std::string(key));
    }
  }
}

}  // namespace

void build_facts(ProcFacts& f) {
  const Process& p = *f.p;
  f.norm.reset(new PathNorm(p));
  f.group = group_of(p);
  f.worker = worker_of(p);
  f.role = f.group + (f.worker.empty() ? "" : " [xdist " + f.worker + "]");
  build_module_facts(f);
  build_key_facts(f);
  build_binding_facts(f);
  build_access_facts(f);
  build_duplicate_facts(f);
}

}  // namespace diff
}  // namespace imptrace
