#include "json_writer.h"

#include <cmath>
#include <cstdio>

namespace imptrace {

namespace {
// Length of the valid UTF-8 sequence at s[i], or 0 if it is not one (overlongs,
// surrogates and code points above U+10FFFF are invalid too).
size_t utf8_sequence_length(const std::string& s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) { n = 2; cp = c & 0x1f; }
  else if (c >= 0xe0 && c <= 0xef) { n = 3; cp = c & 0x0f; }
  else if (c >= 0xf0 && c <= 0xf4) { n = 4; cp = c & 0x07; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (byte(i + k) & 0x3f);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff))) return 0;
  if (cp >= 0xd800 && cp <= 0xdfff) return 0;
  return n;
}
}  // namespace

std::string json_quote(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  out += '"';
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    size_t n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += "\\ufffd";
      ++i;
      continue;
    }
    out.append(s, i, n);
    i += n;
  }
  out += '"';
  return out;
}

void JsonWriter::newline() {
  if (!pretty_) return;
  out_ << '\n';
  for (size_t i = 0; i < has_element_.size(); ++i) out_ << "  ";
}

void JsonWriter::before_value() {
  if (after_key_) { after_key_ = false; return; }
  if (!has_element_.empty()) {
    if (has_element_.back()) out_ << ',';
    has_element_.back() = true;
    newline();
  }
}

void JsonWriter::key(const std::string& k) {
  before_value();
  out_ << json_quote(k) << (pretty_ ? ": " : ":");
  after_key_ = true;
}

void JsonWriter::open(char c) {
  before_value();
  out_ << c;
  has_element_.push_back(false);
}

void JsonWriter::close(char c) {
  bool had = !has_element_.empty() && has_element_.back();
  if (!has_element_.empty()) has_element_.pop_back();
  if (had) newline();
  out_ << c;
}

void JsonWriter::value(const std::string& s) { before_value(); out_ << json_quote(s); }
void JsonWriter::value(bool b) { before_value(); out_ << (b ? "true" : "false"); }
void JsonWriter::value(double d) {
  before_value();
  if (!std::isfinite(d)) { out_ << "null"; return; }
  char buf[40];
  snprintf(buf, sizeof buf, "%.15g", d);
  out_ << buf;
}
void JsonWriter::null() { before_value(); out_ << "null"; }
void JsonWriter::write_int(long long v) { before_value(); out_ << v; }
void JsonWriter::write_uint(unsigned long long v) { before_value(); out_ << v; }

void JsonWriter::string_array(const std::string& k, const std::vector<std::string>& items) {
  key(k);
  begin_array();
  for (const auto& s : items) value(s);
  end_array();
}

}  // namespace imptrace
