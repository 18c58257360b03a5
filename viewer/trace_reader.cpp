// Loading traces: files and directories of them (trace_reader.h), each through a byte
// source (byte_source.h) and the decoder (trace_decoder.h).
#include "trace_reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bundle.h"
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

std::string bundle_run_of(const std::string& source_file) {
  size_t hash = source_file.rfind('#');
  if (hash == std::string::npos) return "";
  std::string member = source_file.substr(hash + 1);
  size_t slash = member.find('/');
  return slash == std::string::npos ? "" : member.substr(0, slash);
}

namespace {

bool read_bundle(const std::string& path, const std::string& only_run, std::vector<model::Process>& out,
                 std::string& error, std::vector<std::string>& warnings) {
  std::vector<std::string> runs;
  size_t taken = 0;
  std::string why;
  bool ok = bundle::read_file(path, [&](bundle::Member& m, std::string& err) {
    if (std::find(runs.begin(), runs.end(), m.run) == runs.end()) runs.push_back(m.run);
    if (!only_run.empty() && m.run != only_run) return true;
    std::string name = m.name.empty() ? path : path + "#" + m.name;
    model::Process p;
    std::string pwhy;
    if (!parse_trace(m.bytes.data(), m.bytes.size(), p, pwhy)) {
      if (pwhy == "empty file" && !m.name.empty()) {
        warnings.push_back(name + ": empty file, skipped");
        return true;
      }
      err = (m.name.empty() ? "" : m.name + ": ") + pwhy;
      return false;
    }
    p.source_file = name;
    for (const auto& w : p.warnings) warnings.push_back(name + ": warning: " + w);
    out.push_back(std::move(p));
    ++taken;
    return true;
  }, why);
  if (!ok) { error = path + ": " + why; return false; }
  if (!taken) {
    if (only_run.empty()) { error = path + ": no trace files (*.pb) in this bundle"; return false; }
    std::string names;
    for (const auto& r : runs) names += (names.empty() ? "" : ", ") + (r.empty() ? "(top level)" : r);
    error = path + ": no run named '" + only_run + "' in this bundle (" +
            (names.empty() ? "it holds no traces" : "runs: " + names) + ")";
    return false;
  }
  return true;
}

}  // namespace

bool load_traces(const std::vector<std::string>& paths, std::vector<model::Process>& out,
                 std::string& error, std::vector<std::string>& warnings) {
  auto load_one = [&](const std::string& file, bool in_directory) {
    if (bundle::is_gzip_file(file)) return read_bundle(file, "", out, error, warnings);
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
    if (stat(path.c_str(), &st) != 0) {
      // BUNDLE#RUN: one run of a bundle.
      size_t hash = path.rfind('#');
      struct stat bst;
      if (hash != std::string::npos && hash + 1 < path.size() &&
          stat(path.substr(0, hash).c_str(), &bst) == 0 && S_ISREG(bst.st_mode)) {
        std::string file = path.substr(0, hash);
        if (!bundle::is_gzip_file(file)) { error = file + ": not a bundle (.tar.gz), so it has no runs to name"; return false; }
        if (!read_bundle(file, path.substr(hash + 1), out, error, warnings)) return false;
        continue;
      }
      error = path + ": " + strerror(errno);
      return false;
    }
    if (!S_ISDIR(st.st_mode)) {
      if (!load_one(path, false)) return false;
      continue;
    }
    DIR* d = opendir(path.c_str());
    if (!d) { error = path + ": " + strerror(errno); return false; }
    std::vector<std::string> files;
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!ends_with(name, ".pb") && !ends_with(name, ".pb.gz")) continue;
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

bool load_run(const std::string& path, std::vector<model::Process>& out, std::string& error,
              std::vector<std::string>& warnings) {
  std::vector<model::Process> procs;
  if (!load_traces({path}, procs, error, warnings)) return false;
  std::vector<std::string> runs;
  for (const auto& p : procs) {
    std::string r = bundle_run_of(p.source_file);
    if (std::find(runs.begin(), runs.end(), r) == runs.end()) runs.push_back(r);
  }
  if (runs.size() > 1) {
    std::string names;
    for (const auto& r : runs) names += (names.empty() ? "" : ", ") + (r.empty() ? "(top level)" : r);
    std::string example = runs[0].empty() ? runs[1] : runs[0];
    error = path + ": this bundle holds " + std::to_string(runs.size()) + " runs (" + names +
            "); a side takes one: name it as " + path + "#" + example;
    return false;
  }
  for (auto& p : procs) out.push_back(std::move(p));
  return true;
}

}  // namespace reader
}  // namespace imptrace
