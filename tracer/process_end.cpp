#include "process_end.h"

#include <errno.h>
#include <new>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "access_repeats.h"
#include "process_state.h"
#include "records.h"
#include "trace_writer.h"
#include "wire.h"

namespace imptrace {
namespace {

using fields::ProcessEnd::How;

// The record's bytes are built here, allocated once at start: a signal handler may not
// allocate. Room for the framing and four fields with the largest varints. Never
// destroyed (a deliberate leak of 64 bytes): a fatal signal after exit's destructors ran
// still finds it. Raw storage, constructed by make_end_buffer(): a variable of a type with a
// destructor would be registered with __cxa_atexit at load, in every process.
alignas(wire::ByteBuf) unsigned char g_end_storage[sizeof(wire::ByteBuf)];
wire::ByteBuf& g_end = *reinterpret_cast<wire::ByteBuf*>(g_end_storage);
bool g_end_made = false;

void make_end_buffer() {
  if (g_end_made) return;
  new (g_end_storage) wire::ByteBuf;
  g_end_made = true;
}
constexpr size_t kEndRecordRoom = 64;

// The signals whose default action ends the process and that a Python program usually
// leaves at the default: the five faults, and SIGTERM (multiprocessing's
// Pool.terminate(), `kill PID`, a CI job's timeout), which Python installs no handler for.
// SIGINT is Python's own (KeyboardInterrupt); SIGKILL cannot be caught.
const int kWatchedSignals[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, SIGTERM};

void encode_end(How how, int64_t status, int sig) {
  g_end.n = 0;
  wire::Mark outer = wire::begin_message(g_end, fields::Trace::record);
  wire::Mark inner = wire::begin_message(g_end, fields::Record::process_end);
  wire::put_uint(g_end, fields::ProcessEnd::how, how);
  wire::put_sint64_as_int64(g_end, fields::ProcessEnd::status, status);
  wire::put_uint(g_end, fields::ProcessEnd::signal, static_cast<uint64_t>(sig));
  wire::put_uint(g_end, fields::ProcessEnd::time_ns, TraceWriter::now_ns());
  wire::end_message(g_end, inner);
  wire::end_message(g_end, outer);
}

// With the lock held and Python code possibly still running: pending records first.
void write_end(How how, int64_t status, int sig) {
  if (g_end.cap < kEndRecordRoom) return;  // the start-up allocation failed
  write_repeat_summaries();  // the proxy accesses counted since the last summaries
  TraceWriter::flush();
  encode_end(how, status, sig);
  TraceWriter::append_encoded(g_end);
}

void at_exit(int status, void*) {
  if (!g_settings.enabled || !TraceWriter::try_lock()) return;  // a thread stuck mid-append
  // The parent sees the low 8 bits (exit(256) is a status of 0).
  write_end(How::EXIT, status & 0xff, 0);
  TraceWriter::finish();  // the file ends at its end record
  TraceWriter::unlock();
}

void on_fatal_signal(int sig, siginfo_t*, void*) {
  int saved_errno = errno;
  // SA_RESETHAND made the action the default again on entry. The pending records are not
  // flushed: the interrupted code may be in the middle of building them. A writer held by
  // any thread (this one, interrupted mid-record, or another: SIGTERM comes at any time in a
  // multi-threaded process) means no record; the process dies all the same.
  if (g_end.cap >= kEndRecordRoom && TraceWriter::try_lock()) {
    encode_end(How::SIGNAL, 0, sig);
    TraceWriter::append_encoded(g_end);
    TraceWriter::unlock();
  }
  errno = saved_errno;
  // Delivered again, to the default action, once this handler returns (the signal is
  // blocked while it runs): the process dies by it, with the same status and core dump.
  // A fault in an instruction would also recur by itself; raise covers abort() and kill.
  // The interrupted system call never returns to the program (no EINTR is seen): the
  // pending signal is delivered, and kills, on the way back from this handler.
  raise(sig);
}

}  // namespace

void watch_process_end() {
  make_end_buffer();
  if (g_end.cap || !g_end.reserve(kEndRecordRoom)) return;  // once per process
  on_exit(at_exit, nullptr);
}

void watch_fatal_signals() {
  static bool done = false;
  make_end_buffer();
  if (done || g_end.cap < kEndRecordRoom) return;
  done = true;
  for (int sig : kWatchedSignals) {
    struct sigaction old;
    if (sigaction(sig, nullptr, &old) != 0) continue;
    // Only where the program has no handler: the default action is to die, which ours
    // keeps. A handler of the program's own (one that may recover, or a SIGTERM handler
    // that shuts down cleanly) and SIG_IGN are left alone; a handler the program sets
    // later (signal.signal) replaces ours whole. Whether the signal is blocked is the
    // mask's business, not the action's: a blocked SIGTERM stays pending for sigwait()
    // exactly as without a handler.
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    // SA_ONSTACK: a stack overflow can still be recorded where the program (faulthandler)
    // set up an alternate stack.
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
    sigaction(sig, &sa, nullptr);
  }
}

void record_os_exit(int64_t status) { write_end(How::OS_EXIT, status & 0xff, 0); }

void record_exec() { write_end(How::EXEC, 0, 0); }

}  // namespace imptrace
