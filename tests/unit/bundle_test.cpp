// The bundle format (bundle.h: gzip and tar, reading and writing, refusals) and the
// redaction mapping (redact.h: strings, whole outputs, traces re-encoded).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <string>
#include <vector>

#include "bundle.h"
#include "commands.h"
#include "redact.h"
#include "test_outcomes.h"
#include "trace_builder.h"
#include "trace_reader.h"

namespace imptrace {
namespace {

using testing::HeaderSpec;
using testing::ImportSpec;
using testing::TraceBuilder;

std::string temp_path(const char* name) {
  return std::string(IMPTRACE_TEST_TMPDIR) + "/" + name + "." + std::to_string(getpid());
}

std::vector<uint8_t> gzip(const std::vector<uint8_t>& raw) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::vector<uint8_t> out(deflateBound(&z, raw.size()) + 64);
  z.next_in = const_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// A ustar header block for `name` of `size` bytes and type `type`, checksummed.
std::vector<uint8_t> tar_header(const std::string& name, uint64_t size, char type = '0',
                                const std::string& link = "") {
  std::vector<uint8_t> h(512, 0);
  memcpy(h.data(), name.data(), std::min<size_t>(name.size(), 100));
  snprintf(reinterpret_cast<char*>(&h[100]), 8, "%07o", 0644);
  snprintf(reinterpret_cast<char*>(&h[124]), 12, "%011llo", static_cast<unsigned long long>(size));
  h[156] = static_cast<uint8_t>(type);
  memcpy(&h[157], link.data(), std::min<size_t>(link.size(), 100));
  memcpy(&h[257], "ustar", 6);
  memcpy(&h[263], "00", 2);
  memset(&h[148], ' ', 8);
  unsigned sum = 0;
  for (uint8_t b : h) sum += b;
  snprintf(reinterpret_cast<char*>(&h[148]), 8, "%06o", sum);
  return h;
}

std::vector<uint8_t> tar_of(const std::string& name, const std::vector<uint8_t>& data, char type = '0',
                            const std::string& link = "") {
  std::vector<uint8_t> t = tar_header(name, type == '0' ? data.size() : 0, type, link);
  if (type == '0') {
    t.insert(t.end(), data.begin(), data.end());
    t.resize((t.size() + 511) / 512 * 512, 0);
  }
  t.resize(t.size() + 1024, 0);
  return t;
}

std::vector<uint8_t> small_trace(const std::string& cwd = "/work/app") {
  HeaderSpec h;
  h.cwd = cwd;
  TraceBuilder b(true, h);
  auto im = ImportSpec::make(0, "json", 100, 200);
  im.origin = "/usr/lib/python3.11/json/__init__.py";
  b.add_import(im);
  return b.bytes();
}

// Reads a bundle from memory; returns the members or the refusal.
struct ReadResult {
  bool ok;
  std::string why;
  std::vector<bundle::Member> members;
};
ReadResult read_gz(const std::vector<uint8_t>& gz) {
  ReadResult r;
  r.ok = bundle::read_memory(gz.data(), gz.size(), [&](bundle::Member& m, std::string&) {
    r.members.push_back(m);
    return true;
  }, r.why);
  return r;
}

TEST(Bundle, WriterAndReaderRoundTrip) {
  std::string path = temp_path("roundtrip.tar.gz");
  auto t1 = small_trace(), t2 = small_trace("/other");
  std::string long_dir(120, 'd');
  {
    bundle::Writer w;
    std::string why;
    ASSERT_TRUE(w.open(path, why)) << why;
    const std::string manifest = "{}";
    ASSERT_TRUE(w.add("manifest.json", reinterpret_cast<const uint8_t*>(manifest.data()), manifest.size(), why));
    ASSERT_TRUE(w.add("good/a.pb", t1.data(), t1.size(), why)) << why;
    ASSERT_TRUE(w.add(long_dir + "/b.pb", t2.data(), t2.size(), why)) << why;  // ustar prefix field
    EXPECT_FALSE(w.add("../evil.pb", t2.data(), t2.size(), why));
    ASSERT_TRUE(w.finish(why)) << why;
    EXPECT_GT(w.compressed_bytes(), 0u);
  }
  std::vector<bundle::Member> got;
  std::string why;
  ASSERT_TRUE(bundle::read_file(path, [&](bundle::Member& m, std::string&) {
    got.push_back(m);
    return true;
  }, why)) << why;
  ASSERT_EQ(got.size(), 2u);  // the manifest is not a trace
  EXPECT_EQ(got[0].run, "good");
  EXPECT_EQ(got[0].name, "good/a.pb");
  EXPECT_EQ(got[0].bytes, t1);
  EXPECT_EQ(got[1].run, long_dir);
  EXPECT_EQ(got[1].bytes, t2);

  // Every command's loader reads it, and BUNDLE#RUN picks a run.
  std::vector<model::Process> procs;
  std::vector<std::string> warnings;
  ASSERT_TRUE(reader::load_traces({path}, procs, why, warnings)) << why;
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs[0].source_file, path + "#good/a.pb");
  EXPECT_EQ(reader::bundle_run_of(procs[0].source_file), "good");
  procs.clear();
  EXPECT_FALSE(reader::load_run(path, procs, why, warnings));
  EXPECT_NE(why.find("2 runs"), std::string::npos) << why;
  ASSERT_TRUE(reader::load_run(path + "#good", procs, why, warnings)) << why;
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].cwd, "/work/app");
  EXPECT_FALSE(reader::load_traces({path + "#nope"}, procs, why, warnings));
  EXPECT_NE(why.find("no run named 'nope'"), std::string::npos) << why;
  unlink(path.c_str());
}

TEST(Bundle, CompressedTraceAndNestedGz) {
  auto t = small_trace();
  ReadResult plain = read_gz(gzip(t));
  ASSERT_TRUE(plain.ok) << plain.why;
  ASSERT_EQ(plain.members.size(), 1u);
  EXPECT_EQ(plain.members[0].run, "");
  EXPECT_EQ(plain.members[0].bytes, t);
  ReadResult nested = read_gz(gzip(tar_of("run/x.pb.gz", gzip(t))));
  ASSERT_TRUE(nested.ok) << nested.why;
  ASSERT_EQ(nested.members.size(), 1u);
  EXPECT_EQ(nested.members[0].bytes, t);
  // Two gzip members one after the other are one stream (as gzip -c a b > c makes).
  auto half1 = std::vector<uint8_t>(t.begin(), t.begin() + t.size() / 2);
  auto half2 = std::vector<uint8_t>(t.begin() + t.size() / 2, t.end());
  auto cat = gzip(half1), g2 = gzip(half2);
  cat.insert(cat.end(), g2.begin(), g2.end());
  ReadResult joined = read_gz(cat);
  ASSERT_TRUE(joined.ok) << joined.why;
  EXPECT_EQ(joined.members[0].bytes, t);
}

TEST(Bundle, RefusesHostileArchives) {
  auto t = small_trace();
  auto refused = [](const std::vector<uint8_t>& gz, const char* expect) {
    ReadResult r = read_gz(gz);
    EXPECT_FALSE(r.ok) << expect;
    EXPECT_NE(r.why.find(expect), std::string::npos) << r.why;
    EXPECT_EQ(r.why.find('\n'), std::string::npos) << r.why;
  };
  refused(gzip(tar_of("../x.pb", t)), "unsafe path");
  refused(gzip(tar_of("run/../../x.pb", t)), "unsafe path");
  refused(gzip(tar_of("/etc/x.pb", t)), "unsafe path");
  refused(gzip(tar_of("run/x.pb", {}, '2', "/etc/passwd")), "is a link");
  refused(gzip(tar_of("run/x.pb", {}, '1', "run/y.pb")), "is a link");
  refused(gzip(tar_of("run/x.pb", {}, '6')), "not a regular file");
  auto huge = tar_header("run/x.pb", (8ull << 30) - 1);  // the largest 11-digit octal size
  refused(gzip(huge), "declares 7 GiB");
  auto bad_sum = tar_of("run/x.pb", t);
  bad_sum[148] = '7';
  refused(gzip(bad_sum), "checksum");
  auto cut = gzip(tar_of("run/x.pb", t));
  cut.resize(cut.size() / 2);
  refused(cut, "gzip");
  auto corrupt = gzip(tar_of("run/x.pb", t));
  for (size_t i = 20; i < 60 && i < corrupt.size(); ++i) corrupt[i] ^= 0x5a;
  ReadResult r = read_gz(corrupt);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.why.empty());
  EXPECT_FALSE(bundle::safe_member_path(""));
  EXPECT_TRUE(bundle::safe_member_path("run/a..b.pb"));
}

TEST(Bundle, RefusesAZipBombWithoutInflatingIt) {
  std::vector<uint8_t> zeros(120u << 20, 0);
  auto bomb = gzip(zeros);
  zeros = {};
  std::vector<uint8_t> out;
  std::string why;
  EXPECT_FALSE(bundle::gunzip(bomb.data(), bomb.size(), out, why));
  EXPECT_NE(why.find("zip bomb"), std::string::npos) << why;
  EXPECT_LE(out.capacity(), 128u << 20);  // stopped past 64 MiB, far below the 1 GiB limit
}

const char* kJunit =
    "<?xml version=\"1.0\" encoding=\"utf-8\"?><testsuites><testsuite name=\"pytest\" hostname=\"box\">"
    "<testcase classname=\"tests.a_test\" name=\"test_one\" time=\"0.1\" />"
    "<testcase classname=\"tests.a_test\" name=\"test_two\" time=\"0.1\">"
    "<failure message=\"AssertionError: /home/alice/proj/x.py &quot;bad&quot;\">"
    "/home/alice/proj/x.py:3: in test_two &lt;here&gt;</failure></testcase></testsuite></testsuites>";

TEST(Bundle, JunitMembersGoWithTheirRun) {
  std::string path = temp_path("junit.tar.gz");
  auto t = small_trace();
  std::string junit = kJunit;
  {
    bundle::Writer w;
    std::string why;
    ASSERT_TRUE(w.open(path, why)) << why;
    ASSERT_TRUE(w.add("bad/a.pb", t.data(), t.size(), why)) << why;
    ASSERT_TRUE(w.add("bad/junit.xml", reinterpret_cast<const uint8_t*>(junit.data()), junit.size(), why));
    ASSERT_TRUE(w.add("bad/deeper/other.xml", reinterpret_cast<const uint8_t*>(junit.data()), junit.size(), why));
    ASSERT_TRUE(w.add("good/a.pb", t.data(), t.size(), why)) << why;
    ASSERT_TRUE(w.finish(why)) << why;
  }
  std::vector<bundle::Member> traces, xml;
  std::string why;
  ASSERT_TRUE(bundle::read_file(path, [&](bundle::Member& m, std::string&) {
    traces.push_back(m);
    return true;
  }, why, [&](bundle::Member& m, std::string&) {
    xml.push_back(m);
    return true;
  })) << why;
  EXPECT_EQ(traces.size(), 2u);
  ASSERT_EQ(xml.size(), 1u);  // only what is directly in a run's directory, as from a directory
  EXPECT_EQ(xml[0].run, "bad");
  EXPECT_EQ(std::string(xml[0].bytes.begin(), xml[0].bytes.end()), junit);

  // The many-run diff's outcomes: from the packed XML for BUNDLE#RUN, else the exit status.
  std::vector<model::Process> procs;
  std::vector<std::string> warnings;
  ASSERT_TRUE(reader::load_run(path + "#bad", procs, why, warnings)) << why;
  outcomes::RunOutcome bad = outcomes::outcome_of(path + "#bad", procs, warnings);
  EXPECT_EQ(bad.source, outcomes::RunOutcome::Source::Junit);
  EXPECT_TRUE(bad.failed);
  EXPECT_EQ(bad.text, "1 failed, 1 passed (junit.xml)");
  ASSERT_EQ(bad.first_failing, 1);
  EXPECT_EQ(bad.tests[1].key, "tests.a_test::test_two");
  outcomes::RunOutcome good = outcomes::outcome_of(path + "#good", procs, warnings);
  EXPECT_NE(good.source, outcomes::RunOutcome::Source::Junit);
  unlink(path.c_str());

  // A junit member larger than a junit file may be: one line, from the reader and from
  // outcome_of (InputError: exit status 2).
  auto big = tar_header("bad/junit.xml", bundle::kMaxJunitBytes + 1);
  big.resize(big.size() + 1024, 0);
  auto gz = gzip(big);
  bool ok = bundle::read_memory(gz.data(), gz.size(), [](bundle::Member&, std::string&) { return true; }, why,
                                [](bundle::Member&, std::string&) { return true; });
  EXPECT_FALSE(ok);
  EXPECT_NE(why.find("for junit XML"), std::string::npos) << why;
  ReadResult traces_only = read_gz(gz);  // refused by every reader, not only the outcomes'
  EXPECT_FALSE(traces_only.ok);
  EXPECT_NE(traces_only.why.find("for junit XML"), std::string::npos) << traces_only.why;
  FILE* f = fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  fwrite(gz.data(), 1, gz.size(), f);
  fclose(f);
  try {
    outcomes::outcome_of(path + "#bad", procs, warnings);
    ADD_FAILURE() << "an oversized junit member was read";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("for junit XML"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
  }
  unlink(path.c_str());
}

// ---- redaction ------------------------------------------------------------------------

// Each text as `r` redacts it.
void expect_redacted(redact::Redactor& r, std::initializer_list<std::pair<const char*, const char*>> cases) {
  for (const auto& [text, redacted] : cases) EXPECT_EQ(r.apply(text), redacted) << text;
}

TEST(Redact, PathsAndNamesGetStablePlaceholders) {
  redact::Redactor r;
  r.learn("/home/alice/venv/bin/python");
  r.add_host("buildbox7.example.com");
  expect_redacted(r, {
      {"/home/alice/venv/lib/python3.11/site-packages/torch/__init__.py", "<site-packages>/torch/__init__.py"},
      {"/usr/lib/python3/dist-packages/yaml/__init__.py", "<site-packages>/yaml/__init__.py"},
      {"/usr/lib/python3.11/json/__init__.py", "<python>/json/__init__.py"},
      {"/root/.pyenv/versions/3.12.1/lib/python3.12/os.py", "<python>/os.py"},
      {"/home/alice/proj/tests/a.py", "~/proj/tests/a.py"},
      {"/tmp/x/home/alice/proj", "~/proj"},
      {"/Users/alice", "~"},
      {"/root/.pyenv/versions/3.12.1/bin/python", "~/.pyenv/versions/3.12.1/bin/python"},
      {"/usr/bin/python3", "/usr/bin/python3"},
      // User and host names outside home paths, as whole words only.
      {"/usr/share/pytest-of-alice/x.py", "/usr/share/pytest-of-<user>/x.py"},
      {"malice and alice@buildbox7", "malice and <user>@<host>"},
      {"buildbox7.example.com", "<host>"},
      // Paths inside text, JSON and markup; the same value the same way every time.
      {"error in /home/alice/a.py:12 (\"/home/alice/b.py\")", "error in ~/a.py:12 (\"~/b.py\")"},
      {"PYTHONPATH=/home/alice/x:/usr/lib/python3.11", "PYTHONPATH=~/x:<python>"},
      {"<td>/home/alice/a.py</td>", "<td>~/a.py</td>"},
      {"\x1b[1;31m/home/alice/a.py\x1b[0m", "\x1b[1;31m~/a.py\x1b[0m"},
      {"torch_npu/dynamo/__init__.py", "torch_npu/dynamo/__init__.py"},
      {"<frozen importlib._bootstrap>", "<frozen importlib._bootstrap>"}
  });
  std::string once = r.apply("/home/alice/venv/lib/python3.11/site-packages/a.py /home/alice/b");
  EXPECT_EQ(r.apply(once), once);  // idempotent
  redact::Redactor html(true);
  html.add_user("bob");
  EXPECT_EQ(html.apply("/opt/x/site-packages/a.py by bob"), "&lt;site-packages&gt;/a.py by &lt;user&gt;");
  // Generic account names keep their words (their homes are still ~).
  redact::Redactor g;
  g.learn("/home/runner/work");
  EXPECT_EQ(g.apply("test runner in /home/runner/work"), "test runner in ~/work");
  g.add_host("debian");
  EXPECT_TRUE(g.hosts().empty());
}

TEST(Redact, PathsOutsideHomesHideTheirDirectories) {
  redact::Redactor r;
  r.add_cwd("/srv/acme/ws/");
  r.add_root("/opt/vendor/lib");
  EXPECT_EQ(r.apply("/srv/acme/ws/tests/test_a.py:3"), "<cwd>/tests/test_a.py:3");
  EXPECT_EQ(r.apply("/srv/acme/ws"), "<cwd>");
  EXPECT_EQ(r.apply("/srv/acme/wsx/a.py"), r.apply("/srv/acme/wsx/b.py").substr(0, 12) + "/a.py");
  // Under a sys.path entry: the entry hidden, the package path kept.
  std::string pkg = r.apply("/opt/vendor/lib/npugraph_ex/__init__.py");
  EXPECT_EQ(pkg.substr(0, 5), "<dir-");
  EXPECT_EQ(pkg.substr(pkg.find('>')), ">/npugraph_ex/__init__.py");
  EXPECT_EQ(r.apply("/opt/vendor/lib/six.py"), pkg.substr(0, pkg.find('>') + 1) + "/six.py");
  // Anywhere else: the file's directory hidden, the same directory the same way.
  std::string job = r.apply("/tmp/job-1234/x.py");
  EXPECT_NE(job.find("x.py"), std::string::npos);
  EXPECT_EQ(job.find("job-1234"), std::string::npos);
  EXPECT_EQ(r.apply("/tmp/job-1234/y.py"), job.substr(0, job.size() - 4) + "y.py");
  EXPECT_NE(r.apply("/tmp/job-5678/x.py"), job);
  // The system's trees, short paths, URLs and text that only looks like a path are kept.
  expect_redacted(r, {
      {"/usr/lib/x86_64-linux-gnu/libz.so.1", "/usr/lib/x86_64-linux-gnu/libz.so.1"},
      {"/proc/self/exe", "/proc/self/exe"},
      {"/tmp", "/tmp"},
      {"see https://github.com/x/y", "see https://github.com/x/y"},
      {"bad 3/3, good 0/3", "bad 3/3, good 0/3"}
  });
  std::string once = r.apply("/tmp/job-1234/x.py and /opt/vendor/lib/a.py");
  EXPECT_EQ(r.apply(once), once);  // idempotent
}

TEST(Redact, HomeFromEnvironmentAndMachine) {
  redact::Redactor r;
  r.add_home("/var/lib/jenkins/");
  EXPECT_EQ(r.apply("/var/lib/jenkins/ws/a.py"), "~/ws/a.py");
  EXPECT_EQ(r.apply("/var/lib/jenkinsx/a.py"), "/var/lib/jenkinsx/a.py");
  model::Process p;
  p.argv = {"python", "/home/carol/app.py"};
  p.env = {{"VIRTUAL_ENV", "/srv/dave/venv"}};
  r.learn_process(p);
  EXPECT_EQ(r.users().count("carol"), 1u);
  EXPECT_EQ(r.apply("carol's run"), "<user>'s run");
}

TEST(Redact, TraceReencodedStaysValidAndSaysTheSame) {
  HeaderSpec h;
  h.argv = {"python", "-m", "pytest", "/home/alice/proj/tests"};
  h.executable = "/home/alice/.pyenv/versions/3.11.9/bin/python3.11";
  h.cwd = "/home/alice/proj";
  h.env = {{"PYTHONPATH", "/home/alice/proj/src"}, {"VIRTUAL_ENV", "/home/alice/venv"}};
  TraceBuilder b(true, h);
  b.add_sys_path({"/home/alice/proj", "/home/alice/venv/lib/python3.11/site-packages", ""}, 10);
  auto im = ImportSpec::make(0, "torch_npu", 100, 200);
  im.origin = "/home/alice/venv/lib/python3.11/site-packages/torch_npu/__init__.py";
  im.importer = testing::Loc{"/home/alice/proj/tests/test_a.py", 3, "<module>"};
  b.add_import(im);
  b.add_note("could not hook /home/alice/proj/x.so");
  // A string defined through a prefix (schema minor 1): "/home/alice/proj" + "/b.py".
  {
    wire::ByteBuf rec;
    auto m = wire::begin_message(rec, fields::Record::string_def);
    wire::put_uint(rec, fields::StringDef::id, 900);
    wire::put_bytes(rec, fields::StringDef::value, "/home/alice/proj", 16);
    wire::end_message(rec, m);
    b.add_raw_record(std::vector<uint8_t>(rec.p, rec.p + rec.n));
    wire::ByteBuf rec2;
    m = wire::begin_message(rec2, fields::Record::string_def);
    wire::put_uint(rec2, fields::StringDef::id, 901);
    wire::put_bytes(rec2, fields::StringDef::value, "/b.py", 5);
    wire::put_uint(rec2, fields::StringDef::prefix, 900);
    wire::end_message(rec2, m);
    b.add_raw_record(std::vector<uint8_t>(rec2.p, rec2.p + rec2.n));
  }
  auto raw = b.bytes();
  std::vector<uint8_t> zeros(4096, 0);  // a reserve tail: dropped
  raw.push_back(0x7a);                  // Trace.unwritten (field 15, LEN)
  raw.push_back(0x80);
  raw.push_back(0x20);
  raw.insert(raw.end(), zeros.begin(), zeros.end());

  redact::Redactor r;
  redact::learn_trace(raw.data(), raw.size(), r);
  EXPECT_EQ(r.users().count("alice"), 1u);
  std::vector<uint8_t> clean;
  std::string why;
  ASSERT_TRUE(redact::redact_trace(raw.data(), raw.size(), r, clean, why)) << why;
  std::string text(clean.begin(), clean.end());
  EXPECT_EQ(text.find("alice"), std::string::npos);
  EXPECT_EQ(text.find("/home"), std::string::npos);
  EXPECT_LT(clean.size(), raw.size());

  model::Process before, after;
  ASSERT_TRUE(reader::parse_trace(raw.data(), raw.size(), before, why)) << why;
  ASSERT_TRUE(reader::parse_trace(clean.data(), clean.size(), after, why)) << why;
  EXPECT_TRUE(after.warnings.empty()) << after.warnings[0];
  EXPECT_EQ(after.argv, (std::vector<std::string>{"python", "-m", "pytest", "~/proj/tests"}));
  EXPECT_EQ(after.executable, "~/.pyenv/versions/3.11.9/bin/python3.11");
  EXPECT_EQ(after.cwd, "~/proj");
  EXPECT_EQ(after.env[1].second, "~/venv");
  ASSERT_EQ(after.imports.size(), 1u);
  EXPECT_EQ(after.imports[0].origin.str(), "<site-packages>/torch_npu/__init__.py");
  // Locations compare as they did: relative to the (redacted) sys.path entries.
  EXPECT_EQ(after.relativize(after.imports[0].origin), before.relativize(before.imports[0].origin));
  EXPECT_EQ(after.relative(after.imports[0].importer).file.str(), "tests/test_a.py");
  ASSERT_EQ(after.notes.size(), 1u);
  EXPECT_EQ(after.notes[0].text, "could not hook ~/proj/x.so");

  // Not a trace: refused with a reason.
  std::vector<uint8_t> junk{0x0a, 0x02, 0x10, 0x01};
  EXPECT_FALSE(redact::redact_trace(junk.data(), junk.size(), r, clean, why));
}

TEST(Redact, WholeOutputLearnsFromTheRuns) {
  model::Process p;
  p.cwd = "/home/erin/proj";
  std::vector<model::Process> run{p};
  std::string out = redact::redact_output("cwd /home/erin/proj, tmp /tmp/pytest-of-erin/x\n", {&run}, false);
  EXPECT_EQ(out.substr(0, 20), "cwd ~/proj, tmp <dir");
  EXPECT_EQ(out.find("erin"), std::string::npos);
  EXPECT_EQ(redact::redact_output("by erin\n", {&run}, false), "by <user>\n");
}

TEST(Redact, JunitXmlStaysWellFormed) {
  redact::Redactor r;
  r.learn(kJunit);
  r.add_host("box");
  std::string out = redact::redact_xml(kJunit, r);
  EXPECT_EQ(out.find("alice"), std::string::npos) << out;
  EXPECT_EQ(out.find("\"box\""), std::string::npos) << out;
  EXPECT_NE(out.find("hostname=\"&lt;host&gt;\""), std::string::npos) << out;
  EXPECT_NE(out.find("~/proj/x.py &quot;bad&quot;"), std::string::npos) << out;  // entities kept as entities
  EXPECT_NE(out.find("~/proj/x.py:3: in test_two &lt;here&gt;"), std::string::npos) << out;
  // Markup is untouched and the tests read the same.
  std::vector<outcomes::TestCase> before, after;
  ASSERT_TRUE(outcomes::parse_junit(kJunit, before));
  ASSERT_TRUE(outcomes::parse_junit(out, after));
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(before[i].key, after[i].key);
    EXPECT_EQ(before[i].failed, after[i].failed);
  }
  // Placeholders never open markup, in text, attributes, CDATA or comments; references
  // survive; a section's end mark is never made by redaction.
  std::string odd = "<a x='/home/alice/f&#10;g'><![CDATA[/home/alice/y <raw>]]><!-- /home/alice/z -->&#x263A;</a>";
  std::string o2 = redact::redact_xml(odd, r);
  EXPECT_EQ(o2, "<a x=\"~/f&#10;g\"><![CDATA[~/y <raw>]]><!-- ~/z -->\xe2\x98\xba</a>") << o2;
}

}  // namespace
}  // namespace imptrace
