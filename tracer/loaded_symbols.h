// Whether any loaded object could define a dynamic symbol, answered from the objects' own
// GNU hash tables: no dlsym, no malloc, no system call.
#pragma once

#include <stdint.h>

namespace imptrace {

// The GNU hash of a symbol name (glibc's dl_new_hash): h * 33 + c from 5381. Constant for
// a literal name, so the caller's name costs nothing to hash at run time.
constexpr uint32_t gnu_symbol_hash(const char* name) {
  uint32_t h = 5381;
  for (; *name; ++name) h = h * 33 + static_cast<unsigned char>(*name);
  return h;
}

// False only when every object loaded in the process definitely does not export a symbol
// of that GNU hash (then a dlsym(RTLD_DEFAULT, name) would fail). True when one might: its
// hash table says so, or it cannot tell (an object without a GNU hash table, a table that
// does not look sound). A true answer is to be confirmed with dlsym.
bool maybe_exported_by_a_loaded_object(uint32_t gnu_hash);

}  // namespace imptrace
