// Views over a session's results (llvm-mca's views, over the pipeline object): each renders, in one
// format, what the session computed — running the stages it needs first, each once. The text, JSON and
// CSV outputs of every subcommand, the report folder's files, report.html and the Perfetto overlays
// are views; each JSON document is built in one place, by the *_document functions below, so that
// `emo optimize --json` and summary.json cannot drift apart. Units convert here: the session keeps ns,
// the documents say µs or ms in their keys.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/backends/apply.h"
#include "emo/base/result.h"
#include "emo/session/session.h"

namespace emo::report {

class View {
 public:
  virtual ~View() = default;
  // What it is: the file name it has in a report folder ("summary.json", "packs.csv", ...) or its kind.
  virtual std::string name() const = 0;
  virtual Result<std::string> render(session::Session& s) const = 0;
};

// ---- the JSON documents ----
// `emo analyze --json` (DESIGN.md §6): events, nodes, edges, ranks, the replay check, the critical path,
// slack, GPUs, import_stats; `per_kernel` adds every GPU op.
Result<nlohmann::json> analyze_document(session::Session& s, bool per_kernel);
// `emo whatif --json` of an answer, and the text `emo whatif` prints of that document.
nlohmann::json whatif_document(const analysis::WhatIf& r);
std::string whatif_text(const nlohmann::json& whatif_document);
// `emo whatif --json`: baseline_span_us, predicted_span_us, change_pct, matched_nodes.
// With a topology, also `topology` (analysis::to_json(TopologyReport)).
Result<nlohmann::json> whatif_document(session::Session& s, const std::vector<analysis::Scale>& scales,
                                       const analysis::TopologyQuestion* topology = nullptr);
// `emo pack --json`: packs (the first 1000 unless `all`), signatures, the profiling plan; with
// fidelity_mhz > 0, also "fidelity": the models against the emulated GPU at that clock.
Result<nlohmann::json> pack_document(session::Session& s, bool all, int fidelity_mhz);
// `emo optimize --json`: the default, policy and baseline plans as predicted, the check, warnings.
Result<nlohmann::json> optimize_document(session::Session& s);
// `emo evaluate --json`: each plan of the evaluation as measured.
Result<nlohmann::json> evaluate_document(session::Session& s);
// summary.json's inner object for `emo run` (docs/run.md). `inputs`: the traces as named in the
// report folder; `extra_stage_ms`: stages the run timed itself (synth, views, total).
struct RunInfo {
  std::vector<std::string> inputs;
  std::map<std::string, double> extra_stage_ms;
};
Result<nlohmann::json> summary_document(session::Session& s, const RunInfo& run);
// The policy against the best baseline at the same bound, in points of energy saved (policy's saving
// less the baseline's). Measured: the best baseline is the one that saves the most among those whose
// measured slowdown is within the bound every plan is checked against (optimize::check_accept_pct:
// max_slowdown less half the reserve, 4.75 % at 5 % and the default reserve); none: the default clocks
// (0 % saved). Predicted: the best of the solution's baselines (each meets the plan target in the
// models' replay).
struct Margin {
  std::string best_baseline;        // its name, or "default"
  double baseline_saving_pct = 0;
  double points = 0;                // policy saving − baseline saving
  double bound_pct = 0;             // the slowdown the baselines were held to (measured)
};
Margin measured_margin(const std::vector<session::EvaluatedPlan>& plans, double max_slowdown, double reserve);
Margin predicted_margin(const optimize::Solution& s);
nlohmann::json margin_json(const Margin& m);
// The measured plans as a text table (name, step time, energy, slowdown, saving), then the margin.
std::string measured_table(const std::vector<session::EvaluatedPlan>& plans, double max_slowdown, double reserve);

// The doubts about the step (analysis::step_warnings) and its traces' GPU against --device
// (analysis::device_warnings): what `emo pack`, `optimize` and `run` warn about before their own.
Result<std::vector<std::string>> step_warnings(session::Session& s);
// Past this replay error the step is too doubtful to optimize: `emo optimize` and `emo run` stop with
// the Error of refuse_doubtful_step, whose note names --accept-doubt (docs/replay.md).
inline constexpr double kReplayRefusePct = 50.0;
// ... and past this share of launch calls without GPU activity (analysis::lost_launches).
inline constexpr double kLostLaunchRefusePct = 50.0;
// ... and past this share of the step blocked in synchronize calls after the GPU work the trace shows had
// ended (analysis::unrecorded_waits).
inline constexpr double kUnrecordedWaitRefusePct = 50.0;
Status refuse_doubtful_step(session::Session& s);
// The doubt a run leaves: the check's warnings and the evaluation's predicted-vs-measured energy gap.
Result<std::vector<std::string>> run_warnings(session::Session& s);

// ---- views ----
std::unique_ptr<View> analyze_json(bool per_kernel);
std::unique_ptr<View> analyze_text();
std::unique_ptr<View> kernels_csv();        // one row per GPU op with its slack
std::unique_ptr<View> critical_path_csv();  // the critical path piece by piece
std::unique_ptr<View> whatif_json(std::vector<analysis::Scale> scales,
                                  std::optional<analysis::TopologyQuestion> topology = std::nullopt);
std::unique_ptr<View> whatif_text(std::vector<analysis::Scale> scales,
                                  std::optional<analysis::TopologyQuestion> topology = std::nullopt);
std::unique_ptr<View> pack_json(bool all, int fidelity_mhz);
std::unique_ptr<View> pack_text(int fidelity_mhz);
std::unique_ptr<View> packs_csv(bool policy_clocks = false);  // packs.csv: one row per pack (+ the policy's clock)
std::unique_ptr<View> fidelity_csv(int fidelity_mhz);  // one row per pack: predicted vs true at the clock
std::unique_ptr<View> optimize_json();
std::unique_ptr<View> optimize_text();
std::unique_ptr<View> policy_file();  // policy.json (schema emo-policy/1)
std::unique_ptr<View> evaluate_json();
std::unique_ptr<View> evaluate_text();
std::unique_ptr<View> results_csv();  // results.csv: each plan, predicted and true
std::unique_ptr<View> summary_json(RunInfo run);  // summary.json: {"summary": summary_document}
std::unique_ptr<View> run_text();     // `emo run`'s table
std::unique_ptr<View> report_html(RunInfo run);
// Rank `rank` (graph rank index)'s trace with the packs and the SM clock as extra tracks, for Perfetto.
std::unique_ptr<View> overlay(uint32_t rank);

// `emo apply`'s document: the run on the session's emulated GPU (backends::apply_emulated) as
// backends::apply_json gives it, plus "device", "max_slowdown", "verify" and, with `evaluate`, `emo
// evaluate`'s saving and slowdown of the same policy ("evaluate"); the caller adds "policy". `warnings`
// says each fallback in a line. Errors: a device that is not emulated, a negative block_steps.
struct ApplyDocument {
  nlohmann::json document;
  std::vector<std::string> warnings;
};
Result<ApplyDocument> apply_document(session::Session& s, const backends::ApplyOptions& options, bool evaluate);

}  // namespace emo::report
