// Collectives' transfer times from a topology (DESIGN.md §9): hosts, GPUs per host, the link within a host
// (NVLink) and between hosts (the network), and the algorithm NCCL would pick. A collective's transfer
// time follows its message size, its kind, its members' placement and the links they cross, in the
// alpha-beta form NCCL's own tuning model uses (docs/replay.md, "Topology"). `emo whatif --topology`
// replays the step with its matched collectives' transfers at these times; the model is checked against
// the trace's measured transfers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "emo/base/result.h"

namespace emo::analysis {

struct Workload;

struct Link {
  double bandwidth_gb_s = 0;  // per GPU, bus bandwidth (10^9 bytes/s)
  double latency_us = 0;      // per step of the algorithm
};

enum class Algorithm : uint8_t { kRing, kTree, kAuto };

struct Topology {
  std::string source;      // the file it came from (messages)
  int gpus_per_host = 8;
  int hosts = 0;           // 0: as many as the ranks need
  Link intra;              // within a host
  Link inter;              // between hosts
  double base_latency_us = 0;  // once per collective, whatever its links (NCCL's launch and set-up)
  Algorithm algorithm = Algorithm::kAuto;  // all-reduce only; the others are rings
  std::vector<int> placement;  // host of each rank number; empty: rank / gpus_per_host
  // The host of rank number `rank`, or -1 when the topology does not hold it.
  int host_of(int rank) const;
};

// The file's JSON:
//   {"gpus_per_host": 8, "hosts": 2,
//    "intra_host": {"bandwidth_gb_s": 150, "latency_us": 5},
//    "inter_host": {"bandwidth_gb_s": 25, "latency_us": 10},
//    "base_latency_us": 6,                 (optional, default 0: once per collective)
//    "algorithm": "ring" | "tree" | "auto",
//    "placement": [0, 0, 1, 1, ...]}       (optional: the host of rank 0, 1, ...)
// Errors name the file and the field.
Result<Topology> topology_from_json(std::string_view text, const std::string& where);
Result<Topology> load_topology(const std::string& path);

enum class CollectiveKind : uint8_t {
  kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kReduce, kPointToPoint, kBarrier, kUnknown
};
const char* to_string(CollectiveKind k);
// From the trace's "Collective name" ("allreduce", "_allgather_base", "reduce_scatter_tensor", ...), else
// from an NCCL kernel's name (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_SendRecv, ...).
CollectiveKind collective_kind(std::string_view collective_name, std::string_view kernel_name);
// Bytes of one element of a trace's dtype ("Float", "BFloat16", "Long", ...); 0 when unknown.
int dtype_bytes(std::string_view dtype);

// One collective as the model sees it.
struct CollectiveShape {
  CollectiveKind kind = CollectiveKind::kUnknown;
  int64_t bytes = 0;          // the buffer: an all-gather's output, the others' input
  std::vector<int> members;   // rank numbers
};
// Transfer time on `t`, ns; an Error when a member is not in the topology.
Result<double> transfer_ns(const Topology& t, const CollectiveShape& c);

// The step's collectives against a topology.
struct TopologyCollective {
  uint32_t node = 0;          // the graph's kCollective node (matched ones); its measured transfer
  CollectiveShape shape;
  double measured_ns = 0;     // the transfer, as recorded (last arrival to first end)
  double modeled_ns = 0;      // on the recorded machine's topology (or the asked one, when none is given)
  double predicted_ns = 0;    // the transfer the what-if replays
};
// A link's bandwidth, latency per step and base latency per collective fitted to the measured
// transfers of the collectives that cross it (least squares on relative error, each term >= 0): what a topology file for the machine recorded
// would say, from the trace itself.
struct FittedLink {
  std::string link;        // "intra_host" or "inter_host"
  int64_t collectives = 0;
  Link fitted;
  double base_latency_us = 0;
  double median_error_pct = 0;  // of the fitted model against the measured transfers
};
struct TopologyReport {
  std::string file, recorded_file;   // recorded_file empty: absolute model times
  std::vector<TopologyCollective> collectives;  // matched, with a kind and a message size
  int64_t without_size = 0;   // matched collectives whose trace gives no message size or kind: kept as measured
  int64_t unmatched = 0;      // collective kernels matched to no peer: their time mixes waiting, kept
  double median_error_pct = 0;  // |modeled − measured| / measured over `collectives`
  double worst_error_pct = 0;
  std::vector<FittedLink> fitted;  // per link with at least 2 collectives and a fit
  // Unmatched collective kernels with a kind and a size (one rank of a job: their time holds the wait for
  // the peers), members taken as ranks 0 .. group size − 1: a kernel shorter than its modeled transfer
  // says the model is too slow for the machine recorded.
  int64_t unmatched_modeled = 0;
  int64_t unmatched_faster_than_model = 0;
};

// Beyond this median error the model is said not to describe the machine recorded (a warning).
inline constexpr double kTopologyDoubtPct = 25.0;

// The transfer durations the what-if replays (the graph's dur_ns with the matched collectives' transfers
// replaced), and the report. With `recorded`, each transfer is its measured time × model(asked) /
// model(recorded), which keeps what the model misses; without, the model's own time on `asked`.
struct TopologyWhatIf {
  std::vector<int64_t> dur_ns;
  TopologyReport report;
};
Result<TopologyWhatIf> topology_durations(const Workload& w, const Topology& asked, const Topology* recorded);

nlohmann::json to_json(const TopologyReport& r);
// The warning of a model far from the measured transfers, empty when it is close (or nothing to check).
std::string topology_warning(const TopologyReport& r);

}  // namespace emo::analysis
