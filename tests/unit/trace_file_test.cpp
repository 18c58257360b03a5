// The tracer's trace file and record encoder without an interpreter: records made with
// tracer/record_encoder.* and written by tracer/trace_writer.* are read back with the
// viewer's reader.
//
// - Round trip: every field the encoder writes comes back as the reader reports it
//   (including what the encoder leaves out for the reader to fill in).
// - Commit protocol: the file as it stands after each committed batch (reserve and all)
//   is a valid trace holding exactly the batches committed so far.
// - Cut at every byte: each prefix of the finished file is read up to its last whole
//   record: never an error once the header is whole, never a record that was not written,
//   and never fewer imports for a longer prefix.
//
// The writer is one per process (it is the process's trace file), so one fixture writes
// the file once and every test reads it.
#include <gtest/gtest.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "lazy_stories.h"
#include "record_encoder.h"
#include "records.h"
#include "trace_reader.h"
#include "trace_writer.h"

namespace imptrace {
namespace {

using namespace fields;

constexpr int kBatches = 120;

std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

std::string import_name(int i) { return "pkg" + std::to_string(i % 7) + ".mod" + std::to_string(i); }

uint32_t intern(const std::string& s) { return TraceWriter::intern(s.data(), s.size()); }

// Batch i: one import (failed every 9th), a sys.modules change every 4th, a binding every
// 3rd, as the import hook would commit them.
void write_batch(int i) {
  WriterLock lock;
  std::string name = import_name(i);
  ImportRecord rec;
  rec.index = static_cast<uint64_t>(i);
  rec.parent = i % 5 ? static_cast<uint64_t>(i) : 0;  // the previous import, or none
  rec.thread = i % 2 ? 4242 : 0;
  rec.begin_ns = 1000u * static_cast<uint64_t>(i);
  rec.end_ns = rec.begin_ns + 17 + static_cast<uint64_t>(i);
  rec.name = intern(name);
  rec.ok = i % 9 != 0;
  uint8_t frames[2 * kNativeFrameBytes];
  if (rec.ok) {
    rec.object.id = 100 + static_cast<uint64_t>(i);
    rec.object.flags = i % 6 ? ObjectFlags::plain_module : ObjectFlags::proxy;
    if (!(rec.object.flags & ObjectFlags::plain_module)) rec.object.type = intern("lazy.Proxy");
    rec.object.name = i % 8 ? rec.name : intern("other.name");
    rec.object.file = intern("/src/" + name + ".py");
    rec.spec_read = true;
    rec.spec.present = true;
    rec.spec.name = i % 10 ? rec.name : intern("spec.name");
    rec.spec.origin = i % 11 ? rec.object.file : intern("/elsewhere.py");
    rec.spec.loader = intern("SourceFileLoader");
    if (i % 3 == 0) {
      rec.spec.search_locations[rec.spec.search_location_count++] = intern("/src/a");
      rec.spec.search_locations[rec.spec.search_location_count++] = intern("/src/b");
    }
  } else {
    rec.error_type = intern("ModuleNotFoundError");
    rec.error_message = intern("No module named '" + name + "'");
  }
  rec.importer = CodeLocation{intern("/app/main.py"), static_cast<uint32_t>(i + 1), intern("<module>"), false};
  if (i % 7 == 0) rec.trigger = CodeLocation{intern("/app/use.py"), static_cast<uint32_t>(i + 2), intern("f"), false};
  rec.test = i % 4 ? intern("tests/test_x.py::test_" + std::to_string(i)) : 0;
  rec.interpreter = i % 13 == 0 ? 3 : 0;
  if (i % 5 == 0) {
    size_t n = encode_native_frame(NativeFrameValue{intern("/usr/lib/libpython.so"), intern("PyImport_Import"), 0x1234}, frames);
    n += encode_native_frame(NativeFrameValue{intern("/usr/bin/python3"), 0, 0x42}, frames + n);
    rec.native_stack = frames;
    rec.native_stack_bytes = n;
  }
  encode_import(rec);

  if (i % 4 == 0) {
    ObjectDescription old_value{7, 0, ObjectFlags::plain_module, intern("old"), intern("/old.py")};
    ObjectDescription new_value{8, intern("lazy.Proxy"), ObjectFlags::proxy, 0, 0};
    CodeLocation stack[2] = {{intern("/app/a.py"), 10, intern("f"), false}, {intern("/app/b.py"), 20, intern("g"), false}};
    ModulesChangeRecord c;
    c.key = intern("key" + std::to_string(i));
    c.op = i % 8 ? ModulesChange::SET : ModulesChange::DELETE;
    c.old_value = &old_value;
    c.new_value = c.op == ModulesChange::SET ? &new_value : nullptr;
    c.precision = ModulesChange::AT_BOUNDARY;
    c.by_import_system = i % 8 != 0;
    c.stack = stack;
    c.stack_depth = 2;
    c.context = RecordContext{5000u + static_cast<uint64_t>(i), 77, intern("tests/t.py::c"), static_cast<uint64_t>(i) + 1};
    encode_modules_change(c);
  }
  if (i % 3 == 0 && rec.ok) {
    ObjectDescription value{9, intern("int"), ObjectFlags::proxy, 0, 0};
    BindingRecord b;
    b.import_index = rec.index;
    b.bound_on = ObjectDescription{55, 0, ObjectFlags::plain_module | ObjectFlags::elided_name_file, 0, 0};
    b.status = i % 2 ? Binding::MISMATCH : Binding::BOUND;
    if (b.status == Binding::MISMATCH) b.attribute_value = &value;
    encode_binding(b);
  }
  if (i % 10 == 0) {  // a lazy binding (3.15) declared, every other one resolved at first use
    CodeLocation at{intern("/app/lazy.py"), static_cast<uint32_t>(i + 3), intern("<module>"), false};
    LazyBindingRecord d;
    d.declared = true;
    d.module = intern("app.lazy");
    d.name = intern("n" + std::to_string(i));
    d.target = intern("pkg.t" + std::to_string(i));
    d.at = &at;
    d.context = RecordContext{6000u + static_cast<uint64_t>(i), i % 20 ? 4242u : 0u, intern("tests/t.py::decl"), 0};
    encode_lazy_binding(d);
    if (i % 20 == 0) {
      CodeLocation use{intern("/app/use.py"), static_cast<uint32_t>(i + 4), intern("use"), false};
      ObjectDescription o{300u + static_cast<uint64_t>(i), 0, ObjectFlags::plain_module, d.target, 0};
      LazyBindingRecord r;
      r.module = d.module;
      r.name = d.name;
      r.object = &o;
      r.at = &use;
      r.context = RecordContext{6001u + static_cast<uint64_t>(i), 0, intern("tests/t.py::use"), static_cast<uint64_t>(i) + 1};
      encode_lazy_binding(r);
    }
  }
  TraceWriter::flush();
}

class TraceFile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(std::string(IMPTRACE_TEST_TMPDIR) + "/trace_file_test." + std::to_string(getpid()) + ".pb");
    unlink(path_->c_str());
    setenv("IMPTRACE_OUTPUT", path_->c_str(), 1);
    TraceWriter::init("3.99.0 (test)", "static");
    commits_ = new std::vector<std::vector<uint8_t>>;
    for (int i = 0; i < kBatches; ++i) {
      write_batch(i);
      commits_->push_back(file_bytes(*path_));
    }
    {
      WriterLock lock;
      TraceWriter::finish();  // the reserve given back: the file ends at its last record
    }
    final_ = new std::vector<uint8_t>(file_bytes(*path_));
  }
  static void TearDownTestSuite() { unlink(path_->c_str()); }

  static std::string* path_;
  static std::vector<std::vector<uint8_t>>* commits_;
  static std::vector<uint8_t>* final_;
};
std::string* TraceFile::path_;
std::vector<std::vector<uint8_t>>* TraceFile::commits_;
std::vector<uint8_t>* TraceFile::final_;

model::Process parse(const std::vector<uint8_t>& data, size_t n) {
  model::Process p;
  std::string why;
  EXPECT_TRUE(reader::parse_trace(data.data(), n, p, why)) << why << " (" << n << " bytes)";
  return p;
}

TEST_F(TraceFile, EncodedRecordsReadBackFieldByField) {
  model::Process p = parse(*final_, final_->size());
  EXPECT_FALSE(p.truncated);
  EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
  EXPECT_EQ(p.python_version, "3.99.0 (test)");
  EXPECT_EQ(p.python_build, "static");
  EXPECT_EQ(p.pid, getpid());
  ASSERT_EQ(p.imports.size(), static_cast<size_t>(kBatches));
  size_t changes = 0, bindings = 0;
  for (int i = 0; i < kBatches; ++i) {
    SCOPED_TRACE(i);
    const model::Import& im = p.imports[static_cast<size_t>(i)];
    std::string name = import_name(i);
    EXPECT_EQ(im.index, static_cast<uint64_t>(i));
    EXPECT_EQ(im.parent_index, i % 5 ? static_cast<uint64_t>(i) : 0u);
    EXPECT_EQ(im.thread, i % 2 ? 4242u : static_cast<uint64_t>(getpid()));  // absent: the main thread
    EXPECT_EQ(im.begin_ns, 1000u * static_cast<uint64_t>(i));
    EXPECT_EQ(im.duration_ns(), 17u + static_cast<uint64_t>(i));
    EXPECT_EQ(im.name, name);
    EXPECT_EQ(im.ok, i % 9 != 0);
    EXPECT_EQ(im.importer.file, "/app/main.py");
    EXPECT_EQ(im.importer.line, static_cast<uint32_t>(i + 1));
    EXPECT_EQ(im.importer.function, "<module>");
    EXPECT_EQ(im.trigger.file, i % 7 == 0 ? "/app/use.py" : "");
    EXPECT_EQ(im.trigger.line, i % 7 == 0 ? static_cast<uint32_t>(i + 2) : 0u);
    EXPECT_EQ(im.test, i % 4 ? "tests/test_x.py::test_" + std::to_string(i) : std::string());
    EXPECT_EQ(im.interpreter, i % 13 == 0 ? 3u : 0u);
    if (i % 5 == 0) {
      ASSERT_EQ(im.native_stack.size(), 2u);
      EXPECT_EQ(im.native_stack[0].object, "/usr/lib/libpython.so");
      EXPECT_EQ(im.native_stack[0].symbol, "PyImport_Import");
      EXPECT_EQ(im.native_stack[0].offset, 0x1234u);
      EXPECT_EQ(im.native_stack[1].object, "/usr/bin/python3");
      EXPECT_EQ(im.native_stack[1].symbol, "");
      EXPECT_EQ(im.native_stack[1].offset, 0x42u);
    } else {
      EXPECT_TRUE(im.native_stack.empty());
    }
    if (!im.ok) {
      EXPECT_EQ(im.error_type, "ModuleNotFoundError");
      EXPECT_EQ(im.error_message, "No module named '" + name + "'");
      EXPECT_FALSE(im.object.present);
      continue;
    }
    std::string file = "/src/" + name + ".py";
    EXPECT_EQ(im.spec_name, i % 10 ? name : std::string("spec.name"));
    EXPECT_EQ(im.origin, i % 11 ? file : std::string("/elsewhere.py"));
    EXPECT_EQ(im.loader, "SourceFileLoader");
    EXPECT_EQ(im.file, file);
    if (i % 3 == 0) {
      ASSERT_EQ(im.search_locations.size(), 2u);
      EXPECT_EQ(im.search_locations[0], "/src/a");
      EXPECT_EQ(im.search_locations[1], "/src/b");
    } else {
      EXPECT_TRUE(im.search_locations.empty());
    }
    ASSERT_TRUE(im.object.present);
    EXPECT_EQ(im.object.id, 100u + static_cast<uint64_t>(i));
    EXPECT_EQ(im.object.flags, i % 6 ? ObjectFlags::plain_module : ObjectFlags::proxy);
    EXPECT_EQ(im.object.type, i % 6 ? "module" : "lazy.Proxy");
    EXPECT_EQ(im.object.name, i % 8 ? name : std::string("other.name"));
    EXPECT_EQ(im.object.file, file);
  }
  for (int i = 0; i < kBatches; i += 4) {
    SCOPED_TRACE(i);
    ASSERT_LT(changes, p.modules_changes.size());
    const model::ModulesChange& c = p.modules_changes[changes++];
    EXPECT_EQ(c.key, "key" + std::to_string(i));
    bool set = i % 8 != 0;
    EXPECT_EQ(c.op, set ? model::ChangeOp::Set : model::ChangeOp::Delete);
    EXPECT_EQ(c.precision, model::Precision::AtBoundary);
    ASSERT_TRUE(c.old_object.present);
    EXPECT_EQ(c.old_object.id, 7u);
    EXPECT_EQ(c.old_object.name, "old");
    EXPECT_EQ(c.old_object.file, "/old.py");
    EXPECT_EQ(c.new_object.present, set);
    if (set) {
      EXPECT_EQ(c.new_object.id, 8u);
      EXPECT_EQ(c.new_object.type, "lazy.Proxy");
      EXPECT_TRUE(c.new_object.is_proxy());
    }
    ASSERT_EQ(c.stack.size(), 2u);
    EXPECT_EQ(c.stack[1].file, "/app/b.py");
    EXPECT_EQ(c.stack[1].line, 20u);
    EXPECT_EQ(c.stack[1].function, "g");
    EXPECT_EQ(c.time_ns, 5000u + static_cast<uint64_t>(i));
    EXPECT_EQ(c.thread, 77u);
    EXPECT_EQ(c.test, "tests/t.py::c");
    EXPECT_EQ(c.during_import, static_cast<uint64_t>(i) + 1);
    EXPECT_EQ(c.by_import_system, set);
  }
  EXPECT_EQ(changes, p.modules_changes.size());
  for (int i = 0; i < kBatches; i += 3) {
    if (i % 9 == 0) continue;  // a failed import has no binding
    SCOPED_TRACE(i);
    ASSERT_LT(bindings, p.bindings.size());
    const model::Binding& b = p.bindings[bindings++];
    std::string name = import_name(i);
    EXPECT_EQ(b.import_index, static_cast<uint64_t>(i));
    EXPECT_EQ(b.parent, name.substr(0, name.rfind('.')));
    EXPECT_EQ(b.attribute, name.substr(name.rfind('.') + 1));
    EXPECT_EQ(b.bound_on.id, 55u);
    EXPECT_EQ(b.bound_on.name, b.parent);  // elided: the parent's name
    EXPECT_EQ(b.child.id, 100u + static_cast<uint64_t>(i));  // left out: the import's object
    EXPECT_EQ(b.time_ns, p.imports[static_cast<size_t>(i)].end_ns);
    bool mismatch = i % 2 != 0;
    EXPECT_EQ(b.status, mismatch ? model::BindingStatus::Mismatch : model::BindingStatus::Bound);
    EXPECT_EQ(b.attribute_value.present, mismatch);
    if (mismatch) {
      EXPECT_EQ(b.attribute_value.type, "int");
    }
  }
  EXPECT_EQ(bindings, p.bindings.size());
}

TEST_F(TraceFile, LazyBindingsReadBackAndPairWithTheirFirstUse) {
  model::Process p = parse(*final_, final_->size());
  ASSERT_EQ(p.lazy_declared.size(), static_cast<size_t>(kBatches / 10));
  ASSERT_EQ(p.lazy_resolved.size(), static_cast<size_t>(kBatches / 20));
  const auto stories = model::lazy_stories(p);
  ASSERT_EQ(stories.size(), p.lazy_declared.size());
  for (size_t k = 0; k < stories.size(); ++k) {
    int i = static_cast<int>(k) * 10;
    SCOPED_TRACE(i);
    const model::LazyDeclared& d = *stories[k].declared;
    EXPECT_EQ(d.module, "app.lazy");
    EXPECT_EQ(d.name, "n" + std::to_string(i));
    EXPECT_EQ(d.target, "pkg.t" + std::to_string(i));
    EXPECT_EQ(d.declared_at.file, "/app/lazy.py");
    EXPECT_EQ(d.declared_at.line, static_cast<uint32_t>(i + 3));
    EXPECT_EQ(d.test, "tests/t.py::decl");
    EXPECT_EQ(d.time_ns, 6000u + static_cast<uint64_t>(i));
    EXPECT_EQ(d.thread, i % 20 ? 4242u : 0u);
    EXPECT_EQ(stories[k].failed, nullptr);  // the batches' failed imports are other names
    if (i % 20) {
      EXPECT_TRUE(stories[k].never_used());
      continue;
    }
    ASSERT_NE(stories[k].resolved, nullptr);
    const model::LazyResolved& r = *stories[k].resolved;
    EXPECT_EQ(r.used_at.file, "/app/use.py");
    EXPECT_EQ(r.used_at.line, static_cast<uint32_t>(i + 4));
    EXPECT_EQ(r.used_at.function, "use");
    EXPECT_EQ(r.test, "tests/t.py::use");
    EXPECT_EQ(r.during_import, static_cast<uint64_t>(i) + 1);
    EXPECT_EQ(r.object.id, 300u + static_cast<uint64_t>(i));
    EXPECT_TRUE(r.object.is_plain_module());
  }
}

TEST_F(TraceFile, EveryCommittedStateIsAValidTraceOfTheBatchesSoFar) {
  ASSERT_EQ(commits_->size(), static_cast<size_t>(kBatches));
  for (int i = 0; i < kBatches; ++i) {
    SCOPED_TRACE(i);
    const std::vector<uint8_t>& state = (*commits_)[static_cast<size_t>(i)];
    model::Process p = parse(state, state.size());
    EXPECT_FALSE(p.truncated);
    EXPECT_TRUE(p.warnings.empty()) << p.warnings.front();
    ASSERT_EQ(p.imports.size(), static_cast<size_t>(i + 1));
    EXPECT_EQ(p.imports.back().name, import_name(i));
  }
  // The reserve ahead of the records was given back at the end.
  EXPECT_LT(final_->size(), commits_->back().size());
}

TEST_F(TraceFile, EveryPrefixReadsUpToItsLastWholeRecord) {
  const std::vector<uint8_t>& data = *final_;
  size_t header_end = 0;  // the shortest prefix that reads
  size_t last_imports = 0;
  size_t cut_mid_record = 0;  // prefixes the reader said were cut inside a record
  for (size_t n = 0; n <= data.size(); ++n) {
    model::Process p;
    std::string why;
    bool ok = reader::parse_trace(data.data(), n, p, why);
    if (!ok) {
      // Only a prefix that does not hold the whole header may fail.
      ASSERT_EQ(header_end, 0u) << n << ": " << why;
      continue;
    }
    if (!header_end) header_end = n;
    ASSERT_GE(p.imports.size(), last_imports) << n;
    ASSERT_LE(p.imports.size(), static_cast<size_t>(kBatches)) << n;
    for (size_t i = 0; i < p.imports.size(); ++i) ASSERT_EQ(p.imports[i].name, import_name(static_cast<int>(i))) << n;
    if (n == data.size()) {
      EXPECT_FALSE(p.truncated);
    }
    if (p.truncated) ++cut_mid_record;
    last_imports = p.imports.size();
  }
  EXPECT_GT(cut_mid_record, 0u);
  EXPECT_GT(header_end, 0u);
  EXPECT_EQ(last_imports, static_cast<size_t>(kBatches));
}

}  // namespace
}  // namespace imptrace
