// Repeated proxy accesses, counted instead of recorded. A lazy package's attribute read in
// an inner loop goes through its __getattr__ on every iteration; recording each call in
// full (a stack walk and a record) would cost about a microsecond and 60 bytes each,
// without bound. So the full record is kept for what tells the story:
//  - every failed access (the caller never gets here for one);
//  - the first kRecordedInFull accesses of each site: (object, attribute, kind, calling
//    instruction);
//  - the first access of a site after anything about objects under sys.modules changed (a
//    key replaced or removed, any __class__ assignment), after its result changed (a new
//    forwarding target answers with another object; kResultChangesRecorded times per
//    site, then a result that is new at every access is counted too), in another pytest
//    phase, or in a fork child's new file.
// Everything else is a repeat: one increment in a fixed-size table, with no stack walk, no
// record, no lock and no allocation. The counts go out as ProxyAccessSummary records naming
// the serial of the site's latest full record: at most kSummaryInterval after they were
// counted (the clock is read every kRepeatsPerClockRead repeats), at the next import
// boundary, and at exit, os._exit and exec. A crash loses at most the counts of the last
// interval (a fatal signal's handler writes none: it may have interrupted a count).
//
// The calling instruction is the caller frame's code object and instruction offset
// (frame_position): when the hook runs, the __getattr__ has returned and the current frame
// is the caller's. Two reads on one line are two sites; both read as that line.
//
// The table is touched with the main interpreter's GIL held; sites beyond its size evict
// older ones (whose counts are written first), which then start again with full records.
#pragma once

#include <stdint.h>

#include "cpython_api.h"

namespace imptrace {

// Where one access came from and what it was about. `object`: the proxy, or the module
// whose __getattr__ ran (the function itself when the module left sys.modules).
struct AccessSite {
  PyObject* object;
  PyObject* attribute;
  PyObject* code;  // compared by address only; the caller's running frame keeps it alive
  int32_t position;
  uint32_t kind;   // a ProxyAccess::Kind
};

// The repeated path, for a successful access whose function has just returned: true when
// it was counted (record nothing). Otherwise `site` holds its calling instruction for the
// full record, or a null code when no Python frame called it (then no repeat of it is
// ever counted). `object` and `attribute` are never null (the hook's vectorcall arguments
// and the function itself).
bool count_repeat(uint32_t kind, PyObject* object, PyObject* attribute, PyObject* result, AccessSite* site);

// A successful access at `site` about to be recorded in full, writer lock held. Returns the
// serial its record carries (0: its repeats will not be counted, as for an object the
// trace cannot follow to its death). References the table gives up are handed back in
// `drop` (up to two), to be released once the writer lock is no longer held.
uint64_t note_recorded_access(const AccessSite& site, PyObject* result, uint64_t object_id, PyObject** drop);

// Writes a ProxyAccessSummary for every site with repeats not yet written, writer lock
// held. Reads nothing of CPython's, so it may run at exit after finalisation. Costs one
// comparison when there is nothing to write.
void write_repeat_summaries();

// Something about objects under sys.modules changed: every site's next access is recorded
// in full.
void repeats_objects_changed();

}  // namespace imptrace
