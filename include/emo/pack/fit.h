// Pack-level models from light profiling: the step recorded at a few locked clocks (a Kineto trace of
// one step and the energy-counter log of a longer run at each clock, from hardware or from the
// emulated GPU) gives every signature's time at those clocks; a time model T(f) is fitted per
// signature, its compute share sets a power model from the device profile's (microbenchmark-
// calibrated) predictors (collectives at a communication kernel's activity), and each GPU's measured
// step energies rescale the static and dynamic power and set the GPU's voltage floor and knee so the
// whole step's energy matches what the counter saw.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "emo/analysis/analysis.h"
#include "emo/base/result.h"
#include "emo/device/device.h"
#include "emo/model/models.h"
#include "emo/pack/pack.h"

namespace emo::pack {

// What one profiling run at a locked clock gives: per rank, the trace (one or more steps; the last
// complete step is used) and the energy-counter log of the whole run at that clock.
struct ProfiledRun {
  int clock_mhz = 0;
  std::vector<trace::RankTrace> traces;                  // in the base workload's rank order
  std::vector<std::vector<device::EnergySample>> energy;  // per rank
  // What the fit reads of the traces (digest_run): the step's time and, per rank, the profiled
  // [start, end) of each of the base step's GPU ops (Packing::gpus[r].ops order). Once it is set the
  // traces are no longer needed (digest_run empties them).
  struct Digest {
    double step_s = 0;
    std::vector<std::vector<std::pair<int64_t, int64_t>>> spans;
  };
  std::optional<Digest> digest;
};

// Reduces a run to its digest and frees its traces, so that a profiling plan holds each run's traces
// only while it is read (a run of N ranks is N traces). Errors: a run whose ranks or GPU ops are not the
// base step's (the message names the run's clock, the rank and the op).
Status digest_run(const analysis::Workload& base, const Packing& packing, ProfiledRun& run);
// digest_run() over the processes of a run (DESIGN.md §9): `profiled` is this process's part of the run's
// step, read with the base step's rank bounds (analysis::load_part: the same ranks as `base`, the base
// step's part, and `mine`, its packing: PackingPart::mine). The digest holds the spans of this process's
// GPUs (mine.gpus order) and the whole run's step time (its measured span over every process's part), as
// digest_run() of the whole run gives them. Every process calls it; an Error on every process where any
// process's ops are not the base step's (the first such process's, as digest_run() words it).
Status digest_run_part(const graph::GraphPart& base, const Packing& mine, const graph::GraphPart& profiled,
                       ProfiledRun& run, dist::Comm& comm);

struct SignatureModel {
  model::UnitModel unit;   // time and (prior) power of all members' ops together
  double ref_time_s = 0;   // T at the reference (max) clock, from the fit
  double compute_share = 0;
  bool fitted = false;     // false: not profiled, prior used (idle signature, or its fit failed)
  // A signature with GPU work whose time could not be fitted (fewer than 2 profiled clocks where its
  // ops took time, or points the fit refuses): its clock response is unknown, so the optimizer holds its
  // packs at the default clock rather than read it as clock-insensitive (fit_warnings says so).
  bool fit_failed = false;
  bool communication = false;  // collective / send-recv ops: power at model::kCommunicationActivity
  // Per op position within a member: T(f) of that op summed over the members. The traces time every
  // kernel anyway, so this costs no profiling; a signature that mixes compute- and memory-bound ops is
  // not one roofline, and the critical path may run through only some of its ops.
  std::vector<model::TimeModel> op_time;
  std::vector<double> op_ref_s;  // 0: not fitted (the signature's ratio is used)
};

struct GpuCorrection {
  double static_scale = 1;
  double dynamic_scale = 1;
  // This GPU's voltage floor relative to the profile's (1: the profile's V(f)). The SM part of the
  // dynamic power (and the idle clock tree) scales as V(f)², and the measured step energies at the
  // profiled clocks below the voltage knee against the one above it show the floor (docs/models.md).
  double floor_scale = 1;
  // This GPU's voltage knee relative to the profile's (1: the profile's). Seen only from a profiled
  // clock between the knee and f_max (the default plan has one, docs/profiling.md).
  double knee_scale = 1;
  // The power this GPU holds a throttled signature at, relative to the modelled limit (1: the cap of
  // the signature's model). Fitted from the step energies where signatures throttle (docs/models.md).
  double limit_scale = 1;
  // Of the smaller dynamic power of two atoms that run at once, the share the GPU draws (the larger
  // draws in full): model::kConcurrentShare as the prior, fitted where the runs overlap atoms.
  double concurrent_share = model::kConcurrentShare;
  // True where the least-squares static and dynamic scales fell outside their bounds (static 0.5–2,
  // dynamic 0.3–3) or could not be told apart: one common scale stands for both (static_scale ==
  // dynamic_scale), and the fit's residuals show what the two could not absorb. ls_static, ls_dynamic:
  // the least-squares values it refused (0 where they could not be told apart).
  bool common_scale = false;
  double ls_static = 0, ls_dynamic = 0;
  // Step energy at each profiled clock (in the runs' order), measured (counter) and as the fitted
  // models predict it.
  std::vector<int> clocks_mhz;
  std::vector<double> measured_j, predicted_j;

  // What the scales could not absorb: measured / fitted step energy at each profiled clock, ascending
  // by clock ({clock MHz, ratio}). PackModels' busy and idle powers at f are multiplied by it (linear
  // between the clocks, the nearest one's outside them), so a plan that runs every pack at a profiled
  // clock is priced at what its run measured (docs/models.md, "Anchored at the profiled clocks").
  std::vector<std::pair<double, double>> residual;
  double residual_at(double clock_mhz) const;

  size_t runs() const { return std::min({clocks_mhz.size(), measured_j.size(), predicted_j.size()}); }
  // Run i's fitted step energy against its measured one, predicted / measured − 1 in %; 0 where nothing
  // was measured.
  double gap_pct(size_t i) const { return measured_j[i] > 0 ? 100 * (predicted_j[i] / measured_j[i] - 1) : 0.0; }
};

// The lowest clock the optimizer considers (pricing's candidates): the lowest supported clock at or
// above this fraction of f_max.
inline constexpr double kLowestCandidateFrac = 0.45;
int lowest_candidate_clock(const device::DeviceProfile& profile);

struct PackModels {
  device::DeviceProfile profile;
  std::vector<int> clocks_mhz;           // profiled clocks
  std::vector<SignatureModel> signatures;  // [SignatureIndex]
  std::vector<GpuCorrection> gpus;         // [RankIndex]
  // Atoms of a GPU that ran at once in the profiled runs, and for how long at each profiled clock
  // (`ns[i]` at overlap_clocks_mhz[i], ascending): compute stretches into a collective's wait as the
  // clock falls, so the overlap is measured, not scaled. By `first`, then `second`.
  struct Overlap {
    uint32_t first = 0, second = 0;
    std::vector<double> ns;
  };
  std::vector<Overlap> overlaps;
  std::vector<double> overlap_clocks_mhz;
  // An overlap's time at f: linear between the profiled clocks, the nearest one's outside them.
  double overlap_ns(const Overlap& o, double clock_mhz) const;

  // Duration of the signature's work at f relative to the reference clock.
  double time_ratio(SignatureIndex sig, double clock_mhz) const;
  // The same for the op at `pos` within a member of the signature (falls back to time_ratio).
  double op_time_ratio(SignatureIndex sig, uint32_t pos, double clock_mhz) const;
  // Busy power of the signature's work on a GPU at f (corrected, anchored: GpuCorrection::residual).
  double busy_power_w(SignatureIndex sig, graph::RankIndex gpu, double clock_mhz) const;
  // The same before the anchoring (what the fitted scales alone give).
  double fitted_busy_power_w(SignatureIndex sig, graph::RankIndex gpu, double clock_mhz) const;
  double idle_power_w(graph::RankIndex gpu, double clock_mhz) const;
  // The GPU's V(f) relative to V(f_max): the profile's curve with the floor scaled by floor_scale.
  double voltage_rel(graph::RankIndex gpu, double clock_mhz) const;
  // (V_gpu(f)/V(f))²: how much more the SM part draws at f on this GPU than at the profile's voltage.
  double voltage_gain(graph::RankIndex gpu, double clock_mhz) const;
};

// Where a GPU's measured step energy still falls at the lowest profiled clock (lower there than at the
// next profiled clock by more than the counter's noise) and the optimizer's candidates reach below it,
// the energy-optimal clock may lie below what the runs show: the clock to profile next (the lowest
// candidate), else 0. Idle-dominated steps do this — their idle power keeps falling with the clock.
struct StillFalling {
  int gpu = -1;               // the first such GPU (rank index)
  int lowest_mhz = 0;         // its lowest profiled clock
  int next_mhz = 0;           // the profiled clock above it
  double lowest_j = 0, next_j = 0;  // its measured step energies there
  int profile_mhz = 0;        // the clock to profile next
};
StillFalling energy_still_falling(const PackModels& models);

// The packs that hold a signature whose fit failed: the optimizer keeps them at the default clock.
std::vector<PackIndex> packs_held_at_default(const Packing& packing, const PackModels& models);
// A GPU whose fitted models give back its measured step energy at a profiled clock this far off (%) or
// more: the models do not follow that GPU's energy, so predictions between the clocks may be off as far.
inline constexpr double kFitDoubtPct = 3.0;

// The GPU and profiled clock where the fitted step energy is farthest from the measured one (gap_pct =
// fitted / measured − 1, in %); gpu −1 where no GPU has a measured run.
struct WorstFit {
  int gpu = -1;
  int clock_mhz = 0;
  double measured_j = 0, fitted_j = 0, gap_pct = 0;
};
WorstFit worst_energy_fit(const PackModels& models);

// One warning per kind of doubt the fit leaves: signatures whose fit failed (how many, their share of
// the step's GPU busy time, and that their packs are held at the default clock); a step energy still
// falling at the lowest profiled clock (energy_still_falling); a fit that misses a measured step energy
// by more than kFitDoubtPct (worst_energy_fit). Empty: none.
std::vector<std::string> fit_warnings(const Packing& packing, const PackModels& models);

// A profiled step's GPU ops per rank, found again by (stream, kernel name, occurrence on that stream) —
// how a base step's op is matched in a trace recorded at another clock. Times are the profiled graph's.
class ProfiledOps {
 public:
  explicit ProfiledOps(const graph::Graph& profiled);
  // The profiled [start, end) of the base step's op `i` of GPU `gpu`; nullptr when the trace lacks it.
  const std::pair<int64_t, int64_t>* find(const graph::Graph& base, const Packing& packing, graph::RankIndex gpu,
                                          uint32_t i) const;
  size_t ops(uint32_t rank) const { return rank < counts_.size() ? counts_[rank] : 0; }

 private:
  // A transparent hash, so that a name is looked up from its view.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, uint32_t, NameHash, std::equal_to<>> names_;  // kernel name -> id
  // Per rank: (stream, name id) -> the spans of its ops in index order (the k-th is occurrence k).
  std::vector<std::unordered_map<uint64_t, std::vector<std::pair<int64_t, int64_t>>>> index_;
  std::vector<size_t> counts_;
};

// What the models predict for one pack run at clock f: its busy time (its atoms' busy time scaled by
// their signatures' T(f)) and its energy (busy power over that time, idle power over the idle time
// inside the pack, which stays as measured). A prediction, so a double, in ns as every trace time.
struct PackCost {
  double busy_ns = 0;
  double energy_j = 0;
};
PackCost predict_pack(const Packing& packing, const PackModels& models, PackIndex pack, double clock_mhz);

struct FitOptions {
  // Fit each GPU's voltage floor from its step energies (GpuCorrection::floor_scale). false: the
  // profile's V(f), only the static and dynamic scales fitted (as before 2026-11-30).
  bool fit_voltage_floor = true;
  // With it, also fit the voltage knee (GpuCorrection::knee_scale) where a profiled clock lies between
  // the knee and f_max. false: the profile's knee.
  bool fit_voltage_knee = true;
  // Recognise signatures that throttle at the top profiled clocks (their time stops shortening; they
  // then draw the power limit, docs/models.md). false: every signature's time is one fitted curve.
  bool fit_throttle = true;
  // Price atoms that ran at once in the profiled runs as sharing the GPU (PackModels::overlaps, the
  // concurrent share fitted per GPU, docs/models.md). false: their busy powers add up in full, as
  // before 2026-12-05.
  bool share_overlaps = true;
};

// Errors: a profiled trace whose GPU ops do not match the base step (other ops, other counts), a run
// without energy samples, fewer than 2 distinct clocks.
Result<PackModels> fit_pack_models(const analysis::Workload& base, const Packing& packing,
                                   const std::vector<ProfiledRun>& runs, const device::DeviceProfile& profile,
                                   const FitOptions& options = {});

// fit_pack_models() over the processes of a run, each with its own GPUs' packing (PackingPart::mine) and
// runs digested over the parts (digest_run_part(); energy logs of its own ranks, in their order): the
// signatures' times are summed over every process's GPUs (in whole nanoseconds, so the same whichever
// process adds first), so every process fits the step's signature models; each fits its own GPUs'
// corrections (gpus[i]: mine.gpus[i]'s) and overlaps (PackModels::Overlap's atoms: mine.atoms indices).
// The same models as fit_pack_models() of the whole step, for those GPUs. Every process calls it; an
// Error on every process where any fails.
Result<PackModels> fit_pack_models_part(const Packing& mine, const std::vector<ProfiledRun>& runs,
                                        const device::DeviceProfile& profile, dist::Comm& comm,
                                        const FitOptions& options = {});

}  // namespace emo::pack
