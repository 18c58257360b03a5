// Per-thread state: the stack of imports in progress on this thread and what a hook must
// know about the thread it runs on.
//
// The state is one thread_local of a trivially constructible type whose zero state is its
// initial state: nothing ever needs to run before a thread's first access, which lets
// every file reach it with one %fs-relative load and no TLS wrapper call
// (-ftls-model=initial-exec -fno-extern-tls-init, tracer/CMakeLists.txt says why).
#pragma once

#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpython_api.h"
#include "process_state.h"
#include "pytest_context.h"
#include "record_encoder.h"
#include "trace_writer.h"

namespace imptrace {

// One import in progress on this thread.
struct InFlight {
  uint64_t index;
  PyObject* name;       // borrowed: the caller's frame keeps the argument alive
  uint32_t name_id;     // its string id when it began (the in-flight table's key)
  uint32_t name_epoch;  // TraceWriter::strings_epoch() then: name_id is its id while that holds
  uint32_t generation;
  bool noted;           // its sys.modules insertion is already in the shadow
  // 3.8-3.11: what the import system put into sys.modules under the name (a reference,
  // dropped at the import's end). The shadow learns it at the next boundary, not at the
  // store; held so that, if it is replaced before then, the replaced object can still be
  // described (and its address not reused meanwhile).
  PyObject* inserted;
  // The code object that made this module's first import (its body, as a rule: borrowed,
  // the code cache holds it), for release_code_if_unused at this import's end.
  PyObject* importer_code;
};
constexpr int kMaxDepth = 512;

// Which interpreter the current hook runs in, asked once per hook entry
// (InterpreterScope), not at every string or attribute lookup below it.
enum class HookInterpreter : int8_t { not_asked = 0, main, other };

struct ThreadState {
  // kMaxDepth entries, mapped at the thread's first traced import (thread_import_stack):
  // static TLS is allocated and cleared by glibc for every thread of every process the
  // library is preloaded into (the shells, compilers and git of a CI job included), so the
  // 24 KiB stack stays out of it and this state fits in a few cache lines.
  InFlight* stack;
  int depth;
  uint64_t tid;      // 0 until asked (and again in a fork child)
  bool main_thread;  // tid == pid, known with tid
  // > 0 while the tracer itself runs code of CPython's or the program's from a hook: what
  // that does (imports, sys.modules stores, attribute sets) is the tracer's, not news.
  int inside_tracer;
  HookInterpreter interpreter;
  // The import system's pop-and-reinsert of a module (3.12+ watcher): the pop is held here
  // and dropped when the same object comes back under the same key.
  PyObject* pending_pop_key;
  PyObject* pending_pop_value;
  // While importlib's _handle_fromlist runs for `from pkg import a, b` (or __import__ with
  // a fromlist): the frame that asked, as a FrameWalk point() (3.11-3.13 its interpreter
  // frame, so no frame object is made for it; no reference: it runs until the call
  // returns), and the import depth then. An import begun directly from there has that frame as its importer; the walk for
  // the importer stops when it reaches it. An import begun by the package's __getattr__
  // (reached through _handle_fromlist's hasattr) meets that __getattr__ first: it is the
  // importer, and the frame that asked is what triggered it.
  // fromlist_depth means something only while fromlist_frame is set.
  const void* fromlist_frame;
  int fromlist_depth;
};
extern thread_local ThreadState t_state;

inline ThreadState& ts() {
  ThreadState& t = t_state;
  if (__builtin_expect(!t.tid, 0)) {
    t.tid = static_cast<uint64_t>(syscall(SYS_gettid));
    t.main_thread = t.tid == static_cast<uint64_t>(getpid());  // getpid is a system call
  }
  return t;
}

inline bool in_main_interpreter() {
  HookInterpreter h = t_state.interpreter;
  if (h != HookInterpreter::not_asked) return h == HookInterpreter::main;
  return g_main_interpreter.interp && py.PyInterpreterState_Get() == g_main_interpreter.interp;
}

// Answers in_main_interpreter for the hook's extent.
struct InterpreterScope {
  HookInterpreter saved;
  InterpreterScope() : saved(t_state.interpreter) {
    t_state.interpreter = g_main_interpreter.interp && py.PyInterpreterState_Get() == g_main_interpreter.interp
                              ? HookInterpreter::main
                              : HookInterpreter::other;
  }
  ~InterpreterScope() { t_state.interpreter = saved; }
  InterpreterScope(const InterpreterScope&) = delete;
  InterpreterScope& operator=(const InterpreterScope&) = delete;
};

// The import in progress on this thread that belongs to this trace file (one begun before
// a fork belongs to the parent's), or null.
inline const InFlight* innermost(ThreadState& t) {
  if (t.depth <= 0 || t.depth > kMaxDepth) return nullptr;
  const InFlight* f = &t.stack[t.depth - 1];
  return f->generation == TraceWriter::generation() ? f : nullptr;
}

// A record's context now: the time, `thread` as the record's message numbers threads, the
// running test and the import in progress.
inline RecordContext context_now(ThreadState& t, uint64_t thread) {
  const InFlight* in = innermost(t);
  RecordContext c;
  c.time_ns = TraceWriter::now_ns();
  c.thread = thread;
  c.test = current_test();
  c.during_import = in ? in->index + 1 : 0;
  return c;
}

// This thread's import stack, mapped on first use; null when it cannot be (no memory): the
// import then runs untraced. Unmapped when the thread exits.
InFlight* map_thread_import_stack(ThreadState& t);
inline InFlight* thread_import_stack(ThreadState& t) {
  return __builtin_expect(t.stack != nullptr, 1) ? t.stack : map_thread_import_stack(t);
}

// Registered with pthread_atfork by the bootstrap: in a fork child the forking thread is
// the main thread, with a new id.
void forget_thread_id_in_child();

}  // namespace imptrace
