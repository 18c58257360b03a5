// The words the output uses for an enum's values, kept as a table indexed by the value: each
// enum named this way numbers its values from 0 with no gap, in the table's order.
#pragma once

#include <cstddef>

namespace imptrace {

// names[e], or `unknown` for a number past the table (a newer trace's value read into the
// enum). `Last` is the enum's last value: a table that does not name every value up to it
// does not compile.
template <auto Last, size_t N>
constexpr const char* name_of(const char* const (&names)[N], decltype(Last) e, const char* unknown) {
  static_assert(N == static_cast<size_t>(Last) + 1, "one name for every value up to the last");
  auto i = static_cast<size_t>(e);
  return i < N ? names[i] : unknown;
}

}  // namespace imptrace
