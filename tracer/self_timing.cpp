// The profiling build's cycle counters (self_timing.h). Compiled only with
// IMPTRACE_SELF_TIMING. Single-threaded programs give clean figures: the counters are
// process-wide and only the thread that holds the GIL runs the hook, but a thread
// switch inside importlib's call would be counted to the next import's sections.
#ifdef IMPTRACE_SELF_TIMING
#include "self_timing.h"

#include <stdio.h>
#include <stdlib.h>

namespace imptrace {
namespace self_timing {
namespace {

inline uint64_t ticks() {
#if defined(__x86_64__)
  uint32_t lo, hi;
  __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
  return static_cast<uint64_t>(hi) << 32 | lo;
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

constexpr int kSections = 16;
constexpr size_t kKept = 1 << 16;  // imports whose sections are kept for the percentiles

struct PerImport {
  uint64_t total;
  uint32_t section[kSections];  // ticks, saturated
};

uint64_t g_section[kSections];
const char* g_name[kSections];
uint64_t g_last = 0;     // ticks at the last start or mark
PerImport g_current;  // this import's figures so far
uint64_t g_imports = 0;
PerImport* g_kept = nullptr;  // the first kKept imports
// The enclosing imports' figures so far, while an inner one runs.
constexpr int kDepth = 256;
PerImport g_outer[kDepth];
int g_depth = 0;

int cmp(const void* a, const void* b) {
  uint64_t x = static_cast<const PerImport*>(a)->total, y = static_cast<const PerImport*>(b)->total;
  return x < y ? -1 : x > y;
}

struct Report {
  ~Report() {
    if (!g_imports) return;
    uint64_t all = 0;
    for (uint64_t s : g_section) all += s;
    fprintf(stderr, "imptrace self-timing: %llu imports, %.0f ticks per import (the hook's own work)\n",
            static_cast<unsigned long long>(g_imports), static_cast<double>(all) / g_imports);
    for (int k = 0; k < kSections; ++k)
      if (g_name[k])
        fprintf(stderr, "  %-26s %8.0f\n", g_name[k], static_cast<double>(g_section[k]) / g_imports);
    size_t n = g_imports < kKept ? g_imports : kKept;
    if (!g_kept || n < 10) return;
    qsort(g_kept, n, sizeof *g_kept, cmp);
    uint64_t top = 0, sum = 0, top_section[kSections] = {};
    size_t first_top = n - n / 10;
    for (size_t i = 0; i < n; ++i) {
      sum += g_kept[i].total;
      if (i < first_top) continue;
      top += g_kept[i].total;
      for (int k = 0; k < kSections; ++k) top_section[k] += g_kept[i].section[k];
    }
    fprintf(stderr, "  per import: median %llu, p90 %llu, p99 %llu, max %llu; the slowest tenth is %.0f%% of all,\n",
            static_cast<unsigned long long>(g_kept[n / 2].total), static_cast<unsigned long long>(g_kept[n * 9 / 10].total),
            static_cast<unsigned long long>(g_kept[n * 99 / 100].total),
            static_cast<unsigned long long>(g_kept[n - 1].total), 100.0 * static_cast<double>(top) / static_cast<double>(sum));
    fprintf(stderr, "  spent (ticks per import of all imports) in:");
    for (int k = 0; k < kSections; ++k)
      if (g_name[k] && top_section[k] * 100 > top)
        fprintf(stderr, " %s %.0f;", g_name[k], static_cast<double>(top_section[k]) / g_imports);
    fprintf(stderr, "\n");
  }
} g_report;

}  // namespace

void start() {
  g_current = PerImport();
  g_last = ticks();
}

void mark(int section, const char* name) {
  uint64_t now = ticks();
  if (section >= 0 && section < kSections) {
    g_section[section] += now - g_last;
    g_name[section] = name;
  }
  g_current.total += now - g_last;
  if (section >= 0 && section < kSections) {
    uint64_t v = g_current.section[section] + (now - g_last);
    g_current.section[section] = v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v);
  }
  g_last = now;
}

void pause() {
  mark(kSections - 1, "(not marked)");
  if (g_depth < kDepth) g_outer[g_depth] = g_current;
  ++g_depth;
}

void resume() {
  --g_depth;
  g_current = g_depth >= 0 && g_depth < kDepth ? g_outer[g_depth] : PerImport();
  g_last = ticks();
}

void finish() {
  mark(kSections - 1, "(not marked)");
  if (!g_kept) g_kept = static_cast<PerImport*>(calloc(kKept, sizeof(PerImport)));
  if (g_kept && g_imports < kKept) g_kept[g_imports] = g_current;
  g_current = PerImport();
  ++g_imports;
}

}  // namespace self_timing
}  // namespace imptrace
#endif
