// Loading traces: files and directories of them (trace_reader.h), each through a byte
// source (byte_source.h) and the decoder (trace_decoder.h).
#include "trace_reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "byte_source.h"
#include "trace_decoder.h"

namespace imptrace {
namespace reader {
namespace {

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

bool parse_trace(const uint8_t* data, size_t size, model::Process& out, std::string& why) {
  if (size == 0) { why = "empty file"; return false; }
  return decode_trace(*memory_source(data, size), out, why);
}

bool read_trace_file(const std::string& path, model::Process& out, std::string& why) {
  std::unique_ptr<ByteSource> src = open_file_source(path, why);
  if (!src) return false;
  out.source_file = path;
  return decode_trace(*src, out, why);
}

bool load_traces(const std::vector<std::string>& paths, std::vector<model::Process>& out,
                 std::string& error, std::vector<std::string>& warnings) {
  auto load_one = [&](const std::string& file, bool in_directory) {
    model::Process p;
    std::string why;
    if (!read_trace_file(file, p, why)) {
      if (in_directory && why == "empty file") {
        warnings.push_back(file + ": empty file, skipped");
        return true;
      }
      error = file + ": " + why;
      return false;
    }
    for (const auto& w : p.warnings) warnings.push_back(file + ": warning: " + w);
    out.push_back(std::move(p));
    return true;
  };

  for (const auto& path : paths) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) { error = path + ": " + strerror(errno); return false; }
    if (!S_ISDIR(st.st_mode)) {
      if (!load_one(path, false)) return false;
      continue;
    }
    DIR* d = opendir(path.c_str());
    if (!d) { error = path + ": " + strerror(errno); return false; }
    std::vector<std::string> files;
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!ends_with(name, ".pb")) continue;
      std::string full = path + (ends_with(path, "/") ? "" : "/") + name;
      struct stat fst;
      if (stat(full.c_str(), &fst) == 0 && S_ISREG(fst.st_mode)) files.push_back(full);
    }
    closedir(d);
    std::sort(files.begin(), files.end());
    if (files.empty()) { error = path + ": no trace files (*.pb) in this directory"; return false; }
    for (const auto& f : files)
      if (!load_one(f, true)) return false;
  }
  return true;
}

}  // namespace reader
}  // namespace imptrace
