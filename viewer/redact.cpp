// The redaction rules of redact.h, over strings, whole outputs and trace bytes.
#include "redact.h"
#include "char_escaper.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "records.h"
#include "wire.h"

namespace imptrace {
namespace redact {
namespace {

namespace F = fields;

bool word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Characters that end a path token: quoting and markup around paths in text, JSON, HTML,
// markdown ("file.py:12", "(path)", `path`, <td>path</td>, "path").
bool path_char(char c) {
  if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return false;
  return !strchr("\"'`<>|,;:()[]{}\\&*", c);
}

// A path token may start at '/' when what precedes it cannot be part of a name.
bool path_start(const std::string& s, size_t i) {
  if (s[i] != '/') return false;
  if (i == 0) return true;
  char p = s[i - 1];
  if (p == 'm') {  // the end of a colour escape ("\x1b[1;31m/path", diff --color)
    size_t k = i - 1;
    while (k > 0 && ((s[k - 1] >= '0' && s[k - 1] <= '9') || s[k - 1] == ';')) --k;
    if (k >= 2 && s[k - 1] == '[' && s[k - 2] == '\x1b') return true;
  }
  return !(word_char(p) || p == '.' || p == '-' || p == '~' || p == '/' || p == '+' || p == '@' ||
           p == '%' || p == '#' || p == '$');
}

std::vector<std::string> split_path(const std::string& p) {
  std::vector<std::string> c;
  size_t pos = 1;  // after the leading '/'
  while (pos <= p.size()) {
    size_t end = p.find('/', pos);
    if (end == std::string::npos) end = p.size();
    c.push_back(p.substr(pos, end - pos));
    pos = end + 1;
  }
  return c;
}

std::string join_from(const std::vector<std::string>& c, size_t from) {
  std::string s;
  for (size_t i = from; i < c.size(); ++i) s += "/" + c[i];
  return s;
}

bool is_python_dir(const std::string& c) {  // python3, python3.11
  if (c.compare(0, 6, "python") != 0 || c.size() == 6) return false;
  bool dot = false;
  for (size_t i = 6; i < c.size(); ++i) {
    if (c[i] == '.' && !dot && i > 6) dot = true;
    else if (c[i] < '0' || c[i] > '9') return false;
  }
  return c.back() != '.';
}

// Names too common to replace as words wherever they appear (user names: their homes are
// still `~`; host names).
bool generic_user(const std::string& n) {
  static const char* const kGeneric[] = {"root", "nobody", "user", "users", "home", "runner", "admin",
                                         "builder", "build", "ci", "test", "ubuntu", "debian"};
  if (n.size() < 2) return true;
  for (const char* g : kGeneric)
    if (n == g) return true;
  return false;
}

// The system's own trees: their paths name packages of the distribution, not people.
bool is_system_path(const std::vector<std::string>& c) {
  static const char* const kSystem[] = {"usr", "lib", "lib32", "lib64", "libx32", "bin",
                                        "sbin", "etc", "proc", "sys", "dev", "var"};
  if (c.empty()) return true;
  for (const char* s : kSystem)
    if (c[0] == s) return true;
  return false;
}

std::string dir_hash(const std::string& dir) {  // FNV-1a, six hex digits
  uint32_t h = 2166136261u;
  for (unsigned char ch : dir) h = (h ^ ch) * 16777619u;
  char buf[16];
  snprintf(buf, sizeof buf, "dir-%06x", h & 0xffffffu);
  return buf;
}

bool is_under(const std::string& path, const std::string& dir) {
  return path.compare(0, dir.size(), dir) == 0 && (path.size() == dir.size() || path[dir.size()] == '/');
}

// Adds a directory (trailing slashes dropped; not "/") to a list kept longest first.
void add_dir(std::vector<std::string>& list, const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.size() < 2 || p[0] != '/' || p.compare(0, 2, "//") == 0) return;
  if (std::find(list.begin(), list.end(), p) != list.end()) return;
  list.push_back(p);
  std::sort(list.begin(), list.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

// Calls fn(start, end) for every path token of s.
template <typename Fn>
void for_each_path(const std::string& s, Fn fn) {
  for (size_t i = 0; i < s.size();) {
    if (!path_start(s, i)) { ++i; continue; }
    size_t j = i;
    while (j < s.size() && path_char(s[j])) ++j;
    fn(i, j);
    i = j;
  }
}

}  // namespace

std::string Redactor::placeholder(const char* name) const {
  return html_ ? std::string("&lt;") + name + "&gt;" : std::string("<") + name + ">";
}

void Redactor::add_user(const std::string& name) {
  if (!name.empty() && name.find('/') == std::string::npos) users_.insert(name);
}

void Redactor::add_host(const std::string& name) {
  // A host named like a common word ("debian", "build") would rewrite ordinary text.
  if (name.size() < 3 || name == "localhost" || generic_user(name) || name.find('/') != std::string::npos) return;
  hosts_.insert(name);
  size_t dot = name.find('.');
  if (dot != std::string::npos && dot >= 3) hosts_.insert(name.substr(0, dot));
}

void Redactor::add_home(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (p.size() < 2 || p[0] != '/') return;
  if (std::find(homes_.begin(), homes_.end(), p) == homes_.end()) homes_.push_back(p);
  home_dirs_.insert(p);
  std::sort(homes_.begin(), homes_.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
}

void Redactor::add_cwd(const std::string& path) { add_dir(cwds_, path); }

void Redactor::add_root(const std::string& path) { add_dir(roots_, path); }

void Redactor::learn(const std::string& s) {
  if (s.find('/') == std::string::npos) return;
  for_each_path(s, [&](size_t b, size_t e) {
    std::vector<std::string> c = split_path(s.substr(b, e - b));
    for (size_t k = 0; k + 1 < c.size(); ++k)
      if ((c[k] == "home" || c[k] == "Users") && !c[k + 1].empty()) {
        add_user(c[k + 1]);
        std::string home;
        for (size_t i = 0; i <= k + 1; ++i) home += "/" + c[i];
        home_dirs_.insert(home);
        break;
      }
  });
}

void Redactor::learn_process(const model::Process& p) {
  for (const auto& a : p.argv) learn(a);
  learn(p.executable);
  learn(p.cwd);
  add_cwd(p.cwd);
  for (const auto& kv : p.env) {
    learn(kv.second);
    if (kv.first == "HOME") add_home(kv.second);
    if (kv.first == "USER" || kv.first == "LOGNAME") add_user(kv.second);
    if (kv.first == "HOSTNAME") add_host(kv.second);
  }
  for (const auto& sp : p.sys_paths)
    for (const auto& e : sp.entries) {
      learn(e);
      add_root(e);
    }
  for (const auto& im : p.imports) learn(im.origin);
}

void Redactor::learn_local_machine() {
  for (const char* var : {"USER", "LOGNAME"})
    if (const char* v = getenv(var); v && *v) add_user(v);
  if (const struct passwd* pw = getpwuid(getuid()); pw && pw->pw_name) add_user(pw->pw_name);
  if (const char* home = getenv("HOME"); home && *home && strcmp(home, "/") != 0) {
    add_home(home);
    learn(home);
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) add_host(host);
  if (const char* h = getenv("HOSTNAME"); h && *h) add_host(h);
}

std::string Redactor::rewrite_path(const std::string& path) const {
  std::vector<std::string> c = split_path(path);
  for (size_t k = c.size(); k-- > 0;)
    if (c[k] == "site-packages" || c[k] == "dist-packages") return placeholder("site-packages") + join_from(c, k + 1);
  for (size_t k = 1; k < c.size(); ++k)
    if ((c[k - 1] == "lib" || c[k - 1] == "lib64") && is_python_dir(c[k]))
      return placeholder("python") + join_from(c, k + 1);
  for (const auto& h : homes_)
    if (path.compare(0, h.size(), h) == 0 && (path.size() == h.size() || path[h.size()] == '/'))
      return "~" + path.substr(h.size());
  for (size_t k = 0; k + 1 < c.size(); ++k)
    if ((c[k] == "home" || c[k] == "Users") && !c[k + 1].empty()) return "~" + join_from(c, k + 2);
  if (!c.empty() && c[0] == "root") return "~" + join_from(c, 1);
  // A directory above a home (a prefix string in a trace, "/tmp/ci/home/") says where
  // homes are: written relative to the home, "~/..".
  std::string dir = path;
  bool slash = dir.size() > 1 && dir.back() == '/';
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.size() > 1)
    for (const auto& h : home_dirs_)
      if (h.size() > dir.size() && h.compare(0, dir.size(), dir) == 0 && h[dir.size()] == '/') {
        std::string up = "~";
        for (size_t i = dir.size(); i < h.size(); ++i)
          if (h[i] == '/') up += "/..";
        return slash ? up + "/" : up;
      }
  // Outside the homes and the Python trees: the run's own files, the system's, and the
  // rest (vendor trees under /opt, job directories under /tmp), which are hidden.
  if (path.compare(0, 2, "//") == 0) return path;  // a URL's "//host/..."
  for (const auto& d : cwds_)
    if (is_under(path, d)) return placeholder("cwd") + path.substr(d.size());
  if (is_system_path(c) || c.size() < 2) return path;
  for (const auto& d : roots_)
    if (is_under(path, d)) return placeholder(dir_hash(d).c_str()) + path.substr(d.size());
  size_t slash_at = path.rfind('/');
  return placeholder(dir_hash(path.substr(0, slash_at)).c_str()) + path.substr(slash_at);
}

std::string Redactor::replace_words(const std::string& s) const {
  if (users_.empty() && hosts_.empty()) return s;
  std::vector<std::pair<std::string, std::string>> words;  // longest first
  for (const auto& u : users_)
    if (!generic_user(u)) words.emplace_back(u, placeholder("user"));
  for (const auto& h : hosts_) words.emplace_back(h, placeholder("host"));
  std::sort(words.begin(), words.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    bool done = false;
    if (i == 0 || !word_char(s[i - 1])) {
      for (const auto& w : words) {
        size_t n = w.first.size();
        if (s.compare(i, n, w.first) == 0 && (i + n == s.size() || !word_char(s[i + n]))) {
          out += w.second;
          i += n;
          done = true;
          break;
        }
      }
    }
    if (!done) out += s[i++];
  }
  return out;
}

std::string Redactor::apply(const std::string& s) const {
  std::string out;
  if (s.find('/') == std::string::npos) {
    out = s;
  } else {
    out.reserve(s.size());
    size_t last = 0;
    for_each_path(s, [&](size_t b, size_t e) {
      out.append(s, last, b - last);
      out += rewrite_path(s.substr(b, e - b));
      last = e;
    });
    out.append(s, last, std::string::npos);
  }
  return replace_words(out);
}

// ---- traces -----------------------------------------------------------------------------

namespace {

// Walks the records of a trace: fn(field of Record, body reader, whole record bytes).
// Stops at the first malformed or cut record (what follows it is not whole).
template <typename Fn>
void for_each_record(const uint8_t* data, size_t size, Fn fn) {
  wire::Reader top(data, size);
  uint32_t field;
  wire::WireType wt;
  while (top.tag(field, wt)) {
    if (field != F::Trace::record || wt != wire::LEN) {
      if (!top.skip(wt)) return;
      continue;
    }
    wire::Reader rec = top.sub();
    if (!top.ok) return;
    const uint8_t* rec_start = rec.p;
    size_t rec_size = static_cast<size_t>(rec.end - rec.p);
    uint32_t kind = 0;
    wire::WireType kwt;
    wire::Reader body(rec.p, 0);
    bool found = false;
    while (rec.tag(kind, kwt)) {
      if (kwt == wire::LEN) { body = rec.sub(); found = rec.ok; break; }
      if (!rec.skip(kwt)) break;
    }
    fn(found ? kind : 0, body, rec_start, rec_size);
  }
}

std::string text(wire::Reader r) { return std::string(reinterpret_cast<const char*>(r.p), r.end - r.p); }

// A StringDef's id, value and prefix.
bool string_def(wire::Reader body, uint32_t& id, std::string& value, uint32_t& prefix) {
  id = prefix = 0;
  uint32_t f;
  wire::WireType wt;
  while (body.tag(f, wt)) {
    if (f == F::StringDef::id && wt == wire::VARINT) id = static_cast<uint32_t>(body.varint());
    else if (f == F::StringDef::prefix && wt == wire::VARINT) prefix = static_cast<uint32_t>(body.varint());
    else if (f == F::StringDef::value && wt == wire::LEN) value = text(body.sub());
    else body.skip(wt);
  }
  return body.ok;
}

// Copies a message field by field; `fn(field, payload)`, called for each length-delimited
// field, returns true when it wrote (or dropped) the field itself.
template <typename Fn>
bool copy_message(wire::Reader body, wire::ByteBuf& out, Fn fn) {
  uint32_t f;
  wire::WireType wt;
  while (!body.done()) {
    const uint8_t* start = body.p;
    if (!body.tag(f, wt)) break;
    if (wt == wire::LEN) {
      wire::Reader sub = body.sub();
      if (!body.ok) break;
      if (fn(f, sub)) continue;
    } else if (!body.skip(wt)) {
      break;
    }
    out.put(start, static_cast<size_t>(body.p - start));
  }
  return body.ok;
}

void put_text(wire::ByteBuf& b, uint32_t field, const std::string& s) { wire::put_bytes(b, field, s.data(), s.size()); }

}  // namespace

void learn_trace(const uint8_t* data, size_t size, Redactor& r) {
  std::unordered_map<uint32_t, std::string> strings;
  for_each_record(data, size, [&](uint32_t kind, wire::Reader body, const uint8_t*, size_t) {
    if (kind == F::Record::sys_path) {
      uint32_t f;
      wire::WireType wt;
      while (body.tag(f, wt)) {
        if (f == F::SysPath::entries && wt == wire::VARINT) {
          auto it = strings.find(static_cast<uint32_t>(body.varint()));
          if (it != strings.end()) r.add_root(it->second);
        } else if (f == F::SysPath::entries && wt == wire::LEN) {  // packed
          wire::Reader ids = body.sub();
          while (!ids.done() && ids.ok) {
            auto it = strings.find(static_cast<uint32_t>(ids.varint()));
            if (it != strings.end()) r.add_root(it->second);
          }
        } else if (!body.skip(wt)) {
          break;
        }
      }
    } else if (kind == F::Record::string_def) {
      uint32_t id, prefix;
      std::string value;
      if (!string_def(body, id, value, prefix)) return;
      std::string full = prefix ? strings[prefix] + value : value;
      r.learn(full);
      strings[id] = std::move(full);
    } else if (kind == F::Record::header || kind == F::Record::note || kind == F::Record::env_update) {
      // Every string inside (argv, executable, cwd, env values, note text).
      wire::ByteBuf sink;
      copy_message(body, sink, [&](uint32_t f, wire::Reader sub) {
        if (kind == F::Record::header && f == F::Header::cwd) r.add_cwd(text(sub));
        if (kind == F::Record::header && f == F::Header::env) {
          copy_message(sub, sink, [&](uint32_t, wire::Reader v) { r.learn(text(v)); return true; });
        } else {
          r.learn(text(sub));
        }
        return true;
      });
    }
  });
}

bool redact_trace(const uint8_t* data, size_t size, const Redactor& r, std::vector<uint8_t>& out,
                  std::string& why) {
  wire::ByteBuf buf;
  std::unordered_map<uint32_t, std::string> strings, redacted;  // id -> text, redacted text
  size_t records = 0;
  bool header_first = false;
  for_each_record(data, size, [&](uint32_t kind, wire::Reader body, const uint8_t* rec, size_t rec_size) {
    if (records++ == 0) header_first = kind == F::Record::header;
    auto begin = [&]() { return wire::begin_message(buf, F::Trace::record); };
    auto redact_env = [&](wire::Reader env, uint32_t field) {
      wire::Mark m = wire::begin_message(buf, field);
      copy_message(env, buf, [&](uint32_t f, wire::Reader v) {
        if (f != F::EnvVar::value) return false;
        put_text(buf, f, r.apply(text(v)));
        return true;
      });
      wire::end_message(buf, m);
    };
    if (kind == F::Record::string_def) {
      uint32_t id, prefix;
      std::string value;
      if (string_def(body, id, value, prefix)) {
        std::string full = prefix ? strings[prefix] + value : value;
        std::string clean = r.apply(full);
        // Keep the prefix when the redacted prefix still starts the redacted text (most
        // paths: same directory, same placeholder), which keeps the trace as small.
        uint32_t keep = 0;
        if (prefix) {
          auto it = redacted.find(prefix);
          if (it != redacted.end() && clean.compare(0, it->second.size(), it->second) == 0) keep = prefix;
        }
        wire::Mark rm = begin();
        wire::Mark m = wire::begin_message(buf, F::Record::string_def);
        wire::put_uint(buf, F::StringDef::id, id);
        if (keep) put_text(buf, F::StringDef::value, clean.substr(redacted[keep].size()));
        else put_text(buf, F::StringDef::value, clean);
        wire::put_uint(buf, F::StringDef::prefix, keep);
        wire::end_message(buf, m);
        wire::end_message(buf, rm);
        strings[id] = std::move(full);
        redacted[id] = std::move(clean);
        return;
      }
    } else if (kind == F::Record::header) {
      wire::Mark rm = begin();
      wire::Mark m = wire::begin_message(buf, F::Record::header);
      copy_message(body, buf, [&](uint32_t f, wire::Reader sub) {
        if (f == F::Header::argv || f == F::Header::executable || f == F::Header::cwd) {
          put_text(buf, f, r.apply(text(sub)));
          return true;
        }
        if (f == F::Header::env) { redact_env(sub, f); return true; }
        return false;
      });
      wire::end_message(buf, m);
      wire::end_message(buf, rm);
      return;
    } else if (kind == F::Record::env_update) {
      wire::Mark rm = begin();
      redact_env(body, F::Record::env_update);
      wire::end_message(buf, rm);
      return;
    } else if (kind == F::Record::note) {
      wire::Mark rm = begin();
      wire::Mark m = wire::begin_message(buf, F::Record::note);
      copy_message(body, buf, [&](uint32_t f, wire::Reader sub) {
        if (f != F::Note::text) return false;
        put_text(buf, f, r.apply(text(sub)));
        return true;
      });
      wire::end_message(buf, m);
      wire::end_message(buf, rm);
      return;
    }
    // Any other record, byte for byte.
    wire::put_bytes(buf, F::Trace::record, rec, rec_size);
  });
  if (!header_first) { why = "not an imptrace trace (first record is not a header)"; return false; }
  if (buf.failed) { why = "out of memory"; return false; }
  out.assign(buf.p, buf.p + buf.n);
  return true;
}

namespace {

void append_utf8(std::string& out, unsigned long c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xc0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xe0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (c & 0x3f));
  }
}

// XML text with its five entities and character references resolved: a path written
// "&quot;/home/alice/x.py&quot;" must reach the redactor as the path it is. A reference that
// is not one is kept as text (and escaped again on the way out).
std::string xml_unescape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    size_t end = s[i] == '&' ? s.find(';', i) : std::string::npos;
    if (end == std::string::npos || end - i > 12) {
      out += s[i];
      continue;
    }
    std::string ent = s.substr(i + 1, end - i - 1);
    unsigned long c = 0;
    bool ok = true;
    if (ent == "lt") c = '<';
    else if (ent == "gt") c = '>';
    else if (ent == "amp") c = '&';
    else if (ent == "quot") c = '"';
    else if (ent == "apos") c = '\'';
    else if (ent.size() > 1 && ent[0] == '#') {
      bool hex = ent[1] == 'x' || ent[1] == 'X';
      const char* digits = ent.c_str() + (hex ? 2 : 1);
      char* stop = nullptr;
      c = *digits ? strtoul(digits, &stop, hex ? 16 : 10) : 0;
      ok = stop && *stop == 0 && c > 0 && c <= 0x10ffff;
    } else {
      ok = false;
    }
    if (!ok) {
      out += s[i];
      continue;
    }
    append_utf8(out, c);
    i = end;
  }
  return out;
}

// Escaped for XML text or an attribute value (whitespace kept as references there, since a
// parser turns a raw newline in an attribute into a space).
std::string xml_escape(const std::string& s, bool attribute) {
  static const CharEscaper kText({{'<', "&lt;"}, {'>', "&gt;"}, {'&', "&amp;"}, {'\r', "&#13;"}}, nullptr);
  static const CharEscaper kAttribute({{'<', "&lt;"}, {'>', "&gt;"}, {'&', "&amp;"}, {'"', "&quot;"}, {'\'', "&apos;"},
                                       {'\n', "&#10;"}, {'\r', "&#13;"}, {'\t', "&#9;"}},
                                      nullptr);
  return attribute ? kAttribute(s) : kText(s);
}

// Raw text in a CDATA section or a comment: the redactor's placeholders may stand there
// as they are; what would end the section early is broken up.
std::string raw_section(const std::string& text, const Redactor& r, const char* end_mark) {
  std::string out = r.apply(text);
  std::string mark = end_mark;
  for (size_t at; (at = out.find(mark)) != std::string::npos;) out.replace(at, mark.size(), mark.substr(0, 1) + " " + mark.substr(1));
  return out;
}

}  // namespace

std::string redact_xml(const std::string& xml, const Redactor& r) {
  std::string out;
  out.reserve(xml.size() + xml.size() / 8);
  size_t i = 0;
  auto copy_to = [&](size_t end, const char* mark) {  // the rest up to and with `mark`
    size_t stop = xml.find(mark, end);
    stop = stop == std::string::npos ? xml.size() : stop + strlen(mark);
    out.append(xml, i, stop - i);
    i = stop;
  };
  while (i < xml.size()) {
    if (xml[i] != '<') {
      size_t next = xml.find('<', i);
      if (next == std::string::npos) next = xml.size();
      out += xml_escape(r.apply(xml_unescape(xml.substr(i, next - i))), false);
      i = next;
    } else if (xml.compare(i, 4, "<!--") == 0) {
      size_t end = xml.find("-->", i + 4);
      size_t stop = end == std::string::npos ? xml.size() : end;
      out += "<!--" + raw_section(xml.substr(i + 4, stop - i - 4), r, "--") + (end == std::string::npos ? "" : "-->");
      i = end == std::string::npos ? xml.size() : end + 3;
    } else if (xml.compare(i, 9, "<![CDATA[") == 0) {
      size_t end = xml.find("]]>", i + 9);
      size_t stop = end == std::string::npos ? xml.size() : end;
      out += "<![CDATA[" + raw_section(xml.substr(i + 9, stop - i - 9), r, "]]>") + (end == std::string::npos ? "" : "]]>");
      i = end == std::string::npos ? xml.size() : end + 3;
    } else if (xml.compare(i, 2, "<?") == 0) {
      copy_to(i + 2, "?>");
    } else if (xml.compare(i, 2, "<!") == 0) {
      copy_to(i + 2, ">");
    } else {
      // A start or end tag: names kept, each quoted attribute value redacted.
      size_t j = i;
      while (j < xml.size() && xml[j] != '>') {
        char c = xml[j];
        if (c != '"' && c != '\'') {
          out += c;
          ++j;
          continue;
        }
        size_t close = xml.find(c, j + 1);
        if (close == std::string::npos) close = xml.size();
        out += '"';
        out += xml_escape(r.apply(xml_unescape(xml.substr(j + 1, close - j - 1))), true);
        out += '"';
        j = close == xml.size() ? close : close + 1;
      }
      if (j < xml.size()) out += '>';
      i = j < xml.size() ? j + 1 : j;
    }
  }
  return out;
}

std::string redact_output(const std::string& text,
                          const std::vector<const std::vector<model::Process>*>& runs, bool html) {
  Redactor r(html);
  for (const auto* run : runs)
    for (const auto& p : *run) r.learn_process(p);
  r.learn(text);
  r.learn_local_machine();
  return r.apply(text);
}

}  // namespace redact
}  // namespace imptrace
