// Packing of each GPU's timeline into atoms (class-homogeneous runs), signatures (repeated op
// sequences) and packs (atoms grouped to outlast clock switches). See emo/pack/pack.h.
#include "emo/pack/pack.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <cmath>
#include <unordered_map>

#include "emo/model/kernel_names.h"

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

uint64_t fnv(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ ((v >> (8 * i)) & 0xff)) * 1099511628211ull;
  return h;
}

// Replicas (Packing::replica_set): GPUs that run the same ops (names) on each stream in the same order,
// as data-parallel ranks do; how two streams interleave may differ. They differ in slack, hence in where
// their atoms split, but their kernel sequences share signatures (a signature is the work, not its
// slack class), profiled once for all.
void find_replicas(const graph::Graph& g, Packing& p, int64_t clocks) {
  // Each GPU's ops as (stream, name), by stream and then in index order.
  auto key_of = [&](const GpuOps& go) {
    std::vector<std::pair<int32_t, uint32_t>> k;
    k.reserve(go.ops.size());
    for (NodeId n : go.ops) k.emplace_back(g.lanes[g.lane[n]].stream, uint32_t(g.name[n]));
    std::stable_sort(k.begin(), k.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    return k;
  };
  std::unordered_map<uint64_t, std::vector<uint32_t>> firsts;  // key hash -> first GPU of each set
  std::vector<std::vector<std::pair<int32_t, uint32_t>>> keys_of_sets;
  p.replica_set.assign(p.gpus.size(), 0);
  for (uint32_t r = 0; r < p.gpus.size(); ++r) {
    auto key = key_of(p.gpus[r]);
    uint64_t h = 1469598103934665603ull;
    for (const auto& [stream, name] : key) h = fnv(fnv(h, uint64_t(uint32_t(stream))), name);
    std::vector<uint32_t>& sets = firsts[h];
    auto it = std::find_if(sets.begin(), sets.end(), [&](uint32_t set) { return keys_of_sets[set] == key; });
    if (it != sets.end()) {
      p.replica_set[r] = *it;
    } else {
      p.replica_set[r] = uint32_t(keys_of_sets.size());
      sets.push_back(p.replica_set[r]);
      keys_of_sets.push_back(std::move(key));
    }
  }
  p.replica_sets = int64_t(keys_of_sets.size());
  // What profiling each GPU on its own would take: its own distinct signatures at every clock.
  std::vector<std::vector<uint32_t>> sigs_of(p.gpus.size());
  for (const Atom& at : p.atoms) {
    if (at.first <= at.last) sigs_of[at.rank.index()].push_back(uint32_t(at.signature.index()));
  }
  p.per_gpu_units = 0;
  for (std::vector<uint32_t>& v : sigs_of) {
    std::sort(v.begin(), v.end());
    p.per_gpu_units += int64_t(std::unique(v.begin(), v.end()) - v.begin()) * clocks;
  }
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

Result<Packing> make_packs(const analysis::Workload& w, const analysis::Analysis& a,
                           const device::DeviceProfile& profile, const PackOptions& opt) {
  const graph::Graph& g = w.graph;
  // (the bounds keep the nanosecond conversions below inside 64 bits)
  if (!(opt.min_switch_multiple >= 0 && opt.min_switch_multiple <= 1e6))
    return make_error("--min-pack", "must be a number of clock-switch latencies from 0 to 1e6");
  if (opt.min_pack_ns > int64_t(1e15)) return make_error("--min-pack-ms", "must be at most 1e9 ms");
  if (!(opt.critical_slack_ns >= 0 && opt.critical_slack_ns <= int64_t(1e12)))
    return make_error("--critical-slack-us", "must be a number of microseconds from 0 to 1e9");
  if (opt.profile_window_ns <= 0) return make_error("profile window", "must be positive");
  if (opt.profile_clocks < 2) return make_error("--profile-clocks", "at least 2 clocks are needed to fit a model");
  {  // the plan's clocks are supported clocks from the default down to max(min clock, f_max / 2)
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
  }
  replay::Replayer rp(g);
  replay::Timeline tl;
  rp.run(tl);
  Packing p;
  p.step_begin_ns = tl.begin_ns;
  p.step_ns = tl.makespan_ns();
  p.min_pack_ns = opt.per_kernel         ? 0
                  : opt.min_pack_ns >= 0 ? opt.min_pack_ns
                                         : int64_t(opt.min_switch_multiple * profile.switch_latency_median_ms.value * 1e6);

  // ---- ops per GPU (rank), index order: measured start, ties by stream ----
  const size_t n_ranks = g.rank_paths.size();
  p.gpus.resize(n_ranks);
  auto ordered = gpu_ops_in_index_order(g);
  for (uint32_t r = 0; r < n_ranks; ++r) {
    p.gpus[r].rank = graph::RankIndex(r);
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
  }
  if (p.kernel_ops == 0) {
    return make_error(g.rank_paths.size() == 1 ? g.rank_paths[0] : std::string("pack"),
                      "the step has no GPU operations (kernels, copies, memsets) to choose clocks for: the trace "
                      "records no GPU activity",
                      "record the job with the profiler's CUDA activities (ProfilerActivity.CUDA; emo.torch.capture "
                      "does), or give --cpu-ops-as-kernels to try EMO's loop on a CPU-only run, its operators standing "
                      "in for kernels");
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
      SlackClass s = a.slack_ns[n] <= crit_ns ? SlackClass::kCritical : SlackClass::kSlackRich;
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
      int64_t run_end = tl.end(go.ops[i]);
      int64_t busy = 0, cur_b = tl.start(go.ops[i]), cur_e = run_end;
      uint64_t h = fnv(1469598103934665603ull, uint64_t(b0));
      size_t j = i;
      while (true) {
        const NodeId n = go.ops[j];
        h = fnv(fnv(h, g.name[n]), uint64_t(uint32_t(g.lanes[g.lane[n]].stream)));
        at.op_ns += tl.end(n) - tl.start(n);
        if (tl.start(n) > cur_e) {
          busy += cur_e - cur_b;
          cur_b = tl.start(n);
          cur_e = tl.end(n);
        } else {
          cur_e = std::max(cur_e, tl.end(n));
        }
        run_end = std::max(run_end, tl.end(n));
        if (j + 1 >= go.ops.size() || opt.per_kernel) break;
        const NodeId nx = go.ops[j + 1];
        auto [s1, b1] = cls(nx);
        if ((opt.split_slack && s1 != s0) || (opt.split_boundness && b1 != b0)) break;
        if (tl.start(nx) - run_end >= opt.idle_gap_ns) break;
        ++j;
      }
      busy += cur_e - cur_b;
      at.last = uint32_t(j);
      at.begin_ns = tl.start(go.ops[i]) - tl.begin_ns;
      at.end_ns = run_end - tl.begin_ns;
      at.busy_ns = busy;
      at.signature = signature_of(h, b0, uint32_t(j - i + 1), go.ops[i]);
      p.atoms.push_back(at);
      i = j + 1;
      if (i < go.ops.size() && tl.start(go.ops[i]) - run_end >= opt.idle_gap_ns) {
        Atom idle;
        idle.rank = go.rank;
        idle.first = uint32_t(i);
        idle.last = uint32_t(i - 1);
        idle.begin_ns = run_end - tl.begin_ns;
        idle.end_ns = tl.start(go.ops[i]) - tl.begin_ns;
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
    int64_t crit = 0, per_bound[4] = {0, 0, 0, 0};
    uint64_t h = 1469598103934665603ull;
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

  // ---- profiling plan and its cost ----
  p.plan_clocks_mhz = plan_clocks(profile, opt.profile_clocks);
  const double step_s = std::max(1e-9, double(p.step_ns) * 1e-9);
  // Steps enough to fill the counter's window: 2 s of a 50 µs decode step is 40 000 steps. A run's
  // graph-node replays are bounded, so a step with very many nodes gets a shorter window.
  const double wanted = std::ceil(double(opt.profile_window_ns) / 1e9 / step_s);
  p.plan_steps = int(std::clamp(wanted, 3.0, 2e9));
  const int64_t nodes = std::max<int64_t>(1, int64_t(w.graph.num_nodes()));
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
  find_replicas(g, p, clocks);
  // The lower clocks stretch the steps; 1/0.5 bounds it at the plan's lowest clock.
  double stretch = 0;
  for (int c : p.plan_clocks_mhz) stretch += std::min(2.0, profile.max_clock_mhz() / double(c));
  p.profiling_gpu_ns = int64_t(std::llround(double(p.gpus.size()) * double(p.plan_steps) * step_s * stretch * 1e9));
  return p;
}

nlohmann::json to_json(const analysis::Workload& w, const Packing& p, bool list_packs) {
  const graph::Graph& g = w.graph;
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
    for (size_t r = 0; r < p.gpus.size(); ++r) sets[p.replica_set[r]].push_back(g.rank_id(p.gpus[r].rank));
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
    nlohmann::ordered_json e{{"rank", g.rank_id(go.rank)},
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
      e["first_name"] = std::string(g.strings.view(g.name[go.ops[pk.first_op]]));
    } else {
      e["kernels"] = 0;
    }
    packs.push_back(std::move(e));
  }
  j["packs_total"] = p.packs.size();
  j["packs"] = std::move(packs);
  return nlohmann::json::parse(j.dump());
}

std::string to_text(const analysis::Workload& w, const Packing& p) {
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
  const graph::Graph& g = w.graph;
  size_t shown = 0;
  for (const Pack& pk : p.packs) {
    if (++shown > 20) {
      out += fmt::format("... {} more packs (--json for all)\n", p.packs.size() - 20);
      break;
    }
    const GpuOps& go = p.gpus[pk.rank.index()];
    out += fmt::format("  rank {} [{:9.3f} .. {:9.3f}] ms  {:>10}  {:>13}  {:5} ops  {}\n",
                       g.rank_id(go.rank), double(pk.begin_ns) / 1e6,
                       double(pk.end_ns) / 1e6, to_string(pk.slack), to_string(pk.bound),
                       pk.first_op <= pk.last_op ? pk.last_op - pk.first_op + 1 : 0,
                       fmt::format("{:016x}", pk.signature).substr(0, 8));
  }
  return out;
}

std::string packs_csv(const analysis::Workload& w, const Packing& p, const std::vector<int>* clocks) {
  const graph::Graph& g = w.graph;
  const bool with_clocks = clocks && clocks->size() == p.packs.size();
  std::string out = "rank,begin_us,end_us,busy_us,slack_class,boundness,first_op,last_op,signature";
  out += with_clocks ? ",clock_mhz\n" : "\n";
  for (size_t i = 0; i < p.packs.size(); ++i) {
    const Pack& pk = p.packs[i];
    const GpuOps& go = p.gpus[pk.rank.index()];
    out += fmt::format("{},{:.3f},{:.3f},{:.3f},{},{},{},{},{:016x}",
                       g.rank_id(go.rank), double(pk.begin_ns) / 1e3,
                       double(pk.end_ns) / 1e3, double(pk.busy_ns) / 1e3, to_string(pk.slack), to_string(pk.bound),
                       pk.first_op, int64_t(pk.last_op), pk.signature);
    out += with_clocks ? fmt::format(",{}\n", (*clocks)[i]) : std::string("\n");
  }
  return out;
}

}  // namespace emo::pack
