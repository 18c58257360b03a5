// The trace decoder: framing (top-level Trace.record entries) and one decoder per message,
// from a byte source into the model.
#pragma once

#include <string>

#include "byte_source.h"
#include "model.h"

namespace imptrace {
namespace reader {

// Decodes the whole trace `src` holds into `out`. On failure returns false and sets `why`
// (see trace_reader.h); warnings go to out.warnings.
bool decode_trace(ByteSource& src, model::Process& out, std::string& why);

}  // namespace reader
}  // namespace imptrace
