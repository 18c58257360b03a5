// Character-by-character escaping for the viewer's text formats (HTML, XML, Markdown
// cells). Each format differs only in what it writes for a few characters, so a format is
// a table of replacements and this one loop applies it.
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

namespace imptrace {

class CharEscaper {
 public:
  // `replace`: what each listed character becomes. `control`: what any other control
  // character (below 0x20) becomes; nullptr keeps it.
  CharEscaper(std::initializer_list<std::pair<char, const char*>> replace, const char* control) {
    for (int c = 0; c < 256; ++c) with_[c] = nullptr;
    if (control)
      for (int c = 0; c < 0x20; ++c) with_[c] = control;
    for (const auto& r : replace) with_[static_cast<unsigned char>(r.first)] = r.second;
  }

  // `s` escaped; past `max` bytes of output, "…" and the rest is dropped.
  std::string operator()(const std::string& s, size_t max = std::string::npos) const {
    std::string out;
    out.reserve(s.size() + 16);
    for (char c : s) {
      if (out.size() >= max) {
        out += "…";
        break;
      }
      if (const char* r = with_[static_cast<unsigned char>(c)]) out += r;
      else out += c;
    }
    return out;
  }

 private:
  const char* with_[256];
};

}  // namespace imptrace
