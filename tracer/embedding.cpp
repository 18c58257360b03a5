#include "embedding.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

#include "cpython_api.h"
#include "process_state.h"

extern "C" {
__attribute__((visibility("default"))) void* Py_NewInterpreter();
__attribute__((visibility("default"))) imptrace::PyStatus Py_NewInterpreterFromConfig(void** tstate_p,
                                                                                     const void* config);
// The interposer under a hidden name (an alias, defined after it below): its address taken
// through the exported name would be a symbol relocation resolved at load, in every process
// the library is preloaded into.
__attribute__((visibility("hidden"))) void* own_new_interpreter();
}

namespace imptrace {
namespace {

typedef void* (*NewInterpreterFn)();
typedef PyStatus (*NewInterpreterFromConfigFn)(void** tstate_p, const void* config);

// libpython's own definition of `name`: the next one after this library in the lookup
// order. Where libpython was loaded with RTLD_LOCAL (a plugin's dependency), RTLD_NEXT
// does not see it: the loaded objects are searched for a libpython that defines it.
void* libpython_definition(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f) return f;
  struct Search { const char* name; void* found; } s = {name, nullptr};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        auto* s = static_cast<Search*>(data);
        if (!info->dlpi_name || !strstr(info->dlpi_name, "libpython")) return 0;
        void* h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
        if (!h) return 0;
        s->found = dlsym(h, s->name);
        dlclose(h);  // RTLD_NOLOAD took a reference; the object stays loaded
        return s->found ? 1 : 0;
      },
      &s);
  return s.found;
}

// Resolved at the first call; two threads racing store the same value.
template <typename Fn>
Fn resolved(Fn& slot, const char* name) {
  Fn f = __atomic_load_n(&slot, __ATOMIC_ACQUIRE);
  if (!f) {
    f = reinterpret_cast<Fn>(libpython_definition(name));
    __atomic_store_n(&slot, f, __ATOMIC_RELEASE);
  }
  return f;
}
NewInterpreterFn g_new_interpreter;
NewInterpreterFromConfigFn g_new_interpreter_from_config;

// Tracing a creation: the creation's extent is bracketed only when the tracer is on.
struct Creation {
  bool traced;
  Creation() : traced(g_settings.enabled) { if (traced) subinterpreter_creation_begins(); }
  void ends(bool created) {
    if (traced) subinterpreter_creation_ends(created);
    traced = false;
  }
  ~Creation() { ends(false); }
  Creation(const Creation&) = delete;
  Creation& operator=(const Creation&) = delete;
};

}  // namespace

bool subinterpreter_creation_seen() {
  // Only where the API is in a shared libpython, and where the host's lookup of the name
  // finds this library's definition (an executable that defines it wins).
  return py.shared && dlsym(RTLD_DEFAULT, "Py_NewInterpreter") == reinterpret_cast<void*>(&own_new_interpreter);
}

}  // namespace imptrace

using namespace imptrace;

// The interposers (exports.map lists them). They keep the real functions' signatures and
// return what those returned; when the real function cannot be found (never, in a process
// that could call it), they fail as CPython does when it cannot create one.
extern "C" __attribute__((visibility("default"))) void* Py_NewInterpreter() {
  NewInterpreterFn real = resolved(g_new_interpreter, "Py_NewInterpreter");
  if (!real) return nullptr;
  Creation c;
  void* tstate = real();
  c.ends(tstate != nullptr);
  return tstate;
}

// 3.12+. A PyStatus of type 0 is success.
extern "C" __attribute__((visibility("default"))) PyStatus Py_NewInterpreterFromConfig(void** tstate_p,
                                                                                     const void* config) {
  NewInterpreterFromConfigFn real = resolved(g_new_interpreter_from_config, "Py_NewInterpreterFromConfig");
  if (!real) {
    if (tstate_p) *tstate_p = nullptr;
    return PyStatus{1 /* _PyStatus_TYPE_ERROR */, "Py_NewInterpreterFromConfig", "libpython's definition not found", 0};
  }
  Creation c;
  PyStatus status = real(tstate_p, config);
  c.ends(status.type == 0 && tstate_p && *tstate_p);
  return status;
}

extern "C" __attribute__((visibility("hidden"), alias("Py_NewInterpreter"))) void* own_new_interpreter();
