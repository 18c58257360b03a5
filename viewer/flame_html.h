// The interactive import-time chart of the HTML reports (one run and good/bad): per process
// and thread, an icicle of imports laid out on the time axis (a child sits inside its
// importer's bar; the gaps are the importer's self time). Click a bar to zoom to it, hover
// for its name, cumulative and self time, importer location, test and outcome. Everything
// inline (the reports are one self-contained page with no network).
#pragma once

#include <ostream>
#include <set>
#include <string>

#include "model.h"

namespace imptrace {
namespace html {

// `s` with &, <, >, quotes escaped and control characters other than \n, \t replaced.
std::string escape(const std::string& s);

// The first `cap` of `items` through `each`, then, when there are more, `more(rest)` once:
// the reports bound every list and say how much they left out.
template <class Items, class Each, class More>
void first_of(const Items& items, size_t cap, Each each, More more) {
  size_t n = 0;
  for (const auto& item : items) {
    if (n++ >= cap) {
      more(items.size() - cap);
      return;
    }
    each(item);
  }
}

// CSS and script the page includes once (in <style> and at the end of <body>).
extern const char kFlameStyle[];
extern const char kFlameScript[];

// One process's chart: its container and its data (JSON in a non-executed script
// element). `id` is unique on the page; imports named in `marked` are drawn highlighted.
void write_flame(const model::Process& p, const std::string& id, const std::set<std::string>& marked,
                 std::ostream& out);

}  // namespace html
}  // namespace imptrace
