// The bundle format of bundle.h: gzip through zlib, ustar by hand (it is 512-byte blocks
// of fixed fields; a library would add a dependency for forty lines).
#include "bundle.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>

namespace imptrace {
namespace bundle {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kMaxNameBytes = 4096;    // a GNU long name or pax path
constexpr size_t kMaxPaxBytes = 1 << 20;  // a pax extended header
// Deflate cannot do better than about 1032:1, which only runs of one byte reach; traces
// compress about 10:1. Past kBombFloor of output, a stream inflating more than kBombRatio
// times its input is refused before it reaches kMaxUnpackedBytes.
constexpr uint64_t kBombFloor = 64ull << 20;
constexpr uint64_t kBombRatio = 500;

bool ends_with(const std::string& s, const char* suffix) {
  size_t n = strlen(suffix);
  return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

std::string size_text(uint64_t n) {
  if (n >= (1ull << 30)) return std::to_string(n >> 30) + " GiB";
  if (n >= (1ull << 20)) return std::to_string(n >> 20) + " MiB";
  return std::to_string(n) + " bytes";
}

// A gzip stream (one or more concatenated gzip members) from a file or a memory block,
// inflated on demand. Errors stay in `error` and end the stream.
class GzipStream {
 public:
  GzipStream(int fd, const uint8_t* mem, size_t mem_size) : fd_(fd), mem_(mem), mem_left_(mem_size) {
    memset(&z_, 0, sizeof z_);
    if (inflateInit2(&z_, 15 + 16) != Z_OK) error = "cannot start zlib";
    else live_ = true;
    if (fd_ >= 0) in_.reset(new uint8_t[kIn]);
  }
  ~GzipStream() {
    if (live_) inflateEnd(&z_);
  }
  // Up to n bytes; 0 at the end of the data (or on error: check `error`).
  size_t read(uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n && !ended_ && error.empty()) {
      if (z_.avail_in == 0 && !refill()) {
        if (error.empty()) {
          if (started_member_) error = "corrupt gzip data (cut short)";
          else ended_ = true;
        }
        break;
      }
      started_member_ = true;
      z_.next_out = dst + got;
      z_.avail_out = static_cast<uInt>(std::min<size_t>(n - got, 1u << 30));
      size_t before = z_.avail_out;
      int rc = inflate(&z_, Z_NO_FLUSH);
      got += before - z_.avail_out;
      out_total_ += before - z_.avail_out;
      if (out_total_ > kBombFloor && out_total_ / kBombRatio > in_total_) {
        error = "gzip data inflating more than " + std::to_string(kBombRatio) +
                " times its size (a zip bomb?), refused";
        break;
      }
      if (rc == Z_STREAM_END) {
        // Another gzip member may follow (concatenated files are one stream).
        started_member_ = false;
        inflateReset(&z_);
        if (z_.avail_in == 0 && !refill()) ended_ = error.empty();
        else if (z_.avail_in && z_.next_in[0] != 0x1f) ended_ = true;  // trailing garbage
      } else if (rc == Z_BUF_ERROR && before == z_.avail_out && z_.avail_in) {
        error = "corrupt gzip data";
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        error = std::string("corrupt gzip data") + (z_.msg ? std::string(" (") + z_.msg + ")" : "");
      }
    }
    return got;
  }
  // Exactly n bytes, else false with `error` set.
  bool read_exact(uint8_t* dst, size_t n, const char* what) {
    size_t got = read(dst, n);
    if (got == n) return true;
    if (error.empty()) error = std::string("truncated bundle (") + what + " cut short)";
    return false;
  }
  bool skip(uint64_t n, const char* what) {
    uint8_t buf[16384];
    while (n) {
      size_t step = static_cast<size_t>(std::min<uint64_t>(n, sizeof buf));
      if (!read_exact(buf, step, what)) return false;
      n -= step;
    }
    return true;
  }
  std::string error;

 private:
  static constexpr size_t kIn = 1 << 16;
  bool refill() {
    if (fd_ < 0) {
      if (!mem_left_) return false;
      size_t step = std::min<size_t>(mem_left_, 1u << 30);
      z_.next_in = const_cast<Bytef*>(mem_);
      z_.avail_in = static_cast<uInt>(step);
      in_total_ += step;
      mem_ += step;
      mem_left_ -= step;
      return true;
    }
    for (;;) {
      ssize_t got = ::read(fd_, in_.get(), kIn);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) { error = strerror(errno); return false; }
      if (got == 0) return false;
      z_.next_in = in_.get();
      z_.avail_in = static_cast<uInt>(got);
      in_total_ += static_cast<uint64_t>(got);
      return true;
    }
  }

  z_stream z_;
  bool live_ = false;
  bool ended_ = false;
  bool started_member_ = false;
  int fd_;
  const uint8_t* mem_;
  size_t mem_left_;
  std::unique_ptr<uint8_t[]> in_;
  uint64_t in_total_ = 0, out_total_ = 0;  // compressed bytes read, bytes inflated
};

// Reads the rest of the stream (or `limit` bytes) into `out`, growing it as data comes,
// so a stream that claims much and holds little costs little.
bool read_up_to(GzipStream& gz, uint64_t limit, bool exact, std::vector<uint8_t>& out,
                std::string& why, const std::string& what) {
  out.clear();
  uint64_t want = exact ? limit : kMaxUnpackedBytes + 1;
  while (out.size() < want) {
    size_t step = static_cast<size_t>(std::min<uint64_t>(want - out.size(), 1 << 20));
    size_t at = out.size();
    out.resize(at + step);
    size_t got = gz.read(out.data() + at, step);
    out.resize(at + got);
    if (!gz.error.empty()) { why = gz.error; return false; }
    if (got < step) break;
  }
  if (exact && out.size() < limit) { why = "truncated bundle (" + what + " cut short)"; return false; }
  if (!exact && out.size() > kMaxUnpackedBytes) {
    why = what + " inflates to more than " + size_text(kMaxUnpackedBytes) + " (refused)";
    return false;
  }
  return true;
}

// A ustar numeric field: octal text, or base-256 when the first byte has bit 7 set.
bool tar_number(const uint8_t* f, size_t n, uint64_t& v) {
  v = 0;
  if (f[0] & 0x80) {
    if (f[0] != 0x80) return false;  // negative or absurd
    for (size_t i = 1; i < n; ++i) {
      if (v >> 55) return false;
      v = (v << 8) | f[i];
    }
    return true;
  }
  size_t i = 0;
  while (i < n && (f[i] == ' ' || f[i] == 0)) ++i;
  for (; i < n && f[i] >= '0' && f[i] <= '7'; ++i) {
    if (v >> 60) return false;
    v = v * 8 + (f[i] - '0');
  }
  for (; i < n; ++i)
    if (f[i] != ' ' && f[i] != 0) return false;
  // An empty field is 0.
  return true;
}

std::string tar_text(const uint8_t* f, size_t n) {
  size_t len = 0;
  while (len < n && f[len]) ++len;
  return std::string(reinterpret_cast<const char*>(f), len);
}

bool is_ustar(const uint8_t* block) { return memcmp(block + 257, "ustar", 5) == 0; }

bool checksum_ok(const uint8_t* block) {
  uint64_t want;
  if (!tar_number(block + 148, 8, want)) return false;
  uint64_t sum = 0;
  for (size_t i = 0; i < kBlock; ++i) sum += (i >= 148 && i < 156) ? ' ' : block[i];
  return sum == want;
}

// "path=..." from a pax extended header ("LEN key=value\n" records).
std::string pax_path(const std::vector<uint8_t>& data) {
  std::string s(data.begin(), data.end()), path;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t sp = s.find(' ', pos);
    if (sp == std::string::npos) break;
    uint64_t len = 0;
    for (size_t i = pos; i < sp; ++i) {
      if (s[i] < '0' || s[i] > '9' || len > s.size()) return path;
      len = len * 10 + static_cast<uint64_t>(s[i] - '0');
    }
    if (len <= sp - pos || pos + len > s.size()) break;
    std::string rec = s.substr(sp + 1, pos + len - sp - 1);
    if (!rec.empty() && rec.back() == '\n') rec.pop_back();
    if (rec.compare(0, 5, "path=") == 0) path = rec.substr(5);
    pos += len;
  }
  return path;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s.substr(0, 200)) q += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  return q + (s.size() > 200 ? "...'" : "'");
}

bool deliver(Member& m, const MemberFn& each, std::string& why) {
  if (ends_with(m.name, ".gz")) {
    std::vector<uint8_t> inner;
    if (!gunzip(m.bytes.data(), m.bytes.size(), inner, why)) {
      why = quoted(m.name) + ": " + why;
      return false;
    }
    m.bytes.swap(inner);
  }
  return each(m, why);
}

// The tar stream inside `gz`, whose first block is `first`.
bool read_tar(GzipStream& gz, const uint8_t* first, const MemberFn& each, const MemberFn& each_xml,
              std::string& why) {
  uint8_t block[kBlock];
  memcpy(block, first, kBlock);
  std::string long_name;
  bool have_long_name = false;
  for (bool have_block = true;; have_block = false) {
    if (!have_block) {
      size_t got = gz.read(block, kBlock);
      if (!gz.error.empty()) { why = gz.error; return false; }
      if (got == 0) return true;  // end without the two zero blocks: tolerated, as GNU tar does
      if (got < kBlock) { why = "truncated bundle (tar header cut short)"; return false; }
    }
    bool zero = std::all_of(block, block + kBlock, [](uint8_t b) { return b == 0; });
    if (zero) return true;  // end of archive
    if (!checksum_ok(block)) { why = "corrupt bundle (bad tar header checksum)"; return false; }
    uint64_t size;
    if (!tar_number(block + 124, 12, size)) { why = "corrupt bundle (bad member size)"; return false; }
    char type = static_cast<char>(block[156]);
    std::string name = tar_text(block, 100);
    if (is_ustar(block)) {
      std::string prefix = tar_text(block + 345, 155);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    if (have_long_name) { name = long_name; have_long_name = false; }
    uint64_t padded = (size + kBlock - 1) / kBlock * kBlock;

    if (type == 'L' || type == 'x' || type == 'g') {  // GNU long name, pax headers
      uint64_t cap = type == 'L' ? kMaxNameBytes : kMaxPaxBytes;
      if (size > cap) { why = "corrupt bundle (extended header of " + size_text(size) + ")"; return false; }
      std::vector<uint8_t> data;
      if (!read_up_to(gz, size, true, data, why, "extended header")) return false;
      if (!gz.skip(padded - size, "padding")) { why = gz.error; return false; }
      if (type == 'L') {
        long_name = tar_text(data.data(), data.size());
        have_long_name = true;
      } else if (type == 'x') {
        std::string p = pax_path(data);
        if (!p.empty()) { long_name = p; have_long_name = true; }
      }
      continue;
    }
    std::string shown = quoted(name);
    if (type == '1' || type == '2') {
      why = "member " + shown + " is a link (a bundle holds regular files only)";
      return false;
    }
    if (type != '0' && type != '\0' && type != '7' && type != '5') {
      why = "member " + shown + " is not a regular file (type '" + std::string(1, type) + "')";
      return false;
    }
    while (name.compare(0, 2, "./") == 0) name.erase(0, 2);
    if (type == '5' && name.empty()) continue;  // "./"
    if (!safe_member_path(name)) {
      why = "member " + shown + " has an unsafe path (absolute, or with ..)";
      return false;
    }
    if (size > kMaxUnpackedBytes) {
      why = "member " + shown + " declares " + size_text(size) + " (more than the limit of " +
            size_text(kMaxUnpackedBytes) + ")";
      return false;
    }
    bool trace = type != '5' && (ends_with(name, ".pb") || ends_with(name, ".pb.gz"));
    // A junit member over its limit is refused whoever reads: pack never writes one, so a
    // bundle holding one was not made by pack.
    if (type != '5' && is_xml_member(name) && size > kMaxJunitBytes) {
      why = "member " + shown + " declares " + size_text(size) + " (more than the limit of " +
            size_text(kMaxJunitBytes) + " for junit XML)";
      return false;
    }
    // The member's bytes, with its run (the first path component) and name.
    auto read_member = [&](Member& m) {
      size_t slash = name.find('/');
      m.run = slash == std::string::npos ? "" : name.substr(0, slash);
      m.name = name;
      if (!read_up_to(gz, size, true, m.bytes, why, "member " + shown)) return false;
      if (!gz.skip(padded - size, "padding")) { why = gz.error; return false; }
      return true;
    };
    if (type != '5' && each_xml && is_xml_member(name)) {
      Member m;
      if (!read_member(m) || !each_xml(m, why)) return false;
      continue;
    }
    if (!trace || !each) {
      if (!gz.skip(padded, "member")) { why = gz.error; return false; }
      continue;
    }
    Member m;
    if (!read_member(m) || !deliver(m, each, why)) return false;
  }
}

bool read_stream(GzipStream& gz, const MemberFn& each, const MemberFn& each_xml, std::string& why) {
  if (!gz.error.empty()) { why = gz.error; return false; }
  uint8_t first[kBlock];
  size_t got = gz.read(first, kBlock);
  if (!gz.error.empty()) { why = gz.error; return false; }
  if (got == kBlock && is_ustar(first)) return read_tar(gz, first, each, each_xml, why);
  // A compressed trace: the whole stream is one member.
  Member m;
  m.bytes.assign(first, first + got);
  if (got == kBlock) {
    std::vector<uint8_t> rest;
    if (!read_up_to(gz, 0, false, rest, why, "the compressed trace")) return false;
    if (rest.size() + kBlock > kMaxUnpackedBytes) {
      why = "the compressed trace inflates to more than " + size_text(kMaxUnpackedBytes) + " (refused)";
      return false;
    }
    m.bytes.insert(m.bytes.end(), rest.begin(), rest.end());
  }
  return each ? each(m, why) : true;
}

}  // namespace

bool safe_member_path(const std::string& name) {
  if (name.empty() || name[0] == '/' || name.find('\\') != std::string::npos) return false;
  size_t pos = 0;
  while (pos <= name.size()) {
    size_t end = name.find('/', pos);
    if (end == std::string::npos) end = name.size();
    if (name.compare(pos, end - pos, "..") == 0 && end - pos == 2) return false;
    pos = end + 1;
  }
  return true;
}

bool is_xml_member(const std::string& name) {
  size_t slash = name.find('/');
  if (slash != std::string::npos && name.find('/', slash + 1) != std::string::npos) return false;
  size_t base = slash == std::string::npos ? 0 : slash + 1;
  return name.size() > base + 4 && ends_with(name, ".xml");
}

bool is_gzip(const uint8_t* data, size_t size) { return size >= 2 && data[0] == 0x1f && data[1] == 0x8b; }

bool is_gzip_file(const std::string& path) {
  // O_NONBLOCK: a FIFO given as a trace must not block the open (pread then fails on it,
  // and the reader says it is not a regular file).
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  uint8_t magic[2];
  ssize_t got = pread(fd, magic, 2, 0);
  close(fd);
  return got == 2 && is_gzip(magic, 2);
}

bool read_file(const std::string& path, const MemberFn& each, std::string& why, const MemberFn& each_xml) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) { why = strerror(errno); return false; }
  if (!S_ISREG(st.st_mode)) { why = "not a regular file"; return false; }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) { why = strerror(errno); return false; }
  bool ok;
  {
    GzipStream gz(fd, nullptr, 0);
    ok = read_stream(gz, each, each_xml, why);
  }
  close(fd);
  return ok;
}

bool read_memory(const uint8_t* data, size_t size, const MemberFn& each, std::string& why,
                 const MemberFn& each_xml) {
  GzipStream gz(-1, data, size);
  return read_stream(gz, each, each_xml, why);
}

bool gunzip(const uint8_t* data, size_t size, std::vector<uint8_t>& out, std::string& why) {
  GzipStream gz(-1, data, size);
  if (!gz.error.empty()) { why = gz.error; return false; }
  return read_up_to(gz, 0, false, out, why, "the compressed trace");
}

// ---- writing ----------------------------------------------------------------------------

struct Writer::State {
  z_stream z;
};

Writer::Writer() : z_(nullptr) {}

Writer::~Writer() {
  if (z_) {
    deflateEnd(&z_->z);
    delete z_;
  }
  if (fd_ >= 0) close(fd_);
}

bool Writer::open(const std::string& path, std::string& why) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) { why = strerror(errno); return false; }
  z_ = new State();
  memset(&z_->z, 0, sizeof z_->z);
  if (deflateInit2(&z_->z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) {
    delete z_;
    z_ = nullptr;
    why = "cannot start zlib";
    return false;
  }
  return true;
}

bool Writer::put(const uint8_t* data, size_t size, int flush, std::string& why) {
  uint8_t out[1 << 16];
  z_stream& z = z_->z;
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  for (;;) {
    z.next_out = out;
    z.avail_out = sizeof out;
    int rc = deflate(&z, flush);
    if (rc == Z_STREAM_ERROR) { why = "zlib failed"; return false; }
    size_t have = sizeof out - z.avail_out;
    for (size_t done = 0; done < have;) {
      ssize_t w = ::write(fd_, out + done, have - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) { why = strerror(errno); return false; }
      done += static_cast<size_t>(w);
    }
    written_ += have;
    if (flush == Z_FINISH ? rc == Z_STREAM_END : (z.avail_in == 0 && z.avail_out != 0)) return true;
  }
}

bool Writer::add(const std::string& name, const uint8_t* data, size_t size, std::string& why) {
  if (!z_) { why = "bundle not open"; return false; }
  if (!safe_member_path(name)) { why = "unsafe member name " + quoted(name); return false; }
  uint8_t h[kBlock] = {};
  std::string file = name, prefix;
  if (file.size() > 100) {  // ustar: split at a '/' into prefix (155) and name (100)
    size_t cut = file.rfind('/', 155);
    if (cut == std::string::npos || file.size() - cut - 1 > 100 || cut == 0) {
      why = "member name too long for a tar header: " + quoted(name);
      return false;
    }
    prefix = file.substr(0, cut);
    file = file.substr(cut + 1);
  }
  memcpy(h, file.data(), file.size());
  snprintf(reinterpret_cast<char*>(h + 100), 8, "%07o", 0644);
  snprintf(reinterpret_cast<char*>(h + 108), 8, "%07o", 0);
  snprintf(reinterpret_cast<char*>(h + 116), 8, "%07o", 0);
  snprintf(reinterpret_cast<char*>(h + 124), 12, "%011llo", static_cast<unsigned long long>(size));
  snprintf(reinterpret_cast<char*>(h + 136), 12, "%011llo", static_cast<unsigned long long>(time(nullptr)));
  h[156] = '0';
  memcpy(h + 257, "ustar", 6);
  memcpy(h + 263, "00", 2);
  memcpy(h + 345, prefix.data(), prefix.size());
  memset(h + 148, ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  snprintf(reinterpret_cast<char*>(h + 148), 8, "%06o", sum);
  h[155] = ' ';
  static const uint8_t zeros[kBlock] = {};
  return put(h, kBlock, Z_NO_FLUSH, why) && put(data, size, Z_NO_FLUSH, why) &&
         put(zeros, (kBlock - size % kBlock) % kBlock, Z_NO_FLUSH, why);
}

bool Writer::finish(std::string& why) {
  static const uint8_t zeros[2 * kBlock] = {};
  if (!z_) { why = "bundle not open"; return false; }
  if (!put(zeros, sizeof zeros, Z_FINISH, why)) return false;
  if (fsync(fd_) != 0 && errno != EINVAL) { why = strerror(errno); return false; }
  int fd = fd_;
  fd_ = -1;
  if (close(fd) != 0) { why = strerror(errno); return false; }
  return true;
}

}  // namespace bundle
}  // namespace imptrace
