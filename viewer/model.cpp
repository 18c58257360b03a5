// Small helpers of the model: identity tokens, outcome texts, path relativization.
#include "model.h"

#include <algorithm>
#include <cstdio>
#include <csignal>
#include <cstring>

#include "enum_names.h"

namespace imptrace {
namespace model {

std::string object_token(const ObjectRef& o) {
  if (!o.present) return "";
  char buf[32];
  snprintf(buf, sizeof buf, "obj:%llx", static_cast<unsigned long long>(o.id));
  return buf;
}

bool is_importlib_frame(const Location& loc) {
  return loc.file.compare(0, 18, "<frozen importlib.") == 0 || loc.file.find("/importlib/") != std::string::npos;
}

std::string Import::error_text() const {
  if (ok) return "";
  if (error_type.empty() && error_message.empty()) return "failed";
  if (error_message.empty()) return error_type;
  if (error_type.empty()) return error_message;
  return error_type + ": " + error_message;
}

std::string ProxyAccess::outcome() const {
  if (ok) return "ok";
  if (error_type.empty() && error_message.empty()) return "failed";
  if (error_message.empty()) return error_type;
  return (error_type.empty() ? std::string("Exception") : error_type.str()) + ": " + error_message;
}

const char* end_how_name(ProcessEnd::How h) {
  static constexpr const char* kNames[] = {"none", "exit", "os_exit", "signal", "exec"};
  return name_of<ProcessEnd::How::Exec>(kNames, h, "none");
}

std::string end_text(const ProcessEnd& e) {
  switch (e.how) {
    case ProcessEnd::How::None:
      return "no end record (killed, e.g. by SIGKILL, or still running)";
    case ProcessEnd::How::Exit: return "exited with status " + std::to_string(e.status);
    case ProcessEnd::How::OsExit: return "ended by os._exit(" + std::to_string(e.status) + ")";
    case ProcessEnd::How::Exec: return "replaced itself by exec";
    case ProcessEnd::How::Signal: {
      const char* abbrev = e.signal > 0 ? sigabbrev_np(e.signal) : nullptr;
      return std::string("killed by ") + (abbrev ? std::string("SIG") + abbrev : "a signal") + " (signal " +
             std::to_string(e.signal) + ")";
    }
  }
  return "";
}

bool ended_abnormally(const ProcessEnd& e) {
  return e.how == ProcessEnd::How::None || e.how == ProcessEnd::How::Signal;
}

bool terminated(const ProcessEnd& e) { return e.how == ProcessEnd::How::Signal && e.signal == SIGTERM; }

bool shadowed_by_own_attribute(const Binding& b) {
  const ObjectRef& v = b.attribute_value;
  return b.status == BindingStatus::Mismatch && v.present && !v.is_plain_module() && !v.is_module_subclass() &&
         !v.is_proxy() && v.type != "NoneType";
}

const char* binding_status_name(BindingStatus s) {
  static constexpr const char* kNames[] = {"bound", "missing", "mismatch", "on_proxy"};
  return name_of<BindingStatus::OnProxy>(kNames, s, "mismatch");
}

const char* proxy_access_kind_name(ProxyAccessKind k) {
  static constexpr const char* kNames[] = {"getattr", "setattr", "module_getattr"};
  return name_of<ProxyAccessKind::ModuleGetattr>(kNames, k, "getattr");
}

std::vector<std::string> Process::sys_path_roots() const {
  std::vector<std::string> roots;
  for (const auto& snap : sys_paths)
    for (const auto& e : snap.entries) {
      // '' in sys.path means the working directory.
      const std::string& root = e.empty() ? cwd : e;
      if (!root.empty() && std::find(roots.begin(), roots.end(), root) == roots.end())
        roots.push_back(root);
    }
  return roots;
}

bool rooted_path(const std::string& path) {
  if (path.empty()) return false;
  if (path[0] == '/') return true;
  if (path[0] == '~') return path.size() == 1 || path[1] == '/';
  return path[0] == '<' && (path == "<site-packages>" || path == "<python>" ||
                            path.compare(0, 16, "<site-packages>/") == 0 || path.compare(0, 9, "<python>/") == 0);
}

std::string relativize_path(const std::string& path, const std::vector<std::string>& roots) {
  if (!rooted_path(path)) return path;  // "<frozen ...>", "<string>", relative
  size_t best = 0;  // length of the prefix to strip, including the separating '/'
  for (std::string root : roots) {
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    if (!rooted_path(root)) continue;  // zip files and relative entries
    if (root == "/") {
      best = std::max<size_t>(best, 1);
      continue;
    }
    // A directory prefix: "/a/b" contains "/a/b/c.py", not "/a/bc.py".
    if (path.size() > root.size() + 1 && path.compare(0, root.size(), root) == 0 &&
        path[root.size()] == '/')
      best = std::max(best, root.size() + 1);
  }
  return best ? path.substr(best) : path;
}

std::string Process::relativize(const std::string& path) const {
  return relativize_path(path, sys_path_roots());
}

Location Process::relative(const Location& loc) const {
  return relative_location(loc, sys_path_roots());
}

Location relative_location(const Location& loc, const std::vector<std::string>& roots) {
  Location out = loc;
  out.file = relativize_path(loc.file, roots);
  return out;
}

int64_t Process::import_position(uint64_t index) const {
  auto it = std::lower_bound(imports.begin(), imports.end(), index,
                             [](const Import& im, uint64_t i) { return im.index < i; });
  if (it == imports.end() || it->index != index) return -1;
  return it - imports.begin();
}

uint32_t Process::lifetime_at(uint64_t time_ns) const {
  uint32_t n = 0;
  for (const Lifetime& l : lifetimes) {
    if (l.begin_ns > time_ns) break;
    n = l.number;
  }
  // Before the first begin record (a record of the first lifetime written ahead of it).
  return n ? n : (lifetimes.empty() ? 0 : lifetimes.front().number);
}

}  // namespace model
}  // namespace imptrace
