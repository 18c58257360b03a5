// The tracer's hash tables (string interning, object identity, the sys.modules shadow):
// entries stored densely in insertion order, in chunks that never move, found through an
// index of 4-byte slots. Why not entries in the slots themselves: a table three quarters
// full is a quarter empty, and each doubling leaves the old copy behind; with 16- to
// 64-byte entries that was most of the pages the tracer touched (each first touch costs
// 10-15 us on CI's virtual machines). Here only the small index doubles, and an entry's
// address and position stay valid for the table's life.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tracer_memory.h"

namespace imptrace {

// Items in chunks of 1024 that never move: growing never copies an item or leaves a dead
// copy behind, and an item's address stays valid for the array's life.
template <class T>
class ChunkedArray {
 public:
  uint32_t size() const { return n_; }
  T& operator[](uint32_t i) const { return chunks_[i >> kChunkBits][i & (kChunk - 1)]; }
  // A zeroed item at the end; null when out of memory.
  T* push() {
    if ((n_ >> kChunkBits) == nchunks_ && !add_chunk()) return nullptr;
    T* t = &(*this)[n_++];
    memset(static_cast<void*>(t), 0, sizeof(T));
    return t;
  }
  // Forgets the items; the chunks are kept and refilled.
  void clear() { n_ = 0; }

 private:
  static constexpr unsigned kChunkBits = 10;
  static constexpr size_t kChunk = size_t{1} << kChunkBits;

  bool add_chunk() {
    if (nchunks_ == cap_chunks_) {
      size_t nc = cap_chunks_ ? cap_chunks_ * 2 : 64;
      auto* p = static_cast<T**>(tracer_memory::resize(chunks_, cap_chunks_ * sizeof(T*), nc * sizeof(T*)));
      if (!p) return false;
      chunks_ = p;
      cap_chunks_ = nc;
    }
    auto* c = static_cast<T*>(tracer_memory::alloc(kChunk * sizeof(T)));
    if (!c) return false;
    chunks_[nchunks_++] = c;
    return true;
  }

  T** chunks_ = nullptr;
  size_t nchunks_ = 0, cap_chunks_ = 0;
  uint32_t n_ = 0;
};

// Entry: trivially copyable; Traits::hash(const Entry&) gives the hash an entry was
// inserted with (needed again when the index grows).
template <class Entry, class Traits>
class DenseTable {
 public:
  static constexpr uint32_t kNone = ~0u;
  static constexpr uint32_t kMaxEntries = (1u << 24) - 2;  // positions + 1 fit 24 bits

  uint32_t size() const { return entries_.size(); }
  Entry& at(uint32_t pos) const { return entries_[pos]; }

  // Where a find that found nothing stopped: the empty index slot the entry would take,
  // valid for an insert of the same hash while the table has not changed since.
  struct Hole {
    size_t slot = 0;
    uint32_t size = kNone;  // entries when it was found; kNone: no hole
  };

  // Position of the entry with hash h for which eq(entry) holds; kNone when none (then
  // *hole, if given, is where the probe ended).
  template <class Eq>
  uint32_t find(uint64_t h, Eq eq, Hole* hole = nullptr) const {
    if (!cap_) return kNone;
    uint32_t tag = tag_of(h);
    for (size_t j = home(h);; j = (j + 1) & (cap_ - 1)) {
      uint32_t s = index_[j];
      if (!s) {
        if (hole) *hole = Hole{j, entries_.size()};
        return kNone;
      }
      if ((s & kTagMask) == tag) {
        uint32_t pos = (s & kPosMask) - 1;
        if (eq(at(pos))) return pos;
      }
    }
  }

  // A new zeroed entry for hash h (the caller knows h is not there yet); its position in
  // *pos. Null when out of memory or entries. `hole`: what the caller's find of h left,
  // so that a miss followed by an insert walks the probe sequence once.
  Entry* insert(uint64_t h, uint32_t* pos = nullptr, Hole hole = Hole()) {
    uint32_t p = entries_.size();
    if (p >= kMaxEntries) return nullptr;
    // The index is kept at most half full: with linear probing a lookup that finds
    // nothing (every string's first interning, every new object's identity) walks about
    // 1 / (1 - load)^2 / 2 slots: about eight at three quarters full, at most two and a
    // half at half. 4 bytes a slot: the larger index is small beside the entries.
    if ((p + 1) * 2 > cap_) {
      if (!grow_index()) return nullptr;
      hole = Hole();  // the index was rebuilt
    }
    Entry* e = entries_.push();
    if (!e) return nullptr;
    if (hole.size == p) index_[hole.slot] = tag_of(h) | (p + 1);
    else place(h, p);
    if (pos) *pos = p;
    return e;
  }

  // Forgets every entry (a fork child's fresh file); the chunks are kept and refilled.
  void clear() {
    if (index_) memset(index_, 0, cap_ * sizeof(uint32_t));
    entries_.clear();
  }

 private:
  static constexpr uint32_t kPosMask = (1u << 24) - 1;
  static constexpr uint32_t kTagMask = ~kPosMask;
  static constexpr size_t kFirstIndex = 1024;

  // 8 bits of the hash that the slot position does not use (until 2^24 slots): a probe
  // looks at an entry only when they match.
  static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 32) & kTagMask; }
  // The hashes' lowest bit is always 1 (hash_bytes and hash_address are never 0): slots
  // taken from bit 0 up would all be odd, every probe run twice as long.
  size_t home(uint64_t h) const { return (h >> 1) & (cap_ - 1); }

  void place(uint64_t h, uint32_t pos) {
    size_t j = home(h);
    while (index_[j]) j = (j + 1) & (cap_ - 1);
    index_[j] = tag_of(h) | (pos + 1);
  }

  bool grow_index() {
    size_t nc = cap_ ? cap_ * 2 : kFirstIndex;
    auto* ni = static_cast<uint32_t*>(tracer_memory::alloc(nc * sizeof(uint32_t)));
    if (!ni) return false;
    uint32_t* old = index_;
    size_t old_cap = cap_;
    index_ = ni;
    cap_ = nc;
    for (uint32_t p = 0; p < entries_.size(); ++p) place(Traits::hash(at(p)), p);
    tracer_memory::release(old, old_cap * sizeof(uint32_t));
    return true;
  }

  uint32_t* index_ = nullptr;
  size_t cap_ = 0;
  ChunkedArray<Entry> entries_;
};

}  // namespace imptrace
