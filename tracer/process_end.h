// How this process ends, recorded as the trace's ProcessEnd record, so that the viewer can
// tell a process that finished from one that was killed or crashed, and compare a process
// that was cut short only up to where it stopped.
//
// Four ways are seen, each where the status is known:
//  - exit(): an on_exit(3) handler gets exit()'s argument. It runs after Py_FinalizeEx
//    (Python's own exit path calls exit() with the status of sys.exit / an uncaught
//    exception). It is registered at the main interpreter's first import, not in the
//    constructor: handlers run in reverse order, and the loader's own (which runs the
//    library destructors) is registered by __libc_start_main after the preload's
//    constructor; registered later, ours runs before it, while the writer is whole.
//  - os._exit(n): a C wrapper of os._exit/posix._exit, as for os.execv (audit_hook.cpp);
//    _exit(2) itself is not interposed, because a vfork child calls it while sharing the
//    parent's memory.
//  - a fatal signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL) or SIGTERM: a handler
//    installed where the signal's action is still the default, once `os` is imported
//    (after CPython took its snapshot of the handlers, so signal.getsignal() keeps saying
//    SIG_DFL). The handler is one-shot (SA_RESETHAND): it commits the record if the writer
//    is free, then raises the signal again, so the process dies by the same signal with
//    the same status. A handler installed later (faulthandler, the host's) that chains to
//    the previous one reaches it after doing its own work; one that does not chain (a
//    program's own SIGTERM handler) replaces ours and behaves exactly as untraced.
//  - exec: the record is written just before os.execv/os.execve.
// A process ended any other way (SIGKILL, the OOM killer, a power cut, SIGHUP, SIGQUIT) has
// no end record.
// An end record never creates a trace file: a process that recorded nothing has no trace.
#pragma once

#include <stdint.h>

namespace imptrace {

// At the main interpreter's first import: registers the exit handler and prepares the
// signal handler's buffer (no allocation happens in the handler).
void watch_process_end();

// Once `os` has been imported in the main interpreter: installs the handlers of the fatal
// signals and SIGTERM.
void watch_fatal_signals();

// Writes the end record for os._exit(status) or an exec (status unused), with the writer
// lock held by the caller.
void record_os_exit(int64_t status);
void record_exec();

}  // namespace imptrace
