// A minimal strict JSON parser for tests: checks that the viewer's output is valid JSON
// and lets tests look at its shape. Not for production use (no depth or size limits).
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace imptrace {
namespace testing {

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  bool has(const std::string& k) const {
    for (const auto& m : members)
      if (m.first == k) return true;
    return false;
  }
  const Json& operator[](const std::string& k) const {
    for (const auto& m : members)
      if (m.first == k) return m.second;
    throw std::runtime_error("no key " + k);
  }
  const Json& operator[](size_t i) const { return items.at(i); }
  size_t size() const { return kind == Array ? items.size() : members.size(); }
  bool is_null() const { return kind == Null; }

  static Json parse(const std::string& text) {
    size_t i = 0;
    Json v = parse_value(text, i);
    skip_ws(text, i);
    if (i != text.size()) throw std::runtime_error("trailing data at " + std::to_string(i));
    return v;
  }

 private:
  static void skip_ws(const std::string& s, size_t& i) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  }
  static void expect(const std::string& s, size_t& i, const char* lit) {
    for (const char* p = lit; *p; ++p, ++i)
      if (i >= s.size() || s[i] != *p) throw std::runtime_error(std::string("expected ") + lit);
  }
  static std::string parse_string(const std::string& s, size_t& i) {
    expect(s, i, "\"");
    std::string out;
    while (true) {
      if (i >= s.size()) throw std::runtime_error("unterminated string");
      unsigned char c = s[i++];
      if (c == '"') return out;
      if (c < 0x20) throw std::runtime_error("raw control character in string");
      if (c != '\\') { out += static_cast<char>(c); continue; }
      if (i >= s.size()) throw std::runtime_error("bad escape");
      char e = s[i++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          if (i + 4 > s.size()) throw std::runtime_error("bad \\u");
          unsigned cp = std::stoul(s.substr(i, 4), nullptr, 16);
          i += 4;
          if (cp < 0x80) out += static_cast<char>(cp);
          else if (cp < 0x800) { out += static_cast<char>(0xc0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3f)); }
          else { out += static_cast<char>(0xe0 | (cp >> 12)); out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f)); out += static_cast<char>(0x80 | (cp & 0x3f)); }
          break;
        }
        default: throw std::runtime_error("bad escape");
      }
    }
  }
  static Json parse_value(const std::string& s, size_t& i) {
    skip_ws(s, i);
    if (i >= s.size()) throw std::runtime_error("unexpected end");
    Json v;
    char c = s[i];
    if (c == '{' || c == '[') {  // an object or an array: comma-separated, one loop for both
      v.kind = c == '{' ? Object : Array;
      const char* close = c == '{' ? "}" : "]";
      ++i;
      skip_ws(s, i);
      if (i < s.size() && s[i] == close[0]) { ++i; return v; }
      while (true) {
        if (v.kind == Object) {
          skip_ws(s, i);
          std::string k = parse_string(s, i);
          skip_ws(s, i);
          expect(s, i, ":");
          v.members.emplace_back(k, parse_value(s, i));
        } else {
          v.items.push_back(parse_value(s, i));
        }
        skip_ws(s, i);
        if (i < s.size() && s[i] == ',') { ++i; continue; }
        expect(s, i, close);
        return v;
      }
    }
    if (c == '"') { v.kind = String; v.str = parse_string(s, i); return v; }
    if (c == 't') { expect(s, i, "true"); v.kind = Bool; v.b = true; return v; }
    if (c == 'f') { expect(s, i, "false"); v.kind = Bool; return v; }
    if (c == 'n') { expect(s, i, "null"); return v; }
    size_t start = i;
    if (s[i] == '-') ++i;
    while (i < s.size() && (isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-')) ++i;
    if (start == i) throw std::runtime_error("unexpected character");
    v.kind = Number;
    v.num = std::strtod(s.substr(start, i - start).c_str(), nullptr);
    return v;
  }
};

}  // namespace testing
}  // namespace imptrace
