#include "pytest_context.h"

#include <string.h>

#include "trace_writer.h"

namespace imptrace {
namespace {

constexpr char kCurrentTestVariable[] = "PYTEST_CURRENT_TEST";

// The node id's string id is kept until the variable or the file changes.
struct CurrentTest {
  EnvWatch env{kCurrentTestVariable};
  uint32_t id = 0, strings_epoch = 0;
  const char* entry = nullptr;  // the environment entry `id` was made from
};
CurrentTest g_current_test;

}  // namespace

char* kNotScanned[1] = {nullptr};

EnvWatch g_test_token{kCurrentTestVariable};

const char* EnvWatch::rescan() {
  char** a = process_environ();
  array = a ? a : kNotScanned;
  len = 0;
  long index = -1;
  entry = nullptr;
  for (char** e = a; e && *e; ++e, ++len)
    if (index < 0 && strncmp(*e, name, name_len) == 0 && (*e)[name_len] == '=') {
      index = static_cast<long>(len);
      entry = *e;
    }
  probe = index >= 0 ? static_cast<size_t>(index) : len ? len - 1 : 0;
  probe_entry = array[probe];
  return entry ? entry + name_len + 1 : nullptr;
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
