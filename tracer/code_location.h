// Where Python code is: the stack of the running thread as CodeLocations, and where a
// function is defined.
#pragma once

#include "cpython_api.h"
#include "record_values.h"

namespace imptrace {

// Frames kept for a sys.modules change or a proxy access.
constexpr int kStackDepth = 8;

// Walks the Python stack from `start` (a borrowed frame; null: the current frame) into
// `out`, at most `max` entries. With skip_importlib, importlib's own frames are passed
// over so the first entry is the code that asked for the import. Returns the count.
int capture_stack(CodeLocation* out, int max, bool skip_importlib, PyObject* start = nullptr);

// Where a function is defined: its code's file and first line.
CodeLocation function_location(PyObject* fn);

}  // namespace imptrace
