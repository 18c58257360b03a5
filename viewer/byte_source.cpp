// The byte sources of byte_source.h.
#include "byte_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace imptrace {
namespace reader {
namespace {

class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* p, size_t n) : start_(p), p_(p), end_(p + n) {}
  bool rewind() override { p_ = start_; return true; }
  int get() override { return p_ < end_ ? *p_++ : -1; }
  bool read(uint8_t* dst, size_t n) override {
    if (static_cast<size_t>(end_ - p_) < n) { p_ = end_; return false; }
    if (n) memcpy(dst, p_, n);
    p_ += n;
    return true;
  }
  uint64_t remaining() const override { return static_cast<uint64_t>(end_ - p_); }
  bool skip(uint64_t n) override {
    if (static_cast<uint64_t>(end_ - p_) < n) { p_ = end_; return false; }
    p_ += n;
    return true;
  }
  const uint8_t* take(size_t n) override {
    if (static_cast<size_t>(end_ - p_) < n) return nullptr;
    const uint8_t* at = p_;
    p_ += n;
    return at;
  }

 private:
  const uint8_t* start_;
  const uint8_t* p_;
  const uint8_t* end_;
};

// Streams a file through one fixed buffer (read(2) in 1 MiB blocks): memory stays bounded
// by the buffer plus the largest record, whatever the file size.
class FileSource : public ByteSource {
 public:
  static constexpr size_t kBuffer = 1 << 20;
  FileSource(int fd, uint64_t size) : fd_(fd), size_(size), left_(size), buf_(new uint8_t[kBuffer]) {}
  ~FileSource() override { close(fd_); }
  bool rewind() override {
    if (lseek(fd_, 0, SEEK_SET) != 0) return false;
    left_ = size_;
    pos_ = len_ = 0;
    return true;
  }
  int get() override {
    if (pos_ == len_ && !fill(1)) return -1;
    --left_;
    return buf_[pos_++];
  }
  bool read(uint8_t* dst, size_t n) override {
    if (n > left_) { left_ = 0; pos_ = len_ = 0; return false; }
    size_t have = std::min(n, len_ - pos_);
    if (have) memcpy(dst, buf_.get() + pos_, have);
    pos_ += have;
    left_ -= have;
    dst += have;
    n -= have;
    while (n) {  // the rest straight into dst
      ssize_t got = ::read(fd_, dst, n);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) { left_ = 0; return false; }
      dst += got;
      n -= static_cast<size_t>(got);
      left_ -= static_cast<uint64_t>(got);
    }
    return true;
  }
  uint64_t remaining() const override { return left_; }
  const uint8_t* take(size_t n) override {
    if (n > kBuffer || n > left_) return nullptr;
    if (len_ - pos_ < n && !fill(n)) return nullptr;
    const uint8_t* at = buf_.get() + pos_;
    pos_ += n;
    left_ -= n;
    return at;
  }
  bool skip(uint64_t n) override {
    if (n > left_) { left_ = 0; pos_ = len_ = 0; return false; }
    uint64_t buffered = std::min<uint64_t>(n, len_ - pos_);
    pos_ += static_cast<size_t>(buffered);
    left_ -= n;
    if (n > buffered) {
      if (lseek(fd_, static_cast<off_t>(n - buffered), SEEK_CUR) < 0) { left_ = 0; return false; }
      pos_ = len_ = 0;
    }
    return true;
  }

 private:
  // Makes at least `want` (<= kBuffer) unread bytes available in the buffer.
  bool fill(size_t want) {
    size_t have = len_ - pos_;
    if (have && pos_) memmove(buf_.get(), buf_.get() + pos_, have);
    pos_ = 0;
    len_ = have;
    while (len_ < want) {
      // Never read past the size the file had when opened (it may still be growing).
      size_t room = static_cast<size_t>(std::min<uint64_t>(kBuffer - len_, left_ - len_));
      if (!room) break;
      ssize_t got = ::read(fd_, buf_.get() + len_, room);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      len_ += static_cast<size_t>(got);
    }
    if (len_ < want) { left_ = len_; return false; }  // the file shrank: end of data
    return true;
  }

  int fd_;
  uint64_t size_;
  uint64_t left_;  // unread bytes (buffered ones included)
  std::unique_ptr<uint8_t[]> buf_;
  size_t pos_ = 0, len_ = 0;
};

}  // namespace

std::unique_ptr<ByteSource> memory_source(const uint8_t* data, size_t size) {
  return std::unique_ptr<ByteSource>(new MemorySource(data, size));
}

std::unique_ptr<ByteSource> open_file_source(const std::string& path, std::string& why) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) { why = strerror(errno); return nullptr; }
  if (S_ISDIR(st.st_mode)) { why = "is a directory"; return nullptr; }
  if (!S_ISREG(st.st_mode)) { why = "not a regular file"; return nullptr; }
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) { why = strerror(errno); return nullptr; }
  if (st.st_size == 0) {
    close(fd);
    why = "empty file";
    return nullptr;
  }
  return std::unique_ptr<ByteSource>(new FileSource(fd, static_cast<uint64_t>(st.st_size)));
}

}  // namespace reader
}  // namespace imptrace
