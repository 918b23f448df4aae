// Builds tiny Kineto traces (modern spelling) for tests whose right answer is
// known by hand. Times are in µs from 0; a rank's events go in one file.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "emo/trace/trace.h"

namespace emo::test {

class TraceJson {
 public:
  explicit TraceJson(int rank = -1, int world = -1) : rank_(rank), world_(world) {}

  TraceJson& cpu(const std::string& name, double ts, double dur, int tid = 1,
                 const std::string& cat = "cpu_op") {
    ev_.push_back(fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":100,"tid":{},"ts":{},"dur":{},"args":{{}}}})",
                              cat, name, tid, ts, dur));
    return *this;
  }
  TraceJson& step(int n, double ts, double dur) {
    return cpu(fmt::format("ProfilerStep#{}", n), ts, dur, 1, "user_annotation");
  }
  TraceJson& runtime(const std::string& name, double ts, double dur, long corr, int tid = 1) {
    ev_.push_back(fmt::format(
        R"({{"ph":"X","cat":"cuda_runtime","name":"{}","pid":100,"tid":{},"ts":{},"dur":{},"args":{{"correlation":{},"External id":{}}}}})",
        name, tid, ts, dur, corr, corr));
    return *this;
  }
  TraceJson& kernel(const std::string& name, int stream, double ts, double dur, long corr,
                    const std::string& extra_args = "") {
    ev_.push_back(fmt::format(
        R"({{"ph":"X","cat":"kernel","name":"{}","pid":0,"tid":{},"ts":{},"dur":{},"args":{{"device":0,"stream":{},"correlation":{},"External id":{}{}}}}})",
        name, stream, ts, dur, stream, corr, corr, extra_args.empty() ? "" : "," + extra_args));
    return *this;
  }
  // Launch + kernel in one go: cudaLaunchKernel at `launch_ts` (5 µs long).
  TraceJson& launch(const std::string& name, int stream, double launch_ts, double ts, double dur, long corr,
                    int tid = 1, const std::string& extra_args = "") {
    runtime("cudaLaunchKernel", launch_ts, 5, corr, tid);
    return kernel(name, stream, ts, dur, corr, extra_args);
  }
  TraceJson& sync_event(const std::string& kind, int stream, double ts, long corr, int wait_on_stream = -1,
                        long record_corr = -1) {
    ev_.push_back(fmt::format(
        R"({{"ph":"X","cat":"cuda_sync","name":"{}","pid":0,"tid":{},"ts":{},"dur":1,"args":{{"cuda_sync_kind":"{}","wait_on_stream":{},"wait_on_cuda_event_record_corr_id":{},"stream":{},"correlation":{},"device":0}}}})",
        kind, stream, ts, kind, wait_on_stream, record_corr, stream, corr));
    return *this;
  }
  TraceJson& raw(const std::string& event_json) {
    ev_.push_back(event_json);
    return *this;
  }

  std::string str() const {
    std::string s = "{\"schemaVersion\":1,";
    if (rank_ >= 0) s += fmt::format(R"("distributedInfo":{{"rank":{},"world_size":{}}},)", rank_, world_);
    s += "\"traceEvents\":[";
    for (size_t i = 0; i < ev_.size(); ++i) s += (i ? ",\n" : "\n") + ev_[i];
    s += "\n]}\n";
    return s;
  }

 private:
  int rank_, world_;
  std::vector<std::string> ev_;
};

// The traces parsed, one rank per text (named rank0.json, rank1.json, ...); a text that does not parse
// fails the test and is left out.
inline std::vector<trace::RankTrace> ranks_of(const std::vector<std::string>& jsons) {
  std::vector<trace::RankTrace> out;
  for (size_t i = 0; i < jsons.size(); ++i) {
    auto t = trace::parse_trace(jsons[i], "rank" + std::to_string(i) + ".json");
    EXPECT_TRUE(t.ok()) << (t.ok() ? "" : t.error().message());
    if (t.ok()) out.push_back(std::move(t).value());
  }
  return out;
}

// A slow launch (a first launch loading its module), for the replay's and the executor's tests alike:
// the call takes 600 µs of the thread's time and its kernel starts 5 µs after it returns, the stream
// idle since K1 ended at 110. Calls [0,5] [20,620] [630,635] [640,645]; K1 [10,110], K2 [625,725], then
// K3 [726,826] and K4 [827,927] queued behind K2.
inline std::string slow_first_launch() {
  return TraceJson()
      .launch("K1", 7, 0, 10, 100, 1)
      .runtime("cudaLaunchKernel", 20, 600, 2)
      .kernel("K2", 7, 625, 100, 2)
      .launch("K3", 7, 630, 726, 100, 3)
      .launch("K4", 7, 640, 827, 100, 4)
      .str();
}

}  // namespace emo::test
