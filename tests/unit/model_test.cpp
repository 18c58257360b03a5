// Model helpers: the contract's path relativization and identity tokens.
#include <gtest/gtest.h>

#include "model.h"

using imptrace::model::relativize_path;

TEST(Relativize, LongestSysPathEntryWins) {
  std::vector<std::string> roots{"/x", "/x/site-packages", "/x/site-packages/torch_npu/extra"};
  EXPECT_EQ(relativize_path("/x/site-packages/torch_npu/dynamo/__init__.py", roots),
            "torch_npu/dynamo/__init__.py");
  EXPECT_EQ(relativize_path("/x/other/a.py", roots), "other/a.py");
}

TEST(Relativize, OnlyAtDirectoryBoundaries) {
  std::vector<std::string> roots{"/x/site"};
  EXPECT_EQ(relativize_path("/x/site-packages/a.py", roots), "/x/site-packages/a.py");
  EXPECT_EQ(relativize_path("/x/site/a.py", roots), "a.py");
  EXPECT_EQ(relativize_path("/x/site", roots), "/x/site");
}

TEST(Relativize, TrailingSlashesAndPseudoFiles) {
  std::vector<std::string> roots{"/usr/lib/python3.11/", "", "python311.zip"};
  EXPECT_EQ(relativize_path("/usr/lib/python3.11/json/__init__.py", roots), "json/__init__.py");
  EXPECT_EQ(relativize_path("<frozen importlib._bootstrap>", roots), "<frozen importlib._bootstrap>");
  EXPECT_EQ(relativize_path("/elsewhere/a.py", roots), "/elsewhere/a.py");
  EXPECT_EQ(relativize_path("", roots), "");
}

TEST(Relativize, ProcessUsesAllSnapshotsAndCwdForEmptyEntry) {
  imptrace::model::Process p;
  p.cwd = "/work/app";
  p.sys_paths.push_back({{"", "/a"}, 0});
  p.sys_paths.push_back({{"/b/site-packages"}, 5});
  EXPECT_EQ(p.relativize("/work/app/test_x.py"), "test_x.py");
  EXPECT_EQ(p.relativize("/b/site-packages/pkg/m.py"), "pkg/m.py");
  EXPECT_EQ(p.relativize("/a/m.py"), "m.py");
  imptrace::model::Location loc{"/a/q.py", 3, "f"};
  EXPECT_EQ(p.relative(loc).file, "q.py");
  EXPECT_EQ(p.relative(loc).line, 3u);
}

TEST(ObjectToken, EqualIffSameId) {
  imptrace::model::ObjectRef a, b, c, absent;
  a.present = b.present = c.present = true;
  a.id = b.id = 0x7f12ab34;
  c.id = 0x7f12ab35;
  EXPECT_EQ(object_token(a), object_token(b));
  EXPECT_NE(object_token(a), object_token(c));
  EXPECT_EQ(object_token(absent), "");
  EXPECT_EQ(object_token(a).rfind("obj:", 0), 0u);
}
