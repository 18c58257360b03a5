// The shared JSON writer: structure, and escaping of everything a trace may contain.
#include <gtest/gtest.h>

#include <sstream>

#include "json_check.h"
#include "json_writer.h"

using imptrace::json_quote;
using imptrace::JsonWriter;
using imptrace::testing::Json;

TEST(JsonWriter, EscapesAllControlCharacters) {
  std::string all;
  for (int c = 0; c < 0x20; ++c) all += static_cast<char>(c);
  all += "\"\\/\x7f";
  std::string q = json_quote(all);
  for (char c : q) EXPECT_GE(static_cast<unsigned char>(c), 0x20) << q;
  EXPECT_EQ(Json::parse(q).str, all);
}

TEST(JsonWriter, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(json_quote("a\xff" "b"), "\"a\\ufffdb\"");
  EXPECT_EQ(json_quote("\xc3"), "\"\\ufffd\"");               // truncated sequence
  EXPECT_EQ(json_quote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");     // overlong
  EXPECT_EQ(json_quote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate
  EXPECT_EQ(json_quote("h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"h\xc3\xa9llo \xe2\x82\xac \xf0\x9f\x98\x80\"");  // valid UTF-8 passes through
}

TEST(JsonWriter, NestedStructureIsValidJson) {
  for (bool pretty : {true, false}) {
    std::ostringstream out;
    JsonWriter w(out, pretty);
    w.begin_object();
    w.field("a", 1);
    w.field("b", std::string("x"));
    w.key("c");
    w.begin_array();
    w.value(true);
    w.null();
    w.begin_object();
    w.end_object();
    w.begin_array();
    w.end_array();
    w.value(1.5);
    w.value(static_cast<uint64_t>(~0ull));
    w.value(static_cast<int64_t>(-5));
    w.end_array();
    w.field_or_null("d", "");
    w.end_object();
    w.finish();
    Json j = Json::parse(out.str());
    EXPECT_EQ(j["a"].num, 1);
    EXPECT_EQ(j["b"].str, "x");
    EXPECT_EQ(j["c"].size(), 7u);
    EXPECT_TRUE(j["c"][1].is_null());
    EXPECT_EQ(j["c"][6].num, -5);
    EXPECT_TRUE(j["d"].is_null());
    EXPECT_NE(out.str().find("18446744073709551615"), std::string::npos);
  }
}
