// libFuzzer target for every other input EMO reads: the first byte picks the reader, the rest is the
// file's text. Any byte string must give either an Error with a message or a value that holds the
// reader's invariants; a crash, a sanitizer report or a trap here is a bug. The readers:
//   0 Perseus stage profile (emo pipeline --profile), then the model fit and, when small, the frontier
//   1 published lowtime frontier (emo pipeline --compare)
//   2 DVFS datasets (emo calibrate --dataset), in each of the three formats
//   3 policy JSON (emo evaluate), against a fixed synthetic workload on the H100 profile
//   4 device profile JSON (--device FILE)
//   5 energy log of a profiled run
//   6 one line of emo-microbench output
//   7 device spec ("nvml:0", "emulated:h100@7", ...)
//   8 a rank trace as another process of an MPI run sends it (trace::from_wire; back to the same bytes)
//   9 a message frame between processes (dist::unframe; back to the same bytes)
//  10 a topology file (emo whatif --topology), then the what-if on the fixed workload
// The path-based readers read the input from a memory file (/proc/self/fd/N).
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "emo/analysis/analysis.h"
#include "emo/analysis/topology.h"
#include "emo/backends/profiling.h"
#include "emo/backends/target.h"
#include "emo/device/nvml.h"
#include "emo/dist/dist.h"
#include "emo/device/profile.h"
#include "emo/model/datasets.h"
#include "emo/optimize/optimize.h"
#include "emo/pipeline/pipeline.h"
#include "emo/synth/synth.h"
#include "emo/trace/trace.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// EMO_FUZZ_VERBOSE=1: print each reader's verdict (to see that a seed input is read, not rejected).
const bool kVerbose = std::getenv("EMO_FUZZ_VERBOSE") != nullptr;

template <class T>
bool ok_or_message(const emo::Result<T>& r) {
  if (!r.ok()) check(!r.error().what.empty());
  if (kVerbose) std::fprintf(stderr, "%s\n", r.ok() ? "read" : ("error: " + r.error().what).c_str());
  return r.ok();
}

// A memory file holding the input, named by a path the file readers can open.
std::string as_file(std::string_view text) {
  static int fd = memfd_create("emo-fuzz-input", 0);
  check(fd >= 0);
  check(ftruncate(fd, 0) == 0);
  check(pwrite(fd, text.data(), text.size(), 0) == ssize_t(text.size()));
  return "/proc/self/fd/" + std::to_string(fd);
}

const emo::analysis::Workload& workload() {
  static const emo::analysis::Workload w = [] {
    emo::synth::Options o;
    o.workload = emo::synth::Workload::kTrainDP;
    o.ranks = 1;
    o.layers = 2;
    o.steps = 2;
    o.seed = 11;
    std::vector<emo::trace::RankTrace> ranks;
    auto t = emo::trace::parse_trace(emo::synth::render_trace(o, 0), "rank0");
    check(t.ok());
    ranks.push_back(std::move(*t));
    auto w = emo::analysis::assemble(std::move(ranks), {});
    check(w.ok());
    return std::move(*w);
  }();
  return w;
}

void stage_profile(std::string_view text) {
  auto p = emo::pipeline::load_stage_profile(as_file(text));
  if (!ok_or_message(p)) return;
  check(p->stages >= 1 && size_t(p->stages) == p->samples.size());
  auto model = emo::pipeline::build_model(*p, 0, 0.001, 70.0);
  if (!ok_or_message(model)) return;
  int64_t span = 0;
  for (const auto& im : model->instructions) {
    check(!im.candidates.empty() && im.min_units() <= im.max_units());
    span = std::max(span, im.max_units() - im.min_units());
  }
  if (model->stages > 3 || span > 200) return;  // keep each run short
  auto dag = emo::pipeline::build_1f1b(model->stages, 3);
  if (!ok_or_message(dag)) return;
  auto fr = emo::pipeline::solve_frontier(*model, *dag, {emo::pipeline::Accounting::kLowtime, 1});
  if (!ok_or_message(fr)) return;
  for (size_t i = 1; i < fr->points.size(); ++i) {
    check(fr->points[i - 1].time_units < fr->points[i].time_units);
    check(fr->points[i - 1].energy_j > fr->points[i].energy_j);
  }
  if (fr->points.empty()) return;
  // The plan to run within the middle of the frontier's time range: within the limit, in program order.
  const double limit = 0.5 * (fr->points.front().time_s + fr->points.back().time_s);
  auto at = emo::pipeline::point_within(*fr, model->unit_s, limit);
  check(at.ok() && fr->points[*at].time_s <= limit + 1e-9);
  auto sched = emo::pipeline::stage_schedule(*model, *dag, fr->plan(*at));
  int64_t end = 0;
  for (size_t s = 0; s < sched.size(); ++s) {
    check(sched[s].size() == dag->program[s].size());
    for (const auto& x : sched[s]) end = std::max(end, x.start_units + x.units);
  }
  check(end == fr->points[*at].time_units);
  check(!emo::pipeline::perseus_frequency_file(sched, {}).empty());
}

void published_frontier(std::string_view text) {
  auto p = emo::pipeline::load_published_frontier(as_file(text));
  if (!ok_or_message(p)) return;
  check(!p->time_s.empty() && p->time_s.size() == p->energy_j.size());
  for (double t : p->time_s) check(t > 0 && std::isfinite(t));
}

void datasets(std::string_view text) {
  const std::string path = as_file(text);
  for (auto format : {emo::model::Format::kPerseus, emo::model::Format::kNvDvfs, emo::model::Format::kGpuDvfs}) {
    auto d = emo::model::load_dataset(path, format);
    if (!ok_or_message(d)) continue;
    check(!d->units.empty());
    for (const auto& u : d->units) {
      check(!u.samples.empty());
      for (size_t i = 1; i < u.samples.size(); ++i) check(u.samples[i - 1].clock_mhz < u.samples[i].clock_mhz);
    }
  }
}

void policy(std::string_view text) {
  static const emo::device::DeviceProfile profile = *emo::device::builtin_profile("h100");
  auto p = emo::optimize::read_policy("fuzz.json", std::string(text), workload(), profile);
  if (!ok_or_message(p)) return;
  check(p->device == profile.name);
  for (const auto& b : p->baselines) check(b.clocks_mhz.size() == p->packs.size());
}

void topology(std::string_view text) {
  auto t = emo::analysis::topology_from_json(text, "fuzz.json");
  if (!ok_or_message(t)) return;
  check(t->gpus_per_host >= 1 && t->intra.bandwidth_gb_s > 0 && t->base_latency_us >= 0);
  emo::analysis::TopologyQuestion q{*t, *t};
  auto w = emo::analysis::what_if(workload(), {}, &q);
  if (!ok_or_message(w)) return;
  check(w->predicted_span_ns >= 0);
  // The recorded machine asked about again: every transfer keeps its measured time.
  for (const auto& c : w->topology->collectives) check(std::abs(c.predicted_ns - c.measured_ns) <= 1.0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 11) {
    case 0:
      stage_profile(text);
      break;
    case 1:
      published_frontier(text);
      break;
    case 2:
      datasets(text);
      break;
    case 3:
      policy(text);
      break;
    case 4:
      ok_or_message(emo::device::profile_from_json(text, "fuzz.json"));
      break;
    case 5:
      ok_or_message(emo::backends::parse_energy_log(text, "fuzz.log"));
      break;
    case 6:
      ok_or_message(emo::device::parse_microbench_line(text));
      break;
    case 7:
      ok_or_message(emo::backends::parse_device_spec(std::string(text)));
      break;
    case 8:
      if (auto t = emo::trace::from_wire(text); ok_or_message(t)) check(emo::trace::to_wire(*t) == text);
      break;
    case 9:
      if (auto f = emo::dist::unframe(text); ok_or_message(f)) check(emo::dist::frame(*f) == text);
      break;
    default:
      topology(text);
      break;
  }
  return 0;
}
