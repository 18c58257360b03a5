#include "thread_state.h"

#include <pthread.h>
#include <sys/mman.h>

namespace imptrace {

thread_local ThreadState t_state;

namespace {

constexpr size_t kStackBytes = sizeof(InFlight) * kMaxDepth;

pthread_key_t g_stack_key;
bool g_stack_key_ok = false;
pthread_once_t g_stack_key_once = PTHREAD_ONCE_INIT;

// At the thread's exit (pthread key destructor): the mapping goes, and the pointer with it,
// in case a later destructor of the thread imports again (it maps a new one).
void unmap_stack(void* p) {
  if (t_state.stack == p) {
    t_state.stack = nullptr;
    t_state.depth = 0;
  }
  munmap(p, kStackBytes);
}

void make_stack_key() { g_stack_key_ok = pthread_key_create(&g_stack_key, unmap_stack) == 0; }

}  // namespace

InFlight* map_thread_import_stack(ThreadState& t) {
  // mmap, not malloc: the host's allocator may be anything, and this runs inside an import.
  void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  pthread_once(&g_stack_key_once, make_stack_key);
  // Without the key (none left), the mapping lives as long as the process: a leak of 24 KiB
  // per thread that imports, against an import left untraced.
  if (g_stack_key_ok) pthread_setspecific(g_stack_key, p);
  t.stack = static_cast<InFlight*>(p);
  return t.stack;
}

// (The in-flight table, keyed by the parent file's string ids, empties itself at its next
// use: the fork moved the strings epoch; see imports_in_flight.cpp.)
void forget_thread_id_in_child() { t_state.tid = 0; }

}  // namespace imptrace
