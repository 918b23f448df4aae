// libFuzzer target for the trace reader: any byte string must give either an
// Error or tables that hold the reader's invariants, and select_step must keep
// them; a crash, a sanitizer report or a trap here is a bug in trace/. A trace
// that reads also goes through the step's doubt checks (analysis::step_warnings,
// analysis::device_warnings), which must not fail on any of them, and through the
// independent executor with the host's time halved (its flows between threads and
// its gates: an answer or an Error, never a crash or a hang).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/analysis/deprofile.h"
#include "emo/executor/executor.h"
#include "emo/trace/trace.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_tables(const emo::trace::RankTrace& t) {
  using emo::trace::kNoIndex;
  check(t.stats.events_kept == static_cast<int64_t>(t.events.size()));
  check(t.stats.events_kept <= t.stats.events_total || t.stats.events_total == 0);
  for (size_t i = 0; i < t.events.size(); ++i) {
    const emo::trace::Event& e = t.events[i];
    check(e.lane < t.lanes.size());
    check(e.collective == kNoIndex || e.collective < t.collectives.size());
    check(e.name < t.strings.size());
    check(e.dur_ns >= 0 && e.ts_ns >= 0);
    check(t.lanes[e.lane].gpu ==
          (e.kind == emo::trace::EventKind::kKernel || e.kind == emo::trace::EventKind::kMemcpy ||
           e.kind == emo::trace::EventKind::kMemset || e.kind == emo::trace::EventKind::kCudaSync ||
           e.kind == emo::trace::EventKind::kGpuAnnotation));
    if (i > 0) {
      const emo::trace::Event& p = t.events[i - 1];
      check(p.ts_ns < e.ts_ns || (p.ts_ns == e.ts_ns && p.dur_ns >= e.dur_ns));
    }
  }
  if (!t.events.empty()) check(t.events.front().ts_ns == 0);
  // A fwdbwd flow binds one forward op to one backward op.
  std::vector<uint8_t> out(t.events.size() + 1, 0), in(t.events.size() + 1, 0);
  for (const emo::trace::Event& e : t.events) {
    if (e.flow_out != 0) check(e.flow_out <= t.events.size() && out[e.flow_out]++ == 0);
    if (e.flow_in != 0) check(e.flow_in <= t.events.size() && in[e.flow_in]++ == 0);
  }
  for (size_t i = 1; i < t.steps.size(); ++i) check(t.steps[i - 1].ts_ns <= t.steps[i].ts_ns);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  emo::Result<emo::trace::RankTrace> r = emo::trace::parse_trace(json, "fuzz.json");
  if (!r.ok()) {
    check(!r.error().what.empty());
    return 0;
  }
  check_tables(r.value());
  emo::Result<int64_t> step = emo::trace::select_step(r.value(), std::nullopt);
  check(step.ok());
  check_tables(r.value());
  std::vector<emo::trace::RankTrace> ranks;
  ranks.push_back(std::move(r).value());
  emo::executor::Scenario host;
  host.cpu_factor = 0.5;
  emo::Result<emo::executor::Execution> ex = emo::executor::execute(ranks, host);
  check(ex.ok() ? ex.value().span_ns >= 0 : !ex.error().what.empty());
  emo::Result<emo::analysis::Workload> w = emo::analysis::assemble(std::move(ranks), {});
  if (!w.ok()) return 0;
  const emo::analysis::Analysis a = emo::analysis::analyze(w.value());
  for (const std::string& text : emo::analysis::step_warnings(w.value(), a)) check(!text.empty());
  for (const std::string& text : emo::analysis::device_warnings(w.value(), "h100")) check(!text.empty());
  // The step written back at a host factor (emo deprofile) reads again, with the reader's invariants.
  for (const std::string& text : emo::analysis::traces_with_host_scale(w.value(), 0.5, nullptr)) {
    emo::Result<emo::trace::RankTrace> back = emo::trace::parse_trace(text, "deprofiled.json");
    check(back.ok());
    check_tables(back.value());
  }
  return 0;
}
