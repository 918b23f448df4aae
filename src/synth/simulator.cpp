// The lockstep CPU/GPU model behind `emo synth`. Timing rules, all in integer
// nanoseconds (printed exactly as µs with three decimals):
//   GPU op start = max(launch call start + launch latency (4-8 µs),
//                      previous op end on the stream + ~1 µs, any awaited event);
//   a blocking sync returns a few µs after the GPU work it waits for ends;
//   a collective ends at max over ranks of the arrival + transfer time.
#include "simulator.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace emo::synth::detail {
namespace {

constexpr size_t kQueueDepth = 1024;  // pending launches a CUDA stream accepts before blocking
constexpr int64_t kStartNs = 2'000'000;

int64_t to_ns(double us) { return static_cast<int64_t>(std::llround(us * 1000.0)); }

}  // namespace

uint64_t mix_seed(uint64_t seed, uint64_t stream) {
  // splitmix64 of (seed, stream): decorrelates the per-rank generators.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::kAllReduce: return "allreduce";
    case Coll::kBroadcast: return "broadcast";
    case Coll::kSend: return "send";
    case Coll::kRecv: return "recv";
    case Coll::kCoalesced: return "coalesced";
  }
  return "allreduce";
}

std::vector<GroupDef> process_groups(int ranks, const std::vector<GroupDef>& extra) {
  GroupDef all{"0", "default_pg", {}};
  for (int r = 0; r < ranks; ++r) all.ranks.push_back(r);
  std::vector<GroupDef> out{all};
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

uint32_t NameTable::id(std::string_view literal) {
  auto it = index_.find(literal);
  if (it != index_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(escaped_.size());
  escaped_.push_back(json_escape(literal));
  index_.emplace(literal, id);
  return id;
}

uint32_t NameTable::add(const std::string& name) {
  escaped_.push_back(json_escape(name));
  return static_cast<uint32_t>(escaped_.size() - 1);
}

Sim::Sim(SimConfig config) : cfg_(std::move(config)), world_rng_(mix_seed(cfg_.seed, 0xC0FFEE)) {
  ranks_.resize(static_cast<size_t>(cfg_.ranks));
  for (int i = 0; i < cfg_.ranks; ++i) {
    Rank& r = ranks_[static_cast<size_t>(i)];
    r.rank = i;
    r.device = rank_device(i);
    r.pid = rank_pid(i);
    r.rng = Rng(mix_seed(cfg_.seed, static_cast<uint64_t>(i) + 1));
    // A persistent ±1 % speed difference: some rank is always the straggler
    // that the others wait for at each collective.
    r.gpu_speed = std::clamp(1.0 + 0.012 * world_rng_.normal(), 0.96, 1.04);
    r.now = kStartNs + to_ns(r.rng.uniform(0.0, 40.0));
    r.first = r.now;
    r.last = r.now;
    r.next_corr = 1000;
    r.next_ext = 1;
    r.out = cfg_.writers[static_cast<size_t>(i)];
  }
  if (cfg_.groups.empty()) cfg_.groups = process_groups(cfg_.ranks, {});
  for (const GroupDef& def : cfg_.groups) {
    fmt::memory_buffer text;
    text.push_back('[');
    for (size_t i = 0; i < def.ranks.size(); ++i) {
      fmt::format_to(fmt::appender(text), "{}{}", i ? ", " : "", def.ranks[i]);
    }
    text.push_back(']');
    groups_.push_back(Group{def, fmt::to_string(text), 1});
  }
}

int64_t Sim::cpu_ns(Rank& r, double us) {
  // CPU work is noisy (caches, the Python interpreter): ±10 %.
  double f = std::clamp(1.0 + 0.10 * r.rng.normal(), 0.6, 1.8);
  return to_ns(us * f);
}

int64_t Sim::gpu_ns(Rank& r, double us) {
  double f = std::clamp(1.0 + 0.02 * r.rng.normal(), 0.9, 1.15);
  return std::max<int64_t>(500, to_ns(us * f * r.gpu_speed));
}

int64_t Sim::ext_of(const Rank& r) const {
  // Kineto attributes a runtime call to the innermost operator; user
  // annotations (ProfilerStep#N, nccl:all_reduce) only when no op is open.
  for (auto it = r.stack.rbegin(); it != r.stack.rend(); ++it) {
    if (it->cat == RangeCat::kCpuOp) return it->ext_id;
  }
  return r.stack.empty() ? 0 : r.stack.back().ext_id;
}

int64_t Sim::launch_block(Rank& r, int stream, int64_t t_call) {
  auto& q = r.queue[stream];
  if (q.empty()) q.assign(kQueueDepth, 0);
  int64_t oldest = q[r.queue_head[stream]];
  return oldest > t_call ? oldest : t_call;
}

int64_t Sim::enqueue(Rank& r, int stream, int64_t earliest, int64_t dur) {
  r.stream_used[stream] = true;
  int64_t start = earliest;
  int64_t after_prev = r.stream_free[stream] + to_ns(r.rng.uniform(0.8, 1.6));
  if (after_prev > start) start = after_prev;
  r.stream_free[stream] = start + dur;
  auto& q = r.queue[stream];
  if (q.empty()) q.assign(kQueueDepth, 0);
  q[r.queue_head[stream]] = start + dur;
  r.queue_head[stream] = (r.queue_head[stream] + 1) % kQueueDepth;
  touch(r, start + dur);
  return start;
}

Sim::EventRec& Sim::slot(Rank& r, int s) {
  if (static_cast<size_t>(s) >= r.events.size()) r.events.resize(static_cast<size_t>(s) + 1);
  return r.events[static_cast<size_t>(s)];
}

void Sim::push(RangeCat cat, uint32_t name, double pre_us, int args) {
  for (Rank& r : active()) {
    r.stack.push_back(Range{name, cat, args, -1, Coll::kAllReduce, 0, 0, r.now, r.next_ext++, r.next_ev++});
    r.now += cpu_ns(r, pre_us);
  }
}

void Sim::push_comms(uint32_t name, double pre_us, int64_t nelems, int group, Coll coll) {
  const int64_t seq = groups_[static_cast<size_t>(group)].seq;
  for (Rank& r : active()) {
    r.stack.push_back(
        Range{name, RangeCat::kCpuOp, kNoArgs, group, coll, nelems, seq, r.now, r.next_ext++, r.next_ev++});
    r.now += cpu_ns(r, pre_us);
  }
}

void Sim::pop(double post_us) {
  for (Rank& r : active()) {
    r.now += cpu_ns(r, post_us);
    Range g = r.stack.back();
    r.stack.pop_back();
    CollectiveMeta meta;
    if (g.group >= 0) {
      const Group& grp = groups_[static_cast<size_t>(g.group)];
      meta = CollectiveMeta{coll_name(g.coll), g.nelems, static_cast<int>(grp.def.ranks.size()), g.seq,
                            grp.ranks_text, grp.def.name, grp.def.desc, grp.def.ranks.front()};
    }
    std::string_view extra;
    if (g.args >= 0) extra = (*cfg_.args)[static_cast<size_t>(g.args)];
    r.out->cpu_range(g.cat == RangeCat::kCpuOp ? "cpu_op" : "user_annotation",
                     cfg_.names->text(g.name), g.start, r.now - g.start, g.ext_id, g.ev_idx, extra,
                     g.group >= 0 ? &meta : nullptr);
    touch(r, r.now);
  }
}

void Sim::cpu(double us) {
  for (Rank& r : active()) r.now += cpu_ns(r, us);
}

void Sim::cpu_varied(double us, double sigma) {
  for (Rank& r : active()) {
    double f = std::clamp(std::exp(sigma * r.rng.normal()), 0.5, 2.0);
    r.now += to_ns(us * f);
  }
}

void Sim::launch(int kernel, double gpu_us, int stream, LaunchApi api) {
  const KernelDef& k = (*cfg_.kernels)[static_cast<size_t>(kernel)];
  const bool exc = api == LaunchApi::kLaunchKernelExC;
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t api_ns = cpu_ns(r, exc ? 7.0 : 5.5);
    int64_t corr = r.next_corr++;
    int64_t lat = to_ns(r.rng.uniform(4.0, 8.0));
    int64_t dur = gpu_ns(r, gpu_us);
    int64_t unblocked = launch_block(r, stream, t0);
    int64_t start = enqueue(r, stream, std::max(t0 + lat, unblocked), dur);
    int64_t api_end = std::max(t0 + api_ns, unblocked + to_ns(r.rng.uniform(0.5, 1.5)));
    r.now = api_end;
    int64_t ext = ext_of(r);
    r.out->runtime(exc ? "cudaLaunchKernelExC" : "cudaLaunchKernel", t0, api_end - t0, ext,
                   exc ? 430 : 211, corr);
    r.out->flow_start(corr, t0);
    r.out->kernel(k.name, k.launch_args, start, dur, ext, stream, corr, nullptr);
    r.out->flow_finish(corr, start, stream);
  }
}

void Sim::memcpy(CopyKind kind, int64_t bytes, int stream) {
  const char* name = kind == CopyKind::kHtoD   ? "Memcpy HtoD (Pinned -> Device)"
                     : kind == CopyKind::kDtoH ? "Memcpy DtoH (Device -> Pinned)"
                                               : "Memcpy DtoD (Device -> Device)";
  // PCIe Gen5 pinned copies ~45 GB/s; device-to-device ~1.2 TB/s.
  const double bytes_per_us = kind == CopyKind::kDtoD ? 1.2e6 : 4.5e4;
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t api_ns = cpu_ns(r, kind == CopyKind::kDtoH ? 5.0 : 7.0);
    int64_t corr = r.next_corr++;
    int64_t lat = to_ns(r.rng.uniform(3.0, 6.0));
    int64_t dur = gpu_ns(r, 1.2 + static_cast<double>(bytes) / bytes_per_us);
    int64_t unblocked = launch_block(r, stream, t0);
    int64_t start = enqueue(r, stream, std::max(t0 + lat, unblocked), dur);
    int64_t api_end = std::max(t0 + api_ns, unblocked + to_ns(r.rng.uniform(0.5, 1.5)));
    r.now = api_end;
    int64_t ext = ext_of(r);
    r.out->runtime("cudaMemcpyAsync", t0, api_end - t0, ext, 41, corr);
    r.out->flow_start(corr, t0);
    r.out->memcpy(name, start, dur, ext, stream, corr, bytes);
    r.out->flow_finish(corr, start, stream);
  }
}

void Sim::memset(int64_t bytes, int stream) {
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t api_ns = cpu_ns(r, 6.0);
    int64_t corr = r.next_corr++;
    int64_t lat = to_ns(r.rng.uniform(3.0, 6.0));
    int64_t dur = gpu_ns(r, 1.0 + static_cast<double>(bytes) / 2.0e6);
    int64_t unblocked = launch_block(r, stream, t0);
    int64_t start = enqueue(r, stream, std::max(t0 + lat, unblocked), dur);
    int64_t api_end = std::max(t0 + api_ns, unblocked + to_ns(r.rng.uniform(0.5, 1.5)));
    r.now = api_end;
    int64_t ext = ext_of(r);
    r.out->runtime("cudaMemsetAsync", t0, api_end - t0, ext, 51, corr);
    r.out->flow_start(corr, t0);
    r.out->memset(start, dur, ext, stream, corr, bytes);
    r.out->flow_finish(corr, start, stream);
  }
}

void Sim::record(int stream, int s) {
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t api_ns = cpu_ns(r, 2.0);
    int64_t corr = r.next_corr++;
    EventRec& ev = slot(r, s);
    // The event completes when the stream has drained the work before it.
    ev.time = std::max(r.stream_free[stream], t0 + to_ns(r.rng.uniform(1.0, 2.0)));
    ev.corr = corr;
    ev.stream = stream;
    r.stream_used[stream] = true;
    r.now = t0 + api_ns;
    r.out->runtime("cudaEventRecord", t0, api_ns, ext_of(r), 135, corr);
  }
}

void Sim::wait(int stream, int s) {
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t api_ns = cpu_ns(r, 2.2);
    int64_t corr = r.next_corr++;
    const EventRec& ev = slot(r, s);
    r.stream_used[stream] = true;
    r.stream_free[stream] = std::max(r.stream_free[stream], ev.time);
    r.now = t0 + api_ns;
    int64_t ext = ext_of(r);
    int64_t sts = t0 + to_ns(r.rng.uniform(0.4, 0.9));
    int64_t sdur = std::max<int64_t>(300, t0 + api_ns - sts - to_ns(r.rng.uniform(0.1, 0.4)));
    r.out->runtime("cudaStreamWaitEvent", t0, api_ns, ext, 147, corr);
    r.out->flow_start(corr, t0);
    r.out->sync("Stream Wait Event", sts, sdur, ext, stream, corr, ev.stream, ev.corr, s + 1);
    r.out->flow_finish(corr, sts, stream);
  }
}

void Sim::stream_sync(int stream) {
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t corr = r.next_corr++;
    int64_t min_ns = cpu_ns(r, 2.5);
    // The thread wakes a few µs after the last op on the stream ends.
    int64_t end = std::max(t0 + min_ns, r.stream_free[stream] + to_ns(r.rng.uniform(1.5, 4.0)));
    r.now = end;
    touch(r, end);
    int64_t ext = ext_of(r);
    int64_t sts = t0 + to_ns(r.rng.uniform(0.5, 1.0));
    int64_t sdur = std::max<int64_t>(100, end - to_ns(r.rng.uniform(0.2, 0.5)) - sts);
    r.out->runtime("cudaStreamSynchronize", t0, end - t0, ext, 131, corr);
    r.out->flow_start(corr, t0);
    r.out->sync("Stream Sync", sts, sdur, ext, stream, corr, -1, -1, -1);
    r.out->flow_finish(corr, sts, stream);
  }
}

void Sim::event_sync(int s) {
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t corr = r.next_corr++;
    const EventRec& ev = slot(r, s);
    int64_t min_ns = cpu_ns(r, 2.5);
    int64_t end = std::max(t0 + min_ns, ev.time + to_ns(r.rng.uniform(1.5, 4.0)));
    r.now = end;
    touch(r, end);
    int64_t ext = ext_of(r);
    int64_t sts = t0 + to_ns(r.rng.uniform(0.5, 1.0));
    int64_t sdur = std::max<int64_t>(100, end - to_ns(r.rng.uniform(0.2, 0.5)) - sts);
    r.out->runtime("cudaEventSynchronize", t0, end - t0, ext, 137, corr);
    r.out->flow_start(corr, t0);
    r.out->sync("Event Sync", sts, sdur, ext, -1, corr, ev.stream, ev.corr, s + 1);
    r.out->flow_finish(corr, sts, -1);
  }
}

void Sim::device_sync() {
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t corr = r.next_corr++;
    int64_t busy_until = 0;
    for (int s = 0; s < kMaxStreams; ++s) busy_until = std::max(busy_until, r.stream_free[s]);
    int64_t min_ns = cpu_ns(r, 3.0);
    int64_t end = std::max(t0 + min_ns, busy_until + to_ns(r.rng.uniform(1.5, 4.0)));
    r.now = end;
    touch(r, end);
    int64_t ext = ext_of(r);
    int64_t sts = t0 + to_ns(r.rng.uniform(0.5, 1.0));
    int64_t sdur = std::max<int64_t>(100, end - to_ns(r.rng.uniform(0.2, 0.5)) - sts);
    r.out->runtime("cudaDeviceSynchronize", t0, end - t0, ext, 165, corr);
    r.out->flow_start(corr, t0);
    r.out->sync("Context Sync", sts, sdur, ext, -1, corr, -1, -1, -1);
    r.out->flow_finish(corr, sts, -1);
  }
}

void Sim::collective(int kernel, int stream, int64_t nelems, int64_t bytes, int group, Coll coll) {
  arrive(kernel, stream, nelems, bytes, group, coll);
  complete(group);
}

void Sim::arrive(int kernel, int stream, int64_t nelems, int64_t bytes, int group, Coll coll) {
  // Every selected rank launches and its kernel starts (and spins) on arrival.
  for (Rank& r : active()) {
    int64_t t0 = r.now;
    int64_t api_ns = cpu_ns(r, 9.0);
    r.pending_corr = r.next_corr++;
    int64_t lat = to_ns(r.rng.uniform(4.0, 8.0));
    int64_t unblocked = launch_block(r, stream, t0);
    int64_t start = std::max(t0 + lat, unblocked);
    start = std::max(start, r.stream_free[stream] + to_ns(r.rng.uniform(0.8, 1.6)));
    r.pending_start = start;
    r.pending_launch = t0;
    r.pending_api = std::max(t0 + api_ns, unblocked + to_ns(r.rng.uniform(0.5, 1.5))) - t0;
    r.pending_group = group;
    r.pending_kernel = kernel;
    r.pending_stream = stream;
    r.pending_nelems = nelems;
    r.pending_bytes = bytes;
    r.pending_coll = coll;
    r.now = t0 + r.pending_api;
  }
}

bool Sim::arrived_all(int group) const {
  for (int m : groups_[static_cast<size_t>(group)].def.ranks) {
    if (ranks_[static_cast<size_t>(m)].pending_group != group) return false;
  }
  return true;
}

void Sim::complete(int group) {
  Group& grp = groups_[static_cast<size_t>(group)];
  int64_t last_arrival = 0, bytes = 0;
  for (int m : grp.def.ranks) {
    const Rank& r = ranks_[static_cast<size_t>(m)];
    last_arrival = std::max(last_arrival, r.pending_start);
    bytes = std::max(bytes, r.pending_bytes);
  }
  // The data moves once the last rank is there. Ring allreduce: 2(N-1)/N of
  // the buffer crosses each link at ~350 GB/s of bus bandwidth; a broadcast
  // moves it once; a point-to-point transfer runs at ~200 GB/s over NVLink.
  const int n = static_cast<int>(grp.def.ranks.size());
  const Coll kind = ranks_[static_cast<size_t>(grp.def.ranks[0])].pending_coll;
  const double b = static_cast<double>(bytes);
  double xfer_us = 0;
  if (kind == Coll::kAllReduce) {
    xfer_us = n == 1 ? 4.0 : 8.0 + 2.0 * std::log2(static_cast<double>(n)) + b * 2.0 * (n - 1) / n / 3.5e5;
  } else if (kind == Coll::kBroadcast) {
    xfer_us = n == 1 ? 4.0 : 8.0 + 2.0 * std::log2(static_cast<double>(n)) + b / 3.5e5;
  } else {
    xfer_us = 6.0 + b / 2.0e5;
  }
  int64_t end_all = last_arrival + to_ns(xfer_us * std::clamp(1.0 + 0.03 * world_rng_.normal(), 0.9, 1.1));
  for (int m : grp.def.ranks) {
    Rank& r = ranks_[static_cast<size_t>(m)];
    const KernelDef& k = (*cfg_.kernels)[static_cast<size_t>(r.pending_kernel)];
    const int stream = r.pending_stream;
    CollectiveMeta meta{coll_name(r.pending_coll), r.pending_nelems, n, grp.seq, grp.ranks_text,
                        grp.def.name, grp.def.desc, grp.def.ranks.front()};
    int64_t end = end_all + to_ns(r.rng.uniform(0.0, 0.6));
    int64_t start = r.pending_start;
    r.stream_used[stream] = true;
    r.stream_free[stream] = end;
    auto& q = r.queue[stream];
    q[r.queue_head[stream]] = end;
    r.queue_head[stream] = (r.queue_head[stream] + 1) % kQueueDepth;
    touch(r, end);
    int64_t ext = ext_of(r);
    r.out->runtime("cudaLaunchKernelExC", r.pending_launch, r.pending_api, ext, 430, r.pending_corr);
    r.out->flow_start(r.pending_corr, r.pending_launch);
    r.out->kernel(k.name, k.launch_args, start, end - start, ext, stream, r.pending_corr, &meta);
    r.out->flow_finish(r.pending_corr, start, stream);
    r.pending_group = -1;
  }
  ++grp.seq;
}

void Sim::finish(const std::vector<std::string>& trace_names) {
  for (Rank& r : ranks_) {
    std::vector<int> streams;
    for (int s = 0; s < kMaxStreams; ++s) {
      if (r.stream_used[s]) streams.push_back(s);
    }
    r.out->footer(streams, r.first - 20'000, r.last + 10'000,
                  trace_names[static_cast<size_t>(r.rank)]);
  }
}

}  // namespace emo::synth::detail
