// proto/wire.h: what the encoder writes, the reader reads back, and malformed input
// turns the reader's `ok` false instead of reading out of bounds.
#include <gtest/gtest.h>

#include <string>

#include "wire.h"

using namespace imptrace::wire;

TEST(Wire, VarintRoundTrip) {
  const uint64_t values[] = {0, 1, 127, 128, 300, 16383, 16384, 0xffffffffull, ~0ull};
  for (uint64_t v : values) {
    ByteBuf b;
    put_varint(b, v);
    EXPECT_EQ(b.n, varint_size(v));
    Reader r(b.p, b.n);
    EXPECT_EQ(r.varint(), v);
    EXPECT_TRUE(r.ok);
    EXPECT_TRUE(r.done());
  }
}

TEST(Wire, NestedMessageRoundTrip) {
  ByteBuf b;
  auto outer = begin_message(b, 3);
  put_uint(b, 1, 42);
  put_string(b, 2, "hello");
  auto inner = begin_message(b, 4);
  std::string big(300, 'x');  // length needs a 2-byte varint: exercises the shift
  put_bytes(b, 1, big.data(), big.size());
  end_message(b, inner);
  end_message(b, outer);

  Reader r(b.p, b.n);
  uint32_t f;
  WireType t;
  ASSERT_TRUE(r.tag(f, t));
  EXPECT_EQ(f, 3u);
  EXPECT_EQ(t, LEN);
  Reader m = r.sub();
  ASSERT_TRUE(r.ok);
  EXPECT_TRUE(r.done());
  ASSERT_TRUE(m.tag(f, t));
  EXPECT_EQ(f, 1u);
  EXPECT_EQ(m.varint(), 42u);
  ASSERT_TRUE(m.tag(f, t));
  Reader s = m.sub();
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(s.p), s.end - s.p), "hello");
  ASSERT_TRUE(m.tag(f, t));
  EXPECT_EQ(f, 4u);
  Reader in = m.sub();
  ASSERT_TRUE(in.tag(f, t));
  Reader bs = in.sub();
  EXPECT_EQ(static_cast<size_t>(bs.end - bs.p), big.size());
  EXPECT_TRUE(m.ok && m.done());
}

// The encoder keeps one byte for a nested message's length and shifts longer bodies: the
// bytes must be the canonical encoding for 1-, 2- and 3-byte lengths.
TEST(Wire, NestedMessageLengthBytes) {
  for (size_t body : {size_t(0), size_t(5), size_t(125), size_t(126), size_t(200), size_t(16381), size_t(20000)}) {
    ByteBuf b;
    auto m = begin_message(b, 2);
    std::string data(body >= 3 ? body - 3 : 0, 'y');  // put_bytes adds tag + 1- or 2-byte length
    if (body) put_bytes(b, 1, data.data(), data.size());
    size_t payload = b.n - m.body_start;
    end_message(b, m);
    ByteBuf want;
    put_tag(want, 2, LEN);
    put_varint(want, payload);
    ASSERT_EQ(b.n, want.n + payload) << body;
    EXPECT_EQ(0, memcmp(b.p, want.p, want.n)) << body;
    Reader r(b.p, b.n);
    uint32_t f;
    WireType t;
    ASSERT_TRUE(r.tag(f, t));
    Reader in = r.sub();
    EXPECT_TRUE(r.ok && r.done()) << body;
    EXPECT_EQ(static_cast<size_t>(in.end - in.p), payload) << body;
  }
}

TEST(Wire, ZeroScalarsAreOmitted) {
  ByteBuf b;
  put_uint(b, 1, 0);
  put_bool(b, 2, false);
  put_string(b, 3, "");
  EXPECT_EQ(b.n, 0u);
}

TEST(Wire, MalformedInputFailsSafely) {
  // A length prefix past the end.
  const uint8_t too_long[] = {0x0a, 0x7f, 0x01};
  Reader r(too_long, sizeof too_long);
  uint32_t f;
  WireType t;
  ASSERT_TRUE(r.tag(f, t));
  r.sub();
  EXPECT_FALSE(r.ok);
  // An endless varint.
  const uint8_t endless[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  Reader v(endless, sizeof endless);
  v.varint();
  EXPECT_FALSE(v.ok);
  // Field number 0 and group wire types.
  const uint8_t zero_field[] = {0x00};
  Reader z(zero_field, 1);
  EXPECT_FALSE(z.tag(f, t));
  const uint8_t group[] = {0x0b};
  Reader g(group, 1);
  ASSERT_TRUE(g.tag(f, t));
  EXPECT_FALSE(g.skip(t));
}
