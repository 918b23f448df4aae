// distributedInfo of a Kineto trace (src/trace/reader.cpp): a rank or world size that is there is
// used or refused. A negative rank, a world size below 1, a rank not below the world size, or either
// not a whole number is an error naming the file; absent (or null) is fine, and a trace without
// distributedInfo at all reads as before.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "emo/trace/trace.h"

namespace emo::trace {
namespace {

std::string trace_with(const std::string& distributed_info) {
  std::string s = "{";
  if (!distributed_info.empty()) s += R"("distributedInfo":)" + distributed_info + ",";
  return s + R"("traceEvents":[{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]})";
}

// The error message of reading `distributed_info`, or "(ok)".
std::string message_of(const std::string& distributed_info) {
  auto r = parse_trace(trace_with(distributed_info), "t.json");
  return r ? std::string("(ok)") : r.error().message();
}

TEST(TraceDistributedInfo, ValidRankAndWorldSizeAreRead) {
  auto r = parse_trace(trace_with(R"({"backend":"nccl","rank":1,"world_size":2})"), "t.json");
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_EQ(r->rank, 1);
  EXPECT_EQ(r->world_size, 2);
  for (const char* ok : {R"({"rank":0,"world_size":1})", R"({"rank":7,"world_size":8})", R"({"rank":3})",
                         R"({"world_size":4})", R"({"rank":null,"world_size":null})",
                         R"({"rank":"2","world_size":"4"})", R"({"backend":"nccl"})", ""}) {
    EXPECT_EQ(message_of(ok), "(ok)") << ok;
  }
}

TEST(TraceDistributedInfo, RankNotBelowWorldSizeIsAnErrorNamingTheFile) {
  auto r = parse_trace(trace_with(R"({"backend":"nccl","rank":5,"world_size":2})"), "t.json");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().where, "t.json:distributedInfo");
  EXPECT_EQ(r.error().message(), "t.json:distributedInfo: rank 5 is not below world_size 2");
  EXPECT_NE(r.error().note.find("0 to world_size - 1"), std::string::npos) << r.error().note;
  // The order of the keys does not matter.
  EXPECT_EQ(message_of(R"({"world_size":2,"rank":2})"),
            "t.json:distributedInfo: rank 2 is not below world_size 2");
}

TEST(TraceDistributedInfo, OutOfRangeOrNonIntegerValuesAreErrors) {
  EXPECT_EQ(message_of(R"({"rank":-1,"world_size":2})"),
            "t.json:distributedInfo: rank: must be a whole number >= 0, got -1");
  EXPECT_EQ(message_of(R"({"rank":0,"world_size":0})"),
            "t.json:distributedInfo: world_size: must be a whole number >= 1, got 0");
  EXPECT_EQ(message_of(R"({"rank":0,"world_size":-4})"),
            "t.json:distributedInfo: world_size: must be a whole number >= 1, got -4");
  EXPECT_EQ(message_of(R"({"rank":1.5,"world_size":4})"),
            "t.json:distributedInfo: rank: must be a whole number >= 0, got 1.5");
  EXPECT_EQ(message_of(R"({"rank":"first"})"),
            "t.json:distributedInfo: rank: must be a whole number >= 0, got \"first\"");
  EXPECT_EQ(message_of(R"({"rank":[0]})"),
            "t.json:distributedInfo: rank: must be a whole number >= 0, got an array");
  EXPECT_EQ(message_of(R"({"world_size":{"n":2}})"),
            "t.json:distributedInfo: world_size: must be a whole number >= 1, got an object");
  EXPECT_EQ(message_of(R"({"world_size":99999999999})"),
            "t.json:distributedInfo: world_size: must be a whole number >= 1, got 99999999999");
}

TEST(TraceDistributedInfo, TheFileIsNamedWhenReadFromDisk) {
  std::string path = ::testing::TempDir() + "/emo_distributed_info_rank5.json";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::string text = trace_with(R"({"rank":5,"world_size":2})");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  auto r = read_trace(path);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), path + ":distributedInfo: rank 5 is not below world_size 2");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace emo::trace
