// The pytest test running now, for the records' `test` field.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "trace_writer.h"  // process_environ()

namespace imptrace {

// The string id of the node id in PYTEST_CURRENT_TEST ("<node id> (setup|call|teardown)"),
// 0 when it is not set.
uint32_t current_test();

// getenv scans the whole environment, and the tracer asks for PYTEST_CURRENT_TEST at every
// import and at every repeated proxy access. The answer is kept with what reveals a change
// under glibc: setenv/putenv of an existing name replace its entry pointer in place;
// adding a name writes it at the end (the old terminator slot, after a removal the slot
// before it) or moves the array; removing one shifts every later entry down; clearenv
// nulls the array. So one entry is watched besides the terminator: the variable's own
// while it is set, else the last one.
// What an EnvWatch's array is before its first scan, and while environ is null: an array
// of its own, which environ never is.
extern char* kNotScanned[1];

struct EnvWatch {
  // Watches the variable `var` names. Constant-initialised: a global watch runs no code at
  // load, in every process the library is preloaded into.
  template <size_t N>
  constexpr explicit EnvWatch(const char (&var)[N]) : name(var), name_len(N - 1) {}

  const char* name;
  size_t name_len;
  char** array = kNotScanned;        // environ when scanned; never null
  size_t len = 0;                     // entries then
  size_t probe = 0;                   // the variable's index while set, else the last entry's (0 if none)
  const char* probe_entry = nullptr;  // array[probe] then
  const char* entry = nullptr;        // the variable's entry, or null

  // Inline, a few loads: the repeated proxy-access path asks at every repeat.
  [[gnu::always_inline]] bool unchanged() const {
    char** a = array;
    if (__builtin_expect(process_environ() != a, 0)) return false;  // a may have been freed: not read
    // One branch for both entries: the repeated path stays one contiguous run of code.
    return !(reinterpret_cast<uintptr_t>(a[len]) |
             (reinterpret_cast<uintptr_t>(a[probe]) ^ reinterpret_cast<uintptr_t>(probe_entry)));
  }
  // Scans the environment again; the value (after '='), or null.
  const char* rescan();
  const char* get() {
    if (unchanged()) return entry ? entry + name_len + 1 : nullptr;
    return rescan();
  }
};
// A watch of its own for the token: current_test() runs under the writer lock, from any
// interpreter; the token is read on the repeated proxy-access path, without that lock, in
// the main interpreter only (its GIL held), so the two never share state.
extern EnvWatch g_test_token;

// What changes with PYTEST_CURRENT_TEST (its environment entry; 0 when unset), for a check
// that must not take the writer lock or intern anything: pytest sets the variable again at
// every phase of every test.
[[gnu::always_inline]] inline uintptr_t current_test_token() {
  if (__builtin_expect(!g_test_token.unchanged(), 0)) g_test_token.rescan();
  return reinterpret_cast<uintptr_t>(g_test_token.entry);
}

}  // namespace imptrace
