// Reads imptrace trace files (proto/imptrace.proto) into the model (model.h).
//
// The reader is the only code that sees the wire format. It is built for hostile input:
// every length is checked against what is left of the file, a record may not exceed
// kMaxRecordBytes, nothing recurses on data, unknown fields are skipped, and a file cut
// short is read up to its last whole record (with a warning in Process::warnings).
// It never throws for bad input; failures come back as one line of text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "model.h"

namespace imptrace {
namespace reader {

// Largest single record we accept. Real records are a few KiB; anything near this is a
// corrupt length prefix, and refusing it keeps memory bounded.
constexpr uint64_t kMaxRecordBytes = 64ull << 20;

// Parses a trace held in memory. On failure returns false and sets `why` (no file name,
// e.g. "not an imptrace trace (first record is not a header)").
bool parse_trace(const uint8_t* data, size_t size, model::Process& out, std::string& why);

// Streams one trace file record by record. On failure returns false and sets `why`.
bool read_trace_file(const std::string& path, model::Process& out, std::string& why);

// Expands PATH arguments: a file is read as one process; a directory contributes every
// regular file in it whose name ends in ".pb" or ".pb.gz" (sorted by name, counted by inode
// so a link to a trace is not another process); a gzip file is a bundle (bundle.h: every
// trace of every run in it) or a .pb.gz trace; BUNDLE#RUN is the traces of one run of a
// bundle. In a directory a file that cannot be read as a trace (empty, unreadable,
// foreign, cut inside its header, a newer schema) is skipped with a warning; a FILE
// argument that cannot be read is a failure: returns false with `error` = "<file>: <why>".
// Warnings (truncation etc.) are left in each Process::warnings and also appended to
// `warnings` as "<file>: <warning>" lines, for the caller to print to stderr.
// A process read from a bundle has source_file "BUNDLE#RUN/FILE.pb".
bool load_traces(const std::vector<std::string>& paths, std::vector<model::Process>& out,
                 std::string& error, std::vector<std::string>& warnings);

// load_traces for one PATH that must be one run (a side of a diff): a bundle holding
// several runs is an error that names them and says how to pick one (BUNDLE#RUN).
bool load_run(const std::string& path, std::vector<model::Process>& out, std::string& error,
              std::vector<std::string>& warnings);

// The bundle run a process was read from ("" when not from a bundle, or at its top level).
std::string bundle_run_of(const std::string& source_file);

}  // namespace reader
}  // namespace imptrace
