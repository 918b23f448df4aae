// A small discrete-event model of PyTorch + CUDA on every rank at once: a CPU
// thread that issues ops and runtime calls, in-order GPU streams, events,
// syncs and NCCL collectives that end when the slowest rank has arrived.
// Workload programs call the operations below once; each is applied to all
// ranks in lockstep, so collectives see every rank's arrival time, and each
// rank's events are written to its KinetoWriter as soon as they are known.
// Programs that differ by rank (pipeline stages) select one rank with only(),
// run it up to a collective (arrive) and complete the collective once every
// member of its process group has arrived.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kineto_writer.h"

namespace emo::synth::detail {

// Deterministic noise: raw std::mt19937_64 output (fully specified by the C++
// standard) turned into numbers with plain arithmetic, so the same seed gives
// the same bytes with any standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double uniform() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Approximately standard normal (Irwin–Hall of four uniforms, variance 1).
  double normal() { return (uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508075688772; }

 private:
  std::mt19937_64 gen_;
};

uint64_t mix_seed(uint64_t seed, uint64_t stream);

// Kernel catalog entry: JSON-escaped name and the launch-geometry args.
struct KernelDef {
  std::string name;         // escaped
  std::string launch_args;  // "\"registers per thread\": 168, ... \"est. achieved occupancy %\": 0"
};

// Names of CPU ranges, interned on first use (keys are string literals).
class NameTable {
 public:
  uint32_t id(std::string_view literal);
  uint32_t add(const std::string& name);  // dynamic names (ProfilerStep#N)
  const std::string& text(uint32_t id) const { return escaped_[id]; }

 private:
  std::unordered_map<std::string_view, uint32_t> index_;
  std::vector<std::string> escaped_;
};

enum class RangeCat : uint8_t { kCpuOp, kUserAnnotation };
enum class LaunchApi : uint8_t { kLaunchKernel, kLaunchKernelExC };
enum class CopyKind : uint8_t { kHtoD, kDtoH, kDtoD };

// What a collective kernel does; decides its transfer time and the
// "Collective name" PyTorch writes ("allreduce", "broadcast", "send", "recv",
// "coalesced" for a batched send+recv with one peer).
enum class Coll : uint8_t { kAllReduce, kBroadcast, kSend, kRecv, kCoalesced };
const char* coll_name(Coll c);

inline constexpr int kComputeStream = 7;
inline constexpr int kCommStream = 24;
inline constexpr int kP2pPrevStream = 28;  // NCCL stream of the communicator with the previous stage
inline constexpr int kP2pNextStream = 30;  // ... with the next stage
inline constexpr int kMaxStreams = 32;
inline constexpr int kNoArgs = -1;

// Process id of a rank's Python process (its main thread has the same id) and
// its GPU: eight GPUs per node, one process per GPU.
inline int64_t rank_pid(int rank) { return 2400000 + 1013 * static_cast<int64_t>(rank); }
inline int rank_device(int rank) { return rank % 8; }

// A process group: "Process Group Name" / "Process Group Description" and its
// member ranks. Group 0 is always the default group of all ranks.
struct GroupDef {
  std::string name;
  std::string desc;
  std::vector<int> ranks;
};
// distributedInfo.pg_config of every rank: the default group, then `extra`.
std::vector<GroupDef> process_groups(int ranks, const std::vector<GroupDef>& extra);

struct SimConfig {
  int ranks = 1;
  std::vector<GroupDef> groups;  // from process_groups(); empty: the default group only
  uint64_t seed = 1;
  std::vector<KinetoWriter*> writers;  // one per rank; may be counting-only
  const std::vector<KernelDef>* kernels = nullptr;
  NameTable* names = nullptr;
  const std::vector<std::string>* args = nullptr;  // extra cpu_op args texts (record_shapes)
};

class Sim {
 public:
  explicit Sim(SimConfig config);

  // CPU ranges on the main thread: `pre_us` of CPU work before the first child,
  // `post_us` after the last one. The range is written when it closes.
  void push(RangeCat cat, uint32_t name, double pre_us, int args = kNoArgs);
  // record_param_comms of the next collective of `group` (it carries that Seq).
  void push_comms(uint32_t name, double pre_us, int64_t nelems, int group = 0, Coll coll = Coll::kAllReduce);
  void pop(double post_us);
  void cpu(double us);  // CPU time between ops (Python) that no event covers
  // CPU time that varies more between ranks and calls than cpu() does (a
  // dataloader's wait for its workers): `us` times a log-normal factor of
  // spread `sigma`, clamped to [0.5, 2].
  void cpu_varied(double us, double sigma);
  // Later operations apply to `rank` alone; -1 returns to all ranks in lockstep.
  void only(int rank) { only_ = rank; }

  void launch(int kernel, double gpu_us, int stream = kComputeStream,
              LaunchApi api = LaunchApi::kLaunchKernel);
  void memcpy(CopyKind kind, int64_t bytes, int stream = kComputeStream);
  void memset(int64_t bytes, int stream = kComputeStream);
  void record(int stream, int slot);
  void wait(int stream, int slot);
  void stream_sync(int stream);
  void event_sync(int slot);
  void device_sync();
  // NCCL collective kernel: starts on each rank when it gets there, ends when the
  // last rank has arrived plus the transfer time. The group's Seq increments per call.
  void collective(int kernel, int stream, int64_t nelems, int64_t bytes, int group = 0,
                  Coll coll = Coll::kAllReduce);
  // The two halves of collective() for programs that run one rank at a time:
  // arrive() launches the kernel on the selected rank(s); once every member of
  // the group has arrived, complete() ends it on all of them and writes it.
  void arrive(int kernel, int stream, int64_t nelems, int64_t bytes, int group, Coll coll);
  bool arrived_all(int group) const;
  void complete(int group);

  // Writes the footer of every rank's trace (metadata, profiler span, closing keys).
  void finish(const std::vector<std::string>& trace_names);
  int ranks() const { return static_cast<int>(ranks_.size()); }

 private:
  struct Range {
    uint32_t name;
    RangeCat cat;
    int args;
    int group;  // record_param_comms: its process group; -1 otherwise
    Coll coll;
    int64_t nelems;
    int64_t seq;
    int64_t start;
    int64_t ext_id;
    int64_t ev_idx;
  };
  struct EventRec {
    int64_t time = 0;  // GPU time at which the recorded event completes
    int64_t corr = -1;
    int stream = -1;
  };
  struct Rank {
    int rank = 0;
    int device = 0;
    int64_t pid = 0;
    Rng rng{1};
    double gpu_speed = 1.0;  // per-rank factor on GPU durations (one rank is the straggler)
    int64_t now = 0;         // CPU clock, ns
    int64_t first = 0, last = 0;
    int64_t stream_free[kMaxStreams] = {};
    bool stream_used[kMaxStreams] = {};
    // End times of the last kQueueDepth ops per stream: a launch blocks while
    // the stream already holds that many unfinished ops, as CUDA's queue does.
    std::vector<int64_t> queue[kMaxStreams];
    size_t queue_head[kMaxStreams] = {};
    std::vector<Range> stack;
    std::vector<EventRec> events;
    int64_t next_corr = 0, next_ext = 0, next_ev = 0;
    KinetoWriter* out = nullptr;
    // Collective in flight between arrive() and complete().
    int64_t pending_start = 0, pending_launch = 0, pending_api = 0, pending_corr = 0;
    int64_t pending_nelems = 0, pending_bytes = 0;
    int pending_group = -1, pending_kernel = 0, pending_stream = 0;
    Coll pending_coll = Coll::kAllReduce;
  };
  struct Group {
    GroupDef def;
    std::string ranks_text;  // "[0, 1]"
    int64_t seq = 1;
  };

  std::span<Rank> active() {
    return only_ < 0 ? std::span<Rank>(ranks_) : std::span<Rank>(&ranks_[static_cast<size_t>(only_)], 1);
  }
  int64_t cpu_ns(Rank& r, double us);
  int64_t gpu_ns(Rank& r, double us);
  int64_t ext_of(const Rank& r) const;
  int64_t enqueue(Rank& r, int stream, int64_t earliest, int64_t dur);  // returns start
  int64_t launch_block(Rank& r, int stream, int64_t t_call);
  EventRec& slot(Rank& r, int s);
  void touch(Rank& r, int64_t t) {
    if (t > r.last) r.last = t;
  }

  SimConfig cfg_;
  std::vector<Rank> ranks_;
  std::vector<Group> groups_;
  Rng world_rng_;
  int only_ = -1;
};

}  // namespace emo::synth::detail
