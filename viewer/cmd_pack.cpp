// `imptrace pack RUN... [--redact] -o FILE.tar.gz`: runs (directories, trace files,
// .pb.gz files or bundles) in one bundle (bundle.h) to attach to an issue. Every trace is
// decoded before it goes in, so a bundle never carries a file the viewer would refuse;
// with --redact the traces themselves are rewritten (redact.h), not only their views.
// A run's junit XML (the *.xml test_outcomes.h reads from its directory) goes with it, so
// the many-run diff takes the same test outcomes from the bundle as from the directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <iostream>
#include <sstream>

#include "bundle.h"
#include "commands.h"
#include "json_writer.h"
#include "redact.h"
#include "test_outcomes.h"
#include "trace_reader.h"

namespace imptrace {
namespace {

struct PackedTrace {
  std::string file;          // name inside the run's directory
  std::string from;          // where it was read, for messages
  std::vector<uint8_t> bytes;
  size_t imports = 0;
};

struct PackedXml {
  std::string file;  // name inside the run's directory
  std::string text;
};

struct PackedRun {
  std::string name;
  std::vector<PackedTrace> traces;
  std::vector<PackedXml> junit;
};

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string base_name(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string strip_suffixes(std::string n) {
  for (const char* s : {".gz", ".tgz", ".tar", ".pb"})
    if (ends_with(n, s)) n.resize(n.size() - strlen(s));
  return n;
}

// A name safe as one path component of the archive: letters, digits, '.', '_', '-'.
std::string member_component(const std::string& raw, const char* fallback) {
  std::string s;
  for (char c : raw) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    s += ok ? c : '_';
  }
  if (s.empty() || s == "." || s == "..") s = fallback;
  return s.substr(0, 90);
}

std::vector<uint8_t> read_whole(const std::string& path, uint64_t limit = bundle::kMaxUnpackedBytes,
                                const char* limit_text = "1 GiB") {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  if (fd < 0) throw InputError(path + ": " + strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    throw InputError(path + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > limit) {
    close(fd);
    throw InputError(path + ": larger than a bundle member may be (" + limit_text + ")");
  }
  std::vector<uint8_t> data(static_cast<size_t>(st.st_size));
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd, data.data() + got, data.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  data.resize(got);
  return data;
}

PackedRun& run_named(std::vector<PackedRun>& runs, const std::string& wanted) {
  std::string name = wanted;
  for (int n = 2; std::any_of(runs.begin(), runs.end(), [&](const PackedRun& r) { return r.name == name; }); ++n)
    name = wanted + "-" + std::to_string(n);
  runs.push_back(PackedRun{name, {}, {}});
  return runs.back();
}

void add_file(PackedRun& run, const std::string& path) {
  PackedTrace t;
  t.from = path;
  t.file = strip_suffixes(base_name(path)) + ".pb";
  t.bytes = read_whole(path);
  if (bundle::is_gzip(t.bytes.data(), t.bytes.size())) {
    std::vector<uint8_t> inner;
    std::string why;
    if (!bundle::gunzip(t.bytes.data(), t.bytes.size(), inner, why)) throw InputError(path + ": " + why);
    t.bytes.swap(inner);
  }
  run.traces.push_back(std::move(t));
}

// A junit XML file of a run, when it is one (what test_outcomes would read); anything else
// is left out with a line on stderr, never silently.
void add_xml(PackedRun& run, const std::string& file, std::string text, const std::string& from) {
  if (!outcomes::is_junit(text)) {
    std::cerr << "imptrace: " << from << ": not junit XML (no <testsuite> with <testcase>), left out\n";
    return;
  }
  run.junit.push_back(PackedXml{file, std::move(text)});
}

// RUN arguments into runs: a directory is one run (named after it, through symlinks such
// as imptrace-traces/latest), a trace file one run of one process, a bundle its own runs.
std::vector<PackedRun> collect(const std::vector<std::string>& inputs) {
  std::vector<PackedRun> runs;
  for (const auto& path : inputs) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) throw InputError(path + ": " + strerror(errno));
    if (S_ISDIR(st.st_mode)) {
      char real[PATH_MAX];
      std::string name = base_name(realpath(path.c_str(), real) ? std::string(real) : path);
      std::vector<std::string> files, xml;
      if (DIR* d = opendir(path.c_str())) {
        while (struct dirent* e = readdir(d)) {
          std::string n = e->d_name;
          if (ends_with(n, ".pb") || ends_with(n, ".pb.gz")) files.push_back(path + "/" + n);
          if (n.size() > 4 && ends_with(n, ".xml")) xml.push_back(n);
        }
        closedir(d);
      } else {
        throw InputError(path + ": " + strerror(errno));
      }
      std::sort(files.begin(), files.end());
      if (files.empty()) throw InputError(path + ": no trace files (*.pb) in this directory");
      PackedRun& run = run_named(runs, member_component(name, "run"));
      for (const auto& f : files) add_file(run, f);
      std::sort(xml.begin(), xml.end());
      for (const auto& n : xml) {
        std::vector<uint8_t> bytes = read_whole(path + "/" + n, bundle::kMaxJunitBytes, "64 MiB for junit XML");
        add_xml(run, n, std::string(bytes.begin(), bytes.end()), path + "/" + n);
      }
      continue;
    }
    if (!S_ISREG(st.st_mode)) throw InputError(path + ": not a regular file or directory");
    std::string stem = member_component(strip_suffixes(base_name(path)), "run");
    if (!bundle::is_gzip_file(path)) {
      add_file(run_named(runs, stem), path);
      continue;
    }
    // A bundle or a .pb.gz: its runs keep their names.
    std::vector<std::pair<std::string, size_t>> seen;  // run name in the input -> index in runs
    std::string why;
    auto run_of = [&](const bundle::Member& m) {
      auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& s) { return s.first == m.run; });
      if (it != seen.end()) return it->second;
      run_named(runs, m.run.empty() ? stem : member_component(m.run, "run"));
      seen.emplace_back(m.run, runs.size() - 1);
      return runs.size() - 1;
    };
    auto each_xml = [&](bundle::Member& m, std::string&) {
      add_xml(runs[run_of(m)], m.name.substr(m.name.rfind('/') + 1), std::string(m.bytes.begin(), m.bytes.end()),
              path + "#" + m.name);
      return true;
    };
    bool ok = bundle::read_file(path, [&](bundle::Member& m, std::string&) {
      size_t at = run_of(m);
      PackedTrace t;
      t.from = m.name.empty() ? path : path + "#" + m.name;
      std::string file = m.name.empty() ? base_name(path) : m.name.substr(m.name.rfind('/') + 1);
      t.file = strip_suffixes(file) + ".pb";
      t.bytes = std::move(m.bytes);
      runs[at].traces.push_back(std::move(t));
      return true;
    }, why, each_xml);
    if (!ok) throw InputError(path + ": " + why);
  }
  for (const auto& run : runs)
    if (run.traces.empty()) throw InputError(run.name + ": junit XML but no trace files (*.pb) in this run");
  return runs;
}

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n >= 10ull << 20) snprintf(buf, sizeof buf, "%.1f MB", n / 1e6);
  else if (n >= 10ull << 10) snprintf(buf, sizeof buf, "%.1f kB", n / 1e3);
  else snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
  return buf;
}

// How many imports the run's traces hold, for the manifest and the summary.
size_t imports_in(const PackedRun& run) {
  size_t n = 0;
  for (const auto& t : run.traces) n += t.imports;
  return n;
}

struct PackTotals {
  size_t processes = 0, imports = 0;
};

// Every trace decoded: refused when the viewer would refuse it, counted for the summary.
PackTotals check_traces(std::vector<PackedRun>& runs) {
  PackTotals totals;
  for (auto& run : runs)
    for (auto& t : run.traces) {
      model::Process p;
      std::string why;
      if (!reader::parse_trace(t.bytes.data(), t.bytes.size(), p, why)) throw InputError(t.from + ": " + why);
      t.imports = p.imports.size();
      ++totals.processes;
      totals.imports += p.imports.size();
    }
  return totals;
}

// --redact: what every trace and junit file says is learnt first, so that one secret is
// replaced the same way wherever it appears; then traces, files and names are rewritten.
void redact_runs(std::vector<PackedRun>& runs) {
  redact::Redactor r;
  for (const auto& run : runs) {
    for (const auto& t : run.traces) redact::learn_trace(t.bytes.data(), t.bytes.size(), r);
    for (const auto& x : run.junit) r.learn(x.text);
  }
  r.learn_local_machine();
  for (auto& run : runs) {
    run.name = member_component(r.apply(run.name), "run");
    for (auto& t : run.traces) {
      std::vector<uint8_t> clean;
      std::string why;
      if (!redact::redact_trace(t.bytes.data(), t.bytes.size(), r, clean, why))
        throw InputError(t.from + ": " + why);
      t.bytes.swap(clean);
      t.file = member_component(r.apply(t.file), "trace.pb");
    }
    for (auto& x : run.junit) {
      x.text = redact::redact_xml(x.text, r);
      x.file = member_component(r.apply(x.file), "junit.xml");
    }
  }
  // Run names made equal by redaction stay apart.
  std::vector<std::string> taken;
  for (auto& run : runs) {
    std::string base = run.name;
    for (int n = 2; std::find(taken.begin(), taken.end(), run.name) != taken.end(); ++n)
      run.name = base + "-" + std::to_string(n);
    taken.push_back(run.name);
  }
}

// Junit files keep their names, as test_outcomes lists them by name; names made equal by
// redaction (or cut) stay apart and stay *.xml.
void name_junit_files(std::vector<PackedRun>& runs) {
  for (auto& run : runs) {
    std::vector<std::string> used;
    for (auto& x : run.junit) {
      std::string stem = x.file.size() > 4 && ends_with(x.file, ".xml") ? x.file.substr(0, x.file.size() - 4) : x.file;
      stem = stem.substr(0, 80);
      std::string file = stem + ".xml";
      for (int n = 2; std::find(used.begin(), used.end(), file) != used.end(); ++n)
        file = stem + "-" + std::to_string(n) + ".xml";
      used.push_back(file);
      x.file = file;
    }
  }
}

std::string manifest_json(const std::vector<PackedRun>& runs, bool redacted) {
  std::ostringstream manifest;
  JsonWriter w(manifest, true);
  w.begin_object();
  w.field("schema", "imptrace.bundle/1");
  w.field("redacted", redacted);
  w.object_array("runs", runs, [&](const PackedRun& run) {
    w.field("name", run.name);
    w.field("processes", run.traces.size());
    w.field("imports", imports_in(run));
    std::vector<std::string> files;
    for (const auto& t : run.traces) files.push_back(run.name + "/" + t.file);
    w.string_array("files", files);
    std::vector<std::string> junit;
    for (const auto& x : run.junit) junit.push_back(run.name + "/" + x.file);
    w.string_array("junit", junit);
  });
  w.end_object();
  w.finish();
  return manifest.str();
}

struct WrittenSizes {
  uint64_t traces = 0;  // the traces' bytes before compression
  uint64_t packed = 0;  // the bundle's compressed bytes
};

// The bundle is written beside out_path and renamed over it only when complete, so a
// failed pack never leaves a truncated bundle under the name asked for.
WrittenSizes write_bundle(const std::vector<PackedRun>& runs, const std::string& manifest,
                          const std::string& out_path) {
  WrittenSizes sizes;
  std::string tmp = out_path + ".tmp" + std::to_string(getpid());
  bundle::Writer writer;
  std::string why;
  bool ok = writer.open(tmp, why);
  ok = ok && writer.add("manifest.json", reinterpret_cast<const uint8_t*>(manifest.data()), manifest.size(), why);
  for (const auto& run : runs) {
    std::vector<std::string> used;
    for (const auto& t : run.traces) {
      std::string file = t.file;
      for (int n = 2; std::find(used.begin(), used.end(), file) != used.end(); ++n)
        file = strip_suffixes(t.file) + "-" + std::to_string(n) + ".pb";
      used.push_back(file);
      sizes.traces += t.bytes.size();
      ok = ok && writer.add(run.name + "/" + file, t.bytes.data(), t.bytes.size(), why);
    }
    for (const auto& x : run.junit)
      ok = ok && writer.add(run.name + "/" + x.file, reinterpret_cast<const uint8_t*>(x.text.data()), x.text.size(), why);
  }
  ok = ok && writer.finish(why);
  if (!ok || rename(tmp.c_str(), out_path.c_str()) != 0) {
    if (ok) why = strerror(errno);
    unlink(tmp.c_str());
    throw InputError("cannot write " + out_path + ": " + why);
  }
  sizes.packed = writer.compressed_bytes();
  return sizes;
}

// One line per run, then the totals and what the bundle costs per import.
void print_pack_summary(const std::vector<PackedRun>& runs, const PackTotals& totals, bool redact,
                        const std::string& out_path, const WrittenSizes& sizes) {
  char per_import[64] = "no imports";
  if (totals.imports)
    snprintf(per_import, sizeof per_import, "%.1f bytes per import", static_cast<double>(sizes.packed) / totals.imports);
  for (const auto& run : runs) {
    std::cout << "  " << run.name << ": " << run.traces.size() << " process" << (run.traces.size() == 1 ? "" : "es")
              << ", " << imports_in(run) << " imports";
    for (size_t i = 0; i < run.junit.size(); ++i) std::cout << (i ? ", " : "; test outcomes from ") << run.junit[i].file;
    std::cout << "\n";
  }
  std::cout << "packed " << runs.size() << " run" << (runs.size() == 1 ? "" : "s") << " (" << totals.processes
            << " process" << (totals.processes == 1 ? "" : "es") << ", " << totals.imports << " imports"
            << (redact ? ", redacted" : "") << ") into " << out_path << ": " << human_bytes(sizes.packed) << " from "
            << human_bytes(sizes.traces) << " of traces, " << per_import << "\n";
}

}  // namespace

int run_pack(const std::vector<std::string>& args) {
  ParsedArgs a = parse_args(args, {"-o", "--output"}, {"--redact"});
  if (a.positional.empty()) throw UsageError("pack needs at least one RUN (a directory, a trace file or a bundle)");
  std::string out_path = a.get("-o", a.get("--output", ""));
  if (out_path.empty()) throw UsageError("pack needs -o FILE.tar.gz");
  bool redact = a.has("--redact");

  std::vector<PackedRun> runs = collect(a.positional);
  const PackTotals totals = check_traces(runs);
  if (redact) redact_runs(runs);
  name_junit_files(runs);
  const WrittenSizes sizes = write_bundle(runs, manifest_json(runs, redact), out_path);
  print_pack_summary(runs, totals, redact, out_path, sizes);
  return 0;
}

}  // namespace imptrace
