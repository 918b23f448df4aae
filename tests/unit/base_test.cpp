// StringTable and AtomicFile behaviour.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "emo/base/file_util.h"
#include "emo/base/strings.h"
#include "test_util.h"

namespace emo {
namespace {

TEST(StringTable, InterningIsStableAndDense) {
  StringTable t;
  StrId a = t.intern("aten::mm");
  StrId b = t.intern("aten::add");
  EXPECT_NE(a, b);
  EXPECT_EQ(t.intern("aten::mm"), a);
  EXPECT_EQ(t.view(a), "aten::mm");
  EXPECT_EQ(t.view(kEmptyStr), "");
  for (int i = 0; i < 10000; ++i) t.intern("k" + std::to_string(i));
  EXPECT_EQ(t.view(a), "aten::mm");  // views survive growth
  bool found = true;
  t.find("never", &found);
  EXPECT_FALSE(found);
}

TEST(AtomicFile, UncommittedWriteLeavesNoFile) {
  std::string dir = test::temp_dir("atomic");
  std::string path = dir + "/out.json";
  {
    AtomicFile f;
    ASSERT_TRUE(f.open(path).ok());
    ASSERT_TRUE(f.write("{\"partial\":").ok());
  }  // destroyed without commit, as on an error path
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  ASSERT_TRUE(write_file_atomic(path, "{}").ok());
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(s, "{}");
}

TEST(AtomicFile, UnwritableDirectoryIsAnError) {
  Status s = write_file_atomic("/nonexistent-dir/x.json", "{}");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().what.find("cannot write"), std::string::npos);
}

}  // namespace
}  // namespace emo
