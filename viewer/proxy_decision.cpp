// The viewer's rule for proxies (see proxy_decision.h).
#include "proxy_decision.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "failure_reporting.h"
#include "key_history.h"

namespace imptrace {
namespace model {

namespace {

constexpr uint32_t kPlainModule = 1u, kModuleSubclass = 2u, kProxy = 4u;

bool is_module(const ObjectRef& o) { return o.present && (o.flags & (kPlainModule | kModuleSubclass)); }

}  // namespace

bool is_import_blocker(const ObjectRef& o) { return o.present && o.type == "NoneType"; }

bool in_namespace(std::string_view key, std::string_view name) {
  return !name.empty() && key.size() >= name.size() && key.compare(0, name.size(), name) == 0 &&
         (key.size() == name.size() || key[name.size()] == '.');
}

namespace {

bool same_place(const Location& a, const Location& b) {
  return a.line == b.line && a.file == b.file && a.function == b.function;
}

// Position in p.imports of the import that was innermost on the writing thread when an
// insertion seen only at an import boundary (3.8-3.11: a store the tracer's hooks did not
// see, such as 3.11's specialised STORE_SUBSCR) was made, or -1 when that cannot be told.
// An insertion changes sys.modules' size, which every boundary compares, so it was made
// after the boundary before the one that saw it. The tracer looks before an import begins
// (its begin_ns comes later) and after it ends, with the ended import already off the
// thread's stack: either way the record's during_import D is what was innermost after that
// boundary. Seen at the start of an import, D was also innermost before it, back to the
// previous boundary: the writer was D. Seen at the end of D's child E (the last of D's
// children that began, ended before the record), the writer was E, whose importer line is
// where the record's stack stands; when the next import D begins stands there too (`import
// a, b`), which boundary it was cannot be told.
int64_t writer_of_boundary_insertion(const Process& p, const ModulesChange& c) {
  const int64_t d = c.during_import ? p.import_position(c.during_import - 1) : -1;
  if (c.during_import && d < 0) return -1;
  const Location* at = outside_importlib(c.stack);
  if (!at) return d;
  // The last import that began before the record.
  auto after = std::partition_point(p.imports.begin(), p.imports.end(),
                                    [&](const Import& im) { return im.begin_ns <= c.time_ns; });
  int64_t e = -1;
  for (int64_t j = (after - p.imports.begin()) - 1; j > d; --j) {
    if (p.imports[static_cast<size_t>(j)].thread != c.thread) continue;
    // Up to the child of D it is (or was) under.
    int64_t x = j;
    while (x >= 0 && p.imports[static_cast<size_t>(x)].parent_pos != d && p.imports[static_cast<size_t>(x)].parent_pos < x)
      x = p.imports[static_cast<size_t>(x)].parent_pos;
    if (x >= 0 && p.imports[static_cast<size_t>(x)].parent_pos == d) e = x;
    break;
  }
  if (e < 0 || p.imports[static_cast<size_t>(e)].end_ns > c.time_ns ||
      !same_place(p.imports[static_cast<size_t>(e)].importer, *at))
    return d;
  // The next import D began on that thread, if it stands at the same line, may be the one.
  for (auto it = after; it != p.imports.end(); ++it) {
    if (it->thread != c.thread) continue;
    if (it->parent_pos == d && same_place(it->importer, *at)) return -1;
    break;
  }
  return e;
}

}  // namespace

const Import* own_namespace_import(const Process& p, const ModulesChange& c) {
  if (c.by_import_system || c.op != ChangeOp::Set || !c.new_object.present) return nullptr;
  int64_t innermost = -1;
  if (c.precision == Precision::Exact) {
    if (c.during_import) innermost = p.import_position(c.during_import - 1);
  } else if (!c.old_object.present) {
    innermost = writer_of_boundary_insertion(p, c);
  }
  if (innermost < 0) return nullptr;
  const std::string_view running = p.imports[static_cast<size_t>(innermost)].name.str();
  const std::string_view key = c.key.str();
  // Outwards through the imports in flight on the thread (each encloses the one before it,
  // so it began earlier and sits earlier in start order).
  for (int64_t at = innermost; at >= 0;) {
    const Import& im = p.imports[static_cast<size_t>(at)];
    if (in_namespace(key, im.name.str()) && in_namespace(running, im.name.str())) return &im;
    if (im.parent_pos >= at) break;
    at = im.parent_pos;
  }
  return nullptr;
}

bool import_system_probe(const Process& p, const ProxyAccess& a) {
  if (a.ok || a.error_type.str() != "AttributeError" || !a.proxy.present || a.proxy.name.empty()) return false;
  const std::string child = a.proxy.name.str() + "." + a.attribute.str();
  const Import* next = nullptr;
  for (const auto& im : p.imports) {
    if (im.thread != a.thread) continue;
    if (im.name.str() == child && im.begin_ns <= a.time_ns && a.time_ns <= im.end_ns) return true;
    if (im.begin_ns >= a.time_ns && (!next || im.begin_ns < next->begin_ns)) next = &im;
  }
  return next && next->name.str() == child;
}

bool caught_attribute_error(const Process& p, const ProxyAccess& a) {
  if (a.ok || a.error_type.str() != "AttributeError") return false;
  if (a.during_import) {
    int64_t at = p.import_position(a.during_import - 1);
    if (at >= 0) {
      const Import& im = p.imports[static_cast<size_t>(at)];
      if (!im.ok && im.error_type.str() == a.error_type.str() && im.error_message.str() == a.error_message.str())
        return false;
    }
  }
  // From the interpreter's own `import traceback` to print an uncaught error on this thread
  // (no Python importer; 3.13+), nothing the thread does is the program going on: 3.15's
  // traceback resolves lazy imports from its functions and its imports probe `__path__`.
  uint64_t printing_from = UINT64_MAX;
  for (const auto& im : p.imports)
    if (im.thread == a.thread && im.parent_pos < 0 && im.importer.empty() && im.name.str() == "traceback" &&
        im.begin_ns > a.time_ns)
      printing_from = std::min(printing_from, im.begin_ns);
  const std::string& test = a.test.str();
  auto went_on = [&](uint64_t t, const Str& in_test) { return t > a.time_ns && t < printing_from && in_test.str() == test; };
  for (const auto& im : p.imports)
    if (im.thread == a.thread && went_on(im.begin_ns, im.test) && !import_in_failure_reporting(p, im)) return true;
  for (const auto& o : p.proxy_accesses) {
    if (&o == &a || o.thread != a.thread || !went_on(o.time_ns, o.test) || in_failure_reporting(o.stack)) continue;
    // A lookup made by an import that failure reporting made is part of that report.
    int64_t in = o.during_import ? p.import_position(o.during_import - 1) : -1;
    if (in >= 0 && import_in_failure_reporting(p, p.imports[static_cast<size_t>(in)])) continue;
    return true;
  }
  // Nothing recorded after it on its thread. The main thread (the one that made the first
  // import) of a process that exited with 0 did not die of it.
  const bool main_thread = !p.imports.empty() && p.imports.front().thread == a.thread;
  return main_thread && p.end.how == ProcessEnd::How::Exit && p.end.status == 0;
}

void decide_proxies(Process& p) {
  // Classes the trace describes: does each forward by construction (a module type that
  // overrides attribute lookup)?
  std::unordered_map<std::string, bool> module_forwarding_class;
  for (const auto& c : p.proxy_classes)
    module_forwarding_class[c.type.str()] =
        c.module_subclass && (!c.getattr_at.empty() || !c.getattribute_at.empty());
  // Objects through which an access reached a module.
  std::unordered_set<uint64_t> forwarded;
  for (const auto& a : p.proxy_accesses) {
    if (!a.proxy.present || a.kind == ProxyAccessKind::ModuleGetattr) continue;
    if ((is_module(a.forwarded_to) && a.forwarded_to.id != a.proxy.id) ||
        (a.ok && is_module(a.result) && a.result.id != a.proxy.id))
      forwarded.insert(a.proxy.id);
  }
  // Objects that sat under a key. The tracer marks every non-module object it describes,
  // attribute values included (the function a package binds over its submodule's name, a
  // lookup's result); a proxy is something under a key, so an object never there, and not
  // seen forwarding, is none whatever its class.
  std::unordered_set<uint64_t> under_key;
  for (const auto& im : p.imports)
    if (im.object.present) under_key.insert(im.object.id);
  for (const auto& c : p.modules_changes) {
    if (c.old_object.present) under_key.insert(c.old_object.id);
    if (c.new_object.present) under_key.insert(c.new_object.id);
  }
  auto decide = [&](ObjectRef& o) {
    if (!o.present || !(o.flags & kProxy)) return;
    bool proxy;
    if (o.flags & kPlainModule || is_import_blocker(o)) {
      proxy = false;
    } else if (forwarded.count(o.id)) {
      proxy = true;
    } else if (!under_key.count(o.id)) {
      proxy = false;
    } else {
      auto c = module_forwarding_class.find(o.type.str());
      proxy = c == module_forwarding_class.end() ? true : c->second;
    }
    if (!proxy) o.flags &= ~kProxy;
  };
  for (auto& im : p.imports) decide(im.object);
  for (auto& c : p.modules_changes) {
    decide(c.old_object);
    decide(c.new_object);
  }
  for (auto& b : p.bindings) {
    decide(b.bound_on);
    decide(b.child);
    decide(b.attribute_value);
    // The tracer's ON_PROXY binding status follows its own mark.
    if (b.status == BindingStatus::OnProxy && b.bound_on.present && !b.bound_on.is_proxy())
      b.status = BindingStatus::Bound;
  }
  for (auto& a : p.proxy_accesses) {
    decide(a.proxy);
    decide(a.result);
    decide(a.forwarded_to);
  }
}

}  // namespace model
}  // namespace imptrace
