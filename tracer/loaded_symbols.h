// Whether any loaded object could define a dynamic symbol, answered from the objects' own
// GNU hash tables: no dlsym, no malloc, no system call.
#pragma once

namespace imptrace {

// False only when every object loaded in the process definitely does not export `name`
// (then a dlsym(RTLD_DEFAULT, name) would fail). True when one might: its hash table says
// so, or it cannot tell (an object without a GNU hash table, a table that does not look
// sound). A true answer is to be confirmed with dlsym.
bool maybe_exported_by_a_loaded_object(const char* name);

}  // namespace imptrace
