// Benchmark input for `imptrace diff` (two runs of 100,000 imports each in under
// one second on one core, under 300 MiB): writes OUTDIR/good/run.pb and OUTDIR/bad/run.pb,
// each with N imports (nested packages, an import-system sys.modules insertion and a
// parent binding per import), with different pids, addresses, prefixes and times; the bad
// run also has the npugraph_ex-like replacement and one extra import.
//
//   diff_bench_gen OUTDIR [N]   then   /usr/bin/time -v imptrace diff OUTDIR/good OUTDIR/bad
//   diff_bench_gen --time GOOD BAD     times reading and the engine separately
//   diff_bench_gen --npugraph OUTDIR   the hand-built npugraph_ex story of diff_runs.h:
//                                      OUTDIR/{good,good2,bad}/run.pb
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include "diff.h"
#include <cstdlib>
#include <string>

#include "diff_runs.h"
#include "trace_builder.h"

using namespace imptrace::testing;

// A module loaded from `file` by SourceFileLoader, and the import system's insertion of it
// into sys.modules just after the import began.
static void loaded_from_source(TraceBuilder& b, ImportSpec& im, uint64_t address, const std::string& file,
                        const Loc& importer) {
  im.object = Obj::module(address, im.name, file);
  im.origin = file;
  im.loader = "SourceFileLoader";
  im.importer = importer;
  ChangeSpec c;
  c.key = im.name;
  c.new_object = im.object;
  c.by_import_system = true;
  c.time_ns = im.begin_ns + 1;
  b.add_modules_change(c);
}

static void write_run(const std::string& dir, size_t n, bool bad) {
  HeaderSpec h;
  h.pid = bad ? 2002 : 1001;
  h.argv = {"python3", "-m", "pytest", "tests"};
  std::string site = bad ? "/usr/local/lib/python3.11/site-packages" : "/opt/venv/lib/python3.11/site-packages";
  TraceBuilder b(true, h);
  b.add_sys_path({site, ""});
  uint64_t base = bad ? 0x7f1100000000ull : 0x5500000000ull;
  uint64_t t = bad ? 777 : 5;
  // 1000 top-level packages, each with n/1000 children.
  size_t per = n / 1000 ? n / 1000 : 1;
  uint64_t index = 0;
  for (size_t p = 0; index < n; ++p) {
    std::string pkg = "pkg" + std::to_string(p);
    uint64_t pkg_index = index;
    size_t kids = std::min(per - 1, n - index - 1);
    auto top = ImportSpec::make(index++, pkg, t, 0);
    loaded_from_source(b, top, base + pkg_index * 64, site + "/" + pkg + "/__init__.py",
                       Loc{site + "/app.py", 3, "<module>"});
    uint64_t child_t = t + 10;
    for (size_t k = 0; k < kids; ++k) {
      std::string name = pkg + ".mod" + std::to_string(k);
      auto im = ImportSpec::make(index, name, child_t, 1000, pkg_index + 1);
      loaded_from_source(b, im, base + index * 64, site + "/" + pkg + "/mod" + std::to_string(k) + ".py",
                         Loc{site + "/" + pkg + "/__init__.py", static_cast<uint32_t>(k + 1), "<module>"});
      b.add_import(im);
      BindingSpec bs;
      bs.import_index = index;
      bs.parent = pkg;
      bs.attribute = "mod" + std::to_string(k);
      bs.bound_on = top.object;
      bs.child = im.object;
      bs.attribute_value = im.object;
      bs.time_ns = child_t + 1001;
      b.add_binding(bs);
      ++index;
      child_t += 1100;
    }
    top.duration_ns = child_t - t + 500;
    b.add_import(top);
    t = child_t + 1000;
  }
  if (bad) {
    ChangeSpec c;
    c.key = "pkg1";
    c.old_object = Obj::module(base + per * 64, "pkg1", site + "/pkg1/__init__.py");
    c.new_object = Obj::proxy(base + 0xfffff0, "torch_npu.dynamo._LazyNpuGraphEx", "pkg1");
    c.time_ns = t;
    c.stack = {Loc{site + "/torch_npu/dynamo/__init__.py", 131, "add_dynamo_methods"}};
    b.add_modules_change(c);
    auto extra = ImportSpec::make(index, "extra_mod", t + 10, 100);
    extra.object = Obj::module(base + 0xffff00, "extra_mod", site + "/extra_mod.py");
    extra.origin = extra.object->file;
    b.add_import(extra);
  }
  // Both processes finished: a trace with no end record is a process cut short, and two
  // of those are compared only up to where the earlier stopped.
  b.add_process_end(imptrace::fields::ProcessEnd::EXIT, 0, 0, t + 1000);
  mkdir(dir.c_str(), 0755);
  if (!b.write_file(dir + "/run.pb")) {
    fprintf(stderr, "cannot write %s/run.pb\n", dir.c_str());
    exit(1);
  }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: diff_bench_gen OUTDIR [N]\n");
    return 2;
  }
  std::string out = argv[1];
  if (out == "--time" && argc > 3) {
    using clk = std::chrono::steady_clock;
    auto ms = [](clk::time_point a, clk::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    auto t0 = clk::now();
    std::vector<imptrace::model::Process> good, bad;
    std::string err;
    std::vector<std::string> warn;
    if (!imptrace::reader::load_traces({argv[2]}, good, err, warn) ||
        !imptrace::reader::load_traces({argv[3]}, bad, err, warn)) {
      fprintf(stderr, "%s\n", err.c_str());
      return 2;
    }
    auto t1 = clk::now();
    imptrace::diff::Result r = imptrace::diff::diff_runs(good, bad);
    auto t2 = clk::now();
    printf("read %.0f ms, diff engine %.0f ms, %zu findings\n", ms(t0, t1), ms(t1, t2), r.findings.size());
    return 0;
  }
  if (out == "--npugraph" && argc > 2) {
    out = argv[2];
    mkdir(out.c_str(), 0755);
    Variation other;
    other.pid = 5151;
    other.id_base = 0x5500aa000000ull;
    other.site = "/usr/local/lib/python3.10/dist-packages";
    other.workspace = "/home/ci/torchair";
    other.threads_swapped = true;
    struct { const char* name; bool bad; Variation v; } runs[] = {
        {"good", false, Variation()}, {"good2", false, other}, {"bad", true, other}};
    for (const auto& r : runs) {
      std::string dir = out + "/" + r.name;
      mkdir(dir.c_str(), 0755);
      RunBuilder rb(r.v);
      npugraph_fill(rb, r.bad, r.v);
      if (!rb.b().write_file(dir + "/run.pb")) return 1;
    }
    printf("%s/{good,good2,bad}\n", out.c_str());
    return 0;
  }
  size_t n = argc > 2 ? strtoull(argv[2], nullptr, 10) : 100000;
  mkdir(out.c_str(), 0755);
  write_run(out + "/good", n, false);
  write_run(out + "/bad", n, true);
  printf("%s/good %s/bad: %zu imports each\n", out.c_str(), out.c_str(), n);
  return 0;
}
