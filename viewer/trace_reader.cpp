// Loading traces: files and directories of them (trace_reader.h), each through a byte
// source (byte_source.h) and the decoder (trace_decoder.h).
#include "trace_reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

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
  // A run directory is what a run left behind, and a run can leave more than traces: a
  // process killed before its header was whole, a file a user dropped there, one they cannot
  // read. One such file must not hide every other process of the run, so inside a directory
  // a file that cannot be read as a trace is skipped with a warning. A file named on the
  // command line is what the user asked for, so failing to read it stays an error.
  auto load_one = [&](const std::string& file, bool in_directory) {
    model::Process p;
    std::string why;
    if (!read_trace_file(file, p, why)) {
      if (in_directory) {
        warnings.push_back(file + ": " + why + ", skipped");
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
    struct Entry {
      std::string path;
      dev_t dev;
      ino_t ino;
    };
    std::vector<Entry> files;
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!ends_with(name, ".pb")) continue;
      std::string full = path + (ends_with(path, "/") ? "" : "/") + name;
      struct stat fst;
      if (stat(full.c_str(), &fst) == 0 && S_ISREG(fst.st_mode)) files.push_back({full, fst.st_dev, fst.st_ino});
    }
    closedir(d);
    std::sort(files.begin(), files.end(), [](const Entry& a, const Entry& b) { return a.path < b.path; });
    if (files.empty()) { error = path + ": no trace files (*.pb) in this directory"; return false; }
    // One process writes one file; a symlink or hard link to it is the same process seen
    // twice, so files are counted by inode. The first name in sort order is the one read.
    size_t before = out.size();
    std::map<std::pair<dev_t, ino_t>, const std::string*> first_name;
    for (const auto& f : files) {
      auto [it, fresh] = first_name.emplace(std::make_pair(f.dev, f.ino), &f.path);
      if (!fresh) {
        warnings.push_back(f.path + ": the same file as " + *it->second + ", counted once");
        continue;
      }
      if (!load_one(f.path, true)) return false;
    }
    if (out.size() == before) { error = path + ": no readable trace file in this directory"; return false; }
  }
  return true;
}

}  // namespace reader
}  // namespace imptrace
