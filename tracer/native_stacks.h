// Native stacks of imports (IMPTRACE_NATIVE_STACKS=1): the C call chain that led to an
// import, as (object, offset, symbol) frames.
#pragma once

#include "record_encoder.h"

namespace imptrace {

constexpr int kNativeDepth = 48;

// Loads the unwinder now, not inside the first import (bootstrap, when native stacks are on).
void prepare_native_stacks();

// The return addresses of the current C stack, innermost first, up to and including the
// first frame of the interpreter's bytecode evaluation; the whole stack, at most
// kNativeDepth, when none is in it.
int capture_native_stack(void** frames);

// The frames as the Import record's native_stack entries, this library's own left out, in
// `out` (room for kNativeFrameBytes per frame); returns the bytes written. `depth`: the
// import's nesting on its thread (0: outermost). With the writer lock held.
size_t resolve_native_stack(void* const* frames, int n, int depth, uint8_t* out);

}  // namespace imptrace
