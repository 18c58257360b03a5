// The histories of sys.modules keys (rules in key_history.h).
#include "key_history.h"

#include <algorithm>
#include <cstring>

#include "prefault.h"

namespace imptrace {
namespace model {

const Str* KeyEntry::test() const {
  if (before_trace) return nullptr;
  if (change) return &change->test;
  return import ? &import->test : nullptr;
}

const Location* outside_importlib(const std::vector<Location>& stack) {
  for (const Location& l : stack)
    if (!is_importlib_frame(l)) return &l;
  return nullptr;
}

namespace {

// `pkg` is a package above `name` ("a" and "a.b" above "a.b.c").
bool above(std::string_view pkg, std::string_view name) {
  return name.size() > pkg.size() && name.compare(0, pkg.size(), pkg) == 0 && name[pkg.size()] == '.';
}

}  // namespace

void ModulesHistory::find_reentries() {
  const auto& ims = p_.imports;
  reentry_.assign(ims.size(), false);
  // The first import of each name is the one that ran its module (the later ones found it).
  // Each lifetime runs its modules again. Imports come in the order they began, so their
  // lifetimes never decrease: a name's import is its lifetime's first when the name's
  // last import so far was in an earlier lifetime.
  std::vector<bool> first(ims.size(), false);
  NameTable<uint32_t> last_lifetime;  // name -> 1 + the lifetime of its latest import
  last_lifetime.reserve(ims.size());
  for (size_t i = 0; i < ims.size(); ++i) {
    uint32_t lifetime = p_.lifetime_at(ims[i].begin_ns) + 1;
    uint32_t& last = *last_lifetime.emplace(std::string_view(ims[i].name)).first;
    first[i] = last != lifetime;
    last = lifetime;
  }
  for (size_t i = 0; i < ims.size(); ++i) {
    const Import& im = ims[i];
    // Parents start earlier: a position that does not decrease is a malformed trace.
    for (int64_t q = im.parent_pos, below = static_cast<int64_t>(i); q >= 0 && q < below;
         below = q, q = ims[q].parent_pos) {
      const Import& up = ims[q];
      if (up.name == im.name) {
        reentry_[i] = true;
        break;
      }
      if (first[q] && above(up.name, im.name)) break;  // the key's module did not exist yet
    }
  }
}

const Import* ModulesHistory::during(const ModulesChange& c) const {
  if (!c.during_import) return nullptr;
  int64_t pos = p_.import_position(c.during_import - 1);
  return pos >= 0 ? &p_.imports[pos] : nullptr;
}

const Import& ModulesHistory::outermost(const Import& im) const {
  const auto& ims = p_.imports;
  const Import* at = &im;
  for (int64_t q = im.parent_pos, below = at - ims.data(); reentry(below) && q >= 0 && q < below;
       below = q, q = ims[q].parent_pos)
    if (ims[q].name == im.name) at = &ims[q];
  return *at;
}

ModulesHistory::ModulesHistory(const Process& p) : p_(p) {
  find_reentries();
  // Both record kinds in one time order; at equal times a change precedes an import.
  // ... and the ends of interpreter lifetimes after both.
  enum Kind : uint8_t { kChange, kImport, kLifetimeEnd };
  struct Event {
    uint64_t time_ns;
    uint32_t index;
    Kind kind;
  };
  std::vector<Event> events;
  events.reserve(p.modules_changes.size() + p.imports.size() + p.lifetimes.size());
  prefault_capacity(events);
  for (size_t i = 0; i < p.modules_changes.size(); ++i)
    events.push_back({p.modules_changes[i].time_ns, static_cast<uint32_t>(i), kChange});
  for (size_t i = 0; i < p.imports.size(); ++i)
    if (p.imports[i].ok && p.imports[i].object.present)
      events.push_back({p.imports[i].end_ns, static_cast<uint32_t>(i), kImport});
  // The last lifetime's end is the trace's: what it holds is "still there when the trace ends".
  for (size_t i = 0; i + 1 < p.lifetimes.size(); ++i)
    if (p.lifetimes[i].ended) events.push_back({p.lifetimes[i].end_ns, static_cast<uint32_t>(i), kLifetimeEnd});
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.kind < b.kind;
  });
  keys_.reserve(p.imports.size() + 16);
  first_key_of_.reserve(p.imports.size() + 16);
  for (const Event& ev : events) {
    if (ev.kind == kImport) apply(p.imports[ev.index]);
    else if (ev.kind == kChange) apply(p.modules_changes[ev.index]);
    else end_lifetime();
  }
}

void ModulesHistory::end_lifetime() {
  for (auto& h : keys_.values())
    if (h.current >= 0) {
      h.entries[h.current].finalized = true;
      h.current = -1;
    }
}

KeyEntry& ModulesHistory::push(KeyHistory& h, std::string_view key, const ObjectRef& obj,
                               bool via_import, uint64_t t) {
  KeyEntry e;
  e.object = &obj;
  e.via_import = via_import;
  e.time_ns = t;
  e.lifetime = p_.lifetime_at(t);
  auto first = first_key_of_.emplace(obj.id);
  if (first.second) {
    *first.first = key;
  } else if (*first.first != key) {
    e.relation = Relation::SameAsKey;
    e.same_as_key = *first.first;
  } else {
    e.relation = Relation::SameAsEntry;
    for (size_t i = 0; i < h.entries.size(); ++i)
      if (h.entries[i].object->id == obj.id) {
        e.same_as_entry = static_cast<uint32_t>(i);
        break;
      }
  }
  if (obj.is_proxy()) h.has_proxy = true;
  h.entries.push_back(e);
  h.current = static_cast<int64_t>(h.entries.size() - 1);
  return h.entries.back();
}

void ModulesHistory::apply(const ModulesChange& c) {
  if (c.op == ChangeOp::Clear) {
    for (auto& h : keys_.values())
      if (h.current >= 0) {
        h.entries[h.current].removed = true;
        h.entries[h.current].removal = &c;
        h.current = -1;
      }
    return;
  }
  KeyHistory& h = *keys_.emplace(c.key).first;
  const Import* in = during(c);
  const Import* own_import = in && in->name == c.key ? &outermost(*in) : nullptr;
  if (c.old_object.present && (h.current < 0 || h.entries[h.current].object->id != c.old_object.id)) {
    if (own_import) {
      KeyEntry& e = push(h, c.key, c.old_object, true, own_import->begin_ns);
      e.import = own_import;
    } else {
      KeyEntry& e = push(h, c.key, c.old_object, c.old_object.is_plain_module(), 0);
      e.before_trace = true;
      e.lifetime = p_.lifetime_at(c.time_ns);
    }
  }
  if (c.op == ChangeOp::Set && c.new_object.present) {
    // The object as it is now: its class is the last class change's, if any.
    auto same = [&](const KeyEntry& e) {
      const ObjectRef& now = e.class_changes.empty() ? *e.object : e.class_changes.back()->new_object;
      return now.id == c.new_object.id && now.type == c.new_object.type;
    };
    if (c.by_import_system && !own_import) {
      if (h.current >= 0 && same(h.entries[h.current])) {
        h.entries[h.current].reloads.push_back(&c);
        return;
      }
      // 3.12+: reload's pop, then its store of the same object.
      if (h.current < 0 && !h.entries.empty()) {
        KeyEntry& last = h.entries.back();
        if (last.removal && last.removal->op == ChangeOp::Delete && last.removal->by_import_system &&
            same(last)) {
          last.removed = false;
          last.removal = nullptr;
          last.reloads.push_back(&c);
          h.current = static_cast<int64_t>(h.entries.size() - 1);
          return;
        }
      }
    }
    if (h.current >= 0) {
      KeyEntry& now = h.entries[h.current];
      if (now.object->id == c.new_object.id) {
        if (!same(now)) {
          now.class_changes.push_back(&c);
          if (c.new_object.is_proxy()) h.has_proxy = true;
        }
        return;
      }
    }
    KeyEntry& e = push(h, c.key, c.new_object, c.by_import_system, c.time_ns);
    e.change = &c;
    e.during = in;
  } else if (c.op == ChangeOp::Delete && h.current >= 0) {
    h.entries[h.current].removed = true;
    h.entries[h.current].removal = &c;
    h.current = -1;
  }
}

void ModulesHistory::apply(const Import& im) {
  KeyHistory& h = *keys_.emplace(im.name).first;
  const size_t pos = &im - p_.imports.data();
  KeyEntry* e;
  if (h.current < 0 || h.entries[h.current].object->id != im.object.id) e = &push(h, im.name, im.object, true, im.begin_ns);
  else e = &h.entries[h.current];
  if (!e->import) {
    e->import = &im;
  } else if (reentry(e->import - p_.imports.data()) && !reentry(pos) && im.begin_ns <= e->import->begin_ns) {
    // The outer import returns after its re-entries: it is the entry's import.
    if (!e->change && !e->before_trace && e->time_ns == e->import->begin_ns) e->time_ns = im.begin_ns;
    e->import = &im;
  }
}

}  // namespace model
}  // namespace imptrace
