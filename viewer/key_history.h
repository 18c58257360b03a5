// What sat under each sys.modules key of one process, in time order: the one history that
// `why`, `diff` and `report` tell, built from the model's ModulesChange and Import records
// by one set of rules:
// - Changes and returning imports are merged in time order; at equal times the change
//   comes first (an import returns after the assignment made during it).
// - A change whose old object is not the key's current entry first gives that object an
//   entry of its own (`before_trace`): it got there before tracing started, or its record
//   was lost. A plain module is taken to have come from the import system, anything else
//   from an assignment.
// - Setting the object already there is no news, unless its class changed (a __class__
//   assignment: LazyLoader's _LazyModule and back): that is a class change of the entry,
//   which stays one object (`class_changes`).
// - The import system setting the object the key holds again, outside an import of that
//   key, is a reload (importlib.reload executes the same object again and stores it back):
//   one more `reloads` on the entry. 3.12+ see reload's pop before the store; that delete
//   does not end the entry when the store of the same object follows.
// - A change during an import of its own key whose old object was never seen arriving: that
//   object is the module the import created (a module replacing itself in sys.modules),
//   so its entry comes from that import, not from before tracing.
// - An import of a key made while an enclosing import of the same key is running, after
//   that module was created, is a re-entry: a lookup inside the module's initialisation
//   (scipy's PEP 562 __getattr__ importing scipy.stats while scipy.stats runs). The entry's
//   import is the outermost one; an import nested under the first import of a package
//   above the key ran before the outer import created the module, so it is no re-entry.
// - An import returning an object that is not the current entry (the tracer recorded no
//   change for it) puts that object there as of the import's start: its children are bound
//   before the import returns.
// - A delete, or a clear of the whole dict, ends the current entry (`removed`).
// - The end of an interpreter lifetime (Py_FinalizeEx in an embedding host that initialises
//   Python again) ends every current entry (`finalized`): the next lifetime has a new
//   sys.modules, and its modules are new objects, not replacements. (The last lifetime's
//   end is the trace's end, as in a program that never re-initialises.) Each entry knows its
//   lifetime; re-entries are looked for within one lifetime.
// Entries point into the Process, which must outlive the history.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "model.h"
#include "ordered_table.h"

namespace imptrace {
namespace model {

// How an entry's object relates to earlier entries of the process.
enum class Relation : uint8_t {
  New = 0,          // first time the object is seen under any key
  SameAsKey = 1,    // the object first sat under another key (`same_as_key`)
  SameAsEntry = 2,  // the object sat under this key before (entry `same_as_entry`)
};

struct KeyEntry {
  const ObjectRef* object = nullptr;
  const ModulesChange* change = nullptr;   // the change that put it there, if any
  const Import* import = nullptr;          // the first import that returned it while there
  const ModulesChange* removal = nullptr;  // the delete or clear that ended it
  const Import* during = nullptr;          // the import in progress when `change` happened
  std::vector<const ModulesChange*> reloads;  // the stores of importlib.reload, in order
  // Sets of the same object with another class, in order; each change's new_object has
  // the class it changed to.
  std::vector<const ModulesChange*> class_changes;
  uint64_t time_ns = 0;                    // when it got there; 0 for before_trace
  std::string_view same_as_key;
  uint32_t same_as_entry = 0;
  Relation relation = Relation::New;
  bool via_import = true;    // by the import system, else by assignment
  bool before_trace = false;
  bool removed = false;
  bool finalized = false;    // still there when its interpreter lifetime ended
  uint32_t lifetime = 0;     // Process::lifetime_at its time (0: the trace marks none)

  // The test it got there in (nullptr: unknown).
  const Str* test() const;
  // Put under `key` by the module's own import, as another module already under another
  // name: the module made its name an alias (3.13's collections/abc.py puts
  // _collections_abc there). The module's design, not a replacement.
  bool alias_made_by_own_import(std::string_view key) const {
    return change && !via_import && during && std::string_view(during->name.str()) == key && object->is_plain_module() &&
           relation == Relation::SameAsKey;
  }
  // Where the code that put it there was: the change's stack (innermost first), else empty.
  const std::vector<Location>* stack() const { return change ? &change->stack : nullptr; }
};

// A key's entries. Nearly every key holds one object for the whole run: the first entry
// sits inline, so 100,000s of keys cost no allocation each; later ones go to `rest_`.
class KeyEntries {
 public:
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  KeyEntry& operator[](size_t i) { return i ? rest_[i - 1] : first_; }
  const KeyEntry& operator[](size_t i) const { return i ? rest_[i - 1] : first_; }
  KeyEntry& back() { return (*this)[n_ - 1]; }
  void push_back(const KeyEntry& e) {
    if (n_) rest_.push_back(e);
    else first_ = e;
    ++n_;
  }
  template <class L, class T> struct Iter {
    L* list;
    size_t i;
    T& operator*() const { return (*list)[i]; }
    Iter& operator++() { ++i; return *this; }
    bool operator!=(const Iter& o) const { return i != o.i; }
  };
  Iter<KeyEntries, KeyEntry> begin() { return {this, 0}; }
  Iter<KeyEntries, KeyEntry> end() { return {this, n_}; }
  Iter<const KeyEntries, const KeyEntry> begin() const { return {this, 0}; }
  Iter<const KeyEntries, const KeyEntry> end() const { return {this, n_}; }

 private:
  KeyEntry first_;
  std::vector<KeyEntry> rest_;
  size_t n_ = 0;
};

struct KeyHistory {
  KeyEntries entries;
  int64_t current = -1;  // the entry under the key at the end, -1 none
  bool has_proxy = false;
};

// The first frame of `stack` (innermost first) outside importlib: the code that caused
// what importlib did (the `importlib.reload(m)` line, the attribute access that made
// LazyLoader load), by is_importlib_frame. nullptr when every frame is importlib's.
const Location* outside_importlib(const std::vector<Location>& stack);

class ModulesHistory {
 public:
  explicit ModulesHistory(const Process& p);

  // Keys in order of first appearance.
  size_t size() const { return keys_.size(); }
  std::string_view key(size_t i) const { return keys_.key(i); }
  const KeyHistory& history(size_t i) const { return keys_.value(i); }
  const KeyHistory* find(std::string_view key) const { return keys_.find(key); }
  // Position of `key`, or -1.
  int64_t position(std::string_view key) const {
    const KeyHistory* h = keys_.find(key);
    return h ? h - keys_.values().data() : -1;
  }
  // Whether the import at `import_pos` (in Process::imports) is a re-entry (rules above).
  bool reentry(size_t import_pos) const { return import_pos < reentry_.size() && reentry_[import_pos]; }
  // The key an object first sat under, or nullptr when it never sat under one.
  const std::string_view* first_key_of(uint64_t object_id) const { return first_key_of_.find(object_id); }

 private:
  KeyEntry& push(KeyHistory& h, std::string_view key, const ObjectRef& obj, bool via_import,
                 uint64_t t);
  void apply(const ModulesChange& c);
  void apply(const Import& im);
  void end_lifetime();
  void find_reentries();
  // The import in progress when `c` happened, or nullptr.
  const Import* during(const ModulesChange& c) const;
  // `im`, or, for a re-entry, the outermost import of the same key around it.
  const Import& outermost(const Import& im) const;

  const Process& p_;
  std::vector<bool> reentry_;  // per import of p_
  NameTable<KeyHistory> keys_;
  OrderedTable<uint64_t, std::string_view, IdHash> first_key_of_;
};

}  // namespace model
}  // namespace imptrace
