// What the viewer calls a proxy. The tracer marks every non-plain-module object it finds
// under a sys.modules key as a candidate (ObjectRef flag PROXY) and describes its class
// (ProxyClass) and the attribute traffic through it (ProxyAccess); it cannot know at record
// time what the object will do. The viewer decides from what the whole trace holds:
//
//   a proxy forwards attribute access to a module: its class is a ModuleType subclass that
//   overrides __getattr__ or __getattribute__, or an access through it reached a module
//   (forwarded_to, or a module as the result).
//
// So typing.io / typing.re on 3.8-3.11 (classes whose metaclass, typing._DeprecatedType,
// overrides __getattribute__ to warn) are not proxies, and `sys.modules[x] = None` (the
// documented way to block an import) is a blocked import, never a proxy.
#pragma once

#include <string_view>

#include "model.h"

namespace imptrace {
namespace model {

// True for the None that blocks an import of its key (type NoneType).
bool is_import_blocker(const ObjectRef& o);

// A failed lookup of X on module P that the import system made for P.X and then got past:
// _handle_fromlist's hasattr() before it imports P.X (the next import its thread began), or
// `from P import X` inside P.X's own import, whose getattr fails before the fallback to
// sys.modules['P.X'] (numpy.array_api's `from numpy import array_api`). Normal Python.
bool import_system_probe(const Process& p, const ProxyAccess& a);

// A failed lookup answered with AttributeError that the program caught: hasattr(m, "x"),
// getattr(m, "x", default), `try: m.x except AttributeError`. That is how Python asks
// whether an attribute exists, so normal, not an anomaly. Caught when the thread went on
// in the same test (an import began or another lookup ran later, outside failure reporting),
// or when it was the main thread's last record and the process exited with status 0 (an
// uncaught AttributeError exits with 1). Not caught when the import running then failed
// with that same error; nor, for want of evidence, when a test's failure reporting or
// nothing at all came next.
bool caught_attribute_error(const Process& p, const ProxyAccess& a);

// The import whose own design a write to sys.modules was: a lazy-module system or a module
// replacing itself (`sys.modules[__name__] = Wrapper(...)` in pygments.lexers,
// torch.backends.cudnn; apipkg.initpkg called from py/__init__.py putting ApiModule proxies
// under 'py', 'py.path', 'py.error', ...). That is an import I in flight on the writing
// thread when the write happened (recorded exactly, or an insertion seen only at the next
// import boundary whose boundary tells which import was innermost: proxy_decision.cpp)
// such that the key lies in I's namespace (it is I's name or starts with I's name + ".") and
// so does the innermost import running then. The innermost import is the code that wrote
// (its module body, or code it called); I is that import or one enclosing it. Requiring
// the innermost import inside I's namespace, not only some import in flight, keeps another
// package imported under I (a plugin, torch_npu under torch) from writing into I's names:
// that stays an anomaly, as does a write to a key outside the package (torch_npu's
// sys.modules['npugraph_ex']) or one made after the import finished. The innermost such I
// is returned; nullptr when there is none.
const Import* own_namespace_import(const Process& p, const ModulesChange& c);

// `key` is `name` or starts with `name` + ".".
bool in_namespace(std::string_view key, std::string_view name);

// Rewrites the PROXY bit (4) of every ObjectRef in `p` to the viewer's decision above.
// A candidate whose class the trace does not describe (a trace written with proxy
// instrumentation off) keeps the tracer's mark: nothing else is known about it.
void decide_proxies(Process& p);

}  // namespace model
}  // namespace imptrace
