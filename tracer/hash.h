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

}  // namespace imptrace
