// How often the whole of sys.modules may be compared with the tracer's shadow (3.8-3.11).
//
// A top-level import boundary compares the whole dict, so that a change no hook sees (a
// C `PyDict_SetItem`, 3.11's specialised store replacing an entry in place) is found
// there, unless every change since the last comparison was the import system's own, seen
// by the hooks (modules_shadow.cpp, accounted_version; on 3.11 with importlib's stores
// kept generic, cpython_api.h keep_stores_generic). When the size and the keys on the import's
// path agree, that comparison is a walk of every entry to confirm none changed in place:
// its cost grows with the number of modules loaded, so a program importing 20,000
// modules one after another from one file paid it 20,000 times (quadratic; 3.11, 20,000
// imports: a third of the traced run's CPU time in the walk).
//
// Such a confirming walk is therefore only made when the time since the last one is at
// least kRatio times what that one took (so it costs at most 1/kRatio of the run,
// whatever the number of imports), or when the last one was cheap (a small sys.modules:
// every top-level boundary walks, as before). A walk skipped is owed: the next allowed
// boundary makes it, or at the latest an atexit function (registered, through the atexit
// module, the first time a walk is put off). A change found by an owed walk is recorded
// AT_BOUNDARY as ever, with the stack at that later boundary. Comparisons forced
// by a difference already seen (size, a key on the import's path) are never deferred.
#pragma once

#include <stdint.h>

namespace imptrace {

class WalkBudget {
 public:
  static constexpr uint64_t kRatio = 256;
  static constexpr uint64_t kAlwaysNs = 4000;  // about 600 entries' walk

  bool due(uint64_t now_ns) const {
    return last_cost_ns_ <= kAlwaysNs || now_ns - last_end_ns_ >= last_cost_ns_ * kRatio;
  }
  void skipped() { owed_ = true; }
  void walked(uint64_t start_ns, uint64_t end_ns) {
    last_cost_ns_ = end_ns > start_ns ? end_ns - start_ns : 0;
    last_end_ns_ = end_ns;
    owed_ = false;
  }
  bool owed() const { return owed_; }

 private:
  uint64_t last_end_ns_ = 0;
  uint64_t last_cost_ns_ = 0;
  bool owed_ = false;
};

}  // namespace imptrace
