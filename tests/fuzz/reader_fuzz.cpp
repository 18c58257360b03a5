// libFuzzer target for the viewer's trace reader (viewer/trace_reader.h): any byte string
// is fed to parse_trace; whatever it accepts is then rendered by every read-only command
// (show, tree with and without its options, export json/chrome, the one-run report) and
// diffed against itself (two runs, and many), so the model built from a hostile file is exercised too. Bytes
// that start with the gzip magic go through the bundle reader (bundle.h: gzip, tar, .pb.gz)
// first, and every trace they hold is also redacted (redact.h) and read back; every junit
// XML member they hold is parsed (test_outcomes.h) and redacted as XML. Must never
// crash, hang, leak or trip ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "bundle.h"
#include "diff.h"
#include "diff_many.h"
#include "redact.h"
#include "test_outcomes.h"
#include "trace_reader.h"

namespace {

// A failure is one line of text, never empty.
void check_reason(const std::string& why) {
  if (why.empty() || why.find('\n') != std::string::npos) __builtin_trap();
}

void fuzz_bundle(const uint8_t* data, size_t size) {
  std::string why;
  bool ok = imptrace::bundle::read_memory(data, size, [](imptrace::bundle::Member& m, std::string&) {
    imptrace::model::Process p;
    std::string pwhy;
    if (!imptrace::reader::parse_trace(m.bytes.data(), m.bytes.size(), p, pwhy)) {
      check_reason(pwhy);
      return true;
    }
    imptrace::redact::Redactor r;
    imptrace::redact::learn_trace(m.bytes.data(), m.bytes.size(), r);
    std::vector<uint8_t> clean;
    if (!imptrace::redact::redact_trace(m.bytes.data(), m.bytes.size(), r, clean, pwhy)) return true;
    imptrace::model::Process q;
    // A trace the reader accepted stays one after redaction.
    if (!clean.empty() && !imptrace::reader::parse_trace(clean.data(), clean.size(), q, pwhy) && pwhy != "empty file")
      __builtin_trap();
    return true;
  }, why, [](imptrace::bundle::Member& m, std::string&) {
    std::string xml(m.bytes.begin(), m.bytes.end());
    std::vector<imptrace::outcomes::TestCase> tests;
    imptrace::outcomes::parse_junit(xml, tests);
    imptrace::redact::Redactor r;
    r.learn(xml);
    std::string clean = imptrace::redact::redact_xml(xml, r);
    std::vector<imptrace::outcomes::TestCase> again;
    imptrace::outcomes::parse_junit(clean, again);
    return true;
  });
  if (!ok) check_reason(why);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (imptrace::bundle::is_gzip(data, size)) {
    fuzz_bundle(data, size);
    return 0;
  }
  imptrace::model::Process p;
  std::string why;
  if (!imptrace::reader::parse_trace(data, size, p, why)) {
    check_reason(why);
    return 0;
  }
  std::vector<imptrace::model::Process> procs{p};
  std::ostringstream out;
  imptrace::show_text(procs, out);
  imptrace::tree_text(procs, out);
  imptrace::show_text(procs, out, /*all_failures=*/true);
  imptrace::timing::TreeOptions cut;
  cut.min_ns = 1000;
  cut.max_depth = 3;
  cut.sort = imptrace::timing::SortKey::Self;
  cut.top = 2;
  cut.under = "a";
  imptrace::tree_text(procs, cut, out);
  imptrace::write_run_html(procs, "fuzz", out);
  imptrace::export_json(procs, out);
  imptrace::export_chrome(procs, out);
  imptrace::diff::Result r = imptrace::diff::diff_runs(procs, procs);
  imptrace::diff::write_json(r, out);
  imptrace::diff::write_text(r, out, false);
  // The many-run diff: the same run on both sides, and against an empty run.
  auto load = [&](const std::string& path, std::vector<imptrace::model::Process>& into, bool) {
    if (path == "fuzz") into = procs;
    else into.clear();
  };
  imptrace::diff::Result many = imptrace::diff::diff_many_runs({"fuzz", "empty"}, {"fuzz"}, load);
  imptrace::diff::write_json(many, out);
  imptrace::diff::write_markdown(many, out);
  return 0;
}
