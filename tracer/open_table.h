// Growth of an open-addressing table with its entries in the slots (linear probing,
// power-of-two capacity). Only the weakref -> address map is one now: its entries go away
// (tombstones, dropped at growth), which dense_table.h's tables, used for everything else,
// do not support; and it holds only the few objects that are not plain modules.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tracer_memory.h"

namespace imptrace {

// Grow at three quarters full: these tables live in someone else's process, where memory
// is the scarcer resource (at half full, the tables of a 5,000-module run took a
// megabyte more); with well-mixed hashes linear probing stays short at this load.
inline bool table_full(size_t used, size_t cap) { return used * 4 >= cap * 3; }

// Doubles `slots` (or allocates `initial_cap` slots). `hash_of(slot)` is a slot's hash,
// 0 for an empty slot or one not worth keeping (a tombstone), which is dropped. On
// allocation failure the table stays as it was and false is returned.
template <class Slot, class HashOf>
bool grow_table(Slot*& slots, size_t& cap, size_t initial_cap, HashOf hash_of, size_t* kept = nullptr) {
  size_t nc = cap ? cap * 2 : initial_cap;
  auto* n = static_cast<Slot*>(tracer_memory::alloc(nc * sizeof(Slot)));
  if (!n) return false;
  size_t count = 0;
  for (size_t i = 0; i < cap; ++i) {
    uint64_t h = hash_of(slots[i]);
    if (!h) continue;
    size_t j = h & (nc - 1);
    while (hash_of(n[j])) j = (j + 1) & (nc - 1);
    n[j] = slots[i];
    ++count;
  }
  tracer_memory::release(slots, cap * sizeof(Slot));
  slots = n;
  cap = nc;
  if (kept) *kept = count;
  return true;
}

}  // namespace imptrace
