#include "object_identity.h"

#include <string.h>

#include "dense_table.h"
#include "hash.h"
#include "open_table.h"
#include "process_state.h"
#include "thread_state.h"

namespace imptrace {
namespace {

// The token of an untracked object is generation << 48 | address (user-space addresses fit
// in 48 bits on x86_64 and AArch64). Plain modules are watched by types.ModuleType's
// dealloc; anything else tracked gets a weak reference whose callback does the same. The
// table is touched only with the main interpreter's GIL held, and neither path takes the
// writer lock (they can run inside our own Py_DecRef).
struct IdentitySlot {  // 16 bytes: the table is touched for every import
  uintptr_t addr;
  uint16_t generation;   // only its low kGenerationBits reach the token
  uint16_t by_weakref;   // the live tracked object is watched by a weak reference (owned
                         // by its entry in the deaths table), not by dealloc
  uint32_t serial;       // the live tracked object's id; 0 when none
};
struct IdentityTraits {
  static uint64_t hash(const IdentitySlot& s) { return hash_address(s.addr); }
};
constexpr uint64_t kAddressId = 1ull << 62;  // above every serial (4 billion before one wraps);
                                             // tracked_identity (object_identity.h) knows it
constexpr int kGenerationShift = 48;
constexpr uint64_t kGenerationMask = 0x3fff;  // 14 bits: below kAddressId

// weakref -> address, for the callback (which is handed the dead weakref only).
struct DeathSlot { PyObject* weakref; uintptr_t addr; };
constexpr uintptr_t kTombstone = 1;

struct Identities {
  DenseTable<IdentitySlot, IdentityTraits> by_address;
  uint32_t next_serial;
  DeathSlot* deaths;  // open addressing by weakref
  size_t deaths_cap, deaths_used;
  PyObject* died_callback;  // one callback for all weakrefs (deliberately kept)
  DestructorFn orig_module_dealloc;
  uint32_t died;  // identity_deaths()
};
Identities g_ids{};  // constant-initialised: no static initialiser runs at load

IdentitySlot* identity_slot(uintptr_t addr, bool create) {
  uint64_t h = hash_address(addr);
  decltype(g_ids.by_address)::Hole hole;
  uint32_t pos = g_ids.by_address.find(h, [addr](const IdentitySlot& s) { return s.addr == addr; }, &hole);
  if (pos != g_ids.by_address.kNone) return &g_ids.by_address.at(pos);
  if (!create) return nullptr;
  IdentitySlot* s = g_ids.by_address.insert(h, nullptr, hole);
  if (s) s->addr = addr;
  return s;
}

bool deaths_put(PyObject* w, uintptr_t addr) {
  // Tombstones (weakrefs whose object died) are dropped when the table grows.
  if (table_full(g_ids.deaths_used + 1, g_ids.deaths_cap) &&
      !grow_table(g_ids.deaths, g_ids.deaths_cap, 256,
                  [](const DeathSlot& d) -> uint64_t {
                    return d.addr == kTombstone || !d.weakref ? 0 : hash_address(reinterpret_cast<uintptr_t>(d.weakref));
                  },
                  &g_ids.deaths_used))
    return false;
  size_t j = hash_address(reinterpret_cast<uintptr_t>(w)) & (g_ids.deaths_cap - 1);
  while (g_ids.deaths[j].weakref) j = (j + 1) & (g_ids.deaths_cap - 1);
  g_ids.deaths[j] = DeathSlot{w, addr};
  ++g_ids.deaths_used;
  return true;
}

PyObject* object_died(PyObject*, PyObject* weakref) {
  if (g_ids.deaths_cap) {
    size_t j = hash_address(reinterpret_cast<uintptr_t>(weakref)) & (g_ids.deaths_cap - 1);
    while (g_ids.deaths[j].weakref) {
      if (g_ids.deaths[j].weakref == weakref && g_ids.deaths[j].addr != kTombstone) {
        // The callback runs before the object's memory is freed, so the slot is still
        // the dead object's: no other object can have been tracked at its address yet.
        IdentitySlot* s = identity_slot(g_ids.deaths[j].addr, false);
        g_ids.deaths[j].addr = kTombstone;
        if (s && s->by_weakref) {
          ++g_ids.died;
          ++s->generation;
          s->serial = 0;
          s->by_weakref = 0;
        }
        py.Py_DecRef(weakref);
        break;
      }
      j = (j + 1) & (g_ids.deaths_cap - 1);
    }
  }
  py.Py_IncRef(py.None);
  return py.None;
}
PyMethodDef g_object_died_def = {"_imptrace_object_died", reinterpret_cast<void*>(object_died), METH_O,
                                 "imptrace: an object it identified died"};

// Every module's deallocation, in every interpreter. Only the main interpreter's objects
// are in the table; a slot that has a weak reference is left to its callback. Once
// finalisation has begun nothing is recorded any more, and the interpreter is not asked
// about (its thread state may be on its way out).
void module_dealloc_hook(PyObject* m) {
  if (g_ids.by_address.size() && !finalizing() && in_main_interpreter()) {
    IdentitySlot* s = identity_slot(reinterpret_cast<uintptr_t>(m), false);
    if (s && s->serial && !s->by_weakref) {
      ++g_ids.died;
      ++s->generation;
      s->serial = 0;
    }
  }
  g_ids.orig_module_dealloc(m);
}

}  // namespace

void watch_module_deaths() {
  if (!g_ids.orig_module_dealloc) g_ids.orig_module_dealloc = patch_module_dealloc(module_dealloc_hook);
}

uint32_t identity_deaths() { return g_ids.died; }

uint64_t identity(PyObject* o, bool track) {
  auto addr = reinterpret_cast<uintptr_t>(o);
  IdentitySlot* s = nullptr;
  if (track && in_main_interpreter()) {
    s = identity_slot(addr, true);
    // No serial: nothing tracked lives here (a death clears it, and the weak reference).
    if (s && !s->serial) {
      if (g_ids.orig_module_dealloc && type_of(o) == py.PyModule_Type) {
        s->serial = ++g_ids.next_serial;  // module_dealloc_hook sees it die
      } else {
        if (!g_ids.died_callback) g_ids.died_callback = py.PyCFunction_NewEx(&g_object_died_def, nullptr, nullptr);
        PyObject* w = g_ids.died_callback ? py.PyWeakref_NewRef(o, g_ids.died_callback) : nullptr;
        if (!w) py.PyErr_Clear();  // no weakref support: the address is all there is
        if (w && !deaths_put(w, addr)) { py.Py_DecRef(w); w = nullptr; }
        if (w) {
          s->by_weakref = 1;
          s->serial = ++g_ids.next_serial;
        }
      }
    }
  } else if (g_ids.by_address.size()) {
    s = identity_slot(addr, false);
  }
  // A live serial at this address means this very object is the tracked one.
  if (s && s->serial) return s->serial;
  return kAddressId | (static_cast<uint64_t>(s ? s->generation & kGenerationMask : 0) << kGenerationShift) | addr;
}

void forget_lifetime_identities() {
  // The objects may be gone without their deaths having been seen (finalisation runs no
  // weakref callbacks it can skip): every address starts a new generation, so no token of
  // the next lifetime can equal one of this one, and serials go on counting.
  for (uint32_t i = 0; i < g_ids.by_address.size(); ++i) {
    IdentitySlot& s = g_ids.by_address.at(i);
    ++s.generation;
    s.serial = 0;
    s.by_weakref = 0;
  }
  if (g_ids.deaths) memset(g_ids.deaths, 0, g_ids.deaths_cap * sizeof *g_ids.deaths);
  g_ids.deaths_used = 0;
  g_ids.died_callback = nullptr;
}

}  // namespace imptrace
