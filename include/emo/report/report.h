// `emo run` as a library: the whole method end to end on one set of traces (or the built-in example),
// then a report folder — summary.json, packs.csv, results.csv, policy.json, a self-contained
// report.html (inline SVG, no network) and per-rank overlays (the original trace plus the packs and the
// SM clock as extra tracks, for Perfetto / chrome://tracing). The folder is built beside the target
// as DIR.tmp.<pid> and renamed over DIR only when complete, so an interrupted run leaves no folder that
// looks finished.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"
#include "emo/optimize/optimize.h"
#include "emo/pack/pack.h"
#include "emo/session/session.h"
#include "emo/synth/synth.h"

namespace emo::report {

// The built-in example: `emo synth train-pp --ranks 4` (a 1F1B pipeline step with bubbles).
synth::Options example_options();

struct RunOptions {
  std::vector<std::string> traces;  // one file per rank; empty = synthesize the example into DIR/input/
  std::string device = "h100";      // profile name or file, or emulated:NAME (profiled and evaluated there)
  std::string profile_on;           // where profiling, the check and the evaluation run; empty = the device's
                                    // emulated GPU (session::Options::profile_on)
  double max_slowdown = 0.05;
  double reserve = 0.1;             // part of max_slowdown kept back for model error (OptimizeOptions::reserve)
  std::string out_dir = "emo-report";
  std::string profiled_dir;         // recorded profiling runs (docs/profiling.md); empty = profile on the emulated GPU
  int eval_steps = 12;              // steps per plan on the emulated GPU (the first is a warm-up)
  bool check = true;                // run the policy on the profiling GPU before handing it out
                                    // (optimize::optimize_checked); not with profiled_dir
  bool refine_profile = true;       // session::Options::refine_profile
  bool accept_doubt = false;        // go on past refuse_doubtful_step (views.h)
  bool deprofile = false;           // LoadOptions::deprofile: the step without the profiler's host cost
  synth::Options example = example_options();
  std::function<void(const std::string&)> progress;  // one line per stage; may be empty
};

struct RunResult {
  std::string out_dir;
  std::vector<std::string> files;  // names inside out_dir
  std::vector<session::EvaluatedPlan> plans;  // default, policy, baselines: predicted and measured
  nlohmann::json summary;          // {"summary": {...}} as written to summary.json
};

// The session of a run's options (traces as given; the caller synthesizes the example).
session::Options session_options(const RunOptions& options);
Result<RunResult> run(const RunOptions& options);

// ---- what report.html and the overlays draw (built by the views from a session) ----
struct ReportData {
  const analysis::Workload* workload = nullptr;
  const analysis::Analysis* analysis = nullptr;
  const pack::Packing* packing = nullptr;
  std::vector<int> pack_clock_mhz;  // the policy's clock per pack
  int default_clock_mhz = 0;
  // The colour scale of the pack timeline: the device's candidate clocks (0.45·f_max up to the default),
  // the same on every report for the device, so one colour is one clock across reports.
  int scale_min_mhz = 0, scale_max_mhz = 0;
  std::vector<session::EvaluatedPlan> plans;
  nlohmann::json summary;           // the inner object of summary.json
};

// One HTML file with five inline SVG charts and the run's tables.
std::string render_html(const ReportData& d);
// `original` is rank `gpu`'s trace text as read; returns it with the packs (async "b"/"e" events, clock
// in args) and the SM clock (counter "C" events) inserted on an extra "EMO packs" process. Readers of
// the trace (emo analyze included) skip both phases, so the step reads back unchanged.
Result<std::string> overlay_json(std::string_view original, const std::string& name, const ReportData& d,
                                 uint32_t gpu);
// The whole text of a .json or .json.gz file.
Result<std::string> read_text(const std::string& path);

}  // namespace emo::report
