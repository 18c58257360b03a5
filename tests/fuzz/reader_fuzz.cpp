// libFuzzer target for the viewer's trace reader (viewer/trace_reader.h): any byte string
// is fed to parse_trace; whatever it accepts is then rendered by every read-only command
// (show, tree with and without its options, export json/chrome, the one-run report) and
// diffed against itself, so the model built from a hostile file is exercised too. Must never crash, hang, leak or trip ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "diff.h"
#include "trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  imptrace::model::Process p;
  std::string why;
  if (!imptrace::reader::parse_trace(data, size, p, why)) {
    // A failure is one line of text, never empty.
    if (why.empty() || why.find('\n') != std::string::npos) __builtin_trap();
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
  return 0;
}
