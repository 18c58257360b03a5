// The trace file of this process: lazy creation (no file until the first record, so a
// Python process that never imports leaves nothing), records stored into a mapping of the
// file with no system call, each batch committed whole (a SIGKILL or os._exit leaves a
// file readable up to the last record), string interning, and a fresh
// file in a fork child. Everything here is called with the GIL held, but sub-interpreters
// with their own GIL (3.12+) and fork make a real lock necessary. Nothing here knows
// CPython: what the header says about the interpreter is handed to init, so the file can
// be written and tested without one.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "wire.h"

namespace imptrace {

struct TraceWriter {
  // Called once from the library constructor: captures what must be read before the
  // program can change it (working directory, start time, output pattern), and what the
  // header says about the interpreter (its version string, and its build:
  // "shared"/"static", "+debug").
  static void init(const char* python_version, const char* python_build);

  // Brackets every use of the functions below.
  static void lock();
  static void unlock();
  // For a signal handler: false when the lock is held (perhaps by the interrupted code).
  static bool try_lock();

  // Id of a string in this file, defining it (a StringDef record) on first use. 0 for an
  // empty or null string.
  static uint32_t intern(const char* s, size_t n);
  static uint32_t intern(const char* s);

  // The pending records; start one with begin_record, finish it with end_record.
  static wire::ByteBuf& buf();
  struct RecordMark { wire::Mark outer, inner; };
  static RecordMark begin_record(uint32_t record_kind);
  static void end_record(RecordMark m);

  // Writes pending records to the file (creating it, header first, if needed).
  static void flush();

  // Appends whole records already encoded in `records` (no strings) to the file, if this
  // process has one; false otherwise. Makes no allocation and calls nothing but system
  // calls, so a signal handler holding the lock (try_lock) may call it.
  static bool append_encoded(const wire::ByteBuf& records);

  // Gives back the space reserved ahead of the last record (called before exec; exit()
  // does it by itself). The file stays valid without it: a process that dies leaves the
  // reserve as a trailing `Trace.unwritten` field.
  static void finish();

  // Re-reads the allow-listed environment and records any variable whose value changed
  // since the header (pytest-xdist sets PYTEST_XDIST_WORKER in the worker after start).
  static void record_env_changes();

  // Monotonic nanoseconds since this process's trace started.
  static uint64_t now_ns();

  // False once output failed for good (unwritable directory, disk full): callers skip work.
  static bool usable();

  // Bumps in each fork child. Inline: the tracer asks at almost every step.
  static uint32_t generation() { return generation_; }
  static uint32_t generation_;
  // Bumps whenever string ids start again: in a fork child (its new file), and when the
  // strings of a batch that ran out of memory are dropped. Whatever keeps string ids
  // (caches, the sys.modules shadow) compares it, not generation().
  static uint32_t strings_epoch() { return strings_epoch_; }
  static uint32_t strings_epoch_;
};

// libc's `environ`, read through the pointer TraceWriter::init finds with dlsym: named
// directly, it would be a symbol relocation resolved at load in every process the library
// is preloaded into, Python or not. Before init, an environment of none. The same two
// loads as reading `environ` through the GOT.
extern char** const* g_environ_slot;
inline char** process_environ() { return *g_environ_slot; }

// RAII for TraceWriter::lock/unlock.
struct WriterLock {
  WriterLock() { TraceWriter::lock(); }
  ~WriterLock() { TraceWriter::unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
};

}  // namespace imptrace
