// A fast, non-cryptographic hash of short byte strings (module names, paths), 8 bytes per
// step; used by the interning table and the sys.modules shadow. Never 0 (0 = empty slot).
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

namespace imptrace {

inline uint64_t hash_bytes(const char* s, size_t n) {
  const uint64_t k = 0x9E3779B97F4A7C15ull;
  uint64_t h = n * k;
  while (n >= 8) {
    uint64_t w;
    memcpy(&w, s, 8);
    h = (h ^ w) * k;
    h ^= h >> 29;
    s += 8;
    n -= 8;
  }
  uint64_t w = 0;
  memcpy(&w, s, n);
  h = (h ^ w) * k;
  h ^= h >> 32;
  return h | 1;
}

// An address spread over a table's slots. Objects are allocated close together, so an
// address's own low bits put neighbours in neighbouring slots, and linear probing then
// walks long runs once a table is three quarters full. Never 0.
inline uint64_t hash_address(uintptr_t a) {
  uint64_t h = static_cast<uint64_t>(a >> 4) * 0x9E3779B97F4A7C15ull;
  return (h ^ (h >> 29)) | 1;
}

}  // namespace imptrace
