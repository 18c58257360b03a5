// `imptrace run [-o DIR] -- CMD ARGS...`: runs CMD with the tracer preloaded (the
// libimptrace.so that sits next to this executable, by absolute path so children that
// change directory keep it) and every process's trace in DIR. Exits with CMD's status.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

namespace imptrace {

namespace {

std::string tracer_library() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) throw InputError("cannot find the imptrace executable's directory");
  exe[n] = 0;
  std::string dir(exe);
  dir.resize(dir.rfind('/'));
  std::string lib = dir + "/libimptrace.so";
  if (access(lib.c_str(), R_OK) != 0) throw InputError(lib + ": " + strerror(errno));
  return lib;
}

std::string absolute(const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) throw InputError(std::string("getcwd: ") + strerror(errno));
  return std::string(cwd) + "/" + p;
}

size_t count_traces(const std::string& dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (strstr(e->d_name, ".pb")) ++n;
    closedir(d);
  }
  return n;
}

}  // namespace

int run_run(const std::vector<std::string>& args) {
  std::string out = "imptrace-traces";
  size_t i = 0;
  for (; i < args.size(); ++i) {
    if (args[i] == "--") { ++i; break; }
    if (args[i] == "-o" || args[i] == "--output") {
      if (i + 1 >= args.size()) throw UsageError(args[i] + " needs a directory");
      out = args[++i];
    } else {
      throw UsageError("run: unexpected '" + args[i] + "' (usage: imptrace run [-o DIR] -- CMD ARGS...)");
    }
  }
  if (i >= args.size()) throw UsageError("run: no command given after --");
  std::string lib = tracer_library();
  std::string dir = absolute(out);
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) throw InputError(dir + ": " + strerror(errno));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) throw InputError(dir + ": not a directory");

  std::string preload = lib;
  if (const char* old = getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("IMPTRACE_OUTPUT", (dir + "/").c_str(), 1);
  unsetenv("IMPTRACE_DISABLE");

  std::vector<char*> argv;
  for (size_t j = i; j < args.size(); ++j) argv.push_back(const_cast<char*>(args[j].c_str()));
  argv.push_back(nullptr);
  std::cout.flush();
  pid_t pid = fork();
  if (pid < 0) throw InputError(std::string("fork: ") + strerror(errno));
  if (pid == 0) {
    execvp(argv[0], argv.data());
    std::cerr << "imptrace: " << argv[0] << ": " << strerror(errno) << "\n";
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  std::cerr << "imptrace: " << count_traces(dir) << " trace file(s) in " << dir << "\n";
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace imptrace
