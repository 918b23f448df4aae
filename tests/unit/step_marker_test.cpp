// Steps found in kernel launches (emo/runtime/step_marker.h) and the policy's step_start it reads.
#include "emo/runtime/step_marker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "emo/optimize/optimize.h"
#include "synth_workload.h"

namespace emo::runtime {
namespace {

using V = StepMarker::Verdict;

// A step: a(7), b(9), a(7), c(7): start kernel a on stream 7, twice per step, 4 launches.
StepStart abac() { return StepStart{"a", 7, 2, 4, 0}; }
std::vector<V> play(StepMarker& m, const std::vector<std::pair<const char*, int>>& launches) {
  std::vector<V> out;
  for (const auto& [n, s] : launches) out.push_back(m.on_launch(n, s));
  return out;
}
const std::vector<std::pair<const char*, int>> kStep = {{"a", 7}, {"b", 9}, {"a", 7}, {"c", 7}};

TEST(StepMarker, SyncsAfterAWholeStepPassingWarmUpOver) {
  StepMarker m(abac());
  // Warm-up: the start kernel among others, never a whole step of the policy's shape.
  for (auto v : play(m, {{"a", 7}, {"probe", 7}, {"probe", 7}, {"a", 7}, {"probe", 7}, {"a", 7}})) EXPECT_EQ(v, V::kNone);
  EXPECT_FALSE(m.synced());
  // The first regular step is not anchored (nothing behind it to check) ...
  for (auto v : play(m, kStep)) EXPECT_EQ(v, V::kNone);
  // ... the second is, at its first launch, and every later one.
  for (int s = 0; s < 5; ++s) {
    auto v = play(m, kStep);
    EXPECT_EQ(v[0], V::kStep) << "step " << s;
    EXPECT_TRUE(std::all_of(v.begin() + 1, v.end(), [](V x) { return x == V::kNone; }));
  }
  EXPECT_TRUE(m.synced());
  EXPECT_EQ(m.steps(), 5);
  EXPECT_FALSE(m.lost());
}

TEST(StepMarker, TheStartKernelOnAnotherStreamIsAnotherKernel) {
  StepMarker m(abac());
  // a on stream 9 is not the start kernel: it counts as a launch only.
  const std::vector<std::pair<const char*, int>> step = {{"a", 7}, {"a", 9}, {"a", 7}, {"c", 7}};
  StepMarker wrong({"a", 7, 2, 3, 0});  // three launches per step would need a(9) not counted at all
  for (int s = 0; s < 4; ++s) {
    play(m, step);
    play(wrong, step);
  }
  EXPECT_EQ(m.steps(), 3);
  EXPECT_FALSE(wrong.synced());
  StepMarker any({"a", -1, 3, 4, 0});  // stream -1: any stream, three launches of a per step
  for (int s = 0; s < 4; ++s) play(any, step);
  EXPECT_EQ(any.steps(), 3);
}

TEST(StepMarker, AStepWithMoreOrFewerKernelsLosesItForGood) {
  for (bool more : {true, false}) {
    StepMarker m(abac());
    for (int s = 0; s < 3; ++s) play(m, kStep);
    ASSERT_EQ(m.steps(), 2);
    const std::vector<std::pair<const char*, int>> changed =
        more ? std::vector<std::pair<const char*, int>>{{"a", 7}, {"b", 9}, {"x", 7}, {"a", 7}, {"c", 7}}
             : std::vector<std::pair<const char*, int>>{{"a", 7}, {"a", 7}};
    auto v = play(m, changed);
    if (!more) v.push_back(m.on_launch("a", 7));  // the next step's start shows the short one
    EXPECT_NE(std::find(v.begin(), v.end(), V::kLost), v.end()) << more;
    EXPECT_TRUE(m.lost());
    EXPECT_NE(m.lost_reason().find("the policy's"), std::string::npos) << m.lost_reason();
    for (int s = 0; s < 3; ++s)
      for (auto x : play(m, kStep)) EXPECT_EQ(x, V::kNone);  // never again
  }
}

TEST(StepMarker, StepStartIsReadFromThePolicyAndCheckedByName) {
  auto doc = [](const std::string& start) {
    return R"({"schema": "emo-policy/1", "ranks": [{"rank": 0}, {"rank": 1, "step_start": )" + start + "}]}";
  };
  auto ok = step_start_from_policy(doc(R"({"name": "k", "stream": 7, "per_step": 2, "kernel_launches": 9, "offset_us": 3.5})"), 1, "p.json");
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  EXPECT_EQ(ok->name, "k");
  EXPECT_EQ(ok->stream, 7);
  EXPECT_EQ(ok->per_step, 2u);
  EXPECT_EQ(ok->kernel_launches, 9u);
  EXPECT_DOUBLE_EQ(ok->offset_us, 3.5);
  const std::vector<std::tuple<std::string, int, std::string>> bad = {
      {doc(R"({"name": "k", "per_step": 1, "kernel_launches": 1})"), 0, "ranks[0]: has no step_start"},
      {doc(R"({"name": "k", "per_step": 1, "kernel_launches": 1})"), 2, "has no rank 2"},
      {doc(R"({"name": "", "per_step": 1, "kernel_launches": 1})"), 1, "name"},
      {doc(R"({"name": "k", "per_step": 0, "kernel_launches": 1})"), 1, "per_step"},
      {doc(R"({"name": "k", "per_step": 1.5, "kernel_launches": 1})"), 1, "per_step"},
      {doc(R"({"name": "k", "per_step": 3, "kernel_launches": 2})"), 1, "more than kernel_launches"},
      {doc(R"({"name": "k", "per_step": 1, "kernel_launches": 1, "offset_us": -1})"), 1, "offset_us"},
      {doc(R"({"name": "k", "per_step": 1, "kernel_launches": 1, "stream": "7"})"), 1, "stream"},
      {"{", 0, "not JSON"},
      {R"({"schema": "emo-policy/1"})", 0, "no ranks"},
  };
  for (const auto& [text, rank, what] : bad) {
    auto r = step_start_from_policy(text, rank, "p.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.error().message().find(what), std::string::npos) << r.error().message();
    EXPECT_NE(r.error().message().find("p.json"), std::string::npos) << r.error().message();
  }
}

// What `emo optimize` writes is what the marker needs: the step's kernel launches, in the order the
// trace's CPU made them, played three times over, sync at the second and never lose the step.
TEST(StepMarker, APolicysStepStartFindsTheStepsOfItsOwnTrace) {
  for (auto kind : {synth::Workload::kTrainDP, synth::Workload::kInferDecode}) {
    auto s = test::profiled_step(kind, 1, 2, 5, 11);
    optimize::Problem pr = s->problem();
    auto sol = optimize::optimize(pr, {});
    ASSERT_TRUE(sol.ok());
    const nlohmann::json j = optimize::policy_json(pr, *sol, 0.05, 0.1);
    auto start = step_start_from_policy(j.dump(), j["ranks"][0]["rank"].get<int>(), "p.json");
    ASSERT_TRUE(start.ok()) << start.error().message();
    // The launches: each kernel launch call's kernel, by the call's start.
    const graph::Graph& g = s->w.graph;
    std::vector<std::tuple<int64_t, std::string, int64_t>> launches;
    for (const graph::Edge& e : g.edges) {
      if (e.kind != graph::EdgeKind::kLaunch) continue;
      const graph::NodeId call = graph::node_of(e.src), k = graph::node_of(e.dst);
      if (g.strings.view(g.name[call]).find("LaunchKernel") == std::string_view::npos) continue;
      if (g.kind[k] != graph::NodeKind::kKernel && g.kind[k] != graph::NodeKind::kCommKernel) continue;
      launches.emplace_back(g.meas_start_ns[call], std::string(g.strings.view(g.name[k])), g.lanes[g.lane[k]].stream);
    }
    std::sort(launches.begin(), launches.end());
    ASSERT_EQ(launches.size(), start->kernel_launches);
    EXPECT_EQ(std::get<1>(launches.front()), start->name);
    StepMarker m(*start);
    for (int rep = 0; rep < 3; ++rep) {
      for (size_t i = 0; i < launches.size(); ++i) {
        const V v = m.on_launch(std::get<1>(launches[i]), std::get<2>(launches[i]));
        EXPECT_EQ(v, rep > 0 && i == 0 ? V::kStep : V::kNone) << "rep " << rep << " launch " << i;
      }
    }
    EXPECT_EQ(m.steps(), 2);
    EXPECT_GE(start->offset_us, 0);
  }
}

}  // namespace
}  // namespace emo::runtime
