// The histories of sys.modules keys (rules in key_history.h).
#include "key_history.h"

#include <algorithm>

#include "prefault.h"

namespace imptrace {
namespace model {

const Str* KeyEntry::test() const {
  if (before_trace) return nullptr;
  if (change) return &change->test;
  return import ? &import->test : nullptr;
}

ModulesHistory::ModulesHistory(const Process& p) {
  // Both record kinds in one time order; at equal times a change precedes an import.
  struct Event {
    uint64_t time_ns;
    uint32_t index;
    bool is_import;
  };
  std::vector<Event> events;
  events.reserve(p.modules_changes.size() + p.imports.size());
  prefault_capacity(events);
  for (size_t i = 0; i < p.modules_changes.size(); ++i)
    events.push_back({p.modules_changes[i].time_ns, static_cast<uint32_t>(i), false});
  for (size_t i = 0; i < p.imports.size(); ++i)
    if (p.imports[i].ok && p.imports[i].object.present)
      events.push_back({p.imports[i].end_ns, static_cast<uint32_t>(i), true});
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.time_ns != b.time_ns ? a.time_ns < b.time_ns : a.is_import < b.is_import;
  });
  keys_.reserve(p.imports.size() + 16);
  first_key_of_.reserve(p.imports.size() + 16);
  for (const Event& ev : events) {
    if (ev.is_import) apply(p.imports[ev.index]);
    else apply(p.modules_changes[ev.index]);
  }
}

KeyEntry& ModulesHistory::push(KeyHistory& h, std::string_view key, const ObjectRef& obj,
                               bool via_import, uint64_t t) {
  KeyEntry e;
  e.object = &obj;
  e.via_import = via_import;
  e.time_ns = t;
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
  if (c.old_object.present && (h.current < 0 || h.entries[h.current].object->id != c.old_object.id)) {
    KeyEntry& e = push(h, c.key, c.old_object, c.old_object.is_plain_module(), 0);
    e.before_trace = true;
  }
  if (c.op == ChangeOp::Set && c.new_object.present) {
    if (h.current >= 0) {
      const ObjectRef& now = *h.entries[h.current].object;
      if (now.id == c.new_object.id && now.type == c.new_object.type) return;
    }
    push(h, c.key, c.new_object, c.by_import_system, c.time_ns).change = &c;
  } else if (c.op == ChangeOp::Delete && h.current >= 0) {
    h.entries[h.current].removed = true;
    h.entries[h.current].removal = &c;
    h.current = -1;
  }
}

void ModulesHistory::apply(const Import& im) {
  KeyHistory& h = *keys_.emplace(im.name).first;
  KeyEntry* e;
  if (h.current < 0 || h.entries[h.current].object->id != im.object.id) e = &push(h, im.name, im.object, true, im.begin_ns);
  else e = &h.entries[h.current];
  if (!e->import) e->import = &im;
}

}  // namespace model
}  // namespace imptrace
