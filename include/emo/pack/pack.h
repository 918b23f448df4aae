// Dependency-aware kernel packing (DESIGN.md §3). The SM clock belongs to a whole GPU, so a pack is a
// contiguous segment of one GPU's timeline of the step. Each GPU's ops (index order: start time in the
// trace, ties by stream) are first cut into *atoms*: maximal runs of ops with the same slack class
// (on / off the critical path) and boundness (compute / memory / communication), with long idle gaps as
// atoms of their own. Atoms with the same op sequence (names and streams) share a *signature*: one
// model, profiled once. Atoms are then grouped into packs no shorter than a multiple of the device's
// clock-switching latency, cutting where the class changes once a pack is long enough.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/analysis/analysis.h"
#include "emo/base/ids.h"
#include "emo/base/result.h"
#include "emo/device/profile.h"
#include "emo/dist/dist.h"
#include "emo/graph/part.h"
#include "emo/replay/distributed.h"

namespace emo::pack {

enum class SlackClass : uint8_t { kCritical, kSlackRich };
enum class Boundness : uint8_t { kCompute, kMemory, kCommunication, kIdle };
const char* to_string(SlackClass c);
const char* to_string(Boundness b);

// Boundness of a GPU op from its name (model::classify_kernel_name, emo/model/kernel_names.h; profiling
// refines it); a copy is memory-bound whatever its name.
Boundness boundness_of_name(std::string_view name, bool is_copy);

// Every rank's GPU ops (kernels, memcpy, memset) in index order: measured start time, ties broken by
// stream id — the order the policy file's `index` counts in (DESIGN.md §6).
std::vector<std::vector<graph::NodeId>> gpu_ops_in_index_order(const graph::Graph& g);

struct PackOptions {
  double min_switch_multiple = 1.0;  // packs last at least this × the switching latency (median)
  int64_t min_pack_ns = -1;          // overrides the above when >= 0
  int64_t critical_slack_ns = 50000;  // an op with at most this much slack is on the critical path
  int64_t idle_gap_ns = 1000000;     // idle gaps at least this long are atoms of their own
  bool split_slack = true;           // cut atoms where the slack class changes
  bool split_boundness = true;       // cut atoms where the boundness changes
  // Kernel-level: every GPU op is an atom and a pack of its own (no minimum length) — the reference
  // that measures what packing costs in energy; signatures are then per kernel name and stream.
  bool per_kernel = false;
  int profile_clocks = 4;            // clocks in the profiling plan (see plan_clocks)
  int64_t profile_window_ns = 2000000000;  // energy-counter window per profiled clock
  // A run replays at most this many graph nodes (steps × the step's nodes; the emulator's bound,
  // emulator::kMaxRunNodeSteps): a short step with many ops gets fewer steps, so a shorter window,
  // down to kMinProfileWindowNs. 0: no bound.
  int64_t max_plan_node_steps = 200'000'000;
};

// The shortest window a profiled clock may have: ten updates of a 20 ms energy counter.
inline constexpr int64_t kMinProfileWindowNs = 200'000'000;

// Ids that cross from the packing into the models, the optimizer and the evaluation (strong types,
// include/emo/base/ids.h): a signature's place in Packing::signatures and a pack's in Packing::packs.
// A GPU is named by its rank's graph::RankIndex: Packing::gpus has one entry per rank, in rank order.
using SignatureIndex = StrongId<struct SignatureTag>;
using PackIndex = StrongId<struct PackTag>;

// One GPU of the step (Packing::gpus[rank]): its ops in index order.
struct GpuOps {
  graph::RankIndex rank;
  int rank_id = 0;  // its rank number in the job (graph::Graph::rank_id)
  std::vector<graph::NodeId> ops;
  std::vector<uint32_t> occurrence;  // per op: earlier ops with the same name on the same stream
};

struct Atom {
  graph::RankIndex rank;             // its GPU: Packing::gpus[rank]
  uint32_t first = 0, last = 0;      // op indices (inclusive); first > last for an idle atom
  int64_t begin_ns = 0, end_ns = 0;  // replayed (= measured) times, from the step's start
  int64_t busy_ns = 0;               // union of its ops' intervals
  int64_t op_ns = 0;                 // sum of its ops' durations
  SlackClass slack = SlackClass::kSlackRich;
  Boundness bound = Boundness::kIdle;
  SignatureIndex signature;          // Packing::signatures[signature]
};

// A signature's hash is over its ops' names (their characters) and streams: the same in any graph that
// holds the ops, a process's part of the step (make_packs_part) or the whole step.
struct Signature {
  uint64_t hash = 0;
  uint32_t members = 0;
  uint32_t ops = 0;           // ops per member
  Boundness bound = Boundness::kIdle;
  std::string first_name;     // for reports
};

struct Pack {
  graph::RankIndex rank;  // its GPU: Packing::gpus[rank]
  uint32_t first_atom = 0, last_atom = 0;
  uint32_t first_op = 0, last_op = 0;  // op indices; first_op > last_op: a pack of idle time only
  int64_t begin_ns = 0, end_ns = 0;
  int64_t busy_ns = 0;
  SlackClass slack = SlackClass::kSlackRich;  // critical when any critical time dominates the busy time
  Boundness bound = Boundness::kIdle;
  uint64_t signature = 0;  // hash of its atoms' signatures (repeated packs share it)
  std::string first_name;  // its first op's name (empty for idle time only), for reports
};

struct Packing {
  std::vector<GpuOps> gpus;
  std::vector<Atom> atoms;
  std::vector<Signature> signatures;
  std::vector<Pack> packs;
  int64_t step_begin_ns = 0;  // replayed step start (graph clock)
  int64_t step_ns = 0;
  int64_t min_pack_ns = 0;
  // Profiling plan and its cost.
  std::vector<int> plan_clocks_mhz;
  int64_t kernel_ops = 0;       // GPU ops in the step (all GPUs)
  int64_t kernel_units = 0;     // kernel_ops × plan clocks: per-kernel profiling
  int64_t profiled_units = 0;   // signatures × plan clocks
  int plan_steps = 0;           // steps run per profiled clock
  bool plan_steps_bounded = false;  // fewer steps than profile_window_ns asks for (max_plan_node_steps)
  int64_t plan_window_ns = 0;   // plan_steps × step_ns
  int64_t profiling_gpu_ns = 0;  // GPU time of the profiling runs the plan needs
  // Replicas: GPUs that run the same ops (names, streams) in the same order (data-parallel ranks).
  // Signatures are the work, not its slack class, so a replica's atoms share the others' signatures:
  // one model each, profiled once whatever the set's size. replica_set[rank] = the set's index (sets
  // numbered by their first GPU); replica_sets = their count.
  std::vector<uint32_t> replica_set;
  int64_t replica_sets = 0;
  int64_t per_gpu_units = 0;  // Σ over GPUs of that GPU's distinct signatures × plan clocks: each GPU on its own
  double reduction() const { return profiled_units > 0 ? double(kernel_units) / double(profiled_units) : 0; }
};

// Two atoms of a GPU that run at once (a collective on one stream beside compute on another): for `ns`
// their ops' intervals overlap. `first` < `second` (Packing::atoms indices).
struct AtomOverlap {
  uint32_t first = 0, second = 0;
  int64_t ns = 0;
};
// Every such pair and its time, from the ops' [start, end) in `spans` (per GPU, Packing::gpus[r].ops
// order: a profiled run's digest, or the replayed step's), by `first` then `second`. Ops of one atom
// are one busy interval already (Atom::busy_ns) and are not counted.
std::vector<AtomOverlap> atom_overlaps(const Packing& p, const std::vector<std::vector<std::pair<int64_t, int64_t>>>& spans);

Result<Packing> make_packs(const analysis::Workload& w, const analysis::Analysis& a,
                           const device::DeviceProfile& profile, const PackOptions& options = {});

// make_packs() over the processes of a run (DESIGN.md §9, docs/mpi.md), each with the part of the step it
// built of its own ranks (graph::build_part) and analyze_part()'s slack and replayed timeline for it: each
// process packs its own GPUs from the shared replay's times; the processes then exchange their signatures (hash, members, ops)
// and each GPU's replica key, so every process has the step's signature table, replica sets, plan and
// units; process 0 also gathers every GPU's atoms and packs (compact records) into the whole step's
// Packing, the same as make_packs() on the whole step for the reports (its GpuOps without ops: those are
// node ids of another process's part). Every process of the run calls it; an Error on every process where
// the options or the step are bad (the same error as make_packs()'s).
struct PackingPart {
  // This process's GPUs (GpuOps::rank: the part's rank index), their atoms and packs (Atom::signature:
  // an index into the step's table); the signatures, replica_set (its GPUs'), replica_sets, plan, units
  // and the step's times are the whole step's.
  Packing mine;
  std::optional<Packing> whole;  // on process 0: every GPU's
};
Result<PackingPart> make_packs_part(const graph::GraphPart& part, const analysis::Analysis& a,
                                    const replay::ShardTimeline& replayed, const device::DeviceProfile& profile,
                                    const PackOptions& options, dist::Comm& comm);

// The profiling plan: `n` clocks from the device's table, the default clock first, then spread down to
// ~0.5·f_max (lower clocks rarely save energy and only stretch the runs). With 4 or more, the second
// lies midway between the voltage knee and f_max, the only place where the knee shows in the measured
// step energies (H100: 1980, 1785, 1320, 990 MHz).
std::vector<int> plan_clocks(const device::DeviceProfile& profile, int n);

nlohmann::json to_json(const Packing& p, bool list_packs);
std::string to_text(const Packing& p);
// One row per pack; with `clocks` (one per pack: a policy's), a last column clock_mhz.
std::string packs_csv(const Packing& p, const std::vector<int>* clocks = nullptr);

}  // namespace emo::pack
