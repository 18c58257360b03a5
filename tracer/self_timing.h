// A profiling build of the tracer: `cmake -DIMPTRACE_SELF_TIMING=ON` (never a build to
// ship). The import hook then counts the cycles of its own work, section by section, with
// the CPU's time-stamp counter, and prints at exit (stderr) the cycles per import of each
// section and how the per-import totals are spread (median, 90th and 99th percentile, and
// the share of the slowest tenth: growth of tables, pages made, file moves).
//
// Why it exists: CI's virtual machines have no performance counters, whole-process times
// move by several percent between runs, and callgrind counts instructions but not what
// they wait for. The tracer's own cycles, compared in alternating runs of two builds,
// resolve a change of a few percent of them (how the fifth session found what the trace
// file's window moves and the shadow's key copies cost). Time spent inside CPython's own
// import (between the hook's two halves) is not counted; the cost the tracer's code adds
// to CPython's by evicting its caches is not seen here either.
//
// In the default build every macro below is empty.
#pragma once

#ifdef IMPTRACE_SELF_TIMING
#include <stdint.h>

namespace imptrace {
namespace self_timing {
// The hook's own work for an import begins.
void start();
// The section that has run since the last mark (or start) ends: `section` < 16 indexes
// the table, `name` labels it.
void mark(int section, const char* name);
// importlib's call begins (not counted; imports inside it are counted as their own) /
// it has returned / the hook's work for this import ends.
void pause();
void resume();
void finish();
}  // namespace self_timing
}  // namespace imptrace

#define SELF_TIMING_START() ::imptrace::self_timing::start()
#define SELF_TIMING_MARK(section, name) ::imptrace::self_timing::mark(section, name)
#define SELF_TIMING_PAUSE() ::imptrace::self_timing::pause()
#define SELF_TIMING_RESUME() ::imptrace::self_timing::resume()
#define SELF_TIMING_FINISH() ::imptrace::self_timing::finish()
#else
#define SELF_TIMING_START() ((void)0)
#define SELF_TIMING_MARK(section, name) ((void)0)
#define SELF_TIMING_PAUSE() ((void)0)
#define SELF_TIMING_RESUME() ((void)0)
#define SELF_TIMING_FINISH() ((void)0)
#endif
