// Hand-built runs for the diff tests and the diff benchmark generator: the npugraph_ex
// story of the seed failure (good and bad builds), with knobs for
// everything that must NOT matter (pids, addresses, install prefixes, working directory,
// times, thread interleaving).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "diff.h"
#include "model.h"
#include "trace_builder.h"
#include "trace_reader.h"

namespace imptrace {
namespace testing {

struct Variation {
  int64_t pid = 1000;
  uint64_t id_base = 0x7f0000000000ull;   // object addresses
  std::string site = "/opt/_internal/cpython-3.10.16/lib/python3.10/site-packages";
  std::string workspace = "/workspace/torchair";
  uint64_t t0 = 1000;      // time offset
  uint64_t scale = 1;      // time scale
  bool threads_swapped = false;  // interleave the worker thread's imports differently
  std::string xdist_worker;      // "" none
  std::vector<std::string> argv;  // empty: python -m pytest <the smoke test>
  std::string python_version;     // empty: the trace builder's
};

constexpr const char* kStreamTest =
    "npugraph_ex/tests/smoke/stream_test.py::StreamTest::test_stream_basic";

class RunBuilder {
 public:
  explicit RunBuilder(const Variation& v) : v_(v), b_(true, header(v)) {
    b_.add_sys_path({v.workspace, v.site, ""}, 0);
  }
  static HeaderSpec header(const Variation& v) {
    HeaderSpec h;
    h.pid = v.pid;
    h.ppid = v.pid - 1;
    h.argv = {"/usr/bin/python3.10", "-m", "pytest", v.workspace + "/npugraph_ex/tests/smoke/stream_test.py"};
    if (!v.argv.empty()) h.argv = v.argv;
    if (!v.python_version.empty()) h.python_version = v.python_version;
    h.cwd = v.workspace;
    h.start_time_unix_ns = 1700000000000000000 + v.pid * 1000;
    h.env = {{"PYTHONHASHSEED", std::to_string(v.pid)}};
    if (!v.xdist_worker.empty()) h.env.push_back({"PYTEST_XDIST_WORKER", v.xdist_worker});
    return h;
  }
  uint64_t t(uint64_t x) const { return v_.t0 + x * v_.scale; }
  uint64_t id(uint64_t x) const { return v_.id_base + x * 0x40; }
  std::string site(const std::string& rel) const { return v_.site + "/" + rel; }
  std::string ws(const std::string& rel) const { return v_.workspace + "/" + rel; }

  // A plain, successful import. Returns its object.
  Obj import(const std::string& name, const std::string& file, uint64_t begin, uint64_t dur,
             uint64_t parent = 0, uint64_t thread = 1, const std::string& test = "",
             uint64_t obj_index = 0) {
    auto im = ImportSpec::make(next_index_, name, t(begin), dur * v_.scale, parent);
    im.thread = thread;
    uint64_t oid = id(obj_index ? obj_index : next_index_ + 1);
    im.object = Obj::module(oid, name, file);
    im.origin = file;
    im.loader = "<_frozen_importlib_external.SourceFileLoader object at 0x" + hex(oid) + ">";
    im.importer = Loc{ws("npugraph_ex/tests/smoke/stream_test.py"), 5, "<module>"};
    im.test = test;
    ChangeSpec c;
    c.key = name;
    c.new_object = im.object;
    c.by_import_system = true;
    c.time_ns = t(begin) + 1;
    c.thread = thread;
    c.during_import = next_index_ + 1;
    pending_.push_back(im);
    b_.add_modules_change(c);
    ++next_index_;
    return *im.object;
  }
  // A module of the interpreter's own standard library under `lib` (/usr/lib/python3.12),
  // imported by a module of it (the standard library importing for itself).
  Obj stdlib_import(const std::string& name, const std::string& lib, uint64_t begin) {
    Obj o = import(name, lib + "/" + name + ".py", begin, 1);
    pending_.back().importer = Loc{lib + "/os.py", 1, "<module>"};
    return o;
  }
  // Imports are written when they end (children first); flush writes them in that order.
  void flush() {
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) b_.add_import(*it);
    pending_.clear();
  }
  void failed_import(const std::string& name, uint64_t begin, const std::string& type,
                     const std::string& msg) {
    auto im = ImportSpec::make(next_index_++, name, t(begin), 100);
    im.ok = false;
    im.error_type = type;
    im.error_message = msg;
    im.importer = Loc{ws("npugraph_ex/tests/smoke/stream_test.py"), 9, "<module>"};
    b_.add_import(im);
  }
  TraceBuilder& b() { return b_; }
  uint64_t next_index() const { return next_index_; }
  static std::string hex(uint64_t x) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(x));
    return buf;
  }

  // The process's end record, as a process that finished writes it last; process()
  // writes an exit with status 0 unless one was given (or cut_short() was called).
  void end(uint32_t how, int64_t status = 0, int signal = 0) {
    flush();
    b_.add_process_end(how, status, signal);
    ended_ = true;
  }
  void cut_short() { ended_ = true; }

  model::Process process() {
    flush();
    if (!ended_) end(fields::ProcessEnd::EXIT, 0);
    model::Process p;
    std::string why;
    if (!reader::parse_trace(b_.data(), b_.size(), p, why)) throw std::runtime_error(why);
    p.source_file = "mem:" + std::to_string(v_.pid);
    return p;
  }

 private:
  Variation v_;
  TraceBuilder b_;
  std::vector<ImportSpec> pending_;
  uint64_t next_index_ = 0;
  bool ended_ = false;
};

// The smoke test run. bad: torch_npu's add_dynamo_methods() replaces
// sys.modules['npugraph_ex'] with the _LazyNpuGraphEx proxy after npu_fx_compiler was
// bound on the standalone package; setUp then fails through the proxy.
inline void npugraph_fill(RunBuilder& r, bool bad, const Variation& v, int tests = 3) {
  // Some unrelated start-up imports, on the main thread and a worker thread.
  r.import("os", "/usr/lib/python3.10/os.py", 1, 5);
  r.import("json", "/usr/lib/python3.10/json/__init__.py", 10, 20);
  r.import("json.decoder", "/usr/lib/python3.10/json/decoder.py", 12, 5, /*parent=*/2);
  r.flush();
  // A second thread importing concurrently.
  if (!v.threads_swapped) {
    r.import("concurrent", "/usr/lib/python3.10/concurrent/__init__.py", 35, 2, 0, 2);
    r.import("queue", "/usr/lib/python3.10/queue.py", 36, 2, 0, 2);
  } else {
    r.import("queue", "/usr/lib/python3.10/queue.py", 35, 2, 0, 2);
    r.import("concurrent", "/usr/lib/python3.10/concurrent/__init__.py", 36, 2, 0, 2);
  }
  r.flush();

  // The test module imports the standalone npugraph_ex package (S) and its child.
  uint64_t s_index = r.next_index() + 1;
  Obj S = r.import("npugraph_ex", r.ws("npugraph_ex/__init__.py"), 40, 30);
  Obj C = r.import("npugraph_ex.npu_fx_compiler", r.ws("npugraph_ex/npu_fx_compiler.py"), 45, 10, s_index);
  r.flush();
  BindingSpec bind;
  bind.import_index = s_index;  // index of the child import
  bind.parent = "npugraph_ex";
  bind.attribute = "npu_fx_compiler";
  bind.bound_on = S;
  bind.child = C;
  bind.attribute_value = C;
  bind.status = F::Binding::BOUND;
  bind.time_ns = r.t(56);
  r.b().add_binding(bind);

  // import torch_npu
  r.import("torch", r.site("torch/__init__.py"), 80, 200);
  uint64_t tn = r.next_index() + 1;
  r.import("torch_npu", r.site("torch_npu/__init__.py"), 300, 100);
  r.import("torch_npu.dynamo", r.site("torch_npu/dynamo/__init__.py"), 310, 40, tn);
  r.flush();
  Obj P = Obj::proxy(r.id(999), "torch_npu.dynamo._LazyNpuGraphEx", "npugraph_ex");
  P.flags = F::ObjectFlags::module_subclass | F::ObjectFlags::proxy;
  Obj R = Obj::module(r.id(998), "torch_npu.dynamo.npugraph_ex",
                      r.site("torch_npu/dynamo/npugraph_ex/__init__.py"));
  if (bad) {
    ChangeSpec c;
    c.key = "npugraph_ex";
    c.old_object = S;
    c.new_object = P;
    c.by_import_system = false;
    c.time_ns = r.t(390);
    c.stack = {Loc{r.site("torch_npu/dynamo/__init__.py"), 131, "add_dynamo_methods"},
               Loc{r.site("torch_npu/utils/_dynamo.py"), 88, "add_dynamo_methods"},
               Loc{r.site("torch_npu/__init__.py"), 250, "<module>"}};
    r.b().add_modules_change(c);
    r.b().add_proxy_class("torch_npu.dynamo._LazyNpuGraphEx",
                          Loc{r.site("torch_npu/dynamo/__init__.py"), 127, "_LazyNpuGraphEx.__getattr__"},
                          "torch_npu.dynamo", true);
  }
  for (int i = 0; i < tests; ++i) {
    std::string test = std::string(kStreamTest) + std::to_string(i) + " (setup)";
    if (bad) {
      if (i == 0) {
        auto im = ImportSpec::make(r.next_index(), "torch_npu.dynamo.npugraph_ex", r.t(500), 20 * v.scale);
        im.object = R;
        im.origin = R.file;
        im.loader = "SourceFileLoader";
        im.importer = Loc{r.site("torch_npu/dynamo/__init__.py"), 120, "_LazyNpuGraphEx._load"};
        im.test = test;
        r.b().add_import(im);
      }
      AccessSpec a;
      a.proxy = P;
      a.attribute = "npu_fx_compiler";
      a.ok = false;
      a.error_type = "AttributeError";
      a.error_message = "module 'torch_npu.dynamo.npugraph_ex' has no attribute 'npu_fx_compiler'";
      a.forwarded_to = R;
      a.stack = {Loc{r.ws("npugraph_ex/tests/smoke/stream_test.py"), 63, "StreamTest.setUp"}};
      a.time_ns = r.t(600 + i * 10);
      a.test = test;
      r.b().add_proxy_access(a);
    }
  }
  r.flush();
}

inline model::Process npugraph_run(bool bad, const Variation& v, int tests = 3) {
  RunBuilder r(v);
  npugraph_fill(r, bad, v, tests);
  return r.process();
}

// The text `imptrace diff` prints for `r`, without colour: what a failed check shows.
inline std::string dump(const diff::Result& r) {
  std::ostringstream s;
  diff::write_text(r, s, false);
  return s.str();
}

}  // namespace testing
}  // namespace imptrace
