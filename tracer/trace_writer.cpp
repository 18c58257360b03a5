#include "trace_writer.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <new>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "dense_table.h"
#include "records.h"
#include "tracer_memory.h"

namespace imptrace {

char** g_no_environ = nullptr;
char** const* g_environ_slot = &g_no_environ;
namespace {

using namespace fields;

pthread_mutex_t g_mutex = PTHREAD_MUTEX_INITIALIZER;
// Never destroyed: a C extension calling exit() runs static destructors while the
// interpreter may still call our hooks, so the buffer must outlive them (a deliberate
// leak at exit). Raw storage, in which init() constructs them: a variable of a type with
// a destructor would be registered with __cxa_atexit by a static initialiser, run in
// every process the library is loaded into, Python or not.
alignas(wire::ByteBuf) unsigned char g_pending_storage[sizeof(wire::ByteBuf)];
alignas(wire::ByteBuf) unsigned char g_strings_storage[sizeof(wire::ByteBuf)];
wire::ByteBuf& g_pending = *reinterpret_cast<wire::ByteBuf*>(g_pending_storage);
// StringDef records go to their own buffer: strings are interned while a record is being
// encoded, and must land in the file before it, never inside it.
wire::ByteBuf& g_strings = *reinterpret_cast<wire::ByteBuf*>(g_strings_storage);
// An empty buffer that never allocates, for append_encoded, which a fatal-signal handler
// calls: no destructor may run free() there.
alignas(wire::ByteBuf) unsigned char g_no_bytes_storage[sizeof(wire::ByteBuf)];
const wire::ByteBuf& g_no_bytes = *reinterpret_cast<const wire::ByteBuf*>(g_no_bytes_storage);
int g_fd = -1;
bool g_broken = false;       // output failed: stop trying in this process
// Set by init(): a process where it stays false (not Python, or not traced) has nothing
// to write, and its exit must not call into libc for us (trim_at_exit).
bool g_initialised = false;
int64_t g_forked_from = 0;
char g_cwd[PATH_MAX];        // working directory at process start, for relative patterns
char g_pattern[PATH_MAX];    // IMPTRACE_OUTPUT or the default
uint64_t g_start_mono = 0;
char g_python_version[256];  // for the header
char g_python_build[32];
int64_t g_start_unix_ns = 0;

uint64_t mono_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- string interning: a dense table over a chunked arena; ids are dense from 1. -------
// A string's id is its position in the table + 1: ids are dense from 1.
struct InternEntry { uint32_t hash, off, len; };  // hash: low half of hash_bytes
// The table's hash of a string: its 32 bits twice (slot position and tag from one value).
inline uint64_t intern_hash(uint32_t h) { return static_cast<uint64_t>(h) << 32 | h; }
struct InternTraits {
  static uint64_t hash(const InternEntry& e) { return intern_hash(e.hash); }
};
DenseTable<InternEntry, InternTraits> g_strings_table;
// The strings' text, in 64 KiB chunks that never move (a contiguous arena would be copied,
// and its old pages wasted, at every doubling); a string never spans two chunks, except
// one longer than a chunk, which gets consecutive chunk entries of one block.
constexpr unsigned kArenaChunkBits = 16;
constexpr size_t kArenaChunk = size_t{1} << kArenaChunkBits;
constexpr size_t kArenaChunks = size_t{1} << (32 - kArenaChunkBits);  // offsets are 32-bit
char* g_arena_chunks[kArenaChunks];
uint64_t g_arena_len = 0;  // offset of the next string
inline char* arena_at(uint32_t off) { return g_arena_chunks[off >> kArenaChunkBits] + (off & (kArenaChunk - 1)); }

// Room for n bytes in the arena: their offset, or false when out of memory or offsets.
bool arena_place(size_t n, uint32_t* off) {
  uint64_t at = g_arena_len;
  if ((at & (kArenaChunk - 1)) + n > kArenaChunk) at = (at + kArenaChunk - 1) & ~uint64_t{kArenaChunk - 1};
  size_t first = at >> kArenaChunkBits, count = ((at & (kArenaChunk - 1)) + n + kArenaChunk - 1) >> kArenaChunkBits;
  if (first + count > kArenaChunks) return false;
  if (count > 1 || !g_arena_chunks[first]) {
    auto* block = static_cast<char*>(tracer_memory::alloc(count * kArenaChunk));
    if (!block) return false;
    // A long string's chunks are all one new block: chunks a fork child's reused arena
    // already has need not be adjacent (they are left behind).
    for (size_t i = 0; i < count; ++i) g_arena_chunks[first + i] = block + i * kArenaChunk;
  }
  *off = static_cast<uint32_t>(at);
  g_arena_len = at + n;
  return true;
}
// The prefix ('/'-paths, '.'-names) of the last string interned with one: offset in the
// arena of a string that starts with it, its length and its id; 0 id = none.
struct PrefixMemo { uint32_t off, len, id; };
PrefixMemo g_prefix_memo[2];

void reset_interning() {
  ++TraceWriter::strings_epoch_;
  // In a fork child the table is cleared, not freed and rebuilt from nothing: the new file
  // must define every string again, and ids stay dense.
  g_strings_table.clear();
  g_arena_len = 0;
  g_prefix_memo[0] = g_prefix_memo[1] = PrefixMemo{};
}

// ---- output naming -------------------------------------------------------------------
const char* program_name() {
  static char name[PATH_MAX];
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "unknown";
  exe[n] = 0;
  const char* base = strrchr(exe, '/');
  snprintf(name, sizeof name, "%s", base ? base + 1 : exe);
  return name;
}

// Expands %p %n %t (and %% ) of the pattern into out.
void expand(const char* pat, char* out, size_t cap) {
  size_t o = 0;
  for (const char* p = pat; *p && o + 1 < cap; ++p) {
    char tmp[64];
    const char* ins = nullptr;
    if (*p == '%' && p[1]) {
      ++p;
      if (*p == 'p') { snprintf(tmp, sizeof tmp, "%d", static_cast<int>(getpid())); ins = tmp; }
      else if (*p == 't') { snprintf(tmp, sizeof tmp, "%lld", static_cast<long long>(g_start_unix_ns / 1000000000)); ins = tmp; }
      else if (*p == 'n') ins = program_name();
      else if (*p == '%') ins = "%";
      else { tmp[0] = '%'; tmp[1] = *p; tmp[2] = 0; ins = tmp; }
      size_t l = strlen(ins);
      if (o + l >= cap) break;
      memcpy(out + o, ins, l);
      o += l;
    } else {
      out[o++] = *p;
    }
  }
  out[o] = 0;
}

void warn(const char* what, const char* path, int err) {
  char line[PATH_MAX + 256];
  int n = snprintf(line, sizeof line, "imptrace: %s %s: %s; this process is not traced\n", what,
                   path, strerror(err));
  if (n > 0) { ssize_t r = write(2, line, static_cast<size_t>(n) < sizeof line ? n : sizeof line - 1); (void)r; }
}

// `IMPTRACE_OUTPUT=dir/` promises a directory: create it (and its parents, 0700) so that a
// whole run can point at a fresh directory. Races with sibling processes are fine (EEXIST).
void make_dirs(const char* path) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char* p = tmp + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(tmp, 0700);
    *p = '/';
  }
}

// The file's name: IMPTRACE_OUTPUT expanded, absolute, the default name inside a directory.
void output_path(char* full, size_t size) {
  char path[PATH_MAX];
  expand(g_pattern, path, sizeof path);
  if (path[0] != '/') {
    snprintf(full, size, "%s/%s", g_cwd, path);
  } else {
    snprintf(full, size, "%s", path);
  }
  size_t len = strlen(full);
  if (len && full[len - 1] == '/') make_dirs(full);
  struct stat st;
  bool is_dir = (len && full[len - 1] == '/') || (stat(full, &st) == 0 && S_ISDIR(st.st_mode));
  if (is_dir) {
    char pat[PATH_MAX];
    snprintf(pat, sizeof pat, "%s%simptrace.%%n.%%p.pb", full, full[len - 1] == '/' ? "" : "/");
    expand(pat, full, size);
  }
}

// The name to try the `i`th time: `full` itself, then on a clash a counter, before a ".pb"
// extension (imptrace.python3.42.1.pb) so that a directory of traces still holds nothing but
// *.pb files.
constexpr int kNameAttempts = 1000;
void candidate_name(const char* full, int i, char* out, size_t size) {
  size_t flen = strlen(full);
  bool pb = flen > 3 && strcmp(full + flen - 3, ".pb") == 0;
  if (i == 0) snprintf(out, size, "%s", full);
  else if (pb) snprintf(out, size, "%.*s.%d.pb", static_cast<int>(flen - 3), full, i);
  else snprintf(out, size, "%s.%d", full, i);
}

// Creates the file under its name: mode 0600, never following a symlink, never replacing
// an existing file (pid reuse, a hostile shared /tmp): on a clash, a numbered sibling.
bool open_named(const char* full) {
  char attempt[PATH_MAX + 16];
  for (int i = 0; i < kNameAttempts; ++i) {
    candidate_name(full, i, attempt, sizeof attempt);
    int fd = open(attempt, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) { g_fd = fd; return true; }
    if (errno != EEXIST) { warn("cannot create trace file", attempt, errno); return false; }
  }
  warn("cannot create trace file", full, EEXIST);
  return false;
}

// A process killed while its file was being created (SIGKILL, or SIGTERM while the writer
// was busy) left an empty file behind. The file is first made without a name in its
// directory (O_TMPFILE, mode 0600) and linked under its name only once its header is
// written: a file there always holds a header, and a process killed before that leaves
// nothing, as one that imports nothing. False where the file system cannot (then the file
// is made under its name, as above).
bool open_unnamed(const char* full) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", full);
  char* slash = strrchr(dir, '/');
  if (!slash) return false;
  slash[slash == dir ? 1 : 0] = 0;
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  g_fd = fd;
  return true;
}

// Links the unnamed file under the first free candidate name (linkat never replaces a
// file: EEXIST is a clash). Through /proc/self/fd, which needs no privilege; else by the
// descriptor itself (AT_EMPTY_PATH, CAP_DAC_READ_SEARCH).
bool link_unnamed(const char* full) {
  char self[64];
  snprintf(self, sizeof self, "/proc/self/fd/%d", g_fd);
  char attempt[PATH_MAX + 16];
  for (int i = 0; i < kNameAttempts; ++i) {
    candidate_name(full, i, attempt, sizeof attempt);
    if (linkat(AT_FDCWD, self, AT_FDCWD, attempt, AT_SYMLINK_FOLLOW) == 0) return true;
    if (errno == EEXIST) continue;
    if (linkat(g_fd, "", AT_FDCWD, attempt, AT_EMPTY_PATH) == 0) return true;
    if (errno != EEXIST) return false;
  }
  return false;
}

// ---- the file: records copied into a shared mapping of its tail -----------------------
// A write(2) per import was the largest single cost of tracing (a system call is 1-3 us
// on a VM, more than everything else the tracer does per import). Records are copied into
// a MAP_SHARED mapping instead: no system call per import, and the page cache keeps every
// stored byte when the process is killed.
//
// Every state of the file must stay a valid Trace, since a SIGKILL may come between any
// two instructions. Space is reserved ahead in chunks written as one `Trace.unwritten`
// bytes field: a 6-byte header (tag, 5-byte length) and zeros. Invariant: the file is
// [records, 0..g_len) [one unwritten field, g_len..g_cap). A batch of records is stored
// (1) from its 9th byte on, (2) a new unwritten header after it, (3) its first 8 bytes in
// one store, which turns the old header into the batch: before (3) the file is the old
// state, after it the new one.
constexpr uint8_t kUnwrittenTag = (Trace::unwritten << 3) | wire::LEN;
constexpr size_t kUnwrittenHeader = 6;
constexpr size_t kCommitBytes = 8;
constexpr uint64_t kFirstChunk = 16 << 10;  // reserve grows with the file, up to kMaxChunk:
constexpr uint64_t kMaxChunk = 256 << 10;   // what a process that never exit()s leaves
// Mapped at a time. Pages of the window count in the host's RSS (written ones, and
// reserve pages made ahead), so it is not made larger than this; moving it costs two
// system calls, and the munmap a TLB shootdown: with a 128 KiB window, the four moves of
// a 5,000-module start-up's 480 KiB trace took 290 cycles per import (measured with the
// TSC inside the tracer), 1 MiB makes it none.
constexpr size_t kWindow = 1 << 20;

uint8_t* g_map = nullptr;  // the window: file bytes [g_map_off, g_map_off + g_map_len)
uint64_t g_map_off = 0;
size_t g_map_len = 0;
uint64_t g_len = 0;  // end of the last committed record
uint64_t g_cap = 0;  // file size; [g_len, g_cap) is one unwritten field when non-empty
uint64_t g_populated = 0;  // the window's pages below it are mapped writable (populate_ahead)

void unwritten_header(uint8_t* h, uint64_t payload) {
  h[0] = kUnwrittenTag;
  for (int i = 0; i < 5; ++i)  // a padded varint: the header keeps its size as it shrinks
    h[1 + i] = static_cast<uint8_t>(((payload >> (7 * i)) & 0x7f) | (i < 4 ? 0x80 : 0));
}

// One store of 8 bytes: a signal can only come before or after it.
void commit_store(uint8_t* dst, const uint8_t* src) {
  typedef uint64_t __attribute__((aligned(1), may_alias)) unaligned_u64;
  uint64_t w;
  memcpy(&w, src, 8);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  *reinterpret_cast<volatile unaligned_u64*>(dst) = w;
}

size_t page_size() {
  static size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return p;
}

// Maps file bytes [from, to) (beyond the end of the file is allowed: only what is below
// g_cap is ever touched). Not inherited by fork children, which must never write here.
bool map_window(uint64_t from, uint64_t to) {
  if (g_map && from >= g_map_off && to <= g_map_off + g_map_len) return true;
  if (g_map) munmap(g_map, g_map_len);
  g_map = nullptr;
  g_populated = 0;
  uint64_t off = from & ~static_cast<uint64_t>(page_size() - 1);
  size_t len = kWindow;
  while (off + len < to) len *= 2;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, g_fd, static_cast<off_t>(off));
  if (m == MAP_FAILED) return false;
  madvise(m, len, MADV_DONTFORK);
  g_map = static_cast<uint8_t*>(m);
  g_map_off = off;
  g_map_len = len;
  return true;
}

// The window's pages are made writable ahead of the records, 64 KiB at a time, by one
// tracer_memory::populate instead of a page fault per page: a microbenchmark of the
// 480 KiB trace of a 5,000-module start-up measured 0.7 ms less (of 2.2 ms) this way. File
// bytes below g_populated in the current window need no fault.
constexpr uint64_t kPopulateAhead = 64 << 10;

void populate_ahead(uint64_t end) {
  uint64_t page = page_size();
  uint64_t from = (g_len > g_populated ? g_len : g_populated) & ~(page - 1);
  uint64_t to = ((end + page - 1) & ~(page - 1)) + kPopulateAhead;
  if (to > g_cap) to = g_cap;
  if (to > g_map_off + g_map_len) to = g_map_off + g_map_len;
  if (to <= from) return;
  g_populated = to;  // also when refused: nothing to retry below it
  tracer_memory::populate(g_map + (from - g_map_off), static_cast<size_t>(to - from));
}

// Appends `len` bytes of reserve at the end of the file, as an unwritten field of its own.
// Its blocks are allocated now, so a full disk is an error here, never a SIGBUS later in
// the mapping: by fallocate where the file system has it (the pages are then made only
// when the window is populated), else by writing zeros (which costs each page twice:
// measured +0.9 ms on the 480 KiB trace of a 5,000-module start-up). On failure the file
// goes back to its old size.
bool reserve_chunk(uint64_t len) {
  static uint8_t zeros[64 << 10];  // .bss, never written: no bytes in the library file
  uint8_t head[kUnwrittenHeader];
  unwritten_header(head, len - kUnwrittenHeader);
  static bool no_fallocate = false;
  if (!no_fallocate) {
    int rc = fallocate(g_fd, 0, static_cast<off_t>(g_cap), static_cast<off_t>(len));
    if (rc == 0 && pwrite(g_fd, head, kUnwrittenHeader, static_cast<off_t>(g_cap)) == static_cast<ssize_t>(kUnwrittenHeader))
      return true;
    int err = errno;
    if (rc == 0 || (err != EOPNOTSUPP && err != ENOSYS && err != EINVAL)) {
      if (ftruncate(g_fd, static_cast<off_t>(g_cap)) != 0) {}
      errno = err;
      return false;
    }
    no_fallocate = true;  // not on this file system: zeros from now on
  }
  for (uint64_t done = 0; done < len;) {
    struct iovec iov[8];
    int n = 0;
    uint64_t at = done;
    if (at < kUnwrittenHeader) {
      iov[n++] = {head + at, static_cast<size_t>(kUnwrittenHeader - at)};
      at = kUnwrittenHeader;
    }
    for (; at < len && n < 8; ++n) {
      size_t z = len - at < sizeof zeros ? static_cast<size_t>(len - at) : sizeof zeros;
      iov[n] = {zeros, z};
      at += z;
    }
    ssize_t w = pwritev(g_fd, iov, n, static_cast<off_t>(g_cap + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int err = w < 0 ? errno : ENOSPC;
      if (ftruncate(g_fd, static_cast<off_t>(g_cap)) != 0) {}
      errno = err;
      return false;
    }
    done += static_cast<uint64_t>(w);
  }
  return true;
}

// Makes the file at least `end` bytes long. The new chunk is first an unwritten field of
// its own after the old one; then one store of the old header makes them one field.
bool reserve_to(uint64_t end) {
  uint64_t grow = g_cap < kMaxChunk ? (g_cap > kFirstChunk ? g_cap : kFirstChunk) : kMaxChunk;
  uint64_t want = end - g_cap + grow;
  // A chunk must hold at least its own header and the commit store.
  uint64_t need = end - g_cap < kCommitBytes ? kCommitBytes : end - g_cap;
  // Never reserve past RLIMIT_FSIZE: that would be SIGXFSZ, which kills a process that
  // has not yet set it to be ignored (CPython does so only late in its start-up).
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    uint64_t room = rl.rlim_cur > g_cap ? rl.rlim_cur - g_cap : 0;
    if (need > room) { errno = EFBIG; return false; }
    if (want > room) want = room;
  }
  if (!reserve_chunk(want)) {
    // Near a full disk: just what this batch needs.
    int err = errno;
    if ((err != ENOSPC && err != EDQUOT) || want == need || !reserve_chunk(need)) return false;
    want = need;
  }
  uint64_t old_cap = g_cap;
  g_cap += want;
  if (old_cap > g_len) {
    uint8_t* at = g_map + (g_len - g_map_off);
    uint8_t h[kCommitBytes];
    memcpy(h, at, kCommitBytes);
    unwritten_header(h, g_cap - g_len - kUnwrittenHeader);
    commit_store(at, h);
  }
  return true;
}

// A file system that cannot map the file shared (or IMPTRACE_MMAP=0): each batch is
// written with one pwritev at the end, no reserve. Whole batches too, one system call
// per import.
bool g_direct = false;

bool append_direct(const wire::ByteBuf& a, const wire::ByteBuf& b) {
  struct iovec iov[2] = {{a.p, a.n}, {b.p, b.n}};
  int first = a.n ? 0 : 1;
  while (first < 2) {
    ssize_t w = pwritev(g_fd, iov + first, 2 - first, static_cast<off_t>(g_len));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) { if (!w) errno = ENOSPC; return false; }
    g_len += static_cast<uint64_t>(w);
    size_t done = static_cast<size_t>(w);
    while (first < 2 && done >= iov[first].iov_len) { done -= iov[first].iov_len; ++first; }
    if (first < 2) {
      iov[first].iov_base = static_cast<uint8_t*>(iov[first].iov_base) + done;
      iov[first].iov_len -= done;
    }
  }
  g_cap = g_len;
  return true;
}

void trim_reserve();

// Strings and records of one flush, committed together.
bool append(const wire::ByteBuf& a, const wire::ByteBuf& b) {
  if (g_direct) return append_direct(a, b);
  uint8_t pad[kCommitBytes] = {};
  size_t n = a.n + b.n, npad = 0;
  if (n < kCommitBytes) {  // too short for the commit store: add an empty unwritten field
    npad = kCommitBytes - n < 2 ? 2 : kCommitBytes - n;
    pad[0] = kUnwrittenTag;
    pad[1] = static_cast<uint8_t>(npad - 2);
  }
  uint64_t total = n + npad;
  uint64_t end = g_len + total + kUnwrittenHeader;
  if (!map_window(g_len, end)) {
    trim_reserve();
    if (g_cap != g_len) return false;
    g_direct = true;
    return append_direct(a, b);
  }
  if (end > g_cap && !reserve_to(end)) return false;
  if (end > g_populated) populate_ahead(end);
  uint8_t* dst = g_map + (g_len - g_map_off);
  // Gather a, b, pad; the first kCommitBytes go aside for the commit store.
  uint8_t first[kCommitBytes];
  if (a.n >= kCommitBytes) {  // an import's strings or record (never padded): copied whole
    memcpy(first, a.p, kCommitBytes);
    memcpy(dst + kCommitBytes, a.p + kCommitBytes, a.n - kCommitBytes);
    if (b.n) memcpy(dst + a.n, b.p, b.n);
  } else {
    const struct { const uint8_t* p; size_t n; } parts[3] = {{a.p, a.n}, {b.p, b.n}, {pad, npad}};
    size_t o = 0;
    for (const auto& part : parts) {
      for (size_t i = 0; i < part.n;) {
        if (o < kCommitBytes) {
          first[o++] = part.p[i++];
          continue;
        }
        memcpy(dst + o, part.p + i, part.n - i);
        o += part.n - i;
        break;
      }
    }
  }
  unwritten_header(dst + total, g_cap - g_len - total - kUnwrittenHeader);
  commit_store(dst, first);
  g_len += total;
  return true;
}

// Gives the reserve back: the file ends at its last record. Records that come later
// (another thread, an atexit handler of a C extension) simply reserve again.
void trim_reserve() {
  if (g_fd < 0 || g_cap == g_len) return;
  if (ftruncate(g_fd, static_cast<off_t>(g_len)) == 0) g_cap = g_len;
}

// At exit(): after Python's finalisation, which may still import. A thread caught between
// two instructions of an append holds the lock: then the reserve stays (still valid).
__attribute__((destructor)) void trim_at_exit() {
  if (!g_initialised) return;  // the inert library: no lock taken, no libc function bound
  if (pthread_mutex_trylock(&g_mutex) != 0) return;
  TraceWriter::flush();  // hooks flush what they record; this is for anything left over
  trim_reserve();
  pthread_mutex_unlock(&g_mutex);
}

bool env_allowed(const char* kv) {
  static const char* const allow[] = {"PYTHONPATH=", "LD_PRELOAD=", "VIRTUAL_ENV=",
                                      "PYTEST_XDIST_WORKER=", "IMPTRACE_"};
  for (const char* a : allow)
    if (strncmp(kv, a, strlen(a)) == 0) return true;
  return false;
}

// The allow-listed environment as last written: header values, then updates. A fixed
// table of name=value copies, enough for the handful of allowed variables.
constexpr int kEnvSeen = 32;
char* g_env_seen[kEnvSeen];
int g_n_env_seen = 0;

void remember_env(const char* kv) {
  const char* eq = strchr(kv, '=');
  size_t nl = eq ? static_cast<size_t>(eq - kv) + 1 : 0;
  for (int i = 0; i < g_n_env_seen; ++i)
    if (strncmp(g_env_seen[i], kv, nl) == 0) {
      free(g_env_seen[i]);
      g_env_seen[i] = strdup(kv);
      return;
    }
  if (g_n_env_seen < kEnvSeen) g_env_seen[g_n_env_seen++] = strdup(kv);
}

bool env_seen(const char* kv) {
  for (int i = 0; i < g_n_env_seen; ++i)
    if (g_env_seen[i] && strcmp(g_env_seen[i], kv) == 0) return true;
  return false;
}

void put_header(wire::ByteBuf& b) {
  auto m = wire::begin_message(b, Trace::record);
  auto h = wire::begin_message(b, Record::header);
  wire::put_uint(b, Header::schema_major, kSchemaMajor);
  wire::put_uint(b, Header::schema_minor, kSchemaMinor);
  wire::put_string(b, Header::tracer_version, IMPTRACE_VERSION);
  wire::put_uint(b, Header::pid, static_cast<uint64_t>(getpid()));
  wire::put_uint(b, Header::ppid, static_cast<uint64_t>(getppid()));
  // argv as the kernel has it: Python's own sys.argv does not exist yet at the first import.
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    static char cmd[65536];
    ssize_t n = read(fd, cmd, sizeof cmd - 1);
    close(fd);
    for (ssize_t i = 0; i < n;) {
      size_t l = strnlen(cmd + i, static_cast<size_t>(n - i));
      wire::put_bytes(b, Header::argv, cmd + i, l);
      i += static_cast<ssize_t>(l) + 1;
    }
  }
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) { exe[n] = 0; wire::put_string(b, Header::executable, exe); }
  wire::put_string(b, Header::python_version, g_python_version);
  wire::put_string(b, Header::python_build, g_python_build);
  struct utsname u;
  if (uname(&u) == 0) {
    char plat[160];
    snprintf(plat, sizeof plat, "%s %s", u.sysname, u.release);
    wire::put_string(b, Header::platform, plat);
    wire::put_string(b, Header::machine, u.machine);
  }
  wire::put_string(b, Header::cwd, g_cwd);
  wire::put_sint64_as_int64(b, Header::start_time_unix_ns, g_start_unix_ns);
  for (char** e = process_environ(); e && *e; ++e) {
    if (!env_allowed(*e)) continue;
    const char* eq = strchr(*e, '=');
    if (!eq) continue;
    auto ev = wire::begin_message(b, Header::env);
    wire::put_bytes(b, EnvVar::name, *e, static_cast<size_t>(eq - *e));
    wire::put_string(b, EnvVar::value, eq + 1);
    wire::end_message(b, ev);
    remember_env(*e);
  }
  wire::put_sint64_as_int64(b, Header::forked_from_pid, g_forked_from);
  wire::put_uint(b, Header::start_monotonic_ns, g_start_mono);
  wire::end_message(b, h);
  wire::end_message(b, m);
}

// The file and its mapping let go of (an unnamed file is then gone): as before any was made.
void forget_file() {
  if (g_map) munmap(g_map, g_map_len);
  g_map = nullptr;
  g_map_off = g_map_len = 0;
  g_populated = 0;
  g_len = g_cap = 0;
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
}

// The file with its header (open_unnamed, open_named), or false after one line.
bool create_output() {
  char full[PATH_MAX];
  output_path(full, sizeof full);
  wire::ByteBuf h, none;
  put_header(h);
  if (h.failed) {
    warn("cannot write trace file", full, ENOMEM);
    return false;
  }
  if (open_unnamed(full)) {
    if (append(h, none) && link_unnamed(full)) return true;
    forget_file();  // not here: made under its name instead
  }
  if (!open_named(full)) return false;
  if (append(h, none)) return true;
  warn("cannot write trace file", full, errno);
  return false;
}

void atfork_prepare() { pthread_mutex_lock(&g_mutex); }
void atfork_parent() { pthread_mutex_unlock(&g_mutex); }
void atfork_child() {
  // The child must never write into the parent's file: close our copy of the descriptor
  // and start a new file, with a header of its own, at its first record.
  pthread_mutex_init(&g_mutex, nullptr);
  tracer_memory::after_fork_in_child();
  if (g_fd >= 0) close(g_fd);
  g_fd = -1;
  g_map = nullptr;  // MADV_DONTFORK: the parent's window does not exist here
  g_populated = 0;
  g_map_off = g_map_len = 0;
  g_len = g_cap = 0;
  g_pending.clear();
  g_strings.clear();
  reset_interning();
  g_forked_from = getppid();
  ++TraceWriter::generation_;
  g_n_env_seen = 0;  // the child's header records the environment anew (copies leak: fork)
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  g_start_unix_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

void TraceWriter::init(const char* python_version, const char* python_build) {
  if (!g_initialised) {
    if (void* e = dlsym(RTLD_DEFAULT, "environ")) g_environ_slot = static_cast<char** const*>(e);
    new (g_pending_storage) wire::ByteBuf;
    new (g_strings_storage) wire::ByteBuf;
    new (g_no_bytes_storage) wire::ByteBuf;
  }
  snprintf(g_python_version, sizeof g_python_version, "%s", python_version);
  snprintf(g_python_build, sizeof g_python_build, "%s", python_build);
  if (!getcwd(g_cwd, sizeof g_cwd)) snprintf(g_cwd, sizeof g_cwd, ".");
  const char* out = getenv("IMPTRACE_OUTPUT");
  snprintf(g_pattern, sizeof g_pattern, "%s", out && *out ? out : "imptrace.%n.%p.pb");
  g_start_mono = mono_ns();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  g_start_unix_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  const char* m = getenv("IMPTRACE_MMAP");
  g_direct = m && strcmp(m, "0") == 0;
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
  g_initialised = true;
}

void TraceWriter::lock() { pthread_mutex_lock(&g_mutex); }
void TraceWriter::unlock() { pthread_mutex_unlock(&g_mutex); }
bool TraceWriter::try_lock() { return pthread_mutex_trylock(&g_mutex) == 0; }
bool TraceWriter::append_encoded(const wire::ByteBuf& records) {
  if (g_fd < 0 || g_broken || !records.n) return false;
  if (!append(records, g_no_bytes)) { g_broken = true; return false; }
  return true;
}
bool TraceWriter::usable() { return !g_broken; }
void TraceWriter::finish() { trim_reserve(); }
uint32_t TraceWriter::generation_ = 0;  // 0 in the original process, +1 per fork
uint32_t TraceWriter::strings_epoch_ = 0;
wire::ByteBuf& TraceWriter::buf() { return g_pending; }

uint64_t TraceWriter::now_ns() { return mono_ns() - g_start_mono; }

// What a scan of the environment last saw, so that asking again about an unchanged one
// costs a few comparisons: every top-level import asks, and a program importing thousands
// of modules from one file makes all its imports top-level (a CI job's environment holds a
// hundred or more variables). Only the allow-listed variables are recorded, so only their
// entries are compared, with what tells that the array changed shape. Under glibc,
// setenv/putenv of an existing name replace its entry pointer in place; a new name is
// appended (a longer array, or a moved one); unsetenv moves the later entries down (a
// shorter array, and the allowed entries after it move). So: the same array, the same
// length, the same last entry, and each allowed entry where it was, is an environment with
// nothing new to record. Not seen this way: a program that writes a new pointer straight
// into an `environ` slot that held another variable (no libc call does).
constexpr size_t kEnvAllowedKept = 8;
struct EnvShape {
  char** array = nullptr;
  size_t len = 0;
  char* last = nullptr;
  size_t n_allowed = 0;  // kEnvAllowedKept + 1: too many to keep, always scanned
  size_t allowed_at[kEnvAllowedKept];
  char* allowed[kEnvAllowedKept];
};
EnvShape g_env_kept{};  // constant-initialised: no static initialiser runs at load

bool env_unchanged_since_last_scan() {
  char** env = process_environ();
  const EnvShape& k = g_env_kept;
  if (env && env == k.array && k.len && k.n_allowed <= kEnvAllowedKept && env[k.len - 1] == k.last &&
      !env[k.len]) {
    size_t i = 0;
    while (i < k.n_allowed && env[k.allowed_at[i]] == k.allowed[i]) ++i;
    if (i == k.n_allowed) return true;
  }
  // Changed, too many allowed entries to keep, or no environment at all: kept as it is now.
  bool same = !env && !k.array;
  EnvShape now{};
  now.array = env;
  while (env && env[now.len]) {
    if (env_allowed(env[now.len])) {
      if (now.n_allowed < kEnvAllowedKept) {
        now.allowed_at[now.n_allowed] = now.len;
        now.allowed[now.n_allowed] = env[now.len];
      }
      ++now.n_allowed;
    }
    ++now.len;
  }
  now.last = now.len ? env[now.len - 1] : nullptr;
  g_env_kept = now;
  return same;
}

void TraceWriter::record_env_changes() {
  if (g_fd < 0) return;  // no header yet: it will carry the current values
  if (env_unchanged_since_last_scan()) return;
  for (char** e = process_environ(); e && *e; ++e) {
    if (!env_allowed(*e) || env_seen(*e)) continue;
    const char* eq = strchr(*e, '=');
    if (!eq) continue;
    auto m = wire::begin_message(g_pending, Trace::record);
    auto ev = wire::begin_message(g_pending, Record::env_update);
    wire::put_bytes(g_pending, EnvVar::name, *e, static_cast<size_t>(eq - *e));
    wire::put_string(g_pending, EnvVar::value, eq + 1);
    wire::end_message(g_pending, ev);
    wire::end_message(g_pending, m);
    remember_env(*e);
  }
}

uint32_t TraceWriter::intern(const char* s) { return s ? intern(s, strlen(s)) : 0; }

// Trace.record { string_def { id, prefix, value } }, two defined per import: written in
// one go when both lengths fit one byte (always, but for strings over 100 bytes), the
// same bytes as the generic nested-message encoding below.
void put_string_def(wire::ByteBuf& b, uint32_t id, uint32_t prefix, const char* text, size_t len) {
  size_t body = 1 + wire::varint_size(id) + (prefix ? 1 + wire::varint_size(prefix) : 0) + 2 + len;
  if (body + 2 < 0x80 && b.reserve(body + 4)) {
    uint8_t* o = b.p + b.n;
    *o++ = (Trace::record << 3) | wire::LEN;
    *o++ = static_cast<uint8_t>(body + 2);
    *o++ = (Record::string_def << 3) | wire::LEN;
    *o++ = static_cast<uint8_t>(body);
    *o++ = (StringDef::id << 3) | wire::VARINT;
    o += wire::encode_varint(o, id);
    if (prefix) {
      *o++ = (StringDef::prefix << 3) | wire::VARINT;
      o += wire::encode_varint(o, prefix);
    }
    *o++ = (StringDef::value << 3) | wire::LEN;
    *o++ = static_cast<uint8_t>(len);
    memcpy(o, text, len);
    b.n = static_cast<size_t>(o + len - b.p);
    return;
  }
  auto m = wire::begin_message(b, Trace::record);
  auto d = wire::begin_message(b, Record::string_def);
  wire::put_uint(b, StringDef::id, id);
  wire::put_uint(b, StringDef::prefix, prefix);
  wire::put_bytes(b, StringDef::value, text, len);
  wire::end_message(b, d);
  wire::end_message(b, m);
}

// Paths and dotted names share long prefixes ("/usr/lib/python3/dist-packages/torch/",
// "torch.nn."), so a string longer than kPrefixMin is defined as (id of its prefix up to
// and including the last '/' or '.') + the rest: a trace of a 5,000-module tree then
// spells each directory and package name once.
constexpr size_t kPrefixMin = 8;

uint32_t TraceWriter::intern(const char* s, size_t n) {
  if (!s || !n) return 0;
  uint32_t h32 = static_cast<uint32_t>(hash_bytes(s, n));
  uint64_t h = intern_hash(h32);
  decltype(g_strings_table)::Hole hole;
  uint32_t found = g_strings_table.find(h, [&](const InternEntry& e) {
    return e.hash == h32 && e.len == n && memcmp(arena_at(e.off), s, n) == 0;
  }, &hole);
  if (found != g_strings_table.kNone) return found + 1;
  uint32_t prefix = 0;
  size_t cut = 0;
  if (n > kPrefixMin) {
    // Paths split at their directory, dotted names at their parent package.
    const char* slash = static_cast<const char*>(memrchr(s, '/', n - 1));
    const char* dot = slash ? nullptr : static_cast<const char*>(memrchr(s, '.', n - 1));
    if (slash) cut = static_cast<size_t>(slash - s) + 1;
    else if (dot) cut = static_cast<size_t>(dot - s) + 1;
    if (cut >= n || cut < 2) cut = 0;
    if (cut) {
      // Siblings come one after another (a package's modules, a directory's files): the
      // prefix of the last string of each kind is compared before it is looked up.
      PrefixMemo& memo = g_prefix_memo[slash ? 0 : 1];
      if (memo.id && memo.len == cut && memcmp(arena_at(memo.off), s, cut) == 0) {
        prefix = memo.id;
      } else {
        prefix = intern(s, cut);
        if (!prefix) cut = 0;
      }
    }
  }
  uint32_t off = 0;
  if (!arena_place(n, &off)) return 0;
  uint32_t pos = 0;
  InternEntry* e = g_strings_table.insert(h, &pos, hole);  // (a prefix interned since voids the hole)
  if (!e) return 0;
  memcpy(arena_at(off), s, n);
  *e = InternEntry{h32, off, static_cast<uint32_t>(n)};
  uint32_t id = pos + 1;
  if (cut) g_prefix_memo[s[cut - 1] == '/' ? 0 : 1] = PrefixMemo{off, static_cast<uint32_t>(cut), prefix};
  put_string_def(g_strings, id, prefix, s + cut, n - cut);
  return id;
}

TraceWriter::RecordMark TraceWriter::begin_record(uint32_t kind) {
  RecordMark m;
  m.outer = wire::begin_message(g_pending, Trace::record);
  m.inner = wire::begin_message(g_pending, kind);
  return m;
}

void TraceWriter::end_record(RecordMark m) {
  wire::end_message(g_pending, m.inner);
  wire::end_message(g_pending, m.outer);
}

void TraceWriter::flush() {
  if (g_broken || g_pending.failed || g_strings.failed) {
    // Out of memory while encoding: drop both, never write a torn record. The ids of the
    // dropped strings are forgotten too, so later records cannot point at them.
    if (!g_broken && (g_pending.failed || g_strings.failed)) reset_interning();
    g_pending.clear();
    g_strings.clear();
    return;
  }
  if (!g_pending.n && !g_strings.n) return;
  if (g_fd < 0 && !create_output()) {
    g_broken = true;
    g_pending.clear();
    g_strings.clear();
    return;
  }
  if (!append(g_strings, g_pending)) {
    // Disk full or the file went away: one line, then the program runs on untraced.
    warn("cannot write trace file", "", errno);
    g_broken = true;
  }
  g_pending.clear();
  g_strings.clear();
}

}  // namespace imptrace
