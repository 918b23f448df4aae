// Packing of each GPU's timeline into atoms (class-homogeneous runs), signatures (repeated op
// sequences) and packs (atoms grouped to outlast clock switches). See emo/pack/pack.h.
#include "emo/pack/pack.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <array>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "emo/model/kernel_names.h"
#include "emo/replay/distributed.h"

namespace emo::pack {

using graph::NodeId;
using graph::NodeKind;

const char* to_string(SlackClass c) { return c == SlackClass::kCritical ? "critical" : "slack-rich"; }
const char* to_string(Boundness b) {
  switch (b) {
    case Boundness::kCompute: return "compute";
    case Boundness::kMemory: return "memory";
    case Boundness::kCommunication: return "communication";
    case Boundness::kIdle: return "idle";
  }
  return "idle";
}

Boundness boundness_of_name(std::string_view name, bool is_copy) {
  if (is_copy) return Boundness::kMemory;
  switch (model::classify_kernel_name(name).role) {
    case model::KernelRole::kCompute: return Boundness::kCompute;
    case model::KernelRole::kCommunication: return Boundness::kCommunication;
    case model::KernelRole::kMemory: break;
  }
  return Boundness::kMemory;
}

std::vector<int> plan_clocks(const device::DeviceProfile& profile, int n) {
  std::vector<int> out;
  const double hi = profile.default_clock_mhz.value;
  const double lo = std::max<double>(profile.min_clock_mhz(), 0.5 * profile.max_clock_mhz());
  std::vector<double> want;
  for (int i = 0; i < n; ++i) want.push_back(n == 1 ? hi : hi - (hi - lo) * double(i) / double(n - 1));
  // With 4 clocks or more, one lies midway between the voltage knee and f_max: the only place where
  // the knee shows in the step energies.
  const double knee = profile.voltage.knee_mhz.value;
  if (n >= 4 && knee > lo && knee < hi) want[1] = 0.5 * (knee + hi);
  for (double f : want) {
    const int c = profile.nearest_clock(f);
    if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  }
  std::sort(out.begin(), out.end(), std::greater<>());  // the default (highest) clock first
  return out;
}

std::vector<std::vector<NodeId>> gpu_ops_in_index_order(const graph::Graph& g) {
  std::vector<std::vector<NodeId>> out(g.rank_paths.size());
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (graph::is_gpu(g.kind[n])) out[g.rank[n]].push_back(n);
  }
  for (auto& ops : out) {
    std::sort(ops.begin(), ops.end(), [&](NodeId x, NodeId y) {
      if (g.meas_start_ns[x] != g.meas_start_ns[y]) return g.meas_start_ns[x] < g.meas_start_ns[y];
      return g.lanes[g.lane[x]].stream < g.lanes[g.lane[y]].stream;
    });
  }
  return out;
}

namespace {

constexpr uint64_t kFnvBasis = 1469598103934665603ull;

uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  return h;
}

uint64_t mix(uint64_t x) {  // splitmix64's finalizer
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The hash of each name a graph's ops carry, over its characters (a part's string ids are not the whole
// step's), computed once per string.
class NameHashes {
 public:
  explicit NameHashes(const graph::Graph& g) : g_(g), h_(g.strings.size(), 0), done_(g.strings.size(), 0) {}
  uint64_t operator()(NodeId n) {
    const auto id = g_.name[n];
    if (!done_[id]) {
      uint64_t h = kFnvBasis;
      for (char c : g_.strings.view(id)) h = (h ^ uint8_t(c)) * 1099511628211ull;
      h_[id] = h;
      done_[id] = 1;
    }
    return h_[id];
  }

 private:
  const graph::Graph& g_;
  std::vector<uint64_t> h_;
  std::vector<uint8_t> done_;
};

// A GPU's ops as (stream, name) by stream and then in index order, hashed two ways, and their count: GPUs
// with the same key are replicas (Packing::replica_set) — they run the same ops (names) on each stream in
// the same order, as data-parallel ranks do; how two streams interleave may differ. They differ in slack,
// hence in where their atoms split, but their kernel sequences share signatures (a signature is the work,
// not its slack class), profiled once for all. The key is the same on any process that holds the GPU.
using ReplicaKey = std::array<uint64_t, 3>;

ReplicaKey replica_key(const graph::Graph& g, const GpuOps& go, NameHashes& names) {
  std::vector<std::pair<int32_t, uint64_t>> k;
  k.reserve(go.ops.size());
  for (NodeId n : go.ops) k.emplace_back(g.lanes[g.lane[n]].stream, names(n));
  std::stable_sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t h1 = kFnvBasis, h2 = 0x6a09e667f3bcc909ull;
  for (const auto& [stream, name] : k) {
    h1 = fnv(fnv(h1, uint64_t(uint32_t(stream))), name);
    h2 = mix(h2 ^ mix(name + 0x9e3779b97f4a7c15ull * (uint64_t(uint32_t(stream)) + 1)));
  }
  return {h1, h2, uint64_t(k.size())};
}

// Replica sets from every GPU's key, in rank order: a set is numbered by its first GPU.
void assign_replicas(Packing& p, const std::vector<ReplicaKey>& keys) {
  std::map<ReplicaKey, uint32_t> sets;
  p.replica_set.assign(keys.size(), 0);
  for (size_t r = 0; r < keys.size(); ++r) {
    auto [it, fresh] = sets.try_emplace(keys[r], uint32_t(sets.size()));
    p.replica_set[r] = it->second;
  }
  p.replica_sets = int64_t(sets.size());
}

// Per GPU of `p` (in its gpus' order), its distinct signatures with ops: what profiling it on its own takes.
std::vector<int64_t> own_signatures(const Packing& p) {
  std::vector<std::vector<uint32_t>> sigs_of(p.gpus.size());
  for (const Atom& at : p.atoms) {
    if (at.first <= at.last) sigs_of[at.rank.index()].push_back(uint32_t(at.signature.index()));
  }
  std::vector<int64_t> out;
  for (std::vector<uint32_t>& v : sigs_of) {
    std::sort(v.begin(), v.end());
    out.push_back(int64_t(std::unique(v.begin(), v.end()) - v.begin()));
  }
  return out;
}

}  // namespace

std::vector<AtomOverlap> atom_overlaps(const Packing& p, const std::vector<std::vector<std::pair<int64_t, int64_t>>>& spans) {
  struct Iv {
    int64_t b, e;
    uint32_t atom;
  };
  std::map<std::pair<uint32_t, uint32_t>, int64_t> acc;
  std::vector<Iv> ivs, active;
  size_t a0 = 0;
  while (a0 < p.atoms.size()) {
    const size_t gpu = p.atoms[a0].rank.index();
    size_t a1 = a0;
    ivs.clear();
    for (; a1 < p.atoms.size() && p.atoms[a1].rank.index() == gpu; ++a1) {
      const Atom& at = p.atoms[a1];
      for (uint32_t i = at.first; i <= at.last && at.first <= at.last && gpu < spans.size() && i < spans[gpu].size(); ++i) {
        const auto& [b, e] = spans[gpu][i];
        if (e > b) ivs.push_back(Iv{b, e, uint32_t(a1)});
      }
    }
    std::sort(ivs.begin(), ivs.end(), [](const Iv& x, const Iv& y) { return x.b < y.b || (x.b == y.b && x.atom < y.atom); });
    active.clear();
    for (const Iv& v : ivs) {
      std::erase_if(active, [&](const Iv& u) { return u.e <= v.b; });
      for (const Iv& u : active) {
        if (u.atom == v.atom) continue;
        const int64_t o = std::min(u.e, v.e) - v.b;
        if (o > 0) acc[{std::min(u.atom, v.atom), std::max(u.atom, v.atom)}] += o;
      }
      active.push_back(v);
    }
    a0 = a1;
  }
  std::vector<AtomOverlap> out;
  out.reserve(acc.size());
  for (const auto& [ab, ns] : acc) out.push_back(AtomOverlap{ab.first, ab.second, ns});
  return out;
}

namespace {

Status check_options(const device::DeviceProfile& profile, const PackOptions& opt) {
  // (the bounds keep the nanosecond conversions below inside 64 bits)
  if (!(opt.min_switch_multiple >= 0 && opt.min_switch_multiple <= 1e6))
    return make_error("--min-pack", "must be a number of clock-switch latencies from 0 to 1e6");
  if (opt.min_pack_ns > int64_t(1e15)) return make_error("--min-pack-ms", "must be at most 1e9 ms");
  if (!(opt.critical_slack_ns >= 0 && opt.critical_slack_ns <= int64_t(1e12)))
    return make_error("--critical-slack-us", "must be a number of microseconds from 0 to 1e9");
  if (opt.profile_window_ns <= 0) return make_error("profile window", "must be positive");
  if (opt.profile_clocks < 2) return make_error("--profile-clocks", "at least 2 clocks are needed to fit a model");
  // The plan's clocks are supported clocks from the default down to max(min clock, f_max / 2).
  const double hi = profile.default_clock_mhz.value;
  const double lo = std::max<double>(profile.min_clock_mhz(), 0.5 * profile.max_clock_mhz());
  const auto& mhz = profile.sm_clocks.mhz;
  const auto usable = std::count_if(mhz.begin(), mhz.end(), [&](int c) { return c >= lo - 0.5 && c <= hi + 0.5; });
  if (opt.profile_clocks > usable) {
    return make_error("--profile-clocks",
                      fmt::format("{} clocks asked; {} has {} supported clocks from {:.0f} to {:.0f} MHz, where "
                                  "the plan profiles", opt.profile_clocks, profile.name, usable, lo, hi),
                      fmt::format("give at most {}", usable));
  }
  return {};
}

int64_t min_pack_of(const device::DeviceProfile& profile, const PackOptions& opt) {
  return opt.per_kernel         ? 0
         : opt.min_pack_ns >= 0 ? opt.min_pack_ns
                                : int64_t(opt.min_switch_multiple * profile.switch_latency_median_ms.value * 1e6);
}

Error no_gpu_ops(const std::string& where) {
  return make_error(where,
                    "the step has no GPU operations (kernels, copies, memsets) to choose clocks for: the trace "
                    "records no GPU activity",
                    "record the job with the profiler's CUDA activities (ProfilerActivity.CUDA; emo.torch.capture "
                    "does), or give --cpu-ops-as-kernels to try EMO's loop on a CPU-only run, its operators standing "
                    "in for kernels");
}

// The GPUs of graph `g` (the whole step's, or a process's part): their ops in index order, atoms and packs,
// with signatures of their own (in order of first appearance, GPU by GPU), from the replayed times `t_ns`
// (per point; the step begins at `begin_ns`) and the slack (per node); and each GPU's replica key.
Packing pack_gpus(const graph::Graph& g, const std::vector<int64_t>& t_ns, int64_t begin_ns,
                  const std::vector<int64_t>& slack_ns, const PackOptions& opt, int64_t min_pack_ns,
                  std::vector<ReplicaKey>& keys) {
  auto t_start = [&](NodeId n) { return t_ns[graph::start_point(n)]; };
  auto t_end = [&](NodeId n) { return t_ns[graph::end_point(n)]; };
  NameHashes names(g);
  Packing p;
  p.min_pack_ns = min_pack_ns;

  // ---- ops per GPU (rank), index order: measured start, ties by stream ----
  const size_t n_ranks = g.rank_paths.size();
  p.gpus.resize(n_ranks);
  auto ordered = gpu_ops_in_index_order(g);
  for (uint32_t r = 0; r < n_ranks; ++r) {
    p.gpus[r].rank = graph::RankIndex(r);
    p.gpus[r].rank_id = g.rank_id(graph::RankIndex(r));
    p.gpus[r].ops = std::move(ordered[r]);
  }
  for (GpuOps& go : p.gpus) {
    std::unordered_map<uint64_t, uint32_t> seen;
    go.occurrence.reserve(go.ops.size());
    for (NodeId n : go.ops) {
      const uint64_t key = (uint64_t(g.name[n]) << 32) | uint32_t(g.lanes[g.lane[n]].stream);
      go.occurrence.push_back(seen[key]++);
    }
    p.kernel_ops += int64_t(go.ops.size());
    keys.push_back(replica_key(g, go, names));
  }

  // ---- atoms ----
  std::unordered_map<uint64_t, uint32_t> sig_index;
  auto signature_of = [&](uint64_t h, Boundness b, uint32_t ops, NodeId first) {
    auto [it, fresh] = sig_index.try_emplace(h, uint32_t(p.signatures.size()));
    if (fresh) {
      Signature s;
      s.hash = h;
      s.ops = ops;
      s.bound = b;
      s.first_name = first == graph::kNoId ? "(idle)" : std::string(g.strings.view(g.name[first]));
      p.signatures.push_back(std::move(s));
    }
    ++p.signatures[it->second].members;
    return SignatureIndex(it->second);
  };
  const int64_t crit_ns = opt.critical_slack_ns;
  for (const GpuOps& go : p.gpus) {
    if (go.ops.empty()) continue;
    auto cls = [&](NodeId n) {
      SlackClass s = slack_ns[n] <= crit_ns ? SlackClass::kCritical : SlackClass::kSlackRich;
      Boundness b = boundness_of_name(g.strings.view(g.name[n]),
                                      g.kind[n] == NodeKind::kMemcpy || g.kind[n] == NodeKind::kMemset);
      return std::make_pair(s, b);
    };
    size_t i = 0;
    while (i < go.ops.size()) {
      Atom at;
      at.rank = go.rank;
      at.first = uint32_t(i);
      auto [s0, b0] = cls(go.ops[i]);
      at.slack = s0;
      at.bound = b0;
      int64_t run_end = t_end(go.ops[i]);
      int64_t busy = 0, cur_b = t_start(go.ops[i]), cur_e = run_end;
      uint64_t h = fnv(kFnvBasis, uint64_t(b0));
      size_t j = i;
      while (true) {
        const NodeId n = go.ops[j];
        h = fnv(fnv(h, names(n)), uint64_t(uint32_t(g.lanes[g.lane[n]].stream)));
        at.op_ns += t_end(n) - t_start(n);
        if (t_start(n) > cur_e) {
          busy += cur_e - cur_b;
          cur_b = t_start(n);
          cur_e = t_end(n);
        } else {
          cur_e = std::max(cur_e, t_end(n));
        }
        run_end = std::max(run_end, t_end(n));
        if (j + 1 >= go.ops.size() || opt.per_kernel) break;
        const NodeId nx = go.ops[j + 1];
        auto [s1, b1] = cls(nx);
        if ((opt.split_slack && s1 != s0) || (opt.split_boundness && b1 != b0)) break;
        if (t_start(nx) - run_end >= opt.idle_gap_ns) break;
        ++j;
      }
      busy += cur_e - cur_b;
      at.last = uint32_t(j);
      at.begin_ns = t_start(go.ops[i]) - begin_ns;
      at.end_ns = run_end - begin_ns;
      at.busy_ns = busy;
      at.signature = signature_of(h, b0, uint32_t(j - i + 1), go.ops[i]);
      p.atoms.push_back(at);
      i = j + 1;
      if (i < go.ops.size() && t_start(go.ops[i]) - run_end >= opt.idle_gap_ns) {
        Atom idle;
        idle.rank = go.rank;
        idle.first = uint32_t(i);
        idle.last = uint32_t(i - 1);
        idle.begin_ns = run_end - begin_ns;
        idle.end_ns = t_start(go.ops[i]) - begin_ns;
        idle.bound = Boundness::kIdle;
        idle.signature = signature_of(0x1d1e, Boundness::kIdle, 0, graph::kNoId);
        p.atoms.push_back(idle);
      }
    }
  }

  // ---- packs: group a GPU's atoms until long enough, then cut where the class changes ----
  size_t k = 0;
  while (k < p.atoms.size()) {
    const graph::RankIndex rank = p.atoms[k].rank;
    size_t end = k;
    while (end < p.atoms.size() && p.atoms[end].rank == rank) ++end;
    const size_t pack_start = p.packs.size();
    size_t i = k;
    while (i < end) {
      Pack pk;
      pk.rank = rank;
      pk.first_atom = uint32_t(i);
      size_t j = i;
      while (j + 1 < end && !opt.per_kernel) {
        const int64_t span = p.atoms[j].end_ns - p.atoms[i].begin_ns;
        const Atom& nx = p.atoms[j + 1];
        const Atom& cur = p.atoms[j];
        const bool change = nx.slack != cur.slack || nx.bound != cur.bound;
        if (span >= p.min_pack_ns && (change || span >= 4 * std::max<int64_t>(p.min_pack_ns, 1))) break;
        ++j;
      }
      pk.last_atom = uint32_t(j);
      p.packs.push_back(pk);
      i = j + 1;
    }
    // A short last pack joins the one before it.
    if (p.packs.size() - pack_start >= 2 && !opt.per_kernel) {
      Pack& last = p.packs.back();
      if (p.atoms[last.last_atom].end_ns - p.atoms[last.first_atom].begin_ns < p.min_pack_ns) {
        p.packs[p.packs.size() - 2].last_atom = last.last_atom;
        p.packs.pop_back();
      }
    }
    k = end;
  }
  for (Pack& pk : p.packs) {
    const Atom& fa = p.atoms[pk.first_atom];
    const Atom& la = p.atoms[pk.last_atom];
    pk.begin_ns = fa.begin_ns;
    pk.end_ns = la.end_ns;
    pk.first_op = fa.first;
    pk.last_op = la.last;
    if (pk.first_op <= pk.last_op) {
      pk.first_name = std::string(g.strings.view(g.name[p.gpus[pk.rank.index()].ops[pk.first_op]]));
    }
    int64_t crit = 0, per_bound[4] = {0, 0, 0, 0};
    uint64_t h = kFnvBasis;
    for (uint32_t x = pk.first_atom; x <= pk.last_atom; ++x) {
      const Atom& at = p.atoms[x];
      pk.busy_ns += at.busy_ns;
      if (at.slack == SlackClass::kCritical && at.bound != Boundness::kIdle) crit += at.busy_ns;
      if (at.bound != Boundness::kIdle) per_bound[int(at.bound)] += at.busy_ns;
      h = fnv(h, p.signatures[at.signature.index()].hash);
    }
    per_bound[int(Boundness::kIdle)] = (pk.end_ns - pk.begin_ns) - pk.busy_ns;
    pk.slack = 2 * crit >= pk.busy_ns && pk.busy_ns > 0 ? SlackClass::kCritical : SlackClass::kSlackRich;
    pk.bound = Boundness(std::max_element(per_bound, per_bound + 4) - per_bound);
    pk.signature = h;
  }
  return p;
}

// The profiling plan and its cost, and the units, for a step of `nodes` graph nodes on `gpus` GPUs, from
// `p`'s step time, its ops (kernel_ops) and the step's signatures.
void plan_profiling(Packing& p, const device::DeviceProfile& profile, const PackOptions& opt, int64_t nodes,
                    size_t gpus) {
  p.plan_clocks_mhz = plan_clocks(profile, opt.profile_clocks);
  const double step_s = std::max(1e-9, double(p.step_ns) * 1e-9);
  // Steps enough to fill the counter's window: 2 s of a 50 µs decode step is 40 000 steps. A run's
  // graph-node replays are bounded, so a step with very many nodes gets a shorter window.
  const double wanted = std::ceil(double(opt.profile_window_ns) / 1e9 / step_s);
  p.plan_steps = int(std::clamp(wanted, 3.0, 2e9));
  nodes = std::max<int64_t>(1, nodes);
  if (opt.max_plan_node_steps > 0 && int64_t(p.plan_steps) * nodes > opt.max_plan_node_steps) {
    p.plan_steps = int(std::max<int64_t>(3, opt.max_plan_node_steps / nodes));
    p.plan_steps_bounded = true;
  }
  p.plan_window_ns = int64_t(std::llround(double(p.plan_steps) * step_s * 1e9));
  const int64_t clocks = int64_t(p.plan_clocks_mhz.size());
  int64_t profiled_sigs = 0;
  for (const Signature& s : p.signatures) profiled_sigs += s.ops > 0;
  p.kernel_units = p.kernel_ops * clocks;
  p.profiled_units = profiled_sigs * clocks;
  // The lower clocks stretch the steps; 1/0.5 bounds it at the plan's lowest clock.
  double stretch = 0;
  for (int c : p.plan_clocks_mhz) stretch += std::min(2.0, profile.max_clock_mhz() / double(c));
  p.profiling_gpu_ns = int64_t(std::llround(double(gpus) * double(p.plan_steps) * step_s * stretch * 1e9));
}

int64_t sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

}  // namespace

Result<Packing> make_packs(const analysis::Workload& w, const analysis::Analysis& a,
                           const device::DeviceProfile& profile, const PackOptions& opt) {
  EMO_RETURN_IF_ERROR(check_options(profile, opt));
  const graph::Graph& g = w.graph;
  replay::Replayer rp(g);
  replay::Timeline tl;
  rp.run(tl);
  std::vector<ReplicaKey> keys;
  Packing p = pack_gpus(g, tl.t_ns, tl.begin_ns, a.slack_ns, opt, min_pack_of(profile, opt), keys);
  if (p.kernel_ops == 0) return no_gpu_ops(g.rank_paths.size() == 1 ? g.rank_paths[0] : std::string("pack"));
  p.step_begin_ns = tl.begin_ns;
  p.step_ns = tl.makespan_ns();
  plan_profiling(p, profile, opt, int64_t(g.num_nodes()), p.gpus.size());
  assign_replicas(p, keys);
  p.per_gpu_units = sum(own_signatures(p)) * int64_t(p.plan_clocks_mhz.size());
  return p;
}

namespace {

// Every process's signatures, replica keys and ops (to every process), then its atoms and packs (to process 0).
constexpr int kTagPackSummary = 31, kTagPackRecords = 32;

// What a process sends every process: [ints, its signatures' first names, its first rank's file]; ints =
// kernel ops, GPUs, per GPU its replica key (3) and own signatures, signatures, per signature hash, members,
// ops, boundness.
std::string summary_of(const graph::Graph& g, const Packing& p, const std::vector<ReplicaKey>& keys) {
  std::vector<int64_t> ints{p.kernel_ops, int64_t(p.gpus.size())};
  const std::vector<int64_t> own = own_signatures(p);
  for (size_t r = 0; r < keys.size(); ++r) {
    ints.insert(ints.end(), {int64_t(keys[r][0]), int64_t(keys[r][1]), int64_t(keys[r][2]), own[r]});
  }
  ints.push_back(int64_t(p.signatures.size()));
  std::vector<std::string_view> names;
  for (const Signature& s : p.signatures) {
    ints.insert(ints.end(), {int64_t(s.hash), int64_t(s.members), int64_t(s.ops), int64_t(s.bound)});
    names.push_back(s.first_name);
  }
  return dist::frame({dist::to_bytes(ints), dist::frame(names), g.rank_paths.empty() ? "" : g.rank_paths[0]});
}

// What a process sends process 0: [ints, its packs' first names]; ints = GPUs, per GPU its rank id, atoms,
// per atom its GPU (the part's index), first, last, begin, end, busy, op time, slack, boundness, signature
// (the step's index), packs, per pack its GPU, first and last atom (the part's), first and last op, begin,
// end, busy, slack, boundness, signature hash.
std::string records_of(const Packing& p) {
  std::vector<int64_t> ints{int64_t(p.gpus.size())};
  for (const GpuOps& go : p.gpus) ints.push_back(go.rank_id);
  ints.push_back(int64_t(p.atoms.size()));
  for (const Atom& at : p.atoms) {
    ints.insert(ints.end(), {int64_t(at.rank.index()), at.first, at.last, at.begin_ns, at.end_ns, at.busy_ns,
                             at.op_ns, int64_t(at.slack), int64_t(at.bound), int64_t(at.signature.index())});
  }
  ints.push_back(int64_t(p.packs.size()));
  std::vector<std::string_view> names;
  for (const Pack& pk : p.packs) {
    ints.insert(ints.end(), {int64_t(pk.rank.index()), pk.first_atom, pk.last_atom, pk.first_op, pk.last_op,
                             pk.begin_ns, pk.end_ns, pk.busy_ns, int64_t(pk.slack), int64_t(pk.bound),
                             int64_t(pk.signature)});
    names.push_back(pk.first_name);
  }
  return dist::frame({dist::to_bytes(ints), dist::frame(names)});
}

// Reads integers off a message in order; `bad` once one was missing or out of range.
struct Ints {
  const std::vector<int64_t>& v;
  size_t at = 0;
  bool bad = false;
  int64_t next(int64_t lo = std::numeric_limits<int64_t>::min(), int64_t hi = std::numeric_limits<int64_t>::max()) {
    if (at >= v.size() || v[at] < lo || v[at] > hi) {
      bad = true;
      return lo < 0 ? 0 : lo;
    }
    return v[at++];
  }
};

// A message of [integers, a frame of names, ...] (`fields` in all) from process q: its fields (views of
// `bytes`), integers and names.
struct Unpacked {
  std::vector<std::string_view> fields;
  std::vector<int64_t> ints;
  std::vector<std::string_view> names;
};
Result<Unpacked> unpack(std::string_view bytes, int q, size_t fields, const char* what) {
  auto f = dist::unframe(bytes);
  if (!f || f->size() != fields) return make_error("", fmt::format("process {} sent its {} cut short", q, what));
  auto v = dist::from_bytes((*f)[0], q);
  if (!v) return v.error();
  auto names = dist::unframe((*f)[1]);
  if (!names) return make_error("", fmt::format("process {} sent its {}' names cut short", q, what));
  return Unpacked{std::move(*f), std::move(*v), std::move(*names)};
}

// Process q's records appended to `whole` (its GPUs, atoms and packs after those already there).
Status add_records(Packing& whole, std::string_view bytes, int q) {
  auto m = unpack(bytes, q, 2, "packs");
  if (!m) return m.error();
  const std::vector<int64_t>& v = m->ints;
  const std::vector<std::string_view>& names = m->names;
  Ints in{v};
  const uint32_t rank_base = uint32_t(whole.gpus.size()), atom_base = uint32_t(whole.atoms.size());
  const int64_t gpus = in.next(0, 1 << 24);
  for (int64_t r = 0; r < gpus && !in.bad; ++r) {
    GpuOps go;
    go.rank = graph::RankIndex(rank_base + uint32_t(r));
    go.rank_id = int(in.next(std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
    whole.gpus.push_back(std::move(go));
  }
  const int64_t atoms = in.next(0, int64_t(v.size()));
  const int64_t sigs = int64_t(whole.signatures.size());
  for (int64_t i = 0; i < atoms && !in.bad; ++i) {
    Atom at;
    at.rank = graph::RankIndex(rank_base + uint32_t(in.next(0, gpus - 1)));
    at.first = uint32_t(in.next(0, UINT32_MAX));
    at.last = uint32_t(in.next(0, UINT32_MAX));
    at.begin_ns = in.next();
    at.end_ns = in.next();
    at.busy_ns = in.next();
    at.op_ns = in.next();
    at.slack = SlackClass(in.next(0, 1));
    at.bound = Boundness(in.next(0, 3));
    at.signature = SignatureIndex(uint32_t(in.next(0, sigs - 1)));
    whole.atoms.push_back(at);
  }
  const int64_t packs = in.next(0, int64_t(v.size()));
  if (!in.bad && size_t(packs) != names.size()) in.bad = true;
  for (int64_t i = 0; i < packs && !in.bad; ++i) {
    Pack pk;
    pk.rank = graph::RankIndex(rank_base + uint32_t(in.next(0, gpus - 1)));
    pk.first_atom = atom_base + uint32_t(in.next(0, atoms - 1));
    pk.last_atom = atom_base + uint32_t(in.next(0, atoms - 1));
    pk.first_op = uint32_t(in.next(0, UINT32_MAX));
    pk.last_op = uint32_t(in.next(0, UINT32_MAX));
    pk.begin_ns = in.next();
    pk.end_ns = in.next();
    pk.busy_ns = in.next();
    pk.slack = SlackClass(in.next(0, 1));
    pk.bound = Boundness(in.next(0, 3));
    pk.signature = uint64_t(in.next());
    pk.first_name = std::string(names[size_t(i)]);
    whole.packs.push_back(std::move(pk));
  }
  if (in.bad || in.at != v.size()) return make_error("", fmt::format("process {} sent packs that are not a packing's", q));
  return {};
}

}  // namespace

Result<PackingPart> make_packs_part(const graph::GraphPart& part, const analysis::Analysis& a,
                                    const replay::ShardTimeline& tl, const device::DeviceProfile& profile,
                                    const PackOptions& opt, dist::Comm& comm) {
  EMO_RETURN_IF_ERROR(check_options(profile, opt));
  const graph::Graph& g = part.graph;
  if (tl.t_ns.size() != g.num_points() || a.slack_ns.size() != g.num_nodes())
    return make_error("pack", "the replayed times or the slack are not this part's");
  PackingPart out;
  Packing& p = out.mine;
  std::vector<ReplicaKey> keys;
  p = pack_gpus(g, tl.t_ns, tl.begin_ns, a.slack_ns, opt, min_pack_of(profile, opt), keys);
  p.step_begin_ns = tl.begin_ns;
  p.step_ns = tl.makespan_ns();

  // ---- the step's signatures (in order of first appearance, rank by rank), replica keys and counts ----
  auto all = dist::all_gather(comm, kTagPackSummary, summary_of(g, p, keys));
  if (!all) return make_error("", "the packs' signatures: " + all.error().message());
  std::vector<Signature> sigs;
  std::unordered_map<uint64_t, uint32_t> sig_index;
  std::vector<uint32_t> mine_to_step;  // this process's signature index -> the step's
  std::vector<ReplicaKey> step_keys;
  int64_t kernel_ops = 0, own_units = 0;
  std::string first_path;
  size_t first_rank = 0;
  for (int q = 0; q < comm.size(); ++q) {
    auto m = unpack((*all)[size_t(q)], q, 3, "signatures");
    if (!m) return m.error();
    const std::vector<int64_t>& v = m->ints;
    const std::vector<std::string_view>& names = m->names;
    Ints in{v};
    kernel_ops += in.next(0, int64_t(1) << 50);
    const int64_t gpus = in.next(0, 1 << 24);
    if (q == comm.rank()) first_rank = step_keys.size();
    for (int64_t r = 0; r < gpus && !in.bad; ++r) {
      ReplicaKey k;
      for (uint64_t& x : k) x = uint64_t(in.next());
      step_keys.push_back(k);
      own_units += in.next(0, int64_t(1) << 40);
    }
    const int64_t n = in.next(0, int64_t(v.size()));
    if (!in.bad && size_t(n) != names.size()) in.bad = true;
    for (int64_t i = 0; i < n && !in.bad; ++i) {
      const uint64_t hash = uint64_t(in.next());
      const int64_t members = in.next(0, UINT32_MAX), ops = in.next(0, UINT32_MAX), bound = in.next(0, 3);
      auto [it, fresh] = sig_index.try_emplace(hash, uint32_t(sigs.size()));
      if (fresh) {
        Signature s;
        s.hash = hash;
        s.ops = uint32_t(ops);
        s.bound = Boundness(bound);
        s.first_name = std::string(names[size_t(i)]);
        sigs.push_back(std::move(s));
      }
      sigs[it->second].members += uint32_t(members);
      if (q == comm.rank()) mine_to_step.push_back(it->second);
    }
    if (in.bad || in.at != v.size()) return make_error("", fmt::format("process {} sent signatures that are not a packing's", q));
    if (first_path.empty()) first_path = std::string(m->fields[2]);
  }
  if (first_rank != part.first_rank || step_keys.size() != part.total_ranks)
    return make_error("", "the processes' GPUs are not the step's ranks in order");
  if (kernel_ops == 0) return no_gpu_ops(part.total_ranks == 1 ? first_path : std::string("pack"));
  for (Atom& at : p.atoms) at.signature = SignatureIndex(mine_to_step[at.signature.index()]);
  p.signatures = std::move(sigs);
  p.kernel_ops = kernel_ops;
  plan_profiling(p, profile, opt, int64_t(part.total_nodes), part.total_ranks);
  Packing sets;
  assign_replicas(sets, step_keys);
  p.replica_sets = sets.replica_sets;
  p.replica_set.assign(sets.replica_set.begin() + ptrdiff_t(first_rank),
                       sets.replica_set.begin() + ptrdiff_t(first_rank + p.gpus.size()));
  p.per_gpu_units = own_units * int64_t(p.plan_clocks_mhz.size());

  // ---- every GPU's atoms and packs, to process 0 ----
  if (!comm.is_root()) {
    EMO_RETURN_IF_ERROR(comm.send(dist::kRoot, kTagPackRecords, records_of(p)));
    EMO_RETURN_IF_ERROR(comm.flush(dist::timeout_s()));
    return out;
  }
  Packing whole = p;  // the step's signatures, plan and units; its GPUs, atoms and packs from every process
  whole.gpus.clear();
  whole.atoms.clear();
  whole.packs.clear();
  whole.replica_set = std::move(sets.replica_set);
  EMO_RETURN_IF_ERROR(add_records(whole, records_of(p), 0));
  for (int q = 1; q < comm.size(); ++q) {
    auto m = comm.recv(q, kTagPackRecords, dist::timeout_s());
    if (!m) return make_error("", fmt::format("the packs of process {}: {}", q, m.error().message()));
    EMO_RETURN_IF_ERROR(add_records(whole, *m, q));
  }
  out.whole = std::move(whole);
  return out;
}

nlohmann::json to_json(const Packing& p, bool list_packs) {
  nlohmann::ordered_json j;
  j["step_us"] = double(p.step_ns) / 1e3;
  j["min_pack_us"] = double(p.min_pack_ns) / 1e3;
  j["gpus"] = p.gpus.size();
  j["kernel_ops"] = p.kernel_ops;
  j["atoms"] = p.atoms.size();
  j["plan_clocks_mhz"] = p.plan_clocks_mhz;
  j["plan_steps_per_clock"] = p.plan_steps;
  j["plan_window_s"] = double(p.plan_window_ns) / 1e9;
  j["plan_steps_bounded"] = p.plan_steps_bounded;
  j["profiling_gpu_s"] = double(p.profiling_gpu_ns) / 1e9;
  j["kernel_units"] = p.kernel_units;
  j["profiled_units"] = p.profiled_units;
  j["reduction"] = p.reduction();
  // Replicas (docs/optimize.md): each set's GPUs by rank, and the units profiling each GPU on its own takes.
  j["replica_sets"] = p.replica_sets;
  j["profiled_units_per_gpu"] = p.per_gpu_units;
  if (p.replica_sets < int64_t(p.gpus.size())) {
    std::vector<std::vector<int>> sets(size_t(p.replica_sets));
    for (size_t r = 0; r < p.gpus.size(); ++r) sets[p.replica_set[r]].push_back(p.gpus[r].rank_id);
    nlohmann::ordered_json listed = nlohmann::ordered_json::array();
    for (size_t i = 0; i < sets.size() && i < 1000; ++i) listed.push_back(sets[i]);
    j["replicas"] = std::move(listed);
  }
  nlohmann::ordered_json sigs = nlohmann::ordered_json::array();
  for (const Signature& s : p.signatures) {
    sigs.push_back({{"hash", fmt::format("{:016x}", s.hash)}, {"members", s.members}, {"ops", s.ops},
                    {"boundness", to_string(s.bound)}, {"first_name", s.first_name}});
  }
  j["signatures"] = std::move(sigs);
  nlohmann::ordered_json packs = nlohmann::ordered_json::array();
  size_t listed = 0;
  for (const Pack& pk : p.packs) {
    if (!list_packs && listed >= 1000) break;
    ++listed;
    const GpuOps& go = p.gpus[pk.rank.index()];
    nlohmann::ordered_json e{{"rank", go.rank_id},
                             {"begin_us", double(pk.begin_ns) / 1e3},
                             {"end_us", double(pk.end_ns) / 1e3},
                             {"busy_us", double(pk.busy_ns) / 1e3},
                             {"slack_class", to_string(pk.slack)},
                             {"boundness", to_string(pk.bound)},
                             {"signature", fmt::format("{:016x}", pk.signature)},
                             {"atoms", pk.last_atom - pk.first_atom + 1}};
    if (pk.first_op <= pk.last_op) {
      e["first_op"] = pk.first_op;
      e["last_op"] = pk.last_op;
      e["kernels"] = pk.last_op - pk.first_op + 1;
      e["first_name"] = pk.first_name;
    } else {
      e["kernels"] = 0;
    }
    packs.push_back(std::move(e));
  }
  j["packs_total"] = p.packs.size();
  j["packs"] = std::move(packs);
  return nlohmann::json::parse(j.dump());
}

std::string to_text(const Packing& p) {
  std::string out = fmt::format(
      "step {:.3f} ms on {} GPU(s), {} GPU ops -> {} atoms, {} packs (min pack {:.1f} ms)\n"
      "signatures: {} ({} with kernels); profiled units {} vs {} per-kernel ({:.1f}x fewer)\n"
      "profiling plan: clocks {} MHz, {} steps each ({:.3g} s{}), {:.2f} GPU-s\n",
      double(p.step_ns) / 1e6, p.gpus.size(), p.kernel_ops, p.atoms.size(), p.packs.size(),
      double(p.min_pack_ns) / 1e6, p.signatures.size(),
      std::count_if(p.signatures.begin(), p.signatures.end(), [](const Signature& s) { return s.ops > 0; }),
      p.profiled_units, p.kernel_units, p.reduction(), fmt::join(p.plan_clocks_mhz, ","), p.plan_steps,
      double(p.plan_window_ns) / 1e9, p.plan_steps_bounded ? ", shortened: steps x graph nodes per run are bounded" : "",
      double(p.profiling_gpu_ns) / 1e9);
  if (p.replica_sets < int64_t(p.gpus.size())) {
    out += fmt::format("replicas: {} GPUs run {} distinct op sequence(s); signatures shared across GPUs: {} profiled "
                       "units against {} profiling every GPU on its own ({:.1f}x fewer)\n",
                       p.gpus.size(), p.replica_sets, p.profiled_units, p.per_gpu_units,
                       double(p.per_gpu_units) / double(std::max<int64_t>(1, p.profiled_units)));
  }
  size_t shown = 0;
  for (const Pack& pk : p.packs) {
    if (++shown > 20) {
      out += fmt::format("... {} more packs (--json for all)\n", p.packs.size() - 20);
      break;
    }
    const GpuOps& go = p.gpus[pk.rank.index()];
    out += fmt::format("  rank {} [{:9.3f} .. {:9.3f}] ms  {:>10}  {:>13}  {:5} ops  {}\n",
                       go.rank_id, double(pk.begin_ns) / 1e6,
                       double(pk.end_ns) / 1e6, to_string(pk.slack), to_string(pk.bound),
                       pk.first_op <= pk.last_op ? pk.last_op - pk.first_op + 1 : 0,
                       fmt::format("{:016x}", pk.signature).substr(0, 8));
  }
  return out;
}

std::string packs_csv(const Packing& p, const std::vector<int>* clocks) {
  const bool with_clocks = clocks && clocks->size() == p.packs.size();
  std::string out = "rank,begin_us,end_us,busy_us,slack_class,boundness,first_op,last_op,signature";
  out += with_clocks ? ",clock_mhz\n" : "\n";
  for (size_t i = 0; i < p.packs.size(); ++i) {
    const Pack& pk = p.packs[i];
    const GpuOps& go = p.gpus[pk.rank.index()];
    out += fmt::format("{},{:.3f},{:.3f},{:.3f},{},{},{},{},{:016x}",
                       go.rank_id, double(pk.begin_ns) / 1e3,
                       double(pk.end_ns) / 1e3, double(pk.busy_ns) / 1e3, to_string(pk.slack), to_string(pk.bound),
                       pk.first_op, int64_t(pk.last_op), pk.signature);
    out += with_clocks ? fmt::format(",{}\n", (*clocks)[i]) : std::string("\n");
  }
  return out;
}

}  // namespace emo::pack
