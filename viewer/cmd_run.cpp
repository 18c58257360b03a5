// `imptrace run [-o DIR] [--append] [--] CMD ARGS...`: runs CMD with the tracer preloaded
// and every process's trace in one directory per run, then says what it caught and what to
// run next. It behaves like `timeout` or `uv run` around CMD: CMD gets its own process
// group (so a signal reaches the whole tree, pytest-xdist workers included, and no process
// outlives the wrapper as an orphan), SIGINT/SIGTERM/SIGHUP/SIGQUIT sent to the wrapper are
// forwarded to that group, and the wrapper exits with CMD's status (128+N when signal N
// ended it). When the wrapper runs in a terminal's foreground, the terminal is handed to
// CMD's group for the run, so Ctrl-C and Ctrl-Z reach CMD exactly as without the wrapper.
//
// A run's directory holds nothing but its *.pb traces, so the directory is the unit that
// `show`/`diff` read and that a bundle (tar of the directory) carries.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "trace_reader.h"

namespace imptrace {

namespace {

const int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Written by the signal handler: the group to forward to (0 until CMD runs, -1 after it
// ended, so a late signal reaches no recycled pid).
volatile sig_atomic_t g_child_pgid = 0;

void forward_signal(int sig) {
  int saved = errno;
  pid_t pgid = g_child_pgid;
  if (pgid > 0) kill(-pgid, sig);
  errno = saved;
}

std::string executable_dir() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = 0;
  std::string dir(exe);
  dir.resize(dir.rfind('/'));
  return dir;
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) throw InputError(std::string("getcwd: ") + strerror(errno));
  return std::string(cwd) + "/" + p;
}

// mkdir -p; an existing directory is fine.
void make_dirs(const std::string& dir) {
  for (size_t slash = 1; slash != std::string::npos;) {
    slash = dir.find('/', slash + 1);
    std::string part = dir.substr(0, slash);
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) throw InputError(part + ": " + strerror(errno));
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw InputError(dir + ": not a directory");
}

// "imptrace-traces/20261201-134522" in UTC, "-2", "-3"... when that name is taken (two
// runs in the same second, or a clock set back); mkdir's EEXIST makes the claim atomic.
std::string new_run_dir(const std::string& parent) {
  make_dirs(parent);
  time_t now = time(nullptr);
  struct tm tm;
  gmtime_r(&now, &tm);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  for (int n = 1; n < 10000; ++n) {
    std::string dir = parent + "/" + stamp + (n == 1 ? "" : "-" + std::to_string(n));
    if (mkdir(dir.c_str(), 0755) == 0) {
      // parent/latest -> the newest run, replaced atomically (rename over the old link).
      std::string link = parent + "/latest", tmp = link + ".tmp." + std::to_string(getpid());
      struct stat st;
      if (lstat(link.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) {
        std::string target = dir.substr(parent.size() + 1);
        if (symlink(target.c_str(), tmp.c_str()) == 0 && rename(tmp.c_str(), link.c_str()) != 0)
          unlink(tmp.c_str());
      }
      return dir;
    }
    if (errno != EEXIST) throw InputError(dir + ": " + strerror(errno));
  }
  throw InputError(parent + ": no free run directory name for " + stamp);
}

std::string quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789-_./+:=@%,") == std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string plural(size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// A traced process with no end record that is still alive: one the command left behind
// (multiprocessing's forkserver, which exits only when it sees its parent gone; a daemon).
// Its trace is not finished, so it has not ended abnormally.
bool still_running(const model::Process& p) {
  return p.end.how == model::ProcessEnd::How::None && p.pid > 0 &&
         (kill(static_cast<pid_t>(p.pid), 0) == 0 || errno == EPERM);
}

size_t count_running(const std::vector<model::Process>& procs) {
  size_t n = 0;
  for (const auto& p : procs) n += still_running(p);
  return n;
}

bool group_alive(pid_t pgid) { return pgid > 0 && (kill(-pgid, 0) == 0 || errno == EPERM); }

// The closing lines: what the run caught and the command to look at it. `pgid` is the
// command's process group.
void print_summary(const std::string& dir, pid_t pgid) {
  // Processes the command left behind usually finish within moments of it (the
  // forkserver sees its parent's pipe close; a child started last): counted before that,
  // their imports and endings would be those of a half-written trace or none, different
  // at every run. Up to 3 s for the group, then for traced processes outside it.
  int waited_ms = 0;
  for (; waited_ms < 3000 && group_alive(pgid); waited_ms += 50) usleep(50 * 1000);
  size_t files = count_trace_files(dir);
  if (files == 0) {
    std::cerr << "imptrace: no trace in " << dir << " (no Python process ran, or IMPTRACE_DISABLE was set in it)\n";
    return;
  }
  std::vector<model::Process> procs;
  std::string error;
  std::vector<std::string> warnings;
  if (!reader::load_traces({dir}, procs, error, warnings)) {
    std::cerr << "imptrace: " << plural(files, "trace file", "trace files") << " in " << dir
              << ", not readable: " << error << "\n";
    return;
  }
  if (count_running(procs)) {
    for (; waited_ms < 3000 && count_running(procs); waited_ms += 50) usleep(50 * 1000);
    std::vector<model::Process> again;
    std::vector<std::string> again_warnings;
    if (reader::load_traces({dir}, again, error, again_warnings)) {
      procs.swap(again);
      warnings.swap(again_warnings);
    }
  }
  RunCounts n = count_run(procs);
  std::cerr << "imptrace: " << plural(n.processes, "process", "processes") << ", "
            << plural(n.imports, "import", "imports") << " (" << n.failed_imports << " failed), "
            << plural(n.anomalies, "anomaly", "anomalies");
  // Processes killed by SIGTERM are counted on their own: a pool's terminate() and the
  // wrapper's own forwarding end them on purpose, which is no crash to look into.
  size_t abnormal = 0, terminated = 0, running = 0;
  for (const auto& p : procs) {
    bool alive = still_running(p);
    running += alive;
    terminated += model::terminated(p.end);
    abnormal += !alive && model::ended_abnormally(p.end) && !model::terminated(p.end);
  }
  if (abnormal) std::cerr << ", " << abnormal << " ended abnormally";
  if (terminated) std::cerr << ", " << terminated << " terminated by SIGTERM";
  if (running) std::cerr << ", " << running << " still running (their traces are not complete)";
  if (!warnings.empty()) std::cerr << ", " << plural(warnings.size(), "reader warning", "reader warnings");
  std::cerr << "; traces in " << dir << "\n";
  std::cerr << "imptrace: next: imptrace show " << quoted(dir) << "   (against a passing run: imptrace diff GOOD "
            << quoted(dir) << ")\n";
}

// Hands the terminal's foreground to `pgid` (SIGTTOU ignored: a background group may not
// otherwise call tcsetpgrp).
void give_terminal(int fd, pid_t pgid) {
  struct sigaction ign {}, old {};
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGTTOU, &ign, &old);
  tcsetpgrp(fd, pgid);
  sigaction(SIGTTOU, &old, nullptr);
}

// Forks and execs CMD in its own process group, forwards signals, waits; returns the
// shell-style status.
int run_traced(std::vector<char*>& argv, pid_t& pgid) {
  int tty = -1;
  if (isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp()) tty = STDIN_FILENO;

  sigset_t forwarded, old_mask;
  sigemptyset(&forwarded);
  for (int s : kForwarded) sigaddset(&forwarded, s);
  sigprocmask(SIG_BLOCK, &forwarded, &old_mask);

  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) {
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    throw InputError(std::string("fork: ") + strerror(errno));
  }
  if (pid == 0) {
    setpgid(0, 0);
    if (tty >= 0) give_terminal(tty, getpid());
    sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    execvp(argv[0], argv.data());
    int e = errno;
    std::cerr << "imptrace: " << argv[0] << ": " << strerror(e) << "\n";
    _exit(e == ENOENT ? 127 : 126);
  }
  setpgid(pid, pid);  // also here: whichever of the two runs first, the group exists
  pgid = pid;
  if (tty >= 0) give_terminal(tty, pid);
  g_child_pgid = pid;
  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction saved[4];
  for (int k = 0; k < 4; ++k) sigaction(kForwarded[k], &sa, &saved[k]);
  sigprocmask(SIG_SETMASK, &old_mask, nullptr);

  int status = 0;
  bool waited = false;
  for (;;) {
    pid_t r = waitpid(pid, &status, tty >= 0 ? WUNTRACED : 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      break;  // ECHILD: not our child after all (cannot happen); a failure below
    }
    waited = true;
    if (WIFSTOPPED(status)) {
      // Ctrl-Z stopped CMD: stop the wrapper too so the shell sees the job stop, and on
      // `fg` give CMD the terminal back and continue it.
      give_terminal(tty, getpgrp());
      raise(SIGTSTP);
      give_terminal(tty, pid);
      kill(-pid, SIGCONT);
      continue;
    }
    break;
  }
  g_child_pgid = -1;
  if (tty >= 0) give_terminal(tty, getpgrp());
  for (int k = 0; k < 4; ++k) sigaction(kForwarded[k], &saved[k], nullptr);
  if (!waited) return 1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

size_t count_trace_files(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      size_t len = strlen(e->d_name);
      if (len > 3 && strcmp(e->d_name + len - 3, ".pb") == 0) ++n;
    }
    closedir(d);
  }
  return n;
}

std::string find_tracer_library(const std::string& exe_dir, const char* env_lib) {
  if (env_lib && *env_lib) {
    // An explicit choice is never second-guessed: a wrong one is an error, not a fallback.
    if (access(env_lib, R_OK) != 0)
      throw InputError(std::string("IMPTRACE_LIB=") + env_lib + ": " + strerror(errno));
    return absolute(env_lib);
  }
  // The build tree (next to the binary), then an installed prefix (bin/../lib/imptrace).
  std::string tried;
  for (const std::string& lib : {exe_dir + "/libimptrace.so", exe_dir + "/../lib/imptrace/libimptrace.so"}) {
    if (access(lib.c_str(), R_OK) == 0) return lib;
    tried += (tried.empty() ? "" : ", ") + lib;
  }
  throw InputError("cannot find libimptrace.so (looked at " + tried + "; set IMPTRACE_LIB to its path)");
}

int run_run(const std::vector<std::string>& args) {
  std::string out;
  bool append = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") { ++i; break; }
    if (a.empty() || a[0] != '-') break;  // CMD starts here, as in `timeout` and `env`
    if (a == "-o" || a == "--output") {
      if (i + 1 >= args.size()) throw UsageError(a + " needs a directory");
      out = args[++i];
      if (out.empty()) throw UsageError(a + " needs a directory");
    } else if (a.compare(0, 9, "--output=") == 0) {
      out = a.substr(9);
      if (out.empty()) throw UsageError("--output needs a directory");
    } else if (a == "--append") {
      append = true;
    } else {
      throw UsageError("run: unknown option " + a);
    }
  }
  if (i >= args.size()) throw UsageError("run: no command given (imptrace run [-o DIR] -- CMD ARGS...)");
  if (append && out.empty()) throw UsageError("run: --append needs -o DIR (each default run has its own directory)");
  std::string lib = find_tracer_library(executable_dir(), getenv("IMPTRACE_LIB"));

  std::string dir;
  if (out.empty()) {
    dir = new_run_dir(absolute("imptrace-traces"));
  } else {
    dir = absolute(out);
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    make_dirs(dir);
    size_t old = count_trace_files(dir);
    if (old && !append)
      throw InputError(dir + " already holds " + plural(old, "trace file", "trace files") +
                       " of an earlier run; pass --append to add to them, or another -o DIR");
  }
  std::cerr << "imptrace: tracing into " << dir << "\n";

  std::string preload = lib;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("IMPTRACE_OUTPUT", (dir + "/").c_str(), 1);
  unsetenv("IMPTRACE_DISABLE");

  std::vector<char*> argv;
  for (size_t j = i; j < args.size(); ++j) argv.push_back(const_cast<char*>(args[j].c_str()));
  argv.push_back(nullptr);
  pid_t pgid = -1;
  int status = run_traced(argv, pgid);
  print_summary(dir, pgid);
  return status;
}

}  // namespace imptrace
