// Default step choice when the trace ends inside a step that launched nothing.
#include <gtest/gtest.h>

#include "emo/trace/trace.h"
#include "trace_json.h"

namespace emo {
namespace {

TEST(TraceStep, TrailingStepThatLaunchedNothingIsNotTheDefault) {
  // Step 1 launches a kernel; step 2 is only its own marker (the profiler stopped).
  std::string json = test::TraceJson()
                         .step(1, 0, 100)
                         .launch("K", 7, 10, 20, 30, 1)
                         .step(2, 100, 5)
                         .str();
  auto t = trace::parse_trace(json, "stub.json");
  ASSERT_TRUE(t.ok()) << t.error().message();
  auto s = trace::select_step(*t, std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value(), 1);
}

TEST(TraceStep, CpuOnlyStepsStillHaveALastStep) {
  std::string json = test::TraceJson().step(1, 0, 100).cpu("a", 10, 5).step(2, 100, 50).cpu("b", 110, 5).str();
  auto t = trace::parse_trace(json, "cpu.json");
  ASSERT_TRUE(t.ok());
  auto s = trace::select_step(*t, std::nullopt);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value(), 2);
}

}  // namespace
}  // namespace emo
