/* backtrace() (glibc, libgcc_s's unwinder loaded privately) against libunwind
 * (libunwind.so.8 dlopen'ed RTLD_LOCAL, as the tracer would): the cost of one capture at
 * a given depth, and whether each reaches main() through a signal handler and through
 * libraries built without frame pointers or without unwind tables. run.sh builds and runs
 * it; bench/results.md has the figures. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int (*leaf_fn)(void);
typedef int (*chain_fn)(int, leaf_fn);
typedef int (*capture_fn)(void**, int);

enum { kDepth = 48 };
static capture_fn g_capture;
static void* g_frames[kDepth];
static int g_n;

static int capture_leaf(void) { g_n = g_capture(g_frames, kDepth); return 0; }

static void on_signal(int sig) { (void)sig; capture_leaf(); }
static int signal_leaf(void) { raise(SIGUSR1); return 0; }

/* Whether the captured frames reach main(): the chain was unwound all the way. */
static int reaches_main(void) {
  for (int i = 0; i < g_n; ++i) {
    Dl_info info;
    if (dladdr((char*)g_frames[i] - 1, &info) && info.dli_sname && strcmp(info.dli_sname, "main") == 0) return 1;
  }
  return 0;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); /* CPU time: a loaded machine adds no waiting */
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: native_unwind backtrace|libunwind LIB_CHAIN.so...\n"); return 2; }
  if (strcmp(argv[1], "backtrace") == 0) {
    g_capture = backtrace;
  } else {
    /* RTLD_LOCAL: its _Unwind_* and backtrace never join the global scope. */
    void* h = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    g_capture = (capture_fn)dlsym(h, "unw_backtrace");
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigaction(SIGUSR1, &sa, NULL);
  for (int a = 2; a < argc; ++a) {
    void* lib = dlopen(argv[a], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "%s\n", dlerror()); return 2; }
    chain_fn chain = (chain_fn)dlsym(lib, "chain");
    const char* name = strrchr(argv[a], '/') ? strrchr(argv[a], '/') + 1 : argv[a];
    /* 20 levels, the usual depth of an import's C stack inside the interpreter. */
    chain(20, capture_leaf);
    chain(20, capture_leaf);
    int frames = g_n, through = reaches_main();
    chain(20, signal_leaf);
    int sig_frames = g_n, sig_through = reaches_main();
    const int rounds = 20000;
    double t0 = now_ns();
    for (int i = 0; i < rounds; ++i) chain(20, capture_leaf);
    double per = (now_ns() - t0) / rounds;
    printf("%s %s: %.0f ns CPU per capture, %d frames%s; from a signal handler %d frames%s\n", argv[1], name, per,
           frames, through ? " (reaches main)" : " (stops before main)", sig_frames,
           sig_through ? " (reaches main)" : " (stops before main)");
  }
  return 0;
}
