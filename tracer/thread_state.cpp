#include "thread_state.h"

namespace imptrace {

thread_local ThreadState t_state;

// (The in-flight table, keyed by the parent file's string ids, empties itself at its next
// use: the fork moved the strings epoch; see imports_in_flight.cpp.)
void forget_thread_id_in_child() { t_state.tid = 0; }

}  // namespace imptrace
