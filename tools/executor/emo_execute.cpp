// emo-execute TRACE... [--step N] [--scale SPEC]... [--scenarios]
// Runs the independent executor on the traces (one file per rank) and prints
// JSON: the measured and executed step span, per rank and for the job. With
// --scenarios, also the scenario set of docs/replay.md ("An independent
// executor"): each kernel class x0.6/x1.5/x3, the busiest stream x2, the
// collectives x2 and the host's own time x0.5 and x2, each with the `emo whatif
// --scale` selector that names the same work. SPEC: gemm|elementwise|reduce|
// attention|copy=F, stream:N=F, collective=F, cpu=F.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "emo/executor/executor.h"

namespace {

using emo::executor::Execution;
using emo::executor::KernelClass;
using emo::executor::Scenario;
using nlohmann::json;

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// ECMAScript regex matching the names of a class as in_class() does (ASCII case ignored).
std::string class_regex(KernelClass c) {
  auto ci = [](std::string_view w) {
    std::string s;
    for (char ch : w) {
      char up = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
      s += up == ch ? std::string(1, ch) : std::string("[") + ch + up + "]";
    }
    return s;
  };
  std::string alt;
  for (std::string_view w : emo::executor::keywords_of(c)) alt += (alt.empty() ? "" : "|") + ci(w);
  return "^(?!" + ci("nccl") + ").*(?:" + alt + ")";
}

json spans(const Execution& ex) {
  json j;
  j["measured_span_us"] = us(ex.measured_span_ns);
  j["span_us"] = us(ex.span_ns);
  j["error_pct"] = ex.error_pct();
  j["pipelined"] = ex.pipelined;
  return j;
}

int usage(const char* msg) {
  std::fprintf(stderr, "error: %s\nusage: emo-execute TRACE... [--step N] [--scale SPEC]... [--scenarios]\n", msg);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files, scales;
  std::optional<int64_t> step;
  bool scenarios = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--step" || a == "--scale") {
      if (i + 1 >= argc) return usage((a + " needs a value").c_str());
      std::string v = argv[++i];
      if (a == "--scale") {
        scales.push_back(v);
      } else {
        char* end = nullptr;
        long long n = std::strtoll(v.c_str(), &end, 10);
        if (v.empty() || *end != '\0') return usage("--step needs a number");
        step = n;
      }
    } else if (a == "--scenarios") {
      scenarios = true;
    } else if (a == "-h" || a == "--help") {
      std::printf("usage: emo-execute TRACE... [--step N] [--scale SPEC]... [--scenarios]\n");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown option " + a).c_str());
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) return usage("no trace given");
  Scenario sc;
  for (const auto& s : scales) {
    auto st = emo::executor::parse_scale(s, sc);
    if (!st.ok()) {
      std::fprintf(stderr, "error: --scale %s\n", st.error().message().c_str());
      return 2;
    }
  }
  auto ranks = emo::executor::load_step(files, step);
  if (!ranks.ok()) {
    std::fprintf(stderr, "error: %s\n", ranks.error().message().c_str());
    return 1;
  }
  auto base = emo::executor::execute(*ranks, sc);
  if (!base.ok()) {
    std::fprintf(stderr, "error: %s\n", base.error().message().c_str());
    return 1;
  }
  json out = spans(*base);
  json rk = json::array();
  int64_t gpu_ops = 0;
  for (const auto& r : base->ranks) {
    rk.push_back({{"path", r.path}, {"rank", r.rank}, {"measured_span_us", us(r.measured_span_ns())},
                  {"span_us", us(r.span_ns())}, {"gpu_ops", r.gpu_ops.size()}});
    gpu_ops += static_cast<int64_t>(r.gpu_ops.size());
  }
  out["ranks"] = rk;
  out["gpu_ops"] = gpu_ops;
  const auto& st = base->stats;
  out["stats"] = {{"threads", st.threads},
                  {"runtime_calls", st.runtime_calls},
                  {"gpu_ops_without_launch", st.gpu_ops_without_launch},
                  {"launch_contradicted", st.launch_contradicted},
                  {"blocking_calls", st.blocking_calls},
                  {"cross_stream_from_records", st.cross_stream_from_records},
                  {"cross_stream_from_calls", st.cross_stream_from_calls},
                  {"cross_stream_inferred", st.cross_stream_inferred},
                  {"collectives_matched", st.collectives_matched},
                  {"collective_kernels_unmatched", st.collective_kernels_unmatched},
                  {"waits_ignored", st.waits_ignored},
                  {"thread_flows", st.thread_flows},
                  {"thread_waits", st.thread_waits},
                  {"thread_links_inferred", st.thread_links_inferred},
                  {"threads_outside_span", st.threads_outside_span},
                  {"launch_latency_ns", st.launch_latency_ns},
                  {"queue_gap_ns", st.queue_gap_ns},
                  {"wake_ns", st.wake_ns}};
  if (scenarios) {
    // What the traces hold: ops per class, busy time per stream id, collective kernels.
    std::map<int, int64_t> class_ops;
    std::map<int32_t, int64_t> stream_busy;
    int64_t coll = 0;
    for (size_t r = 0; r < ranks->size(); ++r) {
      const auto& t = (*ranks)[r];
      for (const auto& e : t.events) {
        if (!emo::trace::is_gpu_op(e.kind) || e.lane >= t.lanes.size()) continue;
        for (int c = 0; c < emo::executor::kKernelClasses; ++c) {
          if (emo::executor::in_class(static_cast<KernelClass>(c), t.name_of(e))) ++class_ops[c];
        }
        int32_t s = e.stream >= 0 ? e.stream : t.lanes[e.lane].stream;
        stream_busy[s] += e.dur_ns;
        if (e.kind == emo::trace::EventKind::kKernel && e.collective != emo::trace::kNoIndex) ++coll;
      }
    }
    json list = json::array();
    auto add = [&](const std::string& name, const std::string& spec, const std::string& whatif, int64_t matched) {
      Scenario s = sc;
      auto ps = emo::executor::parse_scale(spec, s);
      if (!ps.ok()) return;
      auto ex = emo::executor::execute(*ranks, s);
      json j = {{"name", name}, {"spec", spec}, {"whatif_scale", whatif}, {"ops_matched", matched}};
      if (ex.ok()) {
        j["span_us"] = us(ex->span_ns);
      } else {
        j["error"] = ex.error().message();
      }
      list.push_back(j);
    };
    for (int c = 0; c < emo::executor::kKernelClasses; ++c) {
      if (class_ops[c] == 0) continue;
      auto kc = static_cast<KernelClass>(c);
      for (const char* f : {"0.6", "1.5", "3"}) {
        std::string cls = emo::executor::to_string(kc);
        add(cls + " x" + f, cls + "=" + f, class_regex(kc) + "=" + f, class_ops[c]);
      }
    }
    int32_t busiest = -1;
    int64_t best = -1;
    for (const auto& [s, b] : stream_busy) {
      if (b > best && s >= 0) {
        best = b;
        busiest = s;
      }
    }
    if (busiest >= 0) {
      std::string spec = "stream:" + std::to_string(busiest) + "=2";
      add("stream " + std::to_string(busiest) + " x2", spec, spec, 0);
    }
    if (coll > 0) add("collectives x2", "collective=2", "cat:nccl=2", coll);
    // The host's own time (the profiler's cost taken out, a slower or faster CPU).
    if (st.runtime_calls > 0) {
      for (const char* f : {"0.5", "2"}) add(std::string("host x") + f, std::string("cpu=") + f, std::string("cat:host=") + f, 0);
    }
    out["scenarios"] = list;
  }
  std::cout << out.dump(1) << "\n";
  return 0;
}
