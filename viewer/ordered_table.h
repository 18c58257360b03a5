// Tables for the per-process facts of traces with 100,000s of imports: keys are
// string_views into the (outliving) model or object ids, and no entry costs a node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string_view>
#include <utility>
#include <vector>

#include "prefault.h"

namespace imptrace {

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}
inline uint64_t hash_text(std::string_view s) { return std::hash<std::string_view>()(s); }

struct NameHash {
  uint64_t operator()(std::string_view s) const { return hash_text(s); }
};
// Key equality. Names of one process are mostly the same interned model::Str (an import's
// name, the sys.modules key it went in under, a binding's parent): same characters, so
// equal without comparing them.
inline bool same_key(std::string_view a, std::string_view b) { return (a.data() == b.data() && a.size() == b.size()) || a == b; }
inline bool same_key(uint64_t a, uint64_t b) { return a == b; }
// Object ids are addresses (aligned, close together): spread them over the whole word.
struct IdHash {
  uint64_t operator()(uint64_t x) const {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
  }
};

// A map whose entries stay in first-insertion order, for the per-process tables of
// 100,000s of names: keys and values live in two vectors (iteration is a walk over an
// array, and its order is deterministic), found through an open-addressing index of
// (hash, position) slots. No node per entry, no pointer chasing on lookup. Values move
// when the table grows: hold positions, not references, across an emplace.
template <class K, class V, class Hash>
class OrderedTable {
 public:
  void reserve(size_t n) {
    keys_.reserve(n);
    values_.reserve(n);
    prefault_capacity(keys_);
    prefault_capacity(values_);
    if (n * 2 > slots_.size()) rehash(n * 2);
  }
  // The value under `key` and whether it was just inserted (value-initialised).
  std::pair<V*, bool> emplace(const K& key) {
    if ((keys_.size() + 1) * 2 > slots_.size()) rehash(std::max<size_t>(16, slots_.size() * 2));
    uint64_t h = Hash()(key);
    size_t i = h & (slots_.size() - 1);
    for (;; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (!s.pos) break;
      if (s.tag == static_cast<uint32_t>(h >> 32) && same_key(keys_[s.pos - 1], key)) return {&values_[s.pos - 1], false};
    }
    slots_[i] = {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(keys_.size() + 1)};
    keys_.push_back(key);
    values_.emplace_back();
    return {&values_.back(), true};
  }
  const V* find(const K& key) const {
    if (slots_.empty()) return nullptr;
    uint64_t h = Hash()(key);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (!s.pos) return nullptr;
      if (s.tag == static_cast<uint32_t>(h >> 32) && same_key(keys_[s.pos - 1], key)) return &values_[s.pos - 1];
    }
  }
  V* find(const K& key) { return const_cast<V*>(static_cast<const OrderedTable*>(this)->find(key)); }

  size_t size() const { return keys_.size(); }
  const K& key(size_t i) const { return keys_[i]; }
  const std::vector<K>& keys() const { return keys_; }
  V& value(size_t i) { return values_[i]; }
  const V& value(size_t i) const { return values_[i]; }
  std::vector<V>& values() { return values_; }
  const std::vector<V>& values() const { return values_; }

 private:
  struct Slot {
    uint32_t tag;  // high half of the key's hash
    uint32_t pos;  // position in keys_ + 1; 0 = empty
  };
  void rehash(size_t n) {
    size_t cap = 16;
    while (cap < n) cap *= 2;
    prefaulted_assign(slots_, cap, Slot{0, 0});
    for (size_t k = 0; k < keys_.size(); ++k) {
      uint64_t h = Hash()(keys_[k]);
      size_t i = h & (cap - 1);
      while (slots_[i].pos) i = (i + 1) & (cap - 1);
      slots_[i] = {static_cast<uint32_t>(h >> 32), static_cast<uint32_t>(k + 1)};
    }
  }
  std::vector<Slot> slots_;
  std::vector<K> keys_;
  std::vector<V> values_;
};
template <class V> using NameTable = OrderedTable<std::string_view, V, NameHash>;

}  // namespace imptrace
