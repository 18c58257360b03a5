// One small streaming JSON writer shared by every command, so escaping is right once:
// all control characters are escaped, and bytes that are not valid UTF-8 (paths and
// messages come from other people's processes) become U+FFFD rather than invalid JSON.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

namespace imptrace {

// `s` as a quoted JSON string literal.
std::string json_quote(const std::string& s);

class JsonWriter {
 public:
  // pretty: newline and two-space indentation per level; otherwise compact.
  explicit JsonWriter(std::ostream& out, bool pretty = true) : out_(out), pretty_(pretty) {}

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(const std::string& k);

  void value(const std::string& s);
  void value(const char* s) { value(std::string(s ? s : "")); }
  void value(bool b);
  void value(double d);
  template <class T, std::enable_if_t<std::is_integral<T>::value && !std::is_same<T, bool>::value, int> = 0>
  void value(T v) {
    if (std::is_signed<T>::value) write_int(static_cast<long long>(v));
    else write_uint(static_cast<unsigned long long>(v));
  }
  void null();
  // A string, or null when it is empty.
  void string_or_null(const std::string& s) { if (s.empty()) null(); else value(s); }

  template <class T>
  void field(const std::string& k, const T& v) { key(k); value(v); }
  void null_field(const std::string& k) { key(k); null(); }
  void field_or_null(const std::string& k, const std::string& v) { key(k); string_or_null(v); }
  void string_array(const std::string& k, const std::vector<std::string>& items);
  // The same for any string-like items (model::Str).
  template <class S>
  void string_array(const std::string& k, const std::vector<S>& items) {
    key(k);
    begin_array();
    for (const auto& s : items) value(static_cast<const std::string&>(s));
    end_array();
  }

  // `"k": [{...}, ...]`: one object per item, its members written by `members(item)`.
  template <class Items, class Fn>
  void object_array(const std::string& k, const Items& items, Fn&& members) {
    key(k);
    begin_array();
    for (const auto& item : items) {
      begin_object();
      members(item);
      end_object();
    }
    end_array();
  }
  // Call at the end: terminates the document with a newline.
  void finish() { out_ << '\n'; }

 private:
  void before_value();
  void open(char c);
  void close(char c);
  void newline();
  void write_int(long long v);
  void write_uint(unsigned long long v);

  std::ostream& out_;
  bool pretty_;
  // Per open container: has it got an element yet?
  std::vector<bool> has_element_;
  bool after_key_ = false;
};

}  // namespace imptrace
