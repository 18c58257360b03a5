// Byte sources: where the decoder gets a trace's bytes from. A file (streamed through one
// buffer) or a memory block (tests, fuzzing); a compressed file would be one more source.
// Every source knows how many bytes are left, which is what lets the decoder reject absurd
// lengths before allocating for them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace imptrace {
namespace reader {

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual int get() = 0;                            // next byte or -1 at end
  virtual bool read(uint8_t* dst, size_t n) = 0;   // exactly n bytes or false
  virtual uint64_t remaining() const = 0;
  // The next n bytes in place (valid until the next call), consumed; nullptr when they
  // are not available contiguously (the caller then falls back to read()).
  virtual const uint8_t* take(size_t n) = 0;
  // Back to the first byte (for the counting pass); false when not possible.
  virtual bool rewind() = 0;
  // Consumes n bytes without looking at them; false (at end) when fewer are left.
  virtual bool skip(uint64_t n) = 0;
};

// A block of memory (not copied: it must outlive the source).
std::unique_ptr<ByteSource> memory_source(const uint8_t* data, size_t size);

// The trace file at `path`, or nullptr with `why` set ("is a directory", "not a regular
// file", "empty file", or the system's error text).
std::unique_ptr<ByteSource> open_file_source(const std::string& path, std::string& why);

}  // namespace reader
}  // namespace imptrace
