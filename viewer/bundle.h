// Bundles: a run's traces in one attachable file. A bundle is a gzip-compressed ustar
// archive (.tar.gz: the one archive format GitHub and GitCode both accept as an issue
// attachment) with one top-level directory per run holding that run's *.pb files and its
// junit XML (*.xml, the test outcomes the many-run diff reads), plus a manifest.json. A single trace may also come gzip-compressed (.pb.gz).
//
// Reading is built for hostile input, as the trace decoder is: nothing is ever written to
// disk, a member is refused when its path is absolute or climbs out (..), when it is a
// link or a device, or when it declares or inflates to more than kMaxUnpackedBytes; a
// corrupt gzip or tar stream is one line of text. Memory is bounded by one trace's bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace imptrace {
namespace bundle {

// Largest trace (one member, decompressed) a bundle or .pb.gz may hold: the reader keeps
// one member in memory while it decodes it.
constexpr uint64_t kMaxUnpackedBytes = 1ull << 30;
// Largest junit XML file a bundle may carry: pytest's report of a large suite with its
// captured output runs to tens of MB; the whole file is held and parsed in memory.
constexpr uint64_t kMaxJunitBytes = 64ull << 20;

// One trace from a bundle: `run` is its top-level directory ("" for a member at the top
// level or a lone .pb.gz), `name` its path in the archive.
struct Member {
  std::string run;
  std::string name;
  std::vector<uint8_t> bytes;  // the trace, decompressed
};

// Called once per trace member (or junit member), in archive order; returning false stops the walk (the
// callback has set `why`).
using MemberFn = std::function<bool(Member&, std::string& why)>;

// Does the file (or block) start with the gzip magic?
bool is_gzip_file(const std::string& path);
bool is_gzip(const uint8_t* data, size_t size);

// Reads a .tar.gz bundle or a .pb.gz trace, calling `each` for every trace member (*.pb,
// *.pb.gz inside a bundle are decompressed too). Members that are not traces
// (manifest.json, directories) are passed over. On failure returns false with `why`.
// An empty `each` passes the traces over unread (a reader of the junit members only).
// With `each_xml`, every *.xml member directly in a run's directory (or at the top level)
// goes to it, as is. Without it they are passed over like any other member that is not a
// trace. Either way one declaring more than kMaxJunitBytes is refused.
bool read_file(const std::string& path, const MemberFn& each, std::string& why,
               const MemberFn& each_xml = MemberFn());
bool read_memory(const uint8_t* data, size_t size, const MemberFn& each, std::string& why,
                 const MemberFn& each_xml = MemberFn());

// Is `name` (a member path) a junit XML member: RUN/NAME.xml or NAME.xml?
bool is_xml_member(const std::string& name);

// Inflates a gzip block (a .pb.gz member) into `out`, refusing more than kMaxUnpackedBytes.
bool gunzip(const uint8_t* data, size_t size, std::vector<uint8_t>& out, std::string& why);

// Writes a .tar.gz: add() each member (regular files, mode 0644), then finish().
class Writer {
 public:
  Writer();
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  bool open(const std::string& path, std::string& why);
  // `name` is a relative path without "..": at most 255 bytes, split ustar-style.
  bool add(const std::string& name, const uint8_t* data, size_t size, std::string& why);
  bool finish(std::string& why);  // end-of-archive blocks, gzip trailer, close
  uint64_t compressed_bytes() const { return written_; }

 private:
  bool put(const uint8_t* data, size_t size, int flush, std::string& why);
  struct State;
  State* z_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

// Is `name` a safe member path (relative, no "..", no empty name)?
bool safe_member_path(const std::string& name);

}  // namespace bundle
}  // namespace imptrace
