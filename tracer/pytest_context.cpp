#include "pytest_context.h"

#include <string.h>

#include "trace_writer.h"

extern "C" char** environ;

namespace imptrace {
namespace {

// getenv scans the whole environment, and the tracer asks for PYTEST_CURRENT_TEST at every
// import. The answer is kept with what reveals a change under glibc: setenv/putenv of an
// existing name replace its entry pointer, adding or removing a name changes the array
// or its length (the old terminator slot or the last entry), clearenv nulls the array.
struct EnvWatch {
  const char* name;
  size_t name_len;
  char** array = nullptr;
  size_t len = 0;
  long index = -1;            // of the entry found, -1 when absent
  const char* entry = nullptr;
  bool valid = false;

  bool unchanged() const {
    if (!valid || environ != array || !array) return false;
    if (array[len] != nullptr || (len && array[len - 1] == nullptr)) return false;
    return index < 0 || array[index] == entry;
  }
  // The value (after '='), or null.
  const char* get() {
    if (unchanged()) return entry ? entry + name_len + 1 : nullptr;
    array = environ;
    len = 0;
    index = -1;
    entry = nullptr;
    for (char** e = array; e && *e; ++e, ++len)
      if (index < 0 && strncmp(*e, name, name_len) == 0 && (*e)[name_len] == '=') {
        index = static_cast<long>(len);
        entry = *e;
      }
    valid = array != nullptr;
    return entry ? entry + name_len + 1 : nullptr;
  }
};

constexpr char kCurrentTestVariable[] = "PYTEST_CURRENT_TEST";

// The node id's string id is kept until the variable or the file changes.
struct CurrentTest {
  EnvWatch env{kCurrentTestVariable, sizeof kCurrentTestVariable - 1};
  uint32_t id = 0, strings_epoch = 0;
  const char* entry = nullptr;  // the environment entry `id` was made from
};
CurrentTest g_current_test;

// A watch of its own: current_test() runs under the writer lock, from any interpreter;
// this runs on the repeated proxy-access path, without that lock, in the main interpreter
// only (its GIL held), so the two never share state.
EnvWatch g_test_token{kCurrentTestVariable, sizeof kCurrentTestVariable - 1};

}  // namespace

uintptr_t current_test_token() {
  g_test_token.get();
  return reinterpret_cast<uintptr_t>(g_test_token.entry);
}

uint32_t current_test() {
  CurrentTest& c = g_current_test;
  const char* t = c.env.get();
  if (!t) return 0;
  if (c.entry == c.env.entry && c.strings_epoch == TraceWriter::strings_epoch() && c.id) return c.id;
  size_t n = strlen(t);
  if (n > 2 && t[n - 1] == ')') {
    const char* open = static_cast<const char*>(memrchr(t, '(', n));
    if (open && open > t && open[-1] == ' ') n = static_cast<size_t>(open - t) - 1;
  }
  c.id = TraceWriter::intern(t, n);
  c.entry = c.env.entry;
  c.strings_epoch = TraceWriter::strings_epoch();
  return c.id;
}

}  // namespace imptrace
