// A small discrete-event model of PyTorch + CUDA on every rank at once: a CPU
// thread that issues ops and runtime calls, in-order GPU streams, events,
// syncs and NCCL collectives that end when the slowest rank has arrived.
// Workload programs call the operations below once; each is applied to all
// ranks in lockstep, so collectives see every rank's arrival time, and each
// rank's events are written to its KinetoWriter as soon as they are known.
#pragma once

#include <cstdint>
#include <random>
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

inline constexpr int kComputeStream = 7;
inline constexpr int kCommStream = 24;
inline constexpr int kMaxStreams = 32;
inline constexpr int kNoArgs = -1;

// Process id of a rank's Python process (its main thread has the same id) and
// its GPU: eight GPUs per node, one process per GPU.
inline int64_t rank_pid(int rank) { return 2400000 + 1013 * static_cast<int64_t>(rank); }
inline int rank_device(int rank) { return rank % 8; }

struct SimConfig {
  int ranks = 1;
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
  void push_comms(uint32_t name, double pre_us, int64_t nelems);  // record_param_comms
  void pop(double post_us);
  void cpu(double us);  // CPU time between ops (Python) that no event covers

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
  // last rank has arrived plus the transfer time. `seq` increments per call.
  void collective(int kernel, int stream, int64_t nelems, int64_t bytes);

  // Writes the footer of every rank's trace (metadata, profiler span, closing keys).
  void finish(const std::vector<std::string>& trace_names);
  int ranks() const { return static_cast<int>(ranks_.size()); }
  int64_t next_seq() const { return seq_; }

 private:
  struct Range {
    uint32_t name;
    RangeCat cat;
    int args;
    bool comms;
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
    // Collective in flight between the two lockstep phases.
    int64_t pending_start = 0, pending_launch = 0, pending_api = 0, pending_corr = 0;
  };

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
  Rng world_rng_;
  int64_t seq_ = 1;
  std::string ranks_text_;
};

}  // namespace emo::synth::detail
