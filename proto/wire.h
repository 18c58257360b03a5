// Protocol Buffers wire format, the small part imptrace needs, shared by the tracer (which
// writes) and the viewer (which reads). Header-only, C library only, no exceptions, no
// allocation except ByteBuf's realloc: the tracer lives inside other people's processes and
// must not drag libprotobuf (symbol clashes with torch/onnx) or libstdc++ in.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace imptrace {
namespace wire {

enum WireType : uint32_t { VARINT = 0, I64 = 1, LEN = 2, I32 = 5 };

// A growable byte buffer. On allocation failure it turns `failed` and drops writes, so a
// writer under memory pressure loses data, never the host process.
struct ByteBuf {
  uint8_t* p = nullptr;
  size_t n = 0;
  size_t cap = 0;
  bool failed = false;

  ByteBuf() = default;
  ByteBuf(const ByteBuf&) = delete;
  ByteBuf& operator=(const ByteBuf&) = delete;
  ~ByteBuf() { free(p); }

  // One comparison on the fast path (every field the tracer writes): a failed buffer has
  // cap 0, so it always takes the slow path, which refuses.
  bool reserve(size_t extra) {
    if (n + extra <= cap) return true;
    return grow(extra);
  }
  // Out of line and cold: the tracer writes dozens of fields per import, and a copy of
  // this loop and its realloc inlined at each of them was most of the encoders' code,
  // spread through the lines the hot path runs (the L1 instruction cache, DESIGN.md).
  __attribute__((noinline, cold)) bool grow(size_t extra) {
    if (failed) return false;
    size_t want = cap ? cap * 2 : 256;
    while (want < n + extra) want *= 2;
    void* q = realloc(p, want);
    if (!q) { failed = true; cap = 0; return false; }
    p = static_cast<uint8_t*>(q);
    cap = want;
    return true;
  }
  void clear() { n = 0; failed = false; }
  void put(const void* src, size_t len) {
    if (!reserve(len)) return;
    memcpy(p + n, src, len);
    n += len;
  }
  void byte(uint8_t b) {
    if (!reserve(1)) return;
    p[n++] = b;
  }
};

inline size_t varint_size(uint64_t v) {
  size_t s = 1;
  while (v >= 0x80) { v >>= 7; ++s; }
  return s;
}

inline size_t encode_varint(uint8_t* out, uint64_t v) {
  size_t i = 0;
  while (v >= 0x80) { out[i++] = static_cast<uint8_t>(v | 0x80); v >>= 7; }
  out[i++] = static_cast<uint8_t>(v);
  return i;
}

inline void put_varint(ByteBuf& b, uint64_t v) {
  if (!b.reserve(10)) return;
  b.n += encode_varint(b.p + b.n, v);
}

inline void put_tag(ByteBuf& b, uint32_t field, WireType t) {
  put_varint(b, (static_cast<uint64_t>(field) << 3) | t);
}

// Scalar fields. Proto3 omits zero values, so do we: smaller traces, same meaning.
inline void put_uint(ByteBuf& b, uint32_t field, uint64_t v) {
  if (!v) return;
  if (!b.reserve(20)) return;  // tag and value: one check for both (the tracer's hot path)
  b.n += encode_varint(b.p + b.n, (static_cast<uint64_t>(field) << 3) | VARINT);
  b.n += encode_varint(b.p + b.n, v);
}
inline void put_sint64_as_int64(ByteBuf& b, uint32_t field, int64_t v) {
  if (!v) return;
  put_tag(b, field, VARINT);
  put_varint(b, static_cast<uint64_t>(v));
}
inline void put_bool(ByteBuf& b, uint32_t field, bool v) { put_uint(b, field, v ? 1 : 0); }

inline void put_bytes(ByteBuf& b, uint32_t field, const void* data, size_t len) {
  put_tag(b, field, LEN);
  put_varint(b, len);
  b.put(data, len);
}
inline void put_string(ByteBuf& b, uint32_t field, const char* s) {
  if (s && *s) put_bytes(b, field, s, strlen(s));
}

// Nested messages: the length prefix is only known at the end. One byte is kept for it,
// which is enough for the bodies the tracer writes at every import (under 128 bytes); a
// longer body is shifted right by the extra bytes its length varint needs. The bytes are
// the same either way.
struct Mark { size_t body_start; };

inline Mark begin_message(ByteBuf& b, uint32_t field) {
  if (b.reserve(6)) {  // tag (up to 5 bytes) and the length byte
    b.n += encode_varint(b.p + b.n, (static_cast<uint64_t>(field) << 3) | LEN);
    b.p[b.n++] = 0;
  }
  return Mark{b.n};
}
inline void end_message(ByteBuf& b, Mark m) {
  if (b.failed) return;
  size_t len = b.n - m.body_start;
  if (len < 0x80) {
    b.p[m.body_start - 1] = static_cast<uint8_t>(len);
    return;
  }
  size_t extra = varint_size(len) - 1;
  if (!b.reserve(extra)) return;
  memmove(b.p + m.body_start + extra, b.p + m.body_start, len);
  encode_varint(b.p + m.body_start - 1, len);
  b.n += extra;
}

// ---------------------------------------------------------------------------------------
// Reading. Every function checks bounds; a malformed input turns `ok` false and stays
// false, so a caller can parse optimistically and check once.
struct Reader {
  const uint8_t* p;
  const uint8_t* end;
  bool ok = true;

  Reader(const uint8_t* data, size_t len) : p(data), end(data + len) {}
  bool done() const { return !ok || p >= end; }

  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p >= end) { ok = false; return 0; }
      uint8_t c = *p++;
      v |= static_cast<uint64_t>(c & 0x7f) << shift;
      if (!(c & 0x80)) return v;
    }
    ok = false;  // more than 10 bytes: not a varint
    return 0;
  }
  // Reads a tag; returns false at the end of input or on a malformed tag.
  bool tag(uint32_t& field, WireType& type) {
    if (done()) return false;
    uint64_t t = varint();
    if (!ok) return false;
    field = static_cast<uint32_t>(t >> 3);
    type = static_cast<WireType>(t & 7);
    if (field == 0 || (t >> 3) > 0x1fffffff) { ok = false; return false; }
    return true;
  }
  // A length-delimited payload; returns a sub-reader over it.
  Reader sub() {
    uint64_t len = varint();
    if (!ok || len > static_cast<uint64_t>(end - p)) { ok = false; return Reader(p, 0); }
    Reader r(p, static_cast<size_t>(len));
    p += len;
    return r;
  }
  bool skip(WireType type) {
    switch (type) {
      case VARINT: varint(); break;
      case I64: if (end - p < 8) ok = false; else p += 8; break;
      case I32: if (end - p < 4) ok = false; else p += 4; break;
      case LEN: sub(); break;
      default: ok = false;  // groups (3, 4) and 6, 7 are not used by imptrace
    }
    return ok;
  }
};

}  // namespace wire
}  // namespace imptrace
