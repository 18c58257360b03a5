// The viewer's rule for proxies (see proxy_decision.h).
#include "proxy_decision.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <unordered_set>

#include "failure_reporting.h"

namespace imptrace {
namespace model {

namespace {

constexpr uint32_t kPlainModule = 1u, kModuleSubclass = 2u, kProxy = 4u;

bool is_module(const ObjectRef& o) { return o.present && (o.flags & (kPlainModule | kModuleSubclass)); }

}  // namespace

bool is_import_blocker(const ObjectRef& o) { return o.present && o.type == "NoneType"; }

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
