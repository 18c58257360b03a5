// The reader on hand-built traces: decoding, defaults, and robustness against every kind
// of bad input (truncation at every offset, random bytes, bit flips, absurd lengths,
// unknown fields, newer schema).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <random>

#include "scenario.h"
#include "trace_reader.h"
#include "trace_reading.h"

using namespace imptrace;
using namespace imptrace::testing;

namespace {
bool parse(const std::vector<uint8_t>& bytes, model::Process& p, std::string& why) {
  return reader::parse_trace(bytes.data(), bytes.size(), p, why);
}
// A trace with header `h` and no records, parsed.
bool parses_with(const HeaderSpec& h, std::string& why) {
  TraceBuilder b(true, h);
  model::Process p;
  return parse(b.bytes(), p, why);
}

// Writes `bytes` as a trace file and reads it back the way the commands do.
Loaded write_and_load(const std::string& path, const std::vector<uint8_t>& bytes) {
  FILE* f = fopen(path.c_str(), "wb");
  if (f) {
    fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
  }
  return load({path});
}
}  // namespace

TEST(Reader, DecodesHeaderAndRecords) {
  TraceBuilder b;
  build_npugraph_scenario(b);
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  EXPECT_EQ(p.pid, 4242);
  EXPECT_EQ(p.ppid, 1);
  EXPECT_EQ(p.argv, (std::vector<std::string>{"python3", "app.py"}));
  EXPECT_EQ(p.python_build, "static");
  EXPECT_EQ(p.cwd, "/work/app");
  EXPECT_EQ(p.start_monotonic_ns, 5000000000ull);
  ASSERT_EQ(p.env.size(), 1u);
  EXPECT_EQ(p.env[0].first, "PYTHONPATH");
  EXPECT_EQ(p.schema_major, fields::kSchemaMajor);
  EXPECT_TRUE(p.warnings.empty());
  EXPECT_FALSE(p.truncated);

  ASSERT_EQ(p.imports.size(), 5u);
  // Sorted into start order although written in end order.
  for (size_t i = 0; i < p.imports.size(); ++i) EXPECT_EQ(p.imports[i].index, i);
  EXPECT_EQ(p.imports[0].name, "torch_npu");
  EXPECT_EQ(p.imports[0].parent_pos, -1);
  EXPECT_EQ(p.imports[1].parent_pos, 0);
  EXPECT_EQ(p.imports[2].parent_pos, 1);
  EXPECT_EQ(p.imports[3].parent_pos, 0);
  EXPECT_EQ(p.imports[2].end_ns, 3500u);
  EXPECT_TRUE(p.imports[2].object.present);
  EXPECT_EQ(p.imports[2].object.id, 0x200u);
  EXPECT_TRUE(p.imports[2].object.is_plain_module());
  // Absent spec_name / file default to name / origin.
  EXPECT_EQ(p.imports[2].spec_name, "npugraph_ex");
  EXPECT_EQ(p.imports[2].file, p.imports[2].origin);
  EXPECT_EQ(p.imports[0].search_locations, (std::vector<std::string>{"/x/site-packages/torch_npu"}));
  EXPECT_EQ(p.imports[0].importer.file, "/work/app/test_smoke.py");
  EXPECT_EQ(p.imports[0].importer.line, 3u);
  EXPECT_FALSE(p.imports[3].ok);
  EXPECT_FALSE(p.imports[3].object.present);
  EXPECT_EQ(p.imports[3].error_text(), "ModuleNotFoundError: No module named 'torch_npu._missing'");
  EXPECT_EQ(p.imports[4].test, kTestId);

  ASSERT_EQ(p.modules_changes.size(), 2u);
  EXPECT_TRUE(p.modules_changes[0].by_import_system);
  EXPECT_FALSE(p.modules_changes[1].by_import_system);
  EXPECT_TRUE(p.modules_changes[1].new_object.is_proxy());
  EXPECT_EQ(p.modules_changes[1].new_object.type, "torch_npu.dynamo._LazyNpuGraphEx");
  ASSERT_EQ(p.modules_changes[1].stack.size(), 2u);
  EXPECT_EQ(p.modules_changes[1].stack[0].function, "add_dynamo_methods");

  ASSERT_EQ(p.bindings.size(), 1u);
  EXPECT_EQ(p.bindings[0].status, model::BindingStatus::OnProxy);
  EXPECT_EQ(p.bindings[0].child_module(), "npugraph_ex.npu_fx_compiler");
  ASSERT_EQ(p.proxy_accesses.size(), 1u);
  EXPECT_EQ(p.proxy_accesses[0].outcome(),
            "AttributeError: module 'torch_npu.dynamo.npugraph_ex' has no attribute 'npu_fx_compiler'");
  EXPECT_EQ(p.proxy_accesses[0].forwarded_to.name, "torch_npu.dynamo.npugraph_ex");
  ASSERT_EQ(p.proxy_classes.size(), 1u);
  EXPECT_EQ(p.proxy_classes[0].getattr_at.line, 50u);
  ASSERT_EQ(p.sys_paths.size(), 1u);
  EXPECT_EQ(p.sys_paths[0].entries, (std::vector<std::string>{"/work/app", kSite, ""}));
  ASSERT_EQ(p.notes.size(), 1u);
}

// Repeats the tracer counted are added to the access they repeat, summary by summary; a
// count naming no access in the file is a warning, never an access of its own.
TEST(Reader, RepeatCountsJoinTheirAccess) {
  TraceBuilder b;
  AccessSpec a;
  a.proxy = Obj{7, "lazy.Proxy", 4, "lazy", ""};
  a.attribute = "value";
  a.stack = {Loc{"/w/loop.py", 8, "reads"}};
  a.serial = 3;
  b.add_proxy_access(a);
  a.serial = 0;  // a failed one: never counted
  a.ok = false;
  a.error_type = "AttributeError";
  b.add_proxy_access(a);
  b.add_proxy_access_summary(3, 1000);
  b.add_proxy_access_summary(3, 24);
  b.add_proxy_access_summary(9, 5);
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  ASSERT_EQ(p.proxy_accesses.size(), 2u);
  EXPECT_EQ(p.proxy_accesses[0].serial, 3u);
  EXPECT_EQ(p.proxy_accesses[0].repeats, 1024u);
  EXPECT_EQ(p.proxy_accesses[1].repeats, 0u);
  ASSERT_EQ(p.warnings.size(), 1u);
  EXPECT_NE(p.warnings[0].find("5 counted proxy access repeats"), std::string::npos) << p.warnings[0];
}

TEST(Reader, UnpackedRepeatedFieldsToo) {
  TraceBuilder b;
  auto im = ImportSpec::make(0, "pkg", 1, 2);
  im.search_locations = {"/a", "/b"};
  im.packed_search_locations = false;
  b.add_import(im);
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  EXPECT_EQ(p.imports.at(0).search_locations, (std::vector<std::string>{"/a", "/b"}));
}

TEST(Reader, UnknownFieldsAndRecordKindsAreSkipped) {
  TraceBuilder b;
  // A record of an unknown kind (field 77) and a known record carrying unknown fields of
  // every wire type.
  b.add_raw_record({0xea, 0x04, 0x02, 0x08, 0x01});  // field 77 LEN {field1: 1}
  uint32_t name = b.add_string("mod");
  std::vector<uint8_t> import_body = {
      0x30, static_cast<uint8_t>(name),           // name
      0x38, 0x01,                                 // ok
      0xa0, 0x06, 0x05,                           // field 100 VARINT
      0xa9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8,         // field 101 I64
      0xb5, 0x06, 1, 2, 3, 4,                     // field 102 I32
      0xba, 0x06, 0x02, 0xaa, 0xbb,               // field 103 LEN
  };
  std::vector<uint8_t> record = {0x1a, static_cast<uint8_t>(import_body.size())};
  record.insert(record.end(), import_body.begin(), import_body.end());
  b.add_raw_record(record);
  // And an unknown top-level field between records.
  b.add_raw_bytes({0x10, 0x05});
  b.add_import(ImportSpec::make(1, "after", 10, 1));
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  ASSERT_EQ(p.imports.size(), 2u);
  EXPECT_EQ(p.imports[0].name, "mod");
  EXPECT_TRUE(p.imports[0].ok);
  EXPECT_EQ(p.imports[1].name, "after");
  EXPECT_TRUE(p.warnings.empty());
}

TEST(Reader, RefusesNewerSchemaMajor) {
  HeaderSpec h;
  h.schema_major = fields::kSchemaMajor + 1;
  std::string why;
  EXPECT_FALSE(parses_with(h, why));
  EXPECT_NE(why.find("newer"), std::string::npos) << why;
}

TEST(Reader, AcceptsNewerMinor) {
  HeaderSpec h;
  h.schema_minor = fields::kSchemaMinor + 5;
  std::string why;
  EXPECT_TRUE(parses_with(h, why)) << why;
}

TEST(Reader, RejectsEmptyAndForeignInput) {
  model::Process p;
  std::string why;
  EXPECT_FALSE(reader::parse_trace(nullptr, 0, p, why));
  EXPECT_EQ(why, "empty file");
  std::string text = "#!/usr/bin/env python3\nprint('hello')\n";
  EXPECT_FALSE(reader::parse_trace(reinterpret_cast<const uint8_t*>(text.data()), text.size(), p, why));
  EXPECT_NE(why.find("not an imptrace trace"), std::string::npos) << why;
  // A valid protobuf framing whose first record is not a header.
  TraceBuilder no_header(false);
  no_header.add_string("x");
  EXPECT_FALSE(parse(no_header.bytes(), p, why));
  EXPECT_NE(why.find("header"), std::string::npos) << why;
}

TEST(Reader, AbsurdLengthIsNotAllocated) {
  TraceBuilder b;
  // Record field with a 2^62-byte length prefix.
  b.add_raw_bytes({0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x3f});
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  EXPECT_EQ(p.warnings.size(), 1u);
}

TEST(Reader, TruncationAtEveryOffsetReadsAPrefix) {
  TraceBuilder b;
  build_npugraph_scenario(b);
  const auto bytes = b.bytes();
  const auto& ends = b.record_ends();
  model::Process full;
  std::string why;
  ASSERT_TRUE(parse(bytes, full, why));
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + cut);
    model::Process p;
    std::string w;
    bool ok = parse(prefix, p, w);
    if (cut < ends[0]) {
      EXPECT_FALSE(ok) << "cut " << cut;  // not even the header
      EXPECT_FALSE(w.empty());
      continue;
    }
    ASSERT_TRUE(ok) << "cut " << cut << ": " << w;
    bool at_boundary = std::find(ends.begin(), ends.end(), cut) != ends.end();
    EXPECT_EQ(p.truncated, !at_boundary) << "cut " << cut;
    EXPECT_EQ(p.warnings.size(), at_boundary ? 0u : 1u) << "cut " << cut;
    // Whatever was read is a prefix of the full trace.
    EXPECT_LE(p.imports.size(), full.imports.size());
    EXPECT_LE(p.modules_changes.size(), full.modules_changes.size());
    for (size_t i = 0; i < p.modules_changes.size(); ++i)
      EXPECT_EQ(p.modules_changes[i].key, full.modules_changes[i].key);
  }
}

TEST(Reader, RandomBytesAndBitFlipsNeverCrash) {
  TraceBuilder b;
  build_npugraph_scenario(b);
  const auto bytes = b.bytes();
  std::mt19937_64 rng(12345);
  // Every single-bit flip.
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      auto copy = bytes;
      copy[i] ^= static_cast<uint8_t>(1u << bit);
      model::Process p;
      std::string why;
      if (!parse(copy, p, why)) { EXPECT_FALSE(why.empty()); }
    }
  // Random multi-byte corruption.
  for (int round = 0; round < 2000; ++round) {
    auto copy = bytes;
    int n = 1 + static_cast<int>(rng() % 8);
    for (int k = 0; k < n; ++k) copy[rng() % copy.size()] = static_cast<uint8_t>(rng());
    model::Process p;
    std::string why;
    if (!parse(copy, p, why)) { EXPECT_FALSE(why.empty()); }
  }
  // Pure noise, with and without a plausible first byte.
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> noise(rng() % 512);
    for (auto& c : noise) c = static_cast<uint8_t>(rng());
    if (!noise.empty() && round % 2) noise[0] = 0x0a;
    model::Process p;
    std::string why;
    if (!parse(noise, p, why)) { EXPECT_FALSE(why.empty()); }
  }
}

TEST(Reader, DeepNestingInUnknownFieldsIsHarmless) {
  // 10000 nested LEN fields inside an unknown record field: skipped without recursion.
  std::vector<uint8_t> inner;
  for (int i = 0; i < 10000; ++i) {
    std::vector<uint8_t> wrapped = {0x0a};
    wire::ByteBuf len;
    wire::put_varint(len, inner.size());
    wrapped.insert(wrapped.end(), len.p, len.p + len.n);
    wrapped.insert(wrapped.end(), inner.begin(), inner.end());
    inner.swap(wrapped);
  }
  TraceBuilder b;
  std::vector<uint8_t> rec = {0xfa, 0x05};  // field 95 LEN
  wire::ByteBuf len;
  wire::put_varint(len, inner.size());
  rec.insert(rec.end(), len.p, len.p + len.n);
  rec.insert(rec.end(), inner.begin(), inner.end());
  b.add_raw_record(rec);
  model::Process p;
  std::string why;
  EXPECT_TRUE(parse(b.bytes(), p, why)) << why;
}

TEST(Reader, UndefinedStringIdsWarn) {
  TraceBuilder b;
  std::vector<uint8_t> import_body = {0x30, 0x7f};  // name = id 127, never defined
  std::vector<uint8_t> record = {0x1a, static_cast<uint8_t>(import_body.size())};
  record.insert(record.end(), import_body.begin(), import_body.end());
  b.add_raw_record(record);
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  ASSERT_EQ(p.imports.size(), 1u);
  EXPECT_EQ(p.imports[0].name, "");
  EXPECT_EQ(p.warnings.size(), 1u);
}

TEST(Reader, FilesAndDirectories) {
  std::string dir = fresh_dir("reader_dir");
  TraceBuilder a;
  build_npugraph_scenario(a);
  HeaderSpec h2;
  h2.pid = 4343;
  TraceBuilder c(true, h2);
  c.add_import(ImportSpec::make(0, "json", 5, 10));
  ASSERT_TRUE(a.write_file(dir + "/imptrace.python3.4242.pb"));
  ASSERT_TRUE(c.write_file(dir + "/imptrace.python3.4343.pb"));
  ASSERT_TRUE(TraceBuilder(false).write_file(dir + "/imptrace.python3.9999.pb"));  // empty
  FILE* f = fopen((dir + "/notes.txt").c_str(), "w");
  fputs("not a trace", f);
  fclose(f);

  Loaded run = load({dir});
  ASSERT_TRUE(run.ok) << run.error;
  ASSERT_EQ(run.procs.size(), 2u);
  EXPECT_EQ(run.procs[0].pid, 4242);
  EXPECT_EQ(run.procs[1].pid, 4343);
  EXPECT_EQ(run.warnings.size(), 1u);  // the empty file, skipped

  // Named one by one, a file that is no trace, is missing or is empty is an error, and so
  // is a directory without trace files.
  std::string empty_dir = fresh_dir("reader_empty_dir");
  const std::pair<std::string, std::string> errors[] = {
      {dir + "/missing.pb", "No such file"},
      {dir + "/imptrace.python3.9999.pb", "empty file"},
      {empty_dir, "no trace files"}};
  Loaded notes = load({dir + "/notes.txt"});
  EXPECT_FALSE(notes.ok);
  EXPECT_EQ(notes.error.rfind(dir + "/notes.txt: ", 0), 0u) << notes.error;
  for (const auto& [path, error] : errors) {
    Loaded l = load({path});
    EXPECT_FALSE(l.ok) << path;
    EXPECT_NE(l.error.find(error), std::string::npos) << l.error;
  }
}

TEST(Reader, TruncatedFileOnDiskWarns) {
  std::string dir = fresh_dir("reader_trunc");
  TraceBuilder b;
  build_npugraph_scenario(b);
  auto bytes = b.bytes();
  bytes.resize(bytes.size() - 3);
  Loaded l = write_and_load(dir + "/cut.pb", bytes);
  ASSERT_TRUE(l.ok) << l.error;
  ASSERT_EQ(l.warnings.size(), 1u);
  EXPECT_NE(l.warnings[0].find("truncated"), std::string::npos) << l.warnings[0];
  EXPECT_TRUE(l.procs[0].truncated);
}

// The tracer reserves file space ahead of its records as one `Trace.unwritten` field
// (a 6-byte header with a padded length, then zeros); a process that never reaches exit()
// leaves it at the end, and a process killed while growing the file leaves it cut short.
std::vector<uint8_t> reserve_field(uint64_t payload) {
  std::vector<uint8_t> r = {static_cast<uint8_t>((15 << 3) | 2)};
  for (int i = 0; i < 5; ++i)
    r.push_back(static_cast<uint8_t>(((payload >> (7 * i)) & 0x7f) | (i < 4 ? 0x80 : 0)));
  r.resize(r.size() + payload, 0);
  return r;
}

TEST(Reader, ReserveOfAnUnfinishedFileIsSkipped) {
  TraceBuilder b;
  build_npugraph_scenario(b);
  const auto clean = b.bytes();
  model::Process full;
  std::string why;
  ASSERT_TRUE(parse(clean, full, why));

  auto with = [&](std::vector<uint8_t> tail) {
    std::vector<uint8_t> v = clean;
    v.insert(v.end(), tail.begin(), tail.end());
    return v;
  };
  auto big = reserve_field(300000);  // larger than the file reader's buffer would take whole
  auto two = reserve_field(100);
  auto second = reserve_field(5000);
  two.insert(two.end(), second.begin(), second.end());
  auto cut = reserve_field(5000);
  cut.resize(2000);
  std::string dir = fresh_dir("reader_reserve");
  int n = 0;
  for (const auto& bytes : {with(big), with(two), with(cut), with(reserve_field(0))}) {
    model::Process p;
    ASSERT_TRUE(parse(bytes, p, why)) << why;
    EXPECT_EQ(p.imports.size(), full.imports.size());
    EXPECT_EQ(p.bindings.size(), full.bindings.size());
    EXPECT_FALSE(p.truncated);
    EXPECT_TRUE(p.warnings.empty()) << p.warnings[0];
    // The same through a file (the streaming source skips with a seek).
    Loaded l = write_and_load(dir + "/t" + std::to_string(n++) + ".pb", bytes);
    ASSERT_TRUE(l.ok) << l.error;
    ASSERT_EQ(l.procs.size(), 1u);
    EXPECT_EQ(l.procs[0].imports.size(), full.imports.size());
    EXPECT_TRUE(l.warnings.empty()) << l.warnings[0];
  }
  // A process that died before its header was committed: an empty trace.
  model::Process p;
  EXPECT_FALSE(parse(reserve_field(16000), p, why));
  EXPECT_EQ(why, "empty file");
}

TEST(Reader, InterpreterLifetimes) {
  TraceBuilder b;
  b.add_lifetime_begin(1, 100, fields::LifetimeBegin::SUBINTERPRETERS_FROM_C);
  b.add_import(ImportSpec::make(0, "csv", 150, 10));
  b.add_lifetime_end(1, 200);
  b.add_lifetime_begin(2, 300, fields::LifetimeBegin::LATER_LIFETIMES);
  b.add_import(ImportSpec::make(1, "csv", 350, 10));
  b.add_lifetime_end(7, 400);  // names no lifetime begun last: ignored
  b.add_lifetime_begin(3, 500);
  b.add_lifetime_end(3, 600, true);
  model::Process p;
  std::string why;
  ASSERT_TRUE(parse(b.bytes(), p, why)) << why;
  ASSERT_EQ(p.lifetimes.size(), 3u);
  EXPECT_TRUE(p.several_lifetimes());
  EXPECT_EQ(p.lifetimes[0].number, 1u);
  EXPECT_TRUE(p.lifetimes[0].ended);
  EXPECT_EQ(p.lifetimes[0].begin_ns, 100u);
  EXPECT_EQ(p.lifetimes[0].end_ns, 200u);
  EXPECT_TRUE(p.lifetimes[0].subinterpreters_from_c_unseen);
  EXPECT_FALSE(p.lifetimes[0].end_unseen);
  EXPECT_FALSE(p.lifetimes[1].ended);
  EXPECT_TRUE(p.lifetimes[1].end_unseen);
  EXPECT_TRUE(p.lifetimes[2].ended);
  EXPECT_TRUE(p.lifetimes[2].next_unseen);
  EXPECT_EQ(p.lifetime_at(150), 1u);
  EXPECT_EQ(p.lifetime_at(350), 2u);
  EXPECT_EQ(p.lifetime_at(550), 3u);
  EXPECT_EQ(p.lifetime_at(50), 1u);  // before the first begin record: the first lifetime
  model::Process none;
  EXPECT_EQ(none.lifetime_at(50), 0u);
}
