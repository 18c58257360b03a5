// Rendering helpers shared by the commands, so a location or an object reads the same
// everywhere.
#include <cstdio>

#include "commands.h"
#include "proxy_decision.h"

namespace imptrace {

std::string format_ms(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

std::string format_location(const model::Location& loc) {
  if (loc.empty()) return "<unknown location>";
  std::string s = loc.file.empty() ? "<unknown file>" : loc.file;
  if (loc.line) s += ":" + std::to_string(loc.line);
  if (!loc.function.empty()) s += " in " + loc.function;
  return s;
}

std::string describe_object(const model::ObjectRef& o) {
  if (!o.present) return "nothing";
  std::string s;
  if (model::is_import_blocker(o)) return "None, blocking the import (" + model::object_token(o) + ")";
  if (o.is_plain_module()) s = "module";
  else s = o.type.empty() ? "object" : o.type;
  if (!o.name.empty()) s += " '" + o.name + "'";
  if (o.is_proxy()) s += " [proxy]";
  s += " (" + model::object_token(o) + ")";
  return s;
}

std::string join_argv(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) {
    if (!s.empty()) s += ' ';
    bool plain = !a.empty() && a.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    if (plain) { s += a; continue; }
    s += '\'';
    for (char c : a) {
      if (c == '\'') s += "'\\''";
      else if (static_cast<unsigned char>(c) < 0x20) s += '?';
      else s += c;
    }
    s += '\'';
  }
  return s;
}

void write_location_json(JsonWriter& w, const model::Location& loc) {
  if (loc.empty()) { w.null(); return; }
  w.begin_object();
  w.field("file", loc.file);
  w.field("line", loc.line);
  w.field("function", loc.function);
  w.end_object();
}

void write_native_caller_json(JsonWriter& w, const model::NativeCaller& c) {
  if (c.empty()) { w.null(); return; }
  w.begin_object();
  w.field("library", c.library());
  w.field("object", c.object);
  w.field("offset", c.offset);
  w.field_or_null("function", c.function);
  w.field_or_null("file", c.file);
  w.key("line");
  if (c.line) w.value(static_cast<uint64_t>(c.line)); else w.null();
  w.field_or_null("unsymbolised", c.unsymbolised);
  w.end_object();
}

void write_object_json(JsonWriter& w, const model::ObjectRef& o) {
  if (!o.present) { w.null(); return; }
  w.begin_object();
  w.field("id", model::object_token(o));
  w.field("type", o.type);
  w.field("is_module", o.is_module());
  w.field("is_proxy", o.is_proxy());
  w.field("blocked", model::is_import_blocker(o));
  w.field_or_null("name", o.name);
  w.end_object();
}

void write_location_json(JsonWriter& w, const std::string& k, const model::Location& loc) {
  w.key(k);
  write_location_json(w, loc);
}

void write_object_json(JsonWriter& w, const std::string& k, const model::ObjectRef& o) {
  w.key(k);
  write_object_json(w, o);
}

void write_native_caller_json(JsonWriter& w, const std::string& k, const model::NativeCaller& c) {
  w.key(k);
  write_native_caller_json(w, c);
}

}  // namespace imptrace
