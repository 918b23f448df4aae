// The policy file, schema "emo-policy/1" (DESIGN.md §6): packs identified so that a runtime finds them
// again (index, stream, name, occurrence of the first and last op), the clock of each and when to
// issue the change; the predictions; and the baselines' clocks for the same packs, so `emo evaluate`
// can apply them side by side. Reading checks that the file fits the trace and the device.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "emo/dist/dist.h"
#include "emo/optimize/optimize.h"
#include "internal.h"

namespace emo::optimize {

using nlohmann::json;
using graph::NodeId;

namespace {

json op_ref(const graph::Graph& g, const pack::GpuOps& go, uint32_t i) {
  const NodeId n = go.ops[i];
  return json{{"index", i}, {"stream", g.lanes[g.lane[n]].stream},
              {"name", std::string(g.strings.view(g.name[n]))}, {"occurrence", go.occurrence[i]}};
}

// Where a job's step starts, for a runtime that finds steps by watching kernel launches (the CUPTI
// injection, docs/runtime.md): the rank's first GPU op launched by a kernel launch, how many launches
// of that name on that stream a step makes, how many kernel launches the step makes in all, and how
// long after the step's start that kernel started (the anchor's offset). Absent when the rank's step
// launches no kernel of its own (graph launches only, or copies only).
std::optional<json> step_start(const graph::Graph& g, const pack::GpuOps& go) {
  auto launched = [&](NodeId n) {
    if (g.kind[n] != graph::NodeKind::kKernel && g.kind[n] != graph::NodeKind::kCommKernel) return false;
    const graph::PointId s = graph::start_point(n);
    for (uint32_t i = g.in_offsets[s]; i < g.in_offsets[s + 1]; ++i) {
      const graph::Edge& e = g.edges[g.in_edges[i]];
      if (e.kind == graph::EdgeKind::kLaunch && g.strings.view(g.name[graph::node_of(e.src)]).find("LaunchKernel") != std::string_view::npos)
        return true;
    }
    return false;
  };
  std::optional<uint32_t> first;
  uint32_t kernels = 0;
  for (uint32_t i = 0; i < go.ops.size(); ++i) {
    if (!launched(go.ops[i])) continue;
    ++kernels;
    if (!first) first = i;
  }
  if (!first) return std::nullopt;
  const NodeId f = go.ops[*first];
  const std::string_view name = g.strings.view(g.name[f]);
  const int32_t stream = g.lanes[g.lane[f]].stream;
  uint32_t per_step = 0;
  for (uint32_t i = 0; i < go.ops.size(); ++i) {
    const NodeId n = go.ops[i];
    if (launched(n) && g.lanes[g.lane[n]].stream == stream && g.strings.view(g.name[n]) == name) ++per_step;
  }
  return json{{"name", std::string(name)},
              {"stream", stream},
              {"per_step", per_step},
              {"kernel_launches", kernels},
              {"offset_us", double(g.meas_start_ns[f] - g.meas_start_ns[go.ops[0]]) / 1e3}};
}

json predicted(const Plan& p) {
  return json{{"time_us", double(p.time_ns) / 1e3}, {"energy_j", p.energy_j}};
}


// When to issue each change: the switching latency before the pack starts in the plan's own replay
// (a slower plan starts later packs later than the trace did: a change issued at the trace's time
// would lower the clock under the end of the pack before). A change needed right at the step's start
// is issued near the end of the step before: a negative time wraps around the predicted step time.
// The latency varies (median/p99): a change that raises the clock is issued a p99 latency ahead, so
// it is in effect when the pack starts; one that lowers it is issued late (2·median − p99 ahead), so the
// pack before keeps its higher clock to its end. Either way the slip costs energy, not time.
//
// Over the processes of a run (`pricer`: this process's part and packs), each plan's replay is the one over
// the parts, each process works out its own GPUs' changes, and the rounds go on while any process moved
// one; an exchange that fails leaves the clocks as they are and `failed()` says why.
class IssueTimes {
 public:
  explicit IssueTimes(const Problem& pr, detail::PartPricer* pricer = nullptr)
      : pr_(pr),
        p_(*pr.packing),
        pricer_(pricer),
        own_(pricer ? std::nullopt : std::optional<detail::Prepared>(detail::prepare(pr))),
        x_(pricer ? pricer->prepared() : *own_),
        lat_med_(int64_t(pr.models->profile.switch_latency_median_ms.value * 1e6)),
        lat_p99_(int64_t(pr.models->profile.switch_latency_p99_ms.value * 1e6)),
        gpu_packs_(detail::packs_in_time_order(p_)) {
    for (std::vector<uint32_t>& packs : gpu_packs_) {
      std::erase_if(packs, [&](uint32_t k) { return p_.packs[k].first_op > p_.packs[k].last_op; });
    }
  }

  // Issue times (ns from the step's start) of every pack with ops, for one plan's clocks.
  std::vector<int64_t> of(const Plan& plan) {
    const Issues is = unwrapped(plan.pack_clock_mhz, plan.name);
    std::vector<int64_t> out;
    for (size_t k = 0; k < p_.packs.size(); ++k) {
      if (p_.packs[k].first_op > p_.packs[k].last_op) continue;
      // Within the step: a change issued before it, in the step before; one of a pack that begins a period
      // later (and could be issued past the step's end), in the step after.
      int64_t at = is.at[k] < 0 ? is.at[k] + is.step_ns : is.at[k];
      if (is.step_ns > 0 && at >= is.step_ns) at -= is.step_ns;
      out.push_back(at);
    }
    return out;
  }

  // A plan's clocks with every change that would land out of order dropped: changes take effect in the
  // order issued, so a change issued after the next pack's change (a short pack that lowers the clock,
  // issued late, before one that raises it, issued early) would hold its clock through the next pack.
  // Such a pack keeps the clock before it instead (energy, not time); the issue times are then worked out
  // again from the new clocks' replay, until none is out of order (a few rounds at most).
  std::vector<int> in_order(std::vector<int> clocks, const std::string& name) {
    for (int round = 0; round < kMaxRounds && failed_.ok(); ++round) {
      const Issues is = unwrapped(clocks, name);
      if (!failed_.ok()) break;
      bool moved = false;
      for (const std::vector<uint32_t>& packs : gpu_packs_) {
        const size_t n = packs.size();
        for (size_t i = 0; n >= 2 && i < n; ++i) {
          const uint32_t k = packs[i];
          const int prev = clocks[packs[(i + n - 1) % n]];  // the first pack's: the last one's (steady state)
          if (clocks[k] == prev) continue;
          // The next pack; past one that begins a period later and keeps this clock (its change, a no-op,
          // comes after this one), the pack after it, as without it.
          size_t j = (i + 1) % n;
          while (j != i && clocks[packs[j]] == clocks[k] && detail::begins_a_period_later(p_, packs[j])) j = (j + 1) % n;
          if (j == i) continue;
          const int64_t next = is.at[packs[j]] + (j > i ? 0 : is.step_ns);
          if (is.at[k] > next) {
            clocks[k] = prev;
            moved = true;
          }
        }
      }
      if (pricer_ != nullptr) {
        auto any = detail::any_of_processes(pricer_->comm(), moved, kTagMoved);
        if (!any) failed_ = any.error();
        moved = any && *any;
      }
      if (!moved) break;
    }
    return clocks;
  }

  const Status& failed() const { return failed_; }

 private:
  static constexpr int kMaxRounds = 8;
  static constexpr int kTagMoved = 53;  // over the parts: whether any process moved a change this round

  struct Issues {
    std::vector<int64_t> at;  // per pack with ops: its change's issue time, before wrapping (may be < 0)
    int64_t step_ns = 0;      // the plan's predicted step time
  };

  // A change that sets the clock its GPU has already (the pack before's) is issued no earlier than the pack
  // before's change: issued early, it would be the one that changes the clock, before the pack before.
  Issues unwrapped(const std::vector<int>& clocks, const std::string& name) {
    std::vector<int64_t> tail_end;
    Issues is;
    const std::vector<int64_t> begin = begins_in(clocks, name, tail_end, is.step_ns);
    is.at.assign(p_.packs.size(), 0);
    for (size_t gi = 0; gi < gpu_packs_.size(); ++gi) {
      const std::vector<uint32_t>& packs = gpu_packs_[gi];
      for (size_t i = 0; i < packs.size(); ++i) {
        const uint32_t k = packs[i];
        const uint32_t before = packs[i > 0 ? i - 1 : packs.size() - 1];  // steady state: the last pack's clock
        const bool changes = clocks[k] != clocks[before];
        const int64_t lead = clocks[k] >= clocks[before] ? lat_p99_ : std::max<int64_t>(0, 2 * lat_med_ - lat_p99_);
        int64_t issue = begin[k] - lead;
        // A loop whose GPU tail runs into the next step (Graph::gpu_tail_loop): no change of clock is issued
        // before the step before's tail on this GPU ends, which would run that tail at this step's clock.
        if (changes && !tail_end.empty()) issue = std::max(issue, tail_end[gi]);
        if (!changes && i > 0) issue = std::max(issue, is.at[before]);
        is.at[k] = issue;
      }
      // The first pack's clock is the one the last pack set (the step before's): after that change, and so
      // are the packs that keep it.
      for (size_t i = 0; packs.size() >= 2 && i < packs.size() && clocks[packs[i]] == clocks[packs.back()]; ++i) {
        const int64_t after = i > 0 ? is.at[packs[i - 1]] : is.at[packs.back()] - is.step_ns;
        is.at[packs[i]] = std::max(is.at[packs[i]], after);
      }
    }
    return is;
  }

  // Each pack's begin in a plan's replay: its begin in the trace, moved as much as its first op moved. In a
  // loop whose GPU tail runs into the next step, `tail_end` gets, per GPU, where the step before's last op
  // ends in this step (its end in the replay less the period; 0 where it ends before the step begins).
  std::vector<int64_t> begins_in(const std::vector<int>& clocks, const std::string& name,
                                 std::vector<int64_t>& tail_end, int64_t& step_ns) {
    replay::Timeline tl;
    bool tail_loop = false;
    if (pricer_ != nullptr) {
      replay::ShardTimeline st;
      auto pl = pricer_->price(clocks, name, &st);
      if (!pl) {
        failed_ = pl.error();
        step_ns = 0;
        return std::vector<int64_t>(p_.packs.size(), 0);
      }
      step_ns = pl->time_ns;
      tl = detail::timeline_of(st);
      tail_loop = pricer_->graph().gpu_tail_loop && !pricer_->part().queued_loop;
    } else {
      step_ns = detail::predict_prepared(pr_, x_, clocks, name, &tl).time_ns;
      const graph::Graph& g = pr_.workload->graph;
      tail_loop = g.gpu_tail_loop && g.queued_ops.empty();
    }
    if (tail_loop) {
      tail_end.assign(p_.gpus.size(), 0);
      for (size_t r = 0; r < p_.gpus.size(); ++r) {
        for (NodeId n : p_.gpus[r].ops) tail_end[r] = std::max(tail_end[r], tl.end(n) - tl.makespan_ns() - tl.begin_ns);
      }
    }
    std::vector<int64_t> out(p_.packs.size(), 0);
    for (size_t k = 0; k < p_.packs.size(); ++k) {
      const pack::Pack& pk = p_.packs[k];
      out[k] = pk.begin_ns;
      if (pk.first_op > pk.last_op) continue;
      const NodeId n = p_.gpus[pk.rank.index()].ops[pk.first_op];
      out[k] += (tl.start(n) - tl.begin_ns) - (x_.first_start0[k] - x_.begin0);
      if (detail::begins_a_period_later(p_, uint32_t(k))) out[k] += step_ns;  // a period later
    }
    return out;
  }

  const Problem& pr_;
  const pack::Packing& p_;
  detail::PartPricer* pricer_;
  const std::optional<detail::Prepared> own_;
  const detail::Prepared& x_;
  Status failed_;
  const int64_t lat_med_, lat_p99_;
  std::vector<std::vector<uint32_t>> gpu_packs_;  // each GPU's packs with ops, in the order the GPU meets them
};

// The clocks of a plan for the packs with GPU work (the policy file's packs), in pack order.
std::vector<int> listed_clocks(const pack::Packing& p, const Plan& plan) {
  std::vector<int> out;
  for (size_t k = 0; k < p.packs.size(); ++k) {
    if (p.packs[k].first_op <= p.packs[k].last_op) out.push_back(plan.pack_clock_mhz[k]);
  }
  return out;
}

json predictions(const Solution& s) {
  return {{"default", predicted(s.default_plan)}, {"policy", predicted(s.policy)}};
}

}  // namespace

std::vector<std::vector<int>> clocks_in_issue_order(const Problem& pr, const std::vector<const Plan*>& plans) {
  std::vector<std::vector<int>> out;
  std::optional<IssueTimes> issue_times;
  for (const Plan* plan : plans) {
    if (plan->pack_clock_mhz.size() != pr.packing->packs.size()) {
      out.push_back(plan->pack_clock_mhz);
      continue;
    }
    if (!issue_times) issue_times.emplace(pr);
    out.push_back(issue_times->in_order(plan->pack_clock_mhz, plan->name));
  }
  return out;
}

namespace detail {
std::vector<std::vector<int>> clocks_in_issue_order_part(const Problem& pr, PartPricer& pricer,
                                                         const std::vector<const Plan*>& plans, Status& failed) {
  std::vector<std::vector<int>> out;
  IssueTimes issue_times(pr, &pricer);
  for (const Plan* plan : plans) {
    out.push_back(failed.ok() ? issue_times.in_order(plan->pack_clock_mhz, plan->name) : plan->pack_clock_mhz);
    if (failed.ok() && !issue_times.failed().ok()) failed = issue_times.failed();
  }
  return out;
}
}  // namespace detail

std::vector<int> clocks_in_issue_order(const Problem& pr, const Plan& plan) {
  return std::move(clocks_in_issue_order(pr, std::vector<const Plan*>{&plan}).front());
}

Result<PolicyFile> applied_policy(const Problem& pr, const Solution& s, double max_slowdown) {
  const pack::Packing& p = *pr.packing;
  if (s.policy.pack_clock_mhz.size() != p.packs.size())
    return make_error("policy", fmt::format("{} clocks for {} packs", s.policy.pack_clock_mhz.size(), p.packs.size()));
  IssueTimes issue_times(pr);
  PolicyFile pf;
  pf.device = pr.models->profile.name;
  pf.default_clock_mhz = pr.default_clock_mhz;
  pf.max_slowdown = max_slowdown;
  const std::vector<int64_t> issue = issue_times.of(s.policy);
  for (size_t k = 0; k < p.packs.size(); ++k) {
    const pack::Pack& pk = p.packs[k];
    if (pk.first_op > pk.last_op) continue;
    pf.packs.push_back({pk.rank, pk.first_op, pk.last_op, s.policy.pack_clock_mhz[k], issue[pf.packs.size()]});
  }
  for (const Plan& b : s.baselines) pf.baselines.push_back({b.name, listed_clocks(p, b), issue_times.of(b)});
  // In the file's order (a JSON object's keys, by name), so that a policy applied from memory and one
  // read from its file run the same baselines in the same order.
  std::sort(pf.baselines.begin(), pf.baselines.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  pf.predicted = predictions(s);
  return pf;
}

namespace {
// The policy file's fields that are the same on every process of a run.
json policy_header(const Problem& pr, const Solution& s, double max_slowdown, double reserve) {
  const auto& prof = pr.models->profile;
  json j;
  j["schema"] = "emo-policy/1";
  j["device"] = prof.name;
  j["default_clock_mhz"] = pr.default_clock_mhz;
  j["max_slowdown"] = max_slowdown;
  j["reserve"] = reserve;
  j["switch_latency_ms"] = prof.switch_latency_median_ms.value;
  j["predicted"] = predictions(s);
  return j;
}

// The fields of the problem's GPUs (all of the step's, or one process's): "ranks", "packs" and, per
// baseline in the solution's order, [its listed clocks, its issue times] in "baselines".
json policy_gpus(const graph::Graph& g, const pack::Packing& p, IssueTimes& issue_times, const Solution& s) {
  json ranks = json::array();
  for (const pack::GpuOps& go : p.gpus) {
    json r = {{"rank", g.rank_id(go.rank)}, {"gpu_ops", go.ops.size()}};
    if (auto st = step_start(g, go)) r["step_start"] = std::move(*st);
    ranks.push_back(std::move(r));
  }
  const std::vector<int64_t> issue = issue_times.of(s.policy);
  json packs = json::array();
  for (size_t k = 0; k < p.packs.size(); ++k) {
    const pack::Pack& pk = p.packs[k];
    if (pk.first_op > pk.last_op) continue;
    const pack::GpuOps& go = p.gpus[pk.rank.index()];
    packs.push_back({{"rank", g.rank_id(go.rank)}, {"clock_mhz", s.policy.pack_clock_mhz[k]},
                     {"issue_at_us", double(issue[packs.size()]) / 1e3}, {"first", op_ref(g, go, pk.first_op)},
                     {"last", op_ref(g, go, pk.last_op)}});
  }
  json bl = json::array();
  for (const Plan& b : s.baselines) {
    json issues = json::array();
    for (int64_t t : issue_times.of(b)) issues.push_back(double(t) / 1e3);
    bl.push_back(json::array({listed_clocks(p, b), std::move(issues)}));
  }
  return {{"ranks", std::move(ranks)}, {"packs", std::move(packs)}, {"baselines", std::move(bl)}};
}

// The file from its header and the GPUs' fields of each process, in process order.
json policy_of(json j, const Solution& s, const std::vector<json>& parts) {
  j["ranks"] = json::array();
  j["packs"] = json::array();
  json bl = json::object();
  for (const Plan& b : s.baselines) {
    bl[b.name] = {{"clocks_mhz", json::array()}, {"issue_at_us", json::array()}, {"predicted", predicted(b)}};
  }
  for (const json& part : parts) {
    for (const json& r : part["ranks"]) j["ranks"].push_back(r);
    for (const json& k : part["packs"]) j["packs"].push_back(k);
    for (size_t i = 0; i < s.baselines.size(); ++i) {
      json& b = bl[s.baselines[i].name];
      for (const json& c : part["baselines"][i][0]) b["clocks_mhz"].push_back(c);
      for (const json& t : part["baselines"][i][1]) b["issue_at_us"].push_back(t);
    }
  }
  j["baselines"] = std::move(bl);
  return j;
}

// policy_json_part's message: each process's GPUs' fields.
constexpr int kTagPolicyGpus = 56;
}  // namespace

json policy_json(const Problem& pr, const Solution& s, double max_slowdown, double reserve) {
  IssueTimes issue_times(pr);
  return policy_of(policy_header(pr, s, max_slowdown, reserve), s,
                   {policy_gpus(pr.workload->graph, *pr.packing, issue_times, s)});
}

Result<json> policy_json_part(const Problem& pr, const graph::GraphPart& part, const Solution& s, double max_slowdown,
                              double reserve, dist::Comm& comm) {
  detail::PartPricer pricer(pr, part, comm);
  EMO_RETURN_IF_ERROR(pricer.status());
  IssueTimes issue_times(pr, &pricer);
  const json mine = policy_gpus(part.graph, *pr.packing, issue_times, s);
  EMO_RETURN_IF_ERROR(issue_times.failed());
  auto all = dist::all_gather(comm, kTagPolicyGpus, mine.dump());
  if (!all) return make_error("policy", "the processes' packs: " + all.error().message());
  if (!comm.is_root()) return json();
  std::vector<json> parts;
  for (size_t q = 0; q < all->size(); ++q) {
    json j = json::parse((*all)[q], nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j["baselines"].is_array() || j["baselines"].size() != s.baselines.size())
      return make_error("policy", fmt::format("process {} sent its packs cut short", q));
    parts.push_back(std::move(j));
  }
  return policy_of(policy_header(pr, s, max_slowdown, reserve), s, parts);
}

namespace {

using vt = json::value_t;

// Reads a policy file against a step: each part of the file checked against the trace and the device.
class PolicyReader {
 public:
  PolicyReader(const std::string& path, const analysis::Workload& w, const device::DeviceProfile& profile)
      : path_(path), g_(w.graph), profile_(profile), ops_(pack::gpu_ops_in_index_order(g_)) {}

  Result<PolicyFile> read(const json& j) {
    PolicyFile pf;
    EMO_RETURN_IF_ERROR(header(j, pf));
    EMO_RETURN_IF_ERROR(ranks(j));
    auto packs = field(j, "packs", vt::array, vt::array);
    if (!packs) return packs.error();
    for (size_t k = 0; k < (*packs)->size(); ++k) {
      auto ap = applied_pack((**packs)[k], fmt::format("packs[{}]", k));
      if (!ap) return ap.error();
      pf.packs.push_back(*ap);
    }
    EMO_RETURN_IF_ERROR(disjoint(pf.packs));
    if (auto it = j.find("baselines"); it != j.end() && it->is_object()) EMO_RETURN_IF_ERROR(baselines(*it, pf));
    if (auto it = j.find("predicted"); it != j.end()) pf.predicted = *it;
    return pf;
  }

 private:
  Result<const json*> field(const json& o, const char* k, vt t1, vt t2) const {
    auto it = o.find(k);
    if (it == o.end()) return make_error(path_, fmt::format("missing field '{}'", k));
    if (it->type() != t1 && it->type() != t2) return make_error(path_, fmt::format("field '{}' has the wrong type", k));
    return &*it;
  }

  // schema, device, default clock, max_slowdown.
  Status header(const json& j, PolicyFile& pf) const {
    auto schema = field(j, "schema", vt::string, vt::string);
    if (!schema) return schema.error();
    if ((*schema)->get<std::string>() != "emo-policy/1")
      return make_error(path_, "unknown schema '" + (*schema)->get<std::string>() + "'", "this emo reads emo-policy/1");
    auto dev = field(j, "device", vt::string, vt::string);
    if (!dev) return dev.error();
    pf.device = (*dev)->get<std::string>();
    if (pf.device != profile_.name)
      return make_error(path_, fmt::format("the policy was made for device '{}', not '{}'", pf.device, profile_.name),
                        "optimize again for this device");
    auto dc = field(j, "default_clock_mhz", vt::number_unsigned, vt::number_integer);
    if (!dc) return dc.error();
    pf.default_clock_mhz = (*dc)->get<int>();
    if (auto it = j.find("max_slowdown"); it != j.end()) {
      if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 1))
        return make_error(path_, "max_slowdown: must be a number from 0 to 1 (a fraction: 0.05 allows 5 % more time)");
      pf.max_slowdown = it->get<double>();
    }
    if (auto it = j.find("reserve"); it != j.end()) {
      if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() < 1))
        return make_error(path_, "reserve: must be a number from 0 to below 1 (the part of max_slowdown kept back)");
      pf.reserve = it->get<double>();
    }
    if (auto it = j.find("switch_latency_ms"); it != j.end()) {
      if (!it->is_number() || !(it->get<double>() >= 0 && it->get<double>() <= 1e4))
        return make_error(path_, "switch_latency_ms: must be a number of milliseconds from 0 to 1e4");
    }
    return {};
  }

  // One entry per rank of the trace, each with the trace's count of GPU ops.
  Status ranks(const json& j) const {
    auto ranks = field(j, "ranks", vt::array, vt::array);
    if (!ranks) return ranks.error();
    if ((*ranks)->size() != ops_.size())
      return make_error(path_, fmt::format("the policy has {} ranks, the trace {}", (*ranks)->size(), ops_.size()),
                        "the policy does not belong to this trace");
    for (size_t r = 0; r < ops_.size(); ++r) {
      const json& rj = (**ranks)[r];
      if (!rj.is_object() || !rj.contains("gpu_ops") || !rj["gpu_ops"].is_number_integer() || !rj.contains("rank"))
        return make_error(path_, fmt::format("ranks[{}]: needs 'rank' and 'gpu_ops'", r));
      if (rj["gpu_ops"].get<int64_t>() != int64_t(ops_[r].size()))
        return make_error(path_, fmt::format("rank {}: the policy expects {} GPU ops in the step, the trace has {}",
                                             rj["rank"].dump(), rj["gpu_ops"].get<int64_t>(), ops_[r].size()),
                          "the policy is stale or belongs to another trace; optimize again");
    }
    return {};
  }

  // A pack's first or last op: its index on the rank, which must name the trace's op there.
  Result<uint32_t> op_index(const json& o, size_t rank, const std::string& at) const {
    if (!o.is_object() || !o.contains("index") || !o["index"].is_number_integer() || !o.contains("name"))
      return make_error(path_, at + ": needs index and name");
    const int64_t i = o["index"].get<int64_t>();
    if (i < 0 || i >= int64_t(ops_[rank].size()))
      return make_error(path_, at + fmt::format(": index {} is outside the step's {} ops", i, ops_[rank].size()));
    const std::string_view name = g_.strings.view(g_.name[ops_[rank][size_t(i)]]);
    if (!o["name"].is_string() || o["name"].get<std::string>() != name)
      return make_error(path_, at + fmt::format(": op {} is '{}' in the trace", i, name),
                        "the policy is stale or belongs to another trace; optimize again");
    return uint32_t(i);
  }

  Result<AppliedPack> applied_pack(const json& pj, const std::string& at) const {
    if (!pj.is_object() || !pj.contains("rank") || !pj.contains("clock_mhz") || !pj.contains("first") || !pj.contains("last"))
      return make_error(path_, at + ": needs rank, clock_mhz, first, last");
    AppliedPack ap;
    const int rid = pj["rank"].is_number_integer() ? pj["rank"].get<int>() : -1;
    int ri = -1;
    for (size_t r = 0; r < ops_.size(); ++r) if (g_.rank_id(graph::RankIndex(uint32_t(r))) == rid) ri = int(r);
    if (ri < 0) return make_error(path_, at + fmt::format(": rank {} is not in the trace", pj["rank"].dump()));
    ap.rank = graph::RankIndex(uint32_t(ri));
    if (!pj["clock_mhz"].is_number_integer()) return make_error(path_, at + ": clock_mhz must be an integer");
    ap.clock_mhz = pj["clock_mhz"].get<int>();
    if (!std::binary_search(profile_.sm_clocks.mhz.begin(), profile_.sm_clocks.mhz.end(), ap.clock_mhz))
      return make_error(path_, at + fmt::format(": {} MHz is not a supported clock of {}", ap.clock_mhz, profile_.name));
    auto first = op_index(pj["first"], size_t(ri), at + ".first");
    if (!first) return first.error();
    auto last = op_index(pj["last"], size_t(ri), at + ".last");
    if (!last) return last.error();
    ap.first = *first;
    ap.last = *last;
    if (ap.first > ap.last) return make_error(path_, at + ": first comes after last");
    if (pj.contains("issue_at_us") && pj["issue_at_us"].is_number())
      ap.issue_at_ns = int64_t(std::llround(pj["issue_at_us"].get<double>() * 1e3));
    return ap;
  }

  // Packs of a rank must not overlap (checked pairwise on the first 2000: the optimizer writes disjoint packs).
  Status disjoint(const std::vector<AppliedPack>& packs) const {
    for (size_t a = 1; a < packs.size(); ++a) {
      for (size_t b = 0; b < a; ++b) {
        const auto& x = packs[a];
        const auto& y = packs[b];
        if (x.rank == y.rank && x.first <= y.last && y.first <= x.last)
          return make_error(path_, fmt::format("packs[{}] and packs[{}] overlap", b, a));
      }
      if (a > 2000) break;
    }
    return {};
  }

  // Each baseline's clock (and issue time) per pack.
  Status baselines(const json& all, PolicyFile& pf) const {
    for (auto& [name, b] : all.items()) {
      if (!b.is_object() || !b.contains("clocks_mhz") || !b["clocks_mhz"].is_array()) continue;
      std::vector<int> clocks;
      for (const auto& c : b["clocks_mhz"]) {
        if (!c.is_number_integer()) return make_error(path_, "baselines." + name + ": clocks must be integers");
        clocks.push_back(c.get<int>());
      }
      if (clocks.size() != pf.packs.size())
        return make_error(path_, "baselines." + name + ": one clock per pack expected");
      std::vector<int64_t> issues;
      if (b.contains("issue_at_us") && b["issue_at_us"].is_array() && b["issue_at_us"].size() == clocks.size()) {
        for (const auto& t : b["issue_at_us"]) {
          if (!t.is_number()) return make_error(path_, "baselines." + name + ": issue times must be numbers");
          issues.push_back(int64_t(std::llround(t.get<double>() * 1e3)));
        }
      } else {
        for (const auto& ap : pf.packs) issues.push_back(ap.issue_at_ns);
      }
      pf.baselines.push_back({name, std::move(clocks), std::move(issues)});
    }
    return {};
  }

  const std::string& path_;
  const graph::Graph& g_;
  const device::DeviceProfile& profile_;
  const std::vector<std::vector<NodeId>> ops_;
};

}  // namespace

Result<PolicyFile> read_policy(const std::string& path, const std::string& text, const analysis::Workload& w,
                               const device::DeviceProfile& profile) {
  json j = json::parse(text, nullptr, false);
  const char* note = "expected a policy written by `emo optimize -o`";
  if (j.is_discarded()) return make_error(path, "not valid JSON (NaN and Infinity are not JSON numbers)", note);
  if (!j.is_object()) return make_error(path, "not a JSON object", note);
  return PolicyReader(path, w, profile).read(j);
}

}  // namespace emo::optimize
