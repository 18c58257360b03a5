// The values records are made of, as plain data: what the tracer read from Python objects,
// already turned into string ids and identities. The readers of Python objects produce
// them; record_encoder.* writes them. Nothing here knows CPython.
#pragma once

#include <stdint.h>

namespace imptrace {

// A place in Python code (imptrace.Location).
struct CodeLocation {
  uint32_t file = 0, line = 0, function = 0;
  bool importlib = false;  // a frame of importlib's own (not written)
};

// An object as the trace names it (imptrace.ObjectRef).
struct ObjectDescription {
  uint64_t id = 0;
  uint32_t type = 0, flags = 0, name = 0, file = 0;
};

}  // namespace imptrace
