// Loading traces: files and directories of them (trace_reader.h), each through a byte
// source (byte_source.h) and the decoder (trace_decoder.h).
#include "trace_reader.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <tuple>

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

namespace {

// A copy of a trace is not another process: `gzip -k` leaves x.pb beside x.pb.gz, an
// artifact copied twice leaves two names. Files of one process (the same pid started at
// the same instant) are read once: the copy with the most records, the first name among
// equals. Only among the processes of one directory, from `from` on.
void drop_copies_of_one_process(std::vector<model::Process>& procs, size_t from, std::vector<std::string>& warnings) {
  auto records = [](const model::Process& p) {
    return p.imports.size() + p.modules_changes.size() + p.bindings.size() + p.proxy_accesses.size();
  };
  std::map<std::tuple<int64_t, int64_t, uint64_t>, size_t> first;
  std::vector<bool> drop(procs.size(), false);
  for (size_t i = from; i < procs.size(); ++i) {
    const model::Process& p = procs[i];
    if (!p.start_time_unix_ns || !p.pid) continue;
    auto [it, fresh] = first.emplace(std::make_tuple(p.pid, p.start_time_unix_ns, p.start_monotonic_ns), i);
    if (fresh) continue;
    size_t kept = it->second;
    if (records(p) > records(procs[kept])) {
      drop[kept] = true;
      it->second = i;
      warnings.push_back(procs[kept].source_file + ": the same process (pid " + std::to_string(p.pid) + ") as " +
                         p.source_file + ", which holds more of it; counted once");
    } else {
      drop[i] = true;
      warnings.push_back(p.source_file + ": the same process (pid " + std::to_string(p.pid) + ") as " +
                         procs[kept].source_file + "; counted once");
    }
  }
  size_t w = from;
  for (size_t i = from; i < procs.size(); ++i)
    if (!drop[i]) {
      if (w != i) procs[w] = std::move(procs[i]);
      ++w;
    }
  procs.resize(w);
}

}  // namespace

bool load_traces(const std::vector<std::string>& paths, std::vector<model::Process>& out,
                 std::string& error, std::vector<std::string>& warnings) {
  // A run directory is what a run left behind, and a run can leave more than traces: a
  // process killed before its header was whole, a file a user dropped there, one they cannot
  // read. One such file must not hide every other process of the run, so inside a directory
  // a file that cannot be read as a trace is skipped with a warning. A file named on the
  // command line is what the user asked for, so failing to read it stays an error.
  auto load_one = [&](const std::string& file, bool in_directory) {
    if (bundle::is_gzip_file(file)) return read_bundle(file, "", out, error, warnings);
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
    struct Entry {
      std::string path;
      dev_t dev;
      ino_t ino;
    };
    std::vector<Entry> files;
    while (struct dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (!ends_with(name, ".pb") && !ends_with(name, ".pb.gz")) continue;
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
    drop_copies_of_one_process(out, before, warnings);
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
