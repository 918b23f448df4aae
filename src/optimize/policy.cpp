// The policy file, schema "emo-policy/1" (DESIGN.md §6): packs identified so that a runtime finds them
// again (index, stream, name, occurrence of the first and last op), the clock of each and when to
// issue the change; the predictions; and the baselines' clocks for the same packs, so `emo evaluate`
// can apply them side by side. Reading checks that the file fits the trace and the device.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

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

json predicted(const Plan& p) {
  return json{{"time_us", double(p.time_ns) / 1e3}, {"energy_j", p.energy_j}};
}

int rank_id(const graph::Graph& g, uint32_t r) { return g.rank_ids.empty() ? int(r) : g.rank_ids[r]; }

}  // namespace

json policy_json(const Problem& pr, const Solution& s, double max_slowdown) {
  const graph::Graph& g = pr.workload->graph;
  const pack::Packing& p = *pr.packing;
  const auto& prof = pr.models->profile;
  json j;
  j["schema"] = "emo-policy/1";
  j["device"] = prof.name;
  j["default_clock_mhz"] = pr.default_clock_mhz;
  j["max_slowdown"] = max_slowdown;
  j["switch_latency_ms"] = prof.switch_latency_median_ms.value;
  json ranks = json::array();
  for (const pack::GpuOps& go : p.gpus) ranks.push_back({{"rank", rank_id(g, go.rank)}, {"gpu_ops", go.ops.size()}});
  j["ranks"] = ranks;
  // When to issue each change: the switching latency before the pack starts in the plan's own replay
  // (a slower plan starts later packs later than the trace did: a change issued at the trace's time
  // would lower the clock under the end of the pack before). A change needed right at the step's start
  // is issued near the end of the step before: a negative time wraps around the predicted step time.
  // The latency varies (median/p99): a change that raises the clock is issued a p99 latency ahead, so
  // it is in effect when the pack starts; one that lowers it is issued late (2·median − p99 ahead), so the
  // pack before keeps its higher clock to its end. Either way the slip costs energy, not time.
  const int64_t lat_med = int64_t(prof.switch_latency_median_ms.value * 1e6);
  const int64_t lat_p99 = int64_t(prof.switch_latency_p99_ms.value * 1e6);
  // Each pack's begin in a plan's replay: its begin in the trace, moved as much as its first op moved.
  const detail::Prepared x = detail::prepare(pr);
  auto begins_in = [&](const Plan& plan) {
    replay::Timeline tl;
    detail::predict_prepared(pr, x, plan.pack_clock_mhz, plan.name, &tl);
    std::vector<int64_t> out(p.packs.size(), 0);
    for (size_t k = 0; k < p.packs.size(); ++k) {
      const pack::Pack& pk = p.packs[k];
      out[k] = pk.begin_ns;
      if (pk.first_op > pk.last_op) continue;
      const NodeId n = p.gpus[pk.gpu].ops[pk.first_op];
      out[k] += (tl.start(n) - tl.begin_ns) - (x.first_start0[k] - x.begin0);
    }
    return out;
  };
  // Issue times (ns from the step's start) of every pack with ops, for one plan's clocks.
  auto issue_times = [&](const Plan& plan) {
    const std::vector<int64_t> begin = begins_in(plan);
    std::vector<int> prev_clock(p.gpus.size(), pr.default_clock_mhz);
    for (size_t k = 0; k < p.packs.size(); ++k) {  // steady state: a step starts at the clock its last pack left
      if (p.packs[k].first_op <= p.packs[k].last_op) prev_clock[p.packs[k].gpu] = plan.pack_clock_mhz[k];
    }
    std::vector<int64_t> out;
    for (size_t k = 0; k < p.packs.size(); ++k) {
      const pack::Pack& pk = p.packs[k];
      if (pk.first_op > pk.last_op) continue;  // idle only: keeps the clock it has
      const int clock = plan.pack_clock_mhz[k];
      const int64_t lead = clock >= prev_clock[pk.gpu] ? lat_p99 : std::max<int64_t>(0, 2 * lat_med - lat_p99);
      prev_clock[pk.gpu] = clock;
      int64_t issue = begin[k] - lead;
      if (issue < 0) issue += plan.time_ns;
      out.push_back(issue);
    }
    return out;
  };
  const std::vector<int64_t> issue = issue_times(s.policy);
  json packs = json::array();
  size_t listed = 0;
  for (size_t k = 0; k < p.packs.size(); ++k) {
    const pack::Pack& pk = p.packs[k];
    if (pk.first_op > pk.last_op) continue;
    const pack::GpuOps& go = p.gpus[pk.gpu];
    json e{{"rank", rank_id(g, go.rank)}, {"clock_mhz", s.policy.pack_clock_mhz[k]},
           {"issue_at_us", double(issue[listed++]) / 1e3}, {"first", op_ref(g, go, pk.first_op)},
           {"last", op_ref(g, go, pk.last_op)}};
    packs.push_back(std::move(e));
  }
  j["packs"] = packs;
  j["predicted"] = {{"default", predicted(s.default_plan)}, {"policy", predicted(s.policy)}};
  json bl = json::object();
  for (const Plan& b : s.baselines) {
    json clocks = json::array();
    for (size_t k = 0; k < p.packs.size(); ++k) {
      if (p.packs[k].first_op <= p.packs[k].last_op) clocks.push_back(b.pack_clock_mhz[k]);
    }
    json issues = json::array();
    for (int64_t t : issue_times(b)) issues.push_back(double(t) / 1e3);
    bl[b.name] = {{"clocks_mhz", clocks}, {"issue_at_us", issues}, {"predicted", predicted(b)}};
  }
  j["baselines"] = bl;
  return j;
}

Result<PolicyFile> read_policy(const std::string& path, const std::string& text, const analysis::Workload& w,
                               const device::DeviceProfile& profile) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return make_error(path, "not a JSON object", "expected a policy written by `emo optimize -o`");
  const graph::Graph& g = w.graph;
  auto field = [&](const json& o, const char* k, json::value_t t1, json::value_t t2) -> Result<const json*> {
    auto it = o.find(k);
    if (it == o.end()) return make_error(path, fmt::format("missing field '{}'", k));
    if (it->type() != t1 && it->type() != t2) return make_error(path, fmt::format("field '{}' has the wrong type", k));
    return &*it;
  };
  using vt = json::value_t;
  auto schema = field(j, "schema", vt::string, vt::string);
  if (!schema) return schema.error();
  if ((*schema)->get<std::string>() != "emo-policy/1")
    return make_error(path, "unknown schema '" + (*schema)->get<std::string>() + "'", "this emo reads emo-policy/1");
  auto dev = field(j, "device", vt::string, vt::string);
  if (!dev) return dev.error();
  PolicyFile pf;
  pf.device = (*dev)->get<std::string>();
  if (pf.device != profile.name)
    return make_error(path, fmt::format("the policy was made for device '{}', not '{}'", pf.device, profile.name),
                      "optimize again for this device");
  auto dc = field(j, "default_clock_mhz", vt::number_unsigned, vt::number_integer);
  if (!dc) return dc.error();
  pf.default_clock_mhz = (*dc)->get<int>();
  if (auto it = j.find("max_slowdown"); it != j.end() && it->is_number()) pf.max_slowdown = it->get<double>();
  const std::vector<std::vector<NodeId>> ops = pack::gpu_ops_in_index_order(g);
  auto ranks = field(j, "ranks", vt::array, vt::array);
  if (!ranks) return ranks.error();
  if ((*ranks)->size() != ops.size())
    return make_error(path, fmt::format("the policy has {} ranks, the trace {}", (*ranks)->size(), ops.size()),
                      "the policy does not belong to this trace");
  std::vector<int> rank_index_of;  // rank id -> graph rank index
  for (size_t r = 0; r < ops.size(); ++r) {
    const json& rj = (**ranks)[r];
    if (!rj.is_object() || !rj.contains("gpu_ops") || !rj["gpu_ops"].is_number_integer() || !rj.contains("rank"))
      return make_error(path, fmt::format("ranks[{}]: needs 'rank' and 'gpu_ops'", r));
    if (rj["gpu_ops"].get<int64_t>() != int64_t(ops[r].size()))
      return make_error(path, fmt::format("rank {}: the policy expects {} GPU ops in the step, the trace has {}",
                                          rj["rank"].dump(), rj["gpu_ops"].get<int64_t>(), ops[r].size()),
                        "the policy is stale or belongs to another trace; optimize again");
  }
  auto packs = field(j, "packs", vt::array, vt::array);
  if (!packs) return packs.error();
  for (size_t k = 0; k < (*packs)->size(); ++k) {
    const json& pj = (**packs)[k];
    const std::string at = fmt::format("packs[{}]", k);
    if (!pj.is_object() || !pj.contains("rank") || !pj.contains("clock_mhz") || !pj.contains("first") || !pj.contains("last"))
      return make_error(path, at + ": needs rank, clock_mhz, first, last");
    AppliedPack ap;
    const int rid = pj["rank"].is_number_integer() ? pj["rank"].get<int>() : -1;
    int ri = -1;
    for (size_t r = 0; r < ops.size(); ++r) if (rank_id(g, uint32_t(r)) == rid) ri = int(r);
    if (ri < 0) return make_error(path, at + fmt::format(": rank {} is not in the trace", pj["rank"].dump()));
    ap.rank = uint32_t(ri);
    if (!pj["clock_mhz"].is_number_integer()) return make_error(path, at + ": clock_mhz must be an integer");
    ap.clock_mhz = pj["clock_mhz"].get<int>();
    if (!std::binary_search(profile.sm_clocks.mhz.begin(), profile.sm_clocks.mhz.end(), ap.clock_mhz))
      return make_error(path, at + fmt::format(": {} MHz is not a supported clock of {}", ap.clock_mhz, profile.name));
    for (const char* side : {"first", "last"}) {
      const json& o = pj[side];
      if (!o.is_object() || !o.contains("index") || !o["index"].is_number_integer() || !o.contains("name"))
        return make_error(path, at + "." + side + ": needs index and name");
      const int64_t i = o["index"].get<int64_t>();
      if (i < 0 || i >= int64_t(ops[size_t(ri)].size()))
        return make_error(path, at + "." + side + fmt::format(": index {} is outside the step's {} ops", i, ops[size_t(ri)].size()));
      const std::string_view name = g.strings.view(g.name[ops[size_t(ri)][size_t(i)]]);
      if (!o["name"].is_string() || o["name"].get<std::string>() != name)
        return make_error(path, at + "." + side + fmt::format(": op {} is '{}' in the trace", i, name),
                          "the policy is stale or belongs to another trace; optimize again");
      (std::string_view(side) == "first" ? ap.first : ap.last) = uint32_t(i);
    }
    if (ap.first > ap.last) return make_error(path, at + ": first comes after last");
    if (pj.contains("issue_at_us") && pj["issue_at_us"].is_number())
      ap.issue_at_ns = int64_t(std::llround(pj["issue_at_us"].get<double>() * 1e3));
    pf.packs.push_back(ap);
  }
  // Packs of a rank must not overlap.
  for (size_t a = 1; a < pf.packs.size(); ++a) {
    for (size_t b = 0; b < a; ++b) {
      const auto& x = pf.packs[a];
      const auto& y = pf.packs[b];
      if (x.rank == y.rank && x.first <= y.last && y.first <= x.last)
        return make_error(path, fmt::format("packs[{}] and packs[{}] overlap", b, a));
    }
    if (a > 2000) break;  // quadratic check only where cheap; the optimizer writes disjoint packs
  }
  if (auto it = j.find("baselines"); it != j.end() && it->is_object()) {
    for (auto& [name, b] : it->items()) {
      if (!b.is_object() || !b.contains("clocks_mhz") || !b["clocks_mhz"].is_array()) continue;
      std::vector<int> clocks;
      for (const auto& c : b["clocks_mhz"]) {
        if (!c.is_number_integer()) return make_error(path, "baselines." + name + ": clocks must be integers");
        clocks.push_back(c.get<int>());
      }
      if (clocks.size() != pf.packs.size())
        return make_error(path, "baselines." + name + ": one clock per pack expected");
      std::vector<int64_t> issues;
      if (b.contains("issue_at_us") && b["issue_at_us"].is_array() && b["issue_at_us"].size() == clocks.size()) {
        for (const auto& t : b["issue_at_us"]) {
          if (!t.is_number()) return make_error(path, "baselines." + name + ": issue times must be numbers");
          issues.push_back(int64_t(std::llround(t.get<double>() * 1e3)));
        }
      } else {
        for (const auto& ap : pf.packs) issues.push_back(ap.issue_at_ns);
      }
      pf.baselines.push_back({name, std::move(clocks), std::move(issues)});
    }
  }
  if (auto it = j.find("predicted"); it != j.end()) pf.predicted = *it;
  return pf;
}

}  // namespace emo::optimize
